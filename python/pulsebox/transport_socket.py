"""Transport: the local server's protocol socket (`server.json.sock`, NDJSON)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from .errors import SandboxError, SandboxUnavailableError
from .locate import json_socket, pulsebox_binary, server_socket, state_dir

LINE_LIMIT = 64 << 20


def _encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def socket_accepts(path: Path, timeout: float = 1.0) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


class SocketRun:
    """One run on one connection: events in, approval answers out; closing it cancels the run."""

    pid = None  # the run's process belongs to the server

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            line = await self._reader.readline()
            if not line:
                return
            yield json.loads(line)

    async def answer(self, approval_id: str, allow: bool) -> None:
        self._writer.write(_encode({"v": 1, "request": "approval", "approval_id": approval_id,
                                    "decision": "allow" if allow else "deny"}))
        await self._writer.drain()

    async def close(self) -> None:
        self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), 5)
        except (OSError, asyncio.TimeoutError):
            pass


class SocketTransport:
    name = "server"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    async def open_run(self, request: dict[str, Any]) -> SocketRun:
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.path), limit=LINE_LIMIT)
        except OSError as error:
            raise SandboxUnavailableError(f"pulsebox server at {self.path}: {error}",
                                          code="unavailable") from error
        writer.write(_encode(request))
        await writer.drain()
        return SocketRun(reader, writer)

    def request(self, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            try:
                conn.connect(str(self.path))
                conn.sendall(_encode(request))
                chunks = []
                while chunk := conn.recv(1 << 16):
                    chunks.append(chunk)
            except OSError as error:
                raise SandboxUnavailableError(f"pulsebox server at {self.path}: {error}",
                                              code="unavailable") from error
        line = b"".join(chunks).split(b"\n", 1)[0]
        if not line:
            raise SandboxError(f"pulsebox server at {self.path} closed without a reply", code="internal")
        return json.loads(line)


class LocalServer:
    """This user's `pulsebox serve --local`: found, or started on demand (detached, logged)."""

    def __init__(self, pulsebox_bin: str | None = None) -> None:
        self.pulsebox_bin = pulsebox_binary(pulsebox_bin)
        cli_socket = server_socket()
        if cli_socket is None:
            raise SandboxUnavailableError("PULSEBOX_SERVER=off: no local server", code="unavailable")
        self.cli_socket = cli_socket
        self.json_socket = json_socket(cli_socket)
        self.pid: int | None = None  # set when this object started the server
        self.log_path: Path | None = None

    def running(self) -> bool:
        return socket_accepts(self.json_socket)

    def start(self, timeout: float = 15.0) -> int | None:
        """Start the server unless one answers; returns the pid started (None if one ran)."""
        if self.running():
            return None
        state = state_dir()
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log_path = state / "python-client-server.log"
        argv = [self.pulsebox_bin, "serve", "--local"]
        if os.environ.get("PULSEBOX_SERVER"):
            argv += ["--socket", str(self.cli_socket)]
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                    start_new_session=True, close_fds=True)
        finally:
            os.close(fd)
        self.pid = proc.pid
        self._proc = proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.running():
                return self.pid
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        log = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        self.stop()
        raise SandboxUnavailableError(
            f"pulsebox serve --local did not start (log {self.log_path}): {log.strip()}", code="unavailable")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server this object started (by its pid), and wait for it."""
        proc = getattr(self, "_proc", None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def transport(self) -> SocketTransport:
        return SocketTransport(self.json_socket)
