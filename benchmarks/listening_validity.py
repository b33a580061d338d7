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

N_BOOT = 500


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
                tab = inference.interval_table(
                    items, ["system_id"], scale=inference.MOS_SCALE, n_boot=N_BOOT, seed=i
                )
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
        tab = stats.ab_table(v, n_boot=N_BOOT, seed=i).set_index(["x", "y"])
        o = stats.oriented_votes(v)
        for pr, t in tr.items():
            r = tab.loc[pr]
            cov_c.append(bool(r["cmos_low"] <= t["cmos"] <= r["cmos_high"]))
            cov_s.append(bool(r["x_share_low"] <= t["share_x"] <= r["x_share_high"]))
            cm = o[(o["x"] == pr[0]) & (o["y"] == pr[1])]["cmos_y"].to_numpy(dtype=float)
            lo, hi = stats.t_interval(cm)
            naive_c.append(bool(lo <= t["cmos"] <= hi))
    null = AbModel(system_means={"s1": 3.5, "s2": 3.5, "s3": 3.5})
    any_sig, power = [], []
    for i in range(null_sims):
        v = ab_votes(null, np.random.default_rng([i, 12]), i % 2)
        any_sig.append(bool(inference.sign_tests(stats.oriented_votes(v))["significant"].any()))
    for i in range(sims):
        a = ab_votes(model, np.random.default_rng([i, 13]), i % 2)
        power.append(float(inference.sign_tests(stats.oriented_votes(a))["significant"].mean()))
    return {
        "tests": sims,
        "coverage_cmos": round(float(np.mean(cov_c)), 4),
        "coverage_cmos_naive_t_interval": round(float(np.mean(naive_c)), 4),
        "coverage_preference_share": round(float(np.mean(cov_s)), 4),
        "fwer_sign_tests": round(float(np.mean(any_sig)), 4),
        "power_0.5_apart": round(float(np.mean(power)), 3),
    }


# --------------------------------------------------------------------------- MUSHRA


def mushra_part(sims: int, null_sims: int) -> dict:
    model = MushraModel()
    tr = mushra_truth(model)
    cov, naive = [], []
    for i in range(sims):
        d = mushra_scores(model, np.random.default_rng([i, 21]))
        tab = stats.mushra_table(d, n_boot=N_BOOT, seed=i)
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


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer simulated tests, one service run")
    ap.add_argument("--sims", type=int, default=None)
    ap.add_argument("--service-runs", type=int, default=None)
    ap.add_argument("--null-sims", type=int, default=None, help="tests per FWER estimate")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/listening_validity.json"))
    args = ap.parse_args()
    sims = args.sims or (40 if args.quick else 200)
    null_sims = args.null_sims or max(3 * sims, 200)  # a FWER near 0.05 needs many tests
    runs = args.service_runs if args.service_runs is not None else (1 if args.quick else 2)
    t = time.monotonic()
    res: dict = {"simulated_tests_per_statistic": sims, "n_boot": N_BOOT}
    res["mos"] = mos_part(sims)
    res["null_tests_per_fwer"] = null_sims
    res["mos_pairwise"] = fwer_mos(sims, null_sims)
    res["ab"] = ab_part(sims, null_sims)
    res["mushra"] = mushra_part(sims, null_sims)
    res["simulation_s"] = round(time.monotonic() - t, 1)
    res["service"] = [asyncio.run(service_run(seed, seed % 2, 30, 2, 6)) for seed in range(runs)]
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores (shared with other work)"
    res["total_s"] = round(time.monotonic() - t, 1)
    mos = res["mos"]
    checks = {
        "coverage >= 0.93 (every statistic)": min(
            *(v["coverage_mos"] for v in mos.values()),
            res["ab"]["coverage_cmos"],
            res["ab"]["coverage_preference_share"],
            res["mushra"]["coverage_mean"],
        )
        >= 0.93,
        "honest excluded <= 1 in 30": mos["gold natural"]["honest_excluded_per_30"] <= 1,
        "|bias| <= 0.05": mos["gold natural"]["max_abs_bias"] <= 0.05,
        "FWER <= 0.05": max(
            res["mos_pairwise"]["fwer"],
            res["ab"]["fwer_sign_tests"],
            res["mushra"]["fwer_wilcoxon"],
        )
        <= 0.05,
        "service path = direct statistics": all(
            r["service_mos_equals_direct"] for r in res["service"]
        ),
    }
    res["checks"] = checks
    print(json.dumps(res, indent=1))
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
