"""``listenlab metrics``: machine scores of audio files to a CSV (:mod:`evaluation.metrics`).

Only argparse is imported at the top: the metric models load when the command runs, so
``listenlab --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
import time


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "metrics",
        help="machine scores (predicted MOS, WER/CER, speaker similarity, ...) of audio files",
        description="Score audio files or folders (one CSV row per file: path, seconds, one "
        "column per score, error). Bundled tier: pip install 'listenlab[metrics]'; hub tier: "
        "weights on disk only (docs/metrics.md).",
    )
    p.add_argument("audio", nargs="+", metavar="AUDIO", help="audio files or folders")
    p.add_argument("--csv", required=True, metavar="OUT", help="the CSV file to write")
    p.add_argument("--texts", metavar="CSV", help="a CSV with columns id,text; id is a file's stem")
    p.add_argument(
        "--reference-voice", metavar="CLIP", help="the voice speaker similarity compares with"
    )
    p.add_argument(
        "--metrics",
        metavar="LIST",
        help="comma-separated metric names, or 'default' (default: distillmos, dnsmos, pauses, "
        "pitch; plus words with --texts and speaker with --reference-voice); 'list' lists them",
    )
    p.add_argument(
        "--cache", metavar="DIR", help="keep scores here; a second run on the same audio is free"
    )
    p.add_argument("--hub-cache", metavar="DIR", help="a Hugging Face cache folder (hub tier)")
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help="a hub metric's model folder, e.g. whisper=/models/whisper-large-v3 (repeatable)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="torch threads for the models (default %(default)s: fastest on a shared machine)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="processes that score, each with its own models (default 1; 2 pays off on long "
        "batches on an idle 2-core machine; at most 2)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=_run_metrics)


def _progress(start: float):
    def show(done: int, total: int, name: str) -> None:
        width = 30
        filled = int(width * done / total)
        elapsed = time.perf_counter() - start
        tail = name if len(name) <= 40 else "..." + name[-37:]
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:.0f} s  {tail:<40}"
        )
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _list_metrics() -> int:
    from evaluation.metrics import ALL_INFO, DEFAULT

    for name, info in ALL_INFO.items():
        needs = ", ".join(sorted(info.needs)) or "-"
        mark = "*" if name in DEFAULT else " "
        print(f"{mark} {name:<12} {info.tier:<8} needs {needs:<16} -> {', '.join(info.columns)}")
    print("* runs by default")
    return 0


def _run_metrics(args: argparse.Namespace) -> int:
    if args.metrics == "list":
        return _list_metrics()
    from backends.errors import InvalidRequest
    from evaluation.metrics import HubConfig, score_files, write_csv
    from evaluation.metrics.parallel import WORKERS

    if args.threads < 1 or (args.workers is not None and args.workers < 1):
        raise InvalidRequest("--threads and --workers: at least 1")
    paths = {}
    for spec in args.model:
        name, sep, folder = spec.partition("=")
        if not sep or not name or not folder:
            raise InvalidRequest(f"--model {spec!r}: write NAME=FOLDER, e.g. whisper=/models/w")
        paths[name.strip()] = folder
    hub = HubConfig(paths=paths, cache_dir=args.hub_cache)
    start = time.perf_counter()
    cols, rows = score_files(
        args.audio,
        texts=args.texts,
        reference_voice=args.reference_voice,
        metrics=args.metrics,
        cache_dir=args.cache,
        hub=hub,
        progress=None if args.quiet else _progress(start),
        threads=args.threads,
        workers=WORKERS if args.workers is None else args.workers,
    )
    write_csv(args.csv, cols, rows)
    failed = [r for r in rows if r.seconds is None]
    for r in failed:
        print(f"listenlab metrics: {r.error}", file=sys.stderr)
    audio_s = sum(r.seconds or 0 for r in rows)
    wall = time.perf_counter() - start
    print(
        f"{len(rows) - len(failed)} of {len(rows)} files scored ({audio_s:.1f} s of audio in "
        f"{wall:.1f} s) -> {args.csv}",
        file=sys.stderr,
    )
    return 1 if failed else 0
