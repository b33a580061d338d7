"""Automatic glitch detection on a streamed take: the signatures of streaming-TTS bugs.

Input: a :class:`~evaluation.takes.Take` (audio, chunk boundaries, arrival times) and,
optionally, a *reference* take of the same request (non-streamed, or streamed solo with no
load). Output: :class:`Finding` objects, each with a kind, a time, the nearest chunk seam, a
severity and the evidence behind it. The detector only looks at the signal and the timeline, so
it works the same on real vLLM-Omni streams as on anything else.

Kinds (thresholds live in :class:`DetectorConfig`; the README lists them):

``click``
    A waveform discontinuity at a seam. The statistic is how badly short-term linear prediction
    fails at the seam, from both sides (fit on the 12 ms before, predict forward; fit on the
    12 ms after, predict backward), over the in-window prediction error. Speech is predictable
    sample to sample; a seam that jumps is not, in either direction. A seam is flagged when it
    scores above ``click_min_score`` and also above ``click_ref_factor`` times the 99.9th
    percentile of the same statistic at random non-seam points of the same take.
``replay``
    The audio starting at a seam repeats audio heard earlier (cumulative-vs-delta bugs, restart
    from the beginning, doubled generations). Found by normalised cross-correlation (level
    independent), searched at a low rate and confirmed at the full rate.
``gap``
    A silence at a seam that the speech does not explain: the speech on both sides is cut
    abruptly, or the pause is longer than any natural pause, or (with a reference) it is longer
    than the aligned pause in the reference.
``underrun``
    Playback of the arrival timeline is simulated with a prebuffer; every stall is reported with
    its length.
``truncation``
    The take failed or was cancelled, or is far shorter than the reference or than its text
    predicts, or ends abruptly mid-speech.
``duration``
    The take is much longer than the reference (about 2x: duplicated generations) or than its
    text predicts (runaway generation).
``crosstalk``
    With a reference: the onset's spectra do not match the reference's onset although the rest
    of the take does (another request's voice or content at the start).

Everything is vectorised with numpy/scipy: a 10 s take is analysed in a few milliseconds.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import fft as sp_fft

from evaluation.playout import POLICY, PlayoutResult
from evaluation.playout import simulate as simulate_start_rule
from evaluation.takes import Take

KINDS = ("click", "replay", "gap", "underrun", "truncation", "duration", "crosstalk")
DETECTOR_VERSION = "glitches/1"


@dataclass(frozen=True)
class DetectorConfig:
    """Every threshold the detector uses. Defaults are tuned so clean Piper takes are silent."""

    # -- levels
    frame_ms: float = 10.0
    """Analysis frame for levels and silences."""
    silence_rel_db: float = -40.0
    """A frame is silent below the take's speech level (95th percentile frame level) plus this."""
    silence_floor_db: float = -60.0
    """... and always below this absolute level (dBFS)."""

    # -- click
    click_min_score: float = 7.0
    """Prediction-error ratio at a seam (both directions) that counts as a discontinuity."""
    click_ref_factor: float = 1.8
    """The seam must also beat this times the 99.9th percentile at non-seam points."""
    click_ref_points: int = 1000
    click_min_amp: float = 0.01
    """Smallest jump (full scale = 1) worth reporting (-40 dBFS)."""
    click_window_ms: float = 12.0
    click_order: int = 16
    click_search_samples: int = 1
    """A seam's discontinuity may sit this many samples either side of the recorded offset."""

    # -- replay
    replay_rate_hz: int = 2000
    """Search rate (block means); candidates are confirmed at the full rate."""
    replay_query_s: float = 0.6
    replay_min_query_s: float = 0.15
    replay_min_ncc: float = 0.97
    """Normalised correlation (at the search rate and again at the full rate) to call a repeat."""
    replay_coarse_ncc: float = 0.5
    """Threshold at the search rate for an envelope match to be confirmed at the full rate."""
    replay_envelope_ncc: float = 0.85
    """Pre-check on the 10 ms level envelope; seams below it are not searched further."""
    replay_min_active_s: float = 0.1
    """The query must hold at least this much non-silent audio (silence matches silence)."""
    replay_max_lookback_s: float = 120.0
    replay_text_factor: float = 1.3
    """Texts that say clauses twice: a repeat whose source and copy sit at the two occurrences
    (mapped by the take's speaking rate) and that is no longer than this times the repeated
    words (+0.3 s) is the content. With a reference, so is a repeat the reference has."""
    replay_block_s: float = 0.1
    """Block length used to measure how long a repeat goes on."""

    # -- gap
    gap_min_s: float = 0.15
    gap_long_s: float = 1.0
    """A pause at a seam at least this long (divided by the request's speed when < 1) is a gap."""
    gap_edge_db: float = -15.0
    """'Abrupt' stop: the 20 ms before the silence are within this of the speech level (natural
    pauses fade out: on Piper their last 20 ms sit 24 dB or more below it)."""
    gap_extra_s: float = 0.25
    """With a reference: a seam pause this much longer than the aligned reference pause ..."""
    gap_extra_ratio: float = 1.0
    """... and longer by at least this fraction of it (independent renderings of one text
    differ in pause length by up to ~80 %)."""
    gap_align_tol_s: float = 0.5
    """Reference pauses this close (in speech time or in time) count as the same pause."""
    dropout_min_s: float = 0.04
    """A seam followed by at least this much near-silence, cut in from speech, is a gap (short
    quiet gaps: a lost chunk or a stall padded with zeros or low noise)."""
    dropout_drop_db: float = 20.0
    """'Cut in': the 5 ms after the seam are this far below the 5 ms before it, and stay there."""
    dropout_speech_db: float = -25.0
    """... and the 5 ms before the seam are within this of the speech level (audible)."""

    # -- underrun
    prebuffer_ms: float | None = None
    """The simulated player. ``None``: listenlab's own player, i.e. its start rule
    (``evaluation.playout``: starts when the predicted buffer never runs dry, resumes by the same
    rule), so a finding means a listener of the Playground would hear the stall. A number: a
    simple player that starts once this much audio is in and resumes as soon as a late chunk
    arrives (``--prebuffer-ms 200``, how a naive client would play the stream)."""
    sec_per_char: float | None = None
    """For the start rule: seconds of audio per character of the text (None: its default)."""
    rate_prior: float | None = None
    """For the start rule: the backend's generation rate learnt from past takes (audio seconds
    per second; None: no history, so the player waits for a second chunk to measure it)."""
    underrun_min_ms: float = 20.0

    # -- truncation / duration
    chars_per_s: float = 15.0
    """Speaking rate at speed 1 used to predict duration from text (Piper joe: ~17)."""
    overhead_s: float = 0.5
    """Leading + trailing silence added to the text prediction."""
    min_predicted_s: float = 3.0
    """Text-based checks only when the text predicts at least this much audio."""
    truncation_ratio: float = 0.7
    """Shorter than this fraction of the reference (active speech time) is truncation."""
    truncation_text_ratio: float = 0.55
    tail_abrupt_db: float = -30.0
    """Last 20 ms within this of speech level: the take stops mid-sound (every TTS voice ends
    in at least ~50 ms of silence; Piper: 60 ms or more)."""
    duration_ratio: float = 1.6
    """Longer than this multiple of the reference: duplicated output."""
    duration_text_ratio: float = 1.5
    duration_min_excess_s: float = 1.0

    # -- crosstalk
    crosstalk_onset_s: float = 1.2
    crosstalk_min_dist: float = 0.15
    """DTW cost (cosine distance of log band energies per step) between the take's first
    ``crosstalk_onset_s`` of active speech and as many active frames of the reference that
    counts as foreign audio (same text and voice: <= 0.1 on Piper's dev split)."""
    crosstalk_voice_dist: float = 0.6
    """RMS difference (natural-log units per band) between the onset's long-term spectrum and
    that of the reference's frames saying the same words, that counts as another voice (same
    voice: <= 0.36 on Piper's dev split with 7 independent references per text)."""
    crosstalk_ratio: float = 2.0
    """... and the content distance must be this many times the same distance after the onset."""
    crosstalk_voice_ratio: float = 1.5
    """... and the voice distance this many times its value after the onset (the absolute
    threshold already keeps same-voice pairs out; 2x missed the same words in another voice
    now and then: onset 0.78 against 0.72 after it)."""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DetectorConfig:
        known = {f.name for f in fields(cls)}
        bad = set(d) - known
        if bad:
            raise ValueError(f"unknown detector setting(s): {', '.join(sorted(bad))}")
        base = cls()

        def conv(k: str, v: Any) -> Any:
            if k in _OPTIONAL_FLOATS:  # None (the default) or a number
                none = v is None or str(v).strip().lower() in {"", "none", "rule"}
                return None if none else float(v)
            return type(getattr(base, k))(v)

        return replace(base, **{k: conv(k, v) for k, v in d.items()})


_OPTIONAL_FLOATS = frozenset({"prebuffer_ms", "sec_per_char", "rate_prior"})


@dataclass(frozen=True)
class Finding:
    kind: str
    time_s: float
    """Where in the take's audio (seconds from its start)."""
    boundary_index: int | None
    """Nearest seam as a 0-based index into ``Take.boundaries`` (what the store keeps);
    people read :attr:`seam`."""
    severity: float
    """How far past its threshold (1.0 = just at it)."""
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def seam(self) -> int | None:
        """The seam as numbered everywhere a person reads it: seam k is the start of chunk k
        (chunks from 0, so seams from 1), i.e. ``boundary_index + 1``."""
        return None if self.boundary_index is None else self.boundary_index + 1

    def __str__(self) -> str:
        b = "-" if self.seam is None else str(self.seam)
        ev = ", ".join(f"{k}={_fmt(v)}" for k, v in self.evidence.items())
        return (
            f"{self.time_s:8.3f}s  {self.kind:<10} seam {b:>3}  severity {self.severity:5.2f}  {ev}"
        )


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


