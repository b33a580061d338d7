"""Parity's error rates: the interval checked by simulation, the false-fail rate on same-system
pairs at the default margins, and the power per damage type and size.

1. **Simulation with known truth** (:mod:`evaluation.parity.simulate`): coverage of the 90 %
   interval, the share failed when the candidate is exactly one margin worse (the false-fail rate
   at the margin, nominal 5 %), the share passed there (nominal 5 %) and the share passed when it
   is as good, on normal, heavy-tailed, skewed, spiky and count-like differences.
2. **Same system**: a pool of Harvard sentences rendered several times by the CPU voice
   (non-deterministic: its noise scales on) and twice through ``piper?profile=qwen3-tts``, every
   take measured once (cached); then many runs of n prompts drawn from the pool, a take of each
   side per prompt, compared at the default margins as ``listenlab parity`` compares them.
   The false-fail rate is the share of runs that fail (default) and that are not shown within
   (``--strict``).
3. **Damage**: one take per prompt damaged (:mod:`evaluation.parity.damage`: noise, a gap, cut
   words, another voice, a replay; three sizes each), compared with the other takes: the share of
   runs failed, and by which measure.

Draws share the pool, so their rates are estimates from overlapping samples of it (said in the
JSON). Writes ``benchmarks/results/parity.json``.

    python benchmarks/parity.py [--prompts 24] [--takes 4] [--runs 400] [--cache DIR] [--pool DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.registry import load_backend  # noqa: E402
from evaluation.parity.damage import CATCHES, DAMAGES, damaged  # noqa: E402
from evaluation.parity.measures import MEASURES, default_margins  # noqa: E402
from evaluation.parity.prompts import ParityPrompt  # noqa: E402
from evaluation.parity.run import compare_all  # noqa: E402
from evaluation.parity.score import measure_sides  # noqa: E402
from evaluation.parity.sides import Side, read_folder, render, save_side  # noqa: E402
from evaluation.parity.simulate import grid  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NS = (5, 10, 20)
DAMAGED_TAKE = 2
"""The take of each prompt that is damaged (the reference's take is drawn from the others)."""


def harvard(n: int) -> list[ParityPrompt]:
    lines = (ROOT / "assets" / "harvard" / "harvard.txt").read_text(encoding="utf-8").splitlines()
    return [ParityPrompt(f"h{i + 1:02d}", t.strip()) for i, t in enumerate(lines[:n]) if t.strip()]


async def pool(
    spec: str, prompts: list[ParityPrompt], takes: int, role: str, keep: Path | None
) -> Side:
    """The rendered takes, kept in ``keep`` (and read back from there on a second run: the
    scores' cache then has them all)."""
    if keep is not None and (keep / "h01.wav").is_file():
        side = read_folder(role, keep, prompts)
        if side.takes_per_prompt >= takes:
            return side
    be = load_backend(spec)
    try:
        side = await render(role, be, prompts, takes, log=lambda m: print(m, file=sys.stderr))
    finally:
        await be.aclose()
    if keep is not None:
        save_side(side, keep)
    return side


def simulation(reps: int) -> list[dict]:
    t0 = time.monotonic()
    rows = [c.__dict__ for c in grid(reps=reps)]
    print(f"simulation: {len(rows)} cells x {reps} runs in {time.monotonic() - t0:.1f} s")
    for r in rows:
        print(
            f"  {r['shape']:22} n={r['prompts']:3} coverage {r['coverage']:.3f}  failed at the "
            f"margin {r['worse_at_margin']:.3f}  passed at the margin {r['pass_at_margin']:.3f}  "
            f"passed when equal {r['pass_when_equal']:.3f}"
        )
    return rows


def draw_runs(values: dict, prompts: list[ParityPrompt], n: int, runs: int, pick, seed: int):
    """``runs`` comparisons of ``n`` prompts; ``pick(rng)`` gives (reference take, candidate
    take); returns the share failed, failed when strict, and per measure shown worse / unsure."""
    rng = random.Random(seed)
    margins = default_margins()
    margins["speaker_between"] = None  # one take per side in a drawn run
    fails = strict = 0
    worse = dict.fromkeys((m.name for m in MEASURES), 0)
    unsure = dict(worse)
    for _ in range(runs):
        chosen = rng.sample(prompts, n)
        vals = {}
        for p in chosen:
            (rs, rk), (cs, ck) = pick(rng)
            vals["reference", (p.prompt_id, 1)] = values[rs, (p.prompt_id, rk)]
            vals["candidate", (p.prompt_id, 1)] = values[cs, (p.prompt_id, ck)]
        comps, _ = compare_all(chosen, vals, margins)
        fails += any(c.worse for c in comps)
        strict += any(not c.shown for c in comps)
        for c in comps:
            worse[c.measure] += c.worse
            unsure[c.measure] += (not c.shown) and not c.worse
    return {
        "runs": runs,
        "failed": fails / runs,
        "failed_strict": strict / runs,
        "worse_by_measure": {k: v / runs for k, v in worse.items() if v},
        "unsure_by_measure": {k: v / runs for k, v in unsure.items() if v},
    }


def spreads(values: dict, prompts: list[ParityPrompt], takes: int) -> dict:
    """Per measure: the standard deviation of one prompt's difference between two takes of
    the CPU voice (every pair of its takes, all prompts), what the margins were set from."""
    from evaluation.parity.measures import BY_NAME

    out = {}
    for name in (
        "wer",
        "cer",
        "speaker_sim",
        "predicted_mos",
        "ms_per_char",
        "loudness_lufs",
        "true_peak_dbtp",
        "f0_median",
        "f0_range_st",
    ):
        m, d = BY_NAME[name], []
        for p in prompts:
            for a in range(1, takes + 1):
                for b in range(a + 1, takes + 1):
                    x, y = (values["piper", (p.prompt_id, k)].get(name) for k in (a, b))
                    if x is not None and y is not None:
                        d.append(m.delta(float(y), float(x)))
        d = [v for v in d if v == v]
        mean = sum(d) / len(d)
        out[name] = round((sum((v - mean) ** 2 for v in d) / (len(d) - 1)) ** 0.5, 4)
    print("spread of one prompt's difference (same voice, two takes):", out)
    return out


def same_system(values: dict, prompts: list[ParityPrompt], takes: int, runs: int) -> dict:
    def piper_pair(rng):
        a, b = rng.sample(range(1, takes + 1), 2)
        return ("piper", a), ("piper", b)

    def profile_pair(rng):
        return ("piper", rng.randint(1, takes)), ("profile", rng.randint(1, 2))

    out = {}
    for name, pick in (("piper_vs_piper", piper_pair), ("piper_vs_profile", profile_pair)):
        out[name] = {}
        for n in (n for n in NS if n <= len(prompts)):
            r = draw_runs(values, prompts, n, runs, pick, seed=n)
            out[name][n] = r
            print(
                f"same system {name:17} n={n:3}: failed {r['failed']:.3f}, not shown within "
                f"{r['failed_strict']:.3f}  worse: {r['worse_by_measure']}  unsure: "
                f"{r['unsure_by_measure']}"
            )
    return out


def measure(prompts, ref: Side, cand: Side, cache: str) -> dict:
    values, _, _ = measure_sides(prompts, ref, cand, cache=cache)
    return values


def damage_power(prompts, piper: Side, values: dict, takes: int, runs: int, cache: str) -> dict:
    others = [k for k in range(1, takes + 1) if k != DAMAGED_TAKE]
    out: dict = {}
    for kind, (_fn, sizes, unit) in DAMAGES.items():
        out[kind] = {"unit": unit, "meant_for": list(CATCHES[kind]), "sizes": {}}
        for size in sizes:
            side = Side("candidate", f"damaged {kind} {size}", "folder")
            for p in prompts:
                side.takes[p.prompt_id, 1] = damaged(
                    piper.takes[p.prompt_id, DAMAGED_TAKE], kind, size
                )
            got = measure(prompts, piper, side, cache)
            vals = {
                **values,
                **{("damaged", k): v for (r, k), v in got.items() if r == "candidate"},
            }
            rows = {}
            for n in (n for n in NS if n <= len(prompts)):
                r = draw_runs(
                    vals,
                    prompts,
                    n,
                    runs,
                    lambda rng: (("piper", rng.choice(others)), ("damaged", 1)),
                    seed=n,
                )
                rows[n] = r
                print(
                    f"damage {kind} {size:g} {unit} n={n:3}: failed {r['failed']:.3f}  "
                    f"by {r['worse_by_measure']}"
                )
            out[kind]["sizes"][str(size)] = rows
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def simulation_table(rows: list[dict]) -> str:
    out = [
        "| differences | prompts | coverage of the 90 % interval | failed at the margin "
        "| passed at the margin | passed when as good |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['shape']} | {r['prompts']} | {pct(r['coverage'])} | "
            f"{pct(r['worse_at_margin'])} | {pct(r['pass_at_margin'])} | "
            f"{pct(r['pass_when_equal'])} |"
        )
    return "\n".join(out)


def same_table(same: dict) -> str:
    out = [
        "| pair | prompts | failed (default) | not shown within (`--strict` fails) | most often "
        "unsure |",
        "|---|---|---|---|---|",
    ]
    for name, by_n in same.items():
        for n, r in by_n.items():
            unsure = sorted(r["unsure_by_measure"].items(), key=lambda kv: -kv[1])[:2]
            words = ", ".join(f"`{k}` {pct(v)}" for k, v in unsure) or "-"
            out.append(
                f"| {name.replace('_vs_', ' vs ')} | {n} | {pct(r['failed'])} | "
                f"{pct(r['failed_strict'])} | {words} |"
            )
    return "\n".join(out)


def damage_table(damage: dict) -> str:
    ns = sorted({int(n) for d in damage.values() for s in d["sizes"].values() for n in s})
    out = [
        "| damage | size | "
        + " | ".join(f"failed, {n} prompts" for n in ns)
        + f" | failed by ({ns[-1]} prompts) |",
        "|---|---|" + "---|" * len(ns) + "---|",
    ]
    for kind, d in damage.items():
        for size, by_n in d["sizes"].items():
            last = by_n[str(ns[-1])] if str(ns[-1]) in by_n else by_n[ns[-1]]
            ranked = sorted(last["worse_by_measure"].items(), key=lambda kv: -kv[1])
            top = [kv for kv in ranked if kv[1] >= 0.5] or ranked[:1]
            by = ", ".join(f"`{k}` {pct(v)}" for k, v in top) or "-"
            cells = " | ".join(pct((by_n.get(str(n)) or by_n.get(n))["failed"]) for n in ns)
            out.append(f"| {kind} | {float(size):g} {d['unit']} | {cells} | {by} |")
    return "\n".join(out)


def docs_tables(results: dict) -> dict[str, str]:
    """The tables ``docs/parity.md`` prints, written from the results (a test compares)."""
    return {
        "simulation": simulation_table(results["simulation"]),
        "same": same_table(results["same_system"]),
        "damage": damage_table(results["damage"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--takes", type=int, default=4)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--reps", type=int, default=20000, help="simulation runs per cell")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "listenlab-parity-bench"))
    ap.add_argument("--out", default="benchmarks/results/parity.json")
    ap.add_argument("--pool", help="keep the rendered takes here (a second run reads them)")
    args = ap.parse_args()
    t0 = time.monotonic()
    out: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg(),
            "note": "shared 2-core machine: other jobs ran during the measurement",
        },
        "margins": default_margins(),
        "simulation": simulation(args.reps),
    }
    prompts = harvard(args.prompts)
    keep = Path(args.pool) if args.pool else None
    piper = asyncio.run(pool("piper", prompts, args.takes, "reference", keep and keep / "piper"))
    profile = asyncio.run(
        pool("piper?profile=qwen3-tts", prompts, 2, "candidate", keep and keep / "profile")
    )
    got = measure(prompts, piper, profile, args.cache)
    values = {("piper" if r == "reference" else "profile", k): v for (r, k), v in got.items()}
    out["pool"] = {
        "prompts": len(prompts),
        "piper_takes": args.takes,
        "profile_takes": 2,
        "draws": "runs draw prompts and takes from this pool: overlapping samples",
    }
    out["spread"] = spreads(values, prompts, args.takes)
    out["same_system"] = same_system(values, prompts, args.takes, args.runs)
    out["damage"] = damage_power(prompts, piper, values, args.takes, args.runs, args.cache)
    out["seconds"] = round(time.monotonic() - t0, 1)
    out["machine"]["load_avg_at_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
    print(f"wrote {args.out} in {out['seconds']:.0f} s")
    for table in docs_tables(json.loads(json.dumps(out, default=float))).values():
        print("\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
