"""Stand-in of ``vllm_omni.entrypoints`` (see the package docstring)."""
