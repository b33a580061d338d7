"""``listenlab say``: one take from the command line (:func:`evaluation.takes.say`)."""

from __future__ import annotations

import argparse
import asyncio
import json


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "say",
        help="stream text through a backend, save the audio and the take",
        description="Stream TEXT through a backend and print its warm TTFA, RTF and chunk "
        "count (model loading is timed separately).",
    )
    p.add_argument("text", metavar="TEXT", help="what to say (quote it)")
    p.add_argument(
        "--backend", default="piper", metavar="SPEC", help="backend spec (default: piper)"
    )
    p.add_argument("--voice", help="voice name (default: the backend's default voice)")
    p.add_argument(
        "--language", help="language hint, e.g. en or English (if the backend takes one)"
    )
    p.add_argument("--instructions", help="style instructions (if the backend takes them)")
    p.add_argument("--speed", type=float, help="speaking rate, 0.25-4.0 (default 1.0)")
    p.add_argument("--seed", type=int, help="sampling seed (if the backend takes one)")
    p.add_argument(
        "-o",
        "--out",
        metavar="PATH",
        help="audio path ending in .wav or .flac; a .take.json sidecar is written beside it",
    )
    p.add_argument("--json", action="store_true", help="print the take summary as JSON")
    p.set_defaults(func=_run_say)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _run_say(args: argparse.Namespace) -> int:
    from evaluation.takes import check_audio_path, say

    if args.out:
        check_audio_path(args.out)  # before the model loads: a wrong suffix fails at once
    take = asyncio.run(
        say(
            args.text,
            backend=args.backend,
            out=args.out,
            voice=args.voice,
            language=args.language,
            instructions=args.instructions,
            speed=args.speed,
            seed=args.seed,
        )
    )
    s = take.summary()
    load_ms = take.meta.get("load_ms")
    s["load_ms"] = None if load_ms is None else round(load_ms, 1)
    if args.json:
        print(json.dumps(s))
    else:
        load = f"load {load_ms:.0f} ms, then " if load_ms is not None else ""
        print(
            f"{load}TTFA {s['ttfa_ms']:.0f} ms (warm)  RTF {s['rtf']:.3f}  "
            f"{_plural(s['chunks'], 'chunk')}  "
            f"{s['duration_s']:.2f} s at {s['sample_rate']} Hz x{s['channels']}"
            + (f"  -> {args.out}" if args.out else "")
        )
    return 0
