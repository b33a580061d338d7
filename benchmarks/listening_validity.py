"""Listening-test statistics against known truth: interval coverage, screening, bias, and the
family-wise false-positive rate of the pairwise tests (issue #18).

Two parts:

1. **Simulation** (fast, many tests): rating tables drawn from :mod:`tests.support.simulate`
   (30 honest raters, true MOS 3.0 / 3.5 / 4.0, rater sd 0.5, prompt sd 0.3, noise 0.6, two
   raters each of four bad kinds, both system orders, a natural gold and a gold that is a take
   of a system under test) go through the same functions the results page uses:
   ``stats.screen_raters`` -> ``inference.interval_table`` / ``paired_tests`` / ``sign_tests``.
2. **Service path** (slow, a few runs): ``listenlab serve`` in a subprocess
   (``benchmarks/raters.py``), simulated raters over the real HTTP + WebSocket routes
   (``tests.support.rater.RaterClient``: join, headphone check, stream each stimulus in real
   time, vote). Each rater's score comes from the same model, looked up from the assignment in
   the DB (the simulation's oracle: the rater page itself is blind). The admin results JSON
   must equal the statistics computed directly on the raters' own record of what they voted.

Writes ``benchmarks/results/listening_validity.json`` and prints a table.

    .venv/bin/python benchmarks/listening_validity.py [--quick] [--sims N] [--service-runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.raters import create_test, free_port, start_server, wait_up  # noqa: E402
from evaluation import inference, stats  # noqa: E402
from tests.support.simulate import (  # noqa: E402
    BAD_KINDS,
    AbModel,
    MosModel,
    MushraModel,
    ab_truth,
    ab_votes,
    mos_ratings,
    mushra_scores,
    mushra_truth,
    truth,
)


def _covered(tab: pd.DataFrame, key: str, truth_: dict) -> dict[str, bool]:
    t = tab.set_index(key)
    return {s: bool(t.loc[s, "ci_low"] <= v <= t.loc[s, "ci_high"]) for s, v in truth_.items()}


def _naive_covered(df: pd.DataFrame, truth_: dict) -> list[bool]:
    t = stats.mos_table(df).set_index("system_id")
    return [bool(t.loc[s, "ci_low"] <= v <= t.loc[s, "ci_high"]) for s, v in truth_.items()]


# --------------------------------------------------------------------------- MOS


def mos_part(sims: int) -> dict:
    out = {}
    for gold_name, gold_system in (("natural", None), ("take of s30", "s30")):
        model = MosModel(gold_system=gold_system)
        tr = truth(model)
        cov, naive, bias, honest_ex, honest_n = [], [], [], 0, 0
        caught = {k: [0, 0] for k in BAD_KINDS}
        for i in range(sims):
            for order in (0, 1):
                rng = np.random.default_rng([i, order, len(gold_name)])
                d = mos_ratings(model, rng, order)
                scr = stats.screen_raters(d).set_index("rater_id")
                kinds = d.groupby("rater_id")["kind"].first()
                for rid, k in kinds.items():
                    if k == "honest":
                        honest_n += 1
                        honest_ex += bool(scr.loc[rid, "excluded"])
                    else:
                        caught[k][0] += bool(scr.loc[rid, "excluded"])
                        caught[k][1] += 1
                keep = set(scr.index[~scr["excluded"]])
                items = d[(d["role"] == "item") & d["rater_id"].isin(keep)]
                tab = inference.interval_table(items, ["system_id"], scale=inference.MOS_SCALE)
                cov += list(_covered(tab, "system_id", tr).values())
                t = tab.set_index("system_id")
                bias.append([t.loc[s, "mean"] - v for s, v in tr.items()])
                honest_items = d[(d["role"] == "item") & (d["kind"] == "honest")]
                naive += _naive_covered(honest_items, tr)
        b = np.array(bias)
        out[f"gold {gold_name}"] = {
            "tests": sims * 2,
            "truth": {s: round(v, 4) for s, v in tr.items()},
            "coverage_mos": round(float(np.mean(cov)), 4),
            "coverage_mos_naive_t_interval": round(float(np.mean(naive)), 4),
            "honest_excluded_per_30": round(30 * honest_ex / honest_n, 3),
            "bad_caught": {k: round(c / n, 3) for k, (c, n) in caught.items()},
            "bias_screened_mos": {s: round(float(b[:, j].mean()), 4) for j, s in enumerate(tr)},
            "max_abs_bias": round(float(np.abs(b.mean(axis=0)).max()), 4),
        }
    return out


def fwer_mos(sims: int, null_sims: int) -> dict:
    model = MosModel(system_means={"s1": 3.5, "s2": 3.5, "s3": 3.5}, bad={}, screening=False)
    alt = MosModel(bad={}, screening=False)
    any_sig, power = [], []
    for i in range(null_sims):
        d = mos_ratings(model, np.random.default_rng([i, 7]), i % 2)
        any_sig.append(bool(inference.paired_tests(d)["significant"].any()))
    for i in range(sims):
        a = mos_ratings(alt, np.random.default_rng([i, 8]), i % 2)
        power.append(float(inference.paired_tests(a)["significant"].mean()))
    return {
        "fwer": round(float(np.mean(any_sig)), 4),
        "power_0.5_apart": round(float(np.mean(power)), 3),
    }


# --------------------------------------------------------------------------- A/B


def ab_part(sims: int, null_sims: int) -> dict:
    model = AbModel()
    tr = ab_truth(model)
    cov_c, cov_s, naive_c = [], [], []
    for i in range(sims):
        v = ab_votes(model, np.random.default_rng([i, 11]), i % 2)
        tab = stats.ab_table(v).set_index(["x", "y"])
        o = stats.oriented_votes(v)
        for pr, t in tr.items():
            r = tab.loc[pr]
            cov_c.append(bool(r["cmos_low"] <= t["cmos"] <= r["cmos_high"]))
            cov_s.append(bool(r["x_share_low"] <= t["share_x"] <= r["x_share_high"]))
            cm = o[(o["x"] == pr[0]) & (o["y"] == pr[1])]["cmos_y"].to_numpy(dtype=float)
            lo, hi = stats.t_interval(cm)
            naive_c.append(bool(lo <= t["cmos"] <= hi))
    fwer = {psd: _sign_fwer(psd, 4 * null_sims) for psd in (0.0, model.prompt_sd)}
    power = []
    for i in range(sims):
        a = ab_votes(model, np.random.default_rng([i, 13]), i % 2)
        power.append(float(inference.sign_tests(stats.oriented_votes(a))["significant"].mean()))
    return {
        "tests": sims,
        "coverage_cmos": round(float(np.mean(cov_c)), 4),
        "coverage_cmos_naive_t_interval": round(float(np.mean(naive_c)), 4),
        "coverage_preference_share": round(float(np.mean(cov_s)), 4),
        "null_tests_sign": 4 * null_sims,
        "fwer_sign_tests": fwer[0.0],
        "fwer_sign_tests_with_prompt_effects": fwer[model.prompt_sd],
        "prompt_sd_on_pair_difference": model.prompt_sd,
        "power_0.5_apart": round(float(np.mean(power)), 3),
    }


def _sign_fwer(prompt_sd: float, null_sims: int) -> dict[str, float]:
    """The sign tests' family-wise rate with no true difference. With ``prompt_sd`` > 0 each
    pair leans one way on some prompts and the other way on others, shared by every rater who
    heard that prompt: the tests treat prompts as fixed, so this measures what that costs.
    Cheap (about 4 ms a test), hence 4x the other null tests: the SE is what is in question."""
    null = AbModel(system_means={"s1": 3.5, "s2": 3.5, "s3": 3.5}, prompt_sd=prompt_sd)
    any_sig = []
    for i in range(null_sims):
        v = ab_votes(null, np.random.default_rng([i, 12]), i % 2)
        any_sig.append(bool(inference.sign_tests(stats.oriented_votes(v))["significant"].any()))
    f = float(np.mean(any_sig))
    return {"fwer": round(f, 4), "mc_se": round(float(np.sqrt(f * (1 - f) / null_sims)), 4)}


# --------------------------------------------------------------------------- MUSHRA


def mushra_part(sims: int, null_sims: int) -> dict:
    model = MushraModel()
    tr = mushra_truth(model)
    cov, naive = [], []
    for i in range(sims):
        d = mushra_scores(model, np.random.default_rng([i, 21]))
        tab = stats.mushra_table(d)
        cov += list(_covered(tab, "condition", tr).values())
        for s, v in tr.items():
            lo, hi = stats.t_interval(d.loc[d["system_id"] == s, "score"].to_numpy())
            naive.append(bool(lo <= v <= hi))
    null = MushraModel(system_means={"s1": 70.0, "s2": 70.0, "s3": 70.0})
    any_sig = []
    for i in range(null_sims):
        d = mushra_scores(null, np.random.default_rng([i, 22]))
        any_sig.append(bool(inference.paired_tests(d)["significant"].any()))
    return {
        "tests": sims,
        "truth": {s: round(v, 3) for s, v in tr.items()},
        "coverage_mean": round(float(np.mean(cov)), 4),
        "coverage_mean_naive_t_interval": round(float(np.mean(naive)), 4),
        "fwer_wilcoxon": round(float(np.mean(any_sig)), 4),
    }


# --------------------------------------------------------------------------- service path


SERVICE_SYSTEMS = {"s30": 3.0, "s35": 3.5, "s40": 4.0}


def _oracle(db: Path, test_id: str, rater_id: str) -> dict[str, dict]:
    """The simulation's truth for a rater's items (the rater page never sees it), read from
    the store opened read-only beside the running server."""
    from app.store import Store

    with Store.open(db, read_only=True) as store:
        rows = store.assignments(test_id, rater_id)
    return {
        a.assignment_id: {
            "role": a.role,
            "expected": a.expected,
            "system": (a.meta.get("systems") or [None])[0],
            "prompt": a.meta.get("prompt_id"),
        }
        for a in rows
    }


async def service_rater(url, db, test_id, kind, rng, model: MosModel, prompt_fx) -> list[dict]:
    from tests.support.rater import RaterClient

    c = RaterClient(url, test_id, timeout=300)
    await c.join()
    await c.headphone(correct=True)  # bad raters pass it too: the item rules are under test
    st = await c.status()
    truth_ = _oracle(db, test_id, st["rater_id"])
    rfx = rng.normal(0, model.rater_sd)
    flat = int(rng.integers(1, 6))
    got = []
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        o = truth_[aid]
        if o["role"] == "trap":
            lat = None
        elif o["role"] == "gold":
            lat = (model.anchor_mean if (o["expected"] or 0) <= 2 else model.gold_mean) + rfx
        else:
            p = prompt_fx.setdefault(o["prompt"], rng.normal(0, model.prompt_sd))
            lat = SERVICE_SYSTEMS[o["system"]] + rfx + p
        honest = (
            None
            if lat is None
            else float(np.clip(np.rint(lat + rng.normal(0, model.noise_sd)), 1, 5))
        )
        if kind == "honest":
            s = model.trap_answer if lat is None else honest
        elif kind == "random":
            s = int(rng.integers(1, 6))
        elif kind == "straight":
            s = flat
        elif kind == "inverted":
            s = model.trap_answer if lat is None else 6 - honest
        else:
            s = int(rng.integers(3, 5))
        await c.listen(aid, 0)
        r = await c.vote({"assignment_id": aid, "score": int(s)})
        r.raise_for_status()
        got.append(
            {
                "rater_id": st["rater_id"],
                "kind": kind,
                "role": o["role"],
                "expected": o["expected"],
                "system_id": o["system"],
                "prompt_id": o["prompt"],
                "score": float(s),
            }
        )
        st = await c.status()
    await c.aclose()
    return got


async def service_run(seed: int, order: int, honest: int, bad_each: int, prompts: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="ll-validity-"))
    db = tmp / "listenlab.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(db, port, ("joe=piper?deterministic=1",))
    try:
        await asyncio.to_thread(wait_up, url)
        names = list(SERVICE_SYSTEMS)[:: -1 if order else 1]
        speeds = {"s30": "0.9", "s35": "1.0", "s40": "1.1"}
        t0 = time.monotonic()
        tid = await create_test(
            url,
            {
                "name": "validity",
                "kind": "mos",
                "systems": [
                    {"name": n, "backend": "joe", "params": {"speed": speeds[n]}} for n in names
                ],
                "prompts": {"source": "harvard", "n": prompts},
                "items_per_rater": prompts,
                "screening": True,
                "headphone_check": True,
            },
        )
        gen_s = time.monotonic() - t0
        model = MosModel()
        kinds = ["honest"] * honest + [k for k in BAD_KINDS for _ in range(bad_each)]
        rngs = [np.random.default_rng([seed, order, i]) for i in range(len(kinds))]
        prompt_fx: dict = {}  # drawn by the first rater to hear a prompt, shared by all
        rows = await asyncio.gather(
            *[
                service_rater(url, db, tid, k, g, model, prompt_fx)
                for k, g in zip(kinds, rngs, strict=True)
            ]
        )
        rate_s = time.monotonic() - t0 - gen_s
        async with httpx.AsyncClient(timeout=300) as h:
            res = (await h.get(url + f"/ll/admin/tests/{tid}/results")).json()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    own = pd.DataFrame([x for rs in rows for x in rs])
    scr = stats.screen_raters(own).set_index("rater_id")
    keep = set(scr.index[~scr["excluded"]])
    items = own[(own["role"] == "item") & own["rater_id"].isin(keep)]
    direct = inference.interval_table(items, ["system_id"], scale=inference.MOS_SCALE)
    direct = direct.round(3).set_index("system_id")
    svc = pd.DataFrame(res["mos"]).set_index("system_id")
    same = all(
        int(svc.loc[s, "n"]) == int(direct.loc[s, "n"])
        and abs(svc.loc[s, "mean"] - direct.loc[s, "mean"]) < 1e-9
        and abs(svc.loc[s, "ci_low"] - direct.loc[s, "ci_low"]) < 1e-9
        for s in direct.index
    )
    raters = pd.DataFrame(res["raters"]).set_index("rater_id")
    kind_of = own.groupby("rater_id")["kind"].first()
    ex = raters["excluded"]
    return {
        "seed": seed,
        "order": names,
        "raters": len(kinds),
        "ratings_stored": int(sum(r["n"] for r in res["mos_all_raters"])),
        "service_mos_equals_direct": bool(same),
        "mos": {
            s: [svc.loc[s, "mean"], svc.loc[s, "ci_low"], svc.loc[s, "ci_high"]] for s in svc.index
        },
        "honest_excluded": int(sum(ex[r] for r, k in kind_of.items() if k == "honest")),
        "bad_caught": int(sum(ex[r] for r, k in kind_of.items() if k != "honest")),
        "bad": int(sum(k != "honest" for k in kind_of)),
        "stimulus_generation_s": round(gen_s, 1),
        "rating_s": round(rate_s, 1),
    }


# --------------------------------------------------------------------------- the grid

GRID_RATER_SD = (0.0, 0.5, 1.0)
GRID_PROMPT_SD = (0.0, 0.3, 0.6)
GRID_RATERS = (12, 30, 100)
MUSHRA_PER_MOS = 20.0
"""One MOS point is about 20 MUSHRA points: the MUSHRA cells use 20x the sds (noise 12)."""
GRID_STATS = ("mos", "cmos", "ab_share", "mushra_mean", "mushra_median")
GRID_METHOD = " | ".join(
    (inference.INTERVAL_METHOD, inference.MEDIAN_METHOD, inference.SHARE_METHOD)
)
"""The intervals a grid state was simulated with: a state of other intervals is not resumed."""
CHUNK = 50
"""Simulated tests per cell between two saves of the state (a stopped run loses at most this)."""


def grid_cells() -> list[tuple[float, float, int]]:
    return [(r, p, n) for r in GRID_RATER_SD for p in GRID_PROMPT_SD for n in GRID_RATERS]


def cell_key(cell: tuple[float, float, int]) -> str:
    r, p, n = cell
    return f"rater_sd={r:g} prompt_sd={p:g} raters={n}"


def _hits(lo, hi, truth_: float) -> tuple[bool, float]:
    ok = bool(np.isfinite(lo) and np.isfinite(hi) and lo <= truth_ <= hi)
    return ok, float(hi - lo) / 2 if np.isfinite(lo) and np.isfinite(hi) else float("nan")


def one_grid_test(cell: tuple[float, float, int], c: int, i: int) -> dict[str, list]:
    """Simulated test ``i`` of grid cell ``c`` (seeded by both, so a run split in parts or
    resumed draws exactly the tests one run would): per statistic, each interval's
    ``(covered, half-width)``. Every interval comes from the results page's own functions."""
    rsd, psd, n = cell
    out: dict[str, list] = {k: [] for k in GRID_STATS}
    mos = MosModel(rater_sd=rsd, prompt_sd=psd, honest=n, bad={}, screening=False)
    d = mos_ratings(mos, np.random.default_rng([c, i, 1]), i % 2)
    tab = inference.interval_table(d, ["system_id"], scale=inference.MOS_SCALE)
    for _, r in tab.iterrows():
        out["mos"].append(_hits(r["ci_low"], r["ci_high"], truth(mos)[r["system_id"]]))
    ab = AbModel(rater_sd=rsd, prompt_sd=psd, raters=n)
    v = ab_votes(ab, np.random.default_rng([c, i, 2]), i % 2)
    at = stats.ab_table(v).set_index(["x", "y"])
    for pair, t in ab_truth(ab).items():
        r = at.loc[pair]
        out["cmos"].append(_hits(r["cmos_low"], r["cmos_high"], t["cmos"]))
        out["ab_share"].append(_hits(r["x_share_low"], r["x_share_high"], t["share_x"]))
    mu = MushraModel(rater_sd=rsd * MUSHRA_PER_MOS, prompt_sd=psd * MUSHRA_PER_MOS, raters=n)
    m = stats.mushra_table(mushra_scores(mu, np.random.default_rng([c, i, 3]))).set_index(
        "condition"
    )
    for sys_, t in mushra_truth(mu).items():
        out["mushra_mean"].append(_hits(m.loc[sys_, "ci_low"], m.loc[sys_, "ci_high"], t))
        med = float(np.clip(mu.system_means[sys_], 0, 100))  # the clipped normal's median
        out["mushra_median"].append(
            _hits(m.loc[sys_, "median_low"], m.loc[sys_, "median_high"], med)
        )
    return out


