"""vLLM-Omni 0.30's example clients, by the requests they send: each run of a client (its
arguments) is recorded here as the request it makes and what it does with the answer, and
:func:`replay` makes that request and does that with the answer, against any server.

Why recordings: the clients' code (``examples/online_serving/text_to_speech/<model>/…`` in
vllm-project/vllm-omni) cannot be copied into this repository. Each one builds one payload from
its arguments and writes the answer to files in one of four ways, which :class:`Run` records:
``file`` (a POST; a 200 body written to one file: ``openai_speech_client.py``,
``speech_client.py``), ``stream`` (a streaming POST; every body byte appended to one file:
``--stream``), ``batch`` (``batch_speech_client.py``: each successful item's base64 audio to
its own file) and ``ws`` (``streaming_speech_client.py``: ``session.config``, the text at once
or word by word, ``input.done``; binary frames joined into one file per ``audio.done``). The
payloads are the clients' own (their defaults, e.g. Qwen3-TTS's ``voice: "vivian"``); the model
names are the served ones where a client's default names another checkpoint (the reference
server serves the 0.6B Qwen3-TTS), as a user passes ``--model``.

Clients not replayed: the Audex client (its first two passes are chat completions, not speech),
the Gradio demos (a browser UI), and the clients of models the scripted reference cannot serve
(IndexTTS-2, OmniVoice, Higgs-Audio v2: their prompts need the checkpoint's processor).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect

QWEN = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
TEXT = "Hello, how are you?"
WS_TEXT = "Hello world. How are you? I am fine."
REF_TEXT = "This is my reference voice clip."
CLIP = "<clip>"
"""Stands for the reference clip a run sends (the test's data URL)."""


@dataclass(frozen=True)
class Run:
    """One invocation of an example client: the request it sends and how it saves the answer."""

    client: str
    """The client's path under ``examples/online_serving/`` and its arguments."""
    model: str
    """The scripted reference's seed it talks to (``tests/conformance/engine.py``)."""
    kind: str
    """``file``, ``stream``, ``batch`` or ``ws`` (see the module docstring)."""
    body: dict[str, Any] = field(default_factory=dict)
    """The JSON body, or for ``ws`` the ``session.config`` fields."""
    texts: tuple[str, ...] = ()
    """``ws``: the ``input.text`` messages, in order."""
    suffix: str = "wav"
    """``ws``: the saved files' extension (the session's ``response_format``)."""


def qwen(args: str, body: dict, kind: str = "file") -> Run:
    client = "text_to_speech/qwen3_tts/openai_speech_client.py " + args
    if kind == "batch":
        client = "text_to_speech/qwen3_tts/batch_speech_client.py " + args
    return Run(client, "qwen3_tts", kind, body)


def qwen_ws(args: str, extra: dict, texts: tuple[str, ...] = (WS_TEXT,)) -> Run:
    """``streaming_speech_client.py``'s session: its defaults, then ``extra``."""
    config = {"speaker": "Vivian", "task_type": "CustomVoice", "language": "Auto"}
    config |= {"response_format": "wav", "speed": 1.0, "model": QWEN} | extra
    suffix = "pcm" if config["response_format"] == "pcm" else config["response_format"]
    client = "text_to_speech/qwen3_tts/streaming_speech_client.py " + args
    return Run(client, "qwen3_tts", "ws", config, texts, suffix)


def words(text: str) -> tuple[str, ...]:
    """``--simulate-stt``: the text word by word, each but the last with its space."""
    ws = text.split(" ")
    return tuple(w + (" " if i < len(ws) - 1 else "") for i, w in enumerate(ws))


def cosy(args: str, body: dict, kind: str = "file") -> Run:
    base = {"model": "FunAudioLLM/Fun-CosyVoice3-0.5B-2512", "input": TEXT}
    base |= {"ref_audio": CLIP, "ref_text": REF_TEXT, "response_format": "wav"}
    return Run(
        "text_to_speech/cosyvoice3/speech_client.py " + args, "cosyvoice3", kind, base | body
    )


def cosy_ws(args: str, extra: dict) -> Run:
    config = {"model": "FunAudioLLM/Fun-CosyVoice3-0.5B-2512", "response_format": "wav"}
    config |= {"ref_audio": CLIP, "ref_text": REF_TEXT, "split_granularity": "sentence"} | extra
    client = "text_to_speech/cosyvoice3/streaming_speech_client.py " + args
    return Run(client, "cosyvoice3", "ws", config, (WS_TEXT,), config["response_format"])


def fish(args: str, body: dict, kind: str = "file") -> Run:
    base = {
        "model": "fishaudio/s2-pro",
        "input": TEXT,
        "voice": "default",
        "response_format": "wav",
    }
    return Run(
        "text_to_speech/fish_speech/speech_client.py " + args, "fish_speech", kind, base | body
    )


RUNS: tuple[Run, ...] = (
    qwen("--text T", {"model": QWEN, "input": TEXT, "voice": "vivian", "response_format": "wav"}),
    qwen(
        "--text T --instructions 'Speak with excitement'",
        {"model": QWEN, "input": TEXT, "voice": "vivian", "response_format": "wav"}
        | {"instructions": "Speak with excitement"},
    ),
    qwen(
        "--text T --language English --speaker ryan --response-format pcm",
        {"model": QWEN, "input": TEXT, "voice": "ryan", "response_format": "pcm"}
        | {"language": "English"},
    ),
    qwen(
        "--text T --response-format flac",
        {"model": QWEN, "input": TEXT, "voice": "vivian"} | {"response_format": "flac"},
    ),
    qwen(
        "--text T --task-type VoiceDesign --instructions 'A warm, friendly female voice'",
        {"model": QWEN, "input": TEXT, "voice": "vivian", "response_format": "wav"}
        | {"task_type": "VoiceDesign", "instructions": "A warm, friendly female voice"},
    ),
    qwen(
        "--text T --task-type Base --ref-audio clip.wav --ref-text R",
        {"model": QWEN, "input": TEXT, "voice": "vivian", "response_format": "wav"}
        | {"task_type": "Base", "ref_audio": CLIP, "ref_text": REF_TEXT},
    ),
    qwen(
        "--text T --max-new-tokens 5000",
        {"model": QWEN, "input": TEXT, "voice": "vivian"}
        | {"response_format": "wav", "max_new_tokens": 5000},
    ),
    qwen(
        "--texts 'Hello, how are you?' 'Goodbye, see you later!'",
        {"items": [{"input": TEXT}, {"input": "Goodbye, see you later!"}]}
        | {"response_format": "wav", "voice": "vivian"},
        "batch",
    ),
    qwen_ws("--text T", {}),
    qwen_ws(
        "--text T --stream-audio --response-format pcm",
        {"response_format": "pcm"} | {"stream_audio": True},
    ),
    qwen_ws("--text T --simulate-stt --stt-delay 0.05", {}, words(WS_TEXT)),
    qwen_ws(
        "--text T --speaker Serena --language Chinese",
        {"speaker": "Serena"} | {"language": "Chinese"},
    ),
    qwen_ws(
        "--text T --task-type VoiceDesign --instructions 'A cheerful young female voice'",
        {"task_type": "VoiceDesign", "instructions": "A cheerful young female voice"},
    ),
    cosy("--text T --ref-audio clip.wav --ref-text R", {}),
    cosy(
        "--text T --ref-audio clip.wav --ref-text R --stream",
        {"response_format": "pcm"} | {"stream": True},
        "stream",
    ),
    cosy("--text T --ref-audio clip.wav --ref-text R --seed 42", {"seed": 42}),
    cosy_ws("--text T --ref-audio clip.wav --ref-text R", {}),
    cosy_ws(
        "--text T --ref-audio clip.wav --ref-text R --stream-audio --response-format pcm",
        {"response_format": "pcm", "stream_audio": True},
    ),
    fish("--text T", {}),
    fish("--text T --ref-audio clip.wav --ref-text R", {"ref_audio": CLIP, "ref_text": REF_TEXT}),
    fish(
        "--text T --stream --output out.pcm", {"stream": True, "response_format": "pcm"}, "stream"
    ),
    fish("--text T --response-format mp3", {"response_format": "mp3"}),
    Run(
        "text_to_speech/voxcpm2/openai_speech_client.py --text T --model openbmb/VoxCPM2",
        "voxcpm2",
        "file",
        {"model": "openbmb/VoxCPM2", "input": TEXT, "voice": "default", "response_format": "wav"},
    ),
    Run(
        "text_to_speech/voxcpm2/openai_speech_client.py --text T --model openbmb/VoxCPM2 "
        "--ref-audio clip.wav",
        "voxcpm2",
        "file",
        {"model": "openbmb/VoxCPM2", "input": TEXT, "voice": "default", "response_format": "wav"}
        | {"ref_audio": CLIP},
    ),
    Run(
        "text_to_speech/voxcpm2/openai_speech_client.py --text T (its default --model voxcpm2)",
        "voxcpm2",
        "file",
        {"model": "voxcpm2", "input": TEXT, "voice": "default", "response_format": "wav"},
    ),
    Run(
        "text_to_speech/ming_flash_omni_tts/speech_client.py --text T "
        "--model inclusionAI/Ming-flash-omni-2.0 --instructions 'Calm and warm.'",
        "ming_flash_omni_tts",
        "file",
        {"model": "inclusionAI/Ming-flash-omni-2.0", "input": TEXT, "response_format": "wav"}
        | {"instructions": "Calm and warm."},
    ),
)
"""Every replayed run (27), by client."""


# --------------------------------------------------------------------------- replay


def digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:16]


