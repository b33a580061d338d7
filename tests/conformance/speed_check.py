"""vLLM-Omni 0.30.0's own ``speed`` stretch (``AudioMixin._apply_speed_adjustment``: torchaudio's
phase vocoder) of a WAV file, at several speeds, and the spectrogram it starts from (torch's
``Spectrogram`` with the same window). Runs in the conformance environment.

    .venv-conformance/bin/python tests/conformance/speed_check.py IN.wav OUT.npz 0.5 1.5 ...
"""

from __future__ import annotations

import sys

import numpy as np
import soundfile as sf


def main() -> None:
    from vllm_omni.entrypoints.openai.audio_utils_mixin import AudioMixin

    src, dst, *speeds = sys.argv[1:]
    x, sr = sf.read(src, dtype="int16")
    f = x.astype(np.float32) / 32768.0
    out = {s: np.asarray(AudioMixin()._apply_speed_adjustment(f, float(s), sr)[0]) for s in speeds}
    import torch
    import torchaudio

    window = torch.hann_window(768, dtype=torch.float32)
    spec = torchaudio.transforms.Spectrogram(
        n_fft=768, hop_length=192, window_fn=lambda *_a, **_k: window, power=None
    )(torch.from_numpy(f).unsqueeze(0))
    out["spectrogram"] = spec[0].numpy()
    np.savez(dst, **out)
    print("OK", len(out))


if __name__ == "__main__":
    main()
