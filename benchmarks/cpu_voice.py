"""CPU voice benchmark: warm TTFA (short and 50-word comma sentence), RTF, cold start.

Prints a table and writes ``benchmarks/results/cpu_voice.json``. Targets (issue "Foundation"):
warm TTFA <= 0.25 s for both sentences, RTF <= 0.1 on 2 cores.

    .venv/bin/python benchmarks/cpu_voice.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from backends.base import SpeechRequest
from backends.piper import PiperBackend
from evaluation.takes import record

SHORT = "The quick brown fox jumps over the lazy dog."
LONG_COMMA = (
    "When the storm finally passed over the valley, the farmers walked out into their fields, "
    "counting the broken stalks, calling to their neighbours across the fences, and wondering, "
    "as they always did, whether the harvest would be enough to carry them through another long "
    "and hungry winter in the hills."
)
PARAGRAPH = (
    "Streaming speech should start quickly, even on a small machine. Each chunk must join the "
    "next without a click, a gap or a jump in loudness. Nothing should repeat, and nothing "
    "should go missing at the end of the paragraph."
)
COLD_CHILD = r"""
import asyncio, sys, time
t0 = float(sys.argv[1])
from backends.base import SpeechRequest
from backends.piper import PiperBackend
async def main():
    async for c in PiperBackend().stream(SpeechRequest("Hello from a cold start.")):
        print(time.time() - t0, flush=True)
        break
asyncio.run(main())
"""


def summarize(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


async def warm(runs: int) -> dict[str, dict]:
    b = PiperBackend()
    b.warm_up()
    out: dict[str, list[float]] = {"ttfa_short_s": [], "ttfa_long_comma_s": [], "rtf_paragraph": []}
    for _ in range(runs):
        out["ttfa_short_s"].append((await record(b, SpeechRequest(SHORT))).ttfa_ms / 1000)
        out["ttfa_long_comma_s"].append((await record(b, SpeechRequest(LONG_COMMA))).ttfa_ms / 1000)
        out["rtf_paragraph"].append((await record(b, SpeechRequest(PARAGRAPH))).rtf)
    return {k: summarize(v) for k, v in out.items()}


def cold(runs: int) -> dict:
    xs = []
    for _ in range(runs):
        r = subprocess.run(
            [sys.executable, "-c", COLD_CHILD, repr(time.time())],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        xs.append(float(r.stdout.split()[0]))
    return summarize(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default=str(Path(__file__).with_name("results") / "cpu_voice.json"))
    args = ap.parse_args()
    res = asyncio.run(warm(args.runs))
    res["cold_start_to_first_audio_s"] = cold(max(5, args.runs // 2))
    res["targets"] = {"ttfa_s": 0.25, "rtf": 0.1}
    res["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    for k, v in res.items():
        if isinstance(v, dict) and "median" in v:
            print(
                f"{k:32s} median {v['median']:.3f}  (min {v['min']:.3f}, max {v['max']:.3f}, n={v['n']})"
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
