"""Automatic refill: a test with ``target_valid`` keeps taking raters until every stimulus
has that many *valid* ratings, giving an excluded rater's place to the next joiner.

Why its own module: which raters count is the one rule the join (a new rater's design row),
the designer's report, the Tests tab and ``listenlab test results`` must agree on. A rater
counts (is *usable*) when they are still on their way (not finished, seen within the
dropout time, not screened out by the headphone screen) or finished and *valid*: the
results' screening (check items, traps, straight-lining, unplayed items…) keeps them in.
A finished rater the screening excludes frees their design row again, so the row's cells
are offered to the next joiner (reseval's ``extend``, Podonos' replacement of unreliable
raters). Without ``target_valid`` the older ``target_ratings`` rule stands: finished raters
count whatever the screening says.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from evaluation.listening.design import Design, RaterRow, all_row_cells

if TYPE_CHECKING:
    from app.store.listening import RaterSession, TestStore

DROPOUT_AFTER_S = 1800.0
"""A rater idle this long (no join or status call: the page makes one after every answer)
counts as dropped: their design row is given to the next joiner (the test's
``dropout_after_s`` overrides it)."""
MAX_TARGET_VALID = 10_000
"""The highest ``target_valid`` a test may ask (valid ratings per stimulus)."""
MAX_PLACES_COUNTED = 5_000
"""Places left are counted up to this many (the joins a test takes: ``MAX_RATERS``)."""


def excluded_raters(tests: TestStore, test_id: str) -> set[str]:
    """The raters the test's results exclude (the results' own screening rule)."""
    from evaluation.listening.results import screened_raters

    raters = screened_raters(tests.test_data(test_id, times=False))
    if raters.empty:
        return set()
    return set(raters.loc[raters["excluded"].astype(bool), "rater_id"])


class ExclusionCache:
    """The screening's exclusions of each test's *finished* raters, recomputed only when the
    set of finished raters changes: a join would otherwise screen the whole test each time
    (600 ms at 200 raters). A finished rater's answers are final, and every screening rule
    judges a rater by their own answers, so their outcome does not change."""

    def __init__(self) -> None:
        self._got: dict[str, tuple[frozenset[str], set[str]]] = {}
        self._lock = threading.Lock()

    def excluded(self, tests: TestStore, test_id: str) -> set[str]:
        done = frozenset(r.rater_id for r in tests.raters(test_id) if r.finished_at)
        with self._lock:
            hit = self._got.get(test_id)
        if hit is not None and hit[0] == done:
            return hit[1]
        got = excluded_raters(tests, test_id) & done
        with self._lock:
            self._got[test_id] = (done, got)
        return got


def usable(r: RaterSession, excluded: set[str], now: float, dropout_s: float) -> bool:
    """Does this rater hold their design row's place (see the module's docstring)?"""
    if r.screened_out_at or r.headphone_pass == 0:
        return False
    if r.finished_at:
        return r.rater_id not in excluded
    return bool(r.seen_at and now - r.seen_at <= dropout_s)


def rater_rows(
    raters: list[RaterSession], excluded: set[str], now: float, dropout_s: float
) -> list[RaterRow]:
    """What :func:`evaluation.listening.design.choose_row` needs of the test's raters."""
    return [RaterRow(r.row, usable(r, excluded, now, dropout_s)) for r in raters]


def places_left(design: Design, rows: list[RaterRow], target: int) -> int:
    """How many more raters, each finishing valid, bring every stimulus to ``target``
    usable ratings: the joins :func:`evaluation.listening.design.choose_row` would still take, counted with its rule
    (the row with the fewest ratings on its least-rated cell, then the fewest raters, then
    the lowest index), at most :data:`MAX_PLACES_COUNTED`."""
    cells = all_row_cells(design)
    n = len(cells)
    per_row = [0] * n
    count = {c: 0 for cs in cells for c in cs}
    for r in rows:
        if r.usable:
            per_row[r.row % n] += 1
            for c in cells[r.row % n]:
                count[c] += 1
    for k in range(MAX_PLACES_COUNTED):
        if not count or min(count.values()) >= target:
            return k
        row = min(range(n), key=lambda i: (min(count[c] for c in cells[i]), per_row[i], i))
        per_row[row] += 1
        for c in cells[row]:
            count[c] += 1
    return MAX_PLACES_COUNTED


