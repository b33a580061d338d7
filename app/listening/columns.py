"""The column dictionary of a test's export: every file, every column, what it holds.

Why a module: ``study.json`` carries this dictionary, ``docs/listening-tests.md`` prints it
(:func:`docs_markdown` writes that section; a test compares the two), and a test reads every
CSV of a finished study's export against it, so a column cannot be added without being
explained. The files of the rater flow are declared here; each test kind declares its own
(:attr:`TestKind.columns`: its answer table and its results tables), and :func:`columns`
joins them. Times are UTC ISO 8601 unless they end in ``_ms``/``_s`` (durations) or are Unix
seconds (``fetched_at``, ``seen_at``).
"""

from __future__ import annotations

from typing import Any

from app.listening.figures import FIGURE_COLUMNS
from app.listening.methods import REPORTING_COLUMNS
from app.store.schema import all_tables, export_tables
from evaluation.listening import machine, ratings
from evaluation.listening.kinds import KINDS, NAMES

COMMON = {
    "test_id": "the test",
    "rater_id": "the rater (random, 16 hex digits; the same rater across every file)",
    "assignment_id": "one item of one rater's list (random, 24 hex digits)",
    "take_id": "the stored audio of a stimulus (file <take_id>.wav in the store's audio folder)",
    "system_id": "the system; pseudo systems: __anchor__ (MOS gold 1 / A/B check's bad side), "
    "__anchor_low__ / __anchor_mid__ (MUSHRA 3.5 / 7 kHz anchors), __gold__, __trap__",
    "prompt_id": "the prompt: the test id, a dash and the prompt's key",
    "prompt_key": "the prompt's own key (p001… for typed prompts, the file stem for imported ones)",
    "role": "item (rated, analysed), gold (check item with a known answer), trap (asks for a "
    "given score), reference / anchor (MUSHRA hidden reference and anchors)",
    "expected": "a check item's expected score (gold 1 or 5, trap 2; A/B check: -1 clean side "
    "A, +1 clean side B)",
    "condition": "as_streamed (recorded chunk timeline replayed), whole, or live",
    "created_at": "when the row was written (server clock, UTC)",
    "score": "the answer: MOS 1-5, MUSHRA 0-100",
    "slot": "the stimulus's place on the item (MUSHRA: the slider, 0-based; else 0; A/B: 0 A, 1 B)",
    "kind": "the test kind ({kinds}) or, for a stimulus, item/anchor/gold/trap",
    "n": "number of ratings",
    "raters": "number of raters",
    "prompts": "number of prompts",
    "mean": "rating-weighted mean (every rating counts once)",
    "sd": "standard deviation of the ratings (n - 1)",
    "ci_low": "95% interval, lower bound (see methods.csv)",
    "ci_high": "95% interval, upper bound",
    "se": "standard error behind the interval (two-way cluster-robust)",
    "df": "Student t degrees of freedom of the interval (Welch-Satterthwaite)",
    "note": "why an interval is missing (too few ratings, no spread)",
    "x": "first system of the pair (names sorted)",
    "y": "second system of the pair",
    "p": "two-sided p-value (3 significant digits)",
    "p_holm": "Holm-adjusted p over every pair of the table",
    "significant": "p_holm < 0.05",
}

