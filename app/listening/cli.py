"""``listenlab test``: listening tests from the command line, mirroring the Python API.

* ``listenlab test create`` builds the same JSON spec as ``POST /ll/admin/tests`` (or reads it
  with ``--spec``), parses it with :meth:`app.listening.designer.TestSpec.from_dict` and calls
  :func:`app.listening.designer.create_test`, the function the admin designer calls: one
  implementation, so a test made here is the same as one made by clicking. It records the
  stimuli with a progress line on stderr.
* ``listenlab test list`` is :meth:`app.store.listening.TestStore.list_tests`.
* ``listenlab test results ID`` is :func:`evaluation.listening.results.test_results` on the
  test's rows (:meth:`TestStore.test_data`); ``--json`` gives the same JSON as
  ``GET /ll/admin/tests/ID/results``.
* ``listenlab test open|close ID`` is :meth:`TestStore.set_status`.
* ``listenlab test delete ID --yes`` is the Tests tab's Delete: an export zip is kept in the
  store's ``exports/`` folder first (when the test's kind is still registered), then
  :meth:`TestStore.delete`. It is how a test of a kind the app no longer has is removed (the
  server refuses to start over one).

The module imports only the standard library and the test kinds' names at the top: each
command imports what it uses when it runs, so ``listenlab test list`` loads the store and not
FastAPI, SciPy or the statistics.

Systems are backend specs (``--system joe=piper``, ``--system qwen=piper?profile=qwen3-tts``);
they are loaded in this process, so the ``live`` condition (which needs a running server's
backend) is not available here. ``--stimuli DIR`` imports systems made elsewhere (a folder
``SYSTEM/PROMPT_ID.wav`` or a CSV manifest, checked file by file before anything is created);
a system named ``natural`` is a set of recordings (MUSHRA reference, MOS gold "5").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from backends.errors import InvalidRequest
from evaluation.listening.kinds import NAMES as DESIGN_KINDS
from evaluation.listening.kinds import default_kind
from evaluation.listening.kinds.ab import MODES as AB_MODES


def _open_store(path: str | None, *, read_only: bool = False):
    from app.config import resolve_db
    from app.store import open_store

    return open_store(path or resolve_db(), read_only=read_only)


def _system(arg: str, condition: str, voice: str | None) -> dict[str, Any]:
    """``NAME=SPEC`` or ``SPEC`` (named after its backend, as ``listenlab serve`` does)."""
    from app.state import parse_backend_args

    ((name, spec),) = parse_backend_args([arg])
    return {"name": name, "backend": spec, "voice": voice, "condition": condition}


def _params(text: str | None) -> dict[str, Any]:
    """``seed=1&speed=1.1`` -> {seed: 1, speed: 1.1} (the designer's params field)."""
    from urllib.parse import parse_qsl

    out: dict[str, Any] = {}
    for k, v in parse_qsl(text or "", keep_blank_values=True, strict_parsing=bool(text)):
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /ll/admin/tests`` body these options describe (``--spec`` first, then flags)."""
    spec: dict[str, Any] = {}
    if args.spec:
        try:
            spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InvalidRequest(f"cannot read the test spec {args.spec}: {e}") from None
        if not isinstance(spec, dict):
            raise InvalidRequest("the test spec must be a JSON object")
    if args.system:
        params = _params(args.params)
        spec["systems"] = [
            {**_system(s, args.condition, args.voice), "params": params} for s in args.system
        ]
    if args.prompts_file:
        try:
            spec["prompts"] = Path(args.prompts_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidRequest(f"cannot read prompts from {args.prompts_file}: {e}") from None
    elif args.prompt:
        spec["prompts"] = list(args.prompt)
    elif args.harvard is not None or ("prompts" not in spec and not args.stimuli):
        spec["prompts"] = {"source": "harvard", "n": args.harvard or 10}
    if args.stimuli:
        spec["stimuli"] = args.stimuli
    if args.natural:
        spec["natural"] = list(args.natural)
    for key, value in (
        ("name", args.name),
        ("kind", args.type),
        ("items_per_rater", args.items_per_rater),
        ("reference", args.reference),
        ("ab_mode", args.ab_mode),
        ("consent", args.consent),
        ("completion_code", args.completion_code),
        ("excluded_code", args.excluded_code),
        ("redirect_url", args.redirect_url),
        ("seed", args.seed),
        ("screening", args.screening),
        ("headphone_check", args.headphone_check),
        ("screen", args.screen),
        ("screenout_url", args.screenout_url),
        ("screenout_code", args.screenout_code),
        ("familiarise", args.familiarise),
        ("questionnaire", args.questionnaire),
        ("normalise", args.normalise),
        ("target_ratings", args.target_ratings),
        ("dropout_after_s", args.dropout_after),
        ("show_text", args.show_text),
        ("title", args.title),
        ("instructions", args.instructions),
        ("gold_clip", args.gold_clip),
        ("gold_text", args.gold_text),
        ("target_lufs", args.target_lufs),
        ("ceiling_dbtp", args.ceiling_dbtp),
    ):
        if value is not None:
            spec[key] = value
    if args.draft:
        spec["open"] = False
    if getattr(args, "confirm_not_persistent", False):
        spec["confirm_not_persistent"] = True
    if not spec.get("systems") and not spec.get("stimuli"):
        raise InvalidRequest(
            "give the systems: --system NAME=SPEC (twice or more), --stimuli DIR, or --spec"
        )
    return spec


class ProgressLine:
    """One self-overwriting progress line on a terminal, plain lines otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.last = ""

    def __call__(self, frac: float, msg: str) -> None:
        line = f"generating stimuli {frac * 100:5.1f}%  {msg}  ({time.monotonic() - self.t0:.0f} s)"
        if line == self.last:
            return
        self.last = line
        self.stream.write(("\r\x1b[K" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


def _run_create(args: argparse.Namespace) -> int:
    from app.listening.designer import TestSpec, create_test
    from app.state import AppState

    spec = TestSpec.from_dict(spec_from_args(args))  # the admin route's parser
    store = _open_store(args.db)
    progress = ProgressLine()
    try:
        state = AppState(
            backends={}, default="", store=store, library=None, storage=_storage(args.db)
        )
        import asyncio

        test_id = asyncio.run(create_test(state, spec, progress))
        progress.close()
        t = _tests(store).require_test(test_id)
        n = len(_tests(store).stimuli(test_id))
        from app.listening.designer import design_summary

        summary = design_summary(_tests(store), test_id)
    finally:
        store.close()
    out = {"test_id": test_id, "url": f"/listen/{test_id}", "status": t.status, "stimuli": n}
    if args.json:
        print(json.dumps({**out, "design": summary}))
    else:
        print(
            f"test {test_id} ({t.kind}, {n} stimuli) is {t.status}: raters open "
            f"/listen/{test_id} on `listenlab serve --db {args.db or '<default>'}`"
        )
        print("\n".join(summary["report"]))
    return 0


def _tests(store):
    from app.store.listening import TestStore

    return TestStore(store)


def _run_list(args: argparse.Namespace) -> int:
    from app.listening.jsonable import clean_json

    store = _open_store(args.db, read_only=True)
    try:
        rows = clean_json([t.as_dict() for t in _tests(store).list_tests()])
    finally:
        store.close()
    if args.json:
        print(json.dumps({"tests": rows}))
        return 0
    if not rows:
        print("no tests")
        return 0
    print(text_table(rows))
    return 0


def text_table(rows: list[dict[str, Any]]) -> str:
    """Rows as aligned columns (the keys of the first row), numbers right-aligned: what a
    terminal shows without loading pandas for it."""
    cols = list(rows[0])
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    num = [all(isinstance(r.get(c), int | float) for r in rows) for c in cols]

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, num, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(cols), *(line(row) for row in cells)])


def _run_results(args: argparse.Namespace) -> int:
    from app.listening.jsonable import frames_json
    from evaluation.listening.results import test_results

    store = _open_store(args.db, read_only=True)
    try:
        tests = _tests(store)
        t = tests.require_test(args.test_id)
        data = tests.test_data(args.test_id)
        tables = test_results(data, include_screened=args.include_screened)
        if args.csv:
            from app.listening.export import export_files

            write_export(Path(args.csv), export_files(tests, args.test_id, public=args.public))
    finally:
        store.close()
    if args.json:
        print(json.dumps(frames_json(tables)))
        return 0
    import pandas as pd

    print(f"{t.name} ({t.kind}, {t.status})")
    with pd.option_context("display.width", 160, "display.max_columns", 30):
        for name, df in tables.items():
            print(f"\n== {name} ==")
            print(df.to_string(index=False) if not df.empty else "(none)")
    return 0


def _storage(db: str | None):
    """The store's persistence as ``listenlab serve`` sees it (None: a --db of one's own)."""
    from app.config import storage

    return None if db else storage()


def write_export(folder: Path, files: dict[str, str]) -> None:
    """The export's files under ``folder`` (``raw/``, ``results/``, ``study.json``, …): the
    same files, byte for byte, as the zip of the Results tab."""
    for name, text in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _run_status(args: argparse.Namespace) -> int:
    if args.command_test == "open":
        from app.listening.persistence import check_may_open

        check_may_open(_storage(args.db), args.confirm_not_persistent)
    store = _open_store(args.db)
    try:
        _tests(store).set_status(args.test_id, "open" if args.command_test == "open" else "closed")
    finally:
        store.close()
    print(f"test {args.test_id} is {'open' if args.command_test == 'open' else 'closed'}")
    return 0


def _run_delete(args: argparse.Namespace) -> int:
    if not args.yes:
        print(
            "not deleted: give --yes (the test and every answer in it are removed)", file=sys.stderr
        )
        return 2
    store = _open_store(args.db)
    try:
        tests = _tests(store)
        tests.require_test(args.test_id)
        kept = None
        if not args.no_export:
            kept = _keep_export(tests, args.test_id, Path(store.root) / "exports")
            if kept is None:
                return 1
        tests.delete(args.test_id)
    finally:
        store.close()
    print(
        f"deleted test {args.test_id}; "
        + (f"its export is kept at {kept}" if kept else "no export")
    )
    return 0


def _keep_export(tests: Any, test_id: str, folder: Path) -> Path | None:
    """The test's export zip in ``folder`` (as the Tests tab keeps one), or None (and why, on
    stderr) when it cannot be made: a test of a kind no longer registered has no texts or
    results to write."""
    from app.listening.export import export_zip

    try:
        data = export_zip(tests, test_id)
    except Exception as e:  # noqa: BLE001 - said, and nothing is deleted
        print(
            f"not deleted: its export could not be made ({type(e).__name__}: {e}); "
            "delete it without one with --no-export",
            file=sys.stderr,
        )
        return None
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{test_id}-{int(time.time())}.zip"
    out.write_bytes(data)
    return out


def _confirm_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--confirm-not-persistent",
        action="store_true",
        help="open even though the store is not persistent (a Space without /data: lost on restart)",
    )


