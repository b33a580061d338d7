"""Settings the app hands to the backends once at start: spec parameters by engine.

Why a module of its own: the backends layer never reads the environment (``app/config.py``
does, once: ``LISTENLAB_VLLM_API_KEY`` becomes the remote engine's ``api_key``), and the command
line sets these before it knows whether the command will load a backend at all, so this module
imports nothing heavy (``listenlab test list`` must not load numpy).
"""

from __future__ import annotations

from collections.abc import Mapping

_SPEC_DEFAULTS: dict[str, dict[str, str]] = {}


def set_spec_defaults(defaults: Mapping[str, Mapping[str, str]]) -> None:
    """Parameters for every spec of an engine (by registry key, e.g. ``vllm-omni+http``) that
    leaves them out; the spec's own win, and none of them is shown in ``describe()``. This
    replaces whatever was set before."""
    _SPEC_DEFAULTS.clear()
    _SPEC_DEFAULTS.update({k: dict(v) for k, v in defaults.items()})


def spec_defaults(key: str) -> dict[str, str]:
    """The parameters set for engine ``key`` ({} when none)."""
    return dict(_SPEC_DEFAULTS.get(key, {}))


__all__ = ["set_spec_defaults", "spec_defaults"]
