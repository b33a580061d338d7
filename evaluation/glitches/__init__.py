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

The package has one module per finding kind (``click``, ``replay``, ``gap``, ``underrun``,
``length``: truncation and duration, ``crosstalk``) over the shared frame analysis
(``frames``), the prints and their alignment (``spectra``) and the correlation arithmetic
(``correlation``); ``analysis`` runs them all. This module is the public API.
"""

from evaluation.glitches.analysis import analyze, detect
from evaluation.glitches.config import DetectorConfig
from evaluation.glitches.findings import DETECTOR_VERSION, KINDS, Analysis, Check, Finding, Stall
from evaluation.glitches.length import predicted_duration_s
from evaluation.glitches.replay import text_repeats
from evaluation.glitches.underrun import player_stalls, playout, simulate_playback

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
    "text_repeats",
]
