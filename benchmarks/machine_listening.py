"""Machine scores beside a listening test's human results, on a real crowd: the 78 fullband
clips of the ITU-T P.835 reference conditions (13 conditions = 13 systems, 6 talkers = 6
prompts) made into a MOS test with ``listenlab test create --stimuli``, each clip's crowd MOS
(``MOS_OVRL`` of ``CSP835_Ref_Conditions.xlsx``) stored as one rating of it, then scored with
``listenlab test score``'s function, twice (the second run finds every score stored).

It prints and writes (``benchmarks/results/machine_listening.json``): the scoring time (wall
and CPU, x real time, seconds per minute of audio), the second run's time, and the
``machine_agreement`` table (Spearman/Pearson per system and per stimulus, with its note).

The P.835 folder is not in this repository: get ``p835_reference_conditions`` from
github.com/microsoft/P.808 and pass it::

    python benchmarks/machine_listening.py --p835 /path/to/p835_reference_conditions
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "machine_listening.json"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def build_test(p835: Path, work: Path) -> tuple[Path, str, dict[str, float]]:
    """The MOS test of the 78 clips and each clip's crowd MOS by ``condition/talker``."""
    import pandas as pd

    from app.cli import main

    crowd = pd.read_excel(p835 / "CSP835_Ref_Conditions.xlsx", "Fullband-results per file")
    folder = work / "study"
    mos = {}
    for name, value in zip(crowd["short_file_name"], crowd["MOS_OVRL"], strict=True):
        system, talker = Path(name).stem.split("_", 1)
        (folder / system).mkdir(parents=True, exist_ok=True)
        shutil.copy(p835 / "degraded_fullband_48KHz" / name, folder / system / f"{talker}.wav")
        mos[f"{system}/{talker}"] = float(value)
    db = work / "lab.db"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            ["test", "create", "--db", str(db), "--stimuli", str(folder), "--type", "mos"]
            + ["--items-per-rater", "13", "--no-headphone-check", "--json"]
        )
    if code:
        raise SystemExit(err.getvalue())
    return db, json.loads(out.getvalue())["test_id"], mos


def rate(db: Path, tid: str, mos: dict[str, float]) -> int:
    """Each clip's crowd MOS as one rating by the rater ``crowd``."""
    from app.store import MosRating, Store
    from app.store.listening import TestStore

    n = 0
    with Store.open(db) as store:
        st = TestStore(store).stimuli_frame(tid)
        for r in st.itertuples():
            key = f"{r.system_id}/{str(r.prompt_id).rsplit('-', 1)[-1]}"  # prompt ids get a prefix
            if key in mos:
                rating = MosRating(f"crowd-{r.take_id}", tid, "crowd", r.take_id, mos[key], 1e6)
                store.add_mos_rating(rating)
                n += 1
    return n


def run(p835: Path) -> dict:
    from app.listening.scoring import score_test
    from app.store import Store
    from app.store.listening import TestStore
    from evaluation.listening.results import test_results

    with tempfile.TemporaryDirectory(prefix="ll-machine-") as tmp:
        db, tid, mos = build_test(p835, Path(tmp))
        ratings = rate(db, tid, mos)
        out: dict = {"clips": len(mos), "ratings": ratings, "runs": {}}
        with Store.open(db) as store:
            for attempt in ("first", "stored"):
                t0, c0 = time.perf_counter(), cpu_seconds()
                r = score_test(store, tid)
                wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
                out["runs"][attempt] = {
                    "stimuli": r.stimuli,
                    "audio_s": round(r.audio_s, 1),
                    "computed": r.computed,
                    "stored_before": r.stored_before,
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "x_real_time": round(r.audio_s / wall, 2),
                    "wall_s_per_audio_minute": round(wall / (r.audio_s / 60), 2),
                    "load_avg_after": os.getloadavg(),
                    "errors": r.errors,
                }
                print(
                    f"score ({attempt}): {r.stimuli} stimuli, {r.audio_s:.0f} s of audio, "
                    f"{wall:.1f} s wall, {cpu:.1f} s CPU, {r.audio_s / wall:.2f}x real time, "
                    f"{r.computed} computed, {r.stored_before} stored before",
                    file=sys.stderr,
                )
            tables = test_results(TestStore(store).test_data(tid))
        agree = tables["machine_agreement"]
        out["machine_agreement"] = json.loads(agree.to_json(orient="records"))
        out["machine"] = json.loads(tables["machine"].to_json(orient="records"))
        print(agree.to_string(index=False), file=sys.stderr)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p835", type=Path, required=True, help="p835_reference_conditions folder")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    out = {"machine": "2-core shared machine", "load_avg_start": os.getloadavg()}
    out |= run(args.p835)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
