"""The client's own objects: policy, limits, network, secrets, lifecycle, errors (no sandbox)."""

from __future__ import annotations

import subprocess

import pytest

import pulsebox
from pulsebox import (ActionType, LifecycleState, NetworkMode, NetworkPolicy, NetworkRule,
                      PolicyDecision, PolicyRule, ResourcePolicy, SandboxExecution, SandboxPolicy,
                      SecretMode, SecretPolicy)


def test_policy_defaults_are_the_references():
    policy = SandboxPolicy()
    assert policy.evaluate(ActionType.READ, "x") == PolicyDecision.ALLOW
    for action in ("write", "delete", "rename", "shell", "network", "secrets"):
        assert policy.evaluate(action, "x") == PolicyDecision.DENY
    assert policy.requires_approval(ActionType.GIT) and policy.requires_approval(ActionType.PYTHON)
    assert SandboxPolicy(default_decisions={}).evaluate(ActionType.READ, "x") == PolicyDecision.DENY


def test_newest_rule_wins_and_targets_are_normalised():
    policy = SandboxPolicy()
    policy.add_rule(PolicyRule(ActionType.WRITE, "src/*", PolicyDecision.ALLOW))
    policy.add_rule(PolicyRule(ActionType.WRITE, "src/secret*", PolicyDecision.DENY))
    assert policy.is_allowed(ActionType.WRITE, "src/main.c")
    assert not policy.is_allowed(ActionType.WRITE, "SRC\\Secret.txt")
    assert policy.is_allowed(ActionType.WRITE, "//src//a.c/")
    assert policy.evaluate("write", "C:\\src\\b.c") == PolicyDecision.ALLOW


def test_parent_policy_answers_before_the_defaults():
    parent = SandboxPolicy(rules=[PolicyRule("*", "docs/*", PolicyDecision.ASK)])
    child = SandboxPolicy(rules=[PolicyRule(ActionType.SHELL, "*", PolicyDecision.ALLOW)],
                          parent_policy=parent)
    assert child.evaluate(ActionType.SHELL, "make") == PolicyDecision.ALLOW
    assert child.evaluate(ActionType.WRITE, "docs/a") == PolicyDecision.ASK
    flat = SandboxPolicy.from_dict(child.to_dict())
    for action, target in [("shell", "make"), ("write", "docs/a"), ("write", "x"), ("read", "y")]:
        assert flat.evaluate(action, target) == child.evaluate(action, target)


def test_policy_json_round_trips_and_the_cli_reads_it_the_same(tmp_path, pulsebox_env):
    policy = SandboxPolicy()
    policy.add_rule(PolicyRule(ActionType.SHELL, "*", PolicyDecision.ALLOW, "agent commands"))
    policy.add_rule(PolicyRule(ActionType.SHELL, "rm *", PolicyDecision.ASK))
    policy.add_rule(PolicyRule("*", "secret/*", PolicyDecision.DENY))
    assert SandboxPolicy.from_json(policy.to_json()).to_dict() == policy.to_dict()
    path = tmp_path / "policy.json"
    path.write_text(policy.to_json())
    binary = pulsebox_env["PULSEBOX_BIN"]
    check = subprocess.run([binary, "policy", "check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    codes = {0: PolicyDecision.ALLOW, 1: PolicyDecision.DENY, 2: PolicyDecision.ASK}
    for action, target in [("shell", "make"), ("shell", "rm -rf x"), ("read", "secret/k"),
                           ("write", "a"), ("git", "status"), ("read", "README")]:
        evaluated = subprocess.run([binary, "policy", "eval", "--policy", str(path), action, target],
                                   capture_output=True, text=True)
        assert codes[evaluated.returncode] == policy.evaluate(action, target), (action, target)


def test_policy_from_json_names_the_bad_field():
    with pytest.raises(ValueError, match=r"rules\[0\]"):
        SandboxPolicy.from_json('{"rules": [{"action": "fly", "decision": "allow"}]}')
    with pytest.raises(ValueError, match="colour"):
        SandboxPolicy.from_json('{"colour": 1}')


def test_limits_validate_and_map_to_the_protocol():
    with pytest.raises(ValueError, match="memory_bytes"):
        ResourcePolicy(memory_bytes=0)
    with pytest.raises(ValueError, match="wall_time_seconds"):
        ResourcePolicy(wall_time_seconds=-1)
    limits, unsupported = ResourcePolicy(memory_bytes=256 << 20, wall_time_seconds=2.5,
                                         cpu_quota_percent=50).to_protocol()
    assert limits["memory"] == 256 << 20 and limits["timeout"] == 2.5 and limits["cpus"] == 0.5
    assert limits["pids"] == 64 and unsupported == []
    assert ResourcePolicy(max_open_files=10).to_protocol()[1] == ["max_open_files"]
    assert isinstance(pulsebox.ResourceLimits(), ResourcePolicy)


def test_network_policy_maps_to_the_protocol():
    assert NetworkPolicy().to_protocol() == {"mode": "none"}
    assert NetworkPolicy(NetworkMode.LOCALHOST_ONLY).to_protocol() == {"mode": "localhost"}
    allow = NetworkPolicy(NetworkMode.ALLOWLIST, [NetworkRule("10.0.0.1", 443, "tcp"),
                                                  NetworkRule("fd00::1")]).to_protocol()
    assert allow == {"mode": "allowlist", "allow": ["10.0.0.1:443/tcp", "[fd00::1]"]}
    proxy = NetworkPolicy(NetworkMode.PROXY, [NetworkRule("pypi.org")]).to_protocol()
    assert proxy == {"mode": "proxy", "allow_domains": ["pypi.org"]}
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="ALLOWLIST"):
        NetworkPolicy(NetworkMode.PROXY, [NetworkRule("pypi.org", 443)]).to_protocol()
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="proxy_url"):
        NetworkPolicy(NetworkMode.PROXY, proxy_url="http://corp:3128").to_protocol()


