"""``listenlab``: the command line mirrors the Python API.

``listenlab say`` is :func:`evaluation.takes.say`. Other subcommands live next to the code they
drive: each module in :data:`COMMAND_MODULES` exposes ``add_cli(subparsers)`` and sets
``func`` on its parser, so a new command touches only its own module.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys

from backends.errors import ListenlabError

COMMAND_MODULES = [
    "app.api",  # listenlab api
    "app.server",  # listenlab serve
    "app.cli.analyze",  # analyze, report, export
    "evaluation.probe",  # probe
    "app.listening.cli",  # test (listening tests)
]


def _add_say(sub: argparse._SubParsersAction) -> None:
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


SHARED_HELP = {
    "--host": "address to listen on (default %(default)s)",
    "--port": "port to listen on (default %(default)s)",
    "--log-level": "uvicorn log level: debug, info, warning or error (default %(default)s)",
    "--seed": "random seed, for results that can be reproduced (default %(default)s)",
    "--csv": "folder for the CSV files",
    "--journal-mode": "SQLite journal: wal (local disk, default) or delete (network storage "
    "such as a Space's /data)",
    "db": "the SQLite store (a listenlab .db file)",
    "take": "a .take.json / .wav path, or DB:TAKE_ID",
}
"""One wording for options several commands share, used where a command left ``help`` empty,
so ``--help`` explains every option of every command."""


def _fill_help(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in action.choices.values():
                _fill_help(sp)
        elif not action.help and not isinstance(action, argparse._HelpAction):
            key = action.option_strings[-1] if action.option_strings else action.dest
            action.help = SHARED_HELP.get(key) or SHARED_HELP.get(
                action.option_strings[0] if action.option_strings else key
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="listenlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_say(sub)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # that command is not built yet
                continue
            raise
        mod.add_cli(sub)
    _fill_help(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ListenlabError as e:
        print(f"listenlab {args.command}: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
