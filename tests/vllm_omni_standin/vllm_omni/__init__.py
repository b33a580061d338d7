"""STAND-IN for the ``vllm_omni`` package (vllm-project/vllm-omni), for tests only.

vLLM-Omni cannot run on this machine (no GPU, no vLLM wheels, no network), so the embedded
backend is tested against this tiny package instead. It mimics exactly the subset of the real
interface that ``backends/vllm_omni.py`` uses, with the same module paths, class names, method
signatures and output shapes as the real source (each module names the file it follows). The
audio is real: the "model" directory must hold a Piper voice (``*.onnx`` + ``*.onnx.json``),
which is synthesised deterministically and cut into chunks, as Code2Wav chunks would arrive.

Put ``tests/vllm_omni_standin`` on ``sys.path`` only inside a test fixture.
"""

from vllm_omni.entrypoints.async_omni import AsyncOmni

__all__ = ["AsyncOmni"]
