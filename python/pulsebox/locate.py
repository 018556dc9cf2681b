"""Where the pulsebox binary, the state directory and the server's protocol socket are."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import SandboxUnavailableError


def pulsebox_binary(explicit: str | os.PathLike[str] | None = None) -> str:
    """`explicit`, else $PULSEBOX_BIN, else `pulsebox` on PATH."""
    candidate = str(explicit) if explicit else os.environ.get("PULSEBOX_BIN") or shutil.which("pulsebox")
    if not candidate or not os.access(candidate, os.X_OK):
        raise SandboxUnavailableError(
            f"pulsebox binary not found ({candidate or 'not on PATH'}): pass pulsebox_bin=, "
            "set PULSEBOX_BIN, or install pulsebox", code="unavailable")
    return candidate


def state_dir() -> Path:
    """$PULSEBOX_STATE_DIR, else /var/lib/pulsebox as root, else /var/tmp/pulsebox-UID."""
    named = os.environ.get("PULSEBOX_STATE_DIR")
    if named:
        return Path(named)
    return Path("/var/lib/pulsebox") if os.geteuid() == 0 else Path(f"/var/tmp/pulsebox-{os.geteuid()}")


def server_socket() -> Path | None:
    """The CLI's socket (server.sock), or None when PULSEBOX_SERVER=off."""
    named = os.environ.get("PULSEBOX_SERVER")
    if named == "off":
        return None
    return Path(named) if named else state_dir() / "server.sock"


def json_socket(server_sock: Path) -> Path:
    """The protocol socket beside a server socket: `<name>.json.sock` for `<name>.sock`."""
    name = server_sock.name
    stem = name[: -len(".sock")] if name.endswith(".sock") else name
    return server_sock.with_name(stem + ".json.sock")
