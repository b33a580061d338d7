"""What every step of the rater flow shares: the test and the rater of a call, and its refusals.

Why a module of its own: enrolment (:mod:`.enrolment`), the headphone screen
(:mod:`.screening`), familiarisation (:mod:`.familiarisation`) and rating (:mod:`.rating`)
each start from "which test, which rater, may they do this?"; they answer it here, the same
way. Every call names the test and carries the rater's token; the token is checked against
its hash on every call.
"""

from __future__ import annotations

import re
from typing import Any

from app.store import UnknownItem
from app.store.listening import RaterSession, TestRow, TestStore
from backends.errors import Conflict, Forbidden, InvalidRequest
from evaluation.listening.design import Design

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32,128}$")
DEFAULT_TITLE = "Listening test"
"""What raters see as the title when the test has no public title (never the admin's name)."""
DEFAULT_CONSENT = (
    "You will listen to short speech clips and rate them. Your answers are stored with an "
    "anonymous id (and, if you came from a crowdsourcing platform, its participant id) and are "
    "used only to compare speech systems. Please use headphones in a quiet place. You can stop "
    "at any time; closing the page keeps your progress."
)


class Denied(Forbidden):
    """The rater may not do this (bad token, closed test, not their item)."""


class NotYet(Conflict):
    """Listen-gating: the server has not seen enough playback for this vote."""


def check_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise InvalidRequest(f"{what} must be 1-64 letters, digits, '-' or '_'")
    return value


def public_title(test: TestRow) -> str:
    """The title the rater page shows: the test's public title, not the admin's test name."""
    return str(test.config.get("title") or DEFAULT_TITLE)


def consent_text(test: TestRow) -> str:
    """The consent text raters read: the test's own, else :data:`DEFAULT_CONSENT`."""
    return str(test.config.get("consent") or DEFAULT_CONSENT)


def design_of(test: TestRow) -> Design:
    return Design.from_dict(test.config["design"])


class RaterFlow:
    """The store, and the checks every step of the flow starts with."""

    def __init__(self, store: Any):
        self.tests = TestStore(store)
        self.store = store

    def rater(self, test_id: str, token: Any) -> RaterSession:
        """The rater this token belongs to in this test (checked against its hash), or Denied."""
        check_id(test_id, "test id")
        if not isinstance(token, str) or not TOKEN_RE.match(token):
            raise Denied("missing or malformed rater token")
        r = self.tests.rater_for_token(test_id, token)
        if r is None:
            raise Denied("unknown rater token for this test")
        return r

    def load_test(self, test_id: str, *, open_only: bool = True) -> TestRow:
        """The test (404 if there is none); ``open_only``: refused unless it takes votes."""
        t = self.tests.get_test(check_id(test_id, "test id"))
        if t is None:
            raise UnknownItem(f"no test {test_id!r}")
        if open_only and t.status != "open":
            raise Denied(f"this test is {t.status or 'not open'}; it does not take votes")
        return t

    @staticmethod
    def require_in(r: RaterSession) -> None:
        """A screened-out rater's session has ended."""
        if r.screened_out_at:
            raise Denied("screened out: this session has ended (the headphone screen failed)")

    @staticmethod
    def natural_system(test: TestRow, design: Design) -> str | None:
        """The test's first natural (recorded) system, if it has one."""
        nat = {s["name"] for s in test.config.get("systems") or [] if s.get("natural")}
        return next((s for s in design.systems if s in nat), None)


__all__ = [
    "DEFAULT_CONSENT",
    "DEFAULT_TITLE",
    "Denied",
    "NotYet",
    "RaterFlow",
    "check_id",
    "consent_text",
    "design_of",
    "public_title",
]
