"""``listenlab parity``: is the candidate no worse than the reference? (:mod:`evaluation.parity`)

Exit 0 when every decided measure shows the candidate within its margin, 1 when one does not
(or a render failed), 2 on a usage or input error (a missing file names the file). ``-o DIR``
gets ``parity.json``, ``parity.html``, ``parity.md`` and every take's audio;
``--listening-test DB`` also makes a blind A/B listening test of the same pairs in that store
(:func:`make_listening_test`), whose results hold the machine's verdict beside the listeners'.

Only argparse is imported at the top: the models load when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

LISTENING_ITEMS = 20
"""Items per rater of a test made from a run (at most the prompts)."""
CMOS_MARGIN = 0.3
"""The listening test's default non-inferiority margin, in CMOS points (-3..+3)."""


def _hub(args: argparse.Namespace) -> Any:
    from backends.errors import InvalidRequest
    from evaluation.metrics import HubConfig

    paths = {}
    for spec in args.model:
        name, sep, folder = spec.partition("=")
        if not sep or not name or not folder:
            raise InvalidRequest(f"--model {spec!r}: write NAME=FOLDER, e.g. whisper=/models/w")
        paths[name.strip()] = folder
    return HubConfig(paths=paths, cache_dir=args.hub_cache) if paths or args.hub_cache else None


def _inputs(args: argparse.Namespace) -> tuple[Any, Any, dict[str, float | None]]:
    """The reference (a spec, a folder or a stored run's side), the prompts and the margins."""
    from backends.errors import InvalidRequest
    from evaluation.parity import parse_margins, read_prompts

    given = parse_margins(args.margin or [])
    if args.baseline:
        from evaluation.parity.baseline import load_baseline

        if args.reference:
            raise InvalidRequest("give --reference or --baseline, not both")
        prompts = read_prompts(args.prompts) if args.prompts else None
        b = load_baseline(args.baseline, args.baseline_side, prompts)
        return b.side, b.prompts, {**b.margins, **given}
    if not args.reference or not args.prompts:
        raise InvalidRequest("give --reference and --prompts (or --baseline FILE)")
    return args.reference, read_prompts(args.prompts), given


def _run(args: argparse.Namespace) -> int:
    from evaluation.parity import parity_sync
    from evaluation.parity.report import write_outputs

    def log(m: str) -> None:
        if not args.quiet:
            print(m, file=sys.stderr, flush=True)

    reference, prompts, margins = _inputs(args)
    result = parity_sync(
        reference,
        args.candidate,
        prompts,
        takes=args.takes,
        margins=margins,
        hub=_hub(args),
        cache=args.cache,
        seed=args.seed,
        strict=args.strict,
        log=log,
    )
    paths = write_outputs(result, args.out)
    test_id = None
    if args.listening_test:
        test_id = make_listening_test(
            result, args.out, args.listening_test, args.cmos_margin, args.items_per_rater
        )
    if args.json:
        print(json.dumps({**result.to_dict(), "listening_test": test_id}))
    else:
        print(Path(paths["md"]).read_text(encoding="utf-8"))
        print(
            f"{result.verdict.upper()} -> {paths['html']}"
            + (f"; listening test {test_id} in {args.listening_test}" if test_id else "")
        )
    return 0 if result.passed else 1


