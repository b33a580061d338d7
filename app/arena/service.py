"""The open arena's service: one app's battles, voters, prompts and board, shared by its socket
handlers (:mod:`app.arena.ws`) and its routes (:mod:`app.arena.routes`).

Why one object: both doors (the ``/ll/ws`` messages and the HTTP routes) must count the same
voter, refuse with the same rules and read the same cached board; the service holds what they
share and nothing of either door.

Who owns a battle: the visitor's one identity (:func:`app.web.identity.identity`, the
``ll_owner`` cookie the Playground's voices and takes belong to). The WebSocket handshake
carries it, so the same owner is seen on ``/ll/ws`` and on the HTTP routes; the DB keeps only
its hash. A client without the cookie (a script) owns no battle.

Who is counted (the *voter*, :meth:`ArenaService.voter`): a cookie is free, so limits and the
stored voter hash use the Space's Hugging Face login where it is configured (then voting needs
it, as on TTS Arena), else the client's address as :class:`app.web.proxies.Proxies` resolves it
(``X-Forwarded-For`` only from a trusted proxy; an IPv6 /64 counts as one).

The deployment's knobs (``LISTENLAB_ARENA_*``) are read once, by
:func:`app.config.arena_settings`, and passed in as an :class:`ArenaConfig`; the arena file
(``LISTENLAB_ARENA_CONFIG``: voices, languages, prompts per language) is read then too
(:mod:`app.arena.lineup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
from starlette.requests import HTTPConnection

from app.arena.audit import Audit
from app.arena.battles import (
    Arena,
    ArenaError,
    Draw,
    Limits,
    LoginRequired,
    NotYours,
    VoteView,
    clean_battle_text,
    owner_view,
)
from app.arena.lineup import (
    Lineup,
    LineupError,
    Prompt,
    allowed_pairs,
    language_tag,
    load_lineup,
)
from app.config import ArenaSettings
from app.player.blind import common_rate
from app.web.identity import hf_login_configured, hf_user, identity
from app.web.proxies import Proxies
from evaluation.arena import Board, BoardRow, fit_board
from evaluation.arena.rings import RingRules
from evaluation.arena.sampling import SamplingRules

if TYPE_CHECKING:
    from app.state import AppState

PROMPT_FILES = ("harvard/harvard.txt", "arena-prompts.txt")
BUNDLED_LANGUAGE = "en"
"""The bundled prompts (the Harvard sentences) are English."""
MAX_MIN_VOTES = 100_000
IPV4_NETWORK = 24
IPV6_NETWORK = 48
"""A client's *network* for the ring flags: its IPv4 /24 or IPv6 /48."""


@dataclass
class ArenaConfig:
    """The arena's knobs: the limits and the listing threshold a deployer sets
    (``LISTENLAB_ARENA_*``, :func:`app.config.arena_settings`), and the board's resamples."""

    limits: Limits = field(default_factory=Limits)
    min_votes: int = 20
    """Systems with fewer votes are listed apart, as preliminary (the admin may change it)."""
    n_boot: int = 200
    """Bootstrap resamples for the board's intervals."""
    lineup: Lineup = field(default_factory=Lineup)
    """Voices, languages and extra prompts (the arena file)."""
    sampling: SamplingRules = field(default_factory=SamplingRules)
    rings: RingRules = field(default_factory=RingRules)

    @classmethod
    def of(cls, s: ArenaSettings) -> ArenaConfig:
        """The config a deployment's settings give (the other limits keep their defaults)."""
        limits = Limits(
            battles_per_minute=s.battles_per_minute,
            global_battles_per_minute=s.global_battles_per_minute,
            votes_per_hour=s.votes_per_hour,
            votes_per_day=s.votes_per_day,
        )
        lineup = load_lineup(s.config_file, limits.max_chars)
        return cls(limits, min_votes=s.min_votes, lineup=lineup)


def load_prompts() -> list[str]:
    """The bundled prompts (English): the listening tests' Harvard set
    (``assets/harvard/harvard.txt``) when it is there, else the arena's own copy of lists 1-3
    (``assets/arena-prompts.txt``)."""
    folder = resources.files("assets")
    for name in PROMPT_FILES:
        p = folder.joinpath(*name.split("/"))
        if p.is_file():
            lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
            return [ln for ln in lines if ln and not ln.startswith("#")]
    return []


