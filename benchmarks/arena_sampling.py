"""The arena's pair choice against known truth: how well the board ranks the systems after K
votes when the next pair is chosen by expected information gain (the arena's rule,
:func:`evaluation.arena.sampling.choose_pair`) or by vote counts (the first rule,
:func:`evaluation.arena.sampling.count_weighted_pair`), and whether the board's intervals
cover the true strengths (issue #42).

Each simulated arena draws true log-strengths ``θ ~ N(0, spread²)`` for N systems and a crowd:

* ``clean``: every vote follows the model. The expected score of ``i`` against ``j`` (a win,
  or half of a tie) is ``σ(θi − θj)``; a tie comes with probability ``0.2 · 4σ(1 − σ)``.
* ``noisy``: as clean, but 30 % of votes are a coin flip (inattentive voters).
* ``adversarial``: as clean, but 15 % of votes come from a ring that picks one low system
  (the 25th percentile) whenever it battles and otherwise votes against the truth.

Votes arrive in batches of 10 (battles are drawn before the votes of the previous ones are
in, as on a live arena): the sampler sees the counted votes at the start of each batch, and
the battles of the batch it already drew as votes on their way (as the arena counts battles
of the last minutes not yet voted, :func:`evaluation.arena.sampling.with_pending`). The
board is the arena's own fit (:func:`evaluation.stats.bt_leaderboard`: evalica's
Bradley–Terry with 2 virtual games); its rank correlation with θ (Kendall τ_b and Spearman
ρ) is read after K = 2, 5, 10, 20 and 40 votes per system on average (K = 1, 2.5, 5, 10, 20
× N votes). Both samplers see the same truth in an arena, so their difference is paired;
its Monte Carlo error is 1.96 × sd / √arenas.

The coverage part runs the board itself (:func:`evaluation.arena.leaderboard`: the rating ±
1.96 × the larger of the sd over 200 bootstrap resamples of voters and the sd from the fit's
observed information) on clean arenas, after 20 and 40 votes per system, and counts how often
a listed system's interval holds its true rating (``1500 + 400/ln 10 · (θ − mean θ)``).

Writes ``benchmarks/results/arena_sampling.json`` (resumable: finished cells are kept).

    .venv/bin/python benchmarks/arena_sampling.py [--quick] [--arenas N] [--coverage-arenas N]
    .venv/bin/python benchmarks/arena_sampling.py --markdown   # the tables for docs/arena.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluation.arena import leaderboard  # noqa: E402
from evaluation.arena.sampling import (  # noqa: E402
    SamplingRules,
    choose_pair,
    count_weighted_pair,
    pair_totals,
    posterior,
    tally_of,
    with_pending,
)
from evaluation.stats import bt_leaderboard  # noqa: E402

SYSTEM_COUNTS = (6, 12, 24)
SPREADS = (0.5, 1.0)
CROWDS = ("clean", "noisy", "adversarial")
VOTES_PER_SYSTEM = (2, 5, 10, 20, 40)
"""Checkpoints: K = this × N / 2 votes (each vote involves two systems)."""
COVERAGE_AT = (20, 40)
SAMPLERS = ("count", "gain")
BATCH = 10
VOTES_PER_VOTER = 8
TIE_RATE = 0.2
NOISE = 0.3
RING_SHARE = 0.15
SCALE = 400 / np.log(10)
COVERAGE_METHOD = "rating ± 1.96 × max(bootstrap sd over voters, observed-information sd)"
METHOD = (
    "v3: common random numbers, normal bootstrap intervals, batches of 10 (pending battles "
    "count), ties 0.2*4p(1-p), noise 0.3, "
    "ring 0.15 at the 25th percentile"
)


@dataclass(frozen=True)
class Cell:
    n: int
    spread: float
    crowd: str

    @property
    def key(self) -> str:
        return f"n={self.n} spread={self.spread} {self.crowd}"


def checkpoints(n: int, per_system: tuple[int, ...] = VOTES_PER_SYSTEM) -> list[int]:
    return [int(round(k * n / 2)) for k in per_system]


def truth(n: int, spread: float, rng: np.random.Generator) -> np.ndarray:
    t = rng.normal(0.0, spread, n)
    return t - t.mean()


def outcome(cell: Cell, theta: np.ndarray, i: int, j: int, u: np.ndarray) -> str:
    """One vote on side A = ``i`` and side B = ``j``: ``a``, ``b`` or ``tie``, from three
    uniform numbers ``u`` drawn for the pair (so both samplers get the same answer to the
    same question: common random numbers, see :func:`answers`)."""
    x, y = min(i, j), max(i, j)
    if cell.crowd == "noisy" and u[0] < NOISE:
        w = x if u[1] < 0.5 else y
    elif cell.crowd == "adversarial" and u[0] < RING_SHARE:
        target = int(np.argsort(theta)[len(theta) // 4])
        w = target if target in (i, j) else (x if theta[x] < theta[y] else y)
    else:
        p = 1.0 / (1.0 + np.exp(-(theta[x] - theta[y])))
        tie = TIE_RATE * 4 * p * (1 - p)
        if u[2] < tie:
            return "tie"
        w = x if u[2] < tie + p - tie / 2 else y
    return "a" if w == i else "b"


class Answers:
    """The crowd's answers, fixed per arena: the m-th vote on a pair uses the m-th triple of
    uniforms drawn for that pair, whichever sampler asks (common random numbers: the
    samplers' difference is then what they asked, not luck)."""

    def __init__(self, seed: int):
        self.seed = seed
        self.seen: dict[tuple[int, int], int] = {}

    def __call__(self, i: int, j: int) -> np.ndarray:
        key = (min(i, j), max(i, j))
        m = self.seen.get(key, 0)
        self.seen[key] = m + 1
        return np.random.default_rng([self.seed, 77, key[0], key[1], m]).random(3)


def board_fit(systems: list[str], rows: list[tuple[str, str, str, str]]) -> np.ndarray:
    """The board's point ratings (log-strength scale, mean 0), in ``systems``' order."""
    df = pd.DataFrame(rows, columns=["system_a", "system_b", "choice", "voter"])
    b = bt_leaderboard(df, n_boot=0, voter="voter").set_index("system")
    return ((b["rating"].reindex(systems).fillna(1500.0) - 1500.0) / SCALE).to_numpy()


def run_arena(cell: Cell, sampler: str, seed: int, coverage: bool = False) -> dict:
    """One simulated arena: the board's τ and ρ at each checkpoint (and, with ``coverage``,
    which listed systems' intervals hold the truth)."""
    rng_truth = np.random.default_rng([seed, cell.n, int(cell.spread * 10)])
    theta = truth(cell.n, cell.spread, rng_truth)
    systems = [f"s{k:02d}" for k in range(cell.n)]
    index = {s: k for k, s in enumerate(systems)}
    rng = np.random.default_rng([seed, 1 + SAMPLERS.index(sampler)])
    rules = SamplingRules()
    marks = checkpoints(cell.n, COVERAGE_AT if coverage else VOTES_PER_SYSTEM)
    rows: list[tuple[str, str, str, str]] = []
    out: dict = {"tau": [], "rho": [], "covered": [], "listed": [], "why": {}}
    post = None
    answers = Answers(seed)
    while len(rows) < marks[-1]:
        tally = tally_of((a, b, c) for a, b, c, _ in rows)
        pending: dict[tuple[str, str], int] = {}
        if sampler == "gain":
            post = posterior(systems, tally, start=None if post is None else post.mean)
        for _ in range(BATCH):
            if sampler == "gain":
                pc = choose_pair(with_pending(post, pending), tally, rng, rules)
                key = tuple(sorted((pc.a, pc.b)))
                pending[key] = pending.get(key, 0) + 1
            else:
                pc = count_weighted_pair(systems, pair_totals(tally), rng)
            out["why"][pc.why] = out["why"].get(pc.why, 0) + 1
            i, j = index[pc.a], index[pc.b]
            choice = outcome(cell, theta, i, j, answers(i, j))
            rows.append((pc.a, pc.b, choice, f"v{len(rows) // VOTES_PER_VOTER}"))
            if len(rows) in marks:
                score(out, cell, systems, theta, rows, coverage)
    return out


def score(out: dict, cell: Cell, systems, theta, rows, coverage: bool) -> None:
    if coverage:
        df = pd.DataFrame(rows, columns=["system_a", "system_b", "choice", "voter"])
        board = leaderboard(df, min_votes=20, n_boot=200, seed=len(rows))
        true = {s: 1500.0 + SCALE * t for s, t in zip(systems, theta, strict=True)}
        listed = board["listed"]
        out["covered"].append(
            [r["ci_low"] - 0.05 <= true[r["system"]] <= r["ci_high"] + 0.05 for r in listed]
        )
        out["listed"].append(len(listed))
        return
    fit = board_fit(systems, rows)
    if np.ptp(fit) == 0:  # a board with every rating equal orders nothing: no correlation
        out["tau"].append(0.0)
        out["rho"].append(0.0)
        return
    out["tau"].append(float(st.kendalltau(fit, theta).statistic))
    out["rho"].append(float(st.spearmanr(fit, theta).statistic))


def mc(x: np.ndarray) -> tuple[float, float]:
    """Mean and its Monte Carlo error (1.96 × sd / √n)."""
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(1.96 * x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def summarise(cell: Cell, runs: dict[str, list[dict]]) -> dict:
    ks = checkpoints(cell.n)
    res: dict = {"K": ks, "votes_per_system": list(VOTES_PER_SYSTEM), "arenas": len(runs["gain"])}
    for metric in ("tau", "rho"):
        m = {s: np.array([r[metric] for r in runs[s]]) for s in SAMPLERS}
        for s in SAMPLERS:
            res[f"{metric}_{s}"] = [round(mc(m[s][:, k])[0], 4) for k in range(len(ks))]
            res[f"{metric}_{s}_mc"] = [round(mc(m[s][:, k])[1], 4) for k in range(len(ks))]
        d = m["gain"] - m["count"]
        res[f"{metric}_gain_minus_count"] = [round(mc(d[:, k])[0], 4) for k in range(len(ks))]
        res[f"{metric}_gain_minus_count_mc"] = [round(mc(d[:, k])[1], 4) for k in range(len(ks))]
    why: dict[str, int] = {}
    for r in runs["gain"]:
        for k, v in r["why"].items():
            why[k] = why.get(k, 0) + v
    total = sum(why.values())
    res["gain_draws"] = {k: round(v / total, 3) for k, v in sorted(why.items())}
    return res


def coverage_summary(runs: list[dict]) -> dict:
    out = {"K": None, "coverage": [], "mc_se": [], "listed_share": []}
    for k in range(len(COVERAGE_AT)):
        per_arena = [np.mean(r["covered"][k]) for r in runs if r["covered"][k]]
        flat = [c for r in runs for c in r["covered"][k]]
        cov = float(np.mean(flat)) if flat else float("nan")
        se = float(np.std(per_arena, ddof=1) / np.sqrt(len(per_arena))) if per_arena else 0.0
        out["coverage"].append(round(cov, 4))
        out["mc_se"].append(round(se, 4))
        out["listed_share"].append(round(float(np.mean([r["listed"][k] for r in runs])), 2))
    return out


def _writer(path: Path, res: dict, part: str):
    """Save ``res``; a part run on its own (``--part``) merges its section into what another
    run (the other part, at the same time) saved meanwhile."""
    own = {"curves": "cells", "coverage": "coverage"}.get(part)

    def save() -> None:
        out = res
        if own is not None:
            try:
                disk = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                disk = {}
            if disk.get("method") == res.get("method"):
                theirs = disk.get(own, {})
                if own == "coverage" and disk.get("coverage_method") != COVERAGE_METHOD:
                    theirs = {}
                out = {**disk, own: {**theirs, **res.get(own, {})}}
                out["coverage_method"] = res.get("coverage_method", disk.get("coverage_method"))
                out["headline"] = headline(out)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    return save


def run_curves(res: dict, arenas: int, save, counts=SYSTEM_COUNTS) -> None:
    cells = res.setdefault("cells", {})
    for n in counts:
        for spread in SPREADS:
            for crowd in CROWDS:
                cell = Cell(n, spread, crowd)
                if cells.get(cell.key, {}).get("arenas", 0) >= arenas:
                    continue
                t = time.monotonic()
                runs = {s: [run_arena(cell, s, seed) for seed in range(arenas)] for s in SAMPLERS}
                cells[cell.key] = {**summarise(cell, runs), "seconds": round(time.monotonic() - t)}
                print(cell.key, json.dumps(cells[cell.key]["tau_gain_minus_count"]), flush=True)
                save()


def run_coverage(res: dict, arenas: int, save, counts=SYSTEM_COUNTS, samplers=SAMPLERS) -> None:
    cov = res.setdefault("coverage", {})
    for n in counts:
        for spread in SPREADS:
            cell = Cell(n, spread, "clean")
            for s in samplers:
                key = f"{cell.key} {s}"
                if cov.get(key, {}).get("arenas", 0) >= arenas:
                    continue
                runs = [run_arena(cell, s, 10_000 + seed, coverage=True) for seed in range(arenas)]
                cov[key] = {
                    **coverage_summary(runs),
                    "K": checkpoints(n, COVERAGE_AT),
                    "arenas": arenas,
                }
                print(key, cov[key]["coverage"], flush=True)
                save()


def headline(res: dict) -> dict:
    """Over all cells: at which K the gain curve is above the count curve, and by how much."""
    out = {}
    for metric in ("tau", "rho"):
        rows = []
        for key, c in res.get("cells", {}).items():
            for k, d, e in zip(
                c["votes_per_system"],
                c[f"{metric}_gain_minus_count"],
                c[f"{metric}_gain_minus_count_mc"],
                strict=True,
            ):
                rows.append({"cell": key, "votes_per_system": k, "diff": d, "mc": e})
        if not rows:
            continue
        df = pd.DataFrame(rows)
        by_k = df.groupby("votes_per_system")["diff"]
        pooled = df.groupby("votes_per_system")["mc"].apply(
            lambda e: float(np.sqrt((e**2).sum()) / len(e))
        )
        out[metric] = {
            "mean_diff_by_votes_per_system": {int(k): round(v, 4) for k, v in by_k.mean().items()},
            "mean_diff_mc_by_votes_per_system": {int(k): round(v, 4) for k, v in pooled.items()},
            "min_diff_by_votes_per_system": {int(k): round(v, 4) for k, v in by_k.min().items()},
            "cells_above": int((df["diff"] > df["mc"]).sum()),
            "cells_below": int((df["diff"] < -df["mc"]).sum()),
            "cells": len(df),
        }
    return out


def markdown(res: dict) -> str:
    """The docs' tables: τ per cell (count, and gain − count with its MC error) at each K, the
    mean difference over the cells, and the intervals' coverage where most systems are listed."""
    ks = " | ".join(str(k) for k in VOTES_PER_SYSTEM)
    lines = [
        f"| systems | spread | crowd | Kendall τ at K votes per system: | {ks} |",
        "| ---: | ---: | --- | --- |" + " ---: |" * len(VOTES_PER_SYSTEM),
    ]
    order = sorted(res.get("cells", {}).items(), key=lambda kv: cell_order(kv[0]))
    for key, c in order:
        n, spread, crowd = key.split()
        count = " | ".join(
            f"{m:.3f} ± {e:.3f}" for m, e in zip(c["tau_count"], c["tau_count_mc"], strict=True)
        )
        diff = " | ".join(
            f"{m:+.3f} ± {e:.3f}"
            for m, e in zip(c["tau_gain_minus_count"], c["tau_gain_minus_count_mc"], strict=True)
        )
        lines.append(f"| {n[2:]} | {spread[7:]} | {crowd} | vote counts (before) | {count} |")
        lines.append(f"| | | | information gain − vote counts | {diff} |")
    h = res.get("headline", {}).get("tau", {})
    if h:
        lines += ["", "| votes per system | mean τ gain − count over the cells | its MC error |"]
        lines += ["| ---: | ---: | ---: |"]
        for k, d in h["mean_diff_by_votes_per_system"].items():
            e = h.get("mean_diff_mc_by_votes_per_system", {}).get(k, float("nan"))
            lines.append(f"| {k} | {d:+.3f} | ± {e:.3f} |")
    lines += [
        "",
        "| systems | spread | pairs chosen by | K | coverage | MC se | systems listed |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for key, c in sorted(res.get("coverage", {}).items(), key=lambda kv: cell_order(kv[0])):
        n, spread, _crowd, sampler = key.split()
        for k, K in enumerate(c["K"]):
            if c["listed_share"][k] < int(n[2:]) / 2:
                continue  # too few systems listed for a coverage to mean much
            lines.append(
                f"| {n[2:]} | {spread[7:]} | {sampler} | {K} | {c['coverage'][k]:.3f} | "
                f"{c['mc_se'][k]:.3f} | {c['listed_share'][k]:g} |"
            )
    return "\n".join(lines)


def cell_order(key: str) -> tuple:
    parts = key.split()
    return (int(parts[0][2:]), float(parts[1][7:]), CROWDS.index(parts[2]), *parts[3:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="40 arenas per cell, 20 for coverage")
    ap.add_argument("--arenas", type=int, default=None, help="arenas per cell (default 200)")
    ap.add_argument(
        "--coverage-arenas", type=int, default=None, help="arenas per coverage cell (default 60)"
    )
    ap.add_argument("--part", choices=("all", "curves", "coverage"), default="all")
    ap.add_argument(
        "--systems",
        default=",".join(map(str, SYSTEM_COUNTS)),
        help="system counts to run (comma-separated; runs of other counts may write the same "
        "file at the same time)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/arena_sampling.json"))
    ap.add_argument("--markdown", action="store_true", help="print the docs' tables and stop")
    ap.add_argument(
        "--samplers", default=",".join(SAMPLERS), help="coverage: which rules (count,gain)"
    )
    ap.add_argument(
        "--summarise", action="store_true", help="recompute the headline from the file and stop"
    )
    args = ap.parse_args()
    out = Path(args.out)
    try:
        res = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        res = {}
    if args.markdown:
        print(markdown(res))
        return 0
    if args.summarise:  # the headline again, from every cell in the file (after split runs)
        res["headline"] = headline(res)
        out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(res["headline"], indent=1))
        return 0
    if res.get("method") != METHOD:
        res = {"method": METHOD}
    if res.get("coverage_method") != COVERAGE_METHOD:  # intervals of another kind: again
        res["coverage"] = {}
        res["coverage_method"] = COVERAGE_METHOD
    save = _writer(out, res, args.part)
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores"
    res["load_avg_1m_at_start"] = round(os.getloadavg()[0], 2)
    res["rules"] = SamplingRules().__dict__
    t = time.monotonic()
    counts = tuple(int(x) for x in args.systems.split(","))
    if args.part in ("all", "curves"):
        run_curves(res, args.arenas or (40 if args.quick else 200), save, counts)
    if args.part in ("all", "coverage"):
        samplers = tuple(args.samplers.split(","))
        run_coverage(
            res, args.coverage_arenas or (20 if args.quick else 60), save, counts, samplers
        )
    res["headline"] = headline(res)
    res["seconds"] = round(time.monotonic() - t)
    save()
    print(json.dumps(res["headline"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