def with_clip(body: dict, clip: str) -> dict:
    return {k: (clip if v == CLIP else v) for k, v in body.items()}


async def replay(run: Run, url: str, clip: str) -> dict[str, Any]:
    """What the client would end with: ``ok`` (it saved audio), the answer's status or the
    error it printed, and each file it would write (name, size, digest)."""
    body = with_clip(run.body, clip)
    if run.kind == "ws":
        return await replay_ws(run, url, body)
    async with httpx.AsyncClient(trust_env=False, timeout=300) as client:
        path = "/v1/audio/speech/batch" if run.kind == "batch" else "/v1/audio/speech"
        if run.kind == "stream":
            async with client.stream("POST", url + path, json=body) as r:
                data = b"".join([c async for c in r.aiter_bytes()])
                status = r.status_code
        else:
            r = await client.post(url + path, json=body)
            data, status = r.content, r.status_code
    if status != 200:
        return {"ok": False, "status": status, "error": error_text(data)}
    if run.kind == "batch":
        results = json.loads(data)["results"]
        files = {
            f"batch_{x['index']}.{body['response_format']}": base64.b64decode(x["audio_data"])
            for x in results
            if x["status"] == "success"
        }
        failed = [x["error"] for x in results if x["status"] != "success"]
        return {"ok": True, "status": 200, "files": summary(files), "failed": failed}
    out = {"ok": True, "status": 200, "files": summary({"output": data})}
    if data.startswith(b"event: "):  # SSE written as is: its last event carries usage counts
        usage, plain = sse_usage(data)
        out |= {"usage": usage, "files_without_usage": summary({"output": plain})}
    return out