def _add(acc: dict, got: dict[str, list]) -> None:
    """Accumulate one simulated test: per statistic, the share of its intervals that covered
    (a test's intervals share raters and prompts, so the Monte Carlo error is over tests)."""
    for k, hits in got.items():
        a = acc.setdefault(k, {"tests": 0, "intervals": 0, "covered": 0, "sumsq": 0.0, "half": 0.0})
        frac = sum(h for h, _ in hits) / len(hits)
        a["tests"] += 1
        a["intervals"] += len(hits)
        a["covered"] += sum(h for h, _ in hits)
        a["sumsq"] += frac * frac
        a["half"] += float(np.nanmean([w for _, w in hits]))


def cell_summary(acc: dict) -> dict:
    """Coverage per statistic with its Monte Carlo standard error (over simulated tests)."""
    out = {}
    for k, a in acc.items():
        t = a["tests"]
        cov = a["covered"] / a["intervals"]  # every test has as many intervals
        var = max(a["sumsq"] / t - cov * cov, 0.0) * t / max(t - 1, 1)
        out[k] = {
            "coverage": round(cov, 4),
            "mc_se": round(float(np.sqrt(var / t)), 4),
            "tests": t,
            "intervals": a["intervals"],
            "mean_half_width": round(a["half"] / t, 4),
        }
    return out


