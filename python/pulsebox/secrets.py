"""The reference's SecretPolicy, and the client-side scrubbing of registered values."""

from __future__ import annotations

import enum
import json
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import SandboxConfigError, SandboxUnsupportedPolicyError

REDACTED = "[REDACTED_SECRET]"


class SecretMode(str, enum.Enum):
    DENY_ALL = "deny_all"
    ALLOW_EXPLICIT = "allow_explicit"
    ALLOW_ALL = "allow_all"


class SecretEnforcementLevel(str, enum.Enum):
    STRONGLY_ENFORCED = "strongly_enforced"
    UNSUPPORTED = "unsupported"


@dataclass
class SecretPolicy:
    mode: SecretMode = SecretMode.DENY_ALL
    explicit_env: list[str] = field(default_factory=list)

    def to_protocol(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The request's `secrets`: NAME: VALUE of each explicitly named variable."""
        environ = os.environ if environ is None else environ
        mode = SecretMode(self.mode)
        if mode == SecretMode.DENY_ALL:
            return {}
        if mode == SecretMode.ALLOW_ALL:
            # Copying the whole environment would hand the sandbox every
            # credential the agent holds; pulsebox passes only named values.
            raise SandboxUnsupportedPolicyError(
                "SecretPolicy(mode=ALLOW_ALL) would copy this process's whole environment into "
                "the sandbox; name the variables with SecretMode.ALLOW_EXPLICIT and explicit_env",
                code="unsupported_policy", field="secrets")
        missing = [name for name in self.explicit_env if name not in environ]
        if missing:
            raise SandboxConfigError(
                f"SecretPolicy.explicit_env: {missing[0]} is not set in this process's "
                "environment; set it or remove it from explicit_env",
                code="invalid_field", field="secrets")
        return {name: environ[name] for name in self.explicit_env}


class SecretScrubber:
    """Redacts registered values (>= 4 characters), case-insensitively, also URL- and JSON-encoded."""

    MIN_LENGTH = 4

    def __init__(self, secrets: list[str] | None = None) -> None:
        self.secrets = [s for s in (secrets or []) if s and len(s) >= self.MIN_LENGTH]
        forms: set[str] = set()
        for value in self.secrets:
            forms.update({value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value),
                          json.dumps(value)[1:-1]})
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = (re.compile("|".join(re.escape(f) for f in ordered), re.IGNORECASE)
                         if ordered else None)

    def redact(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern and text else text

    def contains_explicit_secret(self, text: str) -> bool:
        return bool(self._pattern and text and self._pattern.search(text))

    def as_protocol(self) -> dict[str, str]:
        """The values as the protocol's `secrets` of a review request (never given to a command)."""
        return {f"PULSEBOX_CLIENT_SECRET_{i}": v for i, v in enumerate(self.secrets, 1)}
