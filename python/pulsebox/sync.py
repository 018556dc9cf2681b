"""SyncSandbox: the Sandbox for scripts without asyncio (one private event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from .process import ProcessResult
from .sandbox import Sandbox


class SyncSandbox:
    """Every Sandbox method, blocking; `stream()` is a plain iterator."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sandbox = Sandbox(*args, **kwargs)
        self._loop = asyncio.new_event_loop()

    def initialize(self) -> None:
        self._loop.run_until_complete(self.sandbox.initialize())

    def execute_command(self, *args: Any, **kwargs: Any) -> ProcessResult:
        return self._loop.run_until_complete(self.sandbox.execute_command(*args, **kwargs))

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        events = self.sandbox.stream(*args, **kwargs)
        try:
            while True:
                try:
                    yield self._loop.run_until_complete(events.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._loop.run_until_complete(events.aclose())

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self.sandbox.close())
            self._loop.close()

    def __enter__(self) -> SyncSandbox:
        self.initialize()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # read_file, stage_write, commit_transaction, ...: already synchronous.
        return getattr(self.sandbox, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # sync.policy = ... sets the sandbox's policy, as on a Sandbox.
        if name in ("sandbox", "_loop"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.sandbox, name, value)
