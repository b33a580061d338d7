"""``listenlab probe --machine-scores``: machine scores per layer, on the real Piper voice and
the models of the ``[metrics]`` extra; the JSON and the HTML carry them with each model's
version and weights' hash.

Skips without the extra (``LISTENLAB_METRICS_REQUIRED=1`` makes that a failure).
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from evaluation.probe import ProbePrompt, Thresholds, probe_sync
from evaluation.probe.report import write_outputs

EXTRA = ("torch", "distillmos", "speechmos", "pocketsphinx", "jiwer")
MISSING = [m for m in EXTRA if importlib.util.find_spec(m) is None]
if MISSING:
    if os.environ.get("LISTENLAB_METRICS_REQUIRED"):
        pytest.fail(f"the [metrics] extra is required here; missing: {MISSING}", pytrace=False)
    pytest.skip(f"the [metrics] extra is not installed ({MISSING})", allow_module_level=True)

PROMPTS = [
    ProbePrompt("coffee", "I would like a cup of coffee."),
    ProbePrompt("door", "Open the door please, and close the window when you leave."),
]


def test_machine_scores_per_layer(piper_det, tmp_path):
    r = probe_sync(
        piper_det, concurrency=(1, 2), prompts=PROMPTS, thresholds=Thresholds(), machine_scores=True
    )
    m = r.machine
    assert set(m["layers"]) == {"offline", "streaming", "concurrency 2"}
    assert [m["layers"][k]["takes"] for k in ("offline", "streaming", "concurrency 2")] == [2] * 3
    assert len(r.takes) == 6
    off = m["layers"]["offline"]
    for c in ("predicted_mos", "dnsmos_p808", "sphinx_wer", "sphinx_cer"):
        assert c in off and off[c]["min"] <= off[c]["mean"] <= off[c]["max"]
    # Piper is deterministic: streamed alone or two at once, the samples are the reference's
    assert r.deterministic is True
    for layer in ("streaming", "concurrency 2"):
        got = m["layers"][layer]["predicted_mos"]["mean"]
        assert got == pytest.approx(off["predicted_mos"]["mean"], abs=0.01)
    assert 2.5 <= off["predicted_mos"]["mean"] <= 5.0
    assert off["sphinx_wer"]["min"] == 0.0  # "I would like a cup of coffee." is heard exactly
    assert {x["metric"] for x in m["models"]} == {"distillmos", "dnsmos", "words"}
    assert all(len(x["weights_sha256"]) == 64 for x in m["models"]) and m["errors"] == []
    paths = write_outputs(r, tmp_path)
    doc = json.loads(paths["json"].read_text())
    assert doc["machine"]["layers"]["streaming"]["takes"] == 2
    page = paths["html"].read_text()
    assert "<h2>Machine scores per layer</h2>" in page and "distillmos 0.9.1-1" in page


def test_without_the_flag_there_is_no_machine_section(piper_det, tmp_path):
    r = probe_sync(piper_det, concurrency=(1,), prompts=PROMPTS[:1], thresholds=Thresholds())
    assert r.machine == {} and r.to_dict()["machine"] is None
    assert "Machine scores" not in write_outputs(r, tmp_path)["html"].read_text()
