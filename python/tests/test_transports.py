"""Runs through each transport: `run --events`, the local server's socket, a remote server;
streaming, callbacks, approvals, cancellation, sessions, the sync wrapper, errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
import uuid

import pytest

import pulsebox
from conftest import make, processes_with_arg
from pulsebox import PolicyDecision, PolicyRule, SandboxPolicy
from pulsebox.transport_socket import SocketTransport

ALLOW_SHELL = [PolicyRule("shell", "*", PolicyDecision.ALLOW)]


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@pytest.fixture(params=["cli", "server"])
def any_transport(request, workspace):
    """A sandbox on each local transport (the server one started for the test)."""
    if request.param == "server":
        server = request.getfixturevalue("local_server")
        sandbox = make(workspace, transport="server")
        assert server.running()
    else:
        sandbox = make(workspace, transport="cli")
    return sandbox


def test_a_run_returns_its_output_status_and_changes_kept_for_review(any_transport, workspace):
    result = run(any_transport.execute_command("echo out; echo err >&2; echo new > b.txt; exit 3"))
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.transaction and result.transaction.startswith("tx-")
    assert result.changes == [{"kind": "added", "path": "b.txt"}]
    assert result.changes_status["status"] == "staged"
    assert result.isolation_level == "native" and result.enforcement["filesystem"] == "strongly_enforced"
    assert result.metrics is not None and result.metrics.elapsed_ms > 0
    assert not (workspace / "b.txt").exists()  # kept for review, not written


def test_a_list_runs_without_a_shell(any_transport):
    result = run(any_transport.execute_command(["echo", "$HOME", "a  b"]))
    assert result.stdout == "$HOME a  b\n"
    assert result.raw["argv"] == ["echo", "$HOME", "a  b"]


def test_changes_commit_writes_the_workspace(workspace, any_transport):
    any_transport.changes = "commit"
    result = run(any_transport.execute_command("echo new > c.txt"))
    assert result.changes_status["status"] == "committed"
    assert (workspace / "c.txt").read_text() == "new\n"


def test_stream_yields_events_in_order_and_on_output_sees_each_chunk(any_transport):
    seen: list[tuple[str, str]] = []

    async def go():
        events = []
        async for event in any_transport.stream("echo one; echo two >&2",
                                                on_output=lambda s, t: seen.append((s, t))):
            events.append(event["event"])
        return events

    kinds = [kind for kind in run(go()) if kind != "warning"]
    assert kinds[0] == "started" and kinds[-1] == "result" and "output" in kinds
    assert "".join(t for s, t in seen if s == "stdout") == "one\n"
    assert "".join(t for s, t in seen if s == "stderr") == "two\n"


def test_env_and_secret_values_stay_off_the_cli_command_line(workspace, monkeypatch):
    """Every user of the machine may read a process's command line: `run --events` gets env
    values in a 0600 --env-file and secrets through its environment; the files are gone after."""
    monkeypatch.setenv("PY_CLI_SECRET", "secret-value-5678")
    sandbox = make(workspace, transport="cli", secret_policy=pulsebox.SecretPolicy(
        pulsebox.SecretMode.ALLOW_EXPLICIT, ["PY_CLI_SECRET"]), policy=SandboxPolicy(
        rules=[*ALLOW_SHELL, PolicyRule("secrets", "*", PolicyDecision.ALLOW)]))
    seen = {}

    async def go():
        # The run waits until the test has looked (leaving the loop cancels it), so pulsebox
        # is alive when its command line is read, however busy the machine.
        events = sandbox.stream(
            # (the padding pushes the output past the tail the scrubber holds back while a
            # registered secret could still be completed)
            'echo "$PLAIN"; test -n "$PY_CLI_SECRET" && echo has-secret; printf "%64s\\n" "";'
            ' exec sleep 30',
            env={"PLAIN": "env-value-1234"})
        async with contextlib.aclosing(events):
            async for event in events:
                if event["event"] == "started":
                    seen["cmdline"] = open(f"/proc/{sandbox.last_run.pid}/cmdline", "rb").read()
                    seen["files"] = list(sandbox.last_run._temps)
                if event["event"] == "output":
                    seen["output"] = seen.get("output", "") + event["data"]
                    if "has-secret" in seen["output"]:
                        break

    run(go())
    assert "env-value-1234" in seen["output"] and "has-secret" in seen["output"]
    assert b"env-value-1234" not in seen["cmdline"] and b"secret-value-5678" not in seen["cmdline"]
    assert b"--env-file" in seen["cmdline"] and seen["files"]
    assert not any(os.path.exists(path) for path in seen["files"])


def test_an_async_on_output_callback_is_awaited(workspace):
    chunks: list[str] = []

    async def collect(stream: str, text: str) -> None:
        await asyncio.sleep(0)
        chunks.append(text)

    sandbox = make(workspace, transport="cli", on_output=collect)
    result = run(sandbox.execute_command("echo hello"))
    assert "".join(chunks) == "hello\n" == result.stdout


def test_registered_secrets_are_scrubbed_from_output(any_transport):
    any_transport.scrubber = pulsebox.SecretScrubber(["hunter2-secret"])
    result = run(any_transport.execute_command("echo pw=hunter2-secret"))
    assert "hunter2" not in result.stdout and "[REDACTED_SECRET]" in result.stdout


def test_explicit_secrets_reach_the_command_and_are_scrubbed(any_transport, monkeypatch):
    monkeypatch.setenv("PY_CLIENT_TOKEN", "tok-1234567890")
    any_transport.secret_policy = pulsebox.SecretPolicy(pulsebox.SecretMode.ALLOW_EXPLICIT,
                                                        ["PY_CLIENT_TOKEN"])
    any_transport.policy = SandboxPolicy(rules=[*ALLOW_SHELL,
                                                PolicyRule("secrets", "*", PolicyDecision.ALLOW)])
    result = run(any_transport.execute_command(
        'test "$PY_CLIENT_TOKEN" = tok-1234567890 && echo "$PY_CLIENT_TOKEN"'))
    assert result.exit_code == 0, result.stderr
    assert "tok-1234567890" not in result.stdout


def test_a_policy_deny_of_shell_is_the_references_result_or_a_permission_error(any_transport):
    any_transport.policy = SandboxPolicy()  # the reference's defaults: SHELL denied
    result = run(any_transport.execute_command("echo never"))
    assert (result.exit_code, result.stdout, result.stderr) == (-1, "", "Policy denied shell execution.")
    any_transport.shell_denied = "raise"
    with pytest.raises(PermissionError) as caught:
        run(any_transport.execute_command("echo never"))
    assert isinstance(caught.value, pulsebox.SandboxPermissionError)
    assert caught.value.code == "policy_denied"


def test_a_denial_of_network_is_an_error_not_the_shell_result(any_transport):
    """The reference's policy defaults deny NETWORK: asking for a network with them is refused
    by name (policy_denied), never reported as "Policy denied shell execution."."""
    any_transport.policy = SandboxPolicy(rules=ALLOW_SHELL)
    any_transport.network_policy = pulsebox.NetworkPolicy(pulsebox.NetworkMode.LOCALHOST_ONLY)
    with pytest.raises(pulsebox.SandboxPermissionError, match="network"):
        run(any_transport.execute_command("true"))


def test_an_unknown_field_is_refused_by_name(local_server, workspace):
    async def go():
        channel = await SocketTransport(local_server.json_socket).open_run(
            {"v": 1, "request": "run", "argv": ["true"], "workspace": str(workspace), "colour": 1})
        try:
            return [event async for event in channel.events()]
        finally:
            await channel.close()

    events = run(go())
    assert events[-1]["event"] == "error"
    error = pulsebox.error_from_protocol(events[-1]["error"])
    assert isinstance(error, pulsebox.SandboxConfigError) and "colour" in str(error)


def test_policies_pulsebox_cannot_honour_are_refused_before_any_run(workspace):
    sandbox = make(workspace, transport="cli",
                   secret_policy=pulsebox.SecretPolicy(pulsebox.SecretMode.ALLOW_ALL))
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="ALLOW_EXPLICIT"):
        run(sandbox.execute_command("true"))
    sandbox = pulsebox.Sandbox(workspace, transport="cli",
                               limits=pulsebox.ResourcePolicy(max_open_files=16))
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="max_open_files"):
        run(sandbox.execute_command("true"))


def test_an_invalid_field_names_itself(any_transport):
    with pytest.raises(pulsebox.SandboxConfigError) as caught:
        run(any_transport.execute_command("true", cwd="../outside"))
    assert (caught.value.code, caught.value.field) == ("invalid_field", "cwd")
    assert isinstance(caught.value, ValueError) and ".." in str(caught.value)


ASK_ECHO = SandboxPolicy(rules=[PolicyRule("shell", "*approve-me*", PolicyDecision.ASK), *ALLOW_SHELL])


@pytest.mark.parametrize("answer", [True, False])
def test_an_ask_goes_to_the_approver_on_the_server_transport(local_server, workspace, answer):
    asked: list[dict] = []

    async def approver(request: dict) -> bool:
        asked.append(request)
        return answer

    sandbox = make(workspace, transport="server", policy=ASK_ECHO, approver=approver,
                   shell_denied="raise")
    if answer:
        result = run(sandbox.execute_command(["echo", "approve-me"]))
        assert result.stdout == "approve-me\n"
    else:
        with pytest.raises(pulsebox.SandboxPermissionError):
            run(sandbox.execute_command(["echo", "approve-me"]))
    assert len(asked) == 1 and asked[0]["action"] == "shell" and "approve-me" in asked[0]["target"]


def test_a_sync_approver_runs_off_the_event_loop(local_server, workspace):
    """A synchronous approver may block (on a person): it runs in a thread, not the loop's."""
    threads = []

    def approver(request: dict) -> bool:
        threads.append(threading.current_thread())
        return True

    sandbox = make(workspace, transport="server", policy=ASK_ECHO, approver=approver)
    assert run(sandbox.execute_command(["echo", "approve-me"])).exit_code == 0
    assert threads and threads[0] is not threading.main_thread()


