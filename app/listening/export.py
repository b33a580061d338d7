"""A test's export: the raw rows, every results table, and the methods section.

Why one module: the admin's ``export.zip``, ``listenlab test results ID --csv DIR`` and
``listenlab export DB`` write the same files from :func:`export_files`, so "the terminal" and
"the page" cannot drift apart. Beside the CSVs, ``study.json`` holds everything a methods
section needs (listenlab's version, the design as run, every text a rater read, the playback
format and each stimulus's file, SHA-256 and gain, the screening rules with their numbers and
each rater's outcome, the headphone screen's keys and answers, the analysis' methods and what
they assume, and a dictionary of every exported column); ``methods.md`` says the same in
prose. ``public=True`` drops what identifies a crowd worker (crowd, study and session ids,
completion and screen-out codes, the platform links), for publication.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from importlib import metadata
from typing import TYPE_CHECKING, Any

from app.listening.columns import FILE_NOTES, columns
from app.listening.flow import consent_text, public_title
from app.listening.texts import rater_texts
from app.store.listening import TestRow, TestStore
from app.store.schema import export_tables
from evaluation.listening.design import Design, checks_per_rater, full_balance_raters, rows
from evaluation.listening.kinds import KINDS
from evaluation.listening.ratings import ratings_table
from evaluation.listening.results import test_results
from evaluation.listening.screening import PASS, TRIALS, TestScreening, screen_mode
from evaluation.report import safe_csv

if TYPE_CHECKING:
    import pandas as pd

PRIVATE_COLUMNS = {
    "crowd_id",
    "crowd_source",
    "study_id",
    "session_id",
    "completion_code",
    "screenout_code",
    "token_hash",
}
"""Columns a ``--public`` export leaves out: they identify a crowd worker or pay them."""
PRIVATE_CONFIG = (
    "completion_code",
    "excluded_code",
    "screenout_code",
    "redirect_url",
    "screenout_url",
)
CITATION = "listenlab (see CITATION.cff in its repository)"


def version() -> str:
    try:
        return metadata.version("listenlab")
    except metadata.PackageNotFoundError:
        return "unknown"


def _public_frame(df: pd.DataFrame, public: bool) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if c in PRIVATE_COLUMNS]) if public else df


def _config(config: dict[str, Any], public: bool) -> dict[str, Any]:
    return {k: v for k, v in config.items() if not (public and k in PRIVATE_CONFIG)}


def _stimuli(tests: TestStore, test_id: str) -> list[dict[str, Any]]:
    """Every stimulus as played: its file in the store, that file's SHA-256, the gain and
    loudness, and (imported ones) the source file's name and SHA-256."""
    out = []
    store = tests.store
    for s in tests.stimuli(test_id):
        path = store.audio_path(s.take_id)
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        m = s.meta
        out.append(
            {
                "stimulus_id": s.stimulus_id,
                "kind": s.kind,
                "system_id": s.system_id,
                "prompt_id": s.prompt_id,
                "condition": s.condition,
                "audio_file": path.name,
                "audio_sha256": digest,
                "source_file": m.get("file"),
                "source_sha256": m.get("file_sha256"),
                "origin": m.get("origin"),
                "gain_db": s.gain_db,
                "input_lufs": s.loudness_lufs,
                "output_lufs": m.get("output_lufs"),
                "true_peak_dbtp": m.get("true_peak_dbtp"),
                "limited_by_true_peak": bool(m.get("limited")),
                "anchor": m.get("anchor"),
                "lowpass_hz": m.get("lowpass_hz"),
            }
        )
    return out


def _design(test: TestRow, tests: TestStore) -> dict[str, Any]:
    cfg = test.config
    d = Design.from_dict(cfg["design"])
    texts = tests.prompt_texts(test.test_id)
    prefix = f"{test.test_id}-"
    return {
        "kind": d.kind,
        "systems": cfg.get("systems") or list(d.systems),
        "prompts": [
            {"prompt_id": p, "prompt_key": p.removeprefix(prefix), "text": texts.get(p)}
            for p in d.prompts
        ],
        "items_per_rater_asked": d.items_per_rater,
        "items_per_rater": d.balanced_items,
        "check_items_per_rater": checks_per_rater(d),
        "design_rows": rows(d),
        "raters_for_full_balance": full_balance_raters(d),
        "reference": d.reference,
        "ab_mode": d.ab_mode,
        "check_items": d.screening,
        "seed": d.seed,
        "familiarisation": bool(cfg.get("familiarise")),
        "target_ratings": cfg.get("target_ratings"),
        "dropout_after_s": cfg.get("dropout_after_s"),
        "show_text": cfg.get("show_text"),
    }