def run_grid(state: dict, sims: int, part: tuple[int, int], save) -> None:
    """Bring every cell of this part (cell index % parts == part) to ``sims`` simulated tests,
    saving the state every :data:`CHUNK` tests."""
    k, parts = part
    cells = state.setdefault("cells", {})
    for c, cell in enumerate(grid_cells()):
        if c % parts != k:
            continue
        acc = cells.setdefault(cell_key(cell), {"done": 0, "acc": {}})
        while acc["done"] < sims:
            stop = min(sims, acc["done"] + CHUNK)
            t0 = time.monotonic()
            for i in range(acc["done"], stop):
                _add(acc["acc"], one_grid_test(cell, c, i))
            acc["done"] = stop
            acc["seconds"] = round(acc.get("seconds", 0.0) + time.monotonic() - t0, 1)
            save()
            print(f"{cell_key(cell)}: {stop}/{sims} tests", flush=True)


def grid_summary(state: dict) -> dict:
    """Per statistic: the grid's minimum coverage, where it is, and its Monte Carlo error."""
    cells = {k: cell_summary(v["acc"]) for k, v in state.get("cells", {}).items() if v["done"]}
    out: dict = {"cells": cells, "minimum": {}}
    for stat in GRID_STATS:
        have = [(v[stat]["coverage"], k, v[stat]) for k, v in cells.items() if stat in v]
        if not have:
            continue
        cov, where, row = min(have)
        out["minimum"][stat] = {"coverage": cov, "mc_se": row["mc_se"], "cell": where}
    out["complete"] = (
        len(cells) == len(grid_cells())
        and len({v["done"] for v in state.get("cells", {}).values()}) == 1
    )
    return out


