"""The rater flow on the store: enrolment, the headphone screen, familiarisation and rating, as
one service the routes, the WebSocket handlers, the tests and the raters benchmark call.

Why one service over four modules: none of its callers may skip a check, so they all go
through :class:`Listening`; each step lives in its own module (:mod:`.enrolment`,
:mod:`.screening`, :mod:`.familiarisation`, :mod:`.rating`, over the shared checks of
:mod:`.flow`) and :meth:`Listening.status` says which step a rater is at.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer

from app.listening.answers import Answer
from app.listening.breaks import Breaks, BreakState
from app.listening.enrolment import Enrolment
from app.listening.familiarisation import FamiliarClips, Familiarisation
from app.listening.flow import (
    DEFAULT_CONSENT,
    DEFAULT_TITLE,
    Denied,
    NotYet,
    check_id,
    consent_text,
    design_of,
    public_title,
)
from app.listening.questionnaire import Page, Questionnaires
from app.listening.rating import Item, Rating, show_text
from app.listening.screening import ScreenState
from app.listening.texts import RaterTexts, rater_texts
from app.store.listening import RaterSession, TestRow
from evaluation.listening import screening

STAGES = (
    "consent",
    "questionnaire",
    "screened_out",
    "screen",
    "familiarise",
    "item",
    "break",
    "done",
)
"""The steps a rater can be at (the status' ``stage``)."""

QuestionnairePage = Annotated[Page, PlainSerializer(Page.to_dict, return_type=Page)]
"""A questionnaire page as the rater page draws it (:meth:`Page.to_dict`: a field's unset
options and bounds left out)."""


class RaterTest(Answer):
    """The status' ``test``: what the rater page shows of the test (no admin name, no keys)."""

    test_id: str
    name: str
    """The public title (as ``title``: the admin's test name stays on the server)."""
    title: str
    kind: str
    status: str | None
    ab_mode: str
    consent: str
    instructions: str
    screening: str
    """The headphone screen: ``antiphase``, ``huggins``, ``both`` or ``none``."""
    headphone_check: bool
    texts: RaterTexts


class HeadphoneResult(Answer):
    """The status' ``headphone``: the screen's outcome once it was scored."""

    passed: bool | None
    correct: int | None
    trials: int | None


class RaterStatus(Answer):
    """``GET /ll/listen/{id}/status``: where the rater is (``stage``) and what that step
    shows; ``break`` only during a break, ``completion_code`` once done, ``screenout_code``
    once screened out (``redirect_url`` with either)."""

    test: RaterTest
    rater_id: str
    consented: bool
    headphone: HeadphoneResult | None
    screen: ScreenState | None
    familiar: FamiliarClips | None
    screened_out: bool
    total: int
    answered: int
    finished: bool
    item: Item | None
    questionnaire: QuestionnairePage | None
    """The questionnaire page due (None: none)."""
    stage: Literal[STAGES]  # type: ignore[valid-type]
    screenout_code: str | None = None
    completion_code: str | None = None
    redirect_url: str | None = None
    pause: BreakState | None = Field(None, alias="break")


class VoteStored(Answer):
    """``POST /ll/listen/{id}/vote``: whether this answer was stored now (false: a re-sent
    one, stored before), the rater's progress and the next item (None: none left);
    ``completion_code`` and ``redirect_url`` once the last item is answered."""

    stored: bool
    answer_id: str
    answered: int
    total: int
    finished: bool
    item: Item | None
    completion_code: str | None = None
    redirect_url: str | None = None


class Listening(Enrolment, Familiarisation, Rating, Breaks, Questionnaires):
    """Every step of a rater's session (see the module's docstring)."""

    def status(self, test_id: str, token: str) -> dict[str, Any]:
        """Everything the rater page needs to (re)start: where the rater is, and the next item."""
        t = self.load_test(test_id, open_only=False)
        r = self.rater(test_id, token)
        cfg = t.config
        mode = screening.screen_mode(cfg)
        items = self.assign(t, r)
        done = self.tests.answered(test_id, r.rater_id)
        self.tests.update_rater(test_id, r.rater_id, seen_at=time.time())
        out_ = bool(r.screened_out_at)
        nxt = None if out_ else next((a for a in items if a.assignment_id not in done), None)
        hp = json.loads(r.headphone) if r.headphone else None
        out: dict[str, Any] = {
            "test": {
                "test_id": test_id,
                "name": public_title(t),
                "title": public_title(t),
                "kind": t.kind,
                "status": t.status,
                "ab_mode": design_of(t).ab_mode,
                "consent": consent_text(t),
                "instructions": cfg.get("instructions") or "",
                "screening": mode,
                "headphone_check": mode != "none",
                "texts": rater_texts(t.kind, cfg, consent_text(t)),
            },
            "rater_id": r.rater_id,
            "consented": bool(r.consent_at),
            "headphone": None
            if hp is None
            else {k: hp.get(k) for k in ("passed", "correct", "trials")},
            "screen": None,
            "familiar": None,
            "screened_out": out_,
            "total": len(items),
            "answered": len(done),
            "finished": not out_ and nxt is None,
            "item": None if nxt is None else self.item(t, nxt).__dict__,
        }
        out["questionnaire"] = self.page_state(t, r, len(done), len(items))
        out.update(self._stage(t, r, hp, nxt, len(done), out["questionnaire"]))
        if out["stage"] == "item":  # the session cap: a break page before the next item
            pause = self.break_state(t, r, len(done), len(items))
            if pause is not None:
                out.update(stage="break", item=None, **{"break": pause.__dict__})
        return RaterStatus.of(out)

    def _stage(
        self, t: TestRow, r: RaterSession, hp: dict | None, nxt: Any, answered: int, page: Any
    ) -> dict[str, Any]:
        """Which step the rater is at, and what that step shows (``page``: the questionnaire
        page due, :mod:`.questionnaire`)."""
        cfg = t.config
        if not r.consent_at:
            return {"stage": "consent"}
        if page is not None and page["at"] == "start" and not r.screened_out_at:
            return {"stage": "questionnaire"}
        if r.screened_out_at:
            return {"stage": "screened_out", **self.screenout_link(t, r.screenout_code)}
        if screening.screen_mode(cfg) != "none" and hp is None:
            return {"stage": "screen", "screen": self.screen_state(t, r)}
        if page is not None:  # a page after item N, or at the end (before the code)
            return {"stage": "questionnaire", "item": None}
        if nxt is None:
            return {"stage": "done", **self.finish(t, r)}
        if self.needs_familiar(t, r, answered):
            return {
                "stage": "familiarise",
                "familiar": {"clips": [c[0] for c in self.familiar_clips(t, r)]},
            }
        return {"stage": "item"}

    def vote(self, test_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store one answer (idempotent on ``answer_id``; one per item) and say what is next.
        Raises on any problem (:meth:`Rating.store_vote`)."""
        t = self.load_test(test_id)
        r = self.rater(test_id, token)
        if isinstance(body, dict) and body.get("assignment_id") not in self.tests.answered(
            test_id, r.rater_id
        ):  # a re-sent answer stays idempotent; a new one waits for the break's end
            self.require_no_break(t, r)
            self.require_no_page(t, r)
        answer_id, created = self.store_vote(t, r, body)
        st = self.status(test_id, token)
        return VoteStored.of(
            {
                "stored": created,
                "answer_id": answer_id,
                "answered": st["answered"],
                "total": st["total"],
                "finished": st["finished"],
                "item": st["item"],
                **({k: st[k] for k in ("completion_code", "redirect_url") if k in st}),
            }
        )


__all__ = [
    "STAGES",
    "HeadphoneResult",
    "RaterStatus",
    "RaterTest",
    "VoteStored",
    "DEFAULT_CONSENT",
    "DEFAULT_TITLE",
    "Denied",
    "Listening",
    "NotYet",
    "check_id",
    "consent_text",
    "public_title",
    "show_text",
]
