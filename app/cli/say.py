"""``listenlab say``: one take from the command line (:func:`evaluation.takes.say`).

A reference clip (``--ref-audio``, with ``--ref-text``) goes through the bounded decoder before
anything is generated: the backend gets it as mono 16-bit WAV, as ``listenlab api`` hands one on.
What a stand-in backend did not do (a CPU voice for a GPU model: "clone not applied") is printed
and kept in the take's sidecar (``meta.stand_in``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "say",
        help="stream text through a backend, save the audio and the take",
        description="Stream TEXT through a backend and print its warm TTFA, RTF and chunk "
        "count (model loading is timed separately).",
    )
    p.add_argument("text", metavar="TEXT", help="what to say (quote it)")
    p.add_argument(
        "--backend", default="piper", metavar="SPEC", help="backend spec (default: piper)"
    )
    p.add_argument("--voice", help="voice name (default: the backend's default voice)")
    p.add_argument(
        "--language", help="language hint, e.g. en or English (if the backend takes one)"
    )
    p.add_argument("--instructions", help="style instructions (if the backend takes them)")
    p.add_argument("--speed", type=float, help="speaking rate, 0.25-4.0 (default 1.0)")
    p.add_argument("--seed", type=int, help="sampling seed (if the backend takes one)")
    p.add_argument(
        "--ref-audio",
        metavar="CLIP",
        help="reference clip to clone (wav, flac, mp3, ogg; 1-30 s), for cloning models",
    )
    p.add_argument("--ref-text", metavar="TEXT", help="what the reference clip says")
    p.add_argument(
        "-o",
        "--out",
        metavar="PATH",
        help="audio path ending in .wav or .flac; a .take.json sidecar is written beside it",
    )
    p.add_argument("--json", action="store_true", help="print the take summary as JSON")
    p.set_defaults(func=_run_say)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def reference_clip(path: str) -> bytes:
    """The clip at ``path`` as mono 16-bit WAV: size-bounded before it is read, decoded by the
    one bounded decoder, and 1-30 s long (vLLM-Omni's rule); a typed error says what is wrong."""
    from backends.audio import MAX_CLIP_BYTES, UnreadableAudio, decode_mono, encode_audio
    from backends.errors import InvalidRequest
    from backends.vllm_omni.models.base import REF_AUDIO_SECONDS

    p = Path(path)
    if not p.is_file():
        raise InvalidRequest(f"--ref-audio: no file at {path}")
    if p.stat().st_size > MAX_CLIP_BYTES:
        raise InvalidRequest(
            f"--ref-audio: {path} is {p.stat().st_size / 2**20:.1f} MiB; the limit is "
            f"{MAX_CLIP_BYTES // 2**20} MiB"
        )
    try:
        mono, sr, _fmt = decode_mono(p.read_bytes(), "the reference clip")
    except UnreadableAudio as e:
        raise InvalidRequest(f"--ref-audio: {path} is not a readable audio file: {e.why}") from None
    lo, hi = REF_AUDIO_SECONDS
    seconds = len(mono) / sr if sr else 0.0
    if not lo <= seconds <= hi:
        raise InvalidRequest(
            f"--ref-audio: {path} is {seconds:.1f} s; a reference clip is {lo:.0f}-{hi:.0f} s"
        )
    return encode_audio(mono, sr)


async def speak(args: argparse.Namespace, ref_audio: bytes | None):
    """The take, with the backend's stand-in note in its meta; saved when ``--out`` is set."""
    from backends.base import SpeechRequest
    from backends.registry import load_backend
    from evaluation.takes import say

    fields = {
        "voice": args.voice,
        "language": args.language,
        "instructions": args.instructions,
        "speed": args.speed,
        "seed": args.seed,
        "ref_audio": ref_audio,
        "ref_text": args.ref_text,
    }
    backend = load_backend(args.backend)
    try:
        take = await say(args.text, backend=backend, out=args.out, **fields)
        request = SpeechRequest(args.text, **{k: v for k, v in fields.items() if v is not None})
        note = backend.note(request)
        if note:
            take.meta["stand_in"] = note
            if args.out:
                take.save(args.out)  # the sidecar again, with the note
        return take
    finally:
        await backend.aclose()


def _run_say(args: argparse.Namespace) -> int:
    from evaluation.takes import check_audio_path

    if args.out:
        check_audio_path(args.out)  # before the model loads: a wrong suffix fails at once
    ref_audio = reference_clip(args.ref_audio) if args.ref_audio else None
    take = asyncio.run(speak(args, ref_audio))
    s = take.summary()
    load_ms = take.meta.get("load_ms")
    s["load_ms"] = None if load_ms is None else round(load_ms, 1)
    note = take.meta.get("stand_in")
    if note:
        s["stand_in"] = note
    if args.json:
        print(json.dumps(s))
    else:
        load = f"load {load_ms:.0f} ms, then " if load_ms is not None else ""
        print(
            f"{load}TTFA {s['ttfa_ms']:.0f} ms (warm)  RTF {s['rtf']:.3f}  "
            f"{_plural(s['chunks'], 'chunk')}  "
            f"{s['duration_s']:.2f} s at {s['sample_rate']} Hz x{s['channels']}"
            + (f"  -> {args.out}" if args.out else "")
        )
        if note:
            print(f"stand-in: {note}")
    return 0
