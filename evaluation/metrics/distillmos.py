"""Predicted MOS with DistillMOS (Stahl & Gamper, ICASSP 2025; MIT): the default quality score.

Why this loader: the ``distillmos`` package imports torchaudio at its top only to read and
resample files, and the torchaudio wheels on PyPI do not import beside the CPU build of torch
this project uses. The network is small (a complex-spectrogram CNN and the XLS-R-SQA
transformer head), so it is built here, the same layers with the same names as
``distillmos/sqa.py`` 0.9.1 (MIT, Microsoft), the head taken from ``xls_r_sqa`` (which imports
no torchaudio), and the checkpoint loaded from the ``distillmos`` wheel with
``weights_only=True``. Audio reaches it already mono at 16 kHz (:mod:`evaluation.metrics.audio`).
``tests/test_metrics.py`` compares it with the package's own network class on real takes.

The model scores 7.68 s crops (shorter audio is zero-padded; longer audio is cut into crops
at most 1 s apart and the crop scores averaged), each crop peak-normalised first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Item, Metric, MetricInfo, Value, package_file, require

SEQ_LEN = 122_880
"""Samples per crop at 16 kHz (7.68 s)."""
MAX_HOP_LEN = 16_000
"""Longest step between crops (1 s)."""


def build_network() -> Any:
    """DistillMOS's network (untrained): ``distillmos.sqa.ConvTransformerSQAModel``'s layers."""
    import torch
    from torch import nn
    from xls_r_sqa.config import FEAT_SEQ_LEN, Config
    from xls_r_sqa.sqa_model import SingleLayerModel

    class ComplexSpecCNN(nn.Module):
        def __init__(self, final_channels: int = 256, num_layers: int = 6):
            super().__init__()
            layers, prev, fdim = [], 2, 161
            for i in range(num_layers):
                ch = min(64 * 2 ** max(i - 1, 0), final_channels)
                t_stride = 2 if i == num_layers - 1 else 1
                f_stride = 2 if i >= 1 else 1
                layers += [nn.Conv2d(prev, ch, (3, 3), (f_stride, t_stride), (0, 1))]
                layers += [nn.LeakyReLU(0.1)]
                fdim, prev = (fdim - 3) // f_stride + 1, ch
            self.cnn = nn.Sequential(*layers)
            self.fdim_cnn_out = fdim

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = nn.functional.pad(x, (80, 80), mode="reflect")
            spec = torch.stft(
                x, 320, 160, 320, torch.hann_window(320), center=False, return_complex=True
            )
            spec = torch.view_as_real(spec)
            mag = torch.clip(torch.sum(spec**2, dim=-1, keepdim=True) ** 0.5, 1e-12)
            compressed = (mag**0.3 * spec / mag).permute(0, 3, 1, 2)
            return torch.flatten(self.cnn(compressed), 1, -2)

    class DistillMOS(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = ComplexSpecCNN()
            conf = Config("", None, FEAT_SEQ_LEN, 200, None, 8, 7)
            conf.dim_input = 256 * self.cnn.fdim_cnn_out
            self.transformer_pool_attn = SingleLayerModel(conf)

        def forward(self, crops: torch.Tensor) -> torch.Tensor:
            crops = crops / (torch.max(torch.abs(crops), dim=1, keepdim=True).values + 1e-8)
            feat = self.cnn(crops).permute(0, 2, 1)
            return 1 + 4 * self.transformer_pool_attn(feat)

    return DistillMOS()


def crops(x: np.ndarray) -> np.ndarray:
    """The package's segmenting: pad to one crop, or crops at most 1 s apart spanning it all."""
    over = len(x) - SEQ_LEN
    if over < 0:
        x, over = np.pad(x, (0, -over)), 0
    hops = int(np.ceil(over / MAX_HOP_LEN)) + 1
    return np.stack([x[int(c * over) : int(c * over) + SEQ_LEN] for c in np.linspace(0, 1, hops)])


class DistillMos(Metric):
    info = MetricInfo(
        name="distillmos",
        version="0.9.1-1",
        tier="bundled",
        columns=("predicted_mos",),
        summary="predicted MOS, 1-5 (DistillMOS v7, distilled from XLS-R-SQA)",
        license="MIT",
    )
    BATCH = 8
    """Crops per forward pass (bounds memory on long files)."""

    def __init__(self) -> None:
        self.net: Any = None

    def weights(self) -> list[Path]:
        return [package_file("distillmos", "weights", "distill_mos_v7.pt")]

    def load(self) -> None:
        if self.net is not None:
            return
        require("torch")
        require("xls_r_sqa")
        import torch

        net = build_network()
        chkpt = torch.load(self.weights()[0], map_location="cpu", weights_only=True)
        net.load_state_dict(chkpt["model"])
        self.net = net.eval()

    def score(self, item: Item) -> dict[str, Value]:
        import torch

        self.load()
        c = crops(at_rate(item.audio, MODEL_RATE))
        outs = []
        with torch.inference_mode():
            for i in range(0, len(c), self.BATCH):
                outs.append(self.net(torch.from_numpy(c[i : i + self.BATCH])).reshape(-1))
        return {"predicted_mos": round(float(torch.cat(outs).mean()), 4)}


__all__ = ["DistillMos", "build_network", "crops"]