def _flag(p: argparse.ArgumentParser, name: str, help_: str) -> None:
    """``--NAME`` / ``--no-NAME``; unset keeps the spec's (or the designer's) default."""
    p.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=None, help=help_)


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "test",
        help="listening tests: create (with stimuli), list, results, open, close, delete",
        description="Listening tests from the command line: the same functions as the admin "
        "designer (/admin/tests) and its JSON routes.",
    )
    tsub = p.add_subparsers(dest="command_test", required=True, help="what to do")
    db_help = (
        "SQLite store (default $LISTENLAB_DB, $LISTENLAB_DATA/listenlab.db or data/listenlab.db)"
    )

    _add_create(tsub, db_help)
    _add_others(tsub, db_help)


def _add_create(tsub: argparse._SubParsersAction, db_help: str) -> None:
    """``listenlab test create``: every option of the designer."""
    c = tsub.add_parser(
        "create",
        help="design a test and record its stimuli",
        description="Design a test and record its stimuli (each system x prompt as a stored, "
        "loudness-normalised take, plus the screening items). Example: listenlab test create "
        "--type mos --system joe=piper --system qwen='piper?profile=qwen3-tts' --harvard 5",
    )
    c.add_argument("--db", help=db_help)
    c.add_argument(
        "--spec", metavar="FILE", help="a JSON test spec (the POST /ll/admin/tests body)"
    )
    c.add_argument("--name", help="test name (for you: raters see --title)")
    c.add_argument("--title", help="public title raters see (default: Listening test)")
    c.add_argument("--instructions", help="instructions shown to raters before the items")
    c.add_argument(
        "--stimuli",
        metavar="DIR",
        help="import systems made elsewhere: DIR/SYSTEM/PROMPT_ID.wav|flac, or a .zip of it (optional "
        "DIR/prompts.csv: prompt_id,text) or a CSV manifest: system,prompt_id,path[,text]",
    )
    c.add_argument(
        "--natural",
        action="append",
        metavar="NAME",
        help="an imported system that is natural recordings (a system named natural always is)",
    )
    c.add_argument("--gold-clip", metavar="FILE", help='MOS: a known-good clip, the gold "5"')
    c.add_argument("--gold-text", help="the gold clip's text (shown like a prompt's)")
    c.add_argument("--target-lufs", type=float, help="loudness target (default -23 LUFS)")
    c.add_argument("--ceiling-dbtp", type=float, help="true-peak ceiling (default -1 dBTP)")
    c.add_argument("--type", choices=DESIGN_KINDS, help=f"test type (default {default_kind()})")
    c.add_argument(
        "--system",
        action="append",
        metavar="NAME=SPEC",
        help="a system: a backend spec, e.g. joe=piper or qwen='piper?profile=qwen3-tts' "
        "(repeat; two configurations of one backend are two systems)",
    )
    c.add_argument("--voice", help="voice for every system (default: each backend's default)")
    c.add_argument(
        "--params", metavar="QUERY", help="request params for every system: seed=1&speed=1"
    )
    c.add_argument(
        "--condition",
        choices=("as_streamed", "whole"),
        default="as_streamed",
        help="as_streamed replays each take's recorded chunk timeline; whole sends it at once "
        "(default %(default)s)",
    )
    src = c.add_mutually_exclusive_group()
    src.add_argument(
        "--harvard",
        type=int,
        metavar="N",
        help="the first N bundled Harvard sentences (default 10)",
    )
    src.add_argument("--prompts-file", metavar="FILE", help="a text file, one prompt per line")
    src.add_argument("--prompt", action="append", metavar="TEXT", help="a prompt (repeat)")
    c.add_argument("--items-per-rater", type=int, help="items per rater (default 10)")
    c.add_argument("--reference", metavar="NAME", help="MUSHRA: the reference system")
    c.add_argument("--ab-mode", choices=AB_MODES, help="A/B: CMOS -3..+3 or forced A/B")
    _add_screening(c)
    c.set_defaults(func=_run_create)


