"""Rater screening for listening tests: the headphone screens and one table of every outcome.

* Woods et al. (2017, "Headphone screening to facilitate web-based auditory experiments"),
  the antiphase test: each trial plays three 200 Hz tones, one 6 dB quieter and one in
  antiphase between the ears; the rater picks the quietest. Over loudspeakers the antiphase
  tone partly cancels and sounds quietest. Pass: at least 5 of 6.
* Milne et al. (2021, "An online headphone screening test based on dichotic pitch", Behav Res
  Methods 53:1551), Huggins pitch: three intervals of white noise, identical in both ears
  except, in one interval, a band of +-6 % around 600 Hz phase-inverted in the right ear; over
  headphones that interval carries a faint tone, over loudspeakers (or in one ear) none does.
  Six trials, pass at least 5 of 6 (the same rule as the antiphase test).

The answer keys never leave the server: :func:`new_screen` draws each trial from the OS's
random source (``secrets``), the service stores them, and :func:`render` makes the audio the
page fetches (one stereo 48 kHz WAV per trial: the three intervals, equal in length and level
statistics whatever the answer). :func:`score_screen` scores the picks.

:func:`rater_table` joins the screen's result with each test kind's own screening (MOS:
P.808-style gold, trap, variance and unplayed items; A/B: the check pairs; MUSHRA: BS.1534-3's
post-screening: :meth:`evaluation.listening.kinds.base.TestKind.screen`), giving one row per
rater with ``excluded`` and the ``reasons``.
"""

from __future__ import annotations

import io
import json
import secrets
import wave
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from backends.audio import encode_audio
from evaluation import stats

SCREEN_RATE = 48_000
TRIALS = 6
PASS = 5
"""Woods et al. and Milne et al.: pass with at least 5 of 6 correct."""
HEADPHONE_TRIALS, HEADPHONE_PASS = TRIALS, PASS
MODES = ("antiphase", "huggins", "both", "none")
"""The test's ``screening`` setting."""
KINDS = ("antiphase", "huggins")
ROLES = ("normal", "quiet", "antiphase")
TONE_HZ, TONE_S, GAP_S, RAMP_S = 200.0, 0.75, 0.4, 0.02
NOISE_S = 1.0
HUGGINS_HZ, HUGGINS_BAND = 600.0, 0.06
REASON = {"antiphase": "headphones", "huggins": "huggins"}
"""The exclusion reason of a failed screen: ``screened out: <this>``."""


def screen_mode(config: dict) -> str:
    """The test's screen: its ``screening`` setting, or (tests made before it) the old
    ``headphone_check`` bool (true: the antiphase test)."""
    m = config.get("screening")
    if isinstance(m, str) and m in MODES:
        return m
    return "antiphase" if config.get("headphone_check", True) else "none"


def screen_kinds(mode: str) -> list[str]:
    return {"antiphase": ["antiphase"], "huggins": ["huggins"], "both": list(KINDS)}.get(mode, [])


@dataclass(frozen=True)
class ScreenTrial:
    """One trial and its answer key (server-side only)."""

    kind: str
    answer: int
    """The interval to pick (0, 1 or 2): the quiet tone, or the Huggins interval."""
    order: tuple[str, ...] = ()
    """Antiphase: the three tones' roles in play order."""
    noise_seed: int = 0
    """Huggins: the noise (fresh per trial, so no two trials' audio repeat)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ScreenTrial:
        d = json.loads(text)
        return cls(d["kind"], int(d["answer"]), tuple(d.get("order") or ()), int(d["noise_seed"]))


def new_screen(mode: str, trials: int = TRIALS) -> list[ScreenTrial]:
    """The rater's trials, drawn from the OS's random source: nothing the page sees (rater id,
    token, time) lets anyone recompute them."""
    rng = secrets.SystemRandom()
    out = []
    for kind in screen_kinds(mode):
        for _ in range(trials):
            order = list(ROLES)
            rng.shuffle(order)
            if kind == "antiphase":
                out.append(ScreenTrial(kind, order.index("quiet"), tuple(order)))
            else:
                out.append(ScreenTrial(kind, rng.randrange(3), (), rng.getrandbits(62)))
    return out


def _ramp(n: int, rate: int) -> np.ndarray:
    k = max(1, int(RAMP_S * rate))
    env = np.ones(n)
    r = 0.5 - 0.5 * np.cos(np.pi * np.arange(k) / k)
    env[:k], env[n - k :] = r, r[::-1]
    return env


def huggins_pair(noise: np.ndarray, rate: int = SCREEN_RATE) -> tuple[np.ndarray, np.ndarray]:
    """Left: ``noise``; right: the same noise with the band 600 Hz +-6 % phase-inverted."""
    spec = np.fft.rfft(noise)
    f = np.fft.rfftfreq(len(noise), 1.0 / rate)
    band = (f >= HUGGINS_HZ * (1 - HUGGINS_BAND)) & (f <= HUGGINS_HZ * (1 + HUGGINS_BAND))
    spec[band] *= -1.0
    return noise, np.fft.irfft(spec, n=len(noise))


def render(trial: ScreenTrial, rate: int = SCREEN_RATE) -> np.ndarray:
    """The trial's audio, float ``(frames, 2)`` in -1..1: three intervals with gaps."""
    gap = np.zeros((int(GAP_S * rate), 2))
    parts = []
    if trial.kind == "antiphase":
        n = int(TONE_S * rate)
        tone = np.sin(2 * np.pi * TONE_HZ * np.arange(n) / rate) * _ramp(n, rate)
        for role in trial.order:
            x = tone * (0.25 if role == "quiet" else 0.5)
            parts.append(np.stack([x, -x if role == "antiphase" else x], axis=1))
    else:
        n = int(NOISE_S * rate)
        rng = np.random.default_rng(trial.noise_seed)
        env = _ramp(n, rate)
        for i in range(3):
            x = rng.standard_normal(n)
            x *= 0.12 / np.sqrt(np.mean(x**2))
            left, right = huggins_pair(x, rate) if i == trial.answer else (x, x)
            parts.append(np.stack([left * env, right * env], axis=1))
    out = []
    for i, p in enumerate(parts):
        out += [gap, p] if i else [p]
    return np.clip(np.concatenate(out), -1.0, 1.0)


