"""How fast a study's audio gets onto a server, and what it costs the server's memory.

A ~500 MB study (8 systems x 66 prompts of 10 s, 48 kHz 16-bit WAV noise written with
soundfile) is zipped and sent by the CLI's own client (:func:`app.cli.remote.upload_zip`,
16 MiB chunks) to ``listenlab serve`` running in a subprocess on 127.0.0.1, which imports it
(unpack, decode every file, rename into place). Printed and written as JSON: MB/s of the upload
and of the import, and the server's peak RSS (``VmHWM`` from ``/proc``) before and after, so
the upload's cost is the difference: the goal is that it does not grow with the upload's size
(streamed to disk, never held in memory). The load average is recorded beside the numbers.

    python benchmarks/import.py [--mb 500] [--out benchmarks/results/import.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECONDS = 10.0
SYSTEMS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def start(db: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost is admin
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--db", str(db)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_up(client, timeout: float = 180) -> None:
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        try:
            client.json("GET", "/ll/health")
            return
        except Exception:
            time.sleep(0.3)
    raise RuntimeError("the server did not come up")


def run(mb: int, tmp: Path) -> dict:
    from app.cli.remote import Client, upload_zip, zip_folder
    from tests.support.upload_util import RATE, make_set

    per_file = int(SECONDS * RATE) * 2 + 44
    prompts = max(1, round(mb * 1e6 / per_file / SYSTEMS))
    t0 = time.perf_counter()
    size = make_set(tmp / "study", [f"s{i}" for i in range(SYSTEMS)], prompts, seconds=SECONDS)
    archive = zip_folder(tmp / "study", tmp / "study.zip")
    made_s = time.perf_counter() - t0
    port = free_port()
    server = start(tmp / "data" / "listenlab.db", port)
    client = Client(f"http://127.0.0.1:{port}", None)
    try:
        wait_up(client)
        time.sleep(2.0)  # let the warm-up settle
        hwm_before = proc_kb(server.pid, "VmHWM")
        rss_before = proc_kb(server.pid, "VmRSS")
        marks: dict[str, float] = {}

        def progress(done: int, total: int) -> None:
            if done >= total:
                marks["uploaded"] = time.perf_counter()

        load_before = os.getloadavg()
        t1 = time.perf_counter()
        found = upload_zip(client, archive, progress)
        t2 = time.perf_counter()
        hwm_after = proc_kb(server.pid, "VmHWM")
        load_after = os.getloadavg()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    up_s = marks["uploaded"] - t1
    imp_s = t2 - marks["uploaded"]
    zmb = archive.stat().st_size / 1e6
    return {
        "files": found["files"],
        "systems": len(found["systems"]),
        "prompts": found["prompts"],
        "audio_mb": round(size / 1e6, 1),
        "zip_mb": round(zmb, 1),
        "make_set_s": round(made_s, 1),
        "upload_s": round(up_s, 2),
        "upload_mb_per_s": round(zmb / up_s, 1),
        "import_s": round(imp_s, 2),
        "import_mb_per_s": round(size / 1e6 / imp_s, 1),
        "total_mb_per_s": round(zmb / (t2 - t1), 1),
        "server_rss_before_mb": round(rss_before / 1024, 1),
        "server_peak_rss_before_mb": round(hwm_before / 1024, 1),
        "server_peak_rss_after_mb": round(hwm_after / 1024, 1),
        "server_peak_rss_growth_mb": round((hwm_after - hwm_before) / 1024, 1),
        "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500, help="size of the study (default 500 MB)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/import.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ll-import-bench-") as tmp:
        result = run(args.mb, Path(tmp))
    for k, v in result.items():
        print(f"{k:28s} {v}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