DONE = re.compile(rb"event: speech\.audio\.done\ndata: (.*)\n")


def sse_usage(data: bytes) -> tuple[dict, bytes]:
    """The usage object of an SSE body's ``speech.audio.done`` and the body with it emptied."""
    found = DONE.search(data)
    if not found:
        return {}, data
    done = json.loads(found.group(1))
    usage, done["usage"] = done.get("usage", {}), {}
    line = json.dumps(done, separators=(",", ":")).encode()
    return usage, data[: found.start(1)] + line + data[found.end(1) :]


async def replay_ws(run: Run, url: str, config: dict) -> dict[str, Any]:
    files: dict[str, bytes] = {}
    errors: list[str] = []
    current, index = [], 0
    try:
        async with connect("ws" + url[4:] + "/v1/audio/speech/stream", proxy=None) as ws:
            await ws.send(json.dumps({"type": "session.config", **config}))
            for t in run.texts:
                await ws.send(json.dumps({"type": "input.text", "text": t}))
                if len(run.texts) > 1:
                    await asyncio.sleep(0.05)
            await ws.send(json.dumps({"type": "input.done"}))
            while True:
                msg = await asyncio.wait_for(ws.recv(), 120)
                if isinstance(msg, bytes):
                    current.append(msg)
                    continue
                m = json.loads(msg)
                if m.get("type") == "audio.start":
                    index, current = int(m["sentence_index"]), []
                elif m.get("type") == "audio.done":
                    files[f"sentence_{index:03d}.{run.suffix}"] = b"".join(current)
                elif m.get("type") == "session.done":
                    return {"ok": True, "files": summary(files), "errors": errors}
                elif m.get("type") == "error":
                    errors.append(m.get("message", ""))
    except Exception as e:  # noqa: BLE001 - the client crashes the same way
        return {"ok": False, "files": summary(files), "errors": errors, "crash": type(e).__name__}


def summary(files: dict[str, bytes]) -> dict[str, list]:
    return {name: [len(data), digest(data)] for name, data in sorted(files.items())}


def error_text(data: bytes) -> str:
    try:
        return str(json.loads(data)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return data[:200].decode(errors="replace")


def compare(a: dict, b: dict) -> tuple[bool, str]:
    """(runs the same, files byte-identical): the same outcome (saved or not, the same status,
    error words and file names and sizes, SSE usage counts aside), and whether every file's bytes
    are the same: ``yes``, ``usage`` (only an SSE body's usage counts differ: listenlab's CPU
    voice counts no tokens, docs/api.md), ``NO`` or ``no files``."""

    def shape(r: dict) -> dict:
        files = r.get("files_without_usage") or r.get("files") or {}
        sizes = {n: size for n, (size, _d) in files.items()}
        drop = ("files", "files_without_usage", "usage")
        return {k: v for k, v in r.items() if k not in drop} | {"files": sizes}

    same = shape(a) == shape(b)
    if not a.get("files") or not any(size for size, _d in a["files"].values()):
        return same, "no files"
    if same and a["files"] == b.get("files"):
        return same, "yes"
    if same and a.get("files_without_usage") == b.get("files_without_usage") is not None:
        return same, "usage"
    return same, "NO"


__all__ = ["RUNS", "Run", "compare", "replay"]