def duration_ms(trial: ScreenTrial, rate: int = SCREEN_RATE) -> float:
    one = TONE_S if trial.kind == "antiphase" else NOISE_S
    return (3 * int(one * rate) + 2 * int(GAP_S * rate)) / rate * 1000.0


def wav_bytes(audio: np.ndarray, rate: int = SCREEN_RATE) -> bytes:
    """int16 WAV of float ``(frames, channels)`` audio."""
    pcm = np.clip(np.round(audio * 32767.0), -32768, 32767).astype(np.int16)
    return encode_audio(pcm, rate)


def to_screen_rate(audio: np.ndarray, rate: int) -> np.ndarray:
    """int16 ``(frames, channels)`` audio as float stereo at :data:`SCREEN_RATE` (what every
    familiarisation clip is sent as: no system's native rate or layout shows)."""
    x = np.asarray(audio, dtype=np.float64) / 32768.0
    if x.ndim == 1:
        x = x[:, None]
    if rate != SCREEN_RATE:
        import soxr

        x = np.asarray(soxr.resample(x, rate, SCREEN_RATE), dtype=np.float64)
    return np.repeat(x, 2, axis=1) if x.shape[1] == 1 else x[:, :2]


def read_wav(data: bytes) -> tuple[np.ndarray, int]:
    """float ``(frames, channels)`` and the rate of an int16 WAV (:func:`wav_bytes`)."""
    with wave.open(io.BytesIO(data)) as w:
        ch, rate = w.getnchannels(), w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.reshape(-1, ch).astype(np.float64) / 32767.0, rate


def ideal_listener(kind: str, audio: np.ndarray, rate: int, headphones: bool = True) -> int:
    """What an attentive listener picks from a trial's audio (0..2): on headphones each ear
    hears its channel; over loudspeakers the ears hear the channels' sum. For the tests and the
    scripted rater (a bot that analyses the audio like this passes too: the screen checks the
    listening setup of people, it cannot tell a person from such a program)."""
    one = TONE_S if kind == "antiphase" else NOISE_S
    n, g = int(one * rate), int(GAP_S * rate)
    seg = [audio[i * (n + g) : i * (n + g) + n] for i in range(3)]
    if kind == "antiphase":
        if headphones:
            return int(np.argmin([np.sqrt(np.mean(s**2)) for s in seg]))
        return int(np.argmin([np.sqrt(np.mean((s[:, 0] + s[:, 1]) ** 2)) for s in seg]))
    if not headphones:  # no interaural difference survives the sum: a guess
        return 0
    f = np.fft.rfftfreq(n, 1.0 / rate)
    band = (f >= HUGGINS_HZ * (1 - HUGGINS_BAND)) & (f <= HUGGINS_HZ * (1 + HUGGINS_BAND))
    corr = []
    for s in seg:
        cross = np.fft.rfft(s[:, 0]) * np.conj(np.fft.rfft(s[:, 1]))
        corr.append(float(np.real(cross[band]).sum()))
    return int(np.argmin(corr))


def score_screen(trials: list[ScreenTrial], answers: list[int | None]) -> dict:
    """``{passed, correct, trials, tests: {kind: {correct, trials, passed}}, answers}``: every
    kind of screen must be passed (at least :data:`PASS` of :data:`TRIALS`)."""
    tests: dict[str, dict] = {}
    for t, a in zip(trials, answers, strict=True):
        d = tests.setdefault(t.kind, {"correct": 0, "trials": 0})
        d["trials"] += 1
        d["correct"] += int(a == t.answer)
    for d in tests.values():
        d["passed"] = d["correct"] >= min(PASS, d["trials"])
    return {
        "passed": all(d["passed"] for d in tests.values()),
        "correct": sum(d["correct"] for d in tests.values()),
        "trials": sum(d["trials"] for d in tests.values()),
        "tests": tests,
        "answers": list(answers),
    }