def grid_markdown(res: dict) -> str:
    """The grid as the statistics page prints it: the minimum per statistic, then every
    cell (coverage ± Monte Carlo SE)."""
    g = res["grid"]
    names = {
        "mos": "MOS",
        "cmos": "CMOS",
        "ab_share": "A/B share",
        "mushra_mean": "MUSHRA mean",
        "mushra_median": "MUSHRA median",
    }
    lines = ["| statistic | lowest coverage | ± MC SE | in cell |", "| --- | --- | --- | --- |"]
    for k, v in g["minimum"].items():
        lines.append(f"| {names[k]} | {v['coverage']:.3f} | {v['mc_se']:.3f} | {v['cell']} |")
    lines += ["", "| rater sd | prompt sd | raters | " + " | ".join(names.values()) + " |"]
    lines.append("| --- " * (3 + len(names)) + "|")
    for r, p, n in grid_cells():
        c = g["cells"].get(cell_key((r, p, n)))
        if c:
            vals = " | ".join(f"{c[k]['coverage']:.3f} ± {c[k]['mc_se']:.3f}" for k in names)
            lines.append(f"| {r:g} | {p:g} | {n} | {vals} |")
    return "\n".join(lines)


def regimes_markdown(res: dict) -> str:
    """The fixed regime (screening, bias, FWER, power) and the service path, for the docs."""
    nat, take = res["mos"]["gold natural"], res["mos"]["gold take of s30"]
    ab, mu, mp = res["ab"], res["mushra"], res["mos_pairwise"]
    rows = [
        (
            "simulated tests per statistic (FWER: null tests)",
            f"{res['simulated_tests_per_statistic']} ({res['null_tests_per_fwer']})",
        ),
        (
            "MOS coverage, gold natural / gold a take of s30",
            f"{nat['coverage_mos']:.3f} / {take['coverage_mos']:.3f}",
        ),
        (
            "MOS coverage of a naive t interval (ratings as independent)",
            f"{nat['coverage_mos_naive_t_interval']:.3f}",
        ),
        (
            "CMOS / A/B share coverage (naive CMOS t interval)",
            f"{ab['coverage_cmos']:.3f} / {ab['coverage_preference_share']:.3f} "
            f"({ab['coverage_cmos_naive_t_interval']:.3f})",
        ),
        (
            "MUSHRA mean coverage (naive t interval)",
            f"{mu['coverage_mean']:.3f} ({mu['coverage_mean_naive_t_interval']:.3f})",
        ),
        (
            "honest raters excluded per 30 (gold natural / take)",
            f"{nat['honest_excluded_per_30']:.2f} / {take['honest_excluded_per_30']:.2f}",
        ),
        (
            "bad raters caught (gold natural)",
            ", ".join(f"{k} {v:.2f}" for k, v in nat["bad_caught"].items()),
        ),
        ("largest absolute bias of the screened MOS", f"{nat['max_abs_bias']:.3f}"),
        (
            "family-wise false positives: MOS Wilcoxon / MUSHRA Wilcoxon",
            f"{mp['fwer']:.3f} / {mu['fwer_wilcoxon']:.3f}",
        ),
        (
            f"family-wise false positives: A/B sign, with a prompt-by-pair effect of sd "
            f"{ab['prompt_sd_on_pair_difference']:g} ({ab['null_tests_sign']} null tests each)",
            f"{ab['fwer_sign_tests_with_prompt_effects']['fwer']:.3f} ± "
            f"{ab['fwer_sign_tests_with_prompt_effects']['mc_se']:.3f} (without: "
            f"{ab['fwer_sign_tests']['fwer']:.3f} ± {ab['fwer_sign_tests']['mc_se']:.3f})",
        ),
        (
            "power for 0.5 MOS apart: MOS Wilcoxon / A/B sign",
            f"{mp['power_0.5_apart']:.2f} / {ab['power_0.5_apart']:.2f}",
        ),
    ]
    for r in res.get("service", []):
        rows.append(
            (
                f"service path, seed {r['seed']}: {r['raters']} raters over HTTP/WebSocket",
                f"results page = direct statistics: {r['service_mos_equals_direct']}; "
                f"{r['bad_caught']}/{r['bad']} bad caught, {r['honest_excluded']} honest excluded",
            )
        )
    out = ["| regime (30 raters, rater sd 0.5, prompt sd 0.3) | measured |", "| --- | --- |"]
    return "\n".join(out + [f"| {a} | {b} |" for a, b in rows])


# --------------------------------------------------------------------------- ranking (#42)

RANK_BAD = ("position", "inverted", "random")
"""Careless rankers: the same order of screen positions on every screen, the honest order
turned over, a random order."""


@dataclass(frozen=True)
class RankModel:
    """Ranking screens with known truth. Each clip's latent quality is the system's mean plus
    the rater's taste for that system (``rater_sd``), the prompt's effect on that system
    (``prompt_sd``) and noise; a rater ranks the clips by it (a rater effect shared by every
    system, or a prompt's shared by every system, changes no order, so only these matter).
    With screening, every rater also ranks one check screen with the degraded anchor (latent
    :attr:`anchor_mean`)."""

    system_means: tuple[float, ...] = (3.0, 3.5, 4.0, 4.0)
    rater_sd: float = 0.5
    prompt_sd: float = 0.3
    noise_sd: float = 0.6
    raters: int = 30
    prompts: int = 10
    screens: int = 10
    bad: tuple[str, ...] = RANK_BAD
    anchor_mean: float = 1.0

    @property
    def systems(self) -> list[str]:
        return [f"s{i + 1}" for i in range(len(self.system_means))]


