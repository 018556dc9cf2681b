"""Transport: a remote `pulsebox serve --listen` (http://, https://, unix:/PATH) with a bearer token.

Runs go through `pulsebox run --backend remote --events`, which uploads the
workspace, runs there and imports the changes as a local transaction; the
review requests then act locally on that transaction. health and
capabilities go to the server directly.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import urllib.parse
from typing import Any

from .errors import SandboxConfigError, SandboxUnavailableError, error_from_protocol
from .transport_cli import CliTransport


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def http_connection(url: str, ca_file: str | None, timeout: float) -> http.client.HTTPConnection:
    if url.startswith("unix:"):
        return _UnixHTTPConnection(url[len("unix:"):], timeout)
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "http":
        return http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=timeout)
    if parsed.scheme == "https":
        context = ssl.create_default_context(cafile=ca_file)
        return http.client.HTTPSConnection(parsed.hostname, parsed.port or 443, timeout=timeout,
                                           context=context)
    raise SandboxConfigError(
        f"remote_url {url!r}: expected http://HOST:PORT, https://HOST:PORT or unix:/PATH",
        code="invalid_field", field="remote_url")


class RemoteTransport(CliTransport):
    name = "remote"

    def __init__(self, pulsebox_bin: str, url: str, token: str, ca_file: str | None = None,
                 *, fallback: bool = False) -> None:
        if not url or not token:
            raise SandboxConfigError("a remote server needs both remote_url (PULSE_REMOTE_URL) and "
                                     "remote_token (PULSE_REMOTE_TOKEN)", code="invalid_field",
                                     field="remote_url" if not url else "remote_token")
        env = {"PULSE_REMOTE_URL": url, "PULSE_REMOTE_TOKEN": token}
        if ca_file:
            env["PULSE_REMOTE_CA"] = ca_file
        # Without --backend the CLI takes the remote from the environment and, as the
        # reference does, runs natively (audited) when nobody answers there.
        super().__init__(pulsebox_bin, env, [] if fallback else ["--backend", "remote"])
        self.url, self.token, self.ca_file = url, token, ca_file
        self._local = CliTransport(pulsebox_bin)

    def request(self, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        # The imported transactions live in the local workspace.
        return self._local.request(request, timeout)

    def http_get(self, route: str, timeout: float = 10.0) -> dict[str, Any]:
        """GET /v1/<route> from the server (health, capabilities)."""
        conn = http_connection(self.url, self.ca_file, timeout)
        try:
            conn.request("GET", f"/v1/{route}", headers={"Authorization": f"Bearer {self.token}"})
            response = conn.getresponse()
            body = json.loads(response.read() or b"{}")
        except OSError as error:
            raise SandboxUnavailableError(f"remote pulsebox at {self.url}: {error}",
                                          code="unavailable") from error
        finally:
            conn.close()
        if "error" in body:
            raise error_from_protocol(body["error"])
        return body


def remote_from_env() -> tuple[str, str, str | None]:
    return (os.environ.get("PULSE_REMOTE_URL", "").strip(),
            os.environ.get("PULSE_REMOTE_TOKEN", "").strip(),
            os.environ.get("PULSE_REMOTE_CA") or None)
