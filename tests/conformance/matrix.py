"""The request matrix: every field of vLLM-Omni's speech request, valid, invalid and at its
limits, generated from the reference's own schema, for HTTP and the WebSocket.

Why generated: a hand-written list compares what its author thought of. Here each property of
``OpenAICreateSpeechRequest`` and ``StreamingSpeechSessionConfig`` (read from the running
reference server, ``/_conformance/schema``) yields cases from its JSON-schema type and bounds
(each enum member and one outside, numbers at and past each limit, the wrong type, null, an
empty string/list), plus the values that only mean something to a model (voices, languages,
sample rates, a real reference clip), and the cross-product of the output modes (whole file in
each format, SSE and raw streams in pcm/wav). Each case is sent to both servers and each answer
is reduced to what a client can see: status, error type/param/message, content type, the WAV
header, the SSE events, the WebSocket messages and the PCM bytes themselves.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect

TEXT = "Hello there. It speaks."
SUMMARY = "conformance summary"
"""The ``record_property`` key of a line printed at the end of the run (conftest.py)."""
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Case:
    """One request: its transport (``http`` body or ``ws`` session.config) and its name."""

    model: str
    transport: str
    name: str
    body: dict[str, Any]


@dataclass
class Result:
    sent: int = 0
    differ: list[tuple[Case, dict, dict]] = field(default_factory=list)


# --------------------------------------------------------------------------- values per property


def prop_type(prop: dict) -> tuple[set[str], list | None, dict]:
    """The JSON types a property takes, its enum, and its bounds (any branch)."""
    branches = prop.get("anyOf") or [prop]
    types, enum, bounds = set(), None, {}
    for b in branches:
        if "enum" in b:
            enum = list(b["enum"])
            types.add("enum")
        elif "const" in b:
            enum = [b["const"]]
            types.add("enum")
        elif "type" in b:
            types.add(b["type"])
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "maxItems"):
            if k in b:
                bounds[k] = b[k]
    return types, enum, bounds


def schema_values(prop: dict) -> list[tuple[str, Any]]:
    """Values of one property from its schema alone: valid, invalid, at and past its bounds."""
    types, enum, b = prop_type(prop)
    out: list[tuple[str, Any]] = [("null", None)]
    if enum:
        out += [(repr(v), v) for v in enum] + [("not-a-member", "bogus")]
    if "integer" in types:
        lo = b.get("minimum", b.get("exclusiveMinimum", 0) + 1 if "exclusiveMinimum" in b else None)
        hi = b.get("maximum")
        for v in filter(lambda x: x is not None, (lo, hi)):
            out.append((f"at-limit {v}", v))
        if lo is not None:
            out.append((f"below {lo}", lo - 1))
        if hi is not None and hi < INT64_MAX:
            out.append((f"above {hi}", hi + 1))
        elif hi == INT64_MAX:
            out.append(("above int64", INT64_MAX + 1))
        out.append(("wrong type", "x"))
    if "number" in types:
        lo, hi = b.get("minimum"), b.get("maximum")
        for v in filter(lambda x: x is not None, (lo, hi)):
            out.append((f"at-limit {v}", v))
        if lo is not None:
            out.append((f"below {lo}", round(lo - 0.01, 4)))
        if hi is not None:
            out.append((f"above {hi}", round(hi + 0.01, 4)))
        out.append(("wrong type", "fast"))
    if "boolean" in types:
        out += [("true", True), ("false", False), ("wrong type", "maybe")]
    if "string" in types and not enum:
        out += [("empty", ""), ("wrong type", 123)]
    if "array" in types:
        out += [("empty list", []), ("list of text", ["x"])]
    if "object" in types:
        out += [("empty object", {}), ("wrong type", "x")]
    return out


def meaning_values(name: str, clip: str, voices: list[str]) -> list[tuple[str, Any]]:
    """Values that only mean something to a model (its voices, languages, rates, a clip)."""
    table: dict[str, list[tuple[str, Any]]] = {
        "input": [("blank", "   "), ("text", TEXT)],
        "voice": [("default", "default"), ("unknown", "nobody"), ("Mixed-Case unknown", "Nobody")]
        + [(f"own voice {v}", v) for v in voices[:1]]
        + [(f"own voice upper {v}", v.upper()) for v in voices[:1]],
        "language": [("English", "English"), ("lower english", "english"), ("Auto", "Auto")]
        + [("Klingon", "Klingon")],
        "sample_rate": [(f"{r} Hz", r) for r in (8000, 16000, 24000, 44100, 48000)],
        "instructions": [("style", "Speak warmly."), ("501 chars", "x" * 501)],
        "ref_audio": [
            ("clip", clip),
            ("bad base64 clip", "data:audio/wav;base64,AAAA"),
            ("no scheme", "not-a-url"),
            ("two clips", [clip, clip]),
        ],
        "ref_text": [("transcript", "This is my reference voice clip.")],
        "speaker_embedding": [("3 floats", [0.1, 0.2, 0.3]), ("1024 floats", [0.01] * 1024)],
        "max_new_tokens": [("4096", 4096), ("4097", 4097), ("64", 64)],
        "model": [("another model", "someone/else")],
        "x_vector_only_mode": [("true", True)],
        "seed": [("42", 42)],
        "extra_params": [("temperature", {"temperature": 0.5})],
        "references": [
            ("one", [{"audio_path": clip, "text": "This is my reference voice clip."}]),
            ("empty", []),
        ],
    }
    return table.get(name, [])


SKIP = {"stream", "stream_format", "response_format", "stream_audio", "split_granularity"}
"""Output-mode fields: they are crossed with each other in :func:`mode_cases` instead."""
SLOW_OR_NETLESS = {"ref_audio_2", "ambient_sound", "duration_seconds"}
"""MOSS-TTSD / SoundEffect-only fields: the seed models ignore them (one case each)."""


MODEL_FIELDS = frozenset(
    {
        "input",
        "voice",
        "task_type",
        "language",
        "instructions",
        "ref_audio",
        "ref_text",
        "x_vector_only_mode",
        "speaker_embedding",
        "max_new_tokens",
        "sample_rate",
        "model",
    }
)
"""The fields a model's adapter reads. Every other field is checked by the schema alone,
the same for every model: those are generated for the first seed model only."""


def field_cases(
    model: str,
    transport: str,
    schema: dict,
    base: dict,
    clip: str,
    voices: list[str],
    only: frozenset[str] | None = None,
) -> list[Case]:
    """One case per (property, value): the base request with that one field set (``only``:
    these properties)."""
    props = dict(schema.get("properties", {}))
    if transport == "http":
        props["references"] = {"type": "array"}
    cases = []
    for name, prop in sorted(props.items()):
        if name in SKIP or (only is not None and name not in only):
            continue
        values = meaning_values(name, clip, voices) + schema_values(prop)
        if name in SLOW_OR_NETLESS:
            values = values[:2]
        seen = set()
        for label, value in values:
            key = json.dumps(value, sort_keys=True)[:200]
            if key in seen:
                continue
            seen.add(key)
            body = {k: v for k, v in base.items() if k != name}
            if not (name == "input" and value is None and label == "null"):
                body[name] = value
            if name == "input" and label == "null":
                body.pop("input", None)  # a missing input
            cases.append(Case(model, transport, f"{name}={label}", body))
    return cases


def mode_cases(model: str, base: dict, formats=("wav", "pcm", "flac", "mp3", "opus")) -> list[Case]:
    """Every output mode: whole files in each format, SSE and raw streams in pcm/wav (and
    the formats streams refuse), each also with speed 1.5 (a stretch, or a refusal)."""
    out = []
    for fmt in formats:
        for mode, extra in (
            ("file", {}),
            ("stream", {"stream": True}),
            ("sse", {"stream_format": "sse"}),
            ("audio", {"stream": True, "stream_format": "audio"}),
        ):
            for speed in (1.0, 1.5):
                if speed != 1.0 and fmt not in ("wav", "pcm"):
                    continue
                body = {**base, "response_format": fmt, **extra}
                if speed != 1.0:
                    body["speed"] = speed
                out.append(Case(model, "http", f"mode {mode} {fmt} speed {speed}", body))
    return out


def ws_mode_cases(
    model: str, base: dict, formats=("wav", "pcm", "flac", "mp3", "opus")
) -> list[Case]:
    out = []
    for fmt in formats:
        for stream_audio in (False, True):
            for speed in (1.0, 1.5):
                body = {**base, "response_format": fmt, "stream_audio": stream_audio}
                if speed != 1.0:
                    body["speed"] = speed
                out.append(Case(model, "ws", f"ws {fmt} stream_audio={stream_audio} {speed}", body))
    for gran in ("sentence", "clause", "bogus"):
        out.append(Case(model, "ws", f"ws split {gran}", {**base, "split_granularity": gran}))
    return out


# --------------------------------------------------------------------------- what a client sees

_ADDR = re.compile(r" at 0x[0-9a-f]+")


def norm_message(msg: str) -> str:
    return _ADDR.sub("", msg)


def wav_header(data: bytes) -> dict:
    if len(data) < 44 or data[:4] != b"RIFF":
        return {"riff": False}
    _, size, _, _, fsize, tag, ch, sr, brate, align, bits = struct.unpack(
        "<4sI4s4sIHHIIHH", data[:36]
    )
    return {"tag": tag, "ch": ch, "sr": sr, "brate": brate, "align": align, "bits": bits,
            "fmt_size": fsize, "streaming": size == 0xFFFFFFFF}  # fmt: skip


def audio_view(ctype: str, data: bytes) -> dict:
    """An audio body: its header and a digest of its samples (decoded for compressed formats)."""
    import numpy as np
    import soundfile as sf

    v: dict[str, Any] = {"bytes": len(data)}
    if ctype.startswith("audio/wav"):
        v["header"] = wav_header(data)
        v["pcm"] = hashlib.sha1(data[44:]).hexdigest()[:12]
    elif ctype.startswith("audio/pcm"):
        v["pcm"] = hashlib.sha1(data).hexdigest()[:12]
    else:
        try:
            x, sr = sf.read(io.BytesIO(data), dtype="int16", always_2d=True)
            v = {"sr": sr, "ch": x.shape[1], "frames": len(x)}
            if ctype.startswith("audio/flac"):
                v["pcm"] = hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest()[:12]
        except Exception as e:  # noqa: BLE001 - what a client would see
            v = {"undecodable": type(e).__name__}
    return v


def sse_view(text: str) -> dict:
    events, audio = [], b""
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        name = lines[0].removeprefix("event: ")
        payload = json.loads(lines[1].removeprefix("data: "))
        if name == "speech.audio.delta":
            audio += base64.b64decode(payload["audio"])
            kind = ("delta", tuple(sorted(payload)), payload.get("response_format"))
        elif name == "speech.audio.error":
            kind = (name, norm_message(payload["error"]["message"]), payload.get("partial_audio"))
        else:
            kind = (name, tuple(sorted(payload)))
        if not events or events[-1] != kind or kind[0] != "delta":
            events.append(kind)
    fmt = next((e[2] for e in events if e[0] == "delta"), None)
    view = {"events": events}
    if fmt == "wav":
        view["audio"] = {
            "header": wav_header(audio),
            "pcm": hashlib.sha1(audio[44:]).hexdigest()[:12],
        }
    elif audio:
        view["audio"] = {"pcm": hashlib.sha1(audio).hexdigest()[:12]}
    return view


def http_view(r: httpx.Response) -> dict:
    ctype = r.headers.get("content-type", "")
    v: dict[str, Any] = {"status": r.status_code, "type": ctype.split(";")[0]}
    if ctype.startswith("application/json"):
        try:
            body = r.json()
        except ValueError:
            return v | {"body": r.text[:300]}
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            v |= {k: err.get(k) for k in ("type", "param", "code")}
            v["message"] = norm_message(str(err.get("message")))
        else:
            v["json_keys"] = sorted(body) if isinstance(body, dict) else type(body).__name__
    elif ctype.startswith("text/event-stream"):
        v |= sse_view(r.text)
    elif ctype.startswith("audio/"):
        v |= audio_view(ctype, r.content)
    return v


async def ws_view(url: str, config: dict, texts: list[str]) -> list:
    """One utterance's messages: JSON as (type, keys, the values a client reads), binary
    frames joined into one digest per run."""
    out: list[Any] = []
    run = b""

    def flush() -> None:
        nonlocal run
        if run[:4] == b"OggS":  # Ogg streams carry a random serial number: compare the audio
            out.append(("binary", "ogg", audio_view("audio/ogg", run), len(run)))
            run = b""
        elif run:
            out.append(("binary", hashlib.sha1(run).hexdigest()[:12], len(run)))
            run = b""

    path = "/v1/audio/speech/stream"
    async with connect("ws" + url[4:] + path, proxy=None, compression=None) as ws:
        await ws.send(json.dumps({"type": "session.config", **config}))
        # vLLM-Omni drops the connection after refusing a config; text sent meanwhile makes
        # its kernel reset the socket and the refusal can be lost: wait for it first
        try:
            first = await asyncio.wait_for(ws.recv(), 0.4)
        except TimeoutError:
            first = None
        except Exception as e:  # noqa: BLE001
            return [("closed", type(e).__name__)]
        if first is not None:
            m = json.loads(first)
            out.append(
                (m.get("type"), tuple(sorted(m)), {"message": norm_message(m.get("message", ""))})
            )
            try:
                await asyncio.wait_for(ws.recv(), 5)
            except Exception as e:  # noqa: BLE001
                out.append(("closed", type(e).__name__))
            return out
        for t in texts:
            await ws.send(json.dumps({"type": "input.text", "text": t}))
        await ws.send(json.dumps({"type": "input.done"}))
        while True:
            try:
                msg = await asyncio.wait_for(ws.recv(), 60)
            except Exception as e:  # noqa: BLE001 - the socket closed: what a client sees
                flush()
                out.append(("closed", type(e).__name__))
                return out
            if isinstance(msg, bytes):
                run += msg
                continue
            flush()
            m = json.loads(msg)
            keep = {k: m[k] for k in ("format", "error", "sample_rate", "total_bytes") if k in m}
            if "message" in m:
                keep["message"] = norm_message(m["message"])
            out.append((m.get("type"), tuple(sorted(m)), keep))
            if m.get("type") == "session.done":
                return out


# --------------------------------------------------------------------------- sending


async def answer(client: httpx.AsyncClient, url: str, case: Case) -> Any:
    if case.transport == "http":
        try:
            r = await client.post(url + "/v1/audio/speech", json=case.body, timeout=120)
        except httpx.HTTPError as e:  # a cut connection is what a client sees too
            return {"transport_error": type(e).__name__}
        return http_view(r)
    return await ws_view(url, case.body, [TEXT])


async def run_cases(
    pairs: dict[str, tuple[str, str]], cases: list[Case], concurrency: int = 4
) -> Result:
    """Send each case to both servers (reference first) and keep the differences."""
    result = Result()
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(trust_env=False) as client:

        async def one(case: Case) -> None:
            ref_url, our_url = pairs[case.model]
            async with sem:
                a = await answer(client, ref_url, case)
                b = await answer(client, our_url, case)
            result.sent += 1
            if a != b:
                result.differ.append((case, a, b))

        await asyncio.gather(*(one(c) for c in cases))
    return result


__all__ = [
    "SUMMARY",
    "Case",
    "Result",
    "field_cases",
    "http_view",
    "mode_cases",
    "run_cases",
    "ws_mode_cases",
    "ws_view",
]