def rank_truth(m: RankModel) -> dict[str, float]:
    """Each system's expected rank for a new rater on a new prompt: 1 + the chance that each
    other clip is heard better (the latent difference is normal with sd sqrt(2) times the
    spread of one clip)."""
    from scipy import stats as st

    sd = float(np.sqrt(2 * (m.rater_sd**2 + m.prompt_sd**2 + m.noise_sd**2)))
    mu = np.array(m.system_means)
    out = {}
    for i, s in enumerate(m.systems):
        others = np.delete(mu, i) - mu[i]
        out[s] = float(1 + (st.norm.cdf(others / sd) if sd > 0 else (others > 0)).sum())
    return out


def _ranks(latent: np.ndarray) -> np.ndarray:
    """Ranks of a row of latents, 1 for the highest."""
    r = np.empty(len(latent), dtype=int)
    r[np.argsort(-latent, kind="stable")] = np.arange(1, len(latent) + 1)
    return r


def rank_data(m: RankModel, rng: np.random.Generator):
    """One simulated test as the store hands it to the results: a :class:`TestData` with the
    ``rank_ratings`` frame and the answered check screens, and each rater's kind."""
    from evaluation.listening.data import TestData

    k = len(m.systems)
    pfx = rng.normal(0, m.prompt_sd, (m.prompts, k))
    kinds = ["honest"] * m.raters + list(m.bad)
    rows, checks = [], []
    for r, kind in enumerate(kinds):
        rid = f"r{r:03d}"
        taste = rng.normal(0, m.rater_sd, k)
        for j in range(m.screens + 2):
            check = j >= m.screens
            p = (r * m.screens + j) % m.prompts
            lat = np.array(m.system_means) + taste + pfx[p] + rng.normal(0, m.noise_sd, k)
            if check:
                lat = np.append(lat, m.anchor_mean + rng.normal(0, m.noise_sd))
            n = len(lat)
            slots = rng.permutation(n)  # slot i holds clip slots[i]
            honest = _ranks(lat)[slots]
            by_kind = {
                "honest": honest,
                "inverted": n + 1 - honest,
                "random": rng.permutation(n) + 1,
                "position": np.arange(1, n + 1),
            }
            got = by_kind[kind]
            if check:
                at = int(np.flatnonzero(slots == n - 1)[0])
                payload = json.dumps({"clips": n, "anchor_rank": int(got[at])})
                checks.append([rid, f"{rid}-c{j}", "rank", "gold", float(n), payload])
                continue
            aid = f"{rid}-{j}"
            for i in range(n):
                rows.append([rid, aid, i, m.systems[slots[i]], f"p{p}", int(got[i]), n, kind])
    cols = ["rater_id", "assignment_id", "slot", "system_id", "prompt_id", "rank", "clips", "kind"]
    df = pd.DataFrame(rows, columns=cols)
    chk = pd.DataFrame(
        checks, columns=["rater_id", "assignment_id", "kind", "role", "expected", "payload"]
    )
    raters = pd.DataFrame({"rater_id": [f"r{r:03d}" for r in range(len(kinds))]})
    data = TestData("sim", "rank", {}, {"rank_ratings": df}, raters, checks=chk)
    return data, dict(zip(raters["rater_id"], kinds, strict=True))


def one_rank_test(m: RankModel, rng: np.random.Generator) -> dict:
    """One simulated test through the kind's own screening and tables: per system, covered
    and half-width; the bad raters caught, the honest excluded; the tests' rejections."""
    from evaluation.listening.kinds.rank import (
        friedman_table,
        rank_pairwise,
        rank_screening,
        rank_table,
    )

    data, kinds = rank_data(m, rng)
    scr = rank_screening(data)
    ex = set(scr.index[scr["excluded"]])
    d = data.table("rank_ratings")
    kept = d[~d["rater_id"].isin(ex)]
    tab = rank_table(kept).set_index("system_id")
    tr = rank_truth(m)
    hits = [_hits(tab.loc[s, "ci_low"], tab.loc[s, "ci_high"], v) for s, v in tr.items()]
    fr = friedman_table(kept).set_index("blocks")["p"]
    pw = rank_pairwise(kept)
    return {
        "hits": hits,
        "excluded": {
            k: sum(r in ex for r, kk in kinds.items() if kk == k) for k in set(kinds.values())
        },
        "friedman_screens": bool(fr["screens"] < 0.05),
        "friedman_raters": bool(fr["raters"] < 0.05),
        "pairwise_any": bool(pw["significant"].any()),
    }


RANK_NULL_CELLS = ((0.0, 0.0), (0.5, 0.3), (1.0, 0.6), (1.0, 0.0))
"""(rater sd, prompt sd) of the false-positive cells: no difference between the systems."""


def rank_cell(m: RankModel, sims: int, seed: int) -> dict:
    """Coverage of the mean ranks' intervals (per system; MC error over tests), the screening
    and the tests' rejection rates over ``sims`` simulated tests of ``m``."""
    acc: dict = {}
    ex: dict[str, int] = {}
    rej = {"friedman_screens": 0, "friedman_raters": 0, "pairwise_any": 0}
    t0 = time.monotonic()
    for i in range(sims):
        got = one_rank_test(m, np.random.default_rng([seed, i]))
        _add(acc, {"rank": got["hits"]})
        for k, v in got["excluded"].items():
            ex[k] = ex.get(k, 0) + v
        for k in rej:
            rej[k] += got[k]
    out = cell_summary(acc)["rank"]
    n_kind = {"honest": m.raters, **{b: m.bad.count(b) for b in m.bad}}
    out["honest_excluded_per_30"] = round(30 * ex.get("honest", 0) / (sims * m.raters), 3)
    out["bad_caught"] = {b: round(ex.get(b, 0) / (sims * n_kind[b]), 3) for b in set(m.bad)}
    out |= {k: round(v / sims, 4) for k, v in rej.items()}
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


