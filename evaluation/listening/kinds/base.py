"""What every test kind shares: the planned item, the pseudo systems of the check stimuli, the
vote a rater sends, the planner's figures and the kind's interface.

Why a base module: a kind is one folder (``evaluation/listening/kinds/<kind>/``: its
``__init__.py`` holds the design, the item payload, the vote rules, the results, the texts
raters and admins read, the planner's figures and the export's columns; its ``page.js`` draws
the rater's answer), and the rest of the app asks the kind instead of branching on its name.
:class:`TestKind` says what a kind must provide; the registry
(:func:`evaluation.listening.kinds.register`) refuses one that lacks a part. This module
imports only the standard library, so ``listenlab test`` can name the kinds without loading
pandas or SciPy (the results import them when they run).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import pandas as pd

    from evaluation.listening.data import TestData
    from evaluation.listening.screening import TestScreening
    from evaluation.tablespec import Table as AnswerTable

ANCHOR = "__anchor__"
"""Pseudo system of the MOS gold "1" and the A/B check pairs' bad side: a clearly degraded
copy of a take (3.5 kHz low-pass, clicks and a gap)."""
ANCHOR_LOW = "__anchor_low__"
"""MUSHRA low anchor (BS.1534-3): the reference low-passed at 3.5 kHz, nothing else."""
ANCHOR_MID = "__anchor_mid__"
"""MUSHRA mid anchor (BS.1534-3): the reference low-passed at 7 kHz, nothing else."""
MUSHRA_ANCHORS = {ANCHOR_LOW: ("low", 3500.0), ANCHOR_MID: ("mid", 7000.0)}
"""Pseudo system -> (``anchor`` name stored in stimulus/assignment meta, low-pass cutoff Hz)."""
MUSHRA_ANCHOR_LABELS = {
    sid: f"{n} anchor ({hz / 1000:g} kHz)" for sid, (n, hz) in MUSHRA_ANCHORS.items()
}
"""What the results call each MUSHRA anchor: ``low anchor (3.5 kHz)``, ``mid anchor (7 kHz)``."""
MUSHRA_SCREEN_ANCHOR = ANCHOR_MID
"""BS.1534-3's post-screening judges the mid anchor (when the test has one)."""
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


class Design(Protocol):
    """What a kind reads of a test's design (:class:`evaluation.listening.design.Design` is
    the one there is). A protocol here, not that class: the design asks the kinds (its kind's
    rules, its cycle), so the kinds naming it would make the two modules a circle."""

    kind: str
    systems: tuple[str, ...]
    prompts: tuple[str, ...]
    items_per_rater: int
    reference: str | None
    ab_mode: str
    screening: bool
    gold: bool
    legacy: bool
    check_variants: int

    @property
    def partial(self) -> bool: ...

    @property
    def balanced_items(self) -> int: ...


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
    mode: str = ""
    """The design's answer mode (A/B: ``cmos`` or ``forced``; see :attr:`TestKind.modes`)."""
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


@dataclass(frozen=True)
class StoreView:
    """What ``listenlab report`` hands each kind: its answer tables over every test of the
    store, and how the report groups and screens them."""

    tables: dict[str, pd.DataFrame]
    """Every registered kind's answer table over the store (the chosen tests only)."""
    keep: Callable[[pd.DataFrame], pd.DataFrame]
    """Drops the rows of raters their own test screened out (each test's rule)."""
    pool: bool
    """One row per system name across tests; else every table is per test (``test_id``)."""
    per: str
    """The words every title uses for that choice."""
    options: Any
    """:class:`evaluation.report.ReportOptions` (bootstrap, tolerances, screening rules)."""
    takes: pd.DataFrame
    findings: pd.DataFrame
    """Every take, and the detector's findings on them (with the take's system)."""
    tests: pd.DataFrame
    assignments: pd.DataFrame
    """Every test row and every assignment (what each rater was given)."""

    def table(self, name: str) -> pd.DataFrame:
        import pandas as pd

        got = self.tables.get(name)
        return got if got is not None else pd.DataFrame()

    def per_test(self, df: pd.DataFrame, fn: Callable[[pd.DataFrame], pd.DataFrame]):
        """``fn(df)`` over every test at once (pooled), or per test with a ``test_id``
        column first."""
        import pandas as pd

        if self.pool or df.empty or "test_id" not in df:
            return fn(df)
        parts = [fn(g).assign(test_id=t) for t, g in df.groupby("test_id", dropna=False, sort=True)]
        parts = [p for p in parts if not p.empty]
        if not parts:
            return fn(df.iloc[:0])
        out = pd.concat(parts, ignore_index=True)
        return out[["test_id", *[c for c in out.columns if c != "test_id"]]]


