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
import time
from dataclasses import dataclass
from typing import Any

from app.listening.texts import QUESTIONNAIRE, rater_texts
from app.player.blind import TARGET_LUFS, CommonFormat
from app.store import Assignment, UnknownItem, now_iso
from app.store.listening import TestStore
from backends.errors import Conflict, Forbidden, InvalidRequest
from evaluation.listening import screening
from evaluation.listening.design import (
    ANCHOR,
    TRAP,
    Design,
    RaterRow,
    all_row_cells,
    choose_row,
    plan,
)
from evaluation.listening.kinds import kind_of
from evaluation.listening.kinds.base import PLAYED_SHARE, Familiar, VoteContext

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32,128}$")
CROWD_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
CROWD_KEYS = ("PROLIFIC_PID", "workerId", "crowd_id", "participant")
MAX_SCREEN_FETCHES = 10
"""Plays (fetches) of one screen trial: replays are fine, a fetch loop is not (each is a
~0.7 MB WAV rendered on the server)."""
DROPOUT_AFTER_S = 1800.0
"""A rater idle this long (no join or status call: the page makes one after every answer)
counts as dropped: their design row is given to the next joiner (the test's
``dropout_after_s`` overrides it)."""
CLOCK_SLACK_MS = 400.0
MAX_RATERS = 5000
"""Joins per test (bounds what an anonymous visitor can make the server store)."""
DEFAULT_TITLE = "Listening test"
"""What raters see as the title when the test has no public title (never the admin's name)."""


def public_title(test: dict[str, Any]) -> str:
    """The title the rater page shows: the test's public title, not the admin's test name."""
    return str(test["config"].get("title") or DEFAULT_TITLE)


class Denied(Forbidden):
    """The rater may not do this (bad token, closed test, not their item)."""


class NotYet(Conflict):
    """Listen-gating: the server has not seen enough playback for this vote."""


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


def show_text(test: dict[str, Any]) -> bool:
    """Whether the vote page shows the prompt's text (tests made before the option: by type)."""
    v = test["config"].get("show_text")
    return bool(v) if v is not None else kind_of(test["kind"]).show_text


