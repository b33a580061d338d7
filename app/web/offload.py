"""Work that must not block the event loop, bounded in time and in how much runs at once.

Why: decoding an untrusted upload (a voice clip, a reference clip) can take seconds of CPU.
On the event loop it would stall every stream; in unbounded threads a burst of uploads would
stack decodes in memory. A thread cannot be killed, so a slot is held until the thread really
ends, even after its request has given up waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class OffloadTimeout(TimeoutError):
    """The work ran past its time limit (its thread may still be running)."""


@dataclass
class Offload:
    """At most ``concurrency`` calls at once in threads, each waited for ``timeout_s``."""

    concurrency: int
    timeout_s: float
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread; :class:`OffloadTimeout` past ``timeout_s``."""
        if self._slots is None:  # made on first use, inside the running loop
            self._slots = asyncio.Semaphore(self.concurrency)
        slots = self._slots
        await slots.acquire()
        task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        task.add_done_callback(lambda _t: slots.release())  # held until the thread really ends
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.timeout_s)
        except TimeoutError:
            raise OffloadTimeout(f"took longer than {self.timeout_s:.0f} s") from None


__all__ = ["Offload", "OffloadTimeout"]