@dataclass(frozen=True)
class ReportTable:
    """One table of the report: written as ``stats_<name>.csv`` and shown under its section."""

    name: str
    frame: pd.DataFrame
    heading: str = ""
    """A sub-heading above it within the section (empty: none)."""
    poolable: bool = False
    """Per test by default, pooled with ``--pool`` (then ``stats_pooled_<name>.csv``)."""
    index: bool = False
    """Its index is a column of the CSV (a matrix: rows are systems)."""
    seams: bool = False
    """Its columns are boundary indexes k, shown as "seam k+1"."""


@dataclass(frozen=True)
class ReportSection:
    """One section of the report's page: a heading, figures, then tables."""

    title: str
    tables: tuple[ReportTable, ...]
    figures: tuple[tuple[str, Callable[[], Any]], ...] = ()
    """``(name, a function that draws a matplotlib figure)``; a figure only where there is
    data to draw."""


@dataclass(frozen=True)
class Axis:
    """A bounded answer scale: its ends and the unit the planner and the plots name it by."""

    low: float
    high: float
    units: str
    """What the planner calls a step of it: ``MOS points``, ``CMOS points``, ``MUSHRA
    points``, ``share``."""
    label: str = ""
    """What a plot's axis says (``MOS``, ``MUSHRA score``, ``CMOS``)."""


ROUNDING_VAR = 1 / 12
"""A score rounded to a whole number adds the variance of a uniform rounding error."""


@dataclass(frozen=True)
class Spread:
    """The planning model on the MOS scale (rater, prompt and noise sd, and the difference
    between two systems the power is planned for); each kind turns it into its own scale
    (:meth:`TestKind.plan_model`)."""

    rater_sd: float
    prompt_sd: float
    noise_sd: float
    difference: float


@dataclass(frozen=True)
class PlanModel:
    """How the planner (:mod:`evaluation.listening.planning`) sees one mean of a kind: the
    scale it is on, the spread of one answer on that scale, and what one mean is of."""

    axis: Axis
    centre: float
    """The mean the planned interval is put around (the middle of the scale): the results
    build every interval on the logit of the mean's place in the scale, so its width depends
    on where the mean is."""
    rater_var: float
    prompt_var: float
    noise_var: float
    """Per answer, on :attr:`axis` (rounding to whole answers included)."""
    per_item: float
    """Answers to one mean that one rated item gives (MUSHRA: one per system on every screen;
    MOS: ``1 / systems``; A/B: ``1 / pairs``)."""
    difference: float
    """The difference between two means the power is planned for, on :attr:`axis`."""
    cell: str = "system"
    """What one mean is of: ``system`` or ``pair`` (said in the planner's lines)."""
    paired: bool = False
    """Each answer is already a difference of two clips (A/B): the pairwise test's spread has
    no second side."""


