"""``listenlab probe``: vLLM-Omni's validation pyramid against one backend
(:func:`evaluation.probe.probe`), its verdict printed and its outputs written.

``-o DIR`` writes ``probe.json`` and ``probe.html`` (:mod:`evaluation.probe.report`) and
``probe.db``: every take with its findings in a listenlab store, for ``listenlab analyze`` or a
notebook. The store is written here, not in ``evaluation``: analysis never opens a database.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.store import Prompt, System
from backends.errors import InvalidRequest
from evaluation.probe import STRICT, ProbeResult, Thresholds, probe_sync


def save_to_store(result: ProbeResult, store: Any, system_id: str | None = None) -> int:
    """Store every take (with its probe findings, detector ``probe``); returns the take count."""
    sid = system_id or f"probe:{result.backend}"
    store.add_system(System(sid, backend=result.backend, label=sid))
    for p in result.prompts:
        store.add_prompt(Prompt(p.prompt_id, p.text, category="probe"))
    by_take: dict[str, list[dict[str, Any]]] = {}
    for f in result.findings:
        if f.take_id:
            by_take.setdefault(f.take_id, []).append(
                {
                    "kind": f.kind,
                    "time_s": f.time_s,
                    "boundary_index": None if f.seam is None else f.seam - 1,
                    "severity": 1.0,
                    "evidence": {
                        **json.loads(json.dumps(f.evidence, default=float)),
                        "level": f.level,
                        "layer": f.layer,
                        "message": f.message,
                    },
                }
            )
    n = 0
    for row in result.takes:
        take = result.takes_by_id[row.take_id]
        store.save_take(take, system_id=sid, prompt_id=row.prompt_id)
        store.add_auto_findings(take.take_id, by_take.get(take.take_id, []), detector="probe")
        n += 1
    return n


def write_probe(result: ProbeResult, out_dir: str | Path) -> dict[str, Path]:
    """``probe.json``, ``probe.html`` and ``probe.db`` in ``out_dir``."""
    from app.store import Store
    from evaluation.probe.report import write_outputs

    paths = write_outputs(result, out_dir)
    paths["db"] = Path(out_dir) / "probe.db"
    with Store.open(paths["db"]) as s:
        save_to_store(result, s)
    return paths


def _levels(raw: str) -> list[int]:
    try:
        vals = [int(x) for x in raw.replace(" ", "").split(",") if x]
    except ValueError:
        raise InvalidRequest(f"--concurrency wants e.g. 1,4,8,16, got {raw!r}") from None
    if not vals or min(vals) < 1:
        raise InvalidRequest(f"--concurrency wants positive whole numbers, got {raw!r}")
    return vals


def _run_probe(args: argparse.Namespace) -> int:
    import sys

    base = STRICT if args.strict else Thresholds()
    pairs = list(args.threshold or [])
    if args.prebuffer_ms is not None:
        pairs.append(f"prebuffer_ms={args.prebuffer_ms}")
    th = Thresholds.from_pairs(pairs, base)
    quiet = args.json

    def log(m: str) -> None:
        if not quiet:
            print(m, file=sys.stderr, flush=True)

    from app.cli.say import reference_clip

    result = probe_sync(
        args.backend,
        concurrency=_levels(args.concurrency),
        prompts=args.prompts,
        seed=args.seed,
        thresholds=th,
        log=log,
        voice=args.voice,
        language=args.language,
        instructions=args.instructions,
        ref_audio=reference_clip(args.ref_audio) if args.ref_audio else None,
        ref_text=args.ref_text,
        reference=args.reference,
    )
    paths = write_probe(result, args.out) if args.out else {}
    if args.json:
        print(json.dumps(result.to_dict(), default=float))
    else:
        for f in result.findings:
            print(str(f))
        fails = len(result.failures())
        print(
            f"{'PASS' if result.passed else 'FAIL'}: {result.backend}, "
            f"{len(result.takes)} takes, {fails} failing finding{'s' if fails != 1 else ''}, "
            f"{result.seconds:.1f} s" + (f"  -> {paths['html']}" if paths else "")
        )
    return 0 if result.passed else 1


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="run the validation pyramid (offline, streaming, concurrency) against a backend",
        description=(
            "Check a backend the way vLLM-Omni's TTS checklist asks: non-streamed references, "
            "each prompt streamed alone, then N parallel streams. Exit 0 when it passes, 1 when "
            "a finding fails it, 2 on bad arguments."
        ),
    )
    p.add_argument("--backend", required=True, metavar="SPEC", help="backend spec to probe")
    p.add_argument(
        "--concurrency",
        default="1,4",
        metavar="N[,N...]",
        help="parallel stream counts to test (default 1,4; 1 is always included)",
    )
    p.add_argument(
        "--prompts",
        metavar="PATH",
        help="folder of .txt prompts, a .json list or a one-prompt-per-line file "
        "(default: the bundled prompts)",
    )
    p.add_argument("--seed", type=int, help="seed sent with every request (if it takes one)")
    p.add_argument("--voice", help="voice for every request (default: the backend's)")
    p.add_argument("--language", help="language for every request")
    p.add_argument("--instructions", help="style instructions (caption) for every request")
    p.add_argument(
        "--ref-audio",
        metavar="CLIP",
        help="reference clip (1-30 s) for every request: a cloning model needs one",
    )
    p.add_argument("--ref-text", metavar="TEXT", help="what the reference clip says")
    p.add_argument(
        "-o", "--out", metavar="DIR", help="write probe.json, probe.html and probe.db here"
    )
    p.add_argument(
        "--prebuffer-ms",
        type=float,
        help="simulate a simple player with this prebuffer instead of listenlab's player and "
        "its start rule (the default)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="any stall, p95 TTFA > 1500 ms, p95 first sound > 2000 ms, p95 RTF > 0.8, a chunk "
        "gap > 2500 ms or any warning fails",
    )
    p.add_argument(
        "--threshold",
        action="append",
        metavar="NAME=VALUE",
        help="set one threshold (max_stall_ms, max_ttfa_ms, max_start_ms, max_rtf, "
        "max_chunk_gap_ms, max_clipped, min_active, prebuffer_ms (a number or 'rule'), "
        "warnings_fail); repeatable",
    )
    p.add_argument(
        "--reference",
        metavar="DIR",
        help="a fourth layer: compare each prompt's solo stream with DIR/<prompt id>.wav "
        "(listenlab parity's measures and margins; a measure shown worse fails)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=_run_probe)


__all__ = ["add_cli", "save_to_store", "write_probe"]
