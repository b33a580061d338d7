"""What the app asks of a store, engine-neutral: the contract a second engine implements.

Why Protocols and not "whatever ``Store`` happens to have": issue #30 adds PostgreSQL beside
SQLite. Everything the app, the CLI and the analysis call on a store is named here with the
records it takes and gives (:mod:`app.store.records`), so a new engine knows what to write
and a test can check that each engine has all of it (``tests/test_store.py``). SQLite's
:class:`app.store.Store` implements :class:`StoreEngine`; its ``db`` (a sqlite-utils
connection) is SQLite's own and not part of the contract. The listening-test tables
(:mod:`app.store.listening`) are kept on top of a store and are not covered here yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from app.store.records import (
    AbVote,
    ArenaStream,
    ArenaVote,
    Assignment,
    BattleRecord,
    BattleWindow,
    GlitchReport,
    ListeningTest,
    MosRating,
    Prompt,
    Rater,
    System,
    TakeInfo,
    TakeTimeline,
    Written,
)

if TYPE_CHECKING:
    import pandas as pd

    from app.store.arena import Exclusion
    from evaluation.takes import Take


@runtime_checkable
class TakeStore(Protocol):
    """Systems, prompts, takes (audio and chunk timeline), and players' stall reports."""

    def add_system(self, s: System) -> Written: ...

    def add_prompt(self, p: Prompt) -> Written: ...

    def save_take(
        self,
        take: Take,
        *,
        system_id: str | None = None,
        prompt_id: str | None = None,
        audio_format: str = "wav",
    ) -> str: ...

    def load_take(self, take_id: str) -> Take: ...

    def take_info(self, take_id: str) -> TakeInfo | None: ...

    def take_ids(self, system_id: str | None = None) -> list[str]: ...

    def recent_timelines(self, system_id: str, limit: int = 30) -> list[TakeTimeline]: ...

    def audio_path(self, take_id: str) -> Path: ...

    def boundaries_ms(self, take_id: str) -> list[float]: ...

    def record_underruns(
        self,
        take_id: str,
        count: int,
        stall_ms: float,
        positions: Iterable[float] = (),
        *,
        report_id: str | None = None,
        rater_id: str | None = None,
        source: str = "browser",
    ) -> Written: ...

    def takes_frame(self) -> pd.DataFrame: ...

    def chunks_frame(self) -> pd.DataFrame: ...

    def underruns_frame(self) -> pd.DataFrame: ...


@runtime_checkable
class RatingStore(Protocol):
    """Raters, tests and playlists, votes, glitch marks, findings, and their frames."""

    def add_rater(self, r: Rater) -> Written: ...

    def add_test(self, t: ListeningTest) -> Written: ...

    def add_assignment(self, a: Assignment) -> Written: ...

    def assignments(self, test_id: str, rater_id: str) -> list[Assignment]: ...

    def add_mos_rating(self, m: MosRating) -> Written: ...

    def add_ab_vote(self, v: AbVote) -> Written: ...

    def add_glitch_report(self, g: GlitchReport) -> Written: ...

    def glitch_report(self, report_id: str) -> GlitchReport | None: ...

    def mark_count(self, test_id: str, rater_id: str, take_id: str) -> int: ...

    def add_auto_findings(
        self, take_id: str, findings: Iterable[Any], *, detector: str = "glitches"
    ) -> int: ...

    def frame(self, table: str) -> pd.DataFrame: ...

    def answer_frame(self, name: str, test_id: str | None = None) -> pd.DataFrame: ...

    def report_tables(self) -> tuple[str, ...]: ...

    def findings_frame(self) -> pd.DataFrame: ...


@runtime_checkable
class ArenaStore(Protocol):
    """The arena's battles, streams, votes, voters and settings (``store.arena``).

    ``check`` arguments are the arena's rules: the engine runs them inside the write's
    transaction, on what it read there, so two concurrent requests cannot both pass.
    """

    def add_battle(
        self,
        battle: BattleRecord,
        voter: str,
        check: Callable[[BattleWindow], None],
        *,
        window_s: float = 60.0,
    ) -> None: ...

    def battle(self, battle_id: str) -> BattleRecord | None: ...

    def add_stream(
        self,
        battle_id: str,
        side: str,
        take_id: str,
        ws_session: str,
        now: float,
        check: Callable[[int], None],
    ) -> None: ...

    def finish_stream(
        self, take_id: str, status: str, duration_s: float | None, earliest_end_ts: float | None
    ) -> None: ...

    def stream(self, take_id: str, battle_id: str, side: str) -> ArenaStream | None: ...

    def mark_played(
        self, take_id: str, battle_id: str, side: str, played_ts: float, played_ms: float
    ) -> None: ...

    def votes_since(self, voter: str, since_ts: float) -> tuple[int, float | None]: ...

    def add_vote(
        self,
        v: ArenaVote,
        check: Callable[[], None] | None = None,
        counts: Callable[[int], tuple[bool, str | None]] | None = None,
    ) -> bool: ...

    def earlier_votes_on_text(self, battle_id: str, voter: str | None) -> int: ...

    def voter_dropped(self, voter: str) -> bool: ...

    def drop_voter(self, voter: str) -> int: ...

    def voter_salt(self, new_salt: str) -> str: ...

    def setting(self, key: str) -> str | None: ...

    def set_setting(self, key: str, value: str | None) -> None: ...

    def voters_frame(self) -> pd.DataFrame: ...

    def votes_frame(self) -> pd.DataFrame: ...

    def vote_count(self) -> int: ...

    def tally(self) -> list[tuple[str, str, str, int]]: ...

    def pending_pairs(self, since_ts: float) -> list[tuple[str, str, int]]: ...

    def board_stamp(self) -> tuple[int, ...]: ...

    def exclude(self, e: Exclusion) -> Exclusion: ...

    def undo_exclusion(self, exclusion_id: str, by: str, reason: str, at: str) -> Exclusion: ...

    def exclusion(self, exclusion_id: str) -> Exclusion | None: ...

    def active_exclusion(self, voter: str) -> Exclusion | None: ...

    def exclusions(self) -> list[Exclusion]: ...

    def audit_frame(self) -> pd.DataFrame: ...

    def export_frame(self) -> pd.DataFrame: ...


@runtime_checkable
class StoreEngine(TakeStore, RatingStore, Protocol):
    """A whole store: takes, ratings, the arena (``arena``), and its life cycle."""

    path: Path
    read_only: bool
    arena: ArenaStore

    @property
    def journal_mode(self) -> str: ...

    @property
    def schema_version(self) -> int: ...

    def snapshot(self, dest: str | Path) -> list[tuple[Path, str]]:
        """A consistent copy of the study while the server runs: one SQLite file at ``dest``
        and every take's audio, as (file, path in the copy) pairs, the database first."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> StoreEngine: ...

    def __exit__(self, *exc: object) -> None: ...


__all__ = ["ArenaStore", "RatingStore", "StoreEngine", "TakeStore"]