@dataclass(frozen=True)
class Stall:
    position_ms: float
    """Audio time at which playback stopped (the start of the late chunk)."""
    wall_ms: float
    """When it stopped, from the request."""
    stall_ms: float
    chunk_index: int


@dataclass(frozen=True)
class Check:
    """One check of the detector and whether it ran on this take (and why not)."""

    name: str
    ran: bool
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ran": self.ran, "why": self.why}


@dataclass(frozen=True)
class Analysis:
    findings: list[Finding]
    metrics: dict[str, Any]
    """Per-take columns (listening-tests.md §6.3): duration, chunk count, max silence, ..."""
    checks: list[Check] = field(default_factory=list)
    """Which checks ran and which were skipped (no text, no reference, no timeline)."""


# --------------------------------------------------------------------------- helpers


class _Signal:
    """Mono audio plus frame levels, computed once per take. The float32 samples (``x``) are
    made on first use: a reference often needs only its levels and a few frames, and a fresh
    take-sized array costs as much in new memory pages as in arithmetic."""

    def __init__(self, take: Take, cfg: DetectorConfig):
        self.sr = int(take.sample_rate) or 1
        a = take.audio
        self._x: np.ndarray | None = None
        if a.ndim == 2 and a.shape[1] > 1:
            self._x = a.astype(np.float32).mean(axis=1) * _SCALE
            self.raw, self.raw_scale = self._x, np.float32(1)
        else:
            self.raw, self.raw_scale = a.reshape(-1), _SCALE
        self.n = len(self.raw)
        self.hop = max(1, int(round(self.sr * cfg.frame_ms / 1000)))
        nf = self.n // self.hop
        ms = _frame_energies(self.raw[: nf * self.hop].reshape(nf, self.hop), self.raw_scale)
        self.db = 10 * np.log10(ms + 1e-12)
        self.level = _percentile(self.db, 95) if nf else -120.0
        # silent: below the speech level + silence_rel_db, and always below the absolute floor
        self.thresh = max(self.level + cfg.silence_rel_db, cfg.silence_floor_db)
        self.silent = self.db < self.thresh
        self.boundaries = np.asarray(take.boundaries, dtype=np.int64)
        self.frame_s = self.hop / self.sr
        self._runs: np.ndarray | None = None

    @property
    def x(self) -> np.ndarray:
        """The samples as float32 in [-1, 1] (one pass, one array)."""
        if self._x is None:
            self._x = np.multiply(self.raw, self.raw_scale, dtype=np.float32)
        return self._x

    def silent_runs(self) -> np.ndarray:
        """``(start_frame, end_frame)`` of every silent run (end exclusive)."""
        if self._runs is None:
            d = np.diff(np.r_[0, self.silent.astype(np.int8), 0])
            self._runs = np.stack([np.flatnonzero(d == 1), np.flatnonzero(d == -1)], axis=1)
        return self._runs

    def active_s(self) -> float:
        return float((~self.silent).sum()) * self.frame_s

    def first_active_frame(self) -> int:
        a = np.flatnonzero(~self.silent)
        return int(a[0]) if len(a) else 0


_SCALE = np.float32(1 / 32768)


def _frame_energies(fr: np.ndarray, scale: np.float32, block: int = 2048) -> np.ndarray:
    """Mean square of each row of ``fr`` (int16 or float32 samples) times ``scale``, through
    float32 blocks of ``block`` frames: the same values as on a float32 copy, without making
    one."""
    out = np.empty(len(fr))
    for k in range(0, len(fr), block):
        f = np.multiply(fr[k : k + block], scale, dtype=np.float32)
        out[k : k + block] = np.einsum("ij,ij->i", f, f)
    return out / fr.shape[1] if fr.shape[1] else out


def _percentile(a: np.ndarray, q: float) -> float:
    """``np.percentile(a, q)`` (linear interpolation) by partial sort: ten times faster on the
    few hundred frame levels of a take, where np.percentile's overhead dominates."""
    h = (len(a) - 1) * q / 100
    lo = int(np.floor(h))
    hi = min(lo + 1, len(a) - 1)
    part = np.partition(a, (lo, hi))
    return float(part[lo] + (h - lo) * (part[hi] - part[lo]))


def _nearest(boundaries_s: np.ndarray, t: float) -> tuple[int | None, float | None]:
    if not len(boundaries_s):
        return None, None
    i = int(np.argmin(np.abs(boundaries_s - t)))
    return i, float(t - boundaries_s[i])


# --------------------------------------------------------------------------- click


