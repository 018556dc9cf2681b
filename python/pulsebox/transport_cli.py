"""Transport without a server: `pulsebox run --events` for runs, `pulsebox request` for the rest."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from .errors import SandboxConfigError, SandboxError, SandboxUnsupportedPolicyError
from .transport_socket import LINE_LIMIT

_LIMIT_FLAGS = {"memory": "--memory", "swap": "--swap", "pids": "--pids", "cpus": "--cpus",
                "timeout": "--timeout", "cpu_time": "--cpu-time", "max_output": "--max-output",
                "disk": "--disk"}
_DURATIONS = {"timeout", "cpu_time"}


def _limit_text(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if name in _DURATIONS and float(value) != int(value):
        return f"{round(float(value) * 1000)}ms"
    return str(int(value)) if float(value) == int(value) else str(value)


def _private_file(prefix: str, text: str) -> str:
    fd, path = tempfile.mkstemp(prefix=prefix)  # 0600
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


def run_flags(request: dict[str, Any], env: dict[str, str], *,
              remote: bool = False) -> tuple[list[str], list[str]]:
    """`pulsebox run` flags for a run request, and temp files to remove after it.

    Values stay off the command line, which every user of the machine may read:
    secrets go in `env` (the child's environment), named by `--secret NAME`, and
    env in a 0600 --env-file. A remote run takes no --env-file (its values
    travel with the request), nor does a value an --env-file line cannot hold
    (a newline, a trailing CR): those go as --env.
    """
    temps: list[str] = []
    try:
        return _run_flags(request, env, remote, temps), temps
    except BaseException:
        for path in temps:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


def _run_flags(request: dict[str, Any], env: dict[str, str], remote: bool,
               temps: list[str]) -> list[str]:
    flags: list[str] = ["--events"]
    handled = {"v", "request", "argv", "stdin", "stdin_base64"}
    if "workspace" in request:
        flags += ["--workspace", request["workspace"]]
    if request.get("cwd"):
        flags += ["--cwd", request["cwd"]]
    lines = []
    for name, value in (request.get("env") or {}).items():
        if remote or "\n" in value or value.endswith("\r") or "=" in name or not name.strip():
            flags += ["--env", f"{name}={value}"]
        else:
            lines.append(f"{name}={value}\n")
    if lines:
        temps.append(_private_file("pulsebox-env-", "".join(lines)))
        flags += ["--env-file", temps[-1]]
    for name, value in (request.get("secrets") or {}).items():
        env[name] = value
        flags += ["--secret", name]
    for name, value in (request.get("limits") or {}).items():
        flags += [_LIMIT_FLAGS[name], _limit_text(name, value)]
    network = request.get("network") or {}
    if "mode" in network:
        flags += ["--net", network["mode"]]
    for dest in network.get("allow", []):
        flags += ["--allow", dest]
    for domain in network.get("allow_domains", []):
        flags += ["--allow-domain", domain]
    if "policy" in request:
        # --policy takes a regular file.
        temps.append(_private_file("pulsebox-policy-", json.dumps(request["policy"])))
        flags += ["--policy", temps[-1]]
    for key, flag in (("seccomp", "--seccomp"), ("changes", "--changes"), ("session", "--session"),
                      ("profile", "--profile"), ("execution_id", "--execution-id")):
        if key in request:
            flags += [flag, str(request[key])]
    for dim in request.get("allow_weaker", []):
        flags += ["--allow-weaker", dim]
    approvals = request.get("approvals", "deny")
    if approvals == "allow":
        flags.append("-y")
    elif approvals == "ask":
        raise SandboxUnsupportedPolicyError(
            "approvals through a callback need the server transport (`run --events` asks nobody): "
            "use transport=\"server\" (start_server=True starts one), or approvals=\"allow\"/\"deny\"",
            code="unsupported_policy", field="approvals")
    handled |= {"workspace", "cwd", "env", "secrets", "limits", "network", "policy", "seccomp",
                "changes", "session", "profile", "allow_weaker", "approvals", "execution_id"}
    unknown = set(request) - handled
    if unknown:
        raise SandboxConfigError(f"{sorted(unknown)[0]}: not supported by `pulsebox run --events`",
                                 code="invalid_field", field=sorted(unknown)[0])
    return flags


class CliRun:
    """A `pulsebox run --events` child; closing it before the end cancels the run (SIGTERM, then SIGKILL)."""

    def __init__(self, proc: asyncio.subprocess.Process, temps: list[str]) -> None:
        self._proc = proc
        self._temps = temps
        self.pid = proc.pid
        self.stderr = b""
        self._ended = False  # the last event (result or error) was read
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        self.stderr = await self._proc.stderr.read(1 << 20)
        while await self._proc.stderr.read(1 << 16):
            pass

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        assert self._proc.stdout is not None
        while True:
            line = await self._proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            self._ended = event.get("event") in ("result", "error")
            yield event
        self._ended = True
        await self._proc.wait()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stderr_task, 5)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def answer(self, approval_id: str, allow: bool) -> None:
        raise SandboxError("`pulsebox run --events` takes no approval answers", code="invalid_request")

    async def close(self) -> None:
        try:
            if self._ended and self._proc.returncode is None:
                # After its last event pulsebox is finishing: let it, signal only if it hangs.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._proc.wait(), 10)
            if self._proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(self._proc.wait(), 5)
                except asyncio.TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        self._proc.kill()
                    await asyncio.wait_for(self._proc.wait(), 5)
        finally:
            self._stderr_task.cancel()
            for path in self._temps:
                with contextlib.suppress(OSError):
                    os.unlink(path)


class CliTransport:
    name = "cli"

    def __init__(self, pulsebox_bin: str, extra_env: dict[str, str] | None = None,
                 extra_flags: list[str] | None = None) -> None:
        self.pulsebox_bin = pulsebox_bin
        self.extra_env = dict(extra_env or {})
        self.extra_flags = list(extra_flags or [])

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        return env

    def _may_go_remote(self, env: dict[str, str]) -> bool:
        if "--backend" in self.extra_flags:
            return self.extra_flags[self.extra_flags.index("--backend") + 1] == "remote"
        return bool(env.get("PULSE_REMOTE_URL") or env.get("PULSE_REMOTE_TOKEN"))

    async def open_run(self, request: dict[str, Any]) -> CliRun:
        env = self._env()
        flags, temps = run_flags(request, env, remote=self._may_go_remote(env))
        stdin_data = None
        if "stdin" in request:
            stdin_data = request["stdin"].encode()
        elif "stdin_base64" in request:
            import base64
            stdin_data = base64.b64decode(request["stdin_base64"])
        try:
            proc = await asyncio.create_subprocess_exec(
                self.pulsebox_bin, "run", *self.extra_flags, *flags, "--", *request["argv"],
                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, limit=LINE_LIMIT)
        except OSError:
            for path in temps:
                os.unlink(path)
            raise
        if stdin_data is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin_data)
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
        return CliRun(proc, temps)

    def request(self, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        proc = subprocess.run([self.pulsebox_bin, "request"], input=json.dumps(request) + "\n",
                              capture_output=True, text=True, env=self._env(), timeout=timeout)
        line = proc.stdout.split("\n", 1)[0]
        if not line:
            raise SandboxError(
                f"`pulsebox request` exited {proc.returncode} without a reply: {proc.stderr.strip()}",
                code="internal")
        return json.loads(line)
