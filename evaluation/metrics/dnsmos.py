"""DNSMOS (Reddy et al., ICASSP 2021/2022; MIT): P.808 MOS for comparability, and P.835.

Why here, not ``speechmos.dnsmos.run``: that function runs both DNSMOS networks on every
window even when one score is wanted, and reads files with librosa. The networks are the
``speechmos`` 0.0.1.1 wheel's ONNX files run with onnxruntime; the rule is the package's:
audio shorter than 9.01 s is repeated until it is at least that long, windows of 9.01 s start
every second, and the clip's score is the mean over windows; the P.808 network reads a
120-band log-mel spectrogram (321-point FFT, 10 ms hop) of each window but its last 10 ms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Item, Metric, MetricInfo, Value, package_file, require

INPUT_SECONDS = 9.01
P835_POLY = {  # speechmos' polynomial fits from the raw network outputs to MOS (non-personal)
    "sig": (-0.08397278, 1.22083953, 0.0052439),
    "bak": (-0.13166888, 1.60915514, -0.39604546),
    "ovrl": (-0.06766283, 1.11546468, 0.04602535),
}


def windows(x: np.ndarray, rate: int = MODEL_RATE) -> list[np.ndarray]:
    """The 9.01 s windows DNSMOS scores (the short clip repeated first)."""
    n = int(INPUT_SECONDS * rate)
    while len(x) < n:
        x = np.append(x, x)
    hops = int(np.floor(len(x) / rate) - INPUT_SECONDS) + 1
    out = [x[int(i * rate) : int((i + INPUT_SECONDS) * rate)] for i in range(hops)]
    return [w for w in out if len(w) >= n]


def p808_features(seg: np.ndarray) -> np.ndarray:
    import librosa

    mel = librosa.feature.melspectrogram(
        y=seg[:-160], sr=MODEL_RATE, n_fft=321, hop_length=160, n_mels=120
    )
    return ((librosa.power_to_db(mel, ref=np.max) + 40) / 40).T.astype(np.float32)


def session(path: Path) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1  # small models: one thread each
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class DnsmosP808(Metric):
    info = MetricInfo(
        name="dnsmos",
        version="0.0.1.1-1",
        tier="bundled",
        columns=("dnsmos_p808",),
        summary="DNSMOS P.808 MOS, 1-5 (noise-suppression crowd ratings; for comparability)",
        license="MIT",
    )

    def __init__(self) -> None:
        self.sess: Any = None

    def weights(self) -> list[Path]:
        return [package_file("speechmos", "dnsmos_models", "model_v8.onnx")]

    def load(self) -> None:
        if self.sess is None:
            require("librosa")
            self.sess = session(self.weights()[0])

    def score(self, item: Item) -> dict[str, Value]:
        self.load()
        ws = windows(at_rate(item.audio, MODEL_RATE))
        feats = np.stack([p808_features(w) for w in ws])
        out = [float(self.sess.run(None, {"input_1": f[None]})[0][0][0]) for f in feats]
        return {"dnsmos_p808": round(float(np.mean(out)), 4)}


class DnsmosP835(Metric):
    info = MetricInfo(
        name="dnsmos_p835",
        version="0.0.1.1-1",
        tier="bundled",
        columns=("dnsmos_sig", "dnsmos_bak", "dnsmos_ovrl"),
        summary="DNSMOS P.835: signal, background and overall MOS, 1-5",
        license="MIT",
    )

    def __init__(self) -> None:
        self.sess: Any = None

    def weights(self) -> list[Path]:
        return [package_file("speechmos", "dnsmos_models", "sig_bak_ovr.onnx")]

    def load(self) -> None:
        if self.sess is None:
            self.sess = session(self.weights()[0])

    def score(self, item: Item) -> dict[str, Value]:
        self.load()
        raw = np.array(
            [
                self.sess.run(None, {"input_1": w.astype(np.float32)[None]})[0][0]
                for w in windows(at_rate(item.audio, MODEL_RATE))
            ]
        )
        out = {}
        for i, k in enumerate(("sig", "bak", "ovrl")):
            out[f"dnsmos_{k}"] = round(float(np.mean(np.poly1d(P835_POLY[k])(raw[:, i]))), 4)
        return out


__all__ = ["DnsmosP808", "DnsmosP835", "windows"]