_RAW = {
    "stimuli": {
        "stimulus_id": "the stimulus",
        "source_take_id": "the take a derived stimulus (anchor, gold, trap) was made from",
        "gain_db": "gain applied to reach the loudness target (0 when levels were kept)",
        "loudness_lufs": "loudness before the gain (BS.1770, ears' power mean)",
        "target_lufs": "the loudness target (empty when levels were kept)",
        "meta": "JSON: output_lufs, ear_lufs, true_peak_dbtp, ceiling_dbtp, limited (the "
        "true-peak ceiling capped the gain), origin, file and file_sha256 (imported), anchor, "
        "lowpass_hz, instruction (trap)",
    },
    "test_raters": {
        "token_hash": "not exported",
        "seq": "order of joining (0-based)",
        "crowd_id": "crowd platform id (PROLIFIC_PID, workerId, participant); not in --public",
        "crowd_source": "which URL parameter carried crowd_id; not in --public",
        "study_id": "Prolific STUDY_ID; not in --public",
        "session_id": "Prolific SESSION_ID; not in --public",
        "consent_at": "when the rater agreed",
        "headphone": "JSON: the headphone screen's result (passed, correct, trials, per test, "
        "answers)",
        "headphone_pass": "1 passed, 0 failed, empty not done",
        "completion_code": "the code shown at the end; not in --public",
        "finished_at": "when the last item was answered",
        "design_row": "the Latin-square row the rater got",
        "seen_at": "last request (Unix seconds)",
        "screened_out_at": "when a failed screen ended the session",
        "screenout_code": "the screen-out code shown; not in --public",
        "familiar": "JSON: when each familiarisation clip was first sent (Unix seconds)",
        "familiarised_at": "when the rater pressed Continue after familiarisation",
        "questionnaire": "JSON: the questionnaire's answers (device, headphone_type, "
        "native_language, age_band), when the test asked it",
        "breaks": "JSON: the rater's breaks of the session cap, [{after: items answered, "
        "started, ended: Unix seconds}]",
    },
    "assignments": {
        "position": "place in the rater's list (0-based)",
        "take_b_id": "A/B: side B's take",
        "slots": "JSON list of the item's takes, in slot order",
        "meta": "JSON: roles, conditions and systems per slot, prompt_id, swapped (A/B)",
    },
    "answers": {
        "answer_id": "the answer (chosen by the page; re-sends are stored once)",
        "payload": "JSON: the answer as given (score, cmos/choice, scores, marks)",
    },
    "play_events": {
        "event_id": "the play event",
        "played_ms": "playback the server accepted (capped by its own clock and what it sent)",
        "duration_ms": "the stimulus's length",
        "complete": "1 when played to 95% of its length",
        "server_elapsed_ms": "time since the server began streaming this stimulus to the page",
        "underruns": "stalls the player reported",
        "stall_ms": "their total length",
    },
    "screen_trials": {
        "n": "trial number (0-based)",
        "key": "JSON answer key: answer (0-2, the interval to pick), order (antiphase: the "
        "tones' roles), noise_seed (Huggins)",
        "duration_ms": "the trial's audio length",
        "fetched_at": "when its audio was first sent (Unix seconds)",
        "fetches": "how often it was played",
        "answer": "the rater's pick (0-2; the first pick stands)",
        "answered_at": "when",
    },
    "ratings": {
        "first_sound_at": "when the server began streaming the item's first stimulus",
        "answered_at": "when the answer was stored",
        "time_on_item_ms": "first sound to answer (the time spent on this item)",
        "time_since_previous_ms": "previous answer (or consent) to this answer; for the first "
        "item it includes the headphone screen and familiarisation",
    },
}

_RELIABILITY = {
    "agreement": "Pearson r of the rater's item scores with the other raters' mean of the same "
    "stimuli (from 3 shared stimuli; 0 when either side does not vary)",
    "shared": "stimuli the agreement was computed over",
    "checks_passed": "share of the rater's check items passed (empty: none answered)",
    "time_ratio": "median over items of time on item / the clip's played length",
    "reliability": "max(agreement, 0) x checks_passed (a missing part counts as 1): 0..1, "
    "reported, never used to exclude",
}

_ANSWERS = {
    "q_<key>": "the rater's answer to questionnaire field <key> (a test's own pages: one "
    "column per field, empty when not answered; free text as given)",
    "q_device": "built-in questionnaire: what the rater listens with",
    "q_headphone_type": "built-in questionnaire: which kind of headphones",
    "q_native_language": "built-in questionnaire: native language",
    "q_age_band": "built-in questionnaire: age band",
}

_RESULTS = {
    "raters": {
        "seq": "order of joining",
        "crowd_id": "crowd platform id; not in --public",
        "answered": "items answered",
        "finished": "answered every item",
        "headphones": "headphone screen correct/trials, or not done",
        "excluded": "left out of the results",
        "reasons": "why",
    },
    "methods": {
        "table": "the results table",
        "title": "what it shows",
        "method": "how its numbers were computed",
        "assumes": "what that method assumes",
    },
}


