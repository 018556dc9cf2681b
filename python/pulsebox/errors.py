"""The reference's exception classes, and the protocol's error codes mapped onto them."""

from __future__ import annotations

from typing import Any


class SandboxError(Exception):
    """Base of every error the client raises; `code` and `field` come from the protocol."""

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class SandboxUnavailableError(SandboxError):
    """No backend may run the command (protocol: unavailable, busy, shutting_down)."""


class SandboxUnsupportedPolicyError(SandboxError):
    """A policy this host cannot enforce strongly; `allow_weaker=` accepts less."""


class SandboxConfigError(SandboxError, ValueError):
    """A request the runtime refused as malformed (invalid_request, invalid_field, too_large)."""


class SandboxSecurityError(SandboxError):
    """A request that would break isolation, or a registered secret in staged content."""

    def __init__(
        self,
        message: str,
        operation: str | None = None,
        path: str | None = None,
        *,
        code: str | None = "security",
        field: str | None = None,
    ) -> None:
        super().__init__(message, code=code, field=field)
        self.operation = operation
        self.path = path


class SandboxConcurrentModificationError(SandboxError):
    """The workspace changed under a commit; `path` is the first changed path, `paths` all."""

    def __init__(self, path: str, paths: list[str] | None = None, message: str | None = None) -> None:
        super().__init__(message or f"Concurrent modification of '{path}'", code="conflict")
        self.path = path
        self.paths = paths or [path]


class SandboxPermissionError(SandboxError, PermissionError):
    """The policy said DENY (or an ASK was denied); a PermissionError, as the reference raises."""


class SandboxForbiddenError(SandboxError, PermissionError):
    """The server refused the caller (a workspace it does not own; a wrong token)."""


class SandboxNotFoundError(SandboxError, LookupError):
    """No such transaction, run, request or file."""


_BY_CODE: dict[str, type[SandboxError]] = {
    "invalid_request": SandboxConfigError,
    "invalid_field": SandboxConfigError,
    "too_large": SandboxConfigError,
    "unauthorized": SandboxForbiddenError,
    "forbidden": SandboxForbiddenError,
    "policy_denied": SandboxPermissionError,
    "not_found": SandboxNotFoundError,
    "unsupported_policy": SandboxUnsupportedPolicyError,
    "busy": SandboxUnavailableError,
    "shutting_down": SandboxUnavailableError,
    "unavailable": SandboxUnavailableError,
}


def error_from_protocol(error: dict[str, Any], *, operation: str | None = None,
                        path: str | None = None) -> SandboxError:
    """The exception for a protocol error object ({"code", "message", "field", "paths"?})."""
    code = str(error.get("code", "internal"))
    message = str(error.get("message", "pulsebox refused the request"))
    field = error.get("field")
    if code == "conflict":
        paths = [str(p) for p in error.get("paths") or []]
        return SandboxConcurrentModificationError(paths[0] if paths else (path or ""), paths, message)
    if code == "security":
        return SandboxSecurityError(message, operation=operation, path=path, field=field)
    cls = _BY_CODE.get(code, SandboxError)
    return cls(message, code=code, field=field)