def _add_screening(c: argparse.ArgumentParser) -> None:
    """``listenlab test create``'s screening, crowd and ending options."""
    _flag(c, "screening", "screening items (MOS: anchor, gold, trap; A/B: check pairs)")
    _flag(c, "headphone-check", "the antiphase headphone check before the items")
    c.add_argument(
        "--screen",
        choices=("antiphase", "huggins", "both", "none"),
        help="the headphone screen: Woods' antiphase test (default), Milne's Huggins pitch, "
        "both, or none (overrides --headphone-check)",
    )
    c.add_argument("--screenout-url", help="https://… URL for raters who fail the screen ({code})")
    c.add_argument("--screenout-code", help="fixed screen-out code (default: one per rater)")
    _flag(c, "familiarise", "play the scale's ends before the first item (default on)")
    _flag(
        c,
        "questionnaire",
        "ask each rater listening device, headphone type, native language, age band (default off)",
    )
    _flag(
        c,
        "normalise",
        "bring every stimulus to --target-lufs (default on); --no-normalise keeps the levels "
        "the stimuli came with",
    )
    c.add_argument(
        "--target-ratings",
        type=int,
        metavar="N",
        help="usable ratings per stimulus; then new raters are told the test is full",
    )
    c.add_argument(
        "--dropout-after",
        type=float,
        metavar="S",
        help="seconds idle after which a rater counts as dropped (default 1800)",
    )
    _flag(c, "show-text", "show the prompt's text on the vote page (default on for MOS and A/B)")
    c.add_argument("--consent", help="consent text shown before the test")
    c.add_argument("--completion-code", help="fixed completion code (default: one per rater)")
    c.add_argument(
        "--excluded-code",
        help="the code a rater whom the screening excludes gets instead (default: the "
        "completion code), so their payment can be withheld",
    )
    c.add_argument("--redirect-url", help="https://… URL to send raters to at the end ({code})")
    c.add_argument("--seed", type=int, help="design seed")
    c.add_argument("--draft", action="store_true", help="leave the test as a draft (not open)")
    _confirm_flag(c)
    c.add_argument("--json", action="store_true", help="print {test_id, url, status} as JSON")