def _raw_order(f: str) -> int:
    """Raw files in the store's export order (``raw/ratings.csv``, made here, last)."""
    name = f.removeprefix("raw/").removesuffix(".csv")
    order = export_tables()
    return order.index(name) if name in order else len(order)


def shared() -> dict[str, str]:
    """The shared meanings: the flow's (:data:`COMMON`) and the kinds' own shared columns."""
    out = {**COMMON, "kind": COMMON["kind"].format(kinds=", ".join(NAMES))}
    for kind in KINDS.values():
        out.update(kind.shared_columns)
    return out


def own_columns(order: list[str], flow: dict[str, str], attr: str) -> dict[str, str]:
    """A file's columns in ``order`` with their meaning: the flow's, else the kinds' (their
    ``attr`` dictionary); the shared meanings are added by :func:`columns`."""
    said = {c: m for k in KINDS.values() for c, m in getattr(k, attr).items()}
    said.update(flow)
    return {c: said[c] for c in order if c in said}


def columns() -> dict[str, dict[str, str]]:
    """``{file in the export: {column: meaning}}`` of the flow's files and every registered
    kind's (shared meanings from :func:`shared`, said once for every file that has them)."""
    common = shared()
    raw = {f"raw/{name}.csv": cols for name, cols in _RAW.items()}
    raw["raw/ratings.csv"] = own_columns(ratings.columns(), _RAW["ratings"], "rating_columns")
    raters = {**_RESULTS["raters"]}
    tail = {c: raters.pop(c) for c in ("excluded", "reasons")}
    for kind in KINDS.values():
        raters.update(kind.rater_columns)
    results = {"results/raters.csv": {**raters, **tail, **_RELIABILITY, **_ANSWERS}}
    for kind in KINDS.values():
        for f, cols in kind.columns.items():
            (raw if f.startswith("raw/") else results)[f] = cols
    results |= machine.EXPORT_COLUMNS  # once a test is scored (docs/metrics.md)
    results["results/methods.csv"] = _RESULTS["methods"]
    results |= REPORTING_COLUMNS | FIGURE_COLUMNS  # P.800.2's items; the figures' numbers
    if "results/machine.csv" in results:
        results["figures/machine.csv"] = results["results/machine.csv"]
    files = {f: raw[f] for f in sorted(raw, key=_raw_order)} | results
    return {f: {**common, **cols} for f, cols in files.items()}


FILE_NOTES = {
    "study.json": "the methods section as data: version, design, texts, playback, stimuli, "
    "screening, raters' outcomes, analysis methods, this column dictionary",
    "methods.md": "the same in prose, with the main results",
    "test.json": "the test's stored row and configuration",
    "raw/ratings.csv": "one row per rating (MOS score, A/B vote, MUSHRA slider) with its system, "
    "prompt, role and timing: the table to re-run the analysis on",
    "raw/*.csv": "the store's rows of this test, one file per table",
    "results/*.csv": "the results tables of the Results tab (screened raters out)",
    "results/p800_2.csv": "ITU-T P.800.2's reporting items: votes and raters per condition, "
    "the scale and its labels, the anchors, the raters, the intervals' method",
    "figures/*.png, figures/*.svg": "the Results tab's figures for a paper (forest plot, "
    "pairwise matrix, per prompt, per rater, machine vs human)",
    "figures/*.csv": "the numbers each figure was drawn from",
}


def docs_markdown() -> str:
    """The "Column dictionary" section of ``docs/listening-tests.md``, as it must read (a test
    compares the page with this): the shared meanings, then each file's own columns."""
    common = shared()
    out = [
        "Shared meanings (every file that has the column):",
        "",
        "| column | meaning |",
        "|---|---|",
        *[f"| `{c}` | {m} |" for c, m in common.items()],
        "",
    ]
    for f, cols in columns().items():
        own = {c: m for c, m in cols.items() if c not in common or m != common[c]}
        text = "; ".join(f"`{c}`: {m}" for c, m in own.items()) or (
            "the shared columns (an interval table: by…, n, raters, prompts, mean, sd, ci_low, "
            "ci_high, se, df, note)"
        )
        out.append(f"- **`{f}`**: {text}")
    return "\n".join(out) + "\n"


