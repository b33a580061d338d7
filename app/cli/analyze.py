"""``listenlab analyze``, ``listenlab report`` and ``listenlab export``.

A TAKE argument is either a take file (its ``.take.json`` sidecar or the ``.wav``/``.flac``
beside it, as ``listenlab say -o`` writes them; a bare audio file without a sidecar is read as
one chunk) or ``DB:TAKE_ID`` — a store path and a take id, e.g. ``data/lab.db:3f2a...``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from backends.base import SpeechRequest
from backends.errors import InvalidRequest, NotFound
from evaluation.takes import ChunkRecord, Take


class TakeNotFound(NotFound):
    pass


def _split_db_ref(ref: str) -> tuple[Path, str] | None:
    if ":" not in ref:
        return None
    db, take_id = ref.rsplit(":", 1)
    p = Path(db)
    if take_id and p.suffix.lower() in {".db", ".sqlite", ".sqlite3"}:
        if not p.is_file():
            raise TakeNotFound(f"no store at {p}")
        return p, take_id
    return None


def load_take_ref(ref: str) -> Take:
    """Load a take from a file path or ``DB:TAKE_ID``."""
    db = _split_db_ref(ref)
    if db is not None:
        from app.store import Store

        with Store.open(db[0], read_only=True) as store:
            return store.load_take(db[1])
    p = Path(ref)
    side = p if p.name.endswith(".take.json") else p.with_name(p.stem + ".take.json")
    if side.is_file():
        return Take.load(side)
    if p.is_file() and p.suffix.lower() in {".wav", ".flac"}:
        import soundfile as sf

        audio, sr = sf.read(p, dtype="int16", always_2d=True)
        return Take(
            request=SpeechRequest(text=""),
            backend=f"file:{p.name}",
            sample_rate=sr,
            channels=audio.shape[1],
            chunks=[ChunkRecord(0, 0.0, 0, audio.shape[0])],
            audio=audio,
            total_ms=0.0,
            take_id=p.stem,
        )
    raise TakeNotFound(f"no take at {ref!r} (give a .take.json, a .wav/.flac, or DB.db:TAKE_ID)")


def _config(pairs: list[str], prebuffer_ms: float | None):
    from evaluation.glitches import DetectorConfig

    d: dict[str, str] = {}
    for kv in pairs:
        if "=" not in kv:
            raise InvalidRequest(f"--set wants NAME=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        d[k.strip()] = v.strip()
    if prebuffer_ms is not None:
        d["prebuffer_ms"] = str(prebuffer_ms)
    try:
        return DetectorConfig.from_dict(d)
    except ValueError as e:
        raise InvalidRequest(str(e)) from None


def _run_analyze(args: argparse.Namespace) -> int:
    from evaluation.glitches import analyze

    take = load_take_ref(args.take)
    ref = load_take_ref(args.reference) if args.reference else None
    result = analyze(take, ref, _config(args.set or [], args.prebuffer_ms))
    if args.save:
        db = _split_db_ref(args.take)
        if db is None:
            raise InvalidRequest("--save needs TAKE given as DB:TAKE_ID")
        from app.store import Store, existing_journal_mode

        with Store.open(db[0], journal_mode=existing_journal_mode(db[0])) as store:
            store.add_auto_findings(take.take_id, result.findings)
    checks = [c.to_dict() for c in result.checks]
    if args.json:
        print(
            json.dumps(
                {
                    "metrics": result.metrics,
                    "findings": [f.to_dict() for f in result.findings],
                    "checks": checks,
                },
                default=float,
            )
        )
    else:
        m = result.metrics
        print(
            f"take {take.take_id}: {m['duration_s']:.2f} s, {m['chunk_count']} chunks"
            + (f", reference {ref.take_id} ({ref.duration_s:.2f} s)" if ref else "")
        )
        ran = [c["name"] for c in checks if c["ran"]]
        print("checks run: " + (", ".join(ran) or "none"))
        for c in checks:
            if not c["ran"]:
                print(f"skipped: {c['name']} ({c['why']})")
        if not result.findings:
            print("no findings")
        for f in result.findings:
            print(f)  # Finding.__str__: seams numbered from 1
    return 1 if (args.strict and result.findings) else 0


def _tests_of(store, wanted: list[str] | None):
    """The store's listening tests, or only ``wanted`` (an unknown id is refused by name)."""
    from app.store.listening import TestStore

    tests = TestStore(store)
    for tid in wanted or ():
        tests.require_test(tid)
    every = tests.all_test_data()
    return tests, [t for t in every if not wanted or t.test_id in wanted]