@dataclass(frozen=True)
class Places:
    """Where a test with a target stands (``target`` None: it has none)."""

    target: int | None
    rule: str
    """``valid`` (``target_valid``: excluded raters' places reopen) or ``usable``
    (``target_ratings``), or ``none``."""
    stimuli: int
    lowest: int
    """The fewest ratings (of usable raters) any stimulus has now."""
    valid: int
    """Finished raters the screening keeps."""
    excluded: int
    """Finished raters the screening excludes (their places were reopened under ``valid``)."""
    active: int
    """Raters on their way (not finished, seen within the dropout time)."""
    places_left: int | None
    """New raters still needed, if every one finishes valid (None: no target)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One sentence for the Tests tab, the designer and ``listenlab test results``."""
        if self.target is None:
            return (
                f"No target: {self.valid} valid and {self.excluded} excluded raters finished, "
                f"{self.active} on their way."
            )
        what = "valid" if self.rule == "valid" else "usable"
        return (
            f"Places left: {self.places_left} (target {self.target} {what} ratings per "
            f"stimulus; the fewest now {self.lowest} of {self.stimuli} stimuli; "
            f"{self.valid} valid and {self.excluded} excluded raters finished, "
            f"{self.active} on their way)."
        )


def target_of(config: dict[str, Any]) -> tuple[int | None, str]:
    """The test's target and its rule: ``target_valid`` first, then ``target_ratings``."""
    if config.get("target_valid"):
        return int(config["target_valid"]), "valid"
    if config.get("target_ratings"):
        return int(config["target_ratings"]), "usable"
    return None, "none"


def places(
    design: Design,
    config: dict[str, Any],
    raters: list[RaterSession],
    excluded: set[str],
    now: float,
    dropout_s: float,
) -> Places:
    """:class:`Places` of a test from its raters and the screening's exclusions."""
    target, rule = target_of(config)
    ex = excluded if rule == "valid" else set()
    rows = rater_rows(raters, ex, now, dropout_s)
    cells = all_row_cells(design)
    count = {c: 0 for cs in cells for c in cs}
    for r in rows:
        if r.usable:
            for c in cells[r.row % len(cells)]:
                count[c] += 1
    finished = [r for r in raters if r.finished_at]
    return Places(
        target=target,
        rule=rule,
        stimuli=len(count),
        lowest=min(count.values(), default=0),
        valid=sum(1 for r in finished if r.rater_id not in excluded and usable(r, set(), now, 0)),
        excluded=sum(1 for r in finished if r.rater_id in excluded),
        active=sum(1 for r in raters if not r.finished_at and usable(r, set(), now, dropout_s)),
        places_left=None if target is None else places_left(design, rows, target),
    )


def test_places(tests: TestStore, test_id: str, now: float | None = None) -> Places:
    """:func:`places` of a stored test (its raters, the results' exclusions, its dropout)."""
    import time

    t = tests.require_test(test_id)
    return places(
        Design.from_dict(t.config["design"]),
        t.config,
        tests.raters(test_id),
        excluded_raters(tests, test_id),
        time.time() if now is None else now,
        float(t.config.get("dropout_after_s") or DROPOUT_AFTER_S),
    )


def raters_for_target(design: Design, target: int) -> int:
    """Raters, all valid, that bring a new test to ``target`` ratings per stimulus: the
    places to open on a crowd platform before any exclusion."""
    return places_left(design, [], target)


__all__ = [
    "DROPOUT_AFTER_S",
    "ExclusionCache",
    "MAX_PLACES_COUNTED",
    "MAX_TARGET_VALID",
    "Places",
    "excluded_raters",
    "places",
    "places_left",
    "rater_rows",
    "raters_for_target",
    "target_of",
    "test_places",
    "usable",
]
