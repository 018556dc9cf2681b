"""The Sandbox facade: the reference's API over the pulsebox protocol."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import inspect
import os
import stat
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Union

from .errors import (SandboxConfigError, SandboxError,
                     SandboxPermissionError, SandboxSecurityError, SandboxUnavailableError,
                     SandboxUnsupportedPolicyError,
                     error_from_protocol)
from .lifecycle import LifecycleState, SandboxExecution
from .limits import ResourcePolicy
from .locate import pulsebox_binary
from .network import NetworkPolicy
from .policy import ActionType, PolicyDecision, SandboxPolicy
from .process import ProcessResult, event_text, result_from_run
from .secrets import SecretPolicy, SecretScrubber
from .transport_cli import CliTransport
from .transport_http import RemoteTransport, remote_from_env
from .transport_socket import LocalServer, SocketTransport

MAX_FILE_SIZE = 50 << 20
SHELL_DENIED = "Policy denied shell execution."

Approver = Callable[[dict[str, Any]], Union[bool, Awaitable[bool]]]
OutputCallback = Callable[[str, str], Union[None, Awaitable[None]]]


@dataclass
class SandboxSession:
    """The reference's record of an agent session (pulsebox's sessions are named: `session=`)."""

    session_id: str
    workspace_root: Path
    created_at: float = field(default_factory=time.time)


@dataclass
class Transaction:
    """A transaction of the workspace (`pulsebox changes`); the reference's CoWTransaction."""

    transaction_id: str
    staged_changes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.transaction_id


def _tx_id(tx: Transaction | str) -> str:
    return tx.transaction_id if isinstance(tx, Transaction) else str(tx)