def failed_screens(result: dict) -> list[str]:
    """The exclusion reasons of a screen result (``screened out: headphones``, ...)."""
    tests = result.get("tests") or {"antiphase": result}  # results stored before Huggins
    out = []
    for kind, d in tests.items():
        if not d.get("passed"):
            what = "headphone check" if kind == "antiphase" else "huggins pitch"
            out.append(
                f"screened out: {REASON.get(kind, kind)} ({what} {d['correct']}/{d['trials']})"
            )
    return out


@dataclass(frozen=True)
class TestScreening:
    """Which rules exclude a rater from a test's results."""

    __test__ = False

    rules: stats.ScreeningRules = stats.ScreeningRules()
    mushra: stats.MushraRules = stats.MushraRules()
    require_headphones: bool = True
    max_ab_check_failures: int = 0
    """A/B check pairs (the low anchor against its clean source) a rater may get wrong."""


SCREEN_TEXT = {
    "antiphase": "headphone screen (Woods et al. 2017 antiphase test, >= 5 of 6 correct)",
    "huggins": "headphone screen (Milne et al. 2021 Huggins pitch, >= 5 of 6 correct)",
    "both": "headphone screens (Woods et al. 2017 antiphase test and Milne et al. 2021 "
    "Huggins pitch, >= 5 of 6 correct in each)",
}


def screening_description(scr: TestScreening, kind: Any, screen: str = "antiphase") -> str:
    """The screening rule a test's raters went through, in words: the headphone screen, then
    the kind's own rule (``kind`` is a :class:`evaluation.listening.kinds.TestKind`; None for
    a kind the app no longer makes, such as an old ``cmos`` test row)."""
    parts = []
    if scr.require_headphones:
        parts.append(SCREEN_TEXT.get(screen, SCREEN_TEXT["antiphase"]))
    own = kind.screening_text(scr) if kind is not None else None
    if own:
        parts.append(own)
    return "; ".join(parts)


def _text_or_none(v: object) -> str | None:
    """A SQL text column through pandas: NULL arrives as None or NaN (a float, and truthy)."""
    return v if isinstance(v, str) and v else None


def _json_or_none(v: object) -> dict | None:
    """The stored headphone result, or None for a rater who never took the check (a dropout:
    NULL, which pandas hands over as NaN)."""
    t = _text_or_none(v)
    if t is None:
        return None
    try:
        d = json.loads(t)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


RATER_COLUMNS = ["rater_id", "seq", "crowd_id", "answered", "finished", "headphones"]
"""The first columns of :func:`rater_table`; each kind's screening columns follow, then
``excluded`` and ``reasons``."""


def _plain(v: Any) -> Any:
    """A kind's outcome as a plain number (NaN stays a float, a count an int)."""
    if isinstance(v, np.integer | bool | np.bool_):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def rater_table(
    raters: pd.DataFrame,
    outcomes: Sequence[tuple[Sequence[str], pd.DataFrame | None]] = (),
    screening: TestScreening = TestScreening(),
) -> pd.DataFrame:
    """One row per rater of a test with every screening outcome, ``excluded`` and ``reasons``.

    ``outcomes``: per test kind, its screening columns and its frame of them (index
    ``rater_id``, with ``reasons``; None when the test has nothing of that kind), as
    :meth:`evaluation.listening.kinds.base.TestKind.screen` gives them."""
    own = list(dict.fromkeys(c for cols, _ in outcomes for c in cols))
    cols = [*RATER_COLUMNS, *own, "excluded", "reasons"]
    if raters.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for _, r in raters.iterrows():
        rid = r["rater_id"]
        reasons: list[str] = []
        hp = _json_or_none(r.get("headphone"))
        hp_txt = "not done" if hp is None else f"{hp['correct']}/{hp['trials']}"
        if screening.require_headphones and hp is None:
            reasons.append("headphone check not done")
        elif screening.require_headphones and not hp.get("passed"):
            reasons += failed_screens(hp)
        values: dict[str, Any] = dict.fromkeys(own)
        for kcols, frame in outcomes:
            if frame is None or rid not in frame.index:
                continue
            got = frame.loc[rid]
            values.update({c: _plain(got[c]) for c in kcols})
            if got["reasons"]:
                reasons.append(str(got["reasons"]))
        rows.append(
            [
                rid,
                int(r["seq"]),
                _text_or_none(r.get("crowd_id")),
                int(r.get("answered") or 0),
                _text_or_none(r.get("finished_at")) is not None,
                hp_txt,
                *values.values(),
                bool(reasons),
                "; ".join(reasons),
            ]
        )
    return pd.DataFrame(rows, columns=cols)


__all__ = [
    "HEADPHONE_PASS",
    "HEADPHONE_TRIALS",
    "MODES",
    "PASS",
    "RATER_COLUMNS",
    "SCREEN_RATE",
    "TRIALS",
    "ScreenTrial",
    "TestScreening",
    "duration_ms",
    "failed_screens",
    "huggins_pair",
    "ideal_listener",
    "read_wav",
    "new_screen",
    "rater_table",
    "render",
    "score_screen",
    "screen_kinds",
    "screen_mode",
    "screening_description",
    "to_screen_rate",
    "wav_bytes",
]
