"""Fixtures: the real pulsebox binaries, a private state directory, servers started and stopped by pid."""

from __future__ import annotations

import os
import shutil
import tempfile
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
sys.path.insert(0, str(PYTHON_DIR))

import pulsebox  # noqa: E402


def _binary() -> str:
    named = os.environ.get("PULSEBOX_BIN")
    if named:
        return named
    built = REPO / "build" / "src" / "cli" / "pulsebox"
    if built.exists():
        return str(built)
    pytest.exit("set PULSEBOX_BIN to the pulsebox binary (build/src/cli/pulsebox)", returncode=2)


@pytest.fixture(scope="session", autouse=True)
def pulsebox_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PULSEBOX_BIN, a state dir of this session, an audit key, NO_COLOR; no remote or server named."""
    # Sandboxes' unprivileged ids must be able to search the state directory's parents.
    base = Path(tempfile.mkdtemp(prefix="pbpy-"))
    base.chmod(0o711)
    env = {
        "PULSEBOX_BIN": _binary(),
        "PULSEBOX_STATE_DIR": str(base / "state"),
        "PULSEBOX_AUDIT_KEY": os.environ.get("PULSEBOX_AUDIT_KEY") or str(base / "audit.key"),
        "NO_COLOR": "1",
    }
    saved = {k: os.environ.get(k) for k in [*env, "PULSEBOX_SERVER", "PULSE_REMOTE_URL",
                                            "PULSE_REMOTE_TOKEN", "PULSE_REMOTE_CA"]}
    for name in ("PULSEBOX_SERVER", "PULSE_REMOTE_URL", "PULSE_REMOTE_TOKEN", "PULSE_REMOTE_CA"):
        os.environ.pop(name, None)
    os.environ.update(env)
    yield env
    shutil.rmtree(base, ignore_errors=True)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def scratch(pulsebox_env: dict[str, str]) -> Path:
    """A directory of this test that sandboxes' ids may search (pytest's tmp_path is 0700)."""
    base = Path(pulsebox_env["PULSEBOX_STATE_DIR"]).parent
    path = Path(tempfile.mkdtemp(prefix="t", dir=base))
    path.chmod(0o711)
    return path


@pytest.fixture
def workspace(scratch: Path) -> Path:
    ws = scratch / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("original\n")
    return ws


@pytest.fixture
def local_server(scratch: Path, monkeypatch: pytest.MonkeyPatch):
    """A `pulsebox serve --local` of this test's own state dir; stopped by its pid at the end."""
    monkeypatch.setenv("PULSEBOX_STATE_DIR", str(scratch / "ss"))
    server = pulsebox.LocalServer()
    pid = server.start(timeout=15)
    assert pid is not None and server.running()
    yield server
    server.stop()
    assert server._proc.poll() is not None


def make(workspace: Path, **kwargs) -> pulsebox.Sandbox:
    """A Sandbox that also works for an ordinary user without cgroups (as the C++ suites pass
    --allow-weaker limits)."""
    kwargs.setdefault("allow_weaker", ["limits"])
    return pulsebox.Sandbox(workspace, **kwargs)


@pytest.fixture
def free_tcp_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    return free_port()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tls_files(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (the test's own CA) and its key."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(params=["tcp"])
def remote_server(request, scratch: Path):
    """`pulsebox serve --listen` (127.0.0.1:PORT, unix:/PATH or TLS) with a 0600 token file and
    its own state dir; yields (url, token, ca file or None); stopped by its pid."""
    tmp_path = scratch
    token = os.urandom(24).hex()
    token_file = tmp_path / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, token.encode())
    os.close(fd)
    ca = None
    extra: list[str] = []
    if request.param == "unix":
        listen = url = f"unix:{tmp_path / 'http.sock'}"
    else:
        port = free_port()
        listen = f"127.0.0.1:{port}"
        url = f"{'https' if request.param == 'tls' else 'http'}://127.0.0.1:{port}"
        if request.param == "tls":
            cert, key = _tls_files(tmp_path)
            ca = str(cert)
            extra = ["--tls-cert", str(cert), "--tls-key", str(key)]
    env = dict(os.environ, PULSEBOX_STATE_DIR=str(tmp_path / "rs"))
    log = open(tmp_path / "remote.log", "wb")
    proc = subprocess.Popen([os.environ["PULSEBOX_BIN"], "serve", "--listen", listen,
                             "--token-file", str(token_file), *extra], env=env, stdout=log,
                            stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def listening() -> bool:
        if request.param == "unix":
            with socket.socket(socket.AF_UNIX) as s:
                return s.connect_ex(listen[len("unix:"):]) == 0
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    deadline = time.monotonic() + 15
    while not listening():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(5)
            pytest.fail("pulsebox serve --listen did not listen: " + (tmp_path / "remote.log").read_text())
        time.sleep(0.02)
    yield url, token, ca
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    log.close()


def processes_with_arg(marker: str) -> list[int]:
    """pids whose command line holds `marker` (a unique argument of the test's own command)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in args:
            found.append(int(entry))
    return found