def _screening(test: TestRow, scr: TestScreening) -> dict[str, Any]:
    """The headphone screen, then each kind's rules with their numbers (``<kind>_rules``)."""
    from app.listening.screening import MAX_SCREEN_FETCHES

    mode = screen_mode(test.config)
    out: dict[str, Any] = {
        "headphone_screen": {
            "mode": mode,
            "trials_per_test": TRIALS if mode != "none" else 0,
            "pass": f">= {PASS} of {TRIALS} correct in each test" if mode != "none" else None,
            "attempts": 1,
            "plays_per_trial_max": MAX_SCREEN_FETCHES,
        }
    }
    for kind in KINDS.values():
        rules = kind.screening_rules(scr)
        if rules is not None:
            out[f"{kind.name}_rules"] = rules
    out["excluded_raters"] = (
        "a rater the screening excludes who finishes is shown the test's code for excluded "
        "raters instead of its completion code (and sent to the redirect with it)"
        if test.config.get("excluded_code")
        else "a rater the screening excludes who finishes is shown the completion code like "
        "every rater (the test has no code for excluded raters)"
    )
    return out


def study(
    tests: TestStore,
    test_id: str,
    *,
    public: bool = False,
    tables: dict[str, pd.DataFrame] | None = None,
) -> dict[str, Any]:
    """Everything a methods section needs, as JSON (see the module's docstring)."""
    from app.listening.service import Listening

    t = tests.require_test(test_id)
    cfg = t.config
    tables = tables if tables is not None else test_results(tests.test_data(test_id))
    loud = cfg.get("loudness") or {}
    fmt = Listening(tests.store).common_format(test_id)
    raters = _public_frame(tables["raters"], public)
    return {
        "listenlab_version": version(),
        "cite": CITATION,
        "public": public,
        "test": {
            "test_id": test_id,
            "name": t.name,
            "kind": t.kind,
            "status": t.status,
            "created_at": t.created_at,
        },
        "design": _design(t, tests),
        "texts": {
            "title": public_title(t),
            "consent_is_default": not cfg.get("consent"),
            **rater_texts(t.kind, cfg, consent_text(t)),
        },
        "playback": {
            "sample_rate": fmt.sample_rate,
            "channels": fmt.channels,
            "frame_ms": 100,
            "normalised": loud.get("normalise", True),
            "target_lufs": loud.get("target_lufs"),
            "ceiling_dbtp": loud.get("ceiling_dbtp"),
            "loudness_method": "ITU-R BS.1770 integrated loudness per ear (pyloudnorm), the "
            "ears' power mean brought to the target by one gain, capped so the 4x-oversampled "
            "true peak stays under the ceiling",
        },
        "stimuli": _stimuli(tests, test_id),
        "screening": _screening(t, TestScreening(require_headphones=screen_mode(cfg) != "none")),
        "raters": json.loads(raters.to_json(orient="records")),
        "analysis": json.loads(tables["methods"].to_json(orient="records")),
        "config": _config(cfg, public),
        "setting_changes": [
            {**c.as_dict(), **({"old_value": None, "new_value": None} if public else {})}
            for c in tests.changes(test_id)
        ],
        "columns": columns(),
        "files": FILE_NOTES,
    }


def export_files(tests: TestStore, test_id: str, *, public: bool = False) -> dict[str, str]:
    """Every file of the export by its path in the zip: ``study.json``, ``methods.md``,
    ``raw/*.csv`` and ``results/*.csv`` (the same files ``--csv DIR`` writes)."""
    from app.listening.methods import methods_md

    t = tests.require_test(test_id)
    files: dict[str, str] = {}
    for table in export_tables():
        df = _public_frame(tests.export_frame(table, test_id), public)
        for kind in KINDS.values():  # a kind may add derived columns to its own table
            df = kind.export_raw(table, df)
        files[f"raw/{table}.csv"] = safe_csv(df)
    data = tests.test_data(test_id)
    files["raw/ratings.csv"] = safe_csv(ratings_table(data, tests.item_times(test_id)))
    tables = test_results(data)
    for name, df in tables.items():
        df = _public_frame(df, public)
        files[f"results/{name}.csv"] = safe_csv(df, index=name == "glitches_by_seam")
    st = study(tests, test_id, public=public, tables=tables)
    files["study.json"] = json.dumps(st, indent=1, default=str)
    files["methods.md"] = methods_md(st, tables)
    files["test.json"] = json.dumps(
        {**t.as_dict(), "config": _config(t.config, public)}, indent=1, default=str
    )
    return files


def export_zip(tests: TestStore, test_id: str, *, public: bool = False) -> bytes:
    """:func:`export_files` as one zip."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in export_files(tests, test_id, public=public).items():
            z.writestr(name, text)
    return buf.getvalue()


__all__ = ["PRIVATE_COLUMNS", "export_files", "export_zip", "study", "version"]
