"""Resource limits: the reference's ResourcePolicy, mapped to the protocol's `limits`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

GIB = 1 << 30
MIB = 1 << 20


@dataclass
class ResourcePolicy:
    """The reference's limits and defaults; every value given must be > 0."""

    cpu_quota_percent: float = 100
    cpu_time_seconds: float | None = None
    memory_bytes: int = GIB
    swap_bytes: int = GIB
    disk_bytes: int | None = None
    max_processes: int = 64
    max_open_files: int = 256
    max_output_bytes: int = 5 * MIB
    wall_time_seconds: float = 30
    termination_grace_seconds: float = 1.5
    working_directory_bytes: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{type(self).__name__}.{f.name}: expected a number > 0, got {value!r}")

    def to_protocol(self) -> tuple[dict[str, Any], list[str]]:
        """The request's `limits`, and the names of limits pulsebox cannot set (not default)."""
        limits: dict[str, Any] = {
            "memory": int(self.memory_bytes),
            "swap": int(self.swap_bytes),
            "pids": int(self.max_processes),
            "cpus": self.cpu_quota_percent / 100.0,
            "timeout": self.wall_time_seconds,
            "max_output": int(self.max_output_bytes),
        }
        if self.cpu_time_seconds is not None:
            limits["cpu_time"] = self.cpu_time_seconds
        disk = self.disk_bytes or self.working_directory_bytes
        if disk is not None:
            limits["disk"] = int(disk)
        unsupported = []
        if self.max_open_files != 256:
            unsupported.append("max_open_files")
        if self.termination_grace_seconds != 1.5:
            unsupported.append("termination_grace_seconds")
        if (self.disk_bytes is not None and self.working_directory_bytes is not None
                and self.disk_bytes != self.working_directory_bytes):
            unsupported.append("working_directory_bytes")
        return limits, unsupported


class ResourceLimits(ResourcePolicy):
    """The reference's other name for the same limits."""


@dataclass
class ExecutionMetrics:
    elapsed_ms: float = 0.0
    cpu_time_ms: float = 0.0
    peak_memory_bytes: int = 0
    process_count: int = 0
    output_bytes: int = 0
    exit_status: int | None = None
    termination_reason: str | None = None
