"""What every test kind shares: the planned item, the pseudo systems of the check stimuli, the
vote a rater sends and the kind's interface.

Why a base module: the four kinds (:mod:`.mos`, :mod:`.ab`, :mod:`.mushra`, :mod:`.glitch`)
each hold their design, item payload, vote validation and results; the design planner, the
rater service and the results page ask the kind instead of branching on its name. This module
imports only the standard library, so ``listenlab test`` can name the kinds without loading
pandas or SciPy (the results import them when they run).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.design import Design
    from evaluation.listening.screening import TestScreening

ANCHOR = "__anchor__"
"""Pseudo system of the MOS gold "1" and the A/B check pairs' bad side: a clearly degraded
copy of a take (3.5 kHz low-pass, clicks and a gap)."""
ANCHOR_LOW = "__anchor_low__"
"""MUSHRA low anchor (BS.1534-3): the reference low-passed at 3.5 kHz, nothing else."""
ANCHOR_MID = "__anchor_mid__"
"""MUSHRA mid anchor (BS.1534-3): the reference low-passed at 7 kHz, nothing else."""
MUSHRA_ANCHORS = {ANCHOR_LOW: ("low", 3500.0), ANCHOR_MID: ("mid", 7000.0)}
"""Pseudo system -> (``anchor`` name stored in stimulus/assignment meta, low-pass cutoff Hz)."""
GOLD = "__gold__"
"""Pseudo system of the MOS gold "5": a natural recording or an admin-marked known-good clip."""
TRAP = "__trap__"
"""Pseudo system of the MOS trap: a real stimulus with a spoken instruction spliced in."""
GOLD_EXPECTED = {"anchor": 1.0, "gold": 5.0}
TRAP_ANSWER = 2
PLAYED_SHARE = 0.95
"""A clip counts as played to the end at this share of its duration (player rounding)."""
AB_MIN_MS = 3000.0
"""A/B and MUSHRA: playback of each stimulus needed before a vote (or all of a shorter one)."""


@dataclass(frozen=True)
class Slot:
    system: str
    role: str = "item"
    """``item``, ``reference`` (hidden reference) or ``anchor``."""


@dataclass(frozen=True)
class PlannedItem:
    position: int
    prompt: str | None
    slots: tuple[Slot, ...]
    """MOS/glitch: one slot; A/B: two (A = presented first/left); MUSHRA: the screen's stimuli."""
    role: str = "item"
    """``item``, ``gold`` (known answer, ±1) or ``trap`` ("please select answer 2")."""
    expected: float | None = None
    stimulus: str = "item"
    """Which stimulus kind to play: ``item``, ``anchor``, ``gold``, ``trap``, or ``ab_check``
    (an A/B pair of the anchor and the gold clip, by the slots' roles)."""
    meta: dict = field(default_factory=dict)


def pairs(systems: tuple[str, ...]) -> list[tuple[str, str]]:
    return list(itertools.combinations(systems, 2))


@dataclass(frozen=True)
class VoteContext:
    """What a kind needs to check one rater's answer and write its rows (the service fills it
    from the assignment and the server's play events)."""

    answer_id: str
    test_id: str
    rater_id: str
    assignment_id: str
    role: str
    expected: float | None
    condition: str | None
    takes: tuple[str, ...]
    roles: tuple[str, ...]
    systems: tuple[str | None, ...]
    prompt_id: str | None
    played: dict[int, float]
    created_at: str
    ab_mode: str = "cmos"
    marks: int = 0
    """Glitch hunts: the marks this rater stored on the clip (the answer closes the item)."""


@dataclass(frozen=True)
class Vote:
    """A checked answer: what the ``answers`` row keeps, and the kind's typed rows
    ``(table, row)`` written with it in one transaction."""

    payload: dict[str, Any]
    rows: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True)
class Familiar:
    """Where the familiarisation clips come from: ``take(kind, system, prompt)`` finds a
    stored stimulus's take id (or None)."""

    take: Callable[[str, str | None, str | None], str | None]
    seq: int
    natural: str | None


@dataclass(frozen=True)
class ResultContext:
    """How one test's results are computed: which raters are kept, and the words every
    method line shares."""

    keep: Callable[[pd.DataFrame], pd.DataFrame]
    screening: TestScreening
    mode: str
    who: str
    interval: str
    """How every mean's interval is computed (:data:`evaluation.inference.INTERVAL_METHOD`)."""


Table = tuple[str, "pd.DataFrame", str, str, str]
"""A results table: ``(name, frame, title, method, what the method assumes)``."""


