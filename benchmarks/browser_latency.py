"""Click -> first audio in headless Chromium: listenlab's PCM player vs stock ``gr.Audio(streaming=True)``.

For each page, 10 fresh page loads, one click each. The figure is *click -> first buffer
scheduled, minus the server's TTFA* (the player's own overhead: WebSocket hop, prebuffer
decision, scheduling), with the click time taken by the same capture-phase listener on both
pages. Stock Gradio's "first buffer" is the audio element's first ``playing`` event (HLS/AAC
path); its TTFA is measured in the handler, as the time to the backend's first chunk. Both pages
are fed by the same backend instance in the same run. Stalls are counted while the backend is
faster than real time (Piper, and the Qwen3-TTS wire profile at 2x: 80 ms then 2 s chunks).

Then, per chunk schedule of issue 14 (the CPU voice through wire profiles: Qwen3-TTS at 2x and
0.67x real time, uniform 320 ms chunks at 0.67x, 50 ms jitter, a 1.4 s stall mid-stream), the
start rule: click -> first sound, the ideal start (max over chunks of arrival - audio before it,
from the player's own arrival record), late-by, underruns and stall ms. Each schedule gets a
freshly started server (its own empty store; the backend loaded and warmed as ``listenlab
serve`` does): its first take is the *first visit* (no learnt rate or length; target late by
<= 50 ms + 15 % of the ideal start, <= 1 underrun), then the median of ``--loads`` fresh page
loads with the history the first visit left (*later takes*; target 50 ms + 10 %, <= 1 underrun).

Run: ``.venv/bin/python benchmarks/browser_latency.py [--runs 10] [--loads 5] [--backend piper?deterministic=1]``
Writes ``benchmarks/results/browser_latency.json`` and ``assets/playground.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.app_util import chromium, live_server, open_playground, speak, tmp_db  # noqa: E402

TEXT = "Hello there. This is a quick latency test of the streaming player."
CLICK_PROBE = """
window.__ll_click = null; window.__ll_playing = null; window.__ll_waiting = 0;
document.addEventListener('click', (e) => {
  if (e.target.closest && e.target.closest('#ll-speak, #stock-speak')) window.__ll_click = performance.now();
}, true);
document.addEventListener('playing', () => { if (window.__ll_playing == null) window.__ll_playing = performance.now(); }, true);
document.addEventListener('waiting', () => { if (window.__ll_playing != null) window.__ll_waiting += 1; }, true);
"""


def stock_app(backend, ttfa_log: list[float]):
    """A stock Gradio page: Button + gr.Audio(streaming=True, autoplay=True), same backend."""
    import gradio as gr
    from fastapi import FastAPI

    from backends.base import SpeechRequest

    async def speak(text: str):
        t0 = time.monotonic()
        first = True
        async for c in backend.stream(SpeechRequest(text=text)):
            if first:
                ttfa_log.append((time.monotonic() - t0) * 1000)
                first = False
            yield (c.sample_rate, c.pcm.reshape(-1, c.channels) if c.channels > 1 else c.pcm)

    with gr.Blocks(analytics_enabled=False) as demo:
        text = gr.Textbox(TEXT, elem_id="stock-text")
        btn = gr.Button("Speak", elem_id="stock-speak")
        out = gr.Audio(streaming=True, autoplay=True, elem_id="stock-audio")
        btn.click(speak, text, out)
    return gr.mount_gradio_app(FastAPI(), demo, path="/")


def median(xs):
    return round(statistics.median(xs), 1) if xs else None


def speak_to_end(ctx, live, backend_label: str, text: str, timeout_ms: float):
    """A fresh Playground load that speaks ``text`` and has finished playing it; the page."""
    page = open_playground(ctx, live.url)
    speak(page, text, backend_label)
    page.wait_for_function(
        "window.listenlab.last && window.listenlab.last.finished", timeout=timeout_ms
    )
    return page


def run_listenlab(ctx, live, backend_label: str, runs: int, shot: Path | None) -> dict:
    overheads, totals, ttfas, stalls, stall_ms, first_sound = [], [], [], [], [], []
    for i in range(runs + 1):  # the first load warms caches and is not counted
        page = speak_to_end(ctx, live, backend_label, TEXT, timeout_ms=90_000)
        r = page.evaluate(
            """() => { const g = window.listenlab.last;
            return {click: window.__ll_click, clickT: g.clickT, sched: g.firstScheduledMs,
              sound: g.firstSoundMs, ttfa: g.summary && g.summary.ttfa_ms, status: g.status,
              under: g.underruns.count, stall: g.underruns.stallMs}; }"""
        )
        if r["status"] != "ok":
            raise RuntimeError(f"run {i} failed: {r}")
        sched_abs = r["clickT"] + r["sched"]
        total = sched_abs - r["click"]
        if i > 0:
            totals.append(total)
            ttfas.append(r["ttfa"])
            overheads.append(total - r["ttfa"])
            first_sound.append(r["sound"] + (r["clickT"] - r["click"]))
            stalls.append(r["under"])
            stall_ms.append(r["stall"])
        page.close()
    if shot is not None:
        screenshot(ctx, live, backend_label, shot)
    return {
        "click_to_first_buffer_ms_median": median(totals),
        "server_ttfa_ms_median": median(ttfas),
        "overhead_ms_median": median(overheads),
        "overhead_ms_all": [round(x, 1) for x in overheads],
        "click_to_first_sound_ms_median": median(first_sound),
        "stalls_total": sum(stalls),
        "stall_ms_total": round(sum(stall_ms), 1),
        "runs": len(overheads),
    }


PARAGRAPH = (
    "The old lighthouse keeper climbed the spiral stairs every evening. At the top, he wiped "
    "the salt from the great lens, lit the lamp, and watched the beam sweep across the water."
)


def screenshot(ctx, live, backend_label: str, path: Path) -> None:
    """The Playground after a paragraph, with one glitch mark, for the README."""
    page = open_playground(ctx, live.url)
    page.set_viewport_size({"width": 1100, "height": 1400})
    speak(page, PARAGRAPH, backend_label)
    page.wait_for_function("window.listenlab.positionMs() > 2500", timeout=60_000)
    page.select_option("#ll-glitch-kind", "click")
    page.locator("body").press("g")
    page.wait_for_function(
        "window.listenlab.last && window.listenlab.last.finished", timeout=90_000
    )
    page.wait_for_function("window.listenlab.last.findings", timeout=30_000)
    page.wait_for_timeout(300)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    page.close()


def run_stock(ctx, url: str, ttfa_log: list[float], runs: int) -> dict:
    overheads, totals, ttfas, waits = [], [], [], []
    for i in range(runs + 1):
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector("#stock-speak")
        n = len(ttfa_log)
        page.click("#stock-speak")
        page.wait_for_function("window.__ll_playing != null", timeout=60_000)
        r = page.evaluate("({click: window.__ll_click, playing: window.__ll_playing})")
        deadline = time.monotonic() + 10
        while len(ttfa_log) <= n and time.monotonic() < deadline:
            time.sleep(0.02)
        page.wait_for_function(
            "(() => { const a = document.querySelector('#stock-audio audio'); return a && a.ended; })()",
            timeout=60_000,
        )
        waiting = page.evaluate("window.__ll_waiting")
        total = r["playing"] - r["click"]
        if i > 0:
            totals.append(total)
            ttfas.append(ttfa_log[n])
            overheads.append(total - ttfa_log[n])
            waits.append(waiting)
        page.close()
    return {
        "click_to_first_buffer_ms_median": median(totals),
        "server_ttfa_ms_median": median(ttfas),
        "overhead_ms_median": median(overheads),
        "overhead_ms_all": [round(x, 1) for x in overheads],
        "stalls_total": sum(waits),
        "runs": len(overheads),
    }


UNIFORM = "&profile=custom&rate=24000&channels=1&first_frames=4&chunk_frames=4"
SCHEDULES = {
    "qwen3-2x": "&profile=qwen3-tts",
    "qwen3-0.67x": "&profile=qwen3-tts&pace=0.67",
    "uniform320-0.67x": UNIFORM + "&pace=0.67",
    "jitter50-2x": UNIFORM + "&pace=2&jitter_ms=50",
    "stall1.4-2x": UNIFORM + "&pace=2&stall=12:1.4",
}


def start_rule_row(page) -> dict:
    """What the player recorded of the start rule on its last take (times from the click)."""
    r = page.evaluate(
        """() => { const g = window.listenlab.last;
        return {click: window.__ll_click, clickT: g.clickT, sound: g.firstSoundMs,
          ideal: g.idealStartMs, actual: g.actualStartMs, status: g.status,
          under: g.underruns.count, stall: g.underruns.stallMs,
          learnt: g.start && g.start.learnt, chars: g.textChars, done: g.doneMs,
          arrivals: g.chunks.map((c) => c.arrivalMs / 1000),
          durations: g.chunks.map((c) => c.frames / g.sr)}; }"""
    )
    if r["status"] != "ok":
        raise RuntimeError(f"the take failed: {r}")
    shift = r["clickT"] - r["click"]  # the probe's click vs the player's clock origin
    ideal = r["ideal"] + shift
    actual = r["actual"] + shift
    return {
        "click_to_first_sound_ms": r["sound"] + shift,
        "ideal_start_ms": ideal,
        "actual_start_ms": actual,
        "late_by_ms": actual - ideal,
        "underruns": r["under"],
        "stall_ms": r["stall"],
        "learnt_takes": (r["learnt"] or {}).get("takes", 0),
        # the player's own record (clock: its click), to replay a miss through the twin
        "record": {
            "arrivals_s": [round(a, 4) for a in r["arrivals"]],
            "durations_s": [round(d, 6) for d in r["durations"]],
            "text_chars": r["chars"],
            "sec_per_char": (r["learnt"] or {}).get("sec_per_char"),
            "rate_prior": (r["learnt"] or {}).get("rate"),
            "done_s": r["done"] / 1000,
        },
    }


def run_schedule(ctx, spec: str, label: str, loads: int) -> dict:
    """One schedule on a freshly started server: the first visit, then ``loads`` later takes."""
    from app.server import create_app

    app = create_app({label: spec}, tmp_db())  # loads and warms the backend, empty store
    rows = []
    with live_server(app) as live:
        for i in range(loads + 1):
            page = speak_to_end(ctx, live, label, PARAGRAPH, timeout_ms=180_000)
            row = start_rule_row(page)
            page.close()
            if i == 0:
                assert row["learnt_takes"] == 0, row  # a first visit: nothing learnt yet
                first = dict(row, target_ms=50 + 0.15 * row["ideal_start_ms"])
                first["met"] = first["late_by_ms"] <= first["target_ms"] and first["underruns"] <= 1
                if first["met"]:
                    del first["record"]
                first = {k: round(v, 1) if isinstance(v, float) else v for k, v in first.items()}
                continue
            row["target_ms"] = 50 + 0.10 * row["ideal_start_ms"]
            row["met"] = row["late_by_ms"] <= row["target_ms"] and row["underruns"] <= 1
            rows.append(row)
    records = {k: x.pop("record") for k, x in enumerate(rows)}
    out = {k: median([x[k] for x in rows]) for k in rows[0] if k != "met"}
    out["underruns_max"] = max(x["underruns"] for x in rows)
    out["late_by_ms_all"] = [round(x["late_by_ms"], 1) for x in rows]
    out["underruns_all"] = [x["underruns"] for x in rows]
    out["met"] = all(x["met"] for x in rows)
    # the loads that missed the target, with the player's record (replay: evaluation.playout)
    out["misses"] = [dict(load=k + 1, **records[k]) for k, x in enumerate(rows) if not x["met"]]
    out["loads"] = len(rows)
    out["first_visit"] = first
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--loads", type=int, default=5, help="fresh loads per schedule")
    ap.add_argument("--only-schedules", action="store_true", help="skip the stock comparison")
    ap.add_argument(
        "--schedules", default="", help="comma-separated subset of the schedules (default: all)"
    )
    ap.add_argument("--backend", default="piper?deterministic=1")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/browser_latency.json"))
    ap.add_argument("--screenshot", default=str(ROOT / "assets/playground.png"))
    args = ap.parse_args()

    from app.server import create_app
    from backends.registry import load_backend

    backend = load_backend(args.backend)
    backend.warm_up()
    sep = "&" if "?" in args.backend else "?"
    qwen = load_backend(args.backend + sep + "profile=qwen3-tts")
    app = create_app({"piper": backend, "qwen3-profile": qwen}, tmp_db())
    ttfa_log: list[float] = []
    stock = stock_app(backend, ttfa_log)
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    load_before = os.getloadavg()
    with live_server(app) as live, live_server(stock) as slive, chromium() as ctx:
        ctx.add_init_script(CLICK_PROBE)
        schedules = {}
        wanted = [x for x in args.schedules.split(",") if x]
        for name, q in {"piper": "", **SCHEDULES}.items():
            if wanted and name not in wanted:
                continue
            schedules[name] = run_schedule(
                ctx, args.backend + (sep + q[1:] if q else ""), name, args.loads
            )
            print(name, json.dumps(schedules[name]), flush=True)
        if args.only_schedules:
            ours = old.get("listenlab")
            theirs = old.get("stock_gradio_audio_streaming")
            qwen_res = None
        else:
            ours = run_listenlab(ctx, live, "piper", args.runs, Path(args.screenshot))
            theirs = run_stock(ctx, slive.url, ttfa_log, args.runs)
            qwen_res = run_listenlab(ctx, live, "qwen3-profile", max(3, args.runs // 2), None)
    result = {
        "benchmark": "browser_latency",
        "backend": args.backend,
        "text": TEXT,
        "metric": "click -> first buffer scheduled (stock: first 'playing') minus server TTFA, "
        "median of fresh page loads",
        "listenlab": ours,
        "stock_gradio_audio_streaming": theirs,
        "ratio_stock_over_listenlab": round(
            theirs["overhead_ms_median"] / max(1e-9, ours["overhead_ms_median"]), 1
        )
        if ours and theirs and ours["overhead_ms_median"]
        else None,
        "qwen3_profile_faster_than_real_time": {
            "stalls_total": qwen_res["stalls_total"],
            "stall_ms_total": qwen_res["stall_ms_total"],
            "click_to_first_buffer_ms_median": qwen_res["click_to_first_buffer_ms_median"],
            "server_ttfa_ms_median": qwen_res["server_ttfa_ms_median"],
            "runs": qwen_res["runs"],
        }
        if qwen_res
        else old.get("qwen3_profile_faster_than_real_time"),
        "target": "overhead <= 50 ms, 0 stalls when the backend is faster than real time",
        "start_rule_text": PARAGRAPH,
        "start_rule_metric": "per schedule, on a freshly started server: the first visit "
        "(first_visit: the first take, nothing learnt), then the median of fresh loads (later "
        "takes, with what the first visit taught): click -> first sound, ideal start = max over "
        "chunks (arrival - audio before it) from the player's arrival record, actual start, "
        "late by = actual - ideal, underruns, stall",
        "start_rule_target": "late by <= 50 ms + 10 % of the ideal start (first visit: 15 %), "
        "<= 1 underrun",
        "schedules": schedules,
        "machine": "2-core x86_64, headless Debian Chromium, loopback",
        "load_average": {
            "before": [round(x, 1) for x in load_before],
            "after": [round(x, 1) for x in os.getloadavg()],
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    print(
        "| schedule | first visit: ideal start | late by | target | underruns | "
        "later takes: ideal start | late by | target | underruns (max) | stall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in schedules.items():
        f = r["first_visit"]
        print(
            f"| {name} | {f['ideal_start_ms']:.0f} ms | {f['late_by_ms']:.0f} ms | "
            f"{f['target_ms']:.0f} ms | {f['underruns']} | {r['ideal_start_ms']:.0f} ms | "
            f"{r['late_by_ms']:.0f} ms | {r['target_ms']:.0f} ms | "
            f"{r['underruns']:.0f} ({r['underruns_max']}) | {r['stall_ms']:.0f} ms |"
        )
    asyncio.run(backend.aclose())
    return 0


if __name__ == "__main__":
    sys.exit(main())
