"""vLLM-Omni 0.30's example clients against both servers: every recorded run (``examples.py``)
is replayed against the reference server (scripted engine) and against ``listenlab api`` serving
the model's own profile under the same name (``piper?deterministic=1&profile=NAME&pace=0``,
the voice the scripted engine speaks too). A run must end the same way on both (saved or not,
the same status or error words, the same files of the same sizes) and write byte-identical files.

The client x server table is printed at the end of the run (``SUMMARY``).
"""

from __future__ import annotations

import asyncio
import base64
import io

import pytest

from app.api import create_api_app
from backends.registry import load_backend
from tests.conformance.engine import SEEDS
from tests.conformance.examples import REF_TEXT, RUNS, Run, compare, replay
from tests.conformance.matrix import SUMMARY
from tests.conformance.test_matrix import profile_spec
from tests.support.remote_util import ServerThread

pytestmark = pytest.mark.conformance

MODELS = sorted({r.model for r in RUNS})
ROWS: list[tuple[str, bool, bool]] = []
"""(table row, runs the same, files byte-identical) per run replayed so far."""


@pytest.fixture(scope="module")
def clip(piper_det) -> str:
    """The reference clip the runs send, as a data URL (the clients read a file into one)."""
    import soundfile as sf

    from backends.base import SpeechRequest

    audio = asyncio.run(piper_det.synthesize(SpeechRequest(REF_TEXT)))
    buf = io.BytesIO()
    sf.write(buf, audio.samples, audio.sample_rate, format="WAV")
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def servers(omni):
    """(reference URL, listenlab api URL) per model the runs talk to."""
    threads, out = [], {}
    try:
        for model in MODELS:
            be = load_backend(profile_spec(model))
            srv = ServerThread(create_api_app(be, served_model=SEEDS[model].served)).start()
            threads.append(srv)
            out[model] = (omni.url(model), srv.url)
        yield out
    finally:
        for srv in threads:
            srv.stop()


def outcome(r: dict) -> str:
    if not r["ok"]:
        return f"refused {r.get('status') or r.get('crash')}: {r.get('error') or r.get('errors')}"
    files = r.get("files") or {}
    extra = f", {len(r['failed'])} items failed" if r.get("failed") else ""
    extra += f", errors {r['errors']}" if r.get("errors") else ""
    return f"{len(files)} file(s), {sum(s for s, _ in files.values())} bytes{extra}"


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.client.split("/")[1] + ":" + r.client[-40:])
async def test_example_client_runs_alike(servers, clip, run: Run, record_property):
    ref_url, ll_url = servers[run.model]
    ref = await replay(run, ref_url, clip)
    ours = await replay(run, ll_url, clip)
    same, identical = compare(ref, ours)
    shown = {"usage": f"yes but usage ({usage_words(ref, ours)})"}.get(identical, identical)
    row = f"| {run.client} | {'yes' if same else 'NO'} | {shown} | {outcome(ref)} |"
    ROWS.append((row, same, identical))
    record_property("example_row", row)
    assert same, f"the run ends differently:\n  vLLM-Omni: {ref}\n  listenlab: {ours}"
    assert identical != "NO", f"files differ:\n  vLLM-Omni: {ref}\n  listenlab: {ours}"


def usage_words(ref: dict, ours: dict) -> str:
    """The SSE usage counts each server wrote (listenlab's CPU voice counts no tokens)."""
    a, b = ref.get("usage", {}), ours.get("usage", {})
    return f"vLLM-Omni {a.get('input_tokens')} input tokens, listenlab {b.get('input_tokens')}"


def test_example_table(record_property):
    """The client x server table (after the runs above, in file order)."""
    head = "| example client run | runs the same | files byte-identical | vLLM-Omni's outcome |"
    lines = [head, "|---|---|---|---|", *(row for row, _s, _i in ROWS)]
    count = {k: sum(i == k for _r, _s, i in ROWS) for k in ("yes", "usage", "NO", "no files")}
    table = "\n".join(lines) + (
        f"\n{len(ROWS)} runs over {len(MODELS)} models: {sum(s for _r, s, _i in ROWS)} run the "
        f"same; files byte-identical in {count['yes']}, apart from SSE usage counts in "
        f"{count['usage']}, different in {count['NO']}; {count['no files']} wrote no audio"
    )
    print("\n" + table)
    record_property(SUMMARY, table)
