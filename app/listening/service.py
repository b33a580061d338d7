"""The rater flow on the store: join, resume, consent, headphone check, play events, votes.

Why here and not in the routes: the HTTP routes, the WebSocket handlers, the tests and the
raters benchmark all go through these checks, so none of them can skip one. Every call names
the test and carries the rater's token; the token is checked against its hash on every call.

Listen-gating is the server's: a vote is refused unless play events accepted by the server
cover the item (MOS/glitch: the whole clip; A/B: >= 3 s of each side, or all of a shorter clip;
MUSHRA: the same for every stimulus on the screen). A play event counts only for a stimulus
this server streamed to that rater, and never for more audio than the wall-clock time since the
server started sending it.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from app.listening.blind import TARGET_LUFS, CommonFormat
from backends.base import InvalidRequest
from evaluation.listening import screening
from evaluation.listening.design import ANCHOR, Design, plan
from evaluation.listening.tables import TestStore
from evaluation.store import Assignment, UnknownItem, now_iso

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32,128}$")
CROWD_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
CROWD_KEYS = ("PROLIFIC_PID", "workerId", "crowd_id", "participant")
AB_MIN_MS = 3000.0
PLAYED_SHARE = 0.95
"""A clip counts as played to the end at this share of its duration (player rounding)."""
CLOCK_SLACK_MS = 400.0
MAX_RATERS = 5000
"""Joins per test (bounds what an anonymous visitor can make the server store)."""
MOS_LABELS = {5: "Excellent", 4: "Good", 3: "Fair", 2: "Poor", 1: "Bad"}
DEFAULT_TITLE = "Listening test"
"""What raters see as the title when the test has no public title (never the admin's name)."""


def public_title(test: dict[str, Any]) -> str:
    """The title the rater page shows: the test's public title, not the admin's test name."""
    return str(test["config"].get("title") or DEFAULT_TITLE)


class Denied(InvalidRequest):
    """The rater may not do this (bad token, closed test, not their item): HTTP 403."""


class NotYet(InvalidRequest):
    """Listen-gating: the server has not seen enough playback for this vote: HTTP 409."""


def check_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise InvalidRequest(f"{what} must be 1-64 letters, digits, '-' or '_'")
    return value


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _aid(test_id: str, rater_id: str, position: int) -> str:
    return hashlib.sha256(f"{test_id}:{rater_id}:{position}".encode()).hexdigest()[:24]


@dataclass
class Item:
    """What the page may know about an item: no system names, roles or expected answers."""

    assignment_id: str
    position: int
    kind: str
    slots: int
    labels: list[str]
    need_ms: list[float]
    """Playback per slot the server needs before it takes a vote (listen-gating)."""
    has_reference: bool = False
    text: str | None = None
    """The prompt's text, when the test shows it (``show_text``); the page sets it as text."""


SHOW_TEXT_KINDS = ("mos", "ab")
"""Test types that show the prompt's text unless the test says otherwise."""


def show_text(test: dict[str, Any]) -> bool:
    """Whether the vote page shows the prompt's text (tests made before the option: by type)."""
    v = test["config"].get("show_text")
    return bool(v) if v is not None else test["kind"] in SHOW_TEXT_KINDS


class Listening:
    def __init__(self, store: Any):
        self.tests = TestStore(store)
        self.store = store

    # -- sessions

    def _rater(self, test_id: str, token: Any) -> dict[str, Any]:
        check_id(test_id, "test id")
        if not isinstance(token, str) or not TOKEN_RE.match(token):
            raise Denied("missing or malformed rater token")
        r = self.tests.rater_for_token(test_id, token)
        if r is None:
            raise Denied("unknown rater token for this test")
        return r

    def _test(self, test_id: str, *, open_only: bool = True) -> dict[str, Any]:
        t = self.tests.get_test(check_id(test_id, "test id"))
        if t is None:
            raise UnknownItem(f"no test {test_id!r}")
        if open_only and t.get("status") != "open":
            raise Denied(f"this test is {t.get('status') or 'not open'}; it does not take votes")
        return t

    def join(self, test_id: str, crowd_id: str | None = None, source: str | None = None) -> dict:
        t = self._test(test_id)
        if crowd_id is not None and (not isinstance(crowd_id, str) or not CROWD_RE.match(crowd_id)):
            raise InvalidRequest("the crowd id must be 1-128 letters, digits or . _ : @ -")
        if source is not None and source not in CROWD_KEYS:
            source = None
        n = self.store.db.execute(
            "SELECT count(*) FROM test_raters WHERE test_id = ?", [test_id]
        ).fetchone()[0]
        if n >= int(t["config"].get("max_raters") or MAX_RATERS):
            raise Denied("this test has all the raters it takes")
        token = new_token()
        r = self.tests.join(test_id, token, crowd_id, source)
        self._assign(t, r)
        return {"token": token, "rater_id": r["rater_id"]}

    def _assign(self, test: dict[str, Any], rater: dict[str, Any]) -> list[Assignment]:
        """The rater's assignments (written once from the deterministic plan; resumable)."""
        have = self.store.assignments(test["test_id"], rater["rater_id"])
        design = Design.from_dict(test["config"]["design"])
        items = plan(design, int(rater["seq"]))
        if len(have) == len(items):
            return have
        stim = self.tests.stimuli(test["test_id"])
        by = {(s.kind, s.system_id, s.prompt_id): s for s in stim}
        first = {}
        for s in stim:
            first.setdefault((s.kind, s.system_id), s)

        def find(kind: str, system: str, prompt: str | None):
            s = by.get((kind, system, prompt)) or (
                first.get((kind, system)) if not prompt else None
            )
            if s is None:
                raise UnknownItem(f"no {kind} stimulus for {system} / {prompt}: generate first")
            return s

        for it in items:
            takes, conds, roles = [], [], []
            for sl in it.slots:
                if it.stimulus == "ab_check":  # the anchor against its clean source
                    s = (
                        find("anchor", ANCHOR, None)
                        if sl.role == "anchor"
                        else find("gold", sl.system, None)
                    )
                elif it.stimulus in {"anchor", "gold", "trap"}:
                    s = find(
                        it.stimulus,
                        sl.system
                        if it.stimulus == "gold"
                        else (ANCHOR if it.stimulus == "anchor" else "__trap__"),
                        None,
                    )
                elif sl.role == "anchor":  # MUSHRA: low (3.5 kHz) or mid (7 kHz) anchor
                    s = find("anchor", sl.system, it.prompt)
                else:
                    s = find("item", sl.system, it.prompt)
                takes.append(s.take_id)
                conds.append(s.condition)
                roles.append(sl.role)
            a = Assignment(
                assignment_id=_aid(test["test_id"], rater["rater_id"], it.position),
                test_id=test["test_id"],
                rater_id=rater["rater_id"],
                position=it.position,
                take_id=takes[0],
                take_b_id=takes[1] if design.kind == "ab" else None,
                role=it.role,
                expected=it.expected,
                slots=tuple(takes),
                condition=conds[0],
                meta={
                    "roles": roles,
                    "conditions": conds,
                    "systems": [sl.system for sl in it.slots],
                    "prompt_id": it.prompt,
                    **it.meta,
                },
            )
            self.store.add_assignment(a)
        return self.store.assignments(test["test_id"], rater["rater_id"])

    def status(self, test_id: str, token: str) -> dict[str, Any]:
        """Everything the rater page needs to (re)start: where the rater is, and the next item."""
        t = self._test(test_id, open_only=False)
        r = self._rater(test_id, token)
        cfg = t["config"]
        items = self._assign(t, r)
        done = self.tests.answered(test_id, r["rater_id"])
        nxt = next((a for a in items if a.assignment_id not in done), None)
        out: dict[str, Any] = {
            "test": {
                "test_id": test_id,
                "name": public_title(t),
                "title": public_title(t),
                "kind": t["kind"],
                "status": t["status"],
                "ab_mode": cfg["design"].get("ab_mode", "cmos"),
                "consent": cfg.get("consent") or DEFAULT_CONSENT,
                "instructions": cfg.get("instructions") or "",
                "headphone_check": bool(cfg.get("headphone_check", True)),
            },
            "rater_id": r["rater_id"],
            "consented": bool(r["consent_at"]),
            "headphone": json.loads(r["headphone"]) if r["headphone"] else None,
            "headphone_trials": [list(x.order) for x in screening.headphone_plan(r["rater_id"])],
            "total": len(items),
            "answered": len(done),
            "finished": nxt is None,
            "item": None if nxt is None else self._item(t, nxt).__dict__,
        }
        if nxt is None:
            out.update(self._finish(t, r))
        return out

    def _item(self, t: dict[str, Any], a: Assignment) -> Item:
        n = len(a.slots or (a.take_id,))
        if t["kind"] == "ab":
            labels = ["A", "B"]
        elif t["kind"] == "mushra":
            labels = [str(i + 1) for i in range(n)]
        else:
            labels = ["Play"]
        takes = list(a.slots or (a.take_id,))
        need = [round(self._need(t["kind"], d), 1) for d in self._durations(takes)]
        has_ref = "reference" in (a.meta.get("roles") or [])
        text = self._text(takes[0]) if show_text(t) else None
        return Item(a.assignment_id, a.position, t["kind"], n, labels, need, has_ref, text)

    def _text(self, take_id: str) -> str | None:
        """The text the clip speaks (for check items too, so they look like any other)."""
        row = self.store.db.execute(
            "SELECT text FROM takes WHERE take_id = ?", [take_id]
        ).fetchone()
        return None if row is None else row[0]

    def _finish(self, t: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        cfg = t["config"]
        code = r["completion_code"]
        if not code:
            code = cfg.get("completion_code") or secrets.token_hex(4).upper()
            self.tests.update_rater(
                t["test_id"], r["rater_id"], completion_code=code, finished_at=now_iso()
            )
        redirect = cfg.get("redirect_url") or None
        if redirect:
            redirect = redirect.replace("{code}", code)
        return {"completion_code": code, "redirect_url": redirect}

    def info(self, test_id: str) -> dict[str, Any]:
        """What anyone may see before joining: the public title, type, consent text and whether
        open (``name`` is the public title too: the admin's test name stays on the server)."""
        t = self._test(test_id, open_only=False)
        return {
            "test_id": test_id,
            "name": public_title(t),
            "title": public_title(t),
            "kind": t["kind"],
            "status": t["status"],
            "consent": t["config"].get("consent") or DEFAULT_CONSENT,
        }

    def consent(self, test_id: str, token: str) -> dict[str, Any]:
        self._test(test_id)
        r = self._rater(test_id, token)
        if not r["consent_at"]:
            self.tests.update_rater(test_id, r["rater_id"], consent_at=now_iso())
        return {"consented": True}

    def headphone(self, test_id: str, token: str, answers: Any) -> dict[str, Any]:
        self._test(test_id)
        r = self._rater(test_id, token)
        if r["headphone"]:
            return json.loads(r["headphone"])  # one attempt: the first result stands
        try:
            result = screening.score_headphone(r["rater_id"], answers)
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
        self.tests.update_rater(
            test_id,
            r["rater_id"],
            headphone=json.dumps(result),
            headphone_pass=int(result["passed"]),
        )
        return result

    # -- stimuli and play events (from the WebSocket handlers)

    def stimulus(self, test_id: str, token: str, assignment_id: Any, slot: Any) -> dict[str, Any]:
        """Which take (and how) to play for this rater's item slot. Raises unless it is theirs."""
        t = self._test(test_id)
        r = self._rater(test_id, token)
        check_id(assignment_id, "assignment id")
        a = self._assignment(test_id, r["rater_id"], assignment_id)
        takes = list(a.slots or (a.take_id,))
        if not isinstance(slot, int) or isinstance(slot, bool) or not -1 <= slot < len(takes):
            raise InvalidRequest(f"slot must be 0..{len(takes) - 1} (or -1: the open reference)")
        if slot == -1:  # MUSHRA's open reference: the hidden reference's take, not gated
            roles = a.meta.get("roles") or []
            if "reference" not in roles:
                raise InvalidRequest("this item has no reference")
            slot = roles.index("reference")
        conds = a.meta.get("conditions") or [a.condition] * len(takes)
        systems = a.meta.get("systems") or [None] * len(takes)
        return {
            "test": t,
            "rater_id": r["rater_id"],
            "assignment": a,
            "take_id": takes[slot],
            "slots": len(takes),
            "condition": conds[slot] or "as_streamed",
            "system_id": systems[slot],
            "live_backend": (t["config"].get("backends") or {}).get(systems[slot] or ""),
            "format": self.common_format(test_id),
            "target_lufs": float(
                (t["config"].get("loudness") or {}).get("target_lufs", TARGET_LUFS)
            ),
        }

    def common_format(self, test_id: str) -> CommonFormat:
        """The one rate and channel layout every stimulus of the test reaches raters in: the
        highest native rate of its stimuli, stereo iff any is stereo (blind on the wire)."""
        rows = self.store.db.execute(
            "SELECT DISTINCT t.sample_rate, t.channels FROM takes t JOIN stimuli s "
            "ON s.take_id = t.take_id WHERE s.test_id = ?",
            [test_id],
        ).fetchall()
        return CommonFormat.of((int(r or 0), int(c or 1)) for r, c in rows)

    def _assignment(self, test_id: str, rater_id: str, assignment_id: str) -> Assignment:
        for a in self.store.assignments(test_id, rater_id):
            if a.assignment_id == assignment_id:
                return a
        raise Denied("this item is not one of yours")

    def play_event(
        self,
        test_id: str,
        token: str,
        assignment_id: Any,
        slot: Any,
        played_ms: Any,
        *,
        server_elapsed_ms: float | None,
        take_id: str,
        condition: str,
        duration_ms: float | None = None,
        underruns: Any = 0,
        stall_ms: Any = 0.0,
        sent_ms: float | None = None,
        budget_ms: float | None = None,
    ) -> dict[str, Any]:
        """Record how much of a streamed stimulus the page played, bounded by the server clock
        (``server_elapsed_ms`` since the stream began), by the audio sent (``sent_ms``, given
        while the stream was not sent in full: such a play never counts as complete) and, for
        a MUSHRA screen, by what is left of the screen's wall time (``budget_ms``)."""
        r = self._rater(test_id, token)
        try:
            played = float(played_ms)
            und = int(underruns or 0)
            stall = float(stall_ms or 0.0)
        except (TypeError, ValueError):
            raise InvalidRequest("played_ms, underruns and stall_ms must be numbers") from None
        if not (0 <= played < 3_600_000) or not (0 <= und < 100_000) or not (0 <= stall < 3.6e6):
            raise InvalidRequest("play event out of range")
        if server_elapsed_ms is None:
            raise Denied("no stream of this stimulus was sent to this page")
        accepted = min(played, server_elapsed_ms + CLOCK_SLACK_MS)
        if sent_ms is not None:  # stopped or cancelled before the server sent all of it
            accepted = min(accepted, sent_ms)
        if budget_ms is not None:  # a MUSHRA screen's wall time left (its slack included)
            accepted = min(accepted, budget_ms)
        complete = (
            sent_ms is None and duration_ms is not None and accepted >= PLAYED_SHARE * duration_ms
        )
        self.tests.add_play_event(
            {
                "test_id": test_id,
                "rater_id": r["rater_id"],
                "assignment_id": assignment_id,
                "slot": int(slot),
                "take_id": take_id,
                "condition": condition,
                "played_ms": accepted,
                "duration_ms": duration_ms,
                "complete": int(complete),
                "server_elapsed_ms": server_elapsed_ms,
                "underruns": und,
                "stall_ms": stall,
            }
        )
        return {"played_ms": accepted}

    # -- votes

    def _durations(self, takes: list[str]) -> list[float]:
        out = []
        for tid in takes:
            row = self.store.db.execute(
                "SELECT duration_s FROM takes WHERE take_id = ?", [tid]
            ).fetchone()
            out.append(float(row[0]) * 1000.0 if row else 0.0)
        return out

    @staticmethod
    def _need(kind: str, duration_ms: float) -> float:
        if kind in {"mos", "glitch"}:
            return PLAYED_SHARE * duration_ms
        return min(AB_MIN_MS, PLAYED_SHARE * duration_ms)

    def gate(self, kind: str, a: Assignment, played: dict[int, float]) -> list[str]:
        """What is still missing before a vote is allowed (empty: allowed)."""
        takes = list(a.slots or (a.take_id,))
        durs = self._durations(takes)
        missing = []
        for i, d in enumerate(durs):
            need = self._need(kind, d)
            if played.get(i, 0.0) + 1e-6 < need:
                label = (
                    "the clip"
                    if len(takes) == 1
                    else ("ABCDEFGH"[i] if kind == "ab" else f"stimulus {i + 1}")
                )
                missing.append(f"{label}: {played.get(i, 0.0) / 1000:.1f} of {need / 1000:.1f} s")
        return missing

    def vote(self, test_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store one answer (idempotent on ``answer_id``; one per item). Raises on any problem."""
        t = self._test(test_id)
        r = self._rater(test_id, token)
        if not isinstance(body, dict):
            raise InvalidRequest("a vote must be a JSON object")
        if not r["consent_at"]:
            raise Denied("consent first")
        answer_id = check_id(body.get("answer_id"), "answer_id")
        a = self._assignment(
            test_id, r["rater_id"], check_id(body.get("assignment_id"), "assignment id")
        )
        kind = t["kind"]
        missing = self.gate(kind, a, self.tests.played(test_id, r["rater_id"], a.assignment_id))
        if missing:
            raise NotYet("listen first: " + "; ".join(missing))
        takes = list(a.slots or (a.take_id,))
        payload, typed = self._typed(t, r["rater_id"], a, takes, body, answer_id)
        created = self.tests.answer(
            answer_id, test_id, r["rater_id"], a.assignment_id, kind, payload, a.condition, typed
        )
        st = self.status(test_id, token)
        return {
            "stored": created,
            "answer_id": answer_id,
            "answered": st["answered"],
            "total": st["total"],
            "finished": st["finished"],
            "item": st["item"],
            **({k: st[k] for k in ("completion_code", "redirect_url") if k in st}),
        }

    def _typed(
        self,
        t: dict[str, Any],
        rater_id: str,
        a: Assignment,
        takes: list[str],
        body: dict[str, Any],
        answer_id: str,
    ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        kind, tid, now = t["kind"], t["test_id"], now_iso()
        played = self.tests.played(tid, rater_id, a.assignment_id)
        if kind == "mos":
            score = body.get("score")
            if not isinstance(score, int) or isinstance(score, bool) or score not in MOS_LABELS:
                raise InvalidRequest("score must be an integer 1..5 (5 Excellent ... 1 Bad)")
            row = {
                "rating_id": answer_id,
                "test_id": tid,
                "rater_id": rater_id,
                "take_id": takes[0],
                "score": float(score),
                "played_ms": played.get(0),
                "role": a.role,
                "expected": a.expected,
                "created_at": now,
                "condition": a.condition,
                "assignment_id": a.assignment_id,
            }
            return {"score": score}, [("mos_ratings", row)]
        if kind == "ab":
            mode = t["config"]["design"].get("ab_mode", "cmos")
            if mode == "forced":
                choice = body.get("choice")
                if choice not in ("a", "b"):
                    raise InvalidRequest("choice must be 'a' or 'b'")
                cmos = None
            else:
                cmos = body.get("cmos")
                if not isinstance(cmos, int) or isinstance(cmos, bool) or not -3 <= cmos <= 3:
                    raise InvalidRequest("cmos must be an integer -3..+3 (B vs A)")
                choice = "b" if cmos > 0 else "a" if cmos < 0 else "tie"
            if a.role != "item":  # a check pair: scored by screening, never an A/B vote
                return {"choice": choice, "cmos": cmos}, []
            systems = a.meta.get("systems") or [None, None]
            row = {
                "vote_id": answer_id,
                "test_id": tid,
                "rater_id": rater_id,
                "item_key": "|".join(sorted(takes[:2])),
                "take_a": takes[0],
                "take_b": takes[1],
                "system_a": systems[0],
                "system_b": systems[1],
                "choice": choice,
                "cmos": None if cmos is None else float(cmos),
                "played_a_ms": played.get(0),
                "played_b_ms": played.get(1),
                "created_at": now,
                "condition": a.condition,
                "assignment_id": a.assignment_id,
            }
            return {"choice": choice, "cmos": cmos}, [("ab_votes", row)]
        if kind == "mushra":
            scores = body.get("scores")
            if not isinstance(scores, list) or len(scores) != len(takes):
                raise InvalidRequest(f"scores must be a list of {len(takes)} numbers 0..100")
            roles = a.meta.get("roles") or ["item"] * len(takes)
            systems = a.meta.get("systems") or [None] * len(takes)
            rows = []
            for i, sc in enumerate(scores):
                if not isinstance(sc, int | float) or isinstance(sc, bool) or not 0 <= sc <= 100:
                    raise InvalidRequest("every MUSHRA score must be a number 0..100")
                rows.append(
                    (
                        "mushra_ratings",
                        {
                            "rating_id": f"{answer_id}:{i}",
                            "test_id": tid,
                            "rater_id": rater_id,
                            "assignment_id": a.assignment_id,
                            "slot": i,
                            "take_id": takes[i],
                            "system_id": systems[i],
                            "role": roles[i],
                            "prompt_id": a.meta.get("prompt_id"),
                            "score": float(sc),
                            "created_at": now,
                        },
                    )
                )
            return {"scores": scores}, rows
        # glitch hunt: the answer closes the item; the marks were stored as they were made
        n = self.store.db.execute(
            "SELECT count(*) FROM glitch_reports WHERE test_id=? AND rater_id=? AND take_id=?",
            [tid, rater_id, takes[0]],
        ).fetchone()[0]
        return {"marks": int(n)}, []


DEFAULT_CONSENT = (
    "You will listen to short speech clips and rate them. Your answers are stored with an "
    "anonymous id (and, if you came from a crowdsourcing platform, its participant id) and are "
    "used only to compare speech systems. Please use headphones in a quiet place. You can stop "
    "at any time; closing the page keeps your progress."
)

__all__ = [
    "DEFAULT_TITLE",
    "SHOW_TEXT_KINDS",
    "Denied",
    "Listening",
    "NotYet",
    "check_id",
    "public_title",
    "show_text",
]
