"""Balanced listening-test designs: which rater hears which system on which prompt, in what order.

Why a design and not random draws: with a handful of raters, random assignment leaves one system
with twice the votes of another and confounds systems with prompts. Here rater ``r`` (the r-th
rater to join, 0-based) gets a Latin-square row:

* item ``k`` uses system ``(k + r) mod S`` (so every rater hears every system equally often when
  the items per rater are a multiple of ``S``), and
* a block of prompts shared by a group of ``S`` consecutive raters, so within each group every
  prompt is heard once with every system (prompt/system pairs balanced across raters).

With more systems (or A/B pairs) than items per rater (``n < S``: a 50-system test, 10 items
each), a rater cannot hear every system: consecutive raters continue one cycle instead. Rater
``r``'s item ``k`` is the ``g = r·n + k``-th cell of the test, system ``g mod S`` on prompt
``(g mod S + g div S) mod P``, so ``S / gcd(n, S)`` raters in a row cover every system once and
``lcm(n, S·P) / n`` raters every (system, prompt) cell once (:func:`full_balance_raters`).
Tests made before this (``partial_rows`` false) keep their rounding up to one whole cycle.

The rater's items are then shuffled with a seed derived from the test seed and ``r`` (so a
resumed session gets the same order), and screening items (low anchor, gold, trap) are put at
random positions drawn per rater (never first, never two in a row when the list is long
enough), so a bot cannot learn where they sit. A/B sides are randomised but balanced (half the
items swapped); MUSHRA screens show every system plus the hidden reference and the two
BS.1534-3 anchors (the reference low-passed at 3.5 kHz and at 7 kHz) in a shuffled order.

Gold "5" (MOS) is only ever a natural recording or a clip the admin marked as known-good
(:data:`GOLD`, ``Design.gold``): a take of a system under test would make raters who judge that
system honestly fail the check.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from dataclasses import dataclass

from evaluation.listening.kinds import NAMES, TestKind, kind_of
from evaluation.listening.kinds.ab import MODES as AB_MODES
from evaluation.listening.kinds.ab import checks as ab_checks
from evaluation.listening.kinds.base import (
    ANCHOR,
    ANCHOR_LOW,
    ANCHOR_MID,
    GOLD,
    GOLD_EXPECTED,
    MUSHRA_ANCHORS,
    TRAP,
    TRAP_ANSWER,
    PlannedItem,
    Slot,
    pairs,
)

MAX_ITEMS_PER_RATER = 500
KINDS = NAMES
"""The test kinds a design can have (:mod:`evaluation.listening.kinds`)."""


@dataclass(frozen=True)
class Design:
    kind: str
    systems: tuple[str, ...]
    prompts: tuple[str, ...]
    items_per_rater: int
    reference: str | None = None
    """MUSHRA (required): the system shown as the open reference (and hidden among the
    stimuli); the anchors are made from its takes. Usually the ``natural`` recordings."""
    ab_mode: str = AB_MODES[0]
    """A/B: ``cmos`` (-3..+3) or ``forced`` (A or B) (:data:`evaluation.listening.kinds.ab.MODES`;
    stored in every design, whatever its kind)."""
    screening: bool = True
    """MOS: add a low anchor, a gold item and a trap item to every rater's list. A/B: add two
    check pairs, the low anchor against its clean source (once on each side)."""
    seed: int = 0
    gold: bool = False
    """MOS: a known-good gold "5" stimulus exists (:data:`GOLD`: a natural recording or an
    admin-marked clip). Without one only the low-anchor gold "1" is used."""
    legacy: bool = False
    """A test stored before the BS.1534-3 anchors and the gold rule (its design has no
    ``gold`` key): planned as it was then (one MUSHRA anchor, optional reference, the first
    system's take as gold), so its stored stimuli still serve new raters."""
    partial_rows: bool = False
    """A rater may rate fewer items than one cycle of systems (or pairs): consecutive raters
    continue the cycle (see the module's docstring). False for tests made before, whose raters
    got at least one whole cycle."""
    check_variants: int = 0
    """How many of the first prompts the check items are made from (each check stimulus once
    per prompt); each rater gets them from prompts chosen by their place in the test
    (:func:`check_prompts`), the anchor, the gold and the trap from different prompts when
    there are three or more. 0: one set, all from the first prompt (tests made before)."""

    @property
    def test_kind(self) -> TestKind:
        return kind_of(self.kind)

    def validate(self) -> Design:
        kind = self.test_kind
        if len(set(self.systems)) != len(self.systems) or not self.systems:
            raise ValueError("a test needs at least one system, each named once")
        if len(self.systems) < kind.min_systems:  # 2 for A/B and MUSHRA
            least = {2: "two", 3: "three"}.get(kind.min_systems, str(kind.min_systems))
            raise ValueError(f"a {self.kind} test needs at least {least} systems")
        if not self.prompts:
            raise ValueError("a test needs at least one prompt")
        if self.items_per_rater < 1 or self.items_per_rater > MAX_ITEMS_PER_RATER:
            raise ValueError(f"items per rater must be within 1..{MAX_ITEMS_PER_RATER}")
        if len(self.systems) > kind.max_systems:
            raise ValueError(kind.too_many_systems(self))
        if self.reference is not None and self.reference not in self.systems:
            raise ValueError(f"the reference {self.reference!r} is not one of the systems")
        kind.validate(self)
        if self.ab_mode not in AB_MODES:
            raise ValueError(f"A/B mode must be {' or '.join(AB_MODES)}")
        return self

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "systems": list(self.systems),
            "prompts": list(self.prompts),
            "items_per_rater": self.items_per_rater,
            "reference": self.reference,
            "ab_mode": self.ab_mode,
            "screening": self.screening,
            "seed": self.seed,
            "gold": self.gold,
            **({"legacy": True} if self.legacy else {}),
            **({"check_variants": self.check_variants} if self.check_variants else {}),
            **({"partial_rows": True} if self.partial_rows else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Design:
        return cls(
            kind=d["kind"],
            systems=tuple(d["systems"]),
            prompts=tuple(d["prompts"]),
            items_per_rater=int(d["items_per_rater"]),
            reference=d.get("reference"),
            ab_mode=d.get("ab_mode", AB_MODES[0]),
            screening=bool(d.get("screening", True)),
            seed=int(d.get("seed", 0)),
            gold=bool(d.get("gold", False)),
            legacy=bool(d.get("legacy", "gold" not in d)),
            check_variants=int(d.get("check_variants", 0)),
            partial_rows=bool(d.get("partial_rows", False)),
        )

    @property
    def units(self) -> int:
        """How many design cells one item cycles through (systems, or system pairs for A/B)."""
        return self.test_kind.units(self)

    @property
    def balanced_items(self) -> int:
        """Items per rater rounded down to a multiple of the cycle (at least one cycle; fewer
        than one cycle as asked when :attr:`partial_rows`)."""
        return self.test_kind.balanced_items(self)

    @property
    def partial(self) -> bool:
        """Do raters get fewer items than one cycle (consecutive raters continue it)?"""
        return (
            self.partial_rows
            and self.test_kind.partial_cycles
            and self.items_per_rater < self.units
        )


def _prompt_block(d: Design, rater_seq: int, n: int) -> list[str]:
    group = rater_seq // max(1, d.units)
    start = (group * n) % len(d.prompts)
    return [d.prompts[(start + k) % len(d.prompts)] for k in range(n)]


def _unit(k: int, rater_seq: int, n_prompts: int, units: int) -> int:
    """Latin-square row ``rater_seq``: item ``k`` uses unit ``(k + r) mod U``, so every ``U``
    consecutive items cover every unit (also with fewer prompts than units); after
    ``lcm(P, U)`` items, where a (prompt, unit) cell would come back, shift by one, so a rater
    never gets the same cell twice."""
    return (k + rater_seq + k // math.lcm(n_prompts, units)) % units


def _partial_cells(d: Design, rater_seq: int, n: int) -> tuple[list[str], list[int]]:
    """Prompts and units of a partial row: cell ``g = r·n + k`` of the test is unit
    ``g mod U`` on prompt ``(g mod U + g div U) mod P``."""
    u, p = d.units, len(d.prompts)
    g = [rater_seq * n + k for k in range(n)]
    return [d.prompts[(x % u + x // u) % p] for x in g], [x % u for x in g]


def check_positions(n_items: int, n_checks: int, rng: random.Random) -> list[int]:
    """Where the check items go in a list of ``n_items`` (ascending insertion indices).

    Random per rater, never first (a rater warms up on a real item) and, when the list has
    room, never two checks in a row, so they cannot be found by position."""
    total = n_items + n_checks
    slots = list(range(1, total)) if total > n_checks else list(range(total))
    spaced = n_items >= n_checks + 1
    for _ in range(200):
        pos = sorted(rng.sample(slots, n_checks))
        if not spaced or all(b - a >= 2 for a, b in itertools.pairwise(pos)):
            return pos
    return sorted(rng.sample(slots, n_checks))


CHECK_VARIANTS = 4
"""New tests make their check stimuli from this many prompts (fewer when there are fewer)."""


def check_prompts(design: Design, seq: int) -> dict[str, str | None]:
    """The prompt each check stimulus of rater ``seq`` comes from: ``anchor``, ``gold``,
    ``trap`` and the A/B check pairs (``ab_a``, ``ab_b``). Turns through the first
    :attr:`Design.check_variants` prompts, one step per rater, so raters in a row get
    different clips, and one rater's checks come from different prompts (when there are 3)."""
    k = design.check_variants
    if k <= 0:
        return dict.fromkeys(("anchor", "gold", "trap", "ab_a", "ab_b"))
    p = design.prompts

    def at(step: int) -> str:
        return p[(seq + step) % k]

    return {"anchor": at(0), "gold": at(1), "trap": at(2), "ab_a": at(0), "ab_b": at(1)}


def _with_check_prompts(checks: list[PlannedItem], where: dict[str, str | None]):
    out = []
    for c in checks:
        key = c.stimulus if c.stimulus != "ab_check" else f"ab_{c.meta.get('clean', 'a')}"
        prompt = where.get(key)
        out.append(PlannedItem(c.position, prompt, c.slots, c.role, c.expected, c.stimulus, c.meta))
    return out


def plan(design: Design, rater_seq: int, order_seed: int | None = None) -> list[PlannedItem]:
    """The ordered items of design row ``rater_seq`` (deterministic: resumable). The order
    and the check positions are drawn from ``order_seed`` (default: the row), so two raters
    given the same row (a reissued one) still get their own order."""
    d = design.validate()
    rng = random.Random(f"{d.seed}:{rater_seq if order_seed is None else order_seed}")
    n = d.balanced_items
    kind = d.test_kind
    if d.partial:
        prompts, units_of = _partial_cells(d, rater_seq, n)

        def unit(k: int, units: int) -> int:
            return units_of[k]
    else:
        prompts = _prompt_block(d, rater_seq, n)

        def unit(k: int, units: int) -> int:
            return _unit(k, rater_seq, len(d.prompts), units)

    items = kind.plan_items(d, prompts, unit, rng)
    rng.shuffle(items)
    seq = rater_seq if order_seed is None else order_seed
    checks = _with_check_prompts(kind.checks(d), check_prompts(d, seq))
    if checks:
        rng.shuffle(checks)
        for spot, c in zip(check_positions(len(items), len(checks), rng), checks, strict=True):
            items.insert(spot, c)
    return [
        PlannedItem(i, it.prompt, it.slots, it.role, it.expected, it.stimulus, it.meta)
        for i, it in enumerate(items)
    ]


def rows(design: Design) -> int:
    """How many distinct design rows there are: row ``r`` and ``r + rows`` hold the same
    (system, prompt) cells (the Latin square repeats every ``units`` rows, the prompt blocks
    every ``P / gcd(n, P)`` groups)."""
    d = design.validate()
    n, p = d.balanced_items, len(d.prompts)
    if d.partial:  # the cells repeat every S·P cells, i.e. after lcm(n, S·P) / n raters
        return math.lcm(n, d.units * p) // n
    return max(1, d.units) * (p // math.gcd(n, p))


Cell = tuple[tuple[str, ...], str | None]
"""One rated stimulus of the design: the systems heard together (sorted) and the prompt."""


def row_cells(design: Design, row: int) -> list[Cell]:
    """The design cells (rated items, not checks) of one row."""
    d = design.validate()
    if d.partial:
        return _partial_row_cells(d, _unit_cells(d), row)
    return [
        (tuple(sorted(sl.system for sl in it.slots)), it.prompt)
        for it in plan(design, row)
        if it.role == "item"
    ]


def full_balance_raters(design: Design) -> int | None:
    """The fewest raters (given rows 0, 1, 2 … in turn, each finishing) after which every
    design cell (system or pair x prompt) has been rated equally often: a study is fully
    balanced at a multiple of this number. None when no number of raters balances it (the
    rows repeat after :func:`rows`; if they are not balanced by then, they never are)."""
    cells = all_row_cells(design)
    every = {c for cs in cells for c in cs}
    count = dict.fromkeys(every, 0)
    spread = {0: len(every)}  # how many cells have each count (balanced: one count left)
    for r, cs in enumerate(cells, 1):
        for c in cs:
            k = count[c]
            spread[k] -= 1
            if not spread[k]:
                del spread[k]
            count[c] = k + 1
            spread[k + 1] = spread.get(k + 1, 0) + 1
        if len(spread) == 1:
            return r
    return None


def checks_per_rater(design: Design) -> int:
    """The check items (anchor, gold, trap; A/B check pairs) each rater gets beside the items."""
    return len(design.test_kind.checks(design))


@dataclass(frozen=True)
class RaterRow:
    """What :func:`choose_row` needs to know of a rater already in the test."""

    row: int
    usable: bool
    """Finished, or still active (not screened out, seen within the dropout time)."""


def _unit_cells(d: Design) -> list[tuple[str, ...]]:
    """The systems heard together (sorted) in each unit of the cycle."""
    u = d.units
    items = d.test_kind.plan_items(d, [d.prompts[0]] * u, lambda k, _u: k, random.Random(0))
    return [tuple(sorted(sl.system for sl in it.slots)) for it in items]


def _partial_row_cells(d: Design, units: list[tuple[str, ...]], row: int) -> list[Cell]:
    """A partial row's cells without planning its order and checks (a 50-system A/B test has
    1225 rows, all read at a rater's join)."""
    prompts, units_of = _partial_cells(d, row, d.balanced_items)
    return [(units[j], p) for j, p in zip(units_of, prompts, strict=True)]


@functools.lru_cache(maxsize=32)
def all_row_cells(design: Design) -> tuple[tuple[Cell, ...], ...]:
    """:func:`row_cells` of every row (cached: a design is immutable, and a join must not
    re-plan every row while it holds the database's write lock)."""
    d = design.validate()
    if d.partial:
        units = _unit_cells(d)
        return tuple(tuple(_partial_row_cells(d, units, r)) for r in range(rows(d)))
    return tuple(tuple(row_cells(design, r)) for r in range(rows(design)))


def choose_row(design: Design, raters: list[RaterRow], target: int | None = None) -> int | None:
    """The design row for a new rater (P.808's "extending"): the row whose cells have the fewest
    usable ratings, then the fewest usable raters, then the lowest index; so a dropout's or a
    screened-out rater's row is given again. None once every cell has ``target`` usable
    ratings (the test is full)."""
    cells = all_row_cells(design)
    n = len(cells)
    per_row = [0] * n
    count: dict[Cell, int] = {c: 0 for cs in cells for c in cs}
    for r in raters:
        if r.usable:
            per_row[r.row % n] += 1
            for c in cells[r.row % n]:
                count[c] += 1
    if target is not None and count and min(count.values()) >= target:
        return None
    return min(range(n), key=lambda r: (min(count[c] for c in cells[r]), per_row[r], r))


__all__ = [
    "CHECK_VARIANTS",
    "MAX_ITEMS_PER_RATER",
    "Cell",
    "check_prompts",
    "checks_per_rater",
    "full_balance_raters",
    "all_row_cells",
    "RaterRow",
    "choose_row",
    "row_cells",
    "rows",
    "ANCHOR",
    "ANCHOR_LOW",
    "ANCHOR_MID",
    "GOLD",
    "MUSHRA_ANCHORS",
    "TRAP",
    "check_positions",
    "KINDS",
    "ab_checks",
    "TRAP_ANSWER",
    "GOLD_EXPECTED",
    "Design",
    "PlannedItem",
    "Slot",
    "pairs",
    "plan",
]