def test_secret_policy_passes_named_values_only():
    env = {"API_TOKEN": "t0ken-value", "HOME": "/root"}
    assert SecretPolicy().to_protocol(env) == {}
    assert SecretPolicy(SecretMode.ALLOW_EXPLICIT, ["API_TOKEN"]).to_protocol(env) == {
        "API_TOKEN": "t0ken-value"}
    with pytest.raises(pulsebox.SandboxConfigError, match="MISSING"):
        SecretPolicy(SecretMode.ALLOW_EXPLICIT, ["MISSING"]).to_protocol(env)
    with pytest.raises(pulsebox.SandboxUnsupportedPolicyError, match="whole environment"):
        SecretPolicy(SecretMode.ALLOW_ALL).to_protocol(env)


def test_scrubber_redacts_registered_values_in_their_encoded_forms():
    scrubber = pulsebox.SecretScrubber(["s3cr/t value", "abc"])
    text = 'plain S3CR/T VALUE, url s3cr%2Ft%20value, json "s3cr/t value"'
    assert scrubber.redact(text).count("[REDACTED_SECRET]") == 3
    assert scrubber.redact("abc") == "abc"  # shorter than 4: not registered
    assert scrubber.contains_explicit_secret("x s3cr/t value y")


def test_lifecycle_allows_only_the_references_moves():
    execution = SandboxExecution("e1")
    for state in (LifecycleState.STARTING, LifecycleState.RUNNING, LifecycleState.COMPLETING,
                  LifecycleState.CLEANING, LifecycleState.FINALIZED):
        execution.transition(state)
    assert execution.is_terminal
    with pytest.raises(pulsebox.InvalidTransitionError):
        execution.transition(LifecycleState.RUNNING)
    with pytest.raises(pulsebox.InvalidTransitionError):
        SandboxExecution("e2").transition(LifecycleState.COMPLETING)


@pytest.mark.parametrize("code,cls", [
    ("policy_denied", pulsebox.SandboxPermissionError), ("unsupported_policy",
     pulsebox.SandboxUnsupportedPolicyError), ("unavailable", pulsebox.SandboxUnavailableError),
    ("busy", pulsebox.SandboxUnavailableError), ("invalid_field", pulsebox.SandboxConfigError),
    ("security", pulsebox.SandboxSecurityError), ("not_found", pulsebox.SandboxNotFoundError),
    ("internal", pulsebox.SandboxError)])
def test_error_codes_map_to_the_exception_classes(code, cls):
    error = pulsebox.error_from_protocol({"code": code, "message": "m", "field": "f"})
    assert type(error) is cls and error.code == code and error.field == "f"
    assert isinstance(error, pulsebox.SandboxError)
    if code == "policy_denied":
        assert isinstance(error, PermissionError)


def test_a_conflict_names_its_paths():
    error = pulsebox.error_from_protocol({"code": "conflict", "message": "m", "field": None,
                                          "paths": ["a", "b"]})
    assert isinstance(error, pulsebox.SandboxConcurrentModificationError)
    assert error.path == "a" and error.paths == ["a", "b"]
