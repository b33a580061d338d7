"""Rate limits: a token bucket per key (in memory), and the admin login's back-off (in memory,
or in the shared database when several replicas serve one study).

Why here: the player's WebSocket (per-page stimulus and play-event rates), the arena and the
admin login each limit a client; the buckets are one object per app (made where the app is
built), never module-global state, and forget their oldest keys so a client with many
addresses cannot grow them without bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class KeyedRate:
    """A token bucket per key (``rate_per_s`` refill, ``burst`` deep); the oldest keys are
    forgotten past ``max_keys`` so an attacker with many keys cannot grow it without bound.

    One object per app (made where the app is built), never module-global state.
    """

    rate_per_s: float
    burst: float
    max_keys: int = 20_000
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)

    def take(self, key: str, now: float, cost: float = 1.0) -> float:
        """Spend ``cost`` tokens: 0.0 if allowed, else the seconds until it would be."""
        level, last = self._buckets.pop(key, (self.burst, now))
        level = min(self.burst, level + (now - last) * self.rate_per_s)
        if level >= cost:
            level -= cost
            wait = 0.0
        else:
            wait = (cost - level) / self.rate_per_s
        self._buckets[key] = (level, now)  # re-inserted last: dicts keep insertion order
        while len(self._buckets) > self.max_keys:
            self._buckets.pop(next(iter(self._buckets)))
        return wait


class FailureTally(Protocol):
    """Where wrong passwords are counted when replicas must share the count (the store's
    ``login_failures`` on PostgreSQL): each call is one atomic step in the database."""

    def failures(self, key: str) -> tuple[int, float]: ...

    def add_failure(self, key: str, now: float, forget_s: float) -> int: ...

    def clear_failures(self, key: str) -> None: ...


@dataclass
class LoginThrottle:
    """Wrong passwords per client key; after ``free_failures`` the client waits ``base_s``,
    doubling per further failure up to ``max_s``. Forgotten ``forget_s`` after the last one.
    Counted in memory, or in ``tally`` when one is given (replicas)."""

    free_failures: int = 3
    base_s: float = 2.0
    max_s: float = 900.0
    forget_s: float = 3600.0
    max_keys: int = 20_000
    _fails: dict[str, tuple[int, float]] = field(default_factory=dict)
    tally: FailureTally | None = None

    def _delay(self, n: int) -> float:
        return (
            0.0
            if n < self.free_failures
            else min(self.max_s, self.base_s * 2 ** (n - self.free_failures))
        )

    def wait_s(self, key: str, now: float) -> float:
        """Seconds before this client may try a password again (0: now)."""
        if self.tally is not None:
            n, last = self.tally.failures(key)
        else:
            n, last = self._fails.get(key, (0, 0.0))
        if n and now - last > self.forget_s:
            if self.tally is None:
                self._fails.pop(key, None)
            return 0.0
        return max(0.0, last + self._delay(n) - now)

    def failed(self, key: str, now: float) -> float:
        if self.tally is not None:
            return self._delay(self.tally.add_failure(key, now, self.forget_s))
        n = self._fails.pop(key, (0, 0.0))[0] + 1
        self._fails[key] = (n, now)
        while len(self._fails) > self.max_keys:
            self._fails.pop(next(iter(self._fails)))
        return self._delay(n)

    def succeeded(self, key: str) -> None:
        if self.tally is not None:
            self.tally.clear_failures(key)
        self._fails.pop(key, None)


__all__ = ["FailureTally", "KeyedRate", "LoginThrottle"]
