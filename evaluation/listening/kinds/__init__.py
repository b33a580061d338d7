"""The listening-test kinds, one module each: MOS, A/B (with its CMOS mode), MUSHRA, glitch hunt.

Why objects: a kind's design, the item the rater page gets, its vote and its results used to be
``kind == "mos"`` branches in eight files; now the planner, the rater service, the results and
the admin page ask :func:`kind_of` and a new kind is one new module listed in :data:`KINDS`.
Pure logic (``evaluation`` never imports ``app``), light to import (pandas, SciPy and the
statistics load when a result is computed).
"""

from __future__ import annotations

from backends.errors import InvalidRequest
from evaluation.listening.kinds.ab import KIND as AB
from evaluation.listening.kinds.base import TestKind
from evaluation.listening.kinds.glitch import KIND as GLITCH
from evaluation.listening.kinds.mos import KIND as MOS
from evaluation.listening.kinds.mushra import KIND as MUSHRA

KINDS: dict[str, TestKind] = {k.name: k for k in (MOS, AB, MUSHRA, GLITCH)}
"""Every kind by name, in the order results are listed and the designer offers them."""
NAMES = tuple(KINDS)


def kind_of(name: str) -> TestKind:
    """The kind called ``name``; an unknown one is a bad request."""
    k = KINDS.get(name)
    if k is None:
        raise InvalidRequest(f"test type must be one of {', '.join(NAMES)}, got {name!r}")
    return k


__all__ = ["AB", "GLITCH", "KINDS", "MOS", "MUSHRA", "NAMES", "TestKind", "kind_of"]
