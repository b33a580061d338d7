"""The probe's own report on Piper and on ``piper?profile=qwen3-tts`` at c = 1, 4, 8, 16.

Prints TTFA and RTF p50/p95, the first sound in listenlab's player (its start rule, simulated on
each stream) and how late that is against the ideal start, the largest gap between chunks and
the longest stall per concurrency level, with the probe's verdict, and writes ``benchmarks/results/probe.json``. The prompts are the five bundled
ones (1 to 3 sentences, 5 to 17 s of audio); at c > 5 streams reuse them round-robin.

    python benchmarks/probe.py [--levels 1,4,8,16] [--out benchmarks/results/probe.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.probe import probe_sync  # noqa: E402

SYSTEMS = ["piper", "piper?profile=qwen3-tts"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--out", default="benchmarks/results/probe.json")
    ap.add_argument("--html-dir", help="also write each probe's probe.json/html here")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    out: dict = {
        "levels": levels,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg(),
            "note": "shared 2-core machine: other jobs ran during the measurement",
        },
        "systems": {},
    }
    for spec in SYSTEMS:
        r = probe_sync(spec, concurrency=levels, log=lambda m: print(m, file=sys.stderr))
        if args.html_dir:
            from evaluation.probe.report import write_outputs

            write_outputs(r, Path(args.html_dir) / spec.replace("?", "_").replace("=", "-"))
        rows = {}
        print(f"\n{spec}: {'PASS' if r.passed else 'FAIL'} ({len(r.failures())} failing)")
        print(
            f"{'c':>3} {'TTFA p50':>9} {'p95':>7} {'sound p50':>10} {'late p50':>9} "
            f"{'RTF p50':>8} {'p95':>6} {'max gap':>8} {'stall':>7}"
        )
        for n in sorted(r.levels):
            s = r.levels[n]
            rows[n] = {
                "ttfa_ms_p50": s["ttfa_ms"]["p50"],
                "ttfa_ms_p95": s["ttfa_ms"]["p95"],
                "first_sound_ms_p50": s["start_ms"]["p50"],
                "first_sound_ms_p95": s["start_ms"]["p95"],
                "late_by_ms_p50": s["late_by_ms"]["p50"],
                "rtf_p50": s["rtf"]["p50"],
                "rtf_p95": s["rtf"]["p95"],
                "max_chunk_gap_ms": s["max_chunk_gap_ms"],
                "longest_stall_ms": s["stall_ms_max"],
                "streams": s["streams"],
                "failed_streams": s["failed"],
            }
            print(
                f"{n:>3} {s['ttfa_ms']['p50']:>9.0f} {s['ttfa_ms']['p95']:>7.0f} "
                f"{s['start_ms']['p50']:>10.0f} {s['late_by_ms']['p50']:>9.0f} "
                f"{s['rtf']['p50']:>8.3f} {s['rtf']['p95']:>6.3f} "
                f"{s['max_chunk_gap_ms']:>8.0f} {s['stall_ms_max']:>7.0f}"
            )
        out["systems"][spec] = {
            "passed": r.passed,
            "deterministic": r.deterministic,
            "load_ms": r.load_ms,
            "seconds": round(r.seconds, 1),
            "player": r.to_dict()["player"],
            "failing_findings": [str(f) for f in r.failures()],
            "by_concurrency": rows,
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
