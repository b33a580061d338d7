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
:func:`app.config.arena_settings`, and passed in as an :class:`ArenaConfig`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
from starlette.requests import HTTPConnection

from app.arena.battles import (
    Arena,
    ArenaError,
    Limits,
    LoginRequired,
    NotYours,
    clean_battle_text,
    owner_view,
)
from app.config import ArenaSettings
from app.player.blind import common_rate
from app.web.identity import hf_login_configured, hf_user, identity
from app.web.proxies import Proxies
from evaluation.arena import leaderboard

if TYPE_CHECKING:
    from app.state import AppState

PROMPT_FILES = ("harvard/harvard.txt", "arena-prompts.txt")
MAX_MIN_VOTES = 100_000


@dataclass
class ArenaConfig:
    """The arena's knobs: the limits and the listing threshold a deployer sets
    (``LISTENLAB_ARENA_*``, :func:`app.config.arena_settings`), and the board's resamples."""

    limits: Limits = field(default_factory=Limits)
    min_votes: int = 20
    """Systems with fewer votes are listed apart, as preliminary (the admin may change it)."""
    n_boot: int = 200
    """Bootstrap resamples for the board's intervals."""

    @classmethod
    def of(cls, s: ArenaSettings) -> ArenaConfig:
        """The config a deployment's settings give (the other limits keep their defaults)."""
        return cls(
            Limits(
                battles_per_minute=s.battles_per_minute,
                global_battles_per_minute=s.global_battles_per_minute,
                votes_per_hour=s.votes_per_hour,
                votes_per_day=s.votes_per_day,
            ),
            min_votes=s.min_votes,
        )


def load_prompts() -> list[str]:
    """The random prompts: the listening tests' Harvard set (``assets/harvard/harvard.txt``)
    when it is there, else the arena's own copy of lists 1-3 (``assets/arena-prompts.txt``)."""
    folder = resources.files("assets")
    for name in PROMPT_FILES:
        p = folder.joinpath(*name.split("/"))
        if p.is_file():
            lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
            return [ln for ln in lines if ln and not ln.startswith("#")]
    return []


def owner_of(conn: HTTPConnection) -> str | None:
    """The battle owner of this request or WebSocket: the visitor's one identity, or None for
    a client without the identity cookie (its battles could never be found again)."""
    who = identity(conn)
    return who.owner_id if who.persistent else None


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
        self.rng = np.random.default_rng(seed)
        self.prompts = load_prompts() or [
            s for e in state.examples for s in [e["text"]] if len(s) <= self.config.limits.max_chars
        ]
        self._board: tuple[tuple[int, int, int], dict[str, Any]] | None = None
        self._board_lock = threading.Lock()
        self._rate: tuple[tuple[str, ...], int] | None = None
        self.proxies = proxies if proxies is not None else Proxies.from_env()
        """Whose ``X-Forwarded-For`` is believed: the app's one rule (tests set a local proxy)."""

    @property
    def systems(self) -> list[str]:
        return list(self.state.backends)

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

    def board_data(self) -> dict[str, Any]:
        """The leaderboard (cached until the next vote: the bootstrap is the costly part)."""
        with self._board_lock:  # concurrent viewers wait for one fit instead of each running it
            min_votes = self.min_votes()
            key = (self.arena.vote_count(), min_votes, self.config.n_boot)
            cached = self._board
            if cached is not None and cached[0] == key:
                return cached[1]
            data = leaderboard(
                self.arena.votes_frame(),
                min_votes=min_votes,
                n_boot=self.config.n_boot,
            )
            data["systems_configured"] = self.systems
            self._board = (key, data)
            return data

    async def board(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.board_data)

    def random_prompt(self) -> str:
        if not self.prompts:
            raise ArenaError("no bundled prompts: type a text instead")
        return self.prompts[int(self.rng.integers(len(self.prompts)))]

    async def new_battle(self, owner: str | None, text: Any, voter: str) -> dict[str, Any]:
        if owner is None:
            raise NotYours("no arena session: reload the page (cookies must be allowed)")
        t = clean_battle_text(text, self.config.limits)
        source = "prompt" if t in self.prompts else "typed"
        bt = await asyncio.to_thread(
            self.arena.new_battle,
            owner,
            t,
            self.systems,
            # a Generator of its own: self.rng is used only on the event loop (not thread-safe)
            np.random.default_rng(int(self.rng.integers(2**63))),
            text_source=source,
            voter=voter,
        )
        return owner_view(bt)

    async def vote(
        self, owner: str | None, battle_id: Any, choice: Any, voter: str
    ) -> dict[str, Any]:
        bt, created = await asyncio.to_thread(
            lambda: self.arena.vote(battle_id, owner, choice, voter=voter)
        )
        return {**owner_view(bt), "choice": bt.voted, "counted": created}

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


__all__ = ["ArenaConfig", "ArenaService", "load_prompts", "owner_of"]
