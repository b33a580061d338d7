"""The metrics room against people and against known damage, and its speed.

1. **The P.835 crowd.** The 78 fullband clips of the ITU-T P.835 reference conditions (13
   conditions, 6 talkers; crowd MOS from microsoft/P.808's ``CSP835_Ref_Conditions.xlsx``,
   sheet "Fullband-results per file", MOS_OVRL) scored with ``score_files`` exactly as
   ``listenlab metrics`` does: Pearson and Spearman per file and per condition (condition
   means) for every predicted-MOS column. The data is not in this repository (it cannot be
   committed and CI has no internet): get the folder ``p835_reference_conditions`` from
   github.com/microsoft/P.808 and pass it with ``--p835``.
2. **Known damage on the CPU voice.** Piper takes of Harvard sentences, each damaged in one
   known way (noise at 20/10/0 dB SNR, one 100 ms gap, a 50 ms gap every 0.5 s, one click, a
   click every 0.5 s, a 300 ms replay, a dropped word, a different voice): the mean change of
   each column against the clean take, and which damage no metric sees.
3. **Speed.** x real time of the default set on 2 cores (first run, as ``listenlab metrics``
   runs it: one process, one torch thread; and with ``--workers 2``), of a second run on the
   same cache, per-metric seconds, peak RSS (of this process; a worker holds its own models). The machine is shared: the load at start is
   recorded.

    python benchmarks/metrics.py --p835 /path/to/p835_reference_conditions
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.metrics import Item, build, from_samples, score_files, score_items  # noqa: E402
from evaluation.metrics.registry import DEFAULT  # noqa: E402
from evaluation.metrics.run import THREADS  # noqa: E402

MOS_COLUMNS = ["predicted_mos", "dnsmos_p808", "dnsmos_ovrl"]
SEES = {  # the change that counts as "seen" (beyond take-to-take noise on clean takes)
    "predicted_mos": 0.3,
    "dnsmos_p808": 0.3,
    "speaker_sim": 0.05,
    "sphinx_wer": 0.1,
    "sphinx_deletions": 0.5,
    "speech_s": 0.15,
    "longest_pause_s": 0.1,
    "pauses": 0.5,
    "f0_median_hz": 15.0,
}


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the scoring workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def corr(a, b) -> dict:
    from scipy import stats

    return {
        "pearson": round(float(stats.pearsonr(a, b)[0]), 3),
        "spearman": round(float(stats.spearmanr(a, b)[0]), 3),
    }


def p835(folder: Path, cache: Path) -> dict:
    import pandas as pd

    crowd = pd.read_excel(folder / "CSP835_Ref_Conditions.xlsx", "Fullband-results per file")
    files = [folder / "degraded_fullband_48KHz" / n for n in crowd["short_file_name"]]
    audio_s = None
    out: dict = {"clips": len(files), "conditions": int(crowd["condition_num"].nunique())}
    runs = {}
    runs_to_do = (("default", None, 1, "a"), ("default_2_workers", None, 2, "b"))
    for label, names, workers, folder in (*runs_to_do, ("dnsmos_p835", "dnsmos_p835", 1, "a")):
        for attempt in ("first", "cached"):
            t0, c0 = time.perf_counter(), cpu_seconds()
            cols, rows = score_files(
                files, metrics=names, cache_dir=cache / folder, workers=workers
            )
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            audio_s = sum(r.seconds for r in rows)
            runs[f"{label}_{attempt}"] = {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "x_real_time": round(audio_s / wall, 2),
                "load_avg_after": os.getloadavg(),
            }
            print(
                f"P.835 {label} ({attempt}): {wall:.1f} s wall, {cpu:.1f} s CPU for "
                f"{audio_s:.0f} s of audio = {audio_s / wall:.2f}x real time",
                file=sys.stderr,
            )
            if attempt == "first":
                values = {c: [r.values.get(c) for r in rows] for c in cols}
                crowd = crowd.assign(**{c: v for c, v in values.items() if c in MOS_COLUMNS})
    out["per_metric"] = per_metric(files)
    out["audio_s"] = round(audio_s, 1)
    out["runs"] = runs
    per_cond = crowd.groupby("condition_num")[
        ["MOS_OVRL", *[c for c in MOS_COLUMNS if c in crowd]]
    ].mean()
    out["correlation"] = {
        c: {
            "per_file": corr(crowd[c], crowd["MOS_OVRL"]),
            "per_condition": corr(per_cond[c], per_cond["MOS_OVRL"]),
        }
        for c in MOS_COLUMNS
        if c in crowd
    }
    out["per_condition"] = per_cond.round(3).reset_index().to_dict(orient="records")
    return out


def per_metric(files: list[Path]) -> dict:
    """Each default metric alone on the clips, no cache: CPU and wall seconds, x real time."""
    from evaluation.metrics import read_file

    items = [Item(read_file(f)) for f in files]
    audio_s = sum(i.audio.seconds for i in items)
    out = {}
    for m in build(DEFAULT):
        m.score(items[0])  # load the model outside the timing
        t0, c0 = time.perf_counter(), time.process_time()
        score_items(items, [m])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out[m.info.name] = {
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "x_real_time": round(audio_s / wall, 2),
            "x_real_time_per_cpu_s": round(audio_s / cpu, 2),
        }
        print(f"{m.info.name}: {out[m.info.name]}", file=sys.stderr)
    return out


# --------------------------------------------------------------------------- damage


def damages(x: np.ndarray, rate: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    import soxr

    def noise(db):
        n = rng.standard_normal(len(x)).astype(np.float32)
        n *= np.sqrt(np.mean(x**2) / 10 ** (db / 10) / np.mean(n**2))
        return np.clip(x + n, -1, 1)

    def gap_at(y, t, s):
        i = int(t * rate)
        return np.concatenate([y[:i], np.zeros(int(s * rate), np.float32), y[i:]])

    def click_at(y, t):
        y = y.copy()
        i = int(t * rate)
        y[i : i + 8] = 0.9 * np.sign(np.sin(np.arange(8)))
        return y

    mid = len(x) / rate / 2
    every = np.arange(0.5, len(x) / rate, 0.5)
    gaps = x
    for t in every[::-1]:
        gaps = gap_at(gaps, t, 0.05)
    clicks = x
    for t in every:
        clicks = click_at(clicks, t)
    i, n = int(mid * rate), int(0.3 * rate)
    return {
        "noise_20db": noise(20),
        "noise_10db": noise(10),
        "noise_0db": noise(0),
        "one_gap_100ms": gap_at(x, mid, 0.1),
        "gap_50ms_every_0.5s": gaps,
        "one_click": click_at(x, mid),
        "click_every_0.5s": clicks,
        "replay_300ms": np.concatenate([x[: i + n], x[i:]]),
        "other_voice": soxr.resample(x, rate, int(rate / 1.35)).astype(np.float32),
    }


def damage_table(n_texts: int, cache: Path) -> dict:
    from backends.piper import PiperBackend, PiperOptions
    from tests.support.evaluation_util import synthesize

    lines = [
        ln
        for ln in (Path(__file__).resolve().parents[1] / "assets/harvard/harvard.txt")
        .read_text()
        .splitlines()
        if ln and not ln.startswith("#")
    ]
    texts = lines[:n_texts]
    dropped_texts = [
        " ".join(t.split()[:2] + t.split()[3:]) for t in texts
    ]  # the third word dropped
    b = PiperBackend(options=PiperOptions(deterministic=True))
    b.warm_up()
    takes = synthesize(b, [*texts, *dropped_texts, lines[n_texts]])
    ref = from_samples(takes[-1].audio, takes[-1].sample_rate)
    rng = np.random.default_rng(39)
    items, keys = [], []
    for k, t in enumerate(texts):
        clean = from_samples(takes[k].audio, takes[k].sample_rate)
        items.append(Item(clean, t, ref, name=f"{k}:clean"))
        keys.append((k, "clean"))
        drop = from_samples(takes[n_texts + k].audio, takes[n_texts + k].sample_rate)
        items.append(Item(drop, t, ref, name=f"{k}:dropped_word"))
        keys.append((k, "dropped_word"))
        for name, y in damages(clean.samples, clean.rate, rng).items():
            items.append(Item(from_samples(y, clean.rate), t, ref, name=f"{k}:{name}"))
            keys.append((k, name))
    ms = build([*DEFAULT, "speaker", "words"])
    t0 = time.perf_counter()
    res = score_items(
        items,
        ms,
        cache,
        progress=lambda d, n, name: print(f"\rdamage {d}/{n}", end="", file=sys.stderr),
    )
    print(file=sys.stderr)
    vals = {key: r.values() for key, r in zip(keys, res, strict=True)}
    cols = list(SEES)
    table, seen_by = {}, {}
    for dmg in sorted({d for _, d in keys} - {"clean"}):
        row = {}
        for c in cols:
            diffs = [
                vals[(k, dmg)][c] - vals[(k, "clean")][c]
                for k in range(len(texts))
                if vals[(k, dmg)].get(c) is not None and vals[(k, "clean")].get(c) is not None
            ]
            row[c] = round(float(np.mean(diffs)), 3) if diffs else None
        table[dmg] = row
        seen_by[dmg] = [c for c in cols if row[c] is not None and abs(row[c]) >= SEES[c]]
    clean_means = {
        c: round(float(np.mean([vals[(k, "clean")][c] for k in range(len(texts))])), 3)
        for c in cols
    }
    return {
        "texts": len(texts),
        "scoring_wall_s": round(time.perf_counter() - t0, 1),
        "clean_means": clean_means,
        "mean_change": table,
        "seen_by": seen_by,
        "seen_if_change_at_least": SEES,
        "no_metric_sees": [d for d, s in seen_by.items() if not s],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--p835", type=Path, help="the p835_reference_conditions folder of microsoft/P.808"
    )
    ap.add_argument("--texts", type=int, default=5, help="Harvard sentences for the damage table")
    ap.add_argument("--out", default="benchmarks/results/metrics.json")
    args = ap.parse_args()
    import torch

    out: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": THREADS,
            "load_avg_at_start": os.getloadavg(),
            "note": "shared 2-core machine: other jobs ran during the measurement",
        },
        "default_set": list(DEFAULT),
    }
    with tempfile.TemporaryDirectory(prefix="listenlab-metrics-cache-") as tmp:
        if args.p835:
            out["p835"] = p835(args.p835, Path(tmp) / "p835")
            for c, r in out["p835"]["correlation"].items():
                print(f"{c:>14}: per file {r['per_file']}, per condition {r['per_condition']}")
        out["damage"] = damage_table(args.texts, Path(tmp) / "damage")
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["machine"]["load_avg_at_end"] = os.getloadavg()
    for d, row in out["damage"]["mean_change"].items():
        print(f"{d:>20}: {row}  seen by {out['damage']['seen_by'][d]}")
    print(f"peak RSS {out['peak_rss_mib']} MiB")
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
