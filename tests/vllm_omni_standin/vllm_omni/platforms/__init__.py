"""Stand-in of ``vllm_omni.platforms``: ``current_omni_platform`` with the calls the backend makes.

Real: ``from vllm_omni.platforms import current_omni_platform``; ``is_available()``,
``is_cuda()``, ``is_npu()``, ``is_rocm()`` (used throughout vllm-omni, e.g. its tests'
``skipif(not current_omni_platform.is_cuda())``). Tests flip ``available`` to simulate a
machine without a GPU.
"""


class _StandInPlatform:
    available = True
    device = "cuda"

    def is_available(self) -> bool:
        return self.available

    def is_cuda(self) -> bool:
        return self.available and self.device == "cuda"

    def is_npu(self) -> bool:
        return self.available and self.device == "npu"

    def is_rocm(self) -> bool:
        return self.available and self.device == "rocm"


current_omni_platform = _StandInPlatform()
