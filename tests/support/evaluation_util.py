"""Test and benchmark helpers for the evaluation area: texts, and defects injected into real takes.

The defects imitate the streaming bugs of ``vllm-omni-speech-api.md`` §10 on real Piper audio.
The detector (``evaluation.glitches``) never imports this module: it has to find the defects
from the signal and the timeline alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np

from backends.base import SpeechRequest
from evaluation.takes import ChunkRecord, Take, record

TEXTS = [
    "The quick brown fox jumps over the lazy dog, and then it runs away into the forest.",
    "Please call Stella. Ask her to bring these things with her from the store: six spoons of fresh snow "
    "peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob.",
    "We also need a small plastic snake and a big toy frog for the kids. She can scoop these things into "
    "three red bags, and we will go meet her Wednesday at the train station.",
    "Is it going to rain tomorrow? I honestly have no idea, but the forecast says there is a seventy "
    "percent chance.",
    "Numbers like 3.14159, 2048 and 1,000,000 are read aloud differently by every engine.",
    "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow. The rainbow "
    "is a division of white light into many beautiful colors.",
    "No, not that one; the other one, on the left.",
    "She sells sea shells by the sea shore, and the shells she sells are sea shells for sure.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity.",
    "Turn left at the second traffic light, then continue straight for about two kilometres until you "
    "reach the old bridge.",
    "Wow! That was incredible. Can you do it again?",
    "The committee will meet on Thursday at half past nine to discuss the budget for the coming fiscal "
    "year and to review the proposals submitted by the regional offices",
    "I'm sorry, Dave. I'm afraid I can't do that.",
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived "
    "in Liberty, and dedicated to the proposition that all men are created equal.",
    "The temperature dropped below freezing overnight; by morning, the lake was covered with a thin "
    "sheet of ice.",
    "Can you hear me now? Good. Let's begin the test with a short phrase, followed by a much longer one "
    "that keeps going without any pause at all for quite a while.",
    "Bananas, apples, oranges, grapes, pears, plums, cherries and strawberries were all on sale at the "
    "market today.",
    "To be, or not to be, that is the question: whether it is nobler in the mind to suffer the slings "
    "and arrows of outrageous fortune.",
    "The train to Boston departs from platform nine at seven forty five. Passengers are reminded to keep "
    "their belongings with them at all times.",
    "He said, quote, I will be back before dinner, unquote, and then he left without another word.",
    "Photosynthesis converts light energy into chemical energy, which is stored in glucose molecules "
    "inside the plant cells.",
    "Good morning everyone, and welcome to today's session on streaming speech synthesis.",
    "Yes.",
    "OK, thanks.",
]


def synthesize(backend, texts, speed: float = 1.0) -> list[Take]:
    """Record real takes (sequentially, so arrival times are those of an unloaded voice)."""

    async def go():
        return [await record(backend, SpeechRequest(text=t, speed=speed)) for t in texts]

    return asyncio.run(go())


# --------------------------------------------------------------------------- rebuilding takes


def rebuild(take: Take, pieces: list[np.ndarray], arrivals: list[float], **changes) -> Take:
    """A new take from audio pieces (one chunk each) and their arrival times (ms)."""
    chunks, off = [], 0
    for i, (p, a) in enumerate(zip(pieces, arrivals, strict=True)):
        chunks.append(ChunkRecord(i, float(a), off, len(p)))
        off += len(p)
    audio = np.concatenate(pieces).reshape(-1, take.channels) if pieces else take.audio[:0]
    total = max(take.total_ms, arrivals[-1] if arrivals else 0.0)
    return replace(take, audio=audio, chunks=chunks, total_ms=total, **changes)


def pieces_of(take: Take) -> tuple[list[np.ndarray], list[float]]:
    return [take.audio[c.offset : c.offset + c.frames].copy() for c in take.chunks], [
        c.arrival_ms for c in take.chunks
    ]


def rechunk(take: Take, chunk_s: float = 0.5) -> Take:
    """Cut a take into fixed-length chunks, as codec-frame streaming does (seams mid-speech).

    A chunk arrives when the original chunk holding its last sample arrived.
    """
    n = take.frames
    size = max(1, int(chunk_s * take.sample_rate))
    ends = np.array([c.offset + c.frames for c in take.chunks])
    arr = np.array([c.arrival_ms for c in take.chunks])
    pieces, arrivals = [], []
    for s in range(0, n, size):
        e = min(n, s + size)
        pieces.append(take.audio[s:e].copy())
        arrivals.append(float(arr[min(np.searchsorted(ends, e), len(arr) - 1)]))
    return rebuild(take, pieces, arrivals)


def seam_s(take: Take, k: int) -> float:
    return take.boundaries[k] / take.sample_rate


# --------------------------------------------------------------------------- defects


def inject_click(take: Take, k: int, style: str = "step", amp: float = 0.15) -> Take:
    """A discontinuity at seam ``k``.

    ``step``: the next chunk starts with a DC offset that decays over ~5 ms (chunks decoded
    independently). ``impulse``: a 1 ms pulse. ``drop``: 3 ms missing right after the seam
    (a phase jump when the seam is mid-speech).
    """
    pieces, arr = pieces_of(take)
    nxt = pieces[k + 1].astype(np.float64)
    sr = take.sample_rate
    t = np.arange(len(nxt))[:, None]
    if style == "step":
        nxt += amp * 32767 * np.exp(-t / (0.005 * sr))
    elif style == "impulse":
        nxt += amp * 32767 * np.exp(-t / (0.0005 * sr)) * (t < 0.002 * sr)
    elif style == "drop":
        nxt = nxt[int(0.003 * sr) :]
    else:
        raise ValueError(style)
    pieces[k + 1] = np.clip(nxt, -32768, 32767).astype(np.int16)
    return rebuild(take, pieces, arr)


def inject_replay(take: Take, k: int, mode: str = "restart", gain: float = 1.0) -> Take:
    """Audio already sent is sent again as a new chunk after seam ``k``.

    ``restart``: everything so far (cumulative output treated as a delta); ``chunk``: chunk ``k``
    again. ``gain`` changes the level of the repeated audio.
    """
    pieces, arr = pieces_of(take)
    b = take.boundaries[k]
    src = take.audio[:b] if mode == "restart" else pieces[k]
    dup = np.clip(src.astype(np.float64) * gain, -32768, 32767).astype(np.int16)
    return rebuild(
        take, pieces[: k + 1] + [dup] + pieces[k + 1 :], arr[: k + 1] + [arr[k]] + arr[k + 1 :]
    )


def inject_double(take: Take) -> Take:
    """The whole generation twice in one stream (#3326)."""
    pieces, arr = pieces_of(take)
    last = arr[-1]
    return rebuild(take, pieces + [p.copy() for p in pieces], arr + [a + last for a in arr])


def inject_gap(take: Take, k: int, gap_s: float) -> Take:
    """Digital silence inserted at seam ``k`` (at the start of chunk k+1)."""
    pieces, arr = pieces_of(take)
    z = np.zeros((int(gap_s * take.sample_rate), take.channels), np.int16)
    pieces[k + 1] = np.concatenate([z, pieces[k + 1]])
    return rebuild(take, pieces, arr)


def inject_stall(take: Take, k: int, stall_ms: float) -> Take:
    """The server pauses before chunk k+1: it and all later chunks arrive ``stall_ms`` later."""
    pieces, arr = pieces_of(take)
    return rebuild(take, pieces, [a + (stall_ms if i > k else 0.0) for i, a in enumerate(arr)])


def inject_truncation(take: Take, keep: float = 0.5) -> Take:
    """The stream silently stops after ``keep`` of the audio (cut mid-chunk), status still ok."""
    n = int(take.frames * keep)
    pieces, arr = pieces_of(take)
    out, a2, off = [], [], 0
    for p, a in zip(pieces, arr, strict=True):
        if off >= n:
            break
        out.append(p[: n - off])
        a2.append(a)
        off += len(p)
    return rebuild(take, out, a2)


def inject_crosstalk(take: Take, other: Take, onset_s: float = 1.2) -> Take:
    """The first ``onset_s`` are another request's audio (shared state across requests)."""
    n = int(onset_s * take.sample_rate)
    audio = take.audio.copy()
    m = min(n, other.frames, take.frames)
    audio[:m] = other.audio[:m]
    return replace(take, audio=audio)


def with_timeline(take: Take, lead_ms: float = 100.0, rtf: float = 0.9) -> Take:
    """The same audio with a synthetic arrival timeline: chunk i arrives at
    ``lead_ms + rtf * start_of_chunk_i`` (a steady engine at that real-time factor, never late)."""
    sr = take.sample_rate
    chunks = [replace(c, arrival_ms=lead_ms + rtf * c.offset * 1000 / sr) for c in take.chunks]
    return replace(take, chunks=chunks)


# --------------------------------------------------------------------------- wire-profile takes


def on_profile(
    take: Take, profile, pace: float = 1.5, jitter_ms: float = 0.0, seed: int = 0
) -> Take:
    """The take as a vLLM-Omni model's server would stream it: resampled to the profile's rate
    and cut to its codec-frame chunk schedule (80 ms first chunks and all), with arrival times
    of a server at ``pace`` x real time plus up to ``jitter_ms`` of random lateness."""
    import soxr

    sr = profile.sample_rate
    x = take.audio[:, 0].astype(np.float32)
    if sr != take.sample_rate:
        x = soxr.resample(x, take.sample_rate, sr)
    pcm = np.clip(np.round(x), -32768, 32767).astype(np.int16)[:, None]
    sizes = profile.chunk_sizes(len(pcm))
    ends = np.cumsum(sizes)
    rng = np.random.default_rng(seed)
    due = ends / sr / pace * 1000 if pace else 0.9 * (ends - np.asarray(sizes)) / sr * 1000
    arr = 150.0 + due + rng.uniform(0, jitter_ms, len(sizes))
    arr = np.maximum.accumulate(arr)
    pieces = np.split(pcm, ends[:-1])
    out = replace(take, sample_rate=sr, channels=1, audio=pcm)
    return rebuild(out, pieces, [float(a) for a in arr])


def insert_chunks(take: Take, k: int, audio: np.ndarray, chunk: int) -> Take:
    """Insert ``audio`` at seam ``k`` as new chunks of ``chunk`` frames (as a server that sends
    it would), arriving with chunk k."""
    pieces, arr = pieces_of(take)
    new = [audio[i : i + chunk] for i in range(0, len(audio), max(1, chunk))]
    return rebuild(
        take,
        pieces[: k + 1] + new + pieces[k + 1 :],
        arr[: k + 1] + [arr[k]] * len(new) + arr[k + 1 :],
    )


def inject_quiet_gap(take: Take, k: int, gap_s: float, level_dbfs: float | None, seed: int = 0):
    """Near-silence inserted at seam ``k``: zeros (``level_dbfs=None``) or white noise at that
    RMS level (a client padding a stall with low noise, or a decoder warming up)."""
    n = int(gap_s * take.sample_rate)
    if level_dbfs is None:
        z = np.zeros((n, take.channels), np.int16)
    else:
        rng = np.random.default_rng(seed)
        z = rng.normal(0, 32767 * 10 ** (level_dbfs / 20), (n, take.channels))
        z = np.clip(np.round(z), -32768, 32767).astype(np.int16)
    pieces, arr = pieces_of(take)
    pieces[k + 1] = np.concatenate([z, pieces[k + 1]])
    return rebuild(take, pieces, arr)


def inject_sample_slip(take: Take, k: int, samples: int) -> Take:
    """``samples`` > 0 dropped right after seam ``k``; < 0: that many samples sent twice."""
    pieces, arr = pieces_of(take)
    if samples > 0:
        pieces[k + 1] = pieces[k + 1][samples:]
    else:
        pieces[k + 1] = np.concatenate([pieces[k][samples:], pieces[k + 1]])
    return rebuild(take, pieces, arr)