def rank_part(res: dict, sims: int, null_sims: int, save) -> None:
    """The ranking kind's rows: its coverage grid (the grid's cells, with careless rankers
    screened by the kind's rules) and its tests' false positives with no difference."""
    part = res.setdefault("rank", {})
    part["model"] = {"system_means": list(RankModel().system_means), "bad": list(RANK_BAD)}
    cells = part.setdefault("cells", {})
    for c, (rsd, psd, n) in enumerate(grid_cells()):
        key = cell_key((rsd, psd, n))
        if cells.get(key, {}).get("tests", 0) >= sims:
            continue
        m = RankModel(rater_sd=rsd, prompt_sd=psd, raters=n)
        cells[key] = rank_cell(m, sims, 1000 + c)
        save()
        print(f"rank {key}: {cells[key]['coverage']:.3f}", flush=True)
    null = part.setdefault("null", {})
    for c, (rsd, psd) in enumerate(RANK_NULL_CELLS):
        key = f"rater_sd={rsd:g} prompt_sd={psd:g} raters=30"
        if null.get(key, {}).get("tests", 0) >= null_sims:
            continue
        m = RankModel(system_means=(3.5,) * 4, rater_sd=rsd, prompt_sd=psd)
        null[key] = rank_cell(m, null_sims, 2000 + c)
        save()
        print(f"rank null {key}: {null[key]}", flush=True)
    have = [(v["coverage"], k, v) for k, v in cells.items()]
    if have:
        cov, where, row = min(have)
        part["minimum"] = {"coverage": cov, "mc_se": row["mc_se"], "cell": where}