class Listening:
    def __init__(self, store: Any):
        self.tests = TestStore(store)
        self.store = store

    # -- sessions

    def rater(self, test_id: str, token: Any) -> dict[str, Any]:
        """The rater this token belongs to in this test (checked against its hash), or Denied."""
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
        t = self._test(test_id)
        for v, what in ((crowd_id, "crowd id"), (study_id, "study id"), (session_id, "session id")):
            if v is not None and (not isinstance(v, str) or not CROWD_RE.match(v)):
                raise InvalidRequest(f"the {what} must be 1-128 letters, digits or . _ : @ -")
        if source is not None and source not in CROWD_KEYS:
            source = None
        cfg = t["config"]
        design = Design.from_dict(cfg["design"])
        target = cfg.get("target_ratings")
        dropout = float(cfg.get("dropout_after_s") or DROPOUT_AFTER_S)

        def row(raters: list[dict[str, Any]]) -> int | None:
            if len(raters) >= int(cfg.get("max_raters") or MAX_RATERS):
                raise Denied("this test has all the raters it takes")
            now = time.time()
            rows = [
                RaterRow(
                    int(r["seq"] if r["design_row"] is None else r["design_row"]),
                    not r["screened_out_at"]
                    and r.get("headphone_pass") != 0
                    and bool(r["finished_at"] or (r["seen_at"] and now - r["seen_at"] <= dropout)),
                )
                for r in raters
            ]
            got = choose_row(design, rows, int(target) if target else None)
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
        self._assign(t, r)
        return {"token": token, "rater_id": r["rater_id"], "resumed": resumed}

    def _assign(self, test: dict[str, Any], rater: dict[str, Any]) -> list[Assignment]:
        """The rater's assignments (written once from the deterministic plan; resumable)."""
        have = self.store.assignments(test["test_id"], rater["rater_id"])
        design = Design.from_dict(test["config"]["design"])
        seq = int(rater["seq"])
        row = rater.get("design_row")
        items = plan(design, seq) if row is None else plan(design, int(row), order_seed=seq)
        if len(have) == len(items):
            return have
        stim = self.tests.stimuli(test["test_id"])
        by = {(s.kind, s.system_id, s.prompt_id): s for s in stim}
        first = {}
        for s in stim:
            first.setdefault((s.kind, s.system_id), s)

        def find(kind: str, system: str, prompt: str | None, *, check: bool = False):
            """The stimulus; a check item's falls back to the first of its kind (a test made
            before check items varied has one set, without prompts)."""
            s = by.get((kind, system, prompt)) or (
                first.get((kind, system)) if not prompt or check else None
            )
            if s is None:
                raise UnknownItem(f"no {kind} stimulus for {system} / {prompt}: generate first")
            return s

        clean = self._ab_clean(test, design, seq)
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
                assignment_id=_aid(test["test_id"], rater["rater_id"], it.position),
                test_id=test["test_id"],
                rater_id=rater["rater_id"],
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
        return self.store.assignments(test["test_id"], rater["rater_id"])

    @staticmethod
    def _natural(test: dict[str, Any], design: Design) -> str | None:
        """The test's first natural (recorded) system, if it has one."""
        nat = {s["name"] for s in test["config"].get("systems") or [] if s.get("natural")}
        return next((s for s in design.systems if s in nat), None)

    def _ab_clean(self, test: dict[str, Any], design: Design, seq: int) -> str:
        """The A/B check pairs' clean side: the natural recording when the test has one, else
        the systems in turn per rater (a take of one system under test as "the clean side" for
        everyone would fail raters who honestly judge that system)."""
        return self._natural(test, design) or design.systems[seq % len(design.systems)]

    def status(self, test_id: str, token: str) -> dict[str, Any]:
        """Everything the rater page needs to (re)start: where the rater is, and the next item."""
        t = self._test(test_id, open_only=False)
        r = self.rater(test_id, token)
        cfg = t["config"]
        mode = screening.screen_mode(cfg)
        items = self._assign(t, r)
        done = self.tests.answered(test_id, r["rater_id"])
        self.tests.update_rater(test_id, r["rater_id"], seen_at=time.time())
        out_ = bool(r["screened_out_at"])
        nxt = None if out_ else next((a for a in items if a.assignment_id not in done), None)
        hp = json.loads(r["headphone"]) if r["headphone"] else None
        out: dict[str, Any] = {
            "test": {
                "test_id": test_id,
                "name": public_title(t),
                "title": public_title(t),
                "kind": t["kind"],
                "status": t["status"],
                "ab_mode": cfg["design"].get("ab_mode", "cmos"),
                "consent": consent_text(t),
                "instructions": cfg.get("instructions") or "",
                "screening": mode,
                "headphone_check": mode != "none",
                "texts": rater_texts(t["kind"], cfg, consent_text(t)),
            },
            "rater_id": r["rater_id"],
            "consented": bool(r["consent_at"]),
            "headphone": None
            if hp is None
            else {k: hp.get(k) for k in ("passed", "correct", "trials")},
            "screen": None,
            "familiar": None,
            "screened_out": out_,
            "total": len(items),
            "answered": len(done),
            "finished": not out_ and nxt is None,
            "item": None if nxt is None else self._item(t, nxt).__dict__,
        }
        if not r["consent_at"]:
            out["stage"] = "consent"
        elif cfg.get("questionnaire") and not r.get("questionnaire") and not out_:
            out["stage"] = "questionnaire"
        elif out_:
            out["stage"] = "screened_out"
            out.update(self._screenout_link(t, r["screenout_code"]))
        elif mode != "none" and hp is None:
            out["stage"] = "screen"
            out["screen"] = self._screen_state(t, r)
        elif nxt is None:
            out["stage"] = "done"
            out.update(self._finish(t, r))
        elif self._needs_familiar(t, r, len(done)):
            out["stage"] = "familiarise"
            out["familiar"] = {"clips": [c[0] for c in self._familiar_clips(t, r)]}
        else:
            out["stage"] = "item"
        return out

    # -- the headphone screen: the keys stay here; the page gets "trial n of N" and audio

    def _trials(self, t: dict[str, Any], r: dict[str, Any]) -> list[dict[str, Any]]:
        """The rater's screen trials (made on first need, from the OS's random source)."""
        rows = self.tests.screen(t["test_id"], r["rater_id"])
        if not rows:
            new = screening.new_screen(screening.screen_mode(t["config"]))
            self.tests.add_screen(
                t["test_id"],
                r["rater_id"],
                [(x.kind, x.to_json(), screening.duration_ms(x)) for x in new],
            )
            rows = self.tests.screen(t["test_id"], r["rater_id"])
        return rows

    def _screen_state(self, t: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        rows = self._trials(t, r)
        nxt = next((x for x in rows if x["answer"] is None), None)
        return {
            "trials": len(rows),
            "answered": sum(x["answer"] is not None for x in rows),
            "next": None if nxt is None else int(nxt["n"]),
            "kind": None if nxt is None else nxt["kind"],
            "kinds": [x["kind"] for x in rows],
        }

    def _screen_rater(self, test_id: str, token: str) -> tuple[dict, dict, list[dict]]:
        t = self._test(test_id)
        r = self.rater(test_id, token)
        if not r["consent_at"]:
            raise Denied("consent first")
        self._not_out(r)
        if screening.screen_mode(t["config"]) == "none":
            raise InvalidRequest("this test has no headphone screen")
        if r["headphone"]:
            raise Denied("the headphone screen is done; it takes one attempt")
        return t, r, self._trials(t, r)

    @staticmethod
    def _trial_no(rows: list[dict[str, Any]], n: Any) -> int:
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(rows):
            raise InvalidRequest(f"trial must be 0..{len(rows) - 1}")
        return n

    def screen_audio(self, test_id: str, token: str, n: Any) -> bytes:
        """Trial ``n``'s audio (stereo 48 kHz WAV); its first fetch starts its play clock."""
        t, r, rows = self._screen_rater(test_id, token)
        row = rows[self._trial_no(rows, n)]
        if int(row["fetches"]) >= MAX_SCREEN_FETCHES:
            raise Denied(f"trial {n + 1} was played {MAX_SCREEN_FETCHES} times; answer it")
        wav = screening.wav_bytes(screening.render(screening.ScreenTrial.from_json(row["key"])))
        self.tests.screen_fetched(test_id, r["rater_id"], n, time.time())
        return wav

    def _check_played(self, row: dict[str, Any], now: float) -> None:
        n = int(row["n"]) + 1
        if row["fetched_at"] is None:
            raise NotYet(f"listen first: trial {n} was not played")
        if now - float(row["fetched_at"]) < float(row["duration_ms"]) / 1000.0:
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
            if rows[n]["answer"] is None:
                self._check_played(rows[n], now)
        for n, a in picks.items():
            self.tests.screen_answer(test_id, r["rater_id"], n, a)
        rows = self.tests.screen(test_id, r["rater_id"])
        left = sum(x["answer"] is None for x in rows)
        if left:
            return {"answered": len(rows) - left, "trials": len(rows), "done": False}
        result = screening.score_screen(
            [screening.ScreenTrial.from_json(x["key"]) for x in rows],
            [int(x["answer"]) for x in rows],
        )
        self.tests.update_rater(
            test_id,
            r["rater_id"],
            headphone=json.dumps(result),
            headphone_pass=int(result["passed"]),
        )
        if not result["passed"]:
            self._screen_out(t, r)
        return {
            "answered": len(rows),
            "trials": len(rows),
            "correct": result["correct"],
            "done": True,
            "passed": result["passed"],
            "screened_out": not result["passed"],
        }

    def _screened(self, t: dict[str, Any], r: dict[str, Any]) -> None:
        """Votes only after a passed screen (a failed one ended the session)."""
        self._not_out(r)
        if screening.screen_mode(t["config"]) != "none" and not r["headphone"]:
            raise Denied("the headphone screen comes first")

    def _screen_out(self, t: dict[str, Any], r: dict[str, Any]) -> None:
        code = str(t["config"].get("screenout_code") or secrets.token_hex(4).upper())
        self.tests.screen_out(t["test_id"], r["rater_id"], code)

    @staticmethod
    def _screenout_link(t: dict[str, Any], code: str | None) -> dict[str, Any]:
        url = t["config"].get("screenout_url") or None
        if url and code:
            url = url.replace("{code}", code)
        return {"screenout_code": code, "redirect_url": url}

    @staticmethod
    def _not_out(r: dict[str, Any]) -> None:
        if r["screened_out_at"]:
            raise Denied("screened out: this session has ended (the headphone screen failed)")

    # -- familiarisation: the scale's ends, played and not rated

    def _needs_familiar(self, t: dict[str, Any], r: dict[str, Any], answered: int) -> bool:
        return (
            bool(t["config"].get("familiarise"))
            and not r["familiarised_at"]
            and answered == 0
            and bool(self._familiar_clips(t, r))
        )

    def _familiar_clips(self, t: dict[str, Any], r: dict[str, Any]) -> list[tuple[str, str]]:
        """``(label, take id)`` of the clips that show the scale's ends: MOS the low anchor and
        the best clip there is (the gold "5", else a natural recording); MUSHRA the reference
        and the low anchor; A/B one pair; glitch one clip (systems in turn per rater)."""
        design = Design.from_dict(t["config"]["design"])
        stim = self.tests.stimuli(t["test_id"])

        def take(kind: str, system: str | None, prompt: str | None) -> str | None:
            """The stimulus of this kind and system on ``prompt`` (None: on any prompt)."""
            for s in stim:
                if s.kind == kind and s.system_id == system and prompt in (None, s.prompt_id):
                    return s.take_id
            return None

        here = Familiar(take, int(r["seq"]), self._natural(t, design))
        got = design.test_kind.familiar(design, here)
        return [(label, tid) for label, tid in got if tid]

    def _familiar_rater(self, test_id: str, token: str) -> tuple[dict, dict, list]:
        t = self._test(test_id)
        r = self.rater(test_id, token)
        self._not_out(r)
        clips = self._familiar_clips(t, r)
        if not t["config"].get("familiarise") or not clips:
            raise InvalidRequest("this test has no familiarisation")
        return t, r, clips

    def familiar_audio(self, test_id: str, token: str, k: Any) -> bytes:
        """Familiarisation clip ``k`` as a stereo 48 kHz WAV (the rate and layout of every
        screen clip, whatever the system's); its first fetch starts its play clock."""
        t, r, clips = self._familiar_rater(test_id, token)
        if not isinstance(k, int) or not 0 <= k < len(clips):
            raise InvalidRequest(f"clip must be 0..{len(clips) - 1}")
        tk = self.store.load_take(clips[k][1])
        got = json.loads(r["familiar"] or "{}")
        if str(k) not in got:
            got[str(k)] = time.time()
            self.tests.update_rater(test_id, r["rater_id"], familiar=json.dumps(got))
        return screening.wav_bytes(screening.to_screen_rate(tk.audio, tk.sample_rate))

    def familiarised(self, test_id: str, token: str) -> dict[str, Any]:
        """ "Continue": allowed once every clip was sent and had time to play."""
        t, r, clips = self._familiar_rater(test_id, token)
        got = json.loads(r["familiar"] or "{}")
        durs = self.tests.durations_ms([c[1] for c in clips])
        now = time.time()
        for k, d in enumerate(durs):
            at = got.get(str(k))
            if at is None or now - float(at) < PLAYED_SHARE * d / 1000.0:
                raise NotYet(f"listen first: {clips[k][0]} has not been played to its end")
        if not r["familiarised_at"]:
            self.tests.update_rater(test_id, r["rater_id"], familiarised_at=now_iso())
        return {"familiarised": True}

    def _item(self, t: dict[str, Any], a: Assignment) -> Item:
        kind = kind_of(t["kind"])
        takes = list(a.slots or (a.take_id,))
        n = len(takes)
        need = [round(kind.need_ms(d), 1) for d in self.tests.durations_ms(takes)]
        has_ref = "reference" in (a.meta.get("roles") or [])
        # the text the clip speaks (for check items too, so they look like any other)
        text = self.tests.take_text(takes[0]) if show_text(t) else None
        return Item(a.assignment_id, a.position, t["kind"], n, kind.labels(n), need, has_ref, text)

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
            "consent": consent_text(t),
        }

    def consent(self, test_id: str, token: str) -> dict[str, Any]:
        self._test(test_id)
        r = self.rater(test_id, token)
        if not r["consent_at"]:
            self.tests.update_rater(test_id, r["rater_id"], consent_at=now_iso())
        return {"consented": True}

    def questionnaire(self, test_id: str, token: str, answers: Any) -> dict[str, Any]:
        """The rater questionnaire (a test made with it): one listed option per question, all
        questions answered, stored once (a second call keeps the first answers)."""
        t = self._test(test_id)
        r = self.rater(test_id, token)
        if not r["consent_at"]:
            raise Denied("consent first")
        if not t["config"].get("questionnaire"):
            raise InvalidRequest("this test has no questionnaire")
        if r.get("questionnaire"):
            return {"stored": False}
        if not isinstance(answers, dict):
            raise InvalidRequest("answers: {question: option}")
        got = {}
        for q in QUESTIONNAIRE:
            v = answers.get(q["key"])
            if v not in q["options"]:
                raise InvalidRequest(f"{q['key']}: choose one of {', '.join(q['options'])}")
            got[q["key"]] = v
        extra = set(answers) - set(got)
        if extra:
            raise InvalidRequest(f"unknown question {sorted(extra)[0][:40]!r}")
        self.tests.update_rater(test_id, r["rater_id"], questionnaire=json.dumps(got))
        return {"stored": True}

    # -- stimuli and play events (from the WebSocket handlers)

    def stimulus(self, test_id: str, token: str, assignment_id: Any, slot: Any) -> dict[str, Any]:
        """Which take (and how) to play for this rater's item slot. Raises unless it is theirs."""
        t = self._test(test_id)
        r = self.rater(test_id, token)
        self._not_out(r)
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
            "target_lufs": live_target(t["config"]),
        }

    def common_format(self, test_id: str) -> CommonFormat:
        """The one rate and channel layout every stimulus of the test reaches raters in: the
        highest native rate of its stimuli, stereo iff any is stereo (blind on the wire)."""
        return CommonFormat.of(self.tests.stimulus_formats(test_id))

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
        r = self.rater(test_id, token)
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

    def gate(self, kind: str, a: Assignment, played: dict[int, float]) -> list[str]:
        """What is still missing before a vote is allowed (empty: allowed)."""
        k = kind_of(kind)
        takes = list(a.slots or (a.take_id,))
        missing = []
        for i, d in enumerate(self.tests.durations_ms(takes)):
            need = k.need_ms(d)
            if played.get(i, 0.0) + 1e-6 < need:
                label = k.slot_label(i, len(takes))
                missing.append(f"{label}: {played.get(i, 0.0) / 1000:.1f} of {need / 1000:.1f} s")
        return missing

    def vote(self, test_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store one answer (idempotent on ``answer_id``; one per item). Raises on any problem."""
        t = self._test(test_id)
        r = self.rater(test_id, token)
        if not isinstance(body, dict):
            raise InvalidRequest("a vote must be a JSON object")
        if not r["consent_at"]:
            raise Denied("consent first")
        self._screened(t, r)
        answer_id = check_id(body.get("answer_id"), "answer_id")
        a = self._assignment(
            test_id, r["rater_id"], check_id(body.get("assignment_id"), "assignment id")
        )
        kind = t["kind"]
        missing = self.gate(kind, a, self.tests.played(test_id, r["rater_id"], a.assignment_id))
        if missing:
            raise NotYet("listen first: " + "; ".join(missing))
        got = kind_of(kind).read_vote(body, self._vote_context(t, r["rater_id"], a, answer_id))
        created = self.tests.answer(
            answer_id,
            test_id,
            r["rater_id"],
            a.assignment_id,
            kind,
            got.payload,
            a.condition,
            got.rows,
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

    def _vote_context(
        self, t: dict[str, Any], rater_id: str, a: Assignment, answer_id: str
    ) -> VoteContext:
        """What the test's kind checks a vote against: the item, the server's play events."""
        tid = t["test_id"]
        takes = tuple(a.slots or (a.take_id,))
        marks = (
            self.tests.mark_count(tid, rater_id, takes[0]) if kind_of(t["kind"]).counts_marks else 0
        )
        return VoteContext(
            answer_id=answer_id,
            test_id=tid,
            rater_id=rater_id,
            assignment_id=a.assignment_id,
            role=a.role,
            expected=a.expected,
            condition=a.condition,
            takes=takes,
            roles=tuple(a.meta.get("roles") or ()),
            systems=tuple(a.meta.get("systems") or ()),
            prompt_id=a.meta.get("prompt_id"),
            played=self.tests.played(tid, rater_id, a.assignment_id),
            created_at=now_iso(),
            ab_mode=t["config"]["design"].get("ab_mode", "cmos"),
            marks=marks,
        )


def live_target(config: dict[str, Any]) -> float | None:
    """The loudness a *live* generation is gain-matched to: the test's target, or None (no
    gain) when the test keeps its stimuli's own levels."""
    loud = config.get("loudness") or {}
    if loud.get("normalise") is False:
        return None
    return float(loud.get("target_lufs", TARGET_LUFS))


def consent_text(test: dict[str, Any]) -> str:
    """The consent text raters read: the test's own, else :data:`DEFAULT_CONSENT`."""
    return str(test["config"].get("consent") or DEFAULT_CONSENT)


DEFAULT_CONSENT = (
    "You will listen to short speech clips and rate them. Your answers are stored with an "
    "anonymous id (and, if you came from a crowdsourcing platform, its participant id) and are "
    "used only to compare speech systems. Please use headphones in a quiet place. You can stop "
    "at any time; closing the page keeps your progress."
)

__all__ = [
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
