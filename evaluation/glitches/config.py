"""Every threshold of the detector in one frozen dataclass (each documented in docs/detector.md)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


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
    replay_min_ncc: float = 0.99
    """Normalised correlation at the full rate to call a repeat (and to follow it block by
    block). A re-sent chunk is the same samples (1.0, whatever its gain); a deterministic voice
    saying the same words twice in another context scored 0.98 (glitches/1 used 0.97)."""
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
    replay_min_level_db: float = -20.0
    """The loudest 10 ms frame of the repeated audio (and of the ``replay_block_s`` after it) must
    be within this of the speech level: a repeat of room noise or breath between words is not
    heard as a repeat."""
    replay_max_between_s: float = 0.3
    """Audio alone (no text, no reference): a repeat is a replay only when less than this much
    active speech lies between its source's end and its copy's start. A stream that restarts or
    re-sends a chunk or window re-sends the audio up to the seam (dev replays: <= 0.10 s, one follow block); a
    deterministic voice saying a sentence again says other words in between."""
    replay_block_s: float = 0.1
    """Block length used to measure how long a repeat goes on."""

    # -- gap
    gap_min_s: float = 0.15
    gap_long_s: float = 2.0
    """A pause at a seam at least this long (divided by the request's speed when < 1) is a gap.
    People pause over a second between sentences (P.501's talkers: 1.0 s and more); glitches/1
    used 1.0 s."""
    gap_edge_db: float = -10.0
    """'Abrupt' stop: the 20 ms before the silence are within this of the speech level (natural
    pauses fade out: on Piper their last 20 ms sit 24 dB or more below it; a human recording
    gated to digital silence, 16.5 dB; glitches/1 used -15 dB)."""
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
    tail_floor_db: float = 20.0
    """... and this far above the take's background (10th percentile of its 10 ms frame levels):
    a recording that ends in its own room noise or breath has not been cut."""
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