class Sandbox:
    """Runs commands in pulsebox sandboxes; the reference's facade by the same names.

    Beyond the reference's arguments (all keyword-only): `pulsebox_bin`,
    `transport` ("auto", "server", "cli", "remote"), `start_server`,
    `remote_url`/`remote_token`/`remote_ca`, `changes` ("keep", "commit",
    "discard"), `allow_weaker`, `approvals` ("deny", "allow"), `approver`,
    `session`, `on_output`, `shell_denied` ("result" or "raise").
    """

    def __init__(
        self,
        workspace_root: Path | str,
        policy: SandboxPolicy | None = None,
        allowed_external_reads: list[Path] | None = None,
        secrets: list[str] | None = None,
        limits: ResourcePolicy | None = None,
        network_policy: NetworkPolicy | None = None,
        secret_policy: SecretPolicy | None = None,
        backend: str | None = None,
        audit_log_path: Path | str | None = None,
        unsafe_host_execution: bool = False,
        *,
        pulsebox_bin: str | os.PathLike[str] | None = None,
        transport: str = "auto",
        start_server: bool = False,
        remote_url: str | None = None,
        remote_token: str | None = None,
        remote_ca: str | None = None,
        changes: str = "keep",
        allow_weaker: Iterable[str] = (),
        approvals: str = "deny",
        approver: Approver | None = None,
        session: str | None = None,
        on_output: OutputCallback | None = None,
        shell_denied: str = "result",
    ) -> None:
        self.workspace_root = Path(workspace_root).resolve()
        self.policy = policy
        self.allowed_external_reads = [Path(p).resolve() for p in allowed_external_reads or []]
        self.scrubber = SecretScrubber(secrets)
        self.limits = limits or ResourcePolicy()
        self._limits_explicit = limits is not None
        self.network_policy = network_policy
        self.secret_policy = secret_policy
        if backend is not None and not isinstance(backend, str):
            raise TypeError("backend: pulsebox takes a backend name (\"native\", \"remote\", \"host\")")
        if backend not in (None, "native", "remote", "host"):
            raise SandboxConfigError(f"backend={backend!r}: expected \"native\", \"remote\" or \"host\"",
                                     code="invalid_field", field="backend")
        self.backend = backend
        self.audit_log_path = Path(audit_log_path) if audit_log_path else None
        self._unsafe_host_execution = unsafe_host_execution
        self.pulsebox_bin = pulsebox_bin
        self.transport_choice = transport
        self.start_server = start_server
        self.remote_url, self.remote_token, self.remote_ca = remote_url, remote_token, remote_ca
        for name, value, allowed in (("changes", changes, ("keep", "commit", "discard")),
                                     ("approvals", approvals, ("deny", "allow")),
                                     ("shell_denied", shell_denied, ("result", "raise")),
                                     ("transport", transport, ("auto", "server", "cli", "remote"))):
            if value not in allowed:
                raise SandboxConfigError(f"{name}={value!r}: expected one of {', '.join(allowed)}",
                                         code="invalid_field", field=name)
        self.changes = changes
        self.allow_weaker = list(allow_weaker)
        self.approvals = approvals
        self.approver = approver
        self.session = session
        self.on_output = on_output
        self.shell_denied = shell_denied
        self.transport: CliTransport | SocketTransport | None = None
        self.server: LocalServer | None = None
        self._initialized = False

    # -- set-up -------------------------------------------------------------

    async def initialize(self) -> None:
        """Choose the transport: remote if named, else the local server, else `run --events`."""
        self._setup()

    def _setup(self) -> None:
        # Synchronous, so the reference's synchronous methods (read_file, ...) can set up too.
        binary = pulsebox_binary(self.pulsebox_bin)
        env_url, env_token, env_ca = remote_from_env()
        url = self.remote_url or env_url
        token = self.remote_token or env_token
        choice = self.transport_choice
        if choice == "auto":
            if self.backend == "remote" or (self.backend is None and (url or token)):
                choice = "remote"
            elif self.backend == "host" or self.audit_log_path:
                choice = "cli"
            else:
                server = LocalServer(binary) if os.environ.get("PULSEBOX_SERVER") != "off" else None
                choice = "server" if server and (self.start_server or server.running()) else "cli"
        if choice != "cli" and self.backend == "host":
            raise SandboxConfigError("backend=\"host\" runs through `pulsebox run` only: "
                                     "use transport=\"cli\" (or \"auto\")", code="invalid_field",
                                     field="backend")
        if choice != "remote" and self.backend == "remote":
            raise SandboxConfigError(f"backend=\"remote\" with transport={choice!r}: use "
                                     "transport=\"remote\" (or \"auto\")", code="invalid_field",
                                     field="backend")
        if choice != "cli" and self.audit_log_path:
            raise SandboxConfigError("audit_log_path is honoured by the cli transport only (a server "
                                     "keeps the workspace's audit log)", code="invalid_field",
                                     field="audit_log_path")
        if choice == "remote":
            # Chosen by the environment alone: the reference's fallback to a local backend.
            fallback = (self.backend is None and not self.remote_url and not self.remote_token
                        and self.transport_choice == "auto")
            self.transport = RemoteTransport(binary, url, token, self.remote_ca or env_ca,
                                             fallback=fallback)
        elif choice == "server":
            self.server = LocalServer(binary)
            if self.start_server:
                self.server.start()
            elif not self.server.running():
                raise SandboxUnavailableError(
                    f"no pulsebox server answers at {self.server.json_socket}: start one with "
                    "`pulsebox serve --local`, pass start_server=True, or use transport=\"cli\"",
                    code="unavailable")
            self.transport = self.server.transport()
        else:
            flags: list[str] = []
            if self.backend == "native":
                # Not remote even when PULSE_REMOTE_URL is set (the CLI would follow it).
                flags += ["--backend", "native"]
            if self.backend == "host":
                if not self._unsafe_host_execution:
                    raise SandboxUnsupportedPolicyError(
                        "backend=\"host\" runs unsandboxed: pass unsafe_host_execution=True",
                        code="unsupported_policy", field="backend")
                flags += ["--backend", "host", "--unsafe-host"]
            if self.audit_log_path:
                flags += ["--audit-log", str(self.audit_log_path)]
            self.transport = CliTransport(binary, extra_flags=flags)
        self._initialized = True

    async def close(self) -> None:
        """Stop the local server this sandbox started (only that one, by its pid)."""
        if self.server is not None:
            self.server.stop()

    async def __aenter__(self) -> Sandbox:
        await self.initialize()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- runs ---------------------------------------------------------------

    def _run_request(self, command: str | list[str], cwd: Path | str | None,
                     env: dict[str, str] | None, execution_id: str | None,
                     session: str | None, stdin: str | bytes | None) -> dict[str, Any]:
        argv = _argv(command)
        request: dict[str, Any] = {"v": 1, "request": "run", "argv": argv,
                                   "workspace": str(self.workspace_root), "changes": self.changes}
        if cwd is not None:
            path = Path(cwd)
            if path.is_absolute():
                try:
                    path = path.resolve().relative_to(self.workspace_root)
                except ValueError:
                    raise SandboxSecurityError(f"cwd {cwd} is outside the workspace",
                                               operation="execute_command", path=str(cwd)) from None
            if str(path) != ".":
                request["cwd"] = str(path)
        if env:
            request["env"] = dict(env)
        if self.secret_policy is not None:
            secrets = self.secret_policy.to_protocol()
            if secrets:
                request["secrets"] = secrets
        if self._limits_explicit:
            limits, unsupported = self.limits.to_protocol()
            if unsupported and "limits" not in self.allow_weaker and "all" not in self.allow_weaker:
                raise SandboxUnsupportedPolicyError(
                    f"limits.{unsupported[0]}: pulsebox does not set this limit; leave it at its "
                    "default or pass allow_weaker=[\"limits\"]", code="unsupported_policy",
                    field=f"limits.{unsupported[0]}")
            request["limits"] = limits
        if self.network_policy is not None:
            request["network"] = self.network_policy.to_protocol()
        if self.policy is not None:
            request["policy"] = self.policy.to_dict()
        if session or self.session:
            request["session"] = session or self.session
        if self.allow_weaker:
            request["allow_weaker"] = list(self.allow_weaker)
        request["approvals"] = "ask" if self.approver is not None else self.approvals
        if execution_id:
            request["execution_id"] = execution_id
        if isinstance(stdin, bytes):
            request["stdin_base64"] = base64.b64encode(stdin).decode()
        elif stdin is not None:
            request["stdin"] = stdin
        return request

    async def stream(self, command: str | list[str], cwd: Path | str | None = None,
                     env: dict[str, str] | None = None, *, execution_id: str | None = None,
                     session: str | None = None, stdin: str | bytes | None = None,
                     on_output: OutputCallback | None = None) -> AsyncIterator[dict[str, Any]]:
        """The run's protocol events as they come (output scrubbed of registered secrets).

        ASK decisions go to `approver` when one is set. Leaving the loop early,
        or cancelling the task, closes the run and the sandbox goes with it.
        """
        if not self._initialized:
            await self.initialize()
        assert self.transport is not None
        request = self._run_request(command, cwd, env, execution_id, session, stdin)
        callback = on_output or self.on_output
        run = await self.transport.open_run(request)
        self.last_run = run
        try:
            async for event in run.events():
                kind = event.get("event")
                if kind == "output":
                    text = self.scrubber.redact(event_text(event))
                    event = {**event, "data": text}
                    event.pop("data_base64", None)
                    if callback is not None:
                        outcome = callback(event["stream"], text)
                        if inspect.isawaitable(outcome):
                            await outcome
                elif kind == "approval_request" and self.approver is not None:
                    await run.answer(event["approval_id"], await self._ask(event))
                yield event
        finally:
            await run.close()

    async def _ask(self, request: dict[str, Any]) -> bool:
        """The approver's answer; a synchronous approver runs in a thread (it may block on a
        person), and one that has not answered within the request's timeout has denied."""
        assert self.approver is not None
        async def answer() -> bool:
            if inspect.iscoroutinefunction(self.approver):
                decision = await self.approver(request)
            else:
                decision = await asyncio.to_thread(self.approver, request)
                if inspect.isawaitable(decision):
                    decision = await decision
            return bool(decision)
        timeout = request.get("timeout_seconds") or None
        try:
            return await asyncio.wait_for(answer(), timeout)
        except asyncio.TimeoutError:
            return False

    async def execute_command(
        self,
        command: str | list[str],
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        *,
        execution_id: str | None = None,
        session: str | None = None,
        stdin: str | bytes | None = None,
        on_output: OutputCallback | None = None,
    ) -> ProcessResult:
        """Run `command` (a string through /bin/sh -c, a list as it is) and wait for its result."""
        if not self._initialized:
            await self.initialize()
        execution_id = execution_id or f"py-{uuid.uuid4().hex[:16]}"
        execution = SandboxExecution(execution_id)
        self.last_execution = execution
        execution.transition(LifecycleState.STARTING)
        events = self.stream(command, cwd, env, execution_id=execution_id, session=session,
                             stdin=stdin, on_output=on_output)
        try:
            # aclosing: leaving early (a result, an error, a cancel) ends the run at once.
            async with contextlib.aclosing(events):
                return await self._collect(events, execution,
                                           command if isinstance(command, str) else " ".join(command),
                                           _argv(command))
        except asyncio.CancelledError:
            if execution.state == LifecycleState.RUNNING:
                execution.transition(LifecycleState.STOPPING)
            raise
        finally:
            if execution.state in (LifecycleState.STARTING, LifecycleState.RUNNING):
                execution.transition(LifecycleState.FAILED)
            execution.transition(LifecycleState.CLEANING)
            execution.transition(LifecycleState.FINALIZED)

    def _shell_denied_for(self, argv: list[str]) -> bool:
        """Whether the policy refused SHELL for argv (not NETWORK or SECRETS, also policy_denied)."""
        # The server's target is the argv joined; an ASK refused counts as a denial.
        return (self.policy is not None
                and self.policy.evaluate(ActionType.SHELL, " ".join(argv)) != PolicyDecision.ALLOW)

    async def _collect(self, events: AsyncIterator[dict[str, Any]], execution: SandboxExecution,
                       cmd_str: str, argv: list[str]) -> ProcessResult:
        stdout: list[str] = []
        stderr: list[str] = []
        async for event in events:
            kind = event.get("event")
            if kind == "started":
                execution.transition(LifecycleState.RUNNING)
            elif kind == "output":
                (stdout if event["stream"] == "stdout" else stderr).append(event["data"])
            elif kind == "result":
                result = result_from_run(event, "", "")
                # Scrubbed again as a whole: a value may straddle two chunks.
                result.stdout = self.scrubber.redact("".join(stdout))
                result.stderr = self.scrubber.redact("".join(stderr))
                result.command = cmd_str
                ok = result.exit_code == 0 and not result.timed_out
                execution.transition(LifecycleState.COMPLETING if ok else LifecycleState.FAILED)
                return result
            elif kind == "error":
                error = event["error"]
                execution.transition(LifecycleState.FAILED)
                if (error.get("code") == "policy_denied" and self.shell_denied == "result"
                        and self._shell_denied_for(argv)):
                    return ProcessResult(command=cmd_str, exit_code=-1, stdout="", stderr=SHELL_DENIED,
                                         duration_ms=0.0, run_id=event.get("run_id"),
                                         raw={"error": error})
                raise error_from_protocol(error, operation="execute_command")
        execution.transition(LifecycleState.FAILED)
        run = self.last_run
        status = getattr(run, "returncode", None)
        detail = getattr(run, "stderr", b"").decode(errors="replace").strip()
        raise SandboxError("pulsebox ended the run without a result"
                           + (f" (exit {status})" if status is not None else "")
                           + (f": {detail}" if detail else ""), code="internal")

    # -- review requests ----------------------------------------------------

    def _request(self, request: dict[str, Any], *, operation: str, path: str | None = None) -> dict[str, Any]:
        if self.transport is None:
            self._setup()
        assert self.transport is not None
        reply = self.transport.request({"v": 1, **request, "workspace": str(self.workspace_root)})
        if "error" in reply:
            error = error_from_protocol(reply["error"], operation=operation, path=path)
            raise error
        return reply

    def _check_policy(self, action: ActionType, target: str, verb: str) -> None:
        if self.policy is not None and self.policy.evaluate(action, target) == PolicyDecision.DENY:
            raise SandboxPermissionError(f"Policy denied {verb} access to '{target}'",
                                         code="policy_denied")

    def _review_extras(self) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if self.policy is not None:
            extras["policy"] = self.policy.to_dict()
        if self.scrubber.secrets:
            extras["secrets"] = self.scrubber.as_protocol()
        return extras

    def read_bytes(self, relative_path: str) -> bytes:
        """A workspace file's bytes through the READ policy (scrubbed by the server)."""
        self._check_policy(ActionType.READ, relative_path, "read")
        where = self._resolve_read(relative_path)
        if not isinstance(where, str):
            return _safe_read_under(*where, name=relative_path)
        reply = self._request({"request": "read_file", "path": where, **self._review_extras()},
                              operation="read_file", path=relative_path)
        if "data_base64" in reply:
            return base64.b64decode(reply["data_base64"])
        return reply.get("data", "").encode()

    def read_file(self, relative_path: str) -> str:
        """A workspace file as text (the reference's read_file; non-UTF-8 bytes replaced)."""
        return self.scrubber.redact(self.read_bytes(relative_path).decode("utf-8", errors="replace"))

    def _resolve_read(self, name: str) -> tuple[Path, tuple[str, ...]] | str:
        """An allowed external file as (its allowed root, the names below it), or the
        workspace-relative name the server reads."""
        path = PurePosixPath(name)
        if not path.is_absolute():
            return name
        if ".." in path.parts:
            raise SandboxSecurityError(f"{name}: \"..\" is not allowed in a path to read",
                                       operation="read_file", path=name)
        for allowed in self.allowed_external_reads:
            for form in dict.fromkeys((allowed, allowed.resolve())):
                if path == form or PurePosixPath(form) in path.parents:
                    return allowed.resolve(), path.relative_to(form).parts
        for form in dict.fromkeys((self.workspace_root, self.workspace_root.resolve())):
            if PurePosixPath(form) in path.parents:
                return str(path.relative_to(form))
        raise SandboxSecurityError(f"{name} is outside the workspace and allowed_external_reads",
                                   operation="read_file", path=name)

    def create_transaction(self) -> Transaction:
        reply = self._request({"request": "create_transaction"}, operation="create_transaction")
        return Transaction(reply["transaction"])

    def stage_write(self, tx: Transaction | str, relative_path: str, content: str | bytes,
                    *, mode: int | None = None) -> Path:
        self._check_policy(ActionType.WRITE, relative_path, "write")
        text = content.decode("utf-8", errors="replace") if isinstance(content, bytes) else content
        if self.scrubber.contains_explicit_secret(text):
            raise SandboxSecurityError(
                "Commit rejected: explicitly authorized secret found in staged file.",
                operation="stage_write", path=relative_path)
        request: dict[str, Any] = {"request": "stage_write", "transaction": _tx_id(tx),
                                   "path": relative_path, **self._review_extras()}
        if isinstance(content, bytes):
            request["data_base64"] = base64.b64encode(content).decode()
        else:
            request["data"] = content
        if mode is not None:
            request["mode"] = mode
        self._request(request, operation="stage_write", path=relative_path)
        if isinstance(tx, Transaction):
            tx.staged_changes.append(relative_path)
        return self.workspace_root / relative_path

    def stage_delete(self, tx: Transaction | str, relative_path: str) -> None:
        self._check_policy(ActionType.DELETE, relative_path, "delete")
        request: dict[str, Any] = {"request": "stage_delete", "transaction": _tx_id(tx),
                                   "path": relative_path}
        if self.policy is not None:
            request["policy"] = self.policy.to_dict()
        self._request(request, operation="stage_delete", path=relative_path)
        if isinstance(tx, Transaction):
            tx.staged_changes.append(relative_path)

    def preview_changes(self, tx: Transaction | str) -> str:
        reply = self._request({"request": "diff", "transaction": _tx_id(tx)}, operation="preview_changes")
        if "diff_base64" in reply:
            return base64.b64decode(reply["diff_base64"]).decode("utf-8", errors="replace")
        return reply.get("diff", "")

    def commit_transaction(self, tx: Transaction | str) -> list[str]:
        reply = self._request({"request": "commit", "transaction": _tx_id(tx)}, operation="commit_transaction")
        return list(reply.get("committed", []))

    def discard_transaction(self, tx: Transaction | str) -> None:
        self._request({"request": "discard", "transaction": _tx_id(tx)}, operation="discard_transaction")

    def list_transactions(self) -> list[dict[str, Any]]:
        return list(self._request({"request": "changes"}, operation="changes").get("transactions", []))


