"""Familiarisation: before the first item, the scale's ends, played and not rated.

Why the kind picks the clips: what shows a scale's ends depends on the scale (MOS the low
anchor and the best clip there is, the gold "5" else a natural recording; MUSHRA the reference
and the low anchor; A/B one pair; a glitch hunt one clip: :meth:`TestKind.familiar`); the flow
here sends them and holds "Continue" until each had time to play.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from app.listening.answers import Answer
from app.listening.flow import NotYet, RaterFlow, design_of
from app.store import now_iso
from app.store.listening import RaterSession, TestRow
from backends.errors import InvalidRequest
from evaluation.listening import screening
from evaluation.listening.kinds.base import PLAYED_SHARE, Familiar


class FamiliarClips(Answer):
    """The status' ``familiar`` (the familiarisation step): each clip's label, in the order
    ``GET .../familiar/{k}`` serves them."""

    clips: list[str]


class Familiarised(Answer):
    """``POST /ll/listen/{id}/familiar`` ("Continue")."""

    familiarised: Literal[True]


class Familiarisation(RaterFlow):
    """Which clips a rater hears first, their audio, and "Continue"."""

    def needs_familiar(self, t: TestRow, r: RaterSession, answered: int) -> bool:
        return (
            bool(t.config.get("familiarise"))
            and not r.familiarised_at
            and answered == 0
            and bool(self.familiar_clips(t, r))
        )

    def familiar_clips(self, t: TestRow, r: RaterSession) -> list[tuple[str, str]]:
        """``(label, take id)`` of the clips that show the scale's ends (the kind's choice;
        the systems in turn per rater)."""
        design = design_of(t)
        stim = self.tests.stimuli(t.test_id)

        def take(kind: str, system: str | None, prompt: str | None) -> str | None:
            """The stimulus of this kind and system on ``prompt`` (None: on any prompt)."""
            for s in stim:
                if s.kind == kind and s.system_id == system and prompt in (None, s.prompt_id):
                    return s.take_id
            return None

        here = Familiar(take, int(r.seq), self.natural_system(t, design))
        got = design.test_kind.familiar(design, here)
        return [(label, tid) for label, tid in got if tid]

    def _familiar_rater(
        self, test_id: str, token: str
    ) -> tuple[TestRow, RaterSession, list[tuple[str, str]]]:
        t = self.load_test(test_id)
        r = self.rater(test_id, token)
        self.require_in(r)
        clips = self.familiar_clips(t, r)
        if not t.config.get("familiarise") or not clips:
            raise InvalidRequest("this test has no familiarisation")
        return t, r, clips

    def familiar_audio(self, test_id: str, token: str, k: Any) -> bytes:
        """Familiarisation clip ``k`` as a stereo 48 kHz WAV (the rate and layout of every
        screen clip, whatever the system's); its first fetch starts its play clock."""
        t, r, clips = self._familiar_rater(test_id, token)
        if not isinstance(k, int) or not 0 <= k < len(clips):
            raise InvalidRequest(f"clip must be 0..{len(clips) - 1}")
        tk = self.store.load_take(clips[k][1])
        got = json.loads(r.familiar or "{}")
        if str(k) not in got:
            got[str(k)] = time.time()
            self.tests.update_rater(test_id, r.rater_id, familiar=json.dumps(got))
        return screening.wav_bytes(screening.to_screen_rate(tk.audio, tk.sample_rate))

    def familiarised(self, test_id: str, token: str) -> dict[str, Any]:
        """ "Continue": allowed once every clip was sent and had time to play."""
        t, r, clips = self._familiar_rater(test_id, token)
        got = json.loads(r.familiar or "{}")
        durs = self.tests.durations_ms([c[1] for c in clips])
        now = time.time()
        for k, d in enumerate(durs):
            at = got.get(str(k))
            if at is None or now - float(at) < PLAYED_SHARE * d / 1000.0:
                raise NotYet(f"listen first: {clips[k][0]} has not been played to its end")
        if not r.familiarised_at:
            self.tests.update_rater(test_id, r.rater_id, familiarised_at=now_iso())
        return Familiarised(familiarised=True).wire()


__all__ = ["FamiliarClips", "Familiarisation", "Familiarised"]
