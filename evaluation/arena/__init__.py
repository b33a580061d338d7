"""The arena's analysis: the board (:mod:`~evaluation.arena.board`), the next pair
(:mod:`~evaluation.arena.sampling`) and the voting-ring flags (:mod:`~evaluation.arena.rings`).

Why in ``evaluation``: each works on a table of votes (one row per vote), the same whether the
votes come from a live arena (``store.arena``) or an export; none reads a database or imports
the app. The package re-exports what the app and the benchmarks use.
"""

from __future__ import annotations

from evaluation.arena.board import (
    BOARD_COLUMNS,
    Board,
    BoardRow,
    both_bad_counts,
    fit_board,
    leaderboard,
)

__all__ = ["BOARD_COLUMNS", "Board", "BoardRow", "both_bad_counts", "fit_board", "leaderboard"]