def stimuli_folder(result: Any, out: Path) -> Path:
    """``out/listening/{reference,candidate}/<id>.wav`` (each side's first take) and
    ``prompts.csv``: the import layout of :mod:`app.listening.imported`."""
    import csv

    from backends.audio import write_audio_file
    from evaluation.parity.sides import take_path

    root = out / "listening"
    for role in ("reference", "candidate"):
        side = result.sides[role]
        for p in result.prompts:
            take = side.takes.get((p.prompt_id, 1))
            if take is not None:
                path = take_path(root / role, p.prompt_id, 1)
                path.parent.mkdir(parents=True, exist_ok=True)
                write_audio_file(path, take.audio, take.sample_rate)
    with open(root / "prompts.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["prompt_id", "text"])
        for p in result.prompts:
            w.writerow([p.prompt_id, p.text])
    return root


def make_listening_test(
    result: Any, out: str | Path, db: str, margin: float, items: int | None
) -> str:
    """A blind A/B CMOS test of the run's pairs (kind ``parity``: is the candidate no more than
    ``margin`` CMOS points worse?), with the usual screening and familiarisation; the run's
    verdict is stored in the test's config beside the margin. Returns the test id."""
    import asyncio

    from app.listening.designer import TestSpec, create_test
    from app.state import AppState
    from app.store import open_store
    from app.store.listening import TestStore
    from backends.errors import InvalidRequest
    from evaluation.listening.kinds.parity_ab import KIND, config_block

    missing = [
        p.prompt_id
        for p in result.prompts
        if any((p.prompt_id, 1) not in result.sides[r].takes for r in result.sides)
    ]
    if missing:
        raise InvalidRequest(
            f"no take on both sides for prompt(s) {', '.join(missing[:5])}: "
            "a listening test needs every pair"
        )
    folder = stimuli_folder(result, Path(out))
    n = min(items or LISTENING_ITEMS, len(result.prompts))
    spec = TestSpec.from_dict(
        {
            "name": f"parity {result.run_id}: candidate vs reference",
            "kind": KIND.name,
            "stimuli": str(folder),
            "items_per_rater": n,
            "ab_mode": KIND.modes[0],
            "open": False,
        }
    )
    store = open_store(db)
    try:
        state = AppState(backends={}, default="", store=store, library=None, storage=None)
        test_id = asyncio.run(create_test(state, spec))
        tests = TestStore(store)
        tests.change_settings(
            test_id, {"parity": json.dumps(config_block(result.to_dict(), margin))}
        )
        tests.set_status(test_id, "open")
    finally:
        store.close()
    return test_id


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "parity",
        help="is a candidate no worse than its reference? (paired intervals over prompts)",
        description="Compare a candidate (a backend spec rendered now, or a folder of <id>.wav) "
        "with a reference prompt by prompt: words, voice, predicted MOS, timing, level, pitch, "
        "glitches, latency. Exit 0 when no measure is shown worse than its margin (--strict: "
        "when parity is shown on every one), 1 when one is, 2 on a usage or input error.",
    )
    a = p.add_argument
    a("--reference", metavar="DIR|SPEC", help="a folder of <id>.wav files, or a backend spec")
    a("--candidate", required=True, metavar="DIR|SPEC", help="a folder or a backend spec")
    a("--prompts", metavar="CSV", help="id,text (and voice, ref_audio, ref_text) per prompt")
    a("-o", "--out", required=True, metavar="DIR", help="parity.json, .html, .md and the audio")
    a(
        "--takes",
        type=int,
        default=1,
        metavar="N",
        help="renderings per prompt of a backend side (default 1; more for a non-deterministic "
        "backend)",
    )
    a(
        "--margin",
        action="append",
        metavar="NAME=VALUE",
        help="one measure's margin ('off': report only); repeatable (defaults: docs/parity.md)",
    )
    a(
        "--strict",
        action="store_true",
        help="fail unless parity is shown on every decided measure (the report says how many "
        "prompts that needs)",
    )
    a("--baseline", metavar="FILE", help="a stored run's parity.json (or its folder) as reference")
    a(
        "--baseline-side",
        default="candidate",
        choices=("candidate", "reference"),
        help="the stored run's side used (default %(default)s: the version accepted last)",
    )
    a("--seed", type=int, help="seed sent with every request (if the backend takes one)")
    _add_scoring(a)
    _add_listening(a)
    a("--json", action="store_true", help="print parity.json's content on stdout")
    a("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_run)


def _add_scoring(a: Any) -> None:
    a("--cache", metavar="DIR", help="keep the metrics' scores here (a second run is free)")
    a(
        "--hub-cache",
        metavar="DIR",
        help="a Hugging Face cache folder: Whisper WER and WavLM similarity when there",
    )
    a(
        "--model",
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help="a hub metric's model folder (whisper=..., wavlm=...); repeatable",
    )


def _add_listening(a: Any) -> None:
    a(
        "--listening-test",
        metavar="DB",
        help="also make a blind A/B non-inferiority listening test of the pairs in this store",
    )
    a(
        "--cmos-margin",
        type=float,
        default=CMOS_MARGIN,
        help="the listening test's margin in CMOS points (default %(default)s)",
    )
    a(
        "--items-per-rater",
        type=int,
        help=f"the listening test's items per rater (default {LISTENING_ITEMS}, at most the "
        "prompts)",
    )


__all__ = ["CMOS_MARGIN", "LISTENING_ITEMS", "add_cli", "make_listening_test", "stimuli_folder"]
