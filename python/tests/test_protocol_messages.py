"""Every request the client sends matches docs/schema/request.schema.json
(tests/protocol/validate_messages.py, as the C++ suites check theirs)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pulsebox
from conftest import REPO, make
from pulsebox import (NetworkMode, NetworkPolicy, NetworkRule, PolicyDecision, PolicyRule,
                      SandboxPolicy, SecretMode, SecretPolicy)
from pulsebox.transport_cli import CliTransport
from pulsebox.transport_socket import SocketTransport


def problems(kind: str, messages: list[dict]) -> str:
    schema_dir = os.environ.get("PULSEBOX_SCHEMA_DIR") or str(REPO / "docs" / "schema")
    validator = os.environ.get("PULSEBOX_SCHEMA_VALIDATOR") or str(
        REPO / "tests" / "protocol" / "validate_messages.py")
    done = subprocess.run([sys.executable, validator, schema_dir, kind],
                          input="".join(json.dumps(m) + "\n" for m in messages),
                          capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_a_run_request_with_every_option_matches_the_schema(workspace, monkeypatch):
    monkeypatch.setenv("PY_SCHEMA_SECRET", "value-1234")
    sandbox = pulsebox.Sandbox(
        workspace, policy=SandboxPolicy(rules=[PolicyRule("shell", "*", PolicyDecision.ALLOW)]),
        limits=pulsebox.ResourcePolicy(cpu_time_seconds=5, disk_bytes=1 << 20),
        network_policy=NetworkPolicy(NetworkMode.ALLOWLIST, [NetworkRule("10.1.2.3", 443, "tcp")]),
        secret_policy=SecretPolicy(SecretMode.ALLOW_EXPLICIT, ["PY_SCHEMA_SECRET"]),
        changes="discard", allow_weaker=["limits"], session="s", approver=lambda r: True)
    requests = [
        sandbox._run_request("make", "sub", {"CI": "1"}, "step-1", None, "input\n"),
        sandbox._run_request(["a", "b"], None, None, None, "other", b"\x00\xff"),
        make(workspace)._run_request("true", None, None, None, None, None),
    ]
    assert problems("request", requests) == ""


def test_the_review_requests_match_the_schema(workspace, monkeypatch):
    sent: list[dict] = []
    original = CliTransport.request

    def recording(self, request, timeout=60.0):
        sent.append(request)
        return original(self, request, timeout)

    monkeypatch.setattr(CliTransport, "request", recording)
    sandbox = make(workspace, transport="cli", secrets=["value-1234"], policy=SandboxPolicy(rules=[
        PolicyRule("write", "*", PolicyDecision.ALLOW), PolicyRule("delete", "*", PolicyDecision.ALLOW)]))
    tx = sandbox.create_transaction()
    sandbox.stage_write(tx, "w.txt", "text\n")
    sandbox.stage_write(tx, "b.bin", b"\x00\xff", mode=0o600)
    sandbox.stage_delete(tx, "a.txt")
    sandbox.preview_changes(tx)
    sandbox.list_transactions()
    sandbox.read_file("a.txt")
    sandbox.commit_transaction(tx)
    sandbox.discard_transaction(sandbox.create_transaction())
    kinds = {request["request"] for request in sent}
    assert kinds == {"create_transaction", "stage_write", "stage_delete", "diff", "changes",
                     "read_file", "commit", "discard"}
    assert problems("request", sent) == ""


def test_the_approval_answer_matches_the_schema(local_server, workspace, monkeypatch):
    answers: list[bytes] = []
    original = SocketTransport.open_run

    async def recording(self, request):
        run = await original(self, request)
        writer = run._writer
        write = writer.write
        writer.write = lambda data: (answers.append(data), write(data))[1]
        return run

    monkeypatch.setattr(SocketTransport, "open_run", recording)
    policy = SandboxPolicy(rules=[PolicyRule("shell", "*", PolicyDecision.ASK)])
    sandbox = make(workspace, transport="server", policy=policy, approver=lambda r: False)
    asyncio.run(sandbox.execute_command("true"))
    assert len(answers) == 1
    assert problems("request", [json.loads(answers[0])]) == ""
