"""A run's result: the reference's ProcessResult plus what pulsebox reports."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .limits import ExecutionMetrics


@dataclass
class ProcessResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_ms: float
    timed_out: bool = False
    truncated: bool = False
    pid: int | None = None
    overlay_path: Path | None = None
    metrics: ExecutionMetrics | None = None
    termination_reason: str | None = None
    # pulsebox's own
    enforcement: dict[str, str] = field(default_factory=dict)
    transaction: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    changes_status: dict[str, Any] = field(default_factory=dict)
    isolation_level: str | None = None
    exit_status: int | None = None
    run_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def event_text(event: dict[str, Any]) -> str:
    """An output event's data as text (bytes that are not UTF-8 replaced)."""
    if "data" in event:
        return str(event["data"])
    if "data_base64" in event:
        return base64.b64decode(event["data_base64"]).decode("utf-8", errors="replace")
    return ""


def result_from_run(result_event: dict[str, Any], stdout: str, stderr: str) -> ProcessResult:
    """The ProcessResult of a `result` event and the output events' text."""
    raw = result_event.get("result", {})
    m = raw.get("metrics") or {}
    metrics = ExecutionMetrics(
        elapsed_ms=float(m.get("elapsed_ms", 0.0)), cpu_time_ms=float(m.get("cpu_time_ms", 0.0)),
        peak_memory_bytes=int(m.get("peak_memory_bytes", 0)),
        process_count=int(m.get("process_count", 0)), output_bytes=int(m.get("output_bytes", 0)),
        exit_status=result_event.get("exit_status"),
        termination_reason=raw.get("termination_reason"))
    return ProcessResult(
        command=raw.get("command", ""), exit_code=int(raw.get("exit_code", -1)),
        stdout=stdout + raw.get("stdout", ""), stderr=stderr + raw.get("stderr", ""),
        duration_ms=float(raw.get("duration_ms", 0.0)), timed_out=bool(raw.get("timed_out")),
        truncated=bool(raw.get("truncated")), pid=raw.get("pid"), metrics=metrics,
        termination_reason=raw.get("termination_reason"),
        enforcement=dict(raw.get("enforcement") or {}), transaction=raw.get("transaction_id"),
        changes=list(raw.get("changes") or []), changes_status=dict(raw.get("changes_status") or {}),
        isolation_level=raw.get("isolation_level"), exit_status=result_event.get("exit_status"),
        run_id=result_event.get("run_id"), raw=raw)
