"""``listenlab probe`` against every model's wire profile, one after another: the verdict, the
failing findings and the per-level numbers of each, in one JSON file.

Why: issue #41 asks that the probe pass against each of the 23 profiles (a player, a client
or a study tries a model with them before a GPU is at hand). Each profile is asked what its
model takes: a reference clip and its words for the models that only clone, a caption for
MiniMax Music 3, a preset voice for Voxtral TTS.

    .venv/bin/python benchmarks/probe_profiles.py [--concurrency 1,2] [--only qwen3-tts,...]
        [-o benchmarks/results/probe_profiles.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REF_TEXT = "This is the reference clip, read aloud once for the model to hear."


def reference_clip(folder: Path) -> Path:
    """A real Piper clip (the CPU voice reading REF_TEXT), made with ``listenlab say``."""
    clip = folder / "reference.wav"
    subprocess.run(
        [sys.executable, "-m", "app.cli", "say", REF_TEXT, "-o", str(clip)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return clip


def arguments(name: str, clip: Path) -> list[str]:
    """What the profile's model needs on every request."""
    from backends.profile import PROFILES
    from backends.vllm_omni.models import UNITS

    unit = UNITS[PROFILES[name].unit]
    args: list[str] = []
    if unit.rules.requires_ref_audio:
        args += ["--ref-audio", str(clip), "--ref-text", REF_TEXT]
    if unit.name == "minimax_music3":
        args += ["--instructions", "A slow piano ballad, 70 BPM, soft female vocal."]
    if unit.name == "voxtral_tts":
        args += ["--voice", unit.presets[0]]
    return args


def probe(name: str, clip: Path, concurrency: str, out: Path) -> dict:
    cmd = [sys.executable, "-m", "app.cli", "probe", "--backend", f"piper?profile={name}"]
    cmd += ["--concurrency", concurrency, "--json", *arguments(name, clip)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    try:
        result = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {
            "profile": name,
            "exit": p.returncode,
            "error": p.stderr[-2000:],
            "seconds": seconds,
        }
    fails = [f for f in result.get("findings", []) if f.get("level") == "fail"]
    return {
        "profile": name,
        "exit": p.returncode,
        "passed": result.get("passed"),
        "seconds": round(seconds, 1),
        "failing": [f.get("message") for f in fails],
        "levels": result.get("levels"),
    }


def main() -> int:
    from backends.profile import PROFILES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default="1,2")
    ap.add_argument("--only", help="comma list of profiles")
    ap.add_argument("-o", "--out", default=str(ROOT / "benchmarks/results/probe_profiles.json"))
    ns = ap.parse_args()
    names = ns.only.split(",") if ns.only else [n for n in PROFILES if n != "custom"]
    with tempfile.TemporaryDirectory() as tmp:
        clip = reference_clip(Path(tmp))
        rows = []
        for name in names:
            row = probe(name, clip, ns.concurrency, Path(tmp))
            rows.append(row)
            verdict = "PASS" if row.get("passed") else "FAIL"
            print(
                f"{verdict} {name} ({row['seconds']:.0f} s) {'; '.join(row.get('failing') or [])}"
            )
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"concurrency": ns.concurrency, "passed": sum(bool(r.get("passed")) for r in rows)}
    out.write_text(json.dumps({"summary": summary, "profiles": rows}, indent=1), encoding="utf-8")
    print(f"{summary['passed']} of {len(rows)} profiles pass -> {out}")
    return 0 if summary["passed"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
