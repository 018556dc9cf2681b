"""The reference's execution lifecycle: states and the moves allowed between them."""

from __future__ import annotations

import enum
import time
from typing import Any


class LifecycleState(str, enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    COMPLETING = "completing"
    FAILED = "failed"
    CLEANING = "cleaning"
    FINALIZED = "finalized"
    RECOVERY_REQUIRED = "recovery_required"


S = LifecycleState
ALLOWED_TRANSITIONS: dict[LifecycleState, frozenset[LifecycleState]] = {
    S.CREATED: frozenset({S.STARTING, S.FAILED, S.CLEANING}),
    S.STARTING: frozenset({S.RUNNING, S.FAILED, S.CLEANING}),
    S.RUNNING: frozenset({S.COMPLETING, S.STOPPING, S.FAILED}),
    S.STOPPING: frozenset({S.FAILED, S.CLEANING}),
    S.COMPLETING: frozenset({S.CLEANING, S.FAILED}),
    S.FAILED: frozenset({S.CLEANING}),
    S.CLEANING: frozenset({S.FINALIZED, S.RECOVERY_REQUIRED}),
    S.FINALIZED: frozenset(),
    S.RECOVERY_REQUIRED: frozenset(),
}


class InvalidTransitionError(RuntimeError):
    pass


class SandboxExecution:
    """One execution's state; every move is recorded in `history` (and the audit logger, if any)."""

    def __init__(self, execution_id: str, audit_logger: Any = None) -> None:
        self.execution_id = execution_id
        self.state = LifecycleState.CREATED
        self.audit_logger = audit_logger
        self.history: list[tuple[float, LifecycleState, LifecycleState]] = []

    def transition(self, new_state: LifecycleState) -> None:
        new_state = LifecycleState(new_state)
        if new_state not in ALLOWED_TRANSITIONS[self.state]:
            raise InvalidTransitionError(
                f"execution {self.execution_id}: {self.state.value} -> {new_state.value} is not allowed")
        self.history.append((time.time(), self.state, new_state))
        if self.audit_logger is not None:
            self.audit_logger.record(action="lifecycle-transition", target=self.execution_id,
                                     decision="allow", detail=f"{self.state.value} -> {new_state.value}")
        self.state = new_state

    @property
    def is_terminal(self) -> bool:
        return not ALLOWED_TRANSITIONS[self.state]
