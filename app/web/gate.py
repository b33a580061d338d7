"""Per-backend concurrency limit with a visible FIFO queue.

A GPU server (or the 2-core Piper voice) degrades for everyone when too many streams run at
once (vLLM-Omni TTFP jumps 4-6x from c=4 to c=8), so each backend admits ``limit`` generations
and queues the rest in arrival order. Every waiter is told its position whenever it changes, so
the UI can show "queued: 2nd" instead of a silent wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Waiter:
    on_position: Callable[[int], None]
    future: asyncio.Future = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Gate:
    """``async with gate.slot(on_position): ...`` runs at most ``limit`` bodies at once."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("a concurrency limit must be at least 1")
        self.limit = limit
        self.active = 0
        self._waiters: list[_Waiter] = []

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def _notify(self) -> None:
        for i, w in enumerate(self._waiters):
            w.on_position(i + 1)

    def _release(self) -> None:
        while self._waiters:
            w = self._waiters.pop(0)
            if not w.future.done():
                w.future.set_result(None)  # the slot passes straight to the next waiter
                self._notify()
                return
        self.active -= 1

    @asynccontextmanager
    async def slot(
        self, on_position: Callable[[int], None] = lambda _p: None
    ) -> AsyncIterator[None]:
        if self.active < self.limit and not self._waiters:
            self.active += 1
        else:
            w = _Waiter(on_position)
            self._waiters.append(w)
            self._notify()
            try:
                await w.future
            except asyncio.CancelledError:
                if w in self._waiters:
                    self._waiters.remove(w)
                    self._notify()
                elif w.future.done() and not w.future.cancelled():
                    self._release()  # granted and cancelled in the same tick: hand it on
                raise
        try:
            yield
        finally:
            self._release()
