"""How much time to first audio the HTTP/WS hop adds over calling the backend directly.

One run, one machine: the direct Piper voice in this process, and the same voice behind
``listenlab api`` in a child process read by the remote backend in SSE, raw-audio and
WebSocket modes. Runs are interleaved (direct, sse, audio, ws, direct, ...) after warm-up, so
drift hits every mode alike. Prints medians and writes ``benchmarks/results/remote_overhead.json``.

    .venv/bin/python benchmarks/remote_overhead.py [--runs 9] [--text "..."]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from backends.base import AudioChunk, Backend, Capabilities, SpeechRequest  # noqa: E402
from backends.piper import PiperBackend, PiperOptions  # noqa: E402
from backends.registry import load_backend  # noqa: E402
from evaluation.takes import record  # noqa: E402

MODES = ("sse", "audio", "ws")
DEFAULT_TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home again."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_api(spec: str) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "app.cli", "api", "--backend", spec, "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"listenlab api exited: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        try:
            if httpx.get(url + "/health", timeout=1, trust_env=False).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("listenlab api did not start")


async def _measure(runs: int, warmup: int, text: str, url: str) -> dict:
    direct = PiperBackend(options=PiperOptions(deterministic=True))
    await asyncio.to_thread(direct.warm_up)
    remotes = {m: load_backend(f"vllm-omni+{url}?mode={m}") for m in MODES}
    systems = {"direct": direct, **remotes}
    samples: dict[str, list[dict]] = {k: [] for k in systems}
    try:
        for i in range(warmup + runs):
            for name, be in systems.items():
                t = await record(be, SpeechRequest(text))
                if i >= warmup:
                    samples[name].append(
                        {"ttfa_ms": t.ttfa_ms, "total_ms": t.total_ms, "rtf": t.rtf}
                    )
    finally:
        for be in remotes.values():
            await be.aclose()
    base = statistics.median(s["ttfa_ms"] for s in samples["direct"])
    out = {}
    for name, rows in samples.items():
        ttfa = statistics.median(r["ttfa_ms"] for r in rows)
        out[name] = {
            "ttfa_ms_median": round(ttfa, 2),
            "ttfa_ms_min": round(min(r["ttfa_ms"] for r in rows), 2),
            "ttfa_ms_max": round(max(r["ttfa_ms"] for r in rows), 2),
            "total_ms_median": round(statistics.median(r["total_ms"] for r in rows), 2),
            "added_ttfa_ms": round(ttfa - base, 2),
            # same round, remote minus direct: less sensitive to drift on a shared machine
            "added_ttfa_ms_paired_median": round(
                statistics.median(
                    r["ttfa_ms"] - d["ttfa_ms"]
                    for r, d in zip(rows, samples["direct"], strict=True)
                ),
                2,
            ),
            "ttfa_ratio": round(ttfa / base, 3),
            "runs": [{k: round(v, 2) for k, v in r.items()} for r in rows],
        }
    return out


class _Instant(Backend):
    """Yields ready-made audio at once, so a remote TTFA over it is the hop alone."""

    name = "instant"

    def __init__(self) -> None:
        self.pcm = np.zeros(441, np.int16)

    @classmethod
    def from_params(cls, params, target=None):  # pragma: no cover - never registered
        return cls()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(sample_rate=22050)

    async def stream(self, request):
        for i in range(3):
            yield AudioChunk(self.pcm, 22050, 1, i)


async def _hop_only(runs: int, warmup: int) -> dict:
    """Protocol cost alone: the api server runs in a thread of this process (an upper bound,
    since client and server share one interpreter)."""
    import threading

    import uvicorn

    from app.api import create_api_app

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_api_app(_Instant()), host="127.0.0.1", port=port, log_level="warning")
    )
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        await asyncio.sleep(0.02)
    direct = _Instant()
    remotes = {m: load_backend(f"vllm-omni+http://127.0.0.1:{port}?mode={m}") for m in MODES}
    rows: dict[str, list[float]] = {k: [] for k in ("direct", *MODES)}
    try:
        for i in range(warmup + runs):
            for name, be in {"direct": direct, **remotes}.items():
                t = await record(be, SpeechRequest("hop"))
                if i >= warmup:
                    rows[name].append(t.ttfa_ms)
    finally:
        for be in remotes.values():
            await be.aclose()
        server.should_exit = True
        th.join(5)
    return {k: round(statistics.median(v), 2) for k, v in rows.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--text", default=DEFAULT_TEXT)
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/remote_overhead.json"))
    args = p.parse_args()
    if args.runs < 5:
        p.error("--runs must be at least 5 (medians of fewer warm runs are noise)")
    spec = "piper?deterministic=1"
    proc, url = _start_api(spec)
    try:
        results = asyncio.run(_measure(args.runs, args.warmup, args.text, url))
    finally:
        proc.terminate()
        proc.wait(10)
    hop = asyncio.run(_hop_only(max(args.runs, 15), args.warmup))
    report = {
        "benchmark": "remote_overhead",
        "what": "TTFA of listenlab api + remote backend (127.0.0.1) vs the same Piper voice in-process",
        "backend": spec,
        "text": args.text,
        "runs": args.runs,
        "warmup": args.warmup,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "note": "server in a child process; client, server and other work share this machine's cores",
        "results": results,
        "hop_only_ttfa_ms_median": hop,
        "hop_only_note": "a backend with audio ready at once, served in-process: the protocol cost alone",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"TTFA, median of {args.runs} warm runs ({spec}):")
    for name, r in results.items():
        extra = (
            ""
            if name == "direct"
            else f"  ratio x{r['ttfa_ratio']:.3f}  added {r['added_ttfa_ms']:+.1f} ms"
            f" (paired {r['added_ttfa_ms_paired_median']:+.1f} ms)"
        )
        print(
            f"  {name:>6}: {r['ttfa_ms_median']:7.1f} ms (min {r['ttfa_ms_min']:.1f}, max {r['ttfa_ms_max']:.1f}){extra}"
        )
    print(
        "Hop alone (instant backend, median TTFA ms): "
        + ", ".join(f"{k} {v:.2f}" for k, v in hop.items())
    )
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