class TestKind:
    """One test kind: its design, the item the page gets, its vote and its results.

    The defaults suit a one-clip kind (MOS, glitch hunt); a kind overrides what differs."""

    __test__ = False  # not a pytest class

    name = ""
    title = ""
    min_systems = 1
    max_systems = 64
    """The most systems a test of this kind takes (a rater hears as many as their items allow;
    consecutive raters continue the cycle: :mod:`evaluation.listening.design`)."""
    needs_reference = False
    """A design names a reference system (MUSHRA); a natural recording is the default."""
    partial_cycles = True
    """May a rater hear fewer systems than the test has (consecutive raters continuing the
    cycle)? Not MUSHRA: every screen holds every system."""
    show_text = False
    """Does the vote page show the prompt's text unless the test says otherwise?"""
    paired = False
    """An item is a pair of clips, the second stored as the assignment's ``take_b`` (A/B)."""
    whole_delivery = False
    """May a stimulus be sent whole at once for the page to switch between (MUSHRA)?"""
    counts_marks = False
    """The answer records how many glitch marks the rater made."""

    # -- design

    def validate(self, d: Design) -> None:
        """What this kind asks of a design beyond :meth:`Design.validate`'s rules."""

    def too_many_systems(self, d: Design) -> str:
        """Why a design with more than :attr:`max_systems` systems is refused."""
        return f"{len(d.systems)} systems; a {self.title} test takes at most {self.max_systems}"

    def units(self, d: Design) -> int:
        """How many design cells one item cycles through (systems, or pairs for A/B)."""
        return len(d.systems)

    def balanced_items(self, d: Design) -> int:
        """Items per rater rounded down to a multiple of the cycle (at least one cycle)."""
        u = self.units(d)
        n = min(d.items_per_rater, len(d.prompts) * u)  # each (prompt, unit) at most once
        if d.partial:  # fewer than one cycle: raters in a row continue it
            return max(1, n)
        return max(u, n - n % u)

    def plan_items(
        self, d: Design, prompts: list[str], unit: Callable[[int, int], int], rng: random.Random
    ) -> list[PlannedItem]:
        """The rated items in design order; ``unit(k, units)`` is the Latin-square cell."""
        return [
            PlannedItem(0, prompts[k], (Slot(d.systems[unit(k, len(d.systems))]),))
            for k in range(len(prompts))
        ]

    def checks(self, d: Design) -> list[PlannedItem]:
        """The screening items added to every rater's list."""
        return []

    def wants_gold(self, screening: bool) -> bool:
        """Would a test of this kind use a known-good gold "5" clip, if there is one?"""
        return False

    def extra_stimuli(self, d: Design) -> frozenset[str]:
        """The stimuli made beside the items: ``lowpass_anchors`` (MUSHRA), ``degraded_anchor``
        (MOS gold "1", A/B check pairs' bad side), ``check_clean`` (A/B check pairs' clean
        side), ``gold`` (MOS gold "5") and ``trap`` (MOS)."""
        return frozenset()

    # -- the item the page gets

    def labels(self, n: int) -> list[str]:
        return ["Play"]

    def need_ms(self, duration_ms: float) -> float:
        """Playback of one stimulus the server needs before it takes a vote."""
        return PLAYED_SHARE * duration_ms

    def slot_label(self, i: int, n: int) -> str:
        return "the clip" if n == 1 else f"stimulus {i + 1}"

    def familiar(self, d: Design, f: Familiar) -> list[tuple[str, str | None]]:
        """``(label, take id)`` of the clips that show the scale's ends before the items."""
        turn = d.systems[f.seq % len(d.systems)]
        return [("An example clip", f.take("item", turn, d.prompts[0]))]

    # -- the vote

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        raise NotImplementedError

    # -- results

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """This kind's tables of one test (none while it has no answers of this kind)."""
        return []

    def screening_text(self, scr: TestScreening) -> str | None:
        """This kind's screening rule, for the ``raters`` table's method line."""
        return None

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, str] | None:
        """``(frame, label column, value column, scale)`` of the results plot, if this kind
        has one and its table is not empty."""
        return None


def require_int(v: Any, low: int, high: int, message: str) -> int:
    """An integer answer within ``low..high`` (a JSON ``true`` is not 1)."""
    from backends.errors import InvalidRequest

    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise InvalidRequest(message)
    return v


def not_empty(df: pd.DataFrame | None) -> bool:
    return df is not None and not df.empty


__all__ = [
    "AB_MIN_MS",
    "ANCHOR",
    "ANCHOR_LOW",
    "ANCHOR_MID",
    "GOLD",
    "GOLD_EXPECTED",
    "MUSHRA_ANCHORS",
    "PLAYED_SHARE",
    "TRAP",
    "TRAP_ANSWER",
    "Familiar",
    "PlannedItem",
    "ResultContext",
    "Slot",
    "Table",
    "TestKind",
    "Vote",
    "VoteContext",
    "not_empty",
    "pairs",
    "require_int",
]