class TestKind:
    """One test kind: its design, the item the page gets, its vote, its results, its texts,
    the planner's figures, the export's columns and the rater page's script.

    A kind is one folder (``evaluation/listening/kinds/<name>/``): ``__init__.py`` defines the
    subclass and ``KIND``, ``page.js`` draws the answer on the rater page (served from the
    folder: :attr:`folder`, :attr:`static_files`). The defaults suit a one-clip kind (MOS,
    glitch hunt); a kind overrides what differs. Methods that raise ``NotImplementedError``
    here are required: the registry refuses a kind that does not define them."""

    __test__ = False  # not a pytest class

    name = ""
    """The kind's name: stored with each test, in URLs (``/ll/listening/kinds/<name>/``)."""
    title = ""
    folder: ClassVar[Path | None] = None
    """The kind's folder (``Path(__file__).parent`` of its ``__init__.py``)."""
    static_files: ClassVar[tuple[str, ...]] = ("page.js",)
    """Files of :attr:`folder` the app serves to the rater page; ``page.js`` registers the
    kind's answer widget (``window.LLKinds[name]``)."""
    modes: ClassVar[tuple[str, ...]] = ()
    """Answer modes a design may pick (A/B: ``cmos`` or ``forced``; stored as ``ab_mode``)."""
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

    # -- texts a rater reads (the page shows them, the export prints them)

    instructions = ""
    """The built-in instructions shown above every item."""

    def scale(self, mode: str) -> dict[str, Any]:
        """The question and the answers as the page shows them: ``{question, labels}`` (a
        list of ``[value, label]``) or ``{question, bands}`` (``[low, high, label]``)."""
        raise NotImplementedError

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

    # -- the planner's figures

    def plan_model(self, d: Design, spread: Spread) -> PlanModel | None:
        """How the planner sees one mean of a design of this kind (None: the kind has no mean
        to plan an interval for, such as a glitch hunt's counts)."""
        raise NotImplementedError

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

    vote: ClassVar[type | None] = None
    """The answer's fields in the rater's vote body (beside ``answer_id`` and
    ``assignment_id``), as a dataclass whose annotations carry each field's type and bounds
    (``typing.Annotated`` with :mod:`annotated_types`): what ``/openapi.json`` declares for
    this kind's vote. :meth:`read_vote` checks a body by the same constants, with its own
    messages, and what depends on the item (how many clips) only there. None: the kind
    declares none (its body is declared as any object with the ids)."""

    def read_vote(self, body: dict[str, Any], ctx: VoteContext) -> Vote:
        """The checked answer (``body`` is the page's JSON) and the kind's rows to store."""
        raise NotImplementedError

    # -- results

    def results(self, data: TestData, ctx: ResultContext) -> list[Table]:
        """This kind's tables of one test (none while it has no answers of this kind)."""
        raise NotImplementedError

    main_table = ""
    """The results table that answers the test's question (the Results tab's first table;
    empty while no rated item counts)."""
    pairwise_table: str | None = None
    """The results table of the pairwise tests, if the kind has one."""

    def screening_text(self, scr: TestScreening) -> str | None:
        """This kind's screening rule, for the ``raters`` table's method line."""
        return None

    rater_columns: ClassVar[dict[str, str]] = {}
    """The columns this kind's screening adds to the ``raters`` table, with their meaning."""

    def screen(self, data: TestData, scr: TestScreening) -> pd.DataFrame | None:
        """Per rater (index ``rater_id``): this kind's screening outcomes
        (:attr:`rater_columns`) and ``reasons`` (empty when none); None: nothing of this kind
        in the test."""
        return None

    def screening_rules(self, scr: TestScreening) -> dict[str, Any] | None:
        """This kind's screening rules with their numbers, as ``study.json`` states them
        (``screening.<kind>_rules``); None: the kind has none beyond the headphone screen."""
        return None

    def screening_warnings(self, d: Design) -> list[str]:
        """What the designer should know about how this design's raters are screened."""
        return []

    def plot(self, tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, str, str, Axis] | None:
        """``(frame, label column, value column, axis)`` of the results plot, if this kind
        has one and its table is not empty."""
        return None

    def by_prompt(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        """The Results tab's third table (MOS per prompt, glitch marks per seam), if any."""
        return None

    def summary(self, tables: dict[str, pd.DataFrame], titles: dict[str, str]) -> list[str]:
        """The Results tab's Markdown sections of this kind's tables (``titles``: each
        table's title from ``methods``)."""
        return []

    def result_lines(self, tables: dict[str, pd.DataFrame]) -> list[str]:
        """``methods.md``'s result lines of this kind's tables."""
        return []

    # -- the export

    columns: ClassVar[dict[str, dict[str, str]]] = {}
    """The column dictionary of this kind's export files, ``{file: {column: meaning}}``
    (``raw/<table>.csv`` of its answer table, ``results/<table>.csv`` of its tables); the
    shared meanings (:data:`app.listening.columns.COMMON`) need not be repeated."""

    shared_columns: ClassVar[dict[str, str]] = {}
    """Columns of this kind that several files share (A/B's ``choice`` and ``cmos`` are in its
    vote table and in ``raw/ratings.csv``): said once, with the flow's shared meanings."""

    # -- storage

    tables: ClassVar[tuple[AnswerTable, ...]] = ()
    """The tables this kind's answers are kept in, beside the ``answers`` row every answer has
    (:class:`evaluation.tablespec.Table`: a plain declaration the store renders for both
    engines, creates on a store that lacks it, exports, copies and deletes with its test).
    Empty: the ``answers`` row's JSON payload is all (the toy kind of the tests). The rows
    :meth:`read_vote` returns go to these tables only."""
    marks_table: ClassVar[str | None] = None
    """The table of per-take marks (the glitch hunt's), counted per take by the report."""

    def export_raw(self, table: str, df: pd.DataFrame) -> pd.DataFrame:
        """A raw table as the export writes it (a kind may add derived columns)."""
        return df

    rating_columns: ClassVar[dict[str, str]] = {}
    """The columns this kind adds to ``raw/ratings.csv`` beside the shared ones
    (:data:`evaluation.listening.ratings.SHARED`), with their meaning."""

    def ratings(self, data: TestData) -> pd.DataFrame | None:
        """This kind's rows of ``raw/ratings.csv``, one per rating (the shared columns and
        :attr:`rating_columns`); None: the kind has none in the test."""
        return None

    # -- the store-wide report (``listenlab report``)

    def report(self, view: StoreView) -> list[ReportSection]:
        """This kind's sections of the report over every test of the store (none: the kind
        only has its per-test results)."""
        return []


def require_int(v: Any, low: int, high: int, message: str) -> int:
    """An integer answer within ``low..high`` (a JSON ``true`` is not 1)."""
    from backends.errors import InvalidRequest

    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise InvalidRequest(message)
    return v


def not_empty(df: pd.DataFrame | None) -> bool:
    return df is not None and not df.empty


def stimulus_systems(data: TestData, take_ids: pd.Series, fallback: pd.Series) -> pd.Series:
    """Each take's system as the test's stimuli name it (a check clip's pseudo system, whose
    take has none), else ``fallback``."""
    st = data.stimuli
    if st is None or st.empty:
        return fallback
    named = dict(zip(st["take_id"], st["system_id"], strict=True))
    return take_ids.map(named).where(take_ids.map(named).notna(), fallback)


__all__ = [
    "AB_MIN_MS",
    "Axis",
    "PlanModel",
    "ROUNDING_VAR",
    "Spread",
    "ANCHOR",
    "ANCHOR_LOW",
    "Design",
    "ANCHOR_MID",
    "GOLD",
    "GOLD_EXPECTED",
    "MUSHRA_ANCHORS",
    "MUSHRA_ANCHOR_LABELS",
    "MUSHRA_SCREEN_ANCHOR",
    "PLAYED_SHARE",
    "TRAP",
    "TRAP_ANSWER",
    "Familiar",
    "PlannedItem",
    "ReportSection",
    "ReportTable",
    "ResultContext",
    "Slot",
    "StoreView",
    "Table",
    "TestKind",
    "Vote",
    "VoteContext",
    "not_empty",
    "pairs",
    "require_int",
    "stimulus_systems",
]