def _run_report(args: argparse.Namespace) -> int:
    from evaluation.report import ReportOptions, write_report

    out = Path(args.out or Path(args.db).with_suffix(".html"))
    csv_dir = Path(args.csv) if args.csv else out.with_name(out.stem + "_csv")
    opts = ReportOptions(
        min_votes=args.min_votes,
        n_boot=args.boot,
        seed=args.seed,
        pool=args.pool,
        only=tuple(args.test or ()),
    )
    with _open_existing_mode(args) as store:
        _, tests = _tests_of(store, args.test)
        write_report(store, out, csv_dir, opts, tests=tests)
    how = "pooled across tests by system name" if args.pool else "per test"
    print(f"wrote {out} and CSV files in {csv_dir} ({how})")
    return 0


def _run_export(args: argparse.Namespace) -> int:
    from app.listening.cli import write_export
    from app.listening.export import export_all
    from evaluation.report import ReportOptions, export_csv

    opts = ReportOptions(pool=args.pool, only=tuple(args.test or ()))
    with _open_existing_mode(args) as store:
        tests, data = _tests_of(store, args.test)
        paths = export_csv(store, args.csv, tests=data, opts=opts)
        exported = [t for t in data if "design" in (t.config or {})]  # a listening test's
        for t in exported:  # own export, as its Results tab's zip
            files = export_all(tests, t.test_id, public=args.public)
            write_export(Path(args.csv) / f"test_{t.test_id}", files)
    how = "pooled across tests by system name" if args.pool else "per test"
    print(
        f"wrote {len(paths)} CSV files ({how}) and {len(exported)} test exports "
        f"(test_<id>/) to {args.csv}"
    )
    return 0


def _open_existing_mode(args: argparse.Namespace):
    """Read-only (``mode=ro``): a report on a live DB must not change or lock it for writers."""
    from app.store import Store

    p = Path(args.db)
    if not p.is_file():
        raise InvalidRequest(f"no store at {p}")
    return Store.open(p, read_only=True)


def _scope(p: argparse.ArgumentParser) -> None:
    """``--test`` and ``--pool``: which tests, and whether their ratings are pooled."""
    p.add_argument(
        "--test", action="append", metavar="ID", help="only this test (repeat; default: every test)"
    )
    p.add_argument(
        "--pool",
        action="store_true",
        help="pool ratings across tests by system name (default: per test); the tables say so",
    )


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help="run the glitch detector on a take",
        description="Print the automatic findings for TAKE (a .take.json/.wav path or DB:TAKE_ID).",
    )
    p.add_argument("take", metavar="TAKE")
    p.add_argument(
        "--reference", metavar="TAKE", help="a take of the same request (non-streamed or solo)"
    )
    p.add_argument(
        "--prebuffer-ms",
        type=float,
        help="simulate a simple player with this prebuffer (default: listenlab's player "
        "and its start rule)",
    )
    p.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="override a DetectorConfig threshold"
    )
    p.add_argument("--json", action="store_true", help="print metrics and findings as JSON")
    p.add_argument(
        "--save", action="store_true", help="store the findings in the DB (TAKE = DB:TAKE_ID)"
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when there are findings (for CI)")
    p.set_defaults(func=_run_analyze)

    p = sub.add_parser("report", help="HTML report (tables + plots) and CSV export of a store")
    p.add_argument("db", metavar="DB")
    p.add_argument("-o", "--out", help="HTML path (default: DB with .html)")
    p.add_argument("--csv", help="CSV folder (default: <report>_csv beside the report)")
    p.add_argument("--min-votes", type=int, default=0, help="Bradley–Terry listing threshold")
    p.add_argument("--boot", type=int, default=200, help="bootstrap resamples (default 200)")
    p.add_argument("--seed", type=int, default=0)
    _scope(p)
    p.add_argument(
        "--journal-mode",
        default=None,
        help="ignored (kept for old scripts): the DB is opened read-only, its mode never changes",
    )
    p.set_defaults(func=_run_report)

    p = sub.add_parser("export", help="export every table (raw and computed) of a store as CSV")
    p.add_argument("db", metavar="DB")
    p.add_argument("--csv", required=True, metavar="DIR")
    _scope(p)
    p.add_argument(
        "--public",
        action="store_true",
        help="the tests' exports without crowd ids, Prolific ids or codes (for publication)",
    )
    p.add_argument("--journal-mode", default=None, help="ignored: the DB is opened read-only")
    p.set_defaults(func=_run_export)


__all__ = ["add_cli", "load_take_ref"]
