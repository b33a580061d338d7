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
spread positions. A/B sides are randomised but balanced (half the items swapped); MUSHRA screens
show every system plus a hidden reference and the low anchor in a shuffled order.
"""

from __future__ import annotations

import itertools
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
    """MUSHRA: the system shown as the open reference (and hidden among the stimuli)."""
    ab_mode: str = "cmos"
    """A/B: ``cmos`` (-3..+3) or ``forced`` (A or B)."""
    screening: bool = True
    """MOS: add a low anchor, a gold item and a trap item to every rater's list. A/B: add two
    check pairs, the low anchor against its clean source (once on each side)."""
    seed: int = 0

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
"""Pseudo system name of the low anchor (a degraded copy of a real system's take)."""
GOLD_EXPECTED = {"anchor": 1.0, "gold": 5.0}
TRAP_ANSWER = 2


def pairs(systems: tuple[str, ...]) -> list[tuple[str, str]]:
    return list(itertools.combinations(systems, 2))


def _prompt_block(d: Design, rater_seq: int, n: int) -> list[str]:
    group = rater_seq // max(1, d.units)
    start = (group * n) % len(d.prompts)
    return [d.prompts[(start + k) % len(d.prompts)] for k in range(n)]


def _unit(k: int, rater_seq: int, n_prompts: int, units: int) -> int:
    """Latin-square row ``rater_seq``; past one pass over the prompts, shift by one so a rater
    never gets the same (prompt, system) cell twice."""
    return ((k % n_prompts) + rater_seq + k // n_prompts) % units


def plan(design: Design, rater_seq: int) -> list[PlannedItem]:
    """The ordered items of the ``rater_seq``-th rater (deterministic: resumable)."""
    d = design.validate()
    rng = random.Random(f"{d.seed}:{rater_seq}")
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
    else:  # mushra: one screen per prompt with every system, the hidden reference, the anchor
        for k in range(n):
            slots = [Slot(s) for s in d.systems if s != d.reference]
            if d.reference:
                slots.append(Slot(d.reference, "reference"))
            slots.append(Slot(d.reference or d.systems[0], "anchor"))
            rng.shuffle(slots)
            items.append(PlannedItem(0, prompts[k], tuple(slots)))
    rng.shuffle(items)
    if d.kind == "mos" and d.screening:
        checks = [
            PlannedItem(
                0, None, (Slot(ANCHOR, "anchor"),), "gold", GOLD_EXPECTED["anchor"], "anchor"
            ),
            PlannedItem(0, None, (Slot(d.systems[0]),), "gold", GOLD_EXPECTED["gold"], "gold"),
            PlannedItem(0, None, (Slot("__trap__"),), "trap", float(TRAP_ANSWER), "trap"),
        ]
    elif d.kind == "ab" and d.screening:
        checks = ab_checks(d.systems[0])
    else:
        checks = []
    if checks:
        rng.shuffle(checks)
        total = len(items) + len(checks)
        spots = [round((i + 1) * total / (len(checks) + 1)) - 1 for i in range(len(checks))]
        for spot, c in zip(spots, checks, strict=True):
            items.insert(min(spot, len(items)), c)
    return [
        PlannedItem(i, it.prompt, it.slots, it.role, it.expected, it.stimulus, it.meta)
        for i, it in enumerate(items)
    ]


__all__ = [
    "ANCHOR",
    "KINDS",
    "ab_checks",
    "TRAP_ANSWER",
    "Design",
    "PlannedItem",
    "Slot",
    "pairs",
    "plan",
]
