"""``listenlab``: the command line mirrors the Python API.

Each command lives in one module that exposes ``add_cli(subparsers)`` and sets ``func`` on its
parser (:data:`COMMANDS`). The dispatcher imports only the module of the command being run, so
``listenlab test list`` reads the store without loading FastAPI, SciPy or a voice, and
``listenlab --help`` imports no command at all.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "say": ("app.cli.say", "stream text through a backend, save the audio and the take"),
    "serve": ("app.cli.serve", "start the Playground (Gradio UI + streaming player)"),
    "api": (
        "app.api.cli",
        "serve vLLM-Omni's speech API (HTTP, SSE, WebSocket) over any listenlab backend",
    ),
    "analyze": ("app.cli.analyze", "run the glitch detector on a take"),
    "report": ("app.cli.analyze", "HTML report (tables + plots) and CSV export of a store"),
    "export": ("app.cli.analyze", "export every table (raw and computed) of a store as CSV"),
    "probe": (
        "app.cli.probe",
        "run the validation pyramid (offline, streaming, concurrency) against a backend",
    ),
    "test": (
        "app.cli.remote",
        "listening tests: create (with stimuli), list, results, open, close, upload, export "
        "(locally, or on a deployed server with --server URL)",
    ),
    "parity": (
        "app.cli.parity",
        "is a candidate no worse than its reference? (paired intervals over prompts)",
    ),
    "metrics": (
        "app.cli.metrics",
        "machine scores (predicted MOS, WER/CER, speaker similarity, ...) of audio files",
    ),
    "arena": (
        "app.cli.arena",
        "the arena's votes: export them as a Hugging Face dataset (or CSV)",
    ),
    "db": (
        "app.cli.db",
        "copy a study between SQLite and PostgreSQL (checked); row counts and checksums",
    ),
}
"""Command -> (module with its ``add_cli``, the one-line help ``listenlab --help`` shows)."""


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


def _command(argv: list[str]) -> str | None:
    """The command named in ``argv`` (its first word that is not an option), if it is known."""
    for a in argv:
        if not a.startswith("-"):
            return a if a in COMMANDS else None
    return None


EVERY = "*"


def build_parser(command: str | None = EVERY) -> argparse.ArgumentParser:
    """The parser with ``command``'s own options (its module imported) and every other command
    listed by name and help only; by default every command in full (for docs and tests)."""
    parser = argparse.ArgumentParser(prog="listenlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    wanted = dict.fromkeys(m for m, _ in COMMANDS.values()) if command == EVERY else {}
    if command not in (None, EVERY):
        wanted = {COMMANDS[command][0]: None}
    for module in wanted:
        importlib.import_module(module).add_cli(sub)
    for name, (_module, help_) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=help_, add_help=False)
    _fill_help(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command(argv)).parse_args(argv)
    from app.config import apply_backend_settings
    from backends.errors import ListenlabError

    apply_backend_settings()  # the environment's backend settings, read once

    try:
        return int(args.func(args) or 0)
    except ListenlabError as e:
        print(f"listenlab {args.command}: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except KeyboardInterrupt:
        return 130


__all__ = ["COMMANDS", "build_parser", "main"]
