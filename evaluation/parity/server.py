"""What a backend says about itself, for the report: its spec, capabilities, health, voices,
and for a vLLM-Omni server its model card, ``/version`` and the memory ``/metrics`` reports.

Why in the report: a parity result is only worth what one knows of the two sides (a reviewer
asks which release, which model, how much memory). Nothing here changes a decision except the
memory, compared when both servers report it. Every request is bounded in time and size; a
server that does not answer one of them gets that field's error, not a failed run.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from backends.base import Backend

MAX_METRICS_BYTES = 4 * 1024 * 1024
"""Largest ``/metrics`` answer read."""
METRICS_TIMEOUT_S = 10.0
MEMORY_RE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([0-9.eE+-]+)\s*$")
GPU_MEMORY = ("gpu", "cuda", "device")
"""A ``/metrics`` series counts as device memory when its name has one of these and ends in
``memory...bytes`` (what a GPU server reports); else ``process_resident_memory_bytes``."""


def layers(backend: Backend) -> list[Backend]:
    """The backend and every backend it wraps (``piper?profile=...`` is a profile over Piper)."""
    out = [backend]
    while isinstance(getattr(out[-1], "inner", None), Backend) and len(out) < 8:
        out.append(out[-1].inner)
    return out


def memory_from_metrics(text: str) -> dict[str, Any]:
    """The memory a Prometheus text reports: device memory series summed (over devices) and
    the process's resident memory, in MiB; ``memory_mib`` is the first of the two found."""
    device: dict[str, float] = {}
    rss = None
    for line in text.splitlines():
        m = MEMORY_RE.match(line.strip())
        if not m or line.startswith("#"):
            continue
        name, value = m[1], float(m[3])
        low = name.lower()
        if low == "process_resident_memory_bytes":
            rss = value
        elif "memory" in low and low.endswith("bytes") and any(g in low for g in GPU_MEMORY):
            device[name] = device.get(name, 0.0) + value
    out: dict[str, Any] = {"device_series": {k: round(v / 2**20, 1) for k, v in device.items()}}
    out["process_rss_mib"] = None if rss is None else round(rss / 2**20, 1)
    used = [v for k, v in device.items() if "used" in k.lower() or "allocated" in k.lower()]
    dev = max(used or device.values(), default=None)
    out["memory_mib"] = round(dev / 2**20, 1) if dev is not None else out["process_rss_mib"]
    out["memory_source"] = (
        "device memory series" if dev is not None else ("process RSS" if rss is not None else None)
    )
    return out


async def _remote(server: Any) -> dict[str, Any]:
    """A remote vLLM-Omni server's card, version and memory (each field alone may fail)."""
    out: dict[str, Any] = {"url": getattr(server, "base_url", None)}
    try:
        status, d = await server.get_json("/version")
        out["version"] = d.get("version") if status == 200 and isinstance(d, dict) else None
    except Exception as e:  # a server without /version still renders
        out["version_error"] = str(e)
    out["model_card"] = getattr(server, "card", None)
    try:
        r = await server.http().get(server.url("/metrics"), timeout=METRICS_TIMEOUT_S)
        body = r.content[:MAX_METRICS_BYTES].decode("utf-8", "replace")
        out.update(memory_from_metrics(body) if r.status_code == 200 else {"memory_mib": None})
        out["metrics_status"] = r.status_code
    except Exception as e:
        out["memory_mib"] = None
        out["metrics_error"] = str(e)
    return out


async def self_report(backend: Backend) -> dict[str, Any]:
    """What the backend reports of itself (see the module docstring)."""
    out: dict[str, Any] = {
        "backend": backend.describe(),
        "layers": [type(b).__name__ for b in layers(backend)],
        "capabilities": asdict(backend.capabilities),
        "memory_mib": None,
    }
    try:
        h = await backend.health()
        out["health"] = {"ok": h.ok, "detail": h.detail}
    except Exception as e:
        out["health"] = {"ok": False, "detail": str(e)}
    try:
        out["voices"] = [v.name for v in await backend.voices()][:50]
    except Exception as e:
        out["voices_error"] = str(e)
    for b in layers(backend):
        prof = getattr(b, "profile", None)
        if prof is not None and hasattr(prof, "describe"):
            out["profile"] = prof.describe()
        server = getattr(b, "server", None)
        if server is not None and hasattr(server, "get_json"):
            out["server"] = await _remote(server)
            out["memory_mib"] = out["server"].get("memory_mib")
    return out


__all__ = ["MAX_METRICS_BYTES", "layers", "memory_from_metrics", "self_report"]