def _argv(command: str | list[str]) -> list[str]:
    """A string runs through a shell, as the reference's does; a list as it is."""
    return ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]


def _safe_read_under(root: Path, names: tuple[str, ...], *, name: str) -> bytes:
    """Read root/names... opening each name below root without following links (a link
    swapped in between a check and the open cannot lead out), a regular file up to
    MAX_FILE_SIZE only."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(names):
            last = index == len(names) - 1
            try:
                child = os.open(part, flags | (os.O_NONBLOCK if last else os.O_DIRECTORY), dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SandboxSecurityError(f"{name}: {part} is a link (or not a directory); "
                                               "links are not followed", operation="read_file",
                                               path=name) from None
                raise
            os.close(fd)
            fd = child
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SandboxSecurityError(f"{name} is not a regular file", operation="read_file", path=name)
        if info.st_size > MAX_FILE_SIZE:
            raise SandboxSecurityError(f"{name} is {info.st_size} bytes, over {MAX_FILE_SIZE}",
                                       operation="read_file", path=name)
        data = os.read(fd, MAX_FILE_SIZE + 1)
        chunks = [data]
        while data and sum(map(len, chunks)) <= MAX_FILE_SIZE:
            data = os.read(fd, 1 << 20)
            chunks.append(data)
        content = b"".join(chunks)
        if len(content) > MAX_FILE_SIZE:
            raise SandboxSecurityError(f"{name} grew over {MAX_FILE_SIZE} bytes while read",
                                       operation="read_file", path=name)
        return content
    finally:
        os.close(fd)