def test_an_approver_on_the_cli_transport_is_refused_not_ignored(workspace):
    sandbox = make(workspace, transport="cli", policy=ASK_ECHO, approver=lambda request: True)
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="server transport"):
        run(sandbox.execute_command(["echo", "approve-me"]))


def test_approvals_allow_decides_asks_up_front_on_the_cli_transport(workspace):
    sandbox = make(workspace, transport="cli", policy=ASK_ECHO, approvals="allow")
    assert run(sandbox.execute_command(["echo", "approve-me"])).stdout == "approve-me\n"
    sandbox = make(workspace, transport="cli", policy=ASK_ECHO)  # default: deny
    assert run(sandbox.execute_command(["echo", "approve-me"])).exit_code == -1


def test_cancelling_a_run_ends_it_and_its_sandbox(any_transport):
    marker = f"{30 + int(uuid.uuid4().int % 1000) / 1000:.3f}"  # a unique `sleep` argument

    async def go():
        task = asyncio.create_task(any_transport.execute_command(["sleep", marker]))
        deadline = time.monotonic() + 20
        # The command running, and the client past its "started" event: a
        # cancel before that event is a run that failed to start.
        def running():
            execution = getattr(any_transport, "last_execution", None)
            return (processes_with_arg(marker) and execution is not None
                    and execution.state == pulsebox.LifecycleState.RUNNING)
        while not running():
            assert time.monotonic() < deadline, "the sandbox never started"
            await asyncio.sleep(0.02)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    took = run(go())
    assert took < 10
    deadline = time.monotonic() + 10
    while processes_with_arg(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_with_arg(marker) == []
    moves = [new for _, _, new in any_transport.last_execution.history]
    assert moves[-3:] == [pulsebox.LifecycleState.STOPPING, pulsebox.LifecycleState.CLEANING,
                          pulsebox.LifecycleState.FINALIZED]
    # The workspace's audit log says so (the server may write it a moment after the close).
    log = any_transport.workspace_root / ".agent" / "logs" / "audit.jsonl"

    def cancelled_records() -> list[dict]:
        records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [r for r in records if r["action"] == "shell" and "cancelled" in (r["detail"] or "")]

    deadline = time.monotonic() + 10
    while not cancelled_records() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r["target"] for r in cancelled_records()] == [f"sleep {marker}"]