def network_of(ip: str) -> str:
    """The client's network as the ring flags group it (IPv4 /24, IPv6 /48; else as given)."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    bits = IPV4_NETWORK if addr.version == 4 else IPV6_NETWORK
    return str(ipaddress.ip_network(f"{addr}/{bits}", strict=False))


def owner_of(conn: HTTPConnection) -> str | None:
    """The battle owner of this request or WebSocket: the visitor's one identity, or None for
    a client without the identity cookie (its battles could never be found again)."""
    who = identity(conn)
    return who.owner_id if who.persistent else None


MACHINE_COLUMNS = ("predicted_mos", "scored_takes")
"""The board's machine columns, after the fit's (docs/metrics.md: Beside human results)."""
MACHINE_NOTE = (
    "predicted_mos: DistillMOS (docs/metrics.md) averaged over the system's played takes "
    "in counted battles; scored_takes: how many are scored so far (the rest are scored in "
    "the background)"
)


@dataclass(frozen=True)
class NotCounted:
    """Stored votes the board leaves out, by why."""

    repeat_text: int
    """The voter had voted on the text before (a text counts on its first use)."""
    excluded_voter: int
    """First uses by a voter the admin excluded."""


@dataclass(frozen=True)
class FittedBoard(Board):
    """The fit of the counted votes, with what the store holds besides (cached per vote)."""

    votes_stored: int
    votes_not_counted: NotCounted
    systems_configured: list[str]


@dataclass(frozen=True)
class ScoredRow(BoardRow):
    """A board row with its machine columns (:func:`machine_column`)."""

    predicted_mos: float | None
    """The mean DistillMOS of the system's scored takes (2 decimals); None before any."""
    scored_takes: int


@dataclass(frozen=True)
class ArenaBoard(FittedBoard):
    """``GET /ll/arena/api/leaderboard``: the fitted board, each row with its predicted MOS,
    and ``machine``, what those columns are."""

    listed: list[ScoredRow]
    preliminary: list[ScoredRow]
    machine: str


