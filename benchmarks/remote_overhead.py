"""How much time to first audio the HTTP/WS hop adds over calling the backend directly.

One run, one machine: the direct Piper voice in this process, and the same voice behind
``listenlab api`` in a child process read by the remote backend in SSE, raw-audio and
WebSocket modes. Runs are interleaved (direct, sse, audio, ws, direct, ...) after warm-up, so
drift hits every mode alike. Prints medians and writes ``benchmarks/results/remote_overhead.json``.

    .venv/bin/python benchmarks/remote_overhead.py [--runs 9] [--text "..."]

With ``--vllm-omni PYTHON`` (the conformance environment's Python, default
``$LISTENLAB_CONFORMANCE_PYTHON``) it also measures vLLM-Omni 0.30.0's own serving code
(``tests/conformance/server.py``: Qwen3-TTS layout, scripted engine speaking the same Piper voice)
beside ``listenlab api`` serving that voice with the same Qwen3-TTS wire profile: listenlab's relay
cost per chunk (client CPU time of the remote backend per chunk, per mode) and click -> first
audible sound in the Playground (real Chromium) at 1 and 16 simultaneous streams, paced at 2x
real time. Results go under ``"vllm_omni"`` in the same JSON.
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


QWEN3 = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"


def _start_omni(python: str, pace: float) -> tuple[subprocess.Popen, str]:
    """vLLM-Omni's server (tests/conformance/server.py) in the conformance env, until READY."""
    port = _free_port()
    cmd = [python, str(ROOT / "tests/conformance/server.py"), "--serve", f"qwen3_tts={port}"]
    if pace:
        cmd += ["--pace", str(pace)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    for line in proc.stdout:  # blocks until READY (vLLM's imports take about a minute)
        if line.startswith(b"READY"):
            return proc, f"http://127.0.0.1:{port}"
    raise RuntimeError("the vLLM-Omni conformance server exited before it was ready")


async def _relay_cost(url: str, model: str | None, runs: int, text: str) -> dict:
    """Client CPU ms per chunk in listenlab's remote backend, per mode (median of runs)."""
    out = {}
    for mode in MODES:
        be = load_backend(f"vllm-omni+{url}?mode={mode}" + (f"&model={model}" if model else ""))
        per_chunk, chunks = [], 0
        try:
            for i in range(runs + 1):
                c0 = time.process_time()
                n = 0
                async for _ in be.stream(SpeechRequest(text)):
                    n += 1
                if i:  # the first run warms up
                    per_chunk.append((time.process_time() - c0) * 1000.0 / n)
                    chunks = n
        finally:
            await be.aclose()
        out[mode] = {
            "cpu_ms_per_chunk_median": round(statistics.median(per_chunk), 3),
            "chunks": chunks,
        }
    return out


def _playground_first_audio(specs: dict[str, str], streams: int, text: str) -> dict:
    """Click -> first audible sound (the player's own measure) over each backend, ``streams``
    pages clicked together; median over the pages."""
    import tempfile

    from app.server import create_app
    from tests.support.app_util import chromium, live_server, open_playground, speak, wait_finished

    out = {}
    app = create_app(specs, str(Path(tempfile.mkdtemp(prefix="ll-bench-")) / "bench.db"))
    with live_server(app) as live, chromium() as ctx:
        for label in specs:
            pages = [open_playground(ctx, live.url, 120_000) for _ in range(streams)]
            for page in pages:
                speak(page, text, label)
            got = [wait_finished(page, 600_000) for page in pages]
            ms = [g["firstAudibleMs"] for g in got if g["status"] == "ok" and g["firstAudibleMs"]]
            out[label] = {
                "streams": streams,
                "ok": len(ms),
                "click_to_first_audio_ms_median": round(statistics.median(ms), 1) if ms else None,
                "click_to_first_audio_ms_max": round(max(ms), 1) if ms else None,
                "underruns": sum(g["underruns"]["count"] for g in got),
            }
            for page in pages:
                page.close()
    return out


def _vllm_omni(python: str, runs: int, text: str) -> dict:
    omni, omni_url = _start_omni(python, 0)
    api, api_url = _start_api("piper?deterministic=1&profile=qwen3-tts&pace=0")
    try:
        relay = {
            "vllm_omni": asyncio.run(_relay_cost(omni_url, QWEN3, runs, text)),
            "listenlab_api": asyncio.run(_relay_cost(api_url, None, runs, text)),
        }
    finally:
        for p in (omni, api):
            p.terminate()
            p.wait(20)
    omni, omni_url = _start_omni(python, 2)
    api, api_url = _start_api("piper?deterministic=1&profile=qwen3-tts&pace=2")
    try:
        specs = {
            "vllm_omni": f"vllm-omni+{omni_url}?model={QWEN3}&mode=sse",
            "listenlab_api": f"vllm-omni+{api_url}?mode=sse",
        }
        first = {str(n): _playground_first_audio(specs, n, text) for n in (1, 16)}
    finally:
        for p in (omni, api):
            p.terminate()
            p.wait(20)
    return {
        "what": "vLLM-Omni 0.30.0's serving code (scripted engine, Piper voice, Qwen3-TTS "
        "layout) beside listenlab api over the same voice and wire profile",
        "relay_cost": relay,
        "playground_click_to_first_audio": first,
        "note": "shared, loaded 2-core machine: Chromium, both servers and the client compete",
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--text", default=DEFAULT_TEXT)
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/remote_overhead.json"))
    p.add_argument(
        "--vllm-omni",
        default=os.environ.get("LISTENLAB_CONFORMANCE_PYTHON"),
        help="the conformance environment's python (adds vLLM-Omni's own server as a target)",
    )
    p.add_argument("--only-vllm-omni", action="store_true", help="skip the Piper-only rounds")
    args = p.parse_args()
    if args.runs < 5:
        p.error("--runs must be at least 5 (medians of fewer warm runs are noise)")
    spec = "piper?deterministic=1"
    out = Path(args.out)
    if args.only_vllm_omni:
        if not args.vllm_omni:
            p.error("--only-vllm-omni needs --vllm-omni PYTHON")
        report = json.loads(out.read_text(encoding="utf-8"))
        report["vllm_omni"] = _vllm_omni(args.vllm_omni, args.runs, args.text)
        out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(json.dumps(report["vllm_omni"], indent=1))
        print(f"-> {out}")
        return 0
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
    if args.vllm_omni:
        report["vllm_omni"] = _vllm_omni(args.vllm_omni, args.runs, args.text)
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