JSON_TYPES = {"text": "string", "integer": "integer", "real": "number"}
"""A declared column's type (:data:`evaluation.tablespec.TYPES`) as JSON writes its values."""
VALUE_TYPES = {
    **dict.fromkeys(("n", "raters", "prompts", "answered", "shared"), "integer"),
    **dict.fromkeys(
        ("mean", "sd", "ci_low", "ci_high", "se", "df", "p", "p_holm", "agreement"), "number"
    ),
    **dict.fromkeys(("checks_passed", "time_ratio", "reliability"), "number"),
    **dict.fromkeys(("significant", "finished", "excluded"), "boolean"),
    **dict.fromkeys(("note", "x", "y", "headphones", "reasons"), "string"),
    **dict.fromkeys(("table", "title", "method", "assumes"), "string"),
}
"""The JSON type of the result columns this module explains itself (:data:`COMMON`, the
``raters`` and ``methods`` tables), which no stored table declares."""
SCALAR = ["string", "number", "boolean", "null"]
"""A cell of a results row whose type no declaration gives."""


def column_types() -> dict[str, str]:
    """Each column's JSON type where one is declared: a stored table's column of that name
    (the store's and every kind's, :mod:`evaluation.tablespec`; a name two tables type
    differently stays untyped), then :data:`VALUE_TYPES`."""
    seen: dict[str, set[str]] = {}
    for t in all_tables():
        for c in t.columns:
            if c.type in JSON_TYPES:
                seen.setdefault(c.name, set()).add(JSON_TYPES[c.type])
    out = {c: next(iter(ts)) for c, ts in seen.items() if len(ts) == 1}
    return {**out, **VALUE_TYPES}


def results_schema() -> dict[str, Any]:
    """The JSON schema of ``GET /ll/admin/tests/{id}/results`` (``{table: [row, …]}``), from
    the column dictionary: every results table it lists (``results/<table>.csv``; not the
    export's ``p800_2``) as an array of rows, each row's columns with their meaning and, where
    :func:`column_types` has one, their type (or null: a NaN or an empty cell); the shared
    columns once (``ResultRow``). It pins the tables' names, that ``raters`` and ``methods``
    are always there, and the known columns' types; it leaves open which of a table's columns
    a test has (a kind's table holds the shared columns it needs; none is required), the
    columns the dictionary names by pattern (questionnaire answers ``q_<key>``, the seam
    numbers of ``glitches_by_seam``) and a table of a kind registered after the app started:
    those are any scalar (a string, number, boolean or null)."""
    types = column_types()

    def typed(cols: dict[str, str]) -> dict[str, Any]:
        return {
            c: {"description": m, "type": [types[c], "null"] if c in types else SCALAR}
            for c, m in cols.items()
            if "<" not in c
        }

    common = shared()
    row = {"type": "object", "properties": typed(common), "additionalProperties": {"type": SCALAR}}
    shared_row = {"$ref": "#/components/schemas/ResultRow"}
    tables: dict[str, Any] = {}
    for f, cols in columns().items():
        if not f.startswith("results/") or f in REPORTING_COLUMNS:
            continue  # p800_2: the export's, not a results table
        own = {c: m for c, m in cols.items() if c not in common or m != common[c]}
        name = f.removeprefix("results/").removesuffix(".csv")
        items = {"allOf": [shared_row], "properties": typed(own)} if own else shared_row
        tables[name] = {"type": "array", "items": items}
    schema = {
        "title": "TestResults",
        "description": "A test's results tables by name, each a list of rows (one per line "
        "of results/<table>.csv of the export; docs/listening-tests.md's column dictionary).",
        "type": "object",
        "properties": tables,
        "required": ["raters", "methods"],
        "additionalProperties": {"type": "array", "items": shared_row},
    }
    ref = "#/components/schemas/TestResults"
    return {"$ref": ref, "$defs": {"TestResults": schema, "ResultRow": row}}


__all__ = [
    "COMMON",
    "FILE_NOTES",
    "JSON_TYPES",
    "VALUE_TYPES",
    "column_types",
    "columns",
    "docs_markdown",
    "results_schema",
    "shared",
]
