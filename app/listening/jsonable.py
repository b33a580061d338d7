"""JSON-safe values of the listening tests' rows and tables: what the admin routes and
``listenlab test --json`` print.

Why a module of its own: the routes and the command line print the same JSON, and the command
line must not import FastAPI to do it (``listenlab test list`` stays light).
"""

from __future__ import annotations

import math
from typing import Any


def clean_json(v: Any) -> Any:
    """``v`` with non-finite floats as None and numpy scalars as Python numbers, recursively."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): clean_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [clean_json(x) for x in v]
    if hasattr(v, "item"):
        return clean_json(v.item())
    return v


def frames_json(tables: dict[str, Any]) -> dict[str, Any]:
    """Named DataFrames as ``{name: [row, ...]}`` (the results route's body)."""
    return {k: clean_json(df.to_dict(orient="records")) for k, df in tables.items()}


__all__ = ["clean_json", "frames_json"]
