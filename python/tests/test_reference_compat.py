"""The reference facade (`pulse.sandbox.api.Sandbox`), method by method, through pulsebox.

Each test's docstring says "matches" (the reference's documented behaviour,
as it is) or "differs: ..." (and the option that gives the reference's
behaviour). Each runs on the local server's socket and on `pulsebox run
--events` with `pulsebox request`; test_transports.py covers the remote one.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

import pulsebox
from conftest import make
from pulsebox import (ActionType, LifecycleState, PolicyDecision, PolicyRule, ProcessResult,
                      SandboxPolicy)

AGENT_POLICY = SandboxPolicy(rules=[
    PolicyRule(ActionType.SHELL, "*", PolicyDecision.ALLOW),
    PolicyRule(ActionType.WRITE, "src/*", PolicyDecision.ALLOW),
    PolicyRule(ActionType.DELETE, "src/*", PolicyDecision.ALLOW),
    PolicyRule(ActionType.READ, "private/*", PolicyDecision.DENY),
])


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@pytest.fixture(params=["server", "cli"])
def sandbox(request, workspace) -> pulsebox.Sandbox:
    """On the local server's socket, and on `run --events` + `pulsebox request`."""
    if request.param == "server":
        request.getfixturevalue("local_server")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("print('hi')\n")
    (workspace / "private").mkdir()
    (workspace / "private" / "key").write_text("k\n")
    return make(workspace, policy=AGENT_POLICY, transport=request.param)


def test_constructor(workspace):
    """matches: the reference's arguments by the same names and order; workspace_root resolved.
    differs: backend= takes a name ("native", "remote", "host"), not a ContainerBackend object;
    policy=None leaves pulsebox's default policy (the reference's defaults with SHELL allowed),
    where the reference's default SandboxPolicy() denies SHELL: pass policy=SandboxPolicy() for
    the reference's behaviour."""
    names = list(inspect.signature(pulsebox.Sandbox).parameters)
    assert names[:10] == ["workspace_root", "policy", "allowed_external_reads", "secrets", "limits",
                          "network_policy", "secret_policy", "backend", "audit_log_path",
                          "unsafe_host_execution"]
    sandbox = pulsebox.Sandbox(workspace / "." / "", SandboxPolicy(), [], ["s3cret-value"],
                               pulsebox.ResourcePolicy(), None, None, None, None, False)
    assert sandbox.workspace_root == workspace.resolve()
    with pytest.raises(TypeError):
        pulsebox.Sandbox(workspace, backend=object())
    session = pulsebox.SandboxSession("s1", workspace)
    assert session.session_id == "s1" and session.created_at > 0


def test_initialize(workspace):
    """matches: initialize() is a coroutine that picks the backend and fails secure with
    SandboxUnavailableError when there is none (here: no pulsebox binary).
    differs: never falls back to running on the host, even with unsafe_host_execution=True;
    backend="host" with unsafe_host_execution=True asks for it explicitly."""
    assert inspect.iscoroutinefunction(pulsebox.Sandbox.initialize)
    sandbox = make(workspace)
    run(sandbox.initialize())
    assert sandbox.transport is not None
    missing = pulsebox.Sandbox(workspace, unsafe_host_execution=True, pulsebox_bin="/nonexistent")
    with pytest.raises(pulsebox.SandboxUnavailableError):
        run(missing.initialize())
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="unsafe_host_execution"):
        run(pulsebox.Sandbox(workspace, backend="host").initialize())
    host = pulsebox.Sandbox(workspace, backend="host", unsafe_host_execution=True,
                            allow_weaker=["all"])
    result = run(host.execute_command("echo on-the-host"))
    assert result.stdout == "on-the-host\n" and result.isolation_level == "host_unsafe"
    assert result.enforcement["filesystem"] == "unsupported"


def test_execute_command_initializes_and_returns_a_process_result(sandbox):
    """matches: a coroutine; initializes on first use; a string runs through a shell, a list does
    not; ProcessResult has the reference's fields (plus pulsebox's: enforcement, transaction,
    changes, changes_status, isolation_level, raw)."""
    assert inspect.iscoroutinefunction(pulsebox.Sandbox.execute_command)
    result = run(sandbox.execute_command("echo $((1+2))"))
    assert isinstance(result, ProcessResult) and result.stdout == "3\n" and result.exit_code == 0
    assert run(sandbox.execute_command(["echo", "$((1+2))"])).stdout == "$((1+2))\n"
    for name in ("command", "exit_code", "stdout", "stderr", "duration_ms", "timed_out", "truncated",
                 "pid", "overlay_path", "metrics", "termination_reason"):
        assert hasattr(result, name), name
    assert result.command == "echo $((1+2))" and result.overlay_path is None
    assert result.enforcement and result.isolation_level == "native"


