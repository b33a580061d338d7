"""Enrolment: a rater joins (or resumes), agrees, gets their items and, at the end, the
completion code (the questionnaire pages are :mod:`.questionnaire`'s).

Why here: who a rater is and which design row and items they get are decided once, at the
join and the first status, under the store's write lock (:meth:`TestStore.join`), so two
raters joining at once cannot get the same row by accident, and a resumed rater gets the same
items in the same order.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from typing import Any, Literal

from app.listening import refill
from app.listening.answers import Answer
from app.listening.flow import Denied, RaterFlow, consent_text, design_of, public_title
from app.listening.refill import DROPOUT_AFTER_S
from app.store import Assignment, UnknownItem, now_iso
from app.store.listening import RaterSession, TestRow
from backends.errors import InvalidRequest
from evaluation.listening.design import (
    ANCHOR,
    TRAP,
    Design,
    all_row_cells,
    choose_row,
    plan,
)

CROWD_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
CROWD_KEYS = ("PROLIFIC_PID", "workerId", "crowd_id", "participant")
MAX_RATERS = 5000
"""Joins per test (bounds what an anonymous visitor can make the server store)."""


class Joined(Answer):
    """``POST /ll/listen/{id}/join``: the rater's token (sent back in ``X-Rater-Token``), their
    id, and whether this crowd id joined before (the same rater, resumed)."""

    token: str
    rater_id: str
    resumed: bool


class TestInfo(Answer):
    """``GET /ll/listen/{id}/info``: what anyone may see before joining (``name`` is the
    public title too: the admin's test name stays on the server)."""

    __test__ = False  # not a pytest class

    test_id: str
    name: str
    title: str
    kind: str
    status: str | None
    consent: str


class Consented(Answer):
    """``POST /ll/listen/{id}/consent``."""

    consented: Literal[True]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def assignment_id(test_id: str, rater_id: str, position: int) -> str:
    return hashlib.sha256(f"{test_id}:{rater_id}:{position}".encode()).hexdigest()[:24]


class Enrolment(RaterFlow):
    """Join, consent, the rater's items and their completion."""

    def join(
        self,
        test_id: str,
        crowd_id: str | None = None,
        source: str | None = None,
        study_id: str | None = None,
        session_id: str | None = None,
    ) -> dict:
        """A session for a rater. One crowd id is one rater: joining again with it resumes that
        rater (same id, same place, a screen-out stands) with a new token; the old one stops
        working. A new rater gets the design row that most needs ratings (:func:`choose_row`)."""
        t = self.load_test(test_id)
        for v, what in ((crowd_id, "crowd id"), (study_id, "study id"), (session_id, "session id")):
            if v is not None and (not isinstance(v, str) or not CROWD_RE.match(v)):
                raise InvalidRequest(f"the {what} must be 1-128 letters, digits or . _ : @ -")
        if source is not None and source not in CROWD_KEYS:
            source = None
        cfg = t.config
        design = design_of(t)
        target, rule = refill.target_of(cfg)
        dropout = float(cfg.get("dropout_after_s") or DROPOUT_AFTER_S)
        # target_valid: the results' exclusions, read before the join's write lock is taken
        excluded = self.exclusions.excluded(self.tests, test_id) if rule == "valid" else set()

        def row(raters: list[RaterSession]) -> int | None:
            if len(raters) >= int(cfg.get("max_raters") or MAX_RATERS):
                raise Denied("this test has all the raters it takes")
            rows = refill.rater_rows(raters, excluded, time.time(), dropout)
            got = choose_row(design, rows, target)
            if got is None:
                raise Denied("this test is full: it has all the ratings it needs. Thank you!")
            return got

        all_row_cells(design)  # planned (and cached) before the write lock is taken
        token = new_token()
        r, resumed = self.tests.join(
            test_id,
            token,
            crowd_id,
            source,
            study_id=study_id,
            session_id=session_id,
            choose_row=row,
        )
        self.assign(t, r)
        return Joined(token=token, rater_id=r.rater_id, resumed=resumed).wire()

    def assign(self, test: TestRow, rater: RaterSession) -> list[Assignment]:
        """The rater's assignments (written once from the deterministic plan; resumable)."""
        have = self.store.assignments(test.test_id, rater.rater_id)
        design = design_of(test)
        seq = int(rater.seq)
        row = rater.design_row
        items = plan(design, seq) if row is None else plan(design, int(row), order_seed=seq)
        if len(have) == len(items):
            return have
        find = self._finder(test.test_id)
        clean = self.ab_clean(test, design, seq)
        for it in items:
            takes, conds, roles = [], [], []
            for sl in it.slots:
                if it.stimulus == "ab_check":  # the degraded anchor against a clean clip
                    s = (
                        find("anchor", ANCHOR, it.prompt, check=True)
                        if sl.role == "anchor"
                        else find("item", clean, it.prompt or design.prompts[0])
                    )
                elif it.stimulus in {"anchor", "gold", "trap"}:
                    pseudo = {"gold": sl.system, "anchor": ANCHOR, "trap": TRAP}[it.stimulus]
                    s = find(it.stimulus, pseudo, it.prompt, check=True)
                elif sl.role == "anchor":  # MUSHRA: low (3.5 kHz) or mid (7 kHz) anchor
                    s = find("anchor", sl.system, it.prompt)
                else:
                    s = find("item", sl.system, it.prompt)
                takes.append(s.take_id)
                conds.append(s.condition)
                roles.append(sl.role)
            a = Assignment(
                assignment_id=assignment_id(test.test_id, rater.rater_id, it.position),
                test_id=test.test_id,
                rater_id=rater.rater_id,
                position=it.position,
                take_id=takes[0],
                take_b_id=takes[1] if design.test_kind.paired else None,
                role=it.role,
                expected=it.expected,
                slots=tuple(takes),
                condition=conds[0],
                meta={
                    "roles": roles,
                    "conditions": conds,
                    "systems": [
                        clean if it.stimulus == "ab_check" and sl.role == "gold" else sl.system
                        for sl in it.slots
                    ],
                    "prompt_id": it.prompt,
                    **it.meta,
                },
            )
            self.store.add_assignment(a)
        return self.store.assignments(test.test_id, rater.rater_id)

    def _finder(self, test_id: str):
        """``find(kind, system, prompt, check=False)``: the test's stimulus; a check item's
        falls back to the first of its kind (a test made before check items varied has one
        set, without prompts)."""
        stim = self.tests.stimuli(test_id)
        by = {(s.kind, s.system_id, s.prompt_id): s for s in stim}
        first: dict[tuple[str, str | None], Any] = {}
        for s in stim:
            first.setdefault((s.kind, s.system_id), s)

        def find(kind: str, system: str, prompt: str | None, *, check: bool = False):
            s = by.get((kind, system, prompt)) or (
                first.get((kind, system)) if not prompt or check else None
            )
            if s is None:
                raise UnknownItem(f"no {kind} stimulus for {system} / {prompt}: generate first")
            return s

        return find

    def ab_clean(self, test: TestRow, design: Design, seq: int) -> str:
        """The A/B check pairs' clean side: the natural recording when the test has one, else
        the systems in turn per rater (a take of one system under test as "the clean side" for
        everyone would fail raters who honestly judge that system)."""
        return self.natural_system(test, design) or design.systems[seq % len(design.systems)]

    def info(self, test_id: str) -> dict[str, Any]:
        """What anyone may see before joining: the public title, type, consent text and whether
        open (``name`` is the public title too: the admin's test name stays on the server)."""
        t = self.load_test(test_id, open_only=False)
        title = public_title(t)
        return TestInfo(
            test_id=test_id,
            name=title,
            title=title,
            kind=t.kind,
            status=t.status,
            consent=consent_text(t),
        ).wire()

    def consent(self, test_id: str, token: str) -> dict[str, Any]:
        self.load_test(test_id)
        r = self.rater(test_id, token)
        if not r.consent_at:
            self.tests.update_rater(test_id, r.rater_id, consent_at=now_iso())
        return Consented(consented=True).wire()

    def finish(self, t: TestRow, r: RaterSession) -> dict[str, Any]:
        """The code the rater gets at the end, given once, and the link: the test's
        ``excluded_code`` when it has one and its screening leaves this rater out of the
        results (so a researcher can withhold payment), else its completion code, else one
        per rater."""
        cfg = t.config
        code = r.completion_code
        if not code:
            if cfg.get("excluded_code") and self.excluded(t, r):
                code = str(cfg["excluded_code"])
            else:
                code = cfg.get("completion_code") or secrets.token_hex(4).upper()
            self.tests.update_rater(
                t.test_id, r.rater_id, completion_code=code, finished_at=now_iso()
            )
        redirect = cfg.get("redirect_url") or None
        if redirect:
            redirect = redirect.replace("{code}", code)
        return {"completion_code": code, "redirect_url": redirect}

    def excluded(self, t: TestRow, r: RaterSession) -> bool:
        """Whether the test's screening (the results' own rule: check items, traps,
        straight-lining, unplayed items, A/B check pairs, BS.1534-3) leaves this rater out."""
        from evaluation.listening.results import screened_raters

        raters = screened_raters(self.tests.test_data(t.test_id, times=False))
        mine = raters[raters["rater_id"] == r.rater_id]
        return bool(not mine.empty and bool(mine["excluded"].iloc[0]))


__all__ = [
    "CROWD_KEYS",
    "DROPOUT_AFTER_S",
    "MAX_RATERS",
    "Consented",
    "Enrolment",
    "Joined",
    "TestInfo",
    "assignment_id",
    "new_token",
]