def test_a_session_sees_its_earlier_runs_changes(any_transport, workspace):
    any_transport.session = f"py-{uuid.uuid4().hex[:8]}"
    first = run(any_transport.execute_command("echo kept > s.txt"))
    assert first.changes_status["status"] == "session"
    second = run(any_transport.execute_command("cat s.txt"))
    assert second.stdout == "kept\n"
    assert not (workspace / "s.txt").exists()
    other = run(any_transport.execute_command("cat s.txt", session="another"))
    assert other.exit_code != 0


def test_the_sync_wrapper_runs_and_streams(workspace):
    with pulsebox.SyncSandbox(workspace, transport="cli", allow_weaker=["limits"]) as sandbox:
        assert sandbox.execute_command("echo sync").stdout == "sync\n"
        kinds = [event["event"] for event in sandbox.stream(["echo", "x"]) if event["event"] != "warning"]
        assert kinds[0] == "started" and kinds[-1] == "result"
        sandbox.policy = SandboxPolicy()  # reaches the Sandbox: SHELL denied
        assert sandbox.execute_command("echo no").exit_code == -1
        assert sandbox.read_file("a.txt") == "original\n"


def test_auto_uses_a_running_server_and_start_server_starts_one(scratch, monkeypatch, workspace):
    monkeypatch.setenv("PULSEBOX_STATE_DIR", str(scratch / "os"))
    sandbox = make(workspace)
    run(sandbox.initialize())
    assert sandbox.transport.name == "cli"  # nothing runs: no server is started behind our back
    sandbox = make(workspace, start_server=True)
    try:
        run(sandbox.initialize())
        assert sandbox.transport.name == "server" and sandbox.server.pid
        assert run(sandbox.execute_command("echo via-server")).stdout == "via-server\n"
        assert make(workspace).transport is None
        again = make(workspace)
        run(again.initialize())
        assert again.transport.name == "server" and again.server.pid is None  # found, not started
    finally:
        run(sandbox.close())
    assert sandbox.server._proc.poll() is not None