def test_execute_command_walks_the_lifecycle(sandbox):
    """matches: CREATED -> STARTING -> RUNNING -> COMPLETING -> CLEANING -> FINALIZED, and
    FAILED instead of COMPLETING for a non-zero exit."""
    run(sandbox.execute_command("true"))
    moves = [new for _, _, new in sandbox.last_execution.history]
    assert moves == [LifecycleState.STARTING, LifecycleState.RUNNING, LifecycleState.COMPLETING,
                     LifecycleState.CLEANING, LifecycleState.FINALIZED]
    run(sandbox.execute_command("exit 1"))
    assert LifecycleState.FAILED in [new for _, _, new in sandbox.last_execution.history]


def test_execute_command_policy_denied_shell(sandbox):
    """matches: a DENY of SHELL returns exit_code -1 and stderr "Policy denied shell execution."
    (shell_denied="raise" raises a PermissionError instead)."""
    sandbox.policy = SandboxPolicy()
    result = run(sandbox.execute_command("echo hi"))
    assert (result.exit_code, result.stdout, result.stderr) == (-1, "", "Policy denied shell execution.")


def test_execute_command_keeps_changes_for_review(sandbox, workspace):
    """differs: the reference commits a run's changes to the workspace at once; pulsebox keeps them
    as a transaction (result.transaction) to preview and commit. changes="commit" gives the
    reference's behaviour (binary files, modes and deletions intact, which the reference loses)."""
    result = run(sandbox.execute_command("echo changed > src/main.py"))
    assert result.transaction and (workspace / "src" / "main.py").read_text() == "print('hi')\n"
    sandbox.changes = "commit"
    run(sandbox.execute_command("printf '\\0\\1' > src/bin; rm src/main.py"))
    assert (workspace / "src" / "bin").read_bytes() == b"\0\1"
    assert not (workspace / "src" / "main.py").exists()


def test_execute_command_cwd_and_env(sandbox, workspace):
    """matches: cwd inside the workspace (relative or absolute) and env for the command.
    differs: a cwd outside the workspace raises SandboxSecurityError (the reference's path
    validator raises its own error class)."""
    assert run(sandbox.execute_command("pwd", cwd="src")).stdout == "/workspace/src\n"
    assert run(sandbox.execute_command("pwd", cwd=workspace / "src")).stdout == "/workspace/src\n"
    assert run(sandbox.execute_command("echo $GREETING", env={"GREETING": "hej"})).stdout == "hej\n"
    with pytest.raises(pulsebox.SandboxSecurityError):
        run(sandbox.execute_command("pwd", cwd="/etc"))


def test_execute_command_execution_id(sandbox):
    """matches: execution_id names the run (its id in the result, events and audit records)."""
    result = run(sandbox.execute_command("true", execution_id="agent-step-7"))
    assert result.run_id == "agent-step-7"
    assert run(sandbox.execute_command("true")).run_id.startswith("py-")


def test_execute_command_timeout(sandbox):
    """matches: limits.wall_time_seconds ends the run: timed_out, termination_reason "timeout"."""
    sandbox.limits = pulsebox.ResourcePolicy(wall_time_seconds=0.5)
    sandbox._limits_explicit = True
    result = run(sandbox.execute_command(["sleep", "5"]))
    assert result.timed_out and result.termination_reason == "timeout"
    assert result.duration_ms < 4000


def test_execute_command_scrubs_registered_secrets(sandbox):
    """matches: values of secrets=[...] are redacted from stdout and stderr as [REDACTED_SECRET].
    differs: they are never given to the command (pass them with secret_policy to do that)."""
    sandbox.scrubber = pulsebox.SecretScrubber(["correct-horse-battery"])
    result = run(sandbox.execute_command("echo correct-horse-battery >&2"))
    assert result.stderr == "[REDACTED_SECRET]\n"


def test_execute_command_network_denied_by_default(sandbox):
    """matches: without a network policy the command has no network (DENY_ALL)."""
    result = run(sandbox.execute_command("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"))
    assert result.stdout.split() == ["lo"]


def test_read_file(sandbox, workspace, scratch):
    """matches: reads a workspace file through the READ policy (DENY raises PermissionError),
    scrubbed of registered secrets; a path outside the workspace is refused, except under
    allowed_external_reads."""
    assert sandbox.read_file("src/main.py") == "print('hi')\n"
    assert sandbox.read_file(str(workspace / "src" / "main.py")) == "print('hi')\n"
    with pytest.raises(PermissionError):
        sandbox.read_file("private/key")
    outside = scratch / "outside.txt"
    outside.write_text("shared notes\n")
    with pytest.raises(pulsebox.SandboxSecurityError):
        sandbox.read_file(str(outside))
    sandbox.allowed_external_reads = [scratch.resolve()]
    assert sandbox.read_file(str(outside)) == "shared notes\n"


