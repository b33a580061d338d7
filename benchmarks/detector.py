"""Glitch detector benchmark: speed on an hour of audio, and precision/recall on synthetic takes.

    .venv/bin/python benchmarks/detector.py [--runs 3] [--out benchmarks/results/detector.json]

1. **Speed.** Real Piper takes (deterministic and not, speeds 0.8/1.0/1.3, native clause chunks
   and 0.5 s codec-style chunks) are repeated until they add up to one hour; the detector runs
   over all of them, without and with a reference take. Reported: multiples of real time
   (audio seconds / wall seconds), median of ``--runs`` runs. Target >= 1000x.
2. **Accuracy.** From the same real takes it builds >= 200 cases: clean ones and ones with one
   injected defect of each kind (the injections of ``tests/_evaluation_util.py``). A case is
   found when a finding of the injected kind is at the injected seam (take-level kinds: anywhere).
   Precision counts every finding: ``precision_strict`` only accepts the injected kind at the
   injected place; ``precision`` also accepts findings of another kind at the same place (a gap
   cut into a word is also a click there). Every finding on a clean case is a false alarm.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _evaluation_util import (  # noqa: E402
    TEXTS,
    inject_click,
    inject_crosstalk,
    inject_double,
    inject_gap,
    inject_replay,
    inject_stall,
    inject_truncation,
    pieces_of,
    rebuild,
    rechunk,
    synthesize,
    with_timeline,
)

from backends.piper import PiperBackend, PiperOptions  # noqa: E402
from evaluation.glitches import DetectorConfig, detect  # noqa: E402
from evaluation.takes import Take  # noqa: E402

TAKE_LEVEL = {"truncation", "duration", "crosstalk"}


@dataclass
class Case:
    name: str
    take: Take
    kind: str | None  # None: clean
    seam: int | None
    reference: Take | None = None
    time_s: float | None = None


def pool() -> tuple[list[Take], dict[str, Take]]:
    det = PiperBackend(options=PiperOptions(deterministic=True))
    nd = PiperBackend(options=PiperOptions())
    det.warm_up()
    nd.warm_up()
    takes = synthesize(det, TEXTS) + synthesize(nd, TEXTS)
    takes += synthesize(det, TEXTS[::3], speed=0.8) + synthesize(nd, TEXTS[1::3], speed=1.3)
    refs = {t.request.text: t for t in takes[: len(TEXTS)]}  # deterministic, speed 1
    return takes, refs


def loud_seam(t: Take, rng: np.random.Generator) -> int:
    x = t.mono()
    sr = t.sample_rate
    lvl = np.array(
        [np.sqrt(np.mean(x[max(0, b - sr // 50) : b + sr // 50] ** 2)) for b in t.boundaries]
    )
    good = np.flatnonzero(lvl >= 0.3 * lvl.max())
    return int(rng.choice(good))


def misaligned(t: Take, k: int) -> Take:
    x = t.audio[:, 0].astype(np.int32)
    b = t.boundaries[k]
    d = 22 + int(np.argmax(np.abs(x[b + 22 : b + 220] - x[b - 1])))
    pieces, arr = pieces_of(t)
    pieces[k + 1] = pieces[k + 1][d:]
    return rebuild(t, pieces, arr)


def build_cases(takes: list[Take], refs: dict[str, Take], seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases: list[Case] = []
    long_takes = [t for t in takes if t.duration_s > 3]
    for i, t in enumerate(takes):
        ref = refs.get(t.request.text) if t.request.speed == 1.0 else None
        rc = rechunk(t, 0.5)
        cases.append(Case("clean", t, None, None))
        cases.append(Case("clean-codec-chunks", rc, None, None))
        if ref is not None and ref is not t:
            cases.append(Case("clean-with-reference", t, None, None, ref))
        if len(t.boundaries) >= 1:
            k = int(rng.integers(0, len(t.boundaries)))
            style = ["step", "impulse"][i % 2]
            cases.append(
                Case(
                    f"click-{style}",
                    inject_click(t, k, style, float(rng.uniform(0.05, 0.3))),
                    "click",
                    k,
                )
            )
            cases.append(
                Case(
                    "replay-restart",
                    inject_replay(t, k, "restart", float(rng.uniform(0.6, 1))),
                    "replay",
                    k,
                )
            )
            cases.append(Case("gap-1.5s", inject_gap(t, k, 1.5), "gap", k))
            cases.append(
                Case("underrun-3s", inject_stall(with_timeline(t), k, 3000.0), "underrun", k)
            )
            if ref is not None:
                cases.append(Case("gap-0.4s-vs-reference", inject_gap(t, k, 0.4), "gap", k, ref))
        if len(rc.boundaries) >= 3:
            k = loud_seam(rc, rng)
            cases.append(Case("click-misaligned-resume", misaligned(rc, k), "click", k))
            cases.append(
                Case(
                    "replay-chunk",
                    inject_replay(rc, k, "chunk", float(rng.uniform(0.6, 1))),
                    "replay",
                    k,
                )
            )
            cases.append(Case("gap-0.25s-mid-word", inject_gap(rc, k, 0.25), "gap", k))
        if t.duration_s > 6:
            cases.append(Case("truncation-40%", inject_truncation(t, 0.4), "truncation", None))
        if ref is not None and t.duration_s > 3:
            cases.append(
                Case(
                    "truncation-55%-vs-reference",
                    inject_truncation(t, 0.55),
                    "truncation",
                    None,
                    ref,
                )
            )
            d = inject_double(t)
            cases.append(Case("double-vs-reference", d, "duration", None, ref))
            other = (
                long_takes[(long_takes.index(t) + 5) % len(long_takes)] if t in long_takes else None
            )
            if other is not None and other.request.text != t.request.text:
                cases.append(
                    Case("crosstalk", inject_crosstalk(t, other, 1.2), "crosstalk", None, ref)
                )
    for c in cases:
        if c.seam is not None:
            c.time_s = c.take.boundaries[c.seam] / c.take.sample_rate
    return cases


def score(cases: list[Case], cfg: DetectorConfig) -> dict:
    per_kind: dict[str, dict[str, int]] = {}
    tp_strict = tp_loose = n_find = 0
    clean_alarm_takes = clean_findings = 0
    misses: list[str] = []
    false_alarms: list[str] = []
    for c in cases:
        f = detect(c.take, c.reference, cfg)
        n_find += len(f)
        if c.kind is None:
            clean_findings += len(f)
            clean_alarm_takes += bool(f)
            false_alarms += [f"{c.name}: {x}" for x in f][:2]
            continue

        def at_place(x, c: Case = c) -> bool:
            if c.seam is None:
                return True
            return (x.boundary_index is not None and abs(x.boundary_index - c.seam) <= 1) or abs(
                x.time_s - c.time_s
            ) <= 0.5

        hit = [
            x
            for x in f
            if x.kind == c.kind and (c.kind in TAKE_LEVEL or x.boundary_index == c.seam)
        ]
        k = per_kind.setdefault(c.name, {"cases": 0, "found": 0})
        k["cases"] += 1
        k["found"] += bool(hit)
        tp_strict += len(hit)
        tp_loose += sum(
            1 for x in f if x in hit or at_place(x) or c.kind in TAKE_LEVEL and x.kind in TAKE_LEVEL
        )
        if not hit:
            misses.append(f"{c.name}: {c.take.request.text[:40]!r} -> {[x.kind for x in f]}")
    defect_cases = sum(v["cases"] for v in per_kind.values())
    found = sum(v["found"] for v in per_kind.values())
    for v in per_kind.values():
        v["recall"] = v["found"] / v["cases"]
    clean_cases = sum(1 for c in cases if c.kind is None)
    return {
        "takes": len(cases),
        "clean_takes": clean_cases,
        "defective_takes": defect_cases,
        "recall": found / defect_cases,
        "precision": tp_loose / n_find if n_find else 1.0,
        "precision_strict": tp_strict / n_find if n_find else 1.0,
        "findings": n_find,
        "clean_takes_with_findings": clean_alarm_takes,
        "false_alarms_on_clean": clean_findings,
        "per_case": per_kind,
        "misses": misses[:40],
        "false_alarm_examples": false_alarms[:20],
    }


def speed(
    takes: list[Take], refs: dict[str, Take], runs: int, cfg: DetectorConfig, hours: float = 1.0
) -> dict:
    base = takes + [rechunk(t, 0.5) for t in takes]
    total = sum(t.duration_s for t in base)
    reps = int(np.ceil(hours * 3600 / total))
    hour = (base * reps)[: int(np.ceil(len(base) * hours * 3600 / total))]
    audio_s = sum(t.duration_s for t in hour)
    out = {"audio_s": audio_s, "takes": len(hour)}
    for label, use_ref in (("no_reference", False), ("with_reference", True)):
        walls, cpus = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            c0 = time.process_time()
            for t in hour:
                ref = refs.get(t.request.text) if use_ref and t.request.speed == 1.0 else None
                detect(t, ref, cfg)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        out[label] = {
            "wall_s": walls,
            "cpu_s": cpus,
            "median_wall_s": statistics.median(walls),
            "x_realtime": audio_s / statistics.median(walls),
            "x_realtime_cpu": audio_s / statistics.median(cpus),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "detector.json"))
    args = ap.parse_args(argv)
    cfg = DetectorConfig()
    t0 = time.perf_counter()
    takes, refs = pool()
    synth_s = time.perf_counter() - t0
    print(
        f"synthesised {len(takes)} real Piper takes ({sum(t.duration_s for t in takes):.0f} s) in {synth_s:.0f} s"
    )
    cases = build_cases(takes, refs)
    acc = score(cases, cfg)
    print(
        f"accuracy on {acc['takes']} takes ({acc['clean_takes']} clean, {acc['defective_takes']} with a defect): "
        f"recall {acc['recall']:.3f}, precision {acc['precision']:.3f} (strict {acc['precision_strict']:.3f}), "
        f"clean takes with a finding: {acc['clean_takes_with_findings']}"
    )
    for name, v in sorted(acc["per_case"].items()):
        print(f"  {name:<30} {v['found']:>3}/{v['cases']:<3} recall {v['recall']:.2f}")
    sp = speed(takes, refs, args.runs, cfg, args.hours)
    print(
        f"speed on {sp['audio_s'] / 3600:.2f} h of audio ({sp['takes']} takes): "
        f"{sp['no_reference']['x_realtime']:.0f}x real time without a reference, "
        f"{sp['with_reference']['x_realtime']:.0f}x with one (median of {args.runs}; by CPU time "
        f"{sp['no_reference']['x_realtime_cpu']:.0f}x / {sp['with_reference']['x_realtime_cpu']:.0f}x)"
    )
    result = {
        "benchmark": "detector",
        "machine": {"python": platform.python_version(), "cpu_count": __import__("os").cpu_count()},
        "speed": sp,
        "accuracy": acc,
        "target_x_realtime": 1000,
        "config": asdict(cfg),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