def test_the_server_transport_without_a_server_is_unavailable(scratch, monkeypatch, workspace):
    monkeypatch.setenv("PULSEBOX_STATE_DIR", str(scratch / "none"))
    with pytest.raises(pulsebox.SandboxUnavailableError, match="start_server=True"):
        run(make(workspace, transport="server").initialize())


def test_backend_native_stays_local_with_a_remote_in_the_environment(workspace, monkeypatch):
    monkeypatch.setenv("PULSE_REMOTE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("PULSE_REMOTE_TOKEN", "x" * 40)
    sandbox = make(workspace, backend="native")
    result = run(sandbox.execute_command("true"))
    assert sandbox.transport.name == "cli" and result.isolation_level == "native"
    with pytest.raises(pulsebox.SandboxConfigError, match="backend"):
        pulsebox.Sandbox(workspace, backend="docker")
    with pytest.raises(pulsebox.SandboxConfigError, match="transport"):
        run(pulsebox.Sandbox(workspace, backend="host", unsafe_host_execution=True,
                             transport="server").initialize())


def test_a_remote_named_by_the_environment_falls_back_as_the_references(workspace, monkeypatch,
                                                                        free_tcp_port):
    """Nobody answers at PULSE_REMOTE_URL: the run is native (the CLI says so on stderr and in
    the audit log), as the reference falls back to a local engine; remote_url= or
    backend="remote" asks for the remote only, and that is an error."""
    url = f"http://127.0.0.1:{free_tcp_port}"
    monkeypatch.setenv("PULSE_REMOTE_URL", url)
    monkeypatch.setenv("PULSE_REMOTE_TOKEN", "x" * 40)
    sandbox = make(workspace)
    result = run(sandbox.execute_command("echo here"))
    assert sandbox.transport.name == "remote" and result.isolation_level == "native"
    assert result.stdout == "here\n"
    for strict in (make(workspace, backend="remote"), make(workspace, remote_url=url)):
        with pytest.raises(pulsebox.SandboxError, match="does not answer"):
            run(strict.execute_command("true"))


def test_a_missing_binary_is_unavailable(workspace):
    sandbox = pulsebox.Sandbox(workspace, pulsebox_bin="/nonexistent/pulsebox")
    with pytest.raises(pulsebox.SandboxUnavailableError, match="pulsebox_bin"):
        run(sandbox.initialize())


@pytest.mark.parametrize("remote_server", ["tcp", "unix", "tls"], indirect=True)
def test_a_remote_server_runs_the_command_and_its_changes_come_back(remote_server, workspace):
    url, token, ca = remote_server
    sandbox = make(workspace, remote_url=url, remote_token=token, remote_ca=ca)
    run(sandbox.initialize())
    assert sandbox.transport.name == "remote"
    assert sandbox.transport.http_get("health")["status"] == "ok"
    result = run(sandbox.execute_command("cat a.txt; echo remote > r.txt"))
    assert result.exit_code == 0 and result.stdout == "original\n"
    assert result.isolation_level == "remote_container"
    assert result.raw["remote"]["url"] == url
    assert result.changes == [{"kind": "added", "path": "r.txt"}] and result.transaction
    # The changes came back as a local transaction: reviewed and committed here.
    assert "+remote" in sandbox.preview_changes(result.transaction)
    assert sandbox.commit_transaction(result.transaction) == ["r.txt"]
    assert (workspace / "r.txt").read_text() == "remote\n"


def test_remote_from_the_environment_and_a_wrong_token(remote_server, workspace, monkeypatch):
    url, token, _ = remote_server
    monkeypatch.setenv("PULSE_REMOTE_URL", url)
    monkeypatch.setenv("PULSE_REMOTE_TOKEN", "wrong-" + token)
    sandbox = make(workspace)
    run(sandbox.initialize())
    assert sandbox.transport.name == "remote"
    with pytest.raises(pulsebox.SandboxForbiddenError):
        sandbox.transport.http_get("health")
    with pytest.raises(pulsebox.SandboxError):
        run(sandbox.execute_command("true"))


def test_run_after_review_request(local_server, workspace):
    """A run after a review request on the same workspace, both through the server's socket
    (the review request keys the audit log with the server's key; the run must find it too)."""
    sandbox = make(workspace, transport="server")
    assert run(sandbox.execute_command("true")).exit_code == 0
    assert sandbox.read_file("a.txt") == "original\n"
    assert run(sandbox.execute_command("true")).exit_code == 0


def test_a_policy_the_host_cannot_enforce_strongly_is_refused(any_transport):
    """NETWORK ALLOW_ALL is at best partially enforced by the native backend (a sandbox with the
    host's network can reach what the host reaches): refused unless allow_weaker names network."""
    any_transport.network_policy = pulsebox.NetworkPolicy(pulsebox.NetworkMode.ALLOW_ALL)
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError) as caught:
        run(any_transport.execute_command("true"))
    assert caught.value.code == "unsupported_policy" and "network" in str(caught.value)
