"""The session cap: after every ``break_after`` answered items a rater gets a break page, with
a minimum pause, and then continues where they were.

Why on the server: a break the page alone kept would end with a reload. The break's start is
stored with the rater (``test_raters.breaks``) the first time the status finds the rater at
a cap, so a reload shows the same break with the time left; a vote is refused until the
rater has ended it (:meth:`Breaks.resume`, allowed once the minimum pause has passed).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any

from app.listening.answers import Answer
from app.listening.flow import Denied, NotYet, RaterFlow
from app.store.listening import RaterSession, TestRow
from backends.errors import InvalidRequest

BREAK_AFTER_RANGE = (1, 500)
"""``break_after``: items between breaks (500 is the most items a rater can have)."""
BREAK_MIN_S = 60.0
"""The minimum pause of a break when the test does not set ``break_min_s``."""
BREAK_MIN_RANGE = (5.0, 3600.0)
"""``break_min_s``: 5 s to one hour."""


@dataclass(frozen=True)
class BreakState:
    """What the break page shows (``status()["break"]``)."""

    after: int
    """The answered items the break follows."""
    min_s: float
    left_s: float
    """Seconds until Continue is allowed (0: now)."""
    number: int
    """This is the rater's ``number``-th break (1-based)."""


class Resumed(Answer):
    """``POST /ll/listen/{id}/resume``: whether a break was ended (false: none was open)."""

    resumed: bool


def check_break_settings(after: Any, min_s: Any) -> tuple[int | None, float | None]:
    """The designer's ``break_after`` and ``break_min_s``, checked (None: no cap)."""
    if after in (None, "", 0):
        return None, None
    lo, hi = BREAK_AFTER_RANGE
    if not isinstance(after, int) or isinstance(after, bool) or not lo <= after <= hi:
        raise InvalidRequest(f"break_after must be a whole number of items within {lo}..{hi}")
    m = BREAK_MIN_S if min_s in (None, "") else min_s
    lo_s, hi_s = BREAK_MIN_RANGE
    if isinstance(m, bool) or not isinstance(m, int | float) or not lo_s <= float(m) <= hi_s:
        raise InvalidRequest(f"break_min_s must be within {lo_s:g}..{hi_s:g} seconds")
    return after, float(m)


def breaks_of(r: RaterSession) -> list[dict[str, Any]]:
    try:
        got = json.loads(r.breaks) if r.breaks else []
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def due(config: dict[str, Any], answered: int, total: int) -> bool:
    """Is a rater who answered ``answered`` of ``total`` items at a cap?"""
    n = config.get("break_after")
    return bool(n) and 0 < answered < total and answered % int(n) == 0


class Breaks(RaterFlow):
    """The break page's state, its start (stored once) and its end."""

    def break_state(self, t: TestRow, r: RaterSession, answered: int, total: int):
        """The open break of a rater at a cap (started now if it was not), else None."""
        if not due(t.config, answered, total):
            return None
        got = breaks_of(r)
        mine = next((b for b in got if b.get("after") == answered), None)
        if mine is not None and mine.get("ended"):
            return None
        now = time.time()
        if mine is None:
            mine = {"after": answered, "started": now, "ended": None}
            got.append(mine)
            self.tests.update_rater(t.test_id, r.rater_id, breaks=json.dumps(got))
        min_s = float(t.config.get("break_min_s") or BREAK_MIN_S)
        left = max(0.0, min_s - (now - float(mine["started"])))
        return BreakState(answered, min_s, math.ceil(left * 10) / 10, len(got))

    def require_no_break(self, t: TestRow, r: RaterSession) -> None:
        """A vote during a break is refused (the page shows the break instead)."""
        answered = len(self.tests.answered(t.test_id, r.rater_id))
        total = len(self.store.assignments(t.test_id, r.rater_id))
        if not due(t.config, answered, total):
            return
        mine = next((b for b in breaks_of(r) if b.get("after") == answered), None)
        if mine is None or not mine.get("ended"):
            raise Denied("take the break first: the test continues after it")

    def resume(self, test_id: str, token: str) -> dict[str, Any]:
        """End the rater's open break, once its minimum pause has passed (else 409)."""
        t = self.load_test(test_id)
        r = self.rater(test_id, token)
        answered = len(self.tests.answered(test_id, r.rater_id))
        total = len(self.store.assignments(test_id, r.rater_id))
        st = self.break_state(t, self.rater(test_id, token), answered, total)
        if st is None:
            return Resumed(resumed=False).wire()
        if st.left_s > 0:
            raise NotYet(f"the break lasts at least {st.min_s:g} s: {st.left_s:g} s left")
        got = breaks_of(self.rater(test_id, token))
        for b in got:
            if b.get("after") == answered and not b.get("ended"):
                b["ended"] = time.time()
        self.tests.update_rater(test_id, r.rater_id, breaks=json.dumps(got))
        return Resumed(resumed=True).wire()


__all__ = [
    "BREAK_AFTER_RANGE",
    "BREAK_MIN_RANGE",
    "BREAK_MIN_S",
    "BreakState",
    "Breaks",
    "Resumed",
    "breaks_of",
    "check_break_settings",
    "due",
]