def shallow(obj: Any) -> dict[str, Any]:
    """A dataclass's fields by name, values as they are (``asdict`` would copy them to dicts)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def machine_column(board: FittedBoard, votes: Any, store: Any) -> ArenaBoard:
    """``board`` with ``predicted_mos`` (the mean DistillMOS score of the system's played takes
    in counted battles; None before any is scored) and ``scored_takes`` on every row. Takes
    not scored yet are queued for the background scorer while its queue has room, so the
    column fills in as the board is looked at."""
    from app.store.scores import scores_of
    from app.web.take_scores import QUEUE_LIMIT, available, scorer_for

    takes: dict[str, str] = {}
    if len(votes):
        counted = votes[(votes["counted"] == 1) & (votes["excluded"] == 0)]
        for tc, sc in (("take_a", "system_a"), ("take_b", "system_b")):
            for t, s in zip(counted[tc], counted[sc], strict=True):
                if isinstance(t, str) and t:
                    takes[t] = str(s)
    scored: dict[str, list[float]] = {}
    have = set()
    for r in scores_of(store).of_takes(list(takes)):
        v = r.values.get("predicted_mos")
        if r.metric == "distillmos" and isinstance(v, int | float) and r.take_id not in have:
            have.add(r.take_id)  # one score per take (a newer model version adds a row)
            scored.setdefault(takes[r.take_id], []).append(float(v))
    if available():
        scorer = scorer_for(store)
        for t in [t for t in takes if t not in have][:QUEUE_LIMIT]:
            scorer.request(t, refuse_when_full=False)

    def with_score(row: BoardRow) -> ScoredRow:
        mine = scored.get(row.system, [])
        mos = round(float(np.mean(mine)), 2) if mine else None
        return ScoredRow(**shallow(row), predicted_mos=mos, scored_takes=len(mine))

    return ArenaBoard(
        **{
            **shallow(board),
            "listed": [with_score(r) for r in board.listed],
            "preliminary": [with_score(r) for r in board.preliminary],
        },
        machine=MACHINE_NOTE,
    )


class ArenaService:
    """The arena bound to one app: its DB access, config, prompts and board cache."""

    def __init__(
        self,
        state: AppState,
        config: ArenaConfig,
        seed: int | None = None,
        proxies: Proxies | None = None,
    ):
        self.state = state
        self.config = config
        self.arena = Arena(state.store, self.config.limits)
        self.audit = Audit(self.arena.rows, config.rings)
        self.rng = np.random.default_rng(seed)
        bundled = load_prompts() or [
            s for e in state.examples for s in [e["text"]] if len(s) <= self.config.limits.max_chars
        ]
        self.prompt_list = [Prompt(t, BUNDLED_LANGUAGE) for t in bundled]
        self.prompt_list += list(config.lineup.prompts)
        self.prompt_language = {p.text: p.language for p in self.prompt_list}
        self._board: tuple[tuple[int, int, int], FittedBoard] | None = None
        self._board_lock = threading.Lock()
        self._rate: tuple[tuple[str, ...], int] | None = None
        self.proxies = proxies if proxies is not None else Proxies.from_env()
        """Whose ``X-Forwarded-For`` is believed: the app's one rule (tests set a local proxy)."""

    @property
    def systems(self) -> list[str]:
        return list(self.state.backends)

    @property
    def prompts(self) -> list[str]:
        """Every prompt's text (bundled and the arena file's)."""
        return list(self.prompt_language)

    def spoken(self) -> dict[str, set[str]]:
        """The languages each system speaks on this arena (:meth:`Lineup.languages`)."""
        out = {}
        for name, e in list(self.state.backends.items()):
            try:
                caps = tuple(e.backend.capabilities.languages)
            except Exception:  # a remote backend may not know its capabilities yet
                caps = ()
            out[name] = self.config.lineup.languages(name, caps)
        return out

    def draw(self, language: str | None) -> Draw:
        """What a battle in ``language`` may draw (None: a prompt in any shared language)."""
        systems = self.systems
        spoken = self.spoken()
        by_lang: dict[str, list[str]] = {}
        for p in self.prompt_list:
            by_lang.setdefault(p.language, []).append(p.text)
        with_prompts = [spoken[s] & set(by_lang) for s in systems]
        allowed = allowed_pairs(
            with_prompts if language is None else [spoken[s] for s in systems], language
        )
        if len(systems) >= 2 and not allowed.any():
            lang = language or "any language with prompts"
            raise ArenaError(f"no two systems on this arena speak {lang}")
        return Draw(
            systems,
            allowed,
            {s: self.config.lineup.voices(s) for s in systems},
            self.config.sampling,
            language,
            by_lang,
            spoken,
        )

    def set_limits(self, **kw: Any) -> None:
        """Change limits at run time (tests, or an admin tuning a live Space)."""
        self.config.limits = replace(self.config.limits, **kw)
        self.arena.limits = self.config.limits

    def voter(self, conn: HTTPConnection) -> str:
        """The stored voter hash of this request or WebSocket (see the module doc)."""
        if hf_login_configured():
            user = hf_user(conn)
            if user is None:
                raise LoginRequired("log in with Hugging Face to battle and vote on this arena")
            return self.arena.voter_hash("hf", user.lower())
        return self.arena.voter_hash("ip", self.proxies.client_key(conn.scope))

    def network(self, conn: HTTPConnection) -> str:
        """The keyed hash of the client's network (:func:`network_of`), for the ring flags."""
        return self.arena.voter_hash("net", network_of(self.proxies.client_ip(conn.scope)))

    def min_votes(self) -> int:
        """Votes a system needs to be listed: the admin's setting, else the deployment's
        default (``LISTENLAB_ARENA_MIN_VOTES``)."""
        v = self.arena.setting("min_votes")
        return self.config.min_votes if v is None else int(v)

    def set_min_votes(self, value: Any) -> int | None:
        """The admin's listing threshold (None: back to the default); returns what is stored."""
        if value is None or value == "":
            self.arena.set_setting("min_votes", None)
            return None
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ArenaError("min_votes must be a whole number 0..100000")
        try:
            n = int(value)
        except ValueError:
            raise ArenaError("min_votes must be a whole number 0..100000") from None
        if not 0 <= n <= MAX_MIN_VOTES:
            raise ArenaError("min_votes must be a whole number 0..100000")
        self.arena.set_setting("min_votes", str(n))
        return n

    def board_view(self) -> ArenaBoard:
        """The leaderboard of the counted votes (first use of a text, voter not excluded),
        with each system's predicted MOS beside its rating (:func:`machine_column`)."""
        votes = self.arena.rows.export_frame()  # with the played takes (take_a, take_b)
        return machine_column(self.fitted_board(), votes, self.state.store)

    def board_data(self) -> dict[str, Any]:
        """The leaderboard as JSON (:class:`ArenaBoard`)."""
        return asdict(self.board_view())

    def fitted_board(self) -> FittedBoard:
        """The fit, cached until the next vote, exclusion or undo: the bootstrap is the costly
        part."""
        with self._board_lock:  # concurrent viewers wait for one fit instead of each running it
            min_votes = self.min_votes()
            key = (*self.arena.rows.board_stamp(), min_votes, self.config.n_boot)
            cached = self._board
            if cached is not None and cached[0] == key:
                return cached[1]
            every = self.arena.votes_frame()
            counted = every[(every["counted"] == 1) & (every["excluded"] == 0)]
            fit = fit_board(counted, min_votes=min_votes, n_boot=self.config.n_boot)
            data = FittedBoard(
                **shallow(fit),
                votes_stored=len(every),
                votes_not_counted=NotCounted(
                    repeat_text=int((every["counted"] == 0).sum()),
                    excluded_voter=int(((every["counted"] == 1) & (every["excluded"] == 1)).sum()),
                ),
                systems_configured=self.systems,
            )
            self._board = (key, data)
            return data

    async def board(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.board_data)

    def random_prompt(self) -> Prompt:
        """A prompt for the page's text box, in a language at least two systems speak."""
        spoken = self.spoken()
        ok = [p for p in self.prompt_list if sum(p.language in s for s in spoken.values()) >= 2]
        pool = ok or self.prompt_list
        if not pool:
            raise ArenaError("no bundled prompts: type a text instead")
        return pool[int(self.rng.integers(len(pool)))]

    def text_language(self, text: str, language: Any) -> str:
        """A text's language: a prompt's own, else the one the page gave, else the default."""
        if text in self.prompt_language:
            return self.prompt_language[text]
        if language in (None, ""):
            return self.config.lineup.default_language
        try:
            return language_tag(language)
        except LineupError as e:
            raise ArenaError(str(e)) from None

    async def new_battle(
        self,
        owner: str | None,
        text: Any,
        voter: str,
        *,
        network: str | None = None,
        language: Any = None,
        random: bool = False,
    ) -> dict[str, Any]:
        """A battle on ``text`` (in ``language``), or with ``random`` a prompt drawn after the
        pair, in a language both systems speak."""
        if owner is None:
            raise NotYours("no arena session: reload the page (cookies must be allowed)")
        if random:
            t, source, draw = None, "prompt", self.draw(None)
        else:
            t = clean_battle_text(text, self.config.limits)
            source = "prompt" if t in self.prompt_language else "typed"
            draw = self.draw(self.text_language(t, language))
        bt = await asyncio.to_thread(
            self.arena.new_battle,
            owner,
            t,
            draw,
            # a Generator of its own: self.rng is used only on the event loop (not thread-safe)
            np.random.default_rng(int(self.rng.integers(2**63))),
            text_source=source,
            voter=voter,
            network=network,
        )
        return owner_view(bt)

    async def vote(
        self, owner: str | None, battle_id: Any, choice: Any, voter: str
    ) -> dict[str, Any]:
        bt, created = await asyncio.to_thread(
            lambda: self.arena.vote(battle_id, owner, choice, voter=voter)
        )
        return VoteView.of_vote(bt, created).as_json()

    def stream_rate(self) -> int:
        """The one rate every side is streamed at (:func:`app.player.blind.common_rate` of
        the configured systems; cached until the set of systems changes)."""
        key = tuple(self.systems)
        if self._rate is None or self._rate[0] != key:
            rates = []
            for e in list(self.state.backends.values()):
                with contextlib.suppress(Exception):  # a remote backend may not know its rate
                    rates.append(e.backend.capabilities.sample_rate)
            self._rate = (key, common_rate(rates))
        return self._rate[1]


__all__ = [
    "ArenaBoard",
    "ArenaConfig",
    "ArenaService",
    "FittedBoard",
    "NotCounted",
    "ScoredRow",
    "load_prompts",
    "machine_column",
    "network_of",
    "owner_of",
]
