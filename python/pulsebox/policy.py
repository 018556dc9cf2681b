"""The action policy: the reference's SandboxPolicy, in pulsebox's policy file format.

`to_json()` emits exactly what `pulsebox policy check FILE` reads: `defaults`
and `rules` in priority order (the newest rule first, as the reference adds
rules at the front). The server evaluates the policy it is sent; `evaluate()`
here answers the same question for the caller's own decisions.
"""

from __future__ import annotations

import enum
import fnmatch
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any


class ActionType(str, enum.Enum):
    READ = "read"
    WRITE = "write"
    DELETE = "delete"
    RENAME = "rename"
    SHELL = "shell"
    GIT = "git"
    PYTHON = "python"
    NETWORK = "network"
    SECRETS = "secrets"


class PolicyDecision(str, enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


REFERENCE_DEFAULTS: dict[ActionType, PolicyDecision] = {
    ActionType.READ: PolicyDecision.ALLOW,
    ActionType.WRITE: PolicyDecision.DENY,
    ActionType.DELETE: PolicyDecision.DENY,
    ActionType.RENAME: PolicyDecision.DENY,
    ActionType.SHELL: PolicyDecision.DENY,
    ActionType.NETWORK: PolicyDecision.DENY,
    ActionType.SECRETS: PolicyDecision.DENY,
    ActionType.GIT: PolicyDecision.ASK,
    ActionType.PYTHON: PolicyDecision.ASK,
}

_DRIVE = re.compile(r"^[a-z]:")
_SLASHES = re.compile(r"/{2,}")


def normalize_target(target: str) -> str:
    """NFC, `\\` to `/`, lower case, drive letter and outer slashes stripped, `//` collapsed."""
    text = unicodedata.normalize("NFC", str(target)).replace("\\", "/").lower()
    text = _DRIVE.sub("", text)
    return _SLASHES.sub("/", text).strip("/")


@dataclass
class PolicyRule:
    """A rule: `action` ("*" or an ActionType), a glob over the normalised target, a decision."""

    action: ActionType | str
    target_pattern: str = "*"
    decision: PolicyDecision = PolicyDecision.DENY
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action != "*":
            self.action = ActionType(self.action)
        self.decision = PolicyDecision(self.decision)
        if not self.target_pattern:
            raise ValueError("PolicyRule.target_pattern: expected a non-empty glob")

    def matches(self, action: ActionType, target: str) -> bool:
        if self.action != "*" and self.action != action:
            return False
        return fnmatch.fnmatchcase(normalize_target(target), normalize_target(self.target_pattern))

    def to_dict(self) -> dict[str, str]:
        action = "*" if self.action == "*" else ActionType(self.action).value
        return {"action": action, "target": self.target_pattern,
                "decision": self.decision.value, "reason": self.reason}


class SandboxPolicy:
    """ALLOW/DENY/ASK per action and target; the newest matching rule wins."""

    def __init__(
        self,
        default_decisions: dict[ActionType, PolicyDecision] | None = None,
        rules: list[PolicyRule] | None = None,
        parent_policy: SandboxPolicy | None = None,
    ) -> None:
        self.default_decisions = dict(REFERENCE_DEFAULTS if default_decisions is None
                                      else default_decisions)
        # Newest first: rules[0] is the highest priority.
        self.rules: list[PolicyRule] = list(rules or [])
        self.parent_policy = parent_policy

    def add_rule(self, rule: PolicyRule) -> None:
        self.rules.insert(0, rule)

    def _decide(self, action: ActionType, target: str) -> PolicyDecision | None:
        for rule in self.rules:
            if rule.matches(action, target):
                return rule.decision
        if self.parent_policy is not None:
            inherited = self.parent_policy._decide(action, target)
            if inherited is not None:
                return inherited
        return self.default_decisions.get(action)

    def evaluate(self, action: ActionType | str, target: str = "*") -> PolicyDecision:
        return self._decide(ActionType(action), target) or PolicyDecision.DENY

    def is_allowed(self, action: ActionType | str, target: str = "*") -> bool:
        return self.evaluate(action, target) == PolicyDecision.ALLOW

    def requires_approval(self, action: ActionType | str, target: str = "*") -> bool:
        return self.evaluate(action, target) == PolicyDecision.ASK

    def _flat_rules(self) -> list[PolicyRule]:
        parent = self.parent_policy._flat_rules() if self.parent_policy else []
        return self.rules + parent

    def _flat_defaults(self) -> dict[ActionType, PolicyDecision]:
        # A parent's default answers before this policy's own (as _decide does).
        merged = dict(self.default_decisions)
        if self.parent_policy is not None:
            merged.update(self.parent_policy._flat_defaults())
        return merged

    def to_dict(self) -> dict[str, Any]:
        """The policy as pulsebox's policy file holds it (a parent policy folded in)."""
        return {
            "defaults": {a.value: d.value for a, d in self._flat_defaults().items()},
            "rules": [rule.to_dict() for rule in self._flat_rules()],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> SandboxPolicy:
        if not isinstance(document, dict):
            raise ValueError("policy: expected an object with \"defaults\" and \"rules\"")
        unknown = set(document) - {"defaults", "rules"}
        if unknown:
            raise ValueError(f"policy: {sorted(unknown)[0]}: unknown key (expected \"defaults\" or \"rules\")")
        defaults = dict(REFERENCE_DEFAULTS)
        for word, decision in (document.get("defaults") or {}).items():
            try:
                defaults[ActionType(str(word).lower())] = PolicyDecision(str(decision).lower())
            except ValueError as error:
                raise ValueError(f"policy: defaults.{word}: {error}") from None
        rules = []
        for index, item in enumerate(document.get("rules") or []):
            if not isinstance(item, dict) or "action" not in item or "decision" not in item:
                raise ValueError(f"policy: rules[{index}]: expected an object with action and decision")
            unknown = set(item) - {"action", "target", "target_pattern", "decision", "reason"}
            if unknown:
                raise ValueError(f"policy: rules[{index}].{sorted(unknown)[0]}: unknown key")
            try:
                action = item["action"] if item["action"] == "*" else ActionType(str(item["action"]).lower())
                rules.append(PolicyRule(action, item.get("target", item.get("target_pattern", "*")),
                                        PolicyDecision(str(item["decision"]).lower()),
                                        str(item.get("reason", ""))))
            except ValueError as error:
                raise ValueError(f"policy: rules[{index}]: {error}") from None
        return cls(defaults, rules)

    @classmethod
    def from_json(cls, text: str) -> SandboxPolicy:
        return cls.from_dict(json.loads(text))