def test_create_transaction(sandbox):
    """matches: returns a transaction object with transaction_id (pulsebox's `tx-...`)."""
    tx = sandbox.create_transaction()
    assert tx.transaction_id.startswith("tx-") and tx.staged_changes == []


def test_stage_write(sandbox, workspace):
    """matches: the write is staged, not applied; a DENY raises PermissionError; content holding a
    registered secret raises SandboxSecurityError(operation="stage_write", path=...)."""
    tx = sandbox.create_transaction()
    sandbox.stage_write(tx, "src/new.py", "x = 1\n")
    assert not (workspace / "src" / "new.py").exists()
    with pytest.raises(PermissionError):
        sandbox.stage_write(tx, "README", "no\n")
    sandbox.scrubber = pulsebox.SecretScrubber(["tok-abcdef123"])
    with pytest.raises(pulsebox.SandboxSecurityError) as caught:
        sandbox.stage_write(tx, "src/cfg.py", "TOKEN = 'tok-abcdef123'\n")
    assert (caught.value.operation, caught.value.path) == ("stage_write", "src/cfg.py")


def test_stage_delete(sandbox, workspace):
    """matches: the deletion is staged, not applied; a DENY raises PermissionError."""
    tx = sandbox.create_transaction()
    sandbox.stage_delete(tx, "src/main.py")
    assert (workspace / "src" / "main.py").exists()
    with pytest.raises(PermissionError):
        sandbox.stage_delete(tx, "a.txt")


def test_preview_changes(sandbox):
    """matches: a unified diff with a/ and b/ prefixes."""
    tx = run(sandbox.execute_command("echo changed > src/main.py")).transaction
    diff = sandbox.preview_changes(tx)
    assert "--- a/src/main.py" in diff and "+++ b/src/main.py" in diff and "+changed" in diff


def test_commit_transaction(sandbox, workspace):
    """matches: applies the staged changes and returns the paths; a file changed on the host since
    it was staged raises SandboxConcurrentModificationError and nothing is applied."""
    tx = run(sandbox.execute_command("echo changed > src/main.py; echo n > src/n.py")).transaction
    assert sorted(sandbox.commit_transaction(tx)) == ["src/main.py", "src/n.py"]
    assert (workspace / "src" / "main.py").read_text() == "changed\n"
    tx = run(sandbox.execute_command("echo again > src/main.py")).transaction
    (workspace / "src" / "main.py").write_text("edited by the user\n")
    with pytest.raises(pulsebox.SandboxConcurrentModificationError) as caught:
        sandbox.commit_transaction(tx)
    assert caught.value.path == "src/main.py"
    assert (workspace / "src" / "main.py").read_text() == "edited by the user\n"


def test_stage_then_commit(sandbox, workspace):
    """matches: create_transaction, stage_write, stage_delete, commit_transaction together."""
    tx = sandbox.create_transaction()
    sandbox.stage_write(tx, "src/new.py", "x = 1\n")
    sandbox.stage_delete(tx, "src/main.py")
    assert sorted(sandbox.commit_transaction(tx)) == ["src/main.py", "src/new.py"]
    assert (workspace / "src" / "new.py").read_text() == "x = 1\n"
    assert not (workspace / "src" / "main.py").exists()


def test_discard_transaction(sandbox, workspace):
    """matches: the transaction's changes are dropped; the workspace is untouched."""
    tx = run(sandbox.execute_command("echo changed > src/main.py")).transaction
    sandbox.discard_transaction(tx)
    assert all(t["id"] != tx for t in sandbox.list_transactions())
    assert (workspace / "src" / "main.py").read_text() == "print('hi')\n"


def test_read_file_outside_stays_under_allowed_external_reads(sandbox, scratch):
    """matches the reference's path validator: `..` and links cannot leave an allowed external
    path (each component is opened without following links, so a link swapped in is refused)."""
    allowed = scratch / "shared"
    allowed.mkdir()
    (allowed / "sub").mkdir()
    (allowed / "sub" / "notes.txt").write_text("notes\n")
    (scratch / "private.txt").write_text("not yours\n")
    (allowed / "link.txt").symlink_to(scratch / "private.txt")
    (allowed / "dirlink").symlink_to(scratch)
    sandbox.allowed_external_reads = [allowed.resolve()]
    assert sandbox.read_file(str(allowed / "sub" / "notes.txt")) == "notes\n"
    for name in (f"{allowed}/../private.txt", f"{allowed}/sub/../../private.txt",
                 f"{allowed}/link.txt", f"{allowed}/dirlink/private.txt"):
        with pytest.raises(pulsebox.SandboxSecurityError):
            sandbox.read_file(name)
