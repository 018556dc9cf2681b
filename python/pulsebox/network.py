"""The reference's NetworkPolicy, mapped to the protocol's `network`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .errors import SandboxUnsupportedPolicyError


class NetworkMode(str, enum.Enum):
    DENY_ALL = "deny_all"
    LOCALHOST_ONLY = "localhost_only"
    ALLOWLIST = "allowlist"
    PROXY = "proxy"
    ALLOW_ALL = "allow_all"


class NetworkEnforcementLevel(str, enum.Enum):
    STRONGLY_ENFORCED = "strongly_enforced"
    PARTIALLY_ENFORCED = "partially_enforced"
    ADVISORY = "advisory"
    UNSUPPORTED = "unsupported"


class NetworkProtocol(str, enum.Enum):
    TCP = "tcp"
    UDP = "udp"
    ANY = "any"


@dataclass
class NetworkRule:
    destination: str
    port: int | None = None
    protocol: NetworkProtocol | str = NetworkProtocol.ANY

    def __post_init__(self) -> None:
        self.protocol = NetworkProtocol(str(getattr(self.protocol, "value", self.protocol)).lower())
        if not self.destination:
            raise ValueError("NetworkRule.destination: expected an address or host name")
        if self.port is not None and not 0 < int(self.port) < 65536:
            raise ValueError(f"NetworkRule.port: expected 1..65535, got {self.port}")

    def to_allow(self) -> str:
        """DEST[:PORT][/tcp|udp], as `--allow` takes it."""
        text = f"[{self.destination}]" if ":" in self.destination else self.destination
        if self.port is not None:
            text += f":{int(self.port)}"
        if self.protocol != NetworkProtocol.ANY:
            text += f"/{self.protocol.value}"
        return text


_MODES = {
    NetworkMode.DENY_ALL: "none",
    NetworkMode.LOCALHOST_ONLY: "localhost",
    NetworkMode.ALLOWLIST: "allowlist",
    NetworkMode.PROXY: "proxy",
    NetworkMode.ALLOW_ALL: "all",
}


@dataclass
class NetworkPolicy:
    mode: NetworkMode = NetworkMode.DENY_ALL
    rules: list[NetworkRule] = field(default_factory=list)
    proxy_url: str | None = None

    def to_protocol(self) -> dict[str, Any]:
        mode = NetworkMode(self.mode)
        network: dict[str, Any] = {"mode": _MODES[mode]}
        if mode == NetworkMode.ALLOWLIST:
            network["allow"] = [rule.to_allow() for rule in self.rules]
        elif mode == NetworkMode.PROXY:
            if self.proxy_url:
                # pulsebox's proxy is its own (it filters by name and guards
                # rebinding); sending traffic through the caller's proxy
                # instead would be a different policy, not a weaker one.
                raise SandboxUnsupportedPolicyError(
                    "NetworkPolicy.proxy_url: pulsebox runs its own filtering proxy and cannot "
                    "chain to an external one; leave proxy_url unset and list host names as rules",
                    code="unsupported_policy", field="network")
            narrowed = [r for r in self.rules if r.port is not None or r.protocol != NetworkProtocol.ANY]
            if narrowed:
                # The proxy lets a name through on the ports it serves; dropping the
                # port from the rule would allow more than was asked.
                raise SandboxUnsupportedPolicyError(
                    f"NetworkRule({narrowed[0].destination!r}, port=..., protocol=...): PROXY mode "
                    "allows host names, not ports or protocols; use ALLOWLIST for those",
                    code="unsupported_policy", field="network")
            network["allow_domains"] = [rule.destination for rule in self.rules]
        elif self.rules:
            raise SandboxUnsupportedPolicyError(
                f"NetworkPolicy.rules: mode {mode.value} takes no rules (use ALLOWLIST or PROXY)",
                code="unsupported_policy", field="network")
        return network