def rank_markdown(res: dict) -> str:
    """The ranking kind's grid and false positives, as the statistics page prints them."""
    part = res.get("rank") or {}
    if not part.get("cells"):
        return ""
    lines = [
        "| rater sd | prompt sd | raters | mean rank coverage | ± MC SE | honest excluded per 30 "
        "| position / inverted / random caught |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r, p, n in grid_cells():
        c = part["cells"].get(cell_key((r, p, n)))
        if c:
            bad = " / ".join(f"{c['bad_caught'][b]:.2f}" for b in RANK_BAD)
            lines.append(
                f"| {r:g} | {p:g} | {n} | {c['coverage']:.3f} | {c['mc_se']:.3f} "
                f"| {c['honest_excluded_per_30']:.2f} | {bad} |"
            )
    lines += [
        "",
        "| no difference: rater sd, prompt sd (30 raters) | tests | Friedman over screens "
        "| Friedman over raters | any pair significant (Holm) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, c in part.get("null", {}).items():
        r, p = (x.split("=")[1] for x in key.split()[:2])
        lines.append(
            f"| {r}, {p} | {c['tests']} | {c['friedman_screens']:.3f} | "
            f"{c['friedman_raters']:.3f} | {c['pairwise_any']:.3f} |"
        )
    return "\n".join(lines)


def rank_checks(res: dict) -> dict[str, bool]:
    part = res.get("rank") or {}
    if not part.get("cells"):
        return {}
    null = part.get("null", {}).values()
    out = {
        "rank: coverage >= 0.93 in every cell": part["minimum"]["coverage"] >= 0.93,
    }
    if null:
        n = min(c["tests"] for c in null)
        se = float(np.sqrt(0.05 * 0.95 / n))
        out[
            "rank: pairwise FWER and Friedman over raters <= 0.05 within 2 MC SE, no prompt effect"
        ] = all(
            c["pairwise_any"] <= 0.05 + 2 * se and c["friedman_raters"] <= 0.05 + 2 * se
            for k, c in part["null"].items()
            if "prompt_sd=0 " in k
        )
        out["rank: pairwise FWER <= 0.05 within 2 MC SE in every null cell"] = all(
            c["pairwise_any"] <= 0.05 + 2 * se for c in null
        )
    return out


# --------------------------------------------------------------------------- SMOS and P.835 (#42)

KINDS_STATS = ("smos", "p835_sig", "p835_bak", "p835_ovrl")
KINDS_BAD = {"random": 2, "straight": 2}
"""Bad raters in every SMOS and P.835 cell, beside the cell's honest raters: the screening each
kind runs must catch them or the intervals must survive them."""
SMOS_MEANS = {"c25": 2.5, "c35": 3.5, "c42": 4.2}
"""True similarity (latent) of three clones to the reference voice."""
P835_MEANS = {
    "sig": {"e30": 3.0, "e38": 3.8, "e43": 4.3},
    "bak": {"e30": 2.5, "e38": 3.5, "e43": 4.5},
    "ovrl": {"e30": 2.8, "e38": 3.4, "e43": 4.0},
}
HIDDEN_REFERENCE_MEAN = 4.7
"""An honest rater's latent similarity of the reference to itself (the SMOS check item)."""


def _hidden_reference(d: pd.DataFrame, model: MosModel, rng: np.random.Generator) -> pd.DataFrame:
    """One hidden-reference row per rater (role gold, expected 5), as the SMOS kind adds it:
    honest raters rate the reference against itself with their own spread, random raters
    click, straight-liners give their one score."""
    rows = []
    sd = float(np.hypot(model.rater_sd, model.noise_sd))
    for rid, g in d.groupby("rater_id", sort=True):
        kind = g["kind"].iloc[0]
        if kind == "honest":
            s = float(np.clip(np.rint(HIDDEN_REFERENCE_MEAN + rng.normal(0, sd)), 1, 5))
        elif kind == "straight":
            s = float(g["score"].iloc[0])
        else:
            s = float(rng.integers(1, 6))
        rows.append([rid, kind, "ref", "__reference__", "gold", 5.0, s])
    return pd.concat([d, pd.DataFrame(rows, columns=d.columns)], ignore_index=True)


def _fast_keep(d: pd.DataFrame, rules: stats.ScreeningRules = stats.ScreeningRules()) -> set:
    """The raters :func:`stats.screen_raters` keeps, computed at once for a simulated frame
    (no playback columns; check items: a low anchor expecting <= 2, a gold expecting >= 4, a
    trap). ``stats.screen_raters`` loops over raters in pandas (about 1 s per 100 raters): the
    grid would take hours on this machine, so each cell's first test is screened both ways and
    must agree (:func:`_screened_items`)."""
    items = d[d["role"] == "item"].groupby("rater_id")["score"]
    mean, var, n = items.mean(), items.var(ddof=1), items.size()
    gold = d[d["role"] == "gold"]
    low = gold[gold["expected"] <= 2].groupby("rater_id")["score"].max()
    high = gold[gold["expected"] >= 4].set_index("rater_id")
    fails = pd.Series(0, index=mean.index)
    anchor_fail = (low >= mean.reindex(low.index)).astype(int)
    fails = fails.add(anchor_fail, fill_value=0)
    floor = low.reindex(high.index)
    relative = floor.notna()
    gold_fail = np.where(
        relative,
        high["score"] < floor,
        (high["score"] - high["expected"]).abs() > rules.gold_tolerance,
    ).astype(int)
    fails = fails.add(pd.Series(gold_fail, index=high.index).groupby(level=0).sum(), fill_value=0)
    trap = d[d["role"] == "trap"]
    trap_fail = (trap["score"] != trap["expected"]).groupby(trap["rater_id"]).sum()
    flat = (n >= rules.min_items_for_variance) & (var < rules.min_variance)
    bad = (
        (fails > rules.max_gold_failures)
        | (trap_fail.reindex(mean.index, fill_value=0) > rules.max_trap_failures)
        | flat.reindex(mean.index, fill_value=False)
    )
    return set(mean.index[~bad.reindex(mean.index, fill_value=False)])


def _screened_items(d: pd.DataFrame, check: bool = False) -> tuple[pd.DataFrame, set]:
    """The item rows of the raters the screening keeps (``check``: with
    :func:`stats.screen_raters` too, which must agree with the fast path)."""
    keep = _fast_keep(d)
    if check:
        scr = stats.screen_raters(d).set_index("rater_id")
        slow = set(scr.index[~scr["excluded"]])
        if slow != keep:
            raise AssertionError(f"fast screening differs: {sorted(slow ^ keep)}")
    return d[(d["role"] == "item") & d["rater_id"].isin(keep)], keep


def one_kinds_test(cell: tuple[float, float, int], c: int, i: int) -> dict[str, list]:
    """Simulated SMOS and P.835 tests ``i`` of grid cell ``c``, screened as the kinds screen
    (SMOS: the hidden reference, P.808's variance rule; P.835: the MOS check items on OVRL),
    then the kinds' own interval (:func:`inference.interval_table` on 1..5)."""
    rsd, psd, n = cell
    out: dict[str, list] = {k: [] for k in KINDS_STATS}
    sm = MosModel(SMOS_MEANS, rsd, psd, honest=n, bad=dict(KINDS_BAD), screening=False)
    rng = np.random.default_rng([c, i, 41])
    d = _hidden_reference(mos_ratings(sm, rng, i % 2), sm, rng)
    items, _ = _screened_items(d, check=i == 0)
    tab = inference.interval_table(items, ["system_id"], scale=inference.MOS_SCALE)
    for _, r in tab.iterrows():
        out["smos"].append(_hits(r["ci_low"], r["ci_high"], truth(sm)[r["system_id"]]))
    scales = {}
    for j, (scale, means) in enumerate(P835_MEANS.items()):
        m = MosModel(means, rsd, psd, honest=n, bad=dict(KINDS_BAD), screening=scale == "ovrl")
        scales[scale] = (m, mos_ratings(m, np.random.default_rng([c, i, 42, j]), i % 2))
    _, keep = _screened_items(scales["ovrl"][1], check=i == 0)
    for scale, (m, d) in scales.items():
        kept = d[(d["role"] == "item") & d["rater_id"].isin(keep)]
        tab = inference.interval_table(kept, ["system_id"], scale=inference.MOS_SCALE)
        for _, r in tab.iterrows():
            out[f"p835_{scale}"].append(_hits(r["ci_low"], r["ci_high"], truth(m)[r["system_id"]]))
    return out


def run_kinds_grid(res: dict, sims: int, save, part: tuple[int, int] = (0, 1)) -> None:
    """The SMOS and P.835 cells over the same grid (rater sd x prompt sd x honest raters, with
    :data:`KINDS_BAD` bad raters each), resumable like the main grid; kept apart from it
    (``kinds_grid``) so the main grid's state is untouched."""
    state = res.setdefault("kinds_grid_state", {"method": inference.INTERVAL_METHOD, "cells": {}})
    if state.get("method") != inference.INTERVAL_METHOD:
        state.clear()
        state.update(method=inference.INTERVAL_METHOD, cells={})
    for c, cell in enumerate(grid_cells()):
        if c % part[1] != part[0]:
            continue
        acc = state["cells"].setdefault(cell_key(cell), {"done": 0, "acc": {}})
        t0 = time.monotonic()
        for i in range(acc["done"], sims):
            _add(acc["acc"], one_kinds_test(cell, c, i))
            acc["done"] = i + 1
        acc["seconds"] = round(acc.get("seconds", 0.0) + time.monotonic() - t0, 1)
        res["kinds_grid"] = kinds_grid_summary(state)
        save()
        print(f"kinds {cell_key(cell)}: {acc['done']}/{sims} tests", flush=True)


def kinds_grid_summary(state: dict) -> dict:
    cells = {k: cell_summary(v["acc"]) for k, v in state.get("cells", {}).items() if v["done"]}
    out: dict = {"bad_raters": dict(KINDS_BAD), "cells": cells, "minimum": {}}
    for stat in KINDS_STATS:
        have = [(v[stat]["coverage"], k, v[stat]) for k, v in cells.items() if stat in v]
        if have:
            cov, where, row = min(have)
            out["minimum"][stat] = {"coverage": cov, "mc_se": row["mc_se"], "cell": where}
    done = [v["done"] for v in state.get("cells", {}).values()]
    out["sims_per_cell"] = min(done) if done else 0  # a cell run further first keeps its extra
    out["complete"] = len(cells) == len(grid_cells()) and min(done) > 0
    return out


def kinds_grid_markdown(res: dict) -> str:
    """The SMOS and P.835 cells as the statistics page prints them."""
    g = res["kinds_grid"]
    names = {
        "smos": "SMOS",
        "p835_sig": "P.835 SIG",
        "p835_bak": "P.835 BAK",
        "p835_ovrl": "P.835 OVRL",
    }
    lines = ["| statistic | lowest coverage | ± MC SE | in cell |", "| --- | --- | --- | --- |"]
    for k, v in g["minimum"].items():
        lines.append(f"| {names[k]} | {v['coverage']:.3f} | {v['mc_se']:.3f} | {v['cell']} |")
    lines += ["", "| rater sd | prompt sd | raters | " + " | ".join(names.values()) + " |"]
    lines.append("| --- " * (3 + len(names)) + "|")
    for r, p, n in grid_cells():
        c = g["cells"].get(cell_key((r, p, n)))
        if c:
            vals = " | ".join(f"{c[k]['coverage']:.3f} ± {c[k]['mc_se']:.3f}" for k in names)
            lines.append(f"| {r:g} | {p:g} | {n} | {vals} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _writer(path: Path, res: dict):
    def save() -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    return save


def regimes(res: dict, sims: int, null_sims: int, runs: int) -> None:
    """The fixed regime (screening, bias, FWER, power) and the service path."""
    t = time.monotonic()
    res["simulated_tests_per_statistic"] = sims
    res["mos"] = mos_part(sims)
    res["null_tests_per_fwer"] = null_sims
    res["mos_pairwise"] = fwer_mos(sims, null_sims)
    res["ab"] = ab_part(sims, null_sims)
    res["mushra"] = mushra_part(sims, null_sims)
    res["simulation_s"] = round(time.monotonic() - t, 1)
    if runs:
        res["service"] = [
            asyncio.run(service_run(seed, seed % 2, 30, 2, 6)) for seed in range(runs)
        ]


def checks(res: dict) -> dict[str, bool]:
    out: dict[str, bool] = {}
    g = res.get("grid", {}).get("minimum", {})
    if g:
        out["grid: coverage >= 0.93 for every statistic in every cell"] = all(
            v["coverage"] >= 0.93 for v in g.values()
        )
        cells = res["grid"]["cells"].values()
        out["grid: no cell below 0.93 by more than 2 Monte Carlo SE"] = all(
            v["coverage"] + 2 * v["mc_se"] >= 0.93 for c in cells for v in c.values()
        )
    kg = res.get("kinds_grid", {}).get("minimum", {})
    if kg:
        out["SMOS and P.835 cells: coverage >= 0.93 in every cell"] = all(
            v["coverage"] >= 0.93 for v in kg.values()
        )
    mos = res.get("mos")
    if mos:
        out["fixed regime: coverage >= 0.93"] = (
            min(
                *(v["coverage_mos"] for v in mos.values()),
                res["ab"]["coverage_cmos"],
                res["ab"]["coverage_preference_share"],
                res["mushra"]["coverage_mean"],
            )
            >= 0.93
        )
        out["honest excluded <= 1 in 30"] = mos["gold natural"]["honest_excluded_per_30"] <= 1
        out["|bias| <= 0.05"] = mos["gold natural"]["max_abs_bias"] <= 0.05
        n = res["null_tests_per_fwer"]
        se = float(np.sqrt(0.05 * 0.95 / n))  # the MC SE if the true rate were 0.05
        sign = res["ab"]["fwer_sign_tests"]
        out["FWER <= 0.05 within 2 MC SE, where the tests' assumptions hold"] = (
            max(res["mos_pairwise"]["fwer"], res["mushra"]["fwer_wilcoxon"]) <= 0.05 + 2 * se
            and sign["fwer"] <= 0.05 + 2 * sign["mc_se"]
        )
    out.update(rank_checks(res))
    if res.get("service"):
        out["service path = direct statistics"] = all(
            r["service_mos_equals_direct"] for r in res["service"]
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--part",
        choices=("all", "grid", "regimes", "rank", "kinds"),
        default="all",
        help="grid: the coverage grid (resumable); regimes: screening, bias, FWER, power and "
        "the service path; all: grid and regimes (default); rank: the ranking kind's grid and "
        "false positives (resumable, with --grid-sims and --null-sims); kinds: the SMOS and "
        "P.835 cells (resumable)",
    )
    ap.add_argument("--quick", action="store_true", help="fewer simulated tests, one service run")
    ap.add_argument("--sims", type=int, default=None, help="tests per statistic (regimes)")
    ap.add_argument("--grid-sims", type=int, default=None, help="tests per grid cell (1000)")
    ap.add_argument(
        "--grid-part",
        default="0/1",
        metavar="K/N",
        help="run only the grid cells whose index %% N == K (run the N parts in any order, "
        "at once or one after the other; each resumes where it stopped)",
    )
    ap.add_argument(
        "--merge",
        nargs="*",
        default=[],
        metavar="JSON",
        help="take grid cells from these result files (parts run into other files): per cell, "
        "the one with more simulated tests",
    )
    ap.add_argument("--service-runs", type=int, default=None)
    ap.add_argument("--null-sims", type=int, default=None, help="tests per FWER estimate")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/listening_validity.json"))
    ap.add_argument(
        "--markdown", action="store_true", help="print the grid's tables for the docs and stop"
    )
    args = ap.parse_args()
    out = Path(args.out)
    res = _load(out)
    if args.markdown:
        print(grid_markdown(res))
        if res.get("mos"):
            print("\n" + regimes_markdown(res))
        if res.get("rank"):
            print("\n" + rank_markdown(res))
        if res.get("kinds_grid"):
            print("\n" + kinds_grid_markdown(res))
        return 0
    save = _writer(out, res)
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores"
    res.pop("load_note", None)  # written by hand for an earlier run: the load is measured now
    res[f"load_avg_1m_at_start_{args.part}"] = round(os.getloadavg()[0], 2)
    state = res.setdefault("grid_state", {})
    if state.get("method") != GRID_METHOD:  # cells simulated with other intervals: start again
        state.clear()
        state["method"] = GRID_METHOD
    for other in args.merge:
        theirs = _load(Path(other)).get("grid_state", {})
        if theirs.get("method") != GRID_METHOD:
            raise SystemExit(f"{other}: its grid was simulated with other intervals")
        for key, cell in theirs.get("cells", {}).items():
            have = state.setdefault("cells", {}).get(key)
            if have is None or have["done"] < cell["done"]:
                state["cells"][key] = cell
    for other in args.merge:  # the SMOS and P.835 cells of parts run into other files
        theirs = _load(Path(other)).get("kinds_grid_state", {})
        mine = res.setdefault(
            "kinds_grid_state", {"method": inference.INTERVAL_METHOD, "cells": {}}
        )
        for key, cell in theirs.get("cells", {}).items():
            if mine["cells"].get(key, {"done": -1})["done"] < cell["done"]:
                mine["cells"][key] = cell
        if mine["cells"]:
            res["kinds_grid"] = kinds_grid_summary(mine)
    if args.merge:
        res["grid"] = grid_summary(state)
        res["grid_sims_per_cell"] = min(c["done"] for c in state["cells"].values())
    if args.part in ("all", "grid"):
        k, n = (int(x) for x in args.grid_part.split("/"))
        sims = args.grid_sims or (40 if args.quick else 1000)
        res["grid_sims_per_cell"] = sims
        run_grid(state, sims, (k, n), lambda: (res.update(grid=grid_summary(state)), save()))
        res["grid"] = grid_summary(state)
    if args.part == "rank":
        rank_part(res, args.grid_sims or (40 if args.quick else 200), args.null_sims or 400, save)
    if args.part == "kinds":
        k, n = (int(x) for x in args.grid_part.split("/"))
        run_kinds_grid(res, args.grid_sims or (40 if args.quick else 200), save, (k, n))
    if args.part in ("all", "regimes"):
        sims = args.sims or (40 if args.quick else 200)
        null_sims = args.null_sims or max(3 * sims, 200)  # a FWER near 0.05 needs many tests
        runs = args.service_runs if args.service_runs is not None else (1 if args.quick else 2)
        regimes(res, sims, null_sims, runs)
    res["checks"] = checks(res)
    save()
    print(json.dumps({k: v for k, v in res.items() if not k.endswith("grid_state")}, indent=1))
    return 0 if all(res["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