def _lpc_scores(
    x: np.ndarray,
    pts: np.ndarray,
    w: int,
    p: int,
    floor: float,
    search: int = 0,
    screen: tuple[float, float] | None = None,
    top: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric short-term prediction failure at each point ``t`` (a seam between t-1 and t),
    and at the ``search`` samples either side of it.

    Returns ``(score, jump)``, each ``(len(pts), 2 * search + 1)``: score = min(forward,
    backward) residual over in-window residual RMS; jump = the smaller of the two absolute
    residuals (what would be heard). One predictor per side and point is fit on the ``w + p``
    samples before the earliest (forward) or after the latest (backward) searched offset, and
    used for all offsets (a one-sample shift of the fit window changes nothing that matters).
    With ``screen = (min_score, min_jump)`` the backward side is computed only where the
    forward side reaches both (elsewhere the minimum cannot; the forward values are returned
    there, an upper bound that is still below the screen). With ``top = k`` only the k largest
    scores are exact (the backward side is computed in order of the forward score until no
    other point can reach them); the rest are upper bounds below them.
    """
    n_off = 2 * search + 1
    if not len(pts):
        return np.zeros((0, n_off)), np.zeros((0, n_off))
    k = 2
    win = np.hanning(w + p).astype(np.float32)
    lags = np.abs(np.arange(p)[:, None] - np.arange(p)[None, :])
    nfft = sp_fft.next_fast_len(2 * (w + p), real=True)
    off = np.arange(n_off)  # offset index o: point pts + o - search
    lo = w // 2  # residuals are needed from here on (the in-window RMS) ...
    span = w + 2 * search + k - lo  # ... to the last searched point + k

    def one_side(seg: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``seg`` (n, w + p + 2 * search + k); ``pos`` the residual index of each offset."""
        # float32 transforms and residuals (twice as fast; the conditioning below is 1e-4,
        # far above float32's 1e-7), the normal equations solved in float64
        spec = sp_fft.rfft(seg[:, : w + p] * win, nfft, axis=1)
        r = sp_fft.irfft(spec.real**2 + spec.imag**2, nfft, axis=1)[:, : p + 1]
        r = r.astype(np.float64)
        r[:, 0] = r[:, 0] * (1 + 1e-4) + 1e-10  # a little white-noise conditioning
        a = np.linalg.solve(r[:, lags], r[:, 1:, None])[:, :, 0].astype(np.float32)
        lagged = sliding_window_view(seg[:, lo:], p + 1, axis=1)[:, :span]  # x[j-p .. j]
        e = lagged[:, :, -1] - np.einsum("nwk,nk->nw", lagged[:, :, -2::-1], a)
        e2 = np.pad(np.cumsum(np.square(e, dtype=np.float64), axis=1), ((0, 0), (1, 0)))
        rows = np.arange(len(seg))[:, None]
        # in-window residual RMS over the w/2 samples before each offset's point
        sig = np.sqrt((e2[rows, pos - lo] - e2[rows, pos - lo - w // 2]) / (w // 2))
        ae = np.abs(e)
        out = np.maximum(ae[rows, pos - lo], ae[rows, pos - lo + 1])
        return out / np.maximum(sig, floor), out

    n_seg = w + p + 2 * search + k
    fwd = x[pts[:, None] - search - w - p + np.arange(n_seg)[None, :]]
    # residual index (segment index - p) of offset o's point: forward x[t], backward x[t-1]
    sf_, jf = one_side(fwd, (w + off)[None, :])

    def backward(todo: np.ndarray) -> None:
        if len(todo):
            bwd = x[pts[todo, None] + search + w + p - 1 - np.arange(n_seg)[None, :]]
            sb_, jb = one_side(bwd, (w + 2 * search - off)[None, :])
            sf_[todo] = np.minimum(sf_[todo], sb_)
            jf[todo] = np.minimum(jf[todo], jb)

    if screen is not None:
        backward(np.flatnonzero(((sf_ >= screen[0]) & (jf >= screen[1])).any(axis=1)))
    elif top is not None:
        _backward_top(sf_, backward, top)
    else:
        backward(np.arange(len(pts)))
    return sf_, jf


def _backward_top(sf_: np.ndarray, backward: Callable[[np.ndarray], None], top: int) -> None:
    """Run ``backward`` on points in order of their forward score until no other point can
    reach the ``top`` largest scores (``sf_`` is updated in place)."""
    order = np.argsort(-sf_.max(axis=1), kind="stable")
    done, m = 0, min(len(sf_), 8 * top)
    while True:
        backward(order[done:m])
        done = m
        kth = np.sort(sf_[order[:m]].max(axis=1))[-min(top, m)]
        if m == len(sf_) or sf_[order[m]].max() <= kth:
            break
        m = min(len(sf_), 4 * m)


def _clicks(s: _Signal, cfg: DetectorConfig) -> list[Finding]:
    w = max(32, int(s.sr * cfg.click_window_ms / 1000))
    p = cfg.click_order
    margin = w + p + 4 + cfg.click_search_samples
    b = s.boundaries[(s.boundaries >= margin) & (s.boundaries <= s.n - margin)]
    if not len(b):
        return []
    floor = max(3e-4, 10 ** ((s.level - 60) / 20))
    off = np.arange(-cfg.click_search_samples, cfg.click_search_samples + 1)
    # the backward side only where the forward side already fails (most seams never need it)
    score, jump = _lpc_scores(
        s.x, b, w, p, floor, cfg.click_search_samples, (cfg.click_min_score, cfg.click_min_amp)
    )
    best = score.argmax(axis=1)
    bs = score[np.arange(len(b)), best]
    bj = jump[np.arange(len(b)), best]
    cand = (bs >= cfg.click_min_score) & (bj >= cfg.click_min_amp)
    if not cand.any():
        return []
    # Only now (rarely) look at the same statistic away from the seams of this take.
    rng = np.random.default_rng(s.n)
    ref = rng.integers(margin, s.n - margin, size=cfg.click_ref_points * 2)
    near = np.abs(ref[:, None] - s.boundaries[None, :]).min(axis=1) <= w
    ref = ref[~near][: cfg.click_ref_points]
    # the 99.9th percentile depends only on the few largest scores: only they need be exact
    top = len(ref) - int(np.floor(0.999 * (len(ref) - 1)))
    ref_score = _lpc_scores(s.x, ref, w, p, floor, top=top)[0][:, 0]
    q = float(np.quantile(ref_score, 0.999)) if len(ref_score) else 0.0
    need = max(cfg.click_min_score, cfg.click_ref_factor * q)
    all_b = s.boundaries.tolist()
    out = []
    for i in np.flatnonzero(cand & (bs >= need)):
        t = int(b[i] + off[best[i]])
        out.append(
            Finding(
                "click",
                t / s.sr,
                all_b.index(int(b[i])),
                float(bs[i] / need) if need else float("inf"),
                {"score": float(bs[i]), "jump": float(bj[i]), "nonseam_p999": q, "threshold": need},
            )
        )
    return out


# --------------------------------------------------------------------------- replay


def _ncc(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    # (einsum, not BLAS: a long block would wake a second BLAS thread)
    d = float(np.sqrt(np.einsum("i,i->", a, a) * np.einsum("i,i->", b, b)))
    return float(np.einsum("i,i->", a, b) / d) if d > 0 else 0.0


def text_repeats(text: str) -> list[tuple[int, int, int]]:
    """Where the text says a run of clauses twice: ``(first_char, second_char, run_chars)``.

    Deterministic engines render a repeated sentence or clause ("The end. The end.") as
    identical audio: that repeat is the content, not a replay bug, but only *there*.
    """
    spans = [
        (m.start(), m.end(), " ".join(re.findall(r"[\w']+", m.group().lower())))
        for m in re.finditer(r"[^.!?;:,\n…]+", text)
    ]
    spans = [x for x in spans if x[2]][:400]
    units = [u for _, _, u in spans]
    first: dict[str, list[int]] = {}
    out = []
    for j, u in enumerate(units):
        for i in first.get(u, []):
            m = 0
            while j + m < len(units) and i + m < j and units[i + m] == units[j + m]:
                m += 1
            out.append((spans[i][0], spans[j][0], spans[j + m - 1][1] - spans[j][0]))
        first.setdefault(u, []).append(j)
    return out


def _content_repeat(f: Finding, text: str, s: _Signal, cfg: DetectorConfig) -> bool:
    """Is this repeat where the text repeats itself (source and copy at the two occurrences,
    no longer than the repeated words)? Positions are mapped by the take's own speaking rate."""
    reps = text_repeats(text)
    act = np.flatnonzero(~s.silent)
    if not reps or not len(act):
        return False
    t_on, t_off = act[0] * s.frame_s, (act[-1] + 1) * s.frame_s
    rate = len(text) / max(t_off - t_on, 1e-3)  # characters per second of this take
    tol = 0.1 * (t_off - t_on) + 0.3
    src, dst, length = f.evidence["source_s"], f.time_s, f.evidence["length_s"]
    return any(
        abs(src - t_on - c1 / rate) <= tol
        and abs(dst - t_on - c2 / rate) <= tol
        and length <= cfg.replay_text_factor * n / rate + 0.3
        for c1, c2, n in reps
    )


def _replays(
    s: _Signal,
    cfg: DetectorConfig,
    duration_s: float,
    text: str = "",
    speed: float = 1.0,
    ref: _Signal | None = None,
) -> list[Finding]:
    found = _replay_scan(s, cfg, duration_s)
    if not found:
        return found
    if text:
        found = [f for f in found if not _content_repeat(f, text, s, cfg)]
    if found and ref is not None:
        # the reference repeats itself the same way: the repetition is in the content
        own = [f.evidence["lag_s"] for f in _replay_scan(ref, cfg, ref.n / ref.sr)]
        found = [f for f in found if not any(abs(f.evidence["lag_s"] - lag) <= 0.15 for lag in own)]
    if found and ref is not None:
        found = [f for f in found if not _said_twice_in_reference(f, s, ref, cfg)]
    del speed
    return found


@functools.lru_cache(maxsize=16)
def _band_plan(n: int, nfft: int, sr: int) -> tuple[int, np.ndarray, np.ndarray]:
    """How frames of ``n`` samples become band energies: the decimation (2 at >= 32 kHz: the
    bands end at 7 kHz), the Hann window, and per FFT bin the power gain that undoes the
    pair-sum filter (1 / cos(pi f / sr)^2), so the bands hold what the full-rate FFT saw."""
    dec = 2 if sr >= 32000 and n % 2 == 0 and nfft % 4 == 0 else 1
    win = np.hanning(n).astype(np.float32)
    f = np.arange(nfft // (2 * dec) + 1) * sr / nfft
    gain = (1.0 / np.maximum(np.cos(np.pi * f / sr) ** 2, 1e-6)).astype(np.float32)
    for a in (win, gain):
        a.flags.writeable = False
    return dec, win, gain


def _frame_bands(fr: np.ndarray, onehot: np.ndarray, sr: int) -> np.ndarray:
    """Band energies of Hann-windowed frames (rows of ``fr``), as the full-rate FFT of
    ``2 * (bins - 1)`` points gives them. At 44.1-48 kHz each windowed frame is pair-summed
    first and the filter's gain undone per bin: half the FFT for the same bands (what folds
    back is above 17 kHz, attenuated >= 7 dB more, where speech has almost no energy)."""
    nfft = 2 * (onehot.shape[0] - 1)
    dec, win, gain = _band_plan(fr.shape[1], nfft, sr)
    w = fr * win
    if dec == 1:
        spec = sp_fft.rfft(w, nfft, axis=1)  # float32
        return _band_sum(spec.real**2 + spec.imag**2, onehot)
    w = w[:, 0::2] + w[:, 1::2]  # x[2m] + x[2m+1]: half the DFT sums, gain 2 cos (pi f / sr)
    spec = sp_fft.rfft(w, nfft // 2, axis=1)
    p = (spec.real**2 + spec.imag**2) * gain
    return _band_sum(p, onehot[: len(gain)])


def _prints(sig: _Signal, fs: float = 0.02) -> np.ndarray:
    """Content prints of every ``fs`` frame of a take (see :func:`_spectra`)."""
    n, onehot = _filterbank(sig.sr, fs)
    m = sig.n // n
    if m < 2:
        return np.zeros((0, onehot.shape[1]))
    return _spectra(_frame_bands(sig.x[: m * n].reshape(m, n), onehot, sig.sr))


def _dtw_path(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of ``a``, the median row of ``b`` it is aligned to (full DTW path)."""
    an = a / (np.linalg.norm(a, axis=1, keepdims=True) + 1e-9)
    bn = b / (np.linalg.norm(b, axis=1, keepdims=True) + 1e-9)
    c = 1 - np.einsum("ik,jk->ij", an, bn)
    n, m = c.shape
    acc = np.empty((n, m))
    prev = np.full(m + 1, np.inf)
    prev[0] = 0.0
    for i in range(n):
        down = np.minimum(prev[1:], prev[:-1]) + c[i]
        cs = np.cumsum(c[i])
        prev[1:] = cs + np.minimum.accumulate(down - cs)
        prev[0] = np.inf
        acc[i] = prev[1:]
    i, j = n - 1, m - 1
    pairs = [(i, j)]
    while i > 0 or j > 0:
        steps = [
            (acc[i - 1, j - 1] if i and j else np.inf, i - 1, j - 1),
            (acc[i - 1, j] if i else np.inf, i - 1, j),
            (acc[i, j - 1] if j else np.inf, i, j - 1),
        ]
        _, i, j = min(steps)
        pairs.append((i, j))
    pa = np.array(pairs[::-1])
    out = np.zeros(n, np.int64)
    for k in range(n):
        out[k] = int(np.median(pa[pa[:, 0] == k, 1]))
    return out


def _said_twice_in_reference(f: Finding, s: _Signal, ref: _Signal, cfg: DetectorConfig) -> bool:
    """Does the reference (an independent rendering of the same request) say this repeat's
    words twice too, at the places the take's source and copy align to? Then the repeat is the
    content (a deterministic engine renders a repeated phrase identically), not a replay.

    A replayed chunk has no counterpart in the reference: aligned over the whole take, the copy
    maps onto the source's place in the reference (or onto a few frames at the seam), never onto
    a second, distinct saying of the same words."""
    fs = 0.02
    tp, rp = _prints(s, fs), _prints(ref, fs)
    if len(tp) < 4 or len(rp) < 4 or len(tp) * len(rp) > 4_000_000:
        return False
    path = _dtw_path(tp, rp)

    def mapped(t0: float, length: float) -> tuple[int, int]:
        a = min(len(tp) - 1, max(0, int(t0 / fs)))
        b = min(len(tp), max(a + 1, int((t0 + length) / fs)))
        return int(path[a]), int(path[b - 1]) + 1

    length = f.evidence["length_s"]
    n = max(1, int(length / fs))
    s0, s1 = mapped(f.evidence["source_s"], length)
    c0, c1 = mapped(f.time_s, length)
    overlap = max(0, min(s1, c1) - max(s0, c0))
    if c1 - c0 < 0.5 * n or s1 - s0 < 0.5 * n or overlap > 0.5 * min(s1 - s0, c1 - c0):
        return False  # the copy has no distinct counterpart in the reference
    cost = _dtw_cost(rp[s0:s1], rp[c0:c1])
    return cost <= cfg.crosstalk_min_dist


def _refine(x: np.ndarray, src0: int, qs: int, n: int, q: int) -> tuple[float, int]:
    """Best full-rate NCC (and source start) within ``q`` samples of ``src0``."""
    lo, hi = max(0, src0 - q), min(src0 + q, qs - n)
    if hi < lo:
        return -1.0, src0
    a = x[lo : hi + n].astype(np.float64)
    b = x[qs : qs + n].astype(np.float64)
    b = b - b.mean()
    num = _correlate(a, b)  # a few dozen lags: direct (dot products)
    c1 = np.r_[0.0, np.cumsum(a)]
    c2 = np.r_[0.0, np.cumsum(a * a)]
    ssum = c1[n:] - c1[:-n]
    var = np.maximum(c2[n:] - c2[:-n] - ssum * ssum / n, 1e-30)
    v = num / np.sqrt(var * max(float(np.einsum("i,i->", b, b)), 1e-30))  # (no BLAS threads)
    j = int(np.argmax(v))
    return float(v[j]), lo + j


# OpenBLAS runs a product on one thread up to m*n*k = 65536 * 4 multiply-adds, and a dot
# product up to 10000 terms; past that it wakes a second thread, which on a busy 2-core machine
# costs more CPU than it saves. The detector keeps its products under these sizes.
_BLAS_ONE_THREAD = 65536 * 4
_DOT_ONE_THREAD = 8192


def _correlate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.correlate(a, b, "valid")`` as sums over pieces of ``b`` short enough for BLAS to
    compute each dot product on one thread."""
    if len(b) <= _DOT_ONE_THREAD:
        return np.correlate(a, b, "valid")
    lags = len(a) - len(b) + 1
    out = np.zeros(lags)
    for k in range(0, len(b), _DOT_ONE_THREAD):
        piece = b[k : k + _DOT_ONE_THREAD]
        out += np.correlate(a[k : k + len(piece) + lags - 1], piece, "valid")
    return out


def _ncc_batch(y: np.ndarray, c1: np.ndarray, c2: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """NCC of each row of ``queries`` at every start in ``y`` (one batched FFT for all seams)."""
    m, L = queries.shape
    N = len(y)
    qn = queries - queries.mean(axis=1, keepdims=True)
    qe = np.sqrt(np.einsum("ij,ij->i", qn, qn))
    rows = _BLAS_ONE_THREAD // max(1, (N - L + 1) * L)
    if rows >= 4:
        # short queries on a short take (the usual case: 0.15-0.6 s of 10 ms frames): matrix
        # products over the sliding windows are several times cheaper than the FFTs; a few
        # queries each, so that BLAS stays on one thread (on a busy machine a second thread
        # waits for a core and doubles the CPU time)
        win = sliding_window_view(y, L).T
        num = np.concatenate([qn[k : k + rows] @ win for k in range(0, m, rows)])
    else:
        n = sp_fft.next_fast_len(N + L - 1, real=True)
        num = sp_fft.irfft(
            sp_fft.rfft(y, n)[None, :] * np.conj(sp_fft.rfft(qn, n, axis=1)), n, axis=1
        )
        num = num[:, : N - L + 1]
    ssum = c1[L : N + 1] - c1[: N - L + 1]
    var = np.maximum(c2[L : N + 1] - c2[: N - L + 1] - ssum * ssum / L, 1e-12)
    return num / (np.maximum(qe, 1e-12)[:, None] * np.sqrt(var)[None, :])


def _envelope_precheck(
    env: np.ndarray,
    e1: np.ndarray,
    e2: np.ndarray,
    first: np.ndarray,
    lookback: np.ndarray,
    frames: np.ndarray,
    floor: float,
    most: int = 3,
) -> np.ndarray:
    """Best envelope matches of each query (``first`` frame, ``frames`` long) against the
    earlier envelope (from ``lookback``; the match ends before the query begins). Queries of one
    length are batched, 64 at a time (bounded memory). Returns ``(len(first), most)`` frames of
    the best matches >= ``floor`` (greedy, at least a query length apart, best first; -1: none)."""
    out = np.full((len(first), most), -1, np.int64)
    for L in np.unique(frames):
        rows = np.flatnonzero(frames == L)
        for k in range(0, len(rows), 64):
            blk = rows[k : k + 64]
            c = _ncc_batch(env, e1, e2, env[first[blk, None] + np.arange(L)[None, :]])
            j = np.arange(c.shape[1])[None, :]
            ok = (j >= lookback[blk, None]) & (
                j < np.maximum(lookback[blk], first[blk] - L + 1)[:, None]
            )
            c = np.where(ok, c, -np.inf)
            top = np.maximum(floor, c.max(axis=1) - 0.05)
            rr = np.arange(len(blk))
            for m in range(most):  # greedy: the best, then the best at least L away, ...
                a = c.argmax(axis=1)
                v = c[rr, a]
                hit = v >= top
                out[blk[hit], m] = a[hit]
                if not hit.any():
                    break
                c = np.where(np.abs(j - a[:, None]) < L, -np.inf, c)
    return out


def _coarse_check(
    y: np.ndarray, qs: np.ndarray, qlen: np.ndarray, cand: np.ndarray, d: int, floor: float
) -> np.ndarray:
    """Best NCC at the search rate within ``d`` samples of each candidate source start ``cand``
    for the query starting at ``qs`` (``qlen`` samples; all at the search rate), batched over
    every (query, candidate) pair. Returns the best start per pair, or -1 below ``floor``."""
    out = np.full(len(cand), -1, np.int64)
    c1 = np.r_[0.0, np.cumsum(y, dtype=np.float64)]
    c2 = np.r_[0.0, np.cumsum(np.square(y, dtype=np.float64))]
    for L in np.unique(qlen):
        rows = np.flatnonzero(qlen == L)
        if L < 8:
            continue
        q_ = y[qs[rows, None] + np.arange(L)[None, :]]
        q_ = q_ - q_.mean(axis=1, keepdims=True)
        base = cand[rows] - d
        seg = y[np.clip(base[:, None] + np.arange(L + 2 * d)[None, :], 0, len(y) - 1)]
        n = sp_fft.next_fast_len(L + 2 * d, real=True)
        num = sp_fft.irfft(sp_fft.rfft(seg, n, axis=1) * np.conj(sp_fft.rfft(q_, n, axis=1)), n)
        num = num[:, : 2 * d + 1]
        st = base[:, None] + np.arange(2 * d + 1)[None, :]  # source starts
        # window sums from the take's running sums (starts outside the take are masked below)
        a, b = np.clip(st, 0, len(y) - L), np.clip(st + L, L, len(y))
        s1 = c1[b] - c1[a]
        var = np.maximum(c2[b] - c2[a] - s1 * s1 / L, 0.0)
        den = np.sqrt(var * np.einsum("pl,pl->p", q_, q_)[:, None])
        ok = (st >= 0) & (st + L <= qs[rows, None])  # the source ends before the query starts
        cc = np.where(ok, num / np.maximum(den, 1e-12), -np.inf)
        a = cc.argmax(axis=1)
        r = np.arange(len(rows))
        good = cc[r, a] >= floor
        out[rows[good]] = st[r, a][good]
    return out


def _repeat_length(s: _Signal, src: int, qs: int, start: int, blk: int, min_ncc: float) -> int:
    """How long the audio from ``qs`` keeps repeating the audio from ``src`` (block by block)."""
    length = voiced = start
    nfr = max(1, blk // s.hop)
    while qs + length + blk <= s.n:
        fa, fb = (src + length) // s.hop, (qs + length) // s.hop
        if s.silent[fa : fa + nfr].all() and s.silent[fb : fb + nfr].all():
            length += blk  # shared silence continues the repeat (but does not end it)
            continue
        a = s.x[src + length : src + length + blk]
        b = s.x[qs + length : qs + length + blk]
        if _ncc(a, b) < min_ncc:
            break
        length += blk
        voiced = length
    return voiced


def _replay_queries(
    s: _Signal, cfg: DetectorConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every seam's query at once (vectorised: with 80 ms chunks a take has ~12 seams a
    second), as sample start and frame span ``(qs, qf0, qf1)``; None when there is none."""
    starts = s.boundaries
    if not len(starts):  # no timeline (a bare file): look at every pause-to-speech onset
        runs = s.silent_runs()
        starts = runs[:, 1][runs[:, 1] < len(s.silent)] * s.hop
    starts = np.asarray(starts, dtype=np.int64)
    if not len(starts):
        return None
    ends = np.r_[starts[1:], s.n]
    nf = len(s.silent)
    t_first = s.first_active_frame() * s.frame_s
    # The query starts at the first active frame after the seam (silence matches silence), up
    # to 0.5 s after it.
    act = np.flatnonzero(~s.silent)
    if not len(act):
        return None
    f0 = -(-starts // s.hop)
    pos = np.minimum(np.searchsorted(act, f0), len(act) - 1)
    fa = act[pos]
    keep = (fa >= f0) & (fa < np.minimum(f0 + int(0.5 / s.frame_s), nf))
    starts, ends, fa = starts[keep], ends[keep], fa[keep]
    qs = fa * s.hop
    # The query stays inside this chunk when it is long enough (a re-sent chunk is followed
    # by new audio); after a short chunk (80 ms codec frames) it runs on across the next
    # seams for replay_min_query_s, since a replay is then sent as several short chunks.
    # The source of a repeat is audio, so it starts at or after the take's first active
    # frame and ends before the query begins: a query longer than that could never match
    # (a re-sent first chunk, "Hello!" "Hello!", has only its own length to look back on;
    # two frames spare for frame rounding).
    room = np.minimum(
        np.minimum(cfg.replay_query_s, qs / s.sr - t_first - 2 * s.frame_s), (s.n - qs) / s.sr
    )
    chunk_s = (np.maximum(ends, qs + 1) - qs) / s.sr
    L_s = np.minimum(
        room, np.where(chunk_s >= cfg.replay_min_query_s, chunk_s, cfg.replay_min_query_s)
    )
    keep = L_s >= cfg.replay_min_query_s
    qs, L_s = qs[keep], L_s[keep]
    qf0 = qs // s.hop
    qf1 = (qs + np.floor(L_s * s.sr).astype(np.int64)) // s.hop
    n_act = np.r_[0, np.cumsum(~s.silent)]
    keep = (qf1 - qf0 >= 4) & ((n_act[qf1] - n_act[qf0]) * s.frame_s >= cfg.replay_min_active_s)
    qs, qf0, qf1 = qs[keep], qf0[keep], qf1[keep]
    return (qs, qf0, qf1) if len(qs) else None


def _replay_candidates(
    s: _Signal, cfg: DetectorConfig, q: int, qs: np.ndarray, qf0: np.ndarray, qf1: np.ndarray
) -> dict[int, list[int]]:
    """Query index -> earlier places (search-rate samples) whose level envelope and
    search-rate signal both match it."""
    m = s.n // q
    rate = s.sr / q
    lo = np.maximum(0, qs // q - int(cfg.replay_max_lookback_s * rate))
    # The envelope pre-check for every seam at once: a repeat has the same level envelope
    # (dB per 10 ms frame, floored at the silence threshold) too. Then each envelope match is
    # checked at the search rate, all (seam, match) pairs in one batched product, so only a
    # few candidates per take reach the full-rate FFT below.
    env = np.maximum(s.db, s.thresh).astype(np.float64)
    e1 = np.r_[0.0, np.cumsum(env)]
    e2 = np.r_[0.0, np.cumsum(env * env)]
    peaks = _envelope_precheck(
        env, e1, e2, qf0, lo * q // s.hop, qf1 - qf0, cfg.replay_envelope_ncc
    )
    pi, pk = np.nonzero(peaks >= 0)
    if not len(pi):
        return {}
    # the search rate: block means (as a matrix-vector product: ten times faster than .mean)
    y = s.x[: m * q].reshape(m, q) @ np.full(q, 1 / q, np.float32)
    Lf = (qf1 - qf0) * s.hop
    coarse = _coarse_check(
        y,
        qs[pi] // q,
        Lf[pi] // q,
        peaks[pi, pk] * s.hop // q,
        s.hop // q + 1,
        cfg.replay_coarse_ncc,
    )
    cand: dict[int, list[int]] = {}
    for i, c in zip(pi[coarse >= 0].tolist(), coarse[coarse >= 0].tolist(), strict=True):
        cand.setdefault(i, []).append(c)
    return cand


def _walk_back(s: _Signal, cfg: DetectorConfig, src: int, qs_: int) -> int:
    """Samples the repeat began before the query did (with silence, or before a later seam's
    active onset): walked back 10 ms at a time while it still matches, up to 0.5 s."""
    back, h = 0, s.hop
    while back < int(0.5 * s.sr) and src - back - h >= 0 and qs_ - back - h > src:
        fa, fb = (src - back - h) // h, (qs_ - back - h) // h
        both_silent = s.silent[fa] and s.silent[fb]
        a_ = s.x[src - back - h : src - back]
        b_ = s.x[qs_ - back - h : qs_ - back]
        if not (both_silent or _ncc(a_, b_) >= cfg.replay_min_ncc):
            break
        back += h
    return back


def _replay_scan(s: _Signal, cfg: DetectorConfig, duration_s: float) -> list[Finding]:
    q = max(1, int(round(s.sr / cfg.replay_rate_hz)))
    if s.n // q < 8:
        return []
    queries = _replay_queries(s, cfg)
    if queries is None:
        return []
    qs, qf0, qf1 = queries
    cand = _replay_candidates(s, cfg, q, qs, qf0, qf1)
    Lf = (qf1 - qf0) * s.hop
    out: list[Finding] = []
    bounds_s = s.boundaries / s.sr
    skip_until = -1
    blk = max(1, int(cfg.replay_block_s * s.sr))
    for n in sorted(cand):
        qs_, Lf_ = int(qs[n]), int(Lf[n])
        if qs_ < skip_until:  # still inside a repeat already reported
            continue
        # Confirm each match at the full rate within one search-rate sample of it (one FFT).
        # Several earlier places may match (the text repeats itself, or the audio was
        # repeated more than once): keep the one whose repeat goes on longest.
        best = src = length = None
        for c in cand[n]:
            v, st = _refine(s.x, c * q, qs_, Lf_, q)
            if v < cfg.replay_min_ncc:
                continue
            n_ = _repeat_length(s, st, qs_, Lf_, blk, cfg.replay_min_ncc)
            if length is None or n_ > length:
                best, src, length = v, st, n_
        if length is None:
            continue
        lag = qs_ - src
        skip_until = qs_ + length
        back = _walk_back(s, cfg, src, qs_)
        start, length, src = qs_ - back, length + back, src - back
        t = start / s.sr
        bi, _ = _nearest(bounds_s, t)
        evidence = {
            "ncc": float(best),
            "source_s": src / s.sr,
            "lag_s": lag / s.sr,
            "length_s": length / s.sr,
            "from_start": bool(src / s.sr <= s.first_active_frame() * s.frame_s + 0.15),
            "share_of_take": length / s.sr / duration_s if duration_s else 0.0,
        }
        out.append(Finding("replay", t, bi, float(best / cfg.replay_min_ncc), evidence))
    return out


# --------------------------------------------------------------------------- gap


def _pauses(s: _Signal) -> np.ndarray:
    """Interior silent runs as ``(start_frame, end_frame, speech_frames_before)``."""
    runs = s.silent_runs()
    if not len(runs):
        return np.zeros((0, 3), np.int64)
    runs = runs[(runs[:, 0] > 0) & (runs[:, 1] < len(s.silent))]
    active_before = np.cumsum(np.r_[0, (~s.silent).astype(np.int64)])
    return (
        np.column_stack([runs, active_before[runs[:, 0]]])
        if len(runs)
        else np.zeros((0, 3), np.int64)
    )


def _dropouts(s: _Signal, cfg: DetectorConfig) -> list[tuple[int, int, float, float]]:
    """Seams where near-silence is cut into speech: ``(seam, start, length, drop_db)``.

    A dropout starts *at* the seam (a stream that lost or padded a chunk): the 5 ms before the
    seam are speech, the 5 ms after it at least ``dropout_drop_db`` quieter, and the level stays
    down for ``dropout_min_s`` or more. Natural pauses and stop closures fade over 10-30 ms, so
    a random seam almost never sits at such a cliff. Zeros and low noise (-60..-45 dBFS)
    count the same: the test is the drop, not an absolute silence level.
    """
    w = max(8, int(s.sr * 0.005))
    b = s.boundaries[(s.boundaries >= w) & (s.boundaries <= s.n - w)]
    if not len(b):
        return []
    x = s.x
    around = x[b[:, None] + np.arange(-w, w)[None, :]]  # the 5 ms either side of each seam
    pre = np.einsum("ij,ij->i", around[:, :w], around[:, :w], dtype=np.float64) / w
    post = np.einsum("ij,ij->i", around[:, w:], around[:, w:], dtype=np.float64) / w
    pre_db = 10 * np.log10(pre + 1e-12)
    post_db = 10 * np.log10(post + 1e-12)
    cand = np.flatnonzero(
        (pre_db >= s.level + cfg.dropout_speech_db) & (post_db <= pre_db - cfg.dropout_drop_db)
    )
    out = []
    max_frames = int(s.sr * 3.0) // w
    for i in cand:
        st = int(b[i])
        lim = pre_db[i] - cfg.dropout_drop_db / 2  # it stays down (low noise fluctuates)
        seg = x[st : st + max_frames * w]
        m = len(seg) // w
        if m == 0:
            continue
        fr = seg[: m * w].reshape(m, w)
        db = 10 * np.log10(np.einsum("ij,ij->i", fr, fr) / w + 1e-12)
        loud = np.flatnonzero(db > lim)
        n = int(loud[0]) if len(loud) else m
        length = n * w / s.sr
        if length >= cfg.dropout_min_s:
            out.append((int(i), st, length, float(pre_db[i] - post_db[i])))
    return out


def _gaps(s: _Signal, cfg: DetectorConfig, speed: float, ref: _Signal | None) -> list[Finding]:
    """Silences at seams the speech does not explain. Each pause is reported once, at the
    first seam inside it; the reference is extra evidence, never the only rule."""
    if not len(s.boundaries):
        return []
    all_b = s.boundaries.tolist()
    out: list[Finding] = []
    covered: list[tuple[float, float]] = []
    for _, st, length, drop in _dropouts(s, cfg):
        t0 = st / s.sr
        covered.append((t0 - 0.02, t0 + length + 0.02))
        out.append(
            Finding(
                "gap",
                t0,
                all_b.index(st),
                float(length / cfg.dropout_min_s),
                {"pause_s": length, "drop_db": drop, "abrupt": True, "cut_in": True},
            )
        )
    pauses = _pauses(s)
    if not len(pauses):
        return out
    ref_pauses = _pauses(ref) if ref is not None else None
    long_s = cfg.gap_long_s / min(1.0, max(speed, 0.25))
    edge = max(1, int(round(0.02 / s.frame_s)))
    # the first pause each seam is in (+-1 frame), and the first seam in each pause
    bf = s.boundaries / s.hop
    j = np.searchsorted(pauses[:, 0] - 1, bf, side="right") - 1
    hit = np.full(len(bf), -1, np.int64)
    for d in (0, 1):  # the pause before may reach this seam too (when they are 1-2 frames apart)
        jj = j - d
        ok = (jj >= 0) & (bf <= pauses[np.maximum(jj, 0), 1] + 1)
        hit[ok] = jj[ok]
    pause_ids, first_seam = np.unique(hit, return_index=True)
    for pi, k in zip(pause_ids.tolist(), first_seam.tolist(), strict=True):
        if pi < 0:
            continue
        st, en, before = (int(v) for v in pauses[pi])
        length = (en - st) * s.frame_s
        t0 = st * s.frame_s
        if length < cfg.gap_min_s or any(a <= t0 + 0.03 and t0 <= z for a, z in covered):
            continue
        pre = float(s.db[max(0, st - edge) : st].mean())
        post = float(s.db[en : en + edge].mean())
        abrupt = pre >= s.level + cfg.gap_edge_db
        ev: dict[str, Any] = {
            "pause_s": length,
            "edge_before_db": pre - s.level,
            "edge_after_db": post - s.level,
            "abrupt": abrupt,
        }
        flagged = abrupt or length >= long_s
        sev = max(length / long_s, length / cfg.gap_min_s if abrupt else 0.0)
        speech_before = before * s.frame_s
        if (
            ref is not None
            and ref_pauses is not None
            and speech_before <= ref.active_s() + cfg.gap_align_tol_s
        ):
            # the reference's pause after the same amount of speech, or at the same time
            if len(ref_pauses):
                d1 = np.abs(ref_pauses[:, 2] * ref.frame_s - speech_before)
                d2 = np.abs(ref_pauses[:, 0] * ref.frame_s - st * s.frame_s)
                j = np.flatnonzero(np.minimum(d1, d2) <= cfg.gap_align_tol_s)
            else:
                j = np.zeros(0, np.int64)
            ref_len = (
                float(((ref_pauses[j, 1] - ref_pauses[j, 0]) * ref.frame_s).max())
                if len(j)
                else 0.0
            )
            extra = length - ref_len
            ev["reference_pause_s"] = ref_len
            if extra >= max(cfg.gap_extra_s, cfg.gap_extra_ratio * ref_len):
                flagged = True
                sev = max(sev, extra / cfg.gap_extra_s)
        if flagged:
            out.append(Finding("gap", t0, k, float(sev), ev))
    return out


# --------------------------------------------------------------------------- underrun


def playout(take: Take, cfg: DetectorConfig | None = None) -> PlayoutResult:
    """What listenlab's player (its start rule, ``evaluation.playout``) does on this take's
    arrival timeline: when it starts, the ideal start, and every underrun."""
    cfg = cfg or DetectorConfig()
    sr = take.sample_rate or 1
    arr = [c.arrival_ms / 1000 for c in take.chunks]
    if any(b < a for a, b in zip(arr, arr[1:], strict=False)):
        arr = list(np.maximum.accumulate(arr))  # a clock that went back: as received
    done = max(take.total_ms / 1000, arr[-1]) if arr else None
    return simulate_start_rule(
        arr,
        [c.frames / sr for c in take.chunks],
        len((take.request.text or "").strip()),
        sec_per_char=cfg.sec_per_char,
        rate_prior=cfg.rate_prior,
        done_s=done,
    )


def simulate_playback(take: Take, prebuffer_ms: float | None = None) -> list[Stall]:
    """Every stall (length > 0) of a player on this take's arrival timeline.

    ``prebuffer_ms=None``: listenlab's player (the start rule; see :func:`playout`). A number: a
    simple player that starts once that much audio is in (or the stream has ended), plays in
    real time, and resumes as soon as the late chunk arrives."""
    return player_stalls(take, DetectorConfig(prebuffer_ms=prebuffer_ms))


def player_stalls(take: Take, cfg: DetectorConfig, res: PlayoutResult | None = None) -> list[Stall]:
    """The stalls of the player ``cfg`` describes (``prebuffer_ms``, and the start rule's
    priors); ``res``: the start rule's result on this take when already computed."""
    if not take.chunks or not take.sample_rate:
        return []
    sr = take.sample_rate
    prebuffer_ms = cfg.prebuffer_ms
    if prebuffer_ms is None:
        res = res or playout(take, cfg)
        offsets = [c.offset for c in take.chunks]
        out = []
        for (pos_s, stall_s), resumed in zip(res.underruns, res.decisions[1:], strict=True):
            k = min(range(len(offsets)), key=lambda i: abs(offsets[i] / sr - pos_s))
            dry = resumed + POLICY.lead_s - stall_s
            out.append(Stall(pos_s * 1000, dry * 1000, stall_s * 1000, k))
        return out
    arr = np.array([c.arrival_ms for c in take.chunks], dtype=np.float64)
    start = np.array([c.offset for c in take.chunks], dtype=np.float64) * 1000 / sr
    end = start + np.array([c.frames for c in take.chunks], dtype=np.float64) * 1000 / sr
    ready = np.flatnonzero(end >= prebuffer_ms)
    j = int(ready[0]) if len(ready) else len(arr) - 1
    t0 = float(arr[: j + 1].max())  # playback starts when enough audio is buffered
    late = arr - (t0 + start)  # how late chunk i is against a player that never stalled
    cum = np.maximum.accumulate(np.maximum(late, 0.0))  # total stall time up to chunk i
    stall = np.diff(np.r_[0.0, cum])
    idx = np.flatnonzero(stall > 0)
    return [
        Stall(float(start[i]), float(t0 + start[i] + cum[i] - stall[i]), float(stall[i]), int(i))
        for i in idx
    ]


def _player_name(cfg: DetectorConfig) -> str:
    if cfg.prebuffer_ms is None:
        return "listenlab's player (start rule)"
    return f"a {cfg.prebuffer_ms:.0f} ms prebuffer player"


def _underruns(stalls: list[Stall], cfg: DetectorConfig) -> list[Finding]:
    out = []
    for st in stalls:
        if st.stall_ms < cfg.underrun_min_ms:
            continue
        out.append(
            Finding(
                "underrun",
                st.position_ms / 1000,
                st.chunk_index - 1 if st.chunk_index > 0 else None,
                st.stall_ms / cfg.underrun_min_ms,
                {
                    "stall_ms": st.stall_ms,
                    "wall_ms": st.wall_ms,
                    "player": _player_name(cfg),
                    "prebuffer_ms": cfg.prebuffer_ms,
                },
            )
        )
    return out


# --------------------------------------------------------------------------- durations


def predicted_duration_s(text: str, speed: float, cfg: DetectorConfig) -> float:
    return cfg.overhead_s + len(text) / (cfg.chars_per_s * max(speed, 0.25))


def _durations(
    take: Take, s: _Signal, cfg: DetectorConfig, ref: _Signal | None, ref_take: Take | None
) -> list[Finding]:
    out: list[Finding] = []
    dur = s.n / s.sr
    bounds_s = s.boundaries / s.sr
    end_b = len(bounds_s) - 1 if len(bounds_s) else None
    if take.status != "ok":
        out.append(
            Finding(
                "truncation", dur, end_b, 1.0, {"status": take.status, "error": take.error or ""}
            )
        )
    if s.n == 0:
        if take.status == "ok":
            out.append(Finding("truncation", 0.0, None, 1.0, {"empty": True}))
        return out
    act = s.active_s()
    cut = take.status != "ok"
    text = take.request.text or ""
    speed = float(take.request.speed or 1.0)
    pred = predicted_duration_s(text, speed, cfg)
    if ref is not None and ref.n:
        ra = ref.active_s()
        ratio = act / ra if ra else math.inf
        ev = {"active_s": act, "reference_active_s": ra, "ratio": ratio, "duration_s": dur}
        if ratio < cfg.truncation_ratio:
            cut = True
            out.append(
                Finding("truncation", dur, end_b, cfg.truncation_ratio / max(ratio, 1e-6), ev)
            )
        elif ratio > cfg.duration_ratio:
            out.append(Finding("duration", dur, end_b, ratio / cfg.duration_ratio, ev))
    elif text.strip():  # without text (a bare file) there is no expected duration: no guess
        ev = {"duration_s": dur, "predicted_s": pred, "ratio": dur / pred}
        if pred - cfg.overhead_s >= cfg.min_predicted_s and dur < cfg.truncation_text_ratio * pred:
            cut = True
            out.append(
                Finding(
                    "truncation", dur, end_b, cfg.truncation_text_ratio * pred / max(dur, 1e-6), ev
                )
            )
        elif dur > cfg.duration_text_ratio * pred and dur - pred >= cfg.duration_min_excess_s:
            out.append(Finding("duration", dur, end_b, dur / (cfg.duration_text_ratio * pred), ev))
    # stops mid-speech: the last 20 ms are still near speech level
    tail = max(1, int(round(0.02 / s.frame_s)))
    if not cut and len(s.db) > tail:
        t_db = float(np.mean(s.db[-tail:]))
        if t_db >= s.level + cfg.tail_abrupt_db:
            out.append(
                Finding(
                    "truncation",
                    dur,
                    end_b,
                    float(10 ** ((t_db - s.level - cfg.tail_abrupt_db) / 20)),
                    {"abrupt_end_db": t_db - s.level, "duration_s": dur},
                )
            )
    del ref_take
    return out


# --------------------------------------------------------------------------- crosstalk


def _spectra(e: np.ndarray) -> np.ndarray:
    """Log band energies with the mean removed: a content print (the words, not the channel)."""
    if not len(e):
        return e
    f = np.log(e + 1e-9)
    return f - f.mean(axis=0, keepdims=True)


def _ltas(e: np.ndarray) -> np.ndarray:
    """Long-term spectrum of active frames (pauses already left out), level removed: a voice
    print. Every active frame counts: picking only the louder ones made the high bands depend
    on whether a few fricatives crossed the cut (two renderings of one text then differed)."""
    if not len(e):
        return np.zeros(24)
    f = np.log(e.mean(axis=0) + 1e-12)
    return f - f.mean()


def _dtw_ends(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dynamic-time-warping cost (cosine frame distance, per path step) of all of ``a`` against
    every prefix of ``b``: entry j is the cost of ending at ``b[j]`` (open end).

    Same words in the same voice align cheaply even when timing differs (~0.01-0.09 for two
    Piper renditions of one text); other words or another voice do not (>= 0.2).
    """
    return _dtw_ends_many([(a, b)])[0]


def _dtw_ends_many(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """:func:`_dtw_ends` of several pairs in one pass over the rows (the row loop is Python:
    running the pairs side by side halves its cost when a take needs two alignments)."""
    out: list[np.ndarray | None] = [None] * len(pairs)
    costs = []
    for k, (a, b) in enumerate(pairs):
        if not len(a) or not len(b):
            out[k] = np.ones(max(1, len(b)))
            continue
        an = a / (np.linalg.norm(a, axis=1, keepdims=True) + 1e-9)
        bn = b / (np.linalg.norm(b, axis=1, keepdims=True) + 1e-9)
        costs.append((k, 1 - np.einsum("ik,jk->ij", an, bn)))  # (small: no BLAS threads)
    if costs:
        n_max = max(c.shape[0] for _, c in costs)
        m_max = max(c.shape[1] for _, c in costs)
        # padding on the right never reaches the columns before it (a path only moves right);
        # the pairs are the last axis, so each row's scan runs over contiguous memory
        cc = np.full((n_max, m_max, len(costs)), 4.0)
        for r, (_, c) in enumerate(costs):
            cc[: c.shape[0], : c.shape[1], r] = c
        prev = np.full((m_max + 1, len(costs)), np.inf)
        prev[0] = 0.0
        # the (i, j-1) step: row[j] = min(down[j], row[j-1] + c[i, j]) is a min-plus prefix
        # scan, i.e. C[j] + min_{k<=j}(down[k] - C[k]) with C the running sum of c[i]
        run = np.cumsum(cc, axis=1)
        step = cc - run
        down = np.empty((m_max, len(costs)))
        done: dict[int, list[tuple[int, int, int]]] = {}
        for r, (k, c) in enumerate(costs):
            done.setdefault(c.shape[0] - 1, []).append((r, k, c.shape[1]))
        for i in range(n_max):
            np.minimum(prev[1:], prev[:-1], out=down)  # from (i-1, j) or (i-1, j-1)
            down += step[i]
            np.minimum.accumulate(down, axis=0, out=prev[1:])
            prev[1:] += run[i]
            prev[0] = np.inf  # (only the first row starts from the corner)
            for r, k, m in done.get(i, ()):
                out[k] = prev[1 : m + 1, r] / (i + 1 + np.arange(1, m + 1))
    return out  # type: ignore[return-value]


def _dtw_cost(a: np.ndarray, b: np.ndarray) -> float:
    """DTW cost of all of ``a`` against all of ``b`` (see :func:`_dtw_ends`)."""
    return float(_dtw_ends(a, b)[-1]) if len(a) and len(b) else 1.0


def _last_active_s(sig: _Signal) -> float:
    a = np.flatnonzero(~sig.silent)
    return float((a[-1] + 1) * sig.frame_s) if len(a) else sig.n / sig.sr


@functools.lru_cache(maxsize=16)
def _filterbank(sr: int, fs: float) -> tuple[int, np.ndarray]:
    """Frame length for ``fs`` seconds, and the FFT-bin -> band matrix (24 log-spaced bands,
    100 Hz to 7 kHz) for it."""
    n = max(64, int(sr * fs))
    nfft = 1 << (n - 1).bit_length()
    freqs = np.fft.rfftfreq(nfft, 1 / sr)
    edges = np.geomspace(100, min(7000, sr / 2 - 1), 25)
    band = np.digitize(freqs, edges) - 1
    onehot = (band[:, None] == np.arange(24)[None, :]).astype(np.float32)
    onehot.flags.writeable = False  # cached: shared by every call
    return n, onehot


def _band_sum(p: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """``p @ onehot`` (bins -> bands) as one ``reduceat`` over runs of bins: each band is a run
    of bins, and a BLAS product of these small matrices spends more on threads than on sums."""
    cols = np.flatnonzero(onehot.any(axis=1))
    start = np.searchsorted(np.argmax(onehot[cols], axis=1), np.arange(25), side="left")
    # a zero column after the last bin: every start is a valid index, an empty band sums to 0
    seg = np.pad(p[:, cols[0] : cols[-1] + 1], ((0, 0), (0, 1)))
    out = np.add.reduceat(seg, start[:-1], axis=1, dtype=np.float64)
    out[:, start[1:] == start[:-1]] = 0.0
    return out


def _active_frames(
    sig: _Signal, xs: np.ndarray, t0: float, t1: float, n: int, scale: np.float32 = _SCALE
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n``-sample frames of ``[t0, t1)`` of ``xs`` (samples times ``scale``; int16 or
    float32) and which of them are active. Pauses (natural, or gaps and stalls padded with
    silence) are left out of the prints, so a print covers the same words whatever the
    pausing."""
    seg = xs[max(0, int(t0 * sig.sr)) : max(0, int(t1 * sig.sr))]
    m = len(seg) // n
    if m < 2:
        return np.zeros((0, n), np.float32), np.zeros(0, np.int64)
    fr = seg[: m * n].reshape(m, n)
    db = 10 * np.log10(_frame_energies(fr, scale) + 1e-12)
    return fr, np.flatnonzero(db >= sig.thresh)


def _picked(fr: np.ndarray, idx: np.ndarray, scale: np.float32) -> np.ndarray:
    return np.multiply(fr[idx], scale, dtype=np.float32)


def _without_cuts(
    s: _Signal, cuts: Sequence[Finding], t_on: float, t_off: float
) -> tuple[np.ndarray, float]:
    """The take's samples with each replay's and gap's audio cut out, and its new last active
    time (cut from the end, so earlier cuts stay where they were found)."""
    x = s.x
    for f in sorted(cuts, key=lambda f: -f.time_s):
        span = f.evidence.get("length_s", f.evidence.get("pause_s", 0.0))
        a, b = int(f.time_s * s.sr), int((f.time_s + span) * s.sr)
        if t_on * s.sr <= a < b <= len(x):
            x = np.concatenate([x[:a], x[b:]])
            t_off -= (b - a) / s.sr if b / s.sr <= t_off else 0.0
    return x, t_off


def _compare_prints(a: np.ndarray, b: np.ndarray, ends: np.ndarray) -> tuple[float, float]:
    """Content cost of ``a`` against as many active frames of ``b``, and the voice distance
    against the prefix of ``b`` that says the same words (found by an open-ended alignment,
    ``ends``: half to twice as long, so the speaking rate does not change which sounds, e.g.
    fricatives, each long-term spectrum holds)."""
    n = len(a)
    lo, hi = max(1, n // 2), min(len(b), 2 * n)
    j = lo - 1 + int(np.argmin(ends[lo - 1 : hi]))
    voice = float(np.sqrt(np.mean((_ltas(a) - _ltas(b[: j + 1])) ** 2)))
    return float(ends[min(n, len(b)) - 1]), voice


def _crosstalk(
    s: _Signal, ref: _Signal, cfg: DetectorConfig, cuts: Sequence[Finding] = ()
) -> list[Finding]:
    """Does the take start with other words or another voice than its reference?

    ``cuts`` are the replays and gaps already found: their audio is cut out before the
    comparison, so a replay or gap near the start is reported once, as itself, not also as
    foreign content. Only active frames are compared (pauses differ between renderings), and
    the reference's side of each comparison is found by an open-ended alignment (its speaking
    rate may be half to twice the take's), so the prints cover the same words."""
    fs = 0.02
    on_s = cfg.crosstalk_onset_s
    t_on = s.first_active_frame() * s.frame_s
    t_off = _last_active_s(s)
    x, t_off = _without_cuts(s, cuts, t_on, t_off)
    r_on, r_off = ref.first_active_frame() * ref.frame_s, _last_active_s(ref)
    n_on = int(round(on_s / fs))
    n_t_fr, oh_t = _filterbank(s.sr, fs)
    n_r_fr, oh_r = _filterbank(ref.sr, fs)
    one = np.float32(1)
    t_fr, t_act = _active_frames(s, x, t_on, t_off, n_t_fr, one)
    # the reference's own samples: its float32 copy is never needed here
    r_fr, r_act = _active_frames(ref, ref.raw, r_on, r_off, n_r_fr, ref.raw_scale)
    n_t, n_r = len(t_act), len(r_act)
    if n_t < 0.8 * n_on or n_r < 0.8 * n_on:
        return []

    # only the frames that are compared are transformed (a long take has many more)
    head = (
        _frame_bands(_picked(t_fr, t_act[:n_on], one), oh_t, s.sr),
        _frame_bands(_picked(r_fr, r_act[: 2 * n_on], ref.raw_scale), oh_r, ref.sr),
    )
    (ends,) = _dtw_ends_many([(_spectra(head[0]), _spectra(head[1]))])
    onset, voice = _compare_prints(*head, ends)
    if onset < cfg.crosstalk_min_dist and voice < cfg.crosstalk_voice_dist:
        return []  # neither test can hold, whatever the rest of the take says
    # the rest of the take is compared at its end (end-aligned, reversed so the open end is
    # the start): foreign audio longer than the onset window must not leak into the
    # comparison that says "the rest matches"
    n_b = min(n_on, n_t - n_on, n_r - n_on)
    body = body_voice = None
    if n_b * fs >= 0.5:
        tail = (
            _frame_bands(_picked(t_fr, t_act[-n_b:], one), oh_t, s.sr)[::-1],
            _frame_bands(_picked(r_fr, r_act[-2 * n_b :], ref.raw_scale), oh_r, ref.sr)[::-1],
        )
        (ends,) = _dtw_ends_many([(_spectra(tail[0]), _spectra(tail[1]))])
        body, body_voice = _compare_prints(*tail, ends)
    ev = {
        "onset_dist": onset,
        "body_dist": body,
        "onset_voice_dist": voice,
        "body_voice_dist": body_voice,
    }
    content = onset >= cfg.crosstalk_min_dist and (
        body is None or onset >= cfg.crosstalk_ratio * body
    )
    other_voice = voice >= cfg.crosstalk_voice_dist and (
        body_voice is None or voice >= cfg.crosstalk_voice_ratio * body_voice
    )
    if content or other_voice:
        bi, _ = _nearest(s.boundaries / s.sr, t_on)
        sev = max(onset / cfg.crosstalk_min_dist, voice / cfg.crosstalk_voice_dist)
        # another voice is the more specific cause: the same words in another voice also
        # move the content distance a little
        ev["foreign"] = "voice" if other_voice else "content"
        return [Finding("crosstalk", t_on, bi, float(sev), ev)]
    return []


# --------------------------------------------------------------------------- entry points


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per event: the same kind at the same place (within 50 ms; truncation and
    duration once per take) is merged into the most severe one, keeping all evidence."""
    # a word cut off by a gap is heard as one event: the jump into the silence is the gap's
    gaps = {f.boundary_index: f for f in findings if f.kind == "gap" and f.evidence.get("cut_in")}
    findings = [f for f in findings if not (f.kind == "click" and f.boundary_index in gaps)]
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (KINDS.index(f.kind), f.time_s)):
        prev = out[-1] if out and out[-1].kind == f.kind else None
        if prev is not None and (
            f.kind in {"truncation", "duration"} or abs(f.time_s - prev.time_s) <= 0.05
        ):
            a, b = (prev, f) if prev.severity >= f.severity else (f, prev)
            ev = {**b.evidence, **a.evidence}
            ev["merged"] = int(prev.evidence.get("merged", 1)) + 1
            out[-1] = replace(a, evidence=ev)
        else:
            out.append(f)
    out.sort(key=lambda f: (f.time_s, KINDS.index(f.kind)))
    return out


def _has_timeline(take: Take) -> bool:
    """A take recorded from a stream has arrival times; a bare file is one chunk at 0 ms."""
    return len(take.chunks) > 1 or any(c.arrival_ms > 0 for c in take.chunks)


def _checks(take: Take, ref: _Signal | None, cfg: DetectorConfig) -> list[Check]:
    seams = bool(take.boundaries)
    text = (take.request.text or "").strip()
    speed = float(take.request.speed or 1.0)
    no_seams = "no timeline (one chunk: no seams)"
    text_ok = text and predicted_duration_s(text, speed, cfg) - cfg.overhead_s >= 0
    return [
        Check("click", seams, "" if seams else no_seams),
        Check(
            "replay",
            bool(take.frames),
            "" if take.frames else "no audio",
        ),
        Check("gap", seams, "" if seams else no_seams),
        Check(
            "gap vs reference",
            seams and ref is not None,
            "" if ref is not None and seams else ("no reference" if seams else no_seams),
        ),
        Check(
            "underrun",
            _has_timeline(take),
            "" if _has_timeline(take) else "no timeline (no arrival times)",
        ),
        Check("truncation (status, abrupt end)", True),
        Check(
            "length vs text",
            bool(text_ok) and ref is None,
            "" if text_ok and ref is None else ("reference used instead" if text else "no text"),
        ),
        Check("length vs reference", ref is not None, "" if ref is not None else "no reference"),
        Check("crosstalk", ref is not None, "" if ref is not None else "no reference"),
    ]


def analyze(
    take: Take, reference: Take | None = None, config: DetectorConfig | None = None
) -> Analysis:
    """Run every detector on ``take`` (and compare with ``reference`` when given)."""
    cfg = config or DetectorConfig()
    s = _Signal(take, cfg)
    ref = _Signal(reference, cfg) if reference is not None and reference.frames else None
    dur = s.n / s.sr
    findings: list[Finding] = []
    if s.n:
        findings += _clicks(s, cfg)
        findings += _replays(
            s, cfg, dur, take.request.text or "", float(take.request.speed or 1.0), ref
        )
        findings += _gaps(s, cfg, float(take.request.speed or 1.0), ref)
        if ref is not None:
            findings += _crosstalk(
                s, ref, cfg, [f for f in findings if f.kind in ("replay", "gap")]
            )
    timeline = _has_timeline(take)
    play = playout(take, cfg) if timeline else None
    stalls = player_stalls(take, cfg, play) if timeline else []
    findings += _underruns(stalls, cfg)
    findings += _durations(take, s, cfg, ref, reference)
    findings = _merge(findings)
    runs = s.silent_runs() if s.n else np.zeros((0, 2))
    metrics = {
        "take_id": take.take_id,
        "duration_s": dur,
        "chunk_count": len(take.chunks),
        "ttfa_ms": take.ttfa_ms,
        "rtf": take.rtf,
        "speech_level_db": s.level if s.n else None,
        "active_s": s.active_s() if s.n else 0.0,
        "max_silence_ms": float((runs[:, 1] - runs[:, 0]).max() * s.frame_s * 1000)
        if len(runs)
        else 0.0,
        "stall_count": len(stalls),
        "stall_ms": float(sum(st.stall_ms for st in stalls)),
        "player": _player_name(cfg) if timeline else None,
        # listenlab's player on this timeline: its first sound, and the earliest start that
        # never runs dry (from the request, ms); also when the findings use a fixed prebuffer
        "start_ms": None if play is None or play.start_s is None else play.start_s * 1000,
        "ideal_start_ms": None
        if play is None or play.ideal_start_s is None
        else play.ideal_start_s * 1000,
        "reference_duration_s": reference.duration_s if reference is not None else None,
        "duration_ratio_vs_reference": (dur / reference.duration_s)
        if reference is not None and reference.duration_s
        else None,
        "findings": len(findings),
    }
    return Analysis(findings, metrics, _checks(take, ref, cfg))


def detect(
    take: Take, reference: Take | None = None, config: DetectorConfig | None = None
) -> list[Finding]:
    """The findings of :func:`analyze`, sorted by time."""
    return analyze(take, reference, config).findings


__all__ = [
    "DETECTOR_VERSION",
    "KINDS",
    "Analysis",
    "Check",
    "DetectorConfig",
    "Finding",
    "Stall",
    "analyze",
    "detect",
    "predicted_duration_s",
    "player_stalls",
    "playout",
    "simulate_playback",
]
