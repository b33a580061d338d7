"""The arena's board: a Bradley–Terry fit of the votes, with intervals, ranks and the counts.

Why in ``evaluation``: the board is analysis of a table of votes (one row per vote:
``system_a``, ``system_b``, ``choice``), the same whether the votes come from a live arena
(``store.arena.votes_frame()``) or a CSV export; it reads no database and imports nothing from
the app. It reuses :func:`evaluation.stats.bt_leaderboard`: a tie and "both bad" are both
*draws* in the fit (as LMSYS's Chatbot Arena counts "tie (bothbad)"), and "both bad" is also
counted per system.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from evaluation.arena.sampling import tally_arrays, tally_of


@dataclass(frozen=True)
class BoardRow:
    """One system on the board (JSON: ``asdict``). ``rank`` is None while not ``listed``."""

    rank: int | None
    system: str
    rating: float
    ci_low: float
    ci_high: float
    votes: int
    wins: int
    losses: int
    ties: int
    """Ties proper: 'both bad' votes are counted apart (both are draws in the fit)."""
    both_bad: int
    listed: bool


BOARD_COLUMNS = [f.name for f in fields(BoardRow) if f.name != "listed"]
"""The board's table columns, in order (``listed`` decides which table a row goes to)."""


def both_bad_counts(votes: pd.DataFrame) -> dict[str, int]:
    """'Both bad' votes per system (each such vote counts for both of its systems)."""
    out: dict[str, int] = {}
    if votes.empty:
        return out
    for _, r in votes[votes["choice"] == "both_bad"].iterrows():
        for s in (r["system_a"], r["system_b"]):
            out[s] = out.get(s, 0) + 1
    return out


SCALE = 400 / np.log(10)
Z95 = 1.959963984540054
VIRTUAL_GAMES = 2.0
"""The board's prior: 2 virtual games per system (one won, one lost) against an average one."""


def model_sd(votes: pd.DataFrame, systems: list[str], point: np.ndarray) -> np.ndarray:
    """Each system's sd on the rating scale from the observed information at the board's
    point (the votes' Bradley–Terry information plus the virtual games'), for log-strengths
    centred on their mean. Unlike a bootstrap it stays right when the pairs were chosen from
    earlier votes (the arena's active sampling), whose design a resample does not repeat."""
    rows = zip(votes["system_a"], votes["system_b"], votes["choice"], strict=True)
    i, j, games, _ = tally_arrays(systems, tally_of(rows))
    n = len(systems)
    p = 1.0 / (1.0 + np.exp(-(point[i] - point[j])))
    w = games * p * (1.0 - p)
    q = 1.0 / (1.0 + np.exp(-point))
    info = np.diag(VIRTUAL_GAMES * q * (1.0 - q))
    np.add.at(info, (i, i), w)
    np.add.at(info, (j, j), w)
    np.add.at(info, (i, j), -w)
    np.add.at(info, (j, i), -w)
    centre = np.eye(n) - 1.0 / n
    cov = centre @ np.linalg.pinv(info) @ centre
    return SCALE * np.sqrt(np.maximum(np.diag(cov), 0.0))


def widened(df: pd.DataFrame, votes: pd.DataFrame) -> pd.DataFrame:
    """The board's intervals: rating ± 1.96 × the larger of the bootstrap sd (voters' votes
    lean together) and the model sd (:func:`model_sd`), re-sorted by the lower bound."""
    if df.empty:
        return df
    systems = df["system"].astype(str).tolist()
    point = (df["rating"].to_numpy(dtype=float) - 1500.0) / SCALE
    boot = (df["ci_high"].to_numpy(dtype=float) - df["ci_low"].to_numpy(dtype=float)) / 2
    half = np.maximum(boot, Z95 * model_sd(votes, systems, point))
    out = df.assign(ci_low=df["rating"] - half, ci_high=df["rating"] + half)
    return out.sort_values(
        ["listed", "ci_low", "rating"], ascending=[False, False, False], ignore_index=True
    )


@dataclass(frozen=True)
class Board:
    """The board as the fit gives it (JSON: ``asdict``): how it was made, in words, and its
    rows, ``listed`` (ranked) and ``preliminary`` (fewer than ``min_votes`` votes)."""

    method: str
    rank: str
    listing: str
    ties: str
    min_votes: int
    total_votes: int
    """The votes fitted."""
    listed: list[BoardRow]
    preliminary: list[BoardRow]


def fit_board(
    votes: pd.DataFrame, *, min_votes: int = 20, n_boot: int = 200, seed: int = 0
) -> Board:
    """The board of ``votes``: ``listed`` (at least ``min_votes`` votes, sorted by the 95 %
    interval's lower bound) and ``preliminary`` (fewer votes, fitted with the rest)."""
    from evaluation.stats import bt_leaderboard

    v = votes.copy()
    both_bad = both_bad_counts(v)
    if not v.empty:
        v["choice"] = v["choice"].replace({"both_bad": "tie"})
    df = bt_leaderboard(
        v,
        min_votes=min_votes,
        n_boot=n_boot,
        seed=seed,
        voter="voter",
        interval="normal",
        prior=VIRTUAL_GAMES,
    )
    df = widened(df, v)
    rows = []
    for r in df.to_dict("records"):
        bb = both_bad.get(str(r["system"]), 0)
        rows.append(
            BoardRow(
                rank=int(r["rank"]) if r["listed"] else None,
                system=str(r["system"]),
                rating=round(float(r["rating"]), 1),
                ci_low=round(float(r["ci_low"]), 1),
                ci_high=round(float(r["ci_high"]), 1),
                votes=int(r["votes"]),
                wins=int(r["wins"]),
                losses=int(r["losses"]),
                ties=int(r["ties"]) - bb,
                both_bad=bb,
                listed=bool(r["listed"]),
            )
        )
    return Board(
        method="Bradley-Terry (evalica, 2 virtual games per system against an average "
        "opponent), Elo-like scale 1500 + 400*log10(strength); 95% interval = rating ± 1.96 "
        f"× the larger of two sds: over {n_boot} bootstrap resamples of voters (of votes "
        "where a vote has no voter), and from the fit's observed information; sorted by the "
        "interval's lower bound",
        rank="1 + the number of listed systems significantly stronger (Wald test of each "
        "pair's difference with its bootstrap sd, Holm-corrected over all listed pairs, 5%); "
        "systems not told apart share a rank",
        listing=f"listed from {int(min_votes)} votes (set by the admin at /admin/arena; "
        "default LISTENLAB_ARENA_MIN_VOTES); fewer: preliminary",
        ties="a tie and 'both bad' are draws (half a win each) in the fit",
        min_votes=int(min_votes),
        total_votes=len(votes),
        listed=[r for r in rows if r.listed],
        preliminary=[r for r in rows if not r.listed],
    )


def leaderboard(
    votes: pd.DataFrame, *, min_votes: int = 20, n_boot: int = 200, seed: int = 0
) -> dict[str, Any]:
    """The board as JSON-safe data (:func:`fit_board`, ``asdict``): what the CLI and the
    export write."""
    return asdict(fit_board(votes, min_votes=min_votes, n_boot=n_boot, seed=seed))


__all__ = ["BOARD_COLUMNS", "Board", "BoardRow", "both_bad_counts", "fit_board", "leaderboard"]
