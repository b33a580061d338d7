"""A WebSocket's send queue with a byte budget: a page that does not read is slowed, then dropped.

Why: every server message to a page (a take's PCM frames, JSON replies) waits in the page's
queue until the socket can take it. A client that sends small requests and never reads the
answers (a 190-byte ``stimulus`` message queues a whole take) would otherwise grow the server's
memory without bound. So each queue counts its bytes:

* over ``soft_bytes`` the connection is *slowed*: the reader stops taking the client's messages
  (:meth:`Outbox.wait_for_room`) and producers that can wait (a stored take's replay) wait, so
  nothing new is queued on the client's behalf until it reads;
* a message that would take the queue over ``hard_bytes`` is not queued: the queue is marked
  ``overflowed`` and the connection is closed (1008, "not reading");
* a client that stays over the soft budget for ``stall_s`` is closed as well.

Messages are serialised when queued (JSON text or bytes), so the count is exact.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from typing import Any

from app.config import ENV_WS_STALL_S, WS_STALL_S, WebSettings

SOFT_BYTES = 2 * 1024 * 1024
"""About 40 s of 24 kHz mono PCM: more than a page's player ever needs queued at once."""
HARD_BYTES = 12 * 1024 * 1024
"""A take sent whole is one message (a 2-minute take at 48 kHz is 11 MB); beyond that, close."""
STALL_S = WS_STALL_S
"""How long a client may leave the queue over the soft budget before it is closed
(``$LISTENLAB_WS_STALL_S`` overrides it: :class:`app.config.WebSettings`)."""
ENV_STALL_S = ENV_WS_STALL_S
CLOSE_CODE = 1008
CLOSE_REASON = "the client is not reading its messages"


class Outbox:
    """A FIFO of serialised messages with a byte count (one per WebSocket; asyncio only)."""

    def __init__(
        self,
        soft_bytes: int = SOFT_BYTES,
        hard_bytes: int = HARD_BYTES,
        stall_s: float | None = None,
        on_overflow: Callable[[], None] | None = None,
    ):
        self.on_overflow = on_overflow
        """Called once, on the overflow (the socket's owner closes the connection)."""
        self.soft_bytes = soft_bytes
        self.hard_bytes = hard_bytes
        self.stall_s = stall_s if stall_s is not None else WebSettings.from_env().ws_stall_s
        self.bytes = 0
        self.peak_bytes = 0
        self.overflowed = False
        self._items: deque[str | bytes | None] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def put_nowait(self, obj: dict[str, Any] | str | bytes | None) -> bool:
        """Queue a message (``None`` ends the writer); False when it was refused (overflow)."""
        if obj is None:
            self._items.append(None)
            self._ready.set()
            return True
        if self.overflowed:
            return False
        m = obj if isinstance(obj, bytes | str) else json.dumps(obj, default=float)
        size = len(m)
        if self.bytes and self.bytes + size > self.hard_bytes:
            self.overflowed = True
            self._items.clear()  # the connection is closed: free what it held at once
            self.bytes = 0
            self._room.set()  # wake waiters so they see the overflow and give up
            self._ready.set()
            if self.on_overflow is not None:
                self.on_overflow()
            return False
        self._items.append(m)
        self.bytes += size
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        if self.bytes > self.soft_bytes:
            self._room.clear()
        self._ready.set()
        return True

    async def get(self) -> str | bytes | None:
        """The next message (``None`` = stop); after an overflow, ``None`` at once."""
        if self.overflowed:
            return None
        while not self._items:
            if self.overflowed:
                return None
            self._ready.clear()
            await self._ready.wait()
        m = self._items.popleft()
        if m is not None:
            self.bytes -= len(m)
            if self.bytes <= self.soft_bytes:
                self._room.set()
        return m

    @property
    def full(self) -> bool:
        return self.overflowed or self.bytes > self.soft_bytes

    async def wait_for_room(self, timeout: float | None = None) -> bool:
        """Wait until the queue is under its soft budget; False on overflow or after
        ``timeout`` (default ``stall_s``) without the client reading enough."""
        if self.overflowed:
            return False
        if not self.full:
            return True
        try:
            await asyncio.wait_for(self._room.wait(), self.stall_s if timeout is None else timeout)
        except TimeoutError:
            return False
        return not self.overflowed


__all__ = ["CLOSE_CODE", "CLOSE_REASON", "HARD_BYTES", "Outbox", "SOFT_BYTES", "STALL_S"]