def _add_others(tsub: argparse._SubParsersAction, db_help: str) -> None:
    """``listenlab test list|results|open|close``."""
    ls = tsub.add_parser("list", help="list the tests in the store")
    ls.add_argument("--db", help=db_help)
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=_run_list)

    r = tsub.add_parser(
        "results",
        help="a test's results: MOS, A/B, MUSHRA, glitches and the rater table",
        description="A test's results, computed as on the admin Results tab.",
    )
    r.add_argument("test_id", metavar="ID")
    r.add_argument("--db", help=db_help)
    r.add_argument("--include-screened", action="store_true", help="keep screened-out raters")
    r.add_argument("--json", action="store_true", help="the JSON of GET /ll/admin/tests/ID/results")
    r.add_argument(
        "--csv",
        metavar="DIR",
        help="also write the test's export into DIR: exactly the files of the Results tab's "
        "zip (raw/, results/, study.json, methods.md, test.json)",
    )
    r.add_argument(
        "--public",
        action="store_true",
        help="with --csv: leave out crowd ids, Prolific study/session ids and the codes",
    )
    r.set_defaults(func=_run_results)

    for verb in ("open", "close"):
        s = tsub.add_parser(verb, help=f"{verb} a test for votes")
        s.add_argument("test_id", metavar="ID")
        s.add_argument("--db", help=db_help)
        if verb == "open":
            _confirm_flag(s)
        s.set_defaults(func=_run_status)

    d = tsub.add_parser("delete", help="delete a test (an export zip is kept in exports/)")
    d.add_argument("test_id", metavar="ID")
    d.add_argument("--db", help=db_help)
    d.add_argument("--yes", action="store_true", help="yes, delete it and every answer in it")
    d.add_argument(
        "--no-export", action="store_true", help="delete without keeping an export zip first"
    )
    d.set_defaults(func=_run_delete)


__all__ = ["add_cli", "spec_from_args"]
