"""The headphone screen of the rater flow: the keys stay here; the page gets "trial n of N" and
each trial's audio, and a failed screen ends the session.

Why the server keeps the keys: a page that knew the answers could pass a rater on
loudspeakers. A pick counts only for a trial whose audio this server sent at least its
duration ago. The screens themselves (Woods et al.'s antiphase tones, Milne et al.'s Huggins
pitch) are :mod:`evaluation.listening.screening`'s.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from app.listening.answers import Answer
from app.listening.flow import Denied, NotYet, RaterFlow
from app.store.listening import RaterSession, ScreenRow, TestRow
from backends.errors import InvalidRequest
from evaluation.listening import screening

MAX_SCREEN_FETCHES = 10
"""Plays (fetches) of one screen trial: replays are fine, a fetch loop is not (each is a
~0.7 MB WAV rendered on the server)."""


class ScreenState(Answer):
    """Where a rater is in the headphone screen (the status' ``screen``; no keys)."""

    trials: int
    answered: int
    next: int | None
    """The next trial to answer (None: every one is answered)."""
    kind: str | None
    """That trial's screen: ``antiphase`` or ``huggins``."""
    kinds: list[str]
    """Every trial's screen, in order."""


class ScreenProgress(Answer):
    """``POST .../headphone`` and ``POST .../screen/{n}``: the trials answered; once the
    last is, the screen's outcome (``correct``, ``passed``, ``screened_out``: absent before)."""

    answered: int
    trials: int
    correct: int | None = None
    done: bool
    passed: bool | None = None
    screened_out: bool | None = None


class Screening(RaterFlow):
    """The screen's trials, their audio and answers, its outcome and the screen-out."""

    def _trials(self, t: TestRow, r: RaterSession) -> list[ScreenRow]:
        """The rater's screen trials (made on first need, from the OS's random source)."""
        rows = self.tests.screen(t.test_id, r.rater_id)
        if not rows:
            new = screening.new_screen(screening.screen_mode(t.config))
            self.tests.add_screen(
                t.test_id,
                r.rater_id,
                [(x.kind, x.to_json(), screening.duration_ms(x)) for x in new],
            )
            rows = self.tests.screen(t.test_id, r.rater_id)
        return rows

    def screen_state(self, t: TestRow, r: RaterSession) -> dict[str, Any]:
        """Where the rater is in the screen (the status' ``screen``; no keys)."""
        rows = self._trials(t, r)
        nxt = next((x for x in rows if x.answer is None), None)
        return ScreenState(
            trials=len(rows),
            answered=sum(x.answer is not None for x in rows),
            next=None if nxt is None else int(nxt.n),
            kind=None if nxt is None else nxt.kind,
            kinds=[x.kind for x in rows],
        ).wire()

    def _screen_rater(
        self, test_id: str, token: str
    ) -> tuple[TestRow, RaterSession, list[ScreenRow]]:
        t = self.load_test(test_id)
        r = self.rater(test_id, token)
        if not r.consent_at:
            raise Denied("consent first")
        self.require_in(r)
        if screening.screen_mode(t.config) == "none":
            raise InvalidRequest("this test has no headphone screen")
        if r.headphone:
            raise Denied("the headphone screen is done; it takes one attempt")
        return t, r, self._trials(t, r)

    @staticmethod
    def _trial_no(rows: list[ScreenRow], n: Any) -> int:
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(rows):
            raise InvalidRequest(f"trial must be 0..{len(rows) - 1}")
        return n

    def screen_audio(self, test_id: str, token: str, n: Any) -> bytes:
        """Trial ``n``'s audio (stereo 48 kHz WAV); its first fetch starts its play clock."""
        t, r, rows = self._screen_rater(test_id, token)
        row = rows[self._trial_no(rows, n)]
        if int(row.fetches) >= MAX_SCREEN_FETCHES:
            raise Denied(f"trial {n + 1} was played {MAX_SCREEN_FETCHES} times; answer it")
        wav = screening.wav_bytes(screening.render(screening.ScreenTrial.from_json(row.key)))
        self.tests.screen_fetched(test_id, r.rater_id, n, time.time())
        return wav

    @staticmethod
    def _check_played(row: ScreenRow, now: float) -> None:
        n = int(row.n) + 1
        if row.fetched_at is None:
            raise NotYet(f"listen first: trial {n} was not played")
        if now - float(row.fetched_at) < float(row.duration_ms) / 1000.0:
            raise NotYet(f"listen first: trial {n} has not had time to play to its end")

    def screen_answer(self, test_id: str, token: str, n: Any, answer: Any) -> dict[str, Any]:
        """One trial's pick (the first answer stands); after the last, the screen's outcome."""
        return self.headphone(test_id, token, {n: answer} if isinstance(n, int) else n)

    def headphone(self, test_id: str, token: str, answers: Any) -> dict[str, Any]:
        """Answers to the screen's trials: a list (every trial at once) or ``{trial: pick}``.
        A pick counts only for a trial whose audio this server sent at least its duration ago
        (else nothing is stored: 409). When every trial is answered the screen is scored once;
        a failed screen ends the session (screen-out code and link)."""
        t, r, rows = self._screen_rater(test_id, token)
        if isinstance(answers, list):
            if len(answers) != len(rows):
                raise InvalidRequest(f"the headphone screen needs {len(rows)} answers")
            answers = dict(enumerate(answers))
        if not isinstance(answers, dict) or not answers:
            raise InvalidRequest("answers: a list of picks, or {trial: pick}")
        picks: dict[int, int] = {}
        for k, a in answers.items():
            n = self._trial_no(rows, int(k) if isinstance(k, str) and k.isdigit() else k)
            if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a <= 2:
                raise InvalidRequest("a pick is the interval number 0, 1 or 2")
            picks[n] = a
        now = time.time()
        for n in picks:
            if rows[n].answer is None:
                self._check_played(rows[n], now)
        for n, a in picks.items():
            self.tests.screen_answer(test_id, r.rater_id, n, a)
        rows = self.tests.screen(test_id, r.rater_id)
        left = sum(x.answer is None for x in rows)
        if left:
            return ScreenProgress(answered=len(rows) - left, trials=len(rows), done=False).wire()
        return self._score(t, r, rows)

    def _score(self, t: TestRow, r: RaterSession, rows: list[ScreenRow]) -> dict[str, Any]:
        """Score the answered screen once; a failed one ends the session."""
        result = screening.score_screen(
            [screening.ScreenTrial.from_json(x.key) for x in rows],
            [int(x.answer) for x in rows],
        )
        self.tests.update_rater(
            t.test_id,
            r.rater_id,
            headphone=json.dumps(result),
            headphone_pass=int(result["passed"]),
        )
        if not result["passed"]:
            code = str(t.config.get("screenout_code") or secrets.token_hex(4).upper())
            self.tests.screen_out(t.test_id, r.rater_id, code)
        return ScreenProgress(
            answered=len(rows),
            trials=len(rows),
            correct=result["correct"],
            done=True,
            passed=result["passed"],
            screened_out=not result["passed"],
        ).wire()

    def require_screened(self, t: TestRow, r: RaterSession) -> None:
        """Votes only after a passed screen (a failed one ended the session)."""
        self.require_in(r)
        if screening.screen_mode(t.config) != "none" and not r.headphone:
            raise Denied("the headphone screen comes first")

    @staticmethod
    def screenout_link(t: TestRow, code: str | None) -> dict[str, Any]:
        """The screen-out code and where to send the rater (``{code}`` filled in)."""
        url = t.config.get("screenout_url") or None
        if url and code:
            url = url.replace("{code}", code)
        return {"screenout_code": code, "redirect_url": url}


__all__ = ["MAX_SCREEN_FETCHES", "ScreenProgress", "ScreenState", "Screening"]
