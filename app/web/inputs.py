"""Limits on what a client sends inside a request: JSON nesting, and ids a client may choose.

Why: a body or WebSocket message within the byte limit can still be hostile (JSON nested
thousands deep overflows a recursive walk; an id with a quote or a formula character breaks a
CSV or a file name). Every route and message handler parses through these.
"""

from __future__ import annotations

import json
import re
from typing import Any

from backends.errors import InvalidRequest

MAX_JSON_DEPTH = 32
"""Deepest nesting accepted in a JSON body or message (no request needs more than 3)."""
JSON_BODY_BYTES = 64 * 1024
"""The largest JSON body of ``listenlab serve``'s own routes (``/ll/…``): a listening test's
spec with its 200 prompts is about 17 KB."""

CLIENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""An id a client may choose (a report id): letters and digits first, no formula character,
no quote, no separator, so it is the same string in the DB, a CSV cell and a file name."""


def client_id(value: Any, what: str = "report id") -> str | None:
    """``value`` if it is a valid client-chosen id, None if absent; ValueError otherwise."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not CLIENT_ID_RE.match(value):
        raise ValueError(f"{what} must be 1-64 letters, digits, '.', '-' or '_'")
    return value


class JsonTooDeep(ValueError):
    pass


def json_depth_ok(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Iterative depth check (a recursive one would itself overflow on hostile input)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            if d > max_depth:
                return False
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            if d > max_depth:
                return False
            stack.extend((x, d + 1) for x in v)
    return True


def loads_limited(raw: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` with a clear ValueError."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise JsonTooDeep(f"JSON nested too deeply (the limit is {max_depth} levels)") from None
    if not json_depth_ok(data, max_depth):
        raise JsonTooDeep(f"JSON nested too deeply (the limit is {max_depth} levels)")
    return data


def json_object(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """A request body's JSON object (``{}`` when empty); a clear 400 for anything else,
    nesting too deep included (Python's own parser raises RecursionError near 1,000 levels)."""
    if not raw:
        return {}
    try:
        d = loads_limited(raw, max_depth)
    except JsonTooDeep as e:
        raise InvalidRequest(f"the body's {e}") from None
    except ValueError:
        raise InvalidRequest("the body must be JSON") from None
    if not isinstance(d, dict):
        raise InvalidRequest("the body must be a JSON object")
    return d


__all__ = [
    "CLIENT_ID_RE",
    "JSON_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "JsonTooDeep",
    "client_id",
    "json_depth_ok",
    "json_object",
    "loads_limited",
]
