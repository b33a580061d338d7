"""The listening-test kinds, one folder each: MOS, A/B (with its CMOS mode), MUSHRA, glitch hunt,
parity A/B (non-inferiority).

Why one registry: a kind used to be ``kind == "mos"`` branches in ten files over three layers,
and an unknown kind silently got another kind's question or the planner's MOS points. Now
each kind is a folder (``<name>/__init__.py`` and its rater script ``<name>/page.js``: see
:class:`~evaluation.listening.kinds.base.TestKind`), :data:`KINDS` is the one list of them,
and the planner, the rater service, the results, the texts, the export and the admin page ask
the kind. Adding a kind is its folder plus one line in :data:`BUILT_IN` (or a
:func:`register` call, as the toy kind of the tests does). A kind missing a required part is
refused when it is registered, and the app refuses to start over a stored test of a kind that
is not registered (:func:`check_stored`): never a default.

Pure logic (``evaluation`` never imports ``app``), light to import (pandas, SciPy and the
statistics load when a result is computed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from backends.errors import InvalidRequest, ListenlabError
from evaluation.listening.kinds.ab import KIND as AB
from evaluation.listening.kinds.base import TestKind
from evaluation.listening.kinds.glitch import KIND as GLITCH
from evaluation.listening.kinds.mos import KIND as MOS
from evaluation.listening.kinds.mushra import KIND as MUSHRA
from evaluation.listening.kinds.parity_ab import KIND as PARITY
from evaluation.tablespec import Table, answer_table_problems

BUILT_IN: tuple[TestKind, ...] = (MOS, AB, MUSHRA, GLITCH, PARITY)
"""The kinds the app ships, in the order results are listed and the designer offers them (the
first is the default of a spec that names none)."""

KINDS: dict[str, TestKind] = {}
"""Every registered kind by name (the built-in ones, then any :func:`register` added)."""
NAMES = KINDS.keys()
"""The registered kinds' names (a live view: a kind registered later is in it)."""

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
REQUIRED = ("scale", "plan_model", "read_vote", "results")
"""Methods a kind must define itself (the base's raise ``NotImplementedError``)."""


class KindError(ListenlabError):
    """A kind that cannot run: registered without a required part, or named by a stored test
    although no such kind is registered. An error of the deployment, found at startup."""

    http_status, reason = 500, "kind"


def missing_parts(kind: TestKind) -> list[str]:
    """What ``kind`` lacks of :class:`TestKind`'s required parts (empty: nothing)."""
    out = []
    if not isinstance(kind.name, str) or not NAME_RE.match(kind.name):
        out.append(f"name {kind.name!r} (1-32 lower-case letters, digits or _)")
    for attr in ("title", "instructions", "main_table"):
        if not getattr(kind, attr, ""):
            out.append(attr)
    out += [f"{m}()" for m in REQUIRED if getattr(type(kind), m) is getattr(TestKind, m)]
    folder = kind.folder
    if folder is None or not folder.is_dir():
        out.append("folder (the kind's own folder: Path(__file__).parent)")
    else:
        if "page.js" not in kind.static_files:
            out.append("page.js in static_files")
        out += [f"{f} in {folder}" for f in kind.static_files if not (folder / f).is_file()]
    if not isinstance(kind.columns, dict):
        out.append("columns ({file: {column: meaning}})")
    return out + table_problems(kind)


def table_problems(kind: TestKind) -> list[str]:
    """What is wrong with ``kind``'s answer tables (:attr:`TestKind.tables`): each a plain
    per-test table, named as no other registered kind's."""
    out = []
    others = {t.name: k.name for k in KINDS.values() if k.name != kind.name for t in k.tables}
    for t in kind.tables:
        if not isinstance(t, Table):
            out.append(f"tables: {t!r} is not an evaluation.tablespec.Table")
            continue
        out += answer_table_problems(t)
        if t.name in others:
            out.append(f"table {t.name!r} (the {others[t.name]!r} kind's already)")
    return out


def register(kind: TestKind) -> TestKind:
    """Add ``kind`` to :data:`KINDS` (a second kind of the same name, or one missing a part,
    is a :class:`KindError`)."""
    missing = missing_parts(kind)
    if missing:
        raise KindError(f"test kind {kind.name!r} is missing: {', '.join(missing)}")
    if kind.name in KINDS and KINDS[kind.name] is not kind:
        raise KindError(f"a test kind called {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind :func:`register` added (the tests' toy kind); a built-in one stays."""
    if any(k.name == name for k in BUILT_IN):
        raise KindError(f"{name!r} is a built-in test kind")
    KINDS.pop(name, None)


def kind_of(name: str) -> TestKind:
    """The kind called ``name``; an unknown one is a bad request."""
    k = KINDS.get(name)
    if k is None:
        raise InvalidRequest(f"test type must be one of {', '.join(NAMES)}, got {name!r}")
    return k


def check_stored(tests: Iterable[tuple[str, str]]) -> None:
    """Refuse to start over stored tests (``(test_id, kind)``) of a kind not registered: its
    pages, votes and results would have no kind to ask."""
    bad = sorted((tid, kind) for tid, kind in tests if kind not in KINDS)
    if bad:
        listed = ", ".join(f"{tid} ({kind!r})" for tid, kind in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise KindError(
            f"{len(bad)} stored test(s) of a kind this app does not have: {listed}{more}. "
            f"Registered kinds: {', '.join(NAMES)}. Register the kind, or remove the test "
            "(listenlab test delete ID) before starting."
        )


def answer_tables() -> list[tuple[str, Table]]:
    """``(kind, table)`` of every registered kind's answer tables, in the registry's order."""
    return [(k.name, t) for k in KINDS.values() for t in k.tables]


def default_kind() -> str:
    """The kind of a spec that names none (the first built-in one)."""
    return BUILT_IN[0].name


for _kind in BUILT_IN:
    register(_kind)

__all__ = [
    "AB",
    "BUILT_IN",
    "GLITCH",
    "KINDS",
    "MOS",
    "MUSHRA",
    "NAMES",
    "PARITY",
    "KindError",
    "TestKind",
    "answer_tables",
    "check_stored",
    "default_kind",
    "kind_of",
    "missing_parts",
    "register",
    "table_problems",
    "unregister",
]
