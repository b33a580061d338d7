"""Balanced listening-test designs: which rater hears which system on which prompt, in what order.

Why a design and not random draws: with a handful of raters, random assignment leaves one system
with twice the votes of another and confounds systems with prompts. Here rater ``r`` (the r-th
rater to join, 0-based) gets a Latin-square row:

* item ``k`` uses system ``(k + r) mod S`` (so every rater hears every system equally often when
  the items per rater are a multiple of ``S``), and
* a block of prompts shared by a group of ``S`` consecutive raters, so within each group every
  prompt is heard once with every system (prompt/system pairs balanced across raters).

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
from dataclasses import dataclass, field

KINDS = ("mos", "ab", "mushra", "glitch")


@dataclass(frozen=True)
class Design:
    kind: str
    systems: tuple[str, ...]
    prompts: tuple[str, ...]
    items_per_rater: int
    reference: str | None = None
    """MUSHRA (required): the system shown as the open reference (and hidden among the
    stimuli); the anchors are made from its takes. Usually the ``natural`` recordings."""
    ab_mode: str = "cmos"
    """A/B: ``cmos`` (-3..+3) or ``forced`` (A or B)."""
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

    def validate(self) -> Design:
        if self.kind not in KINDS:
            raise ValueError(f"test type must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if len(set(self.systems)) != len(self.systems) or not self.systems:
            raise ValueError("a test needs at least one system, each named once")
        if self.kind in {"ab", "mushra"} and len(self.systems) < 2:
            raise ValueError(f"a {self.kind} test needs at least two systems")
        if not self.prompts:
            raise ValueError("a test needs at least one prompt")
        if self.items_per_rater < 1 or self.items_per_rater > 500:
            raise ValueError("items per rater must be within 1..500")
        if self.reference is not None and self.reference not in self.systems:
            raise ValueError(f"the reference {self.reference!r} is not one of the systems")
        if self.kind == "mushra" and self.reference is None and not self.legacy:
            raise ValueError(
                "a MUSHRA test needs a reference system (BS.1534-3): import a `natural` "
                "system or name one as the reference"
            )
        if self.ab_mode not in {"cmos", "forced"}:
            raise ValueError("A/B mode must be cmos or forced")
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
        }

    @classmethod
    def from_dict(cls, d: dict) -> Design:
        return cls(
            kind=d["kind"],
            systems=tuple(d["systems"]),
            prompts=tuple(d["prompts"]),
            items_per_rater=int(d["items_per_rater"]),
            reference=d.get("reference"),
            ab_mode=d.get("ab_mode", "cmos"),
            screening=bool(d.get("screening", True)),
            seed=int(d.get("seed", 0)),
            gold=bool(d.get("gold", False)),
            legacy=bool(d.get("legacy", "gold" not in d)),
        )

    @property
    def units(self) -> int:
        """How many design cells one item cycles through (systems, or system pairs for A/B)."""
        return len(pairs(self.systems)) if self.kind == "ab" else len(self.systems)

    @property
    def balanced_items(self) -> int:
        """Items per rater rounded down to a multiple of the cycle (at least one cycle)."""
        if self.kind == "mushra":
            return min(self.items_per_rater, len(self.prompts))
        u = self.units
        n = min(self.items_per_rater, len(self.prompts) * u)  # each (prompt, unit) at most once
        return max(u, n - n % u)


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


def ab_checks(system: str) -> list[PlannedItem]:
    """A/B screening pairs: the low anchor against the clean take it was made from (``system``
    on the first prompt), once with the clean side as A and once as B, so a rater who always
    picks one side fails one of them. ``expected`` is the clean side's sign on the CMOS scale
    (-1: A, +1: B)."""
    clean, anchor = Slot(system, "gold"), Slot(ANCHOR, "anchor")
    return [
        PlannedItem(0, None, (clean, anchor), "gold", -1.0, "ab_check", {"clean": "a"}),
        PlannedItem(0, None, (anchor, clean), "gold", 1.0, "ab_check", {"clean": "b"}),
    ]


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


def pairs(systems: tuple[str, ...]) -> list[tuple[str, str]]:
    return list(itertools.combinations(systems, 2))


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


def plan(design: Design, rater_seq: int, order_seed: int | None = None) -> list[PlannedItem]:
    """The ordered items of design row ``rater_seq`` (deterministic: resumable). The order
    and the check positions are drawn from ``order_seed`` (default: the row), so two raters
    given the same row (a reissued one) still get their own order."""
    d = design.validate()
    rng = random.Random(f"{d.seed}:{rater_seq if order_seed is None else order_seed}")
    n = d.balanced_items
    prompts = _prompt_block(d, rater_seq, n)
    items: list[PlannedItem] = []
    if d.kind in {"mos", "glitch"}:
        for k in range(n):
            s = d.systems[_unit(k, rater_seq, len(d.prompts), len(d.systems))]
            items.append(PlannedItem(0, prompts[k], (Slot(s),)))
    elif d.kind == "ab":
        ps = pairs(d.systems)
        swaps = [k % 2 == 1 for k in range(n)]
        rng.shuffle(swaps)
        for k in range(n):
            a, b = ps[_unit(k, rater_seq, len(d.prompts), len(ps))]
            if swaps[k]:
                a, b = b, a
            items.append(PlannedItem(0, prompts[k], (Slot(a), Slot(b)), meta={"swapped": swaps[k]}))
    else:  # mushra: one screen per prompt: every system, the hidden reference, two anchors
        for k in range(n):
            slots = [Slot(s) for s in d.systems if s != d.reference]
            if d.reference:
                slots.append(Slot(d.reference, "reference"))
            anchors = [ANCHOR] if d.legacy else list(MUSHRA_ANCHORS)
            slots += [Slot(a, "anchor") for a in anchors]
            rng.shuffle(slots)
            items.append(PlannedItem(0, prompts[k], tuple(slots)))
    rng.shuffle(items)
    if d.kind == "mos" and d.screening:
        checks = [
            PlannedItem(
                0, None, (Slot(ANCHOR, "anchor"),), "gold", GOLD_EXPECTED["anchor"], "anchor"
            ),
            PlannedItem(0, None, (Slot(TRAP),), "trap", float(TRAP_ANSWER), "trap"),
        ]
        if d.gold or d.legacy:
            gold = Slot(d.systems[0] if d.legacy else GOLD)
            checks.append(PlannedItem(0, None, (gold,), "gold", GOLD_EXPECTED["gold"], "gold"))
    elif d.kind == "ab" and d.screening:
        checks = ab_checks(d.systems[0])
    else:
        checks = []
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
    return max(1, d.units) * (p // math.gcd(n, p))


Cell = tuple[tuple[str, ...], str | None]
"""One rated stimulus of the design: the systems heard together (sorted) and the prompt."""


def row_cells(design: Design, row: int) -> list[Cell]:
    """The design cells (rated items, not checks) of one row."""
    return [
        (tuple(sorted(sl.system for sl in it.slots)), it.prompt)
        for it in plan(design, row)
        if it.role == "item"
    ]


@dataclass(frozen=True)
class RaterRow:
    """What :func:`choose_row` needs to know of a rater already in the test."""

    row: int
    usable: bool
    """Finished, or still active (not screened out, seen within the dropout time)."""


@functools.lru_cache(maxsize=32)
def all_row_cells(design: Design) -> tuple[tuple[Cell, ...], ...]:
    """:func:`row_cells` of every row (cached: a design is immutable, and a join must not
    re-plan every row while it holds the database's write lock)."""
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
    "Cell",
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
    "Design",
    "PlannedItem",
    "Slot",
    "pairs",
    "plan",
]
