"""STAND-IN for the ``vllm_omni`` package (vllm-project/vllm-omni), for tests only.

vLLM-Omni cannot run on this machine (no GPU, no vLLM wheels, no network), so the embedded
backend is tested against this tiny package instead. It mimics exactly the subset of the real
interface that ``backends/vllm_omni/embedded.py`` uses, with the same module paths, class names, method
signatures and output shapes as the real source (each module names the file it follows). Per
seed model (Qwen3-TTS, Fish Speech S2 Pro, CosyVoice3, MOSS-TTS-Nano, VoxCPM2) it checks the
prompt the way that model's stage does and returns that model's output shape
(``_standin_models.py``). The audio is real: the bundled Piper voice (or a Piper voice in the
model directory), synthesised deterministically, resampled to the model's rate and cut into
chunks, as the decoder stage's chunks would arrive. Tokenizers come from the sibling
``transformers`` stand-in.

Put ``tests/vllm_omni_standin`` on ``sys.path`` only inside a test fixture.
"""

from vllm_omni.entrypoints.async_omni import AsyncOmni

__all__ = ["AsyncOmni"]
