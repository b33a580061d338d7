"""docs/arena.md says what the arena's code does: every number of the pair choice, the ring
flags, the exclusions, the arena file and the export is read from the code and looked for on
the page, and the simulation's table is the one the benchmark's results give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.arena import audit, export, lineup
from app.arena.battles import PENDING_S
from app.arena.service import IPV4_NETWORK, IPV6_NETWORK
from evaluation.arena import sampling
from evaluation.arena.rings import RingRules

ROOT = Path(__file__).resolve().parents[1]
PAGE = " ".join((ROOT / "docs" / "arena.md").read_text(encoding="utf-8").split())


def claims() -> list[str]:
    s, r = sampling.SamplingRules(), RingRules()
    return [
        f"{s.explore * 100:g} % of battles draw their pair uniformly",
        f"fewer than half its fair share of the votes (`floor_share` {s.floor_share}",
        f"gain at least {s.near_best} of the best, and never fewer than the best "
        f"{s.min_candidates} pairs",
        f"under a N(0, {sampling.PRIOR_SD:g}) prior",
        f"Battles made in the last {PENDING_S:.0f} s and not voted yet",
        f"{sampling.QUADRATURE_NODES}-node Gauss–Hermite quadrature",
        f"in at least {r.one_system_share * 100:g} % of at least {r.min_votes} decisive battles",
        f"binomial p < {r.p_value:g}",
        f"one-sided z ≥ {r.z_against} over at least {r.min_votes} decisive votes",
        f"on at least {r.agree_share * 100:g} % of at least {r.min_shared} shared votes",
        f"at least {r.burst_voters} voters of one network (`a.b.c.0/{IPV4_NETWORK}` for IPv4, "
        f"the first {IPV6_NETWORK} bits for IPv6) casting at "
        f"least {r.burst_votes} votes within {r.burst_window_s / 60:.0f} minutes",
        f"the reason is required, {audit.MIN_REASON_CHARS}–{audit.MAX_REASON_CHARS} characters;"
        f" the name at most {audit.MAX_BY_CHARS}",
        f"at most {lineup.MAX_VOICES})",
        f"at most {lineup.MAX_FILE_BYTES // 2**20} MiB, at most {lineup.MAX_PROMPTS:,} prompts",
        f"names at most {lineup.MAX_NAME_CHARS} characters",
        f"a new file past {export.SHARD_BYTES // 2**20} MiB of audio, written "
        f"{export.ROW_GROUP} votes at a time",
    ]


@pytest.mark.parametrize("claim", claims())
def test_the_page_states_the_codes_numbers(claim):
    assert " ".join(claim.split()) in PAGE


def test_the_page_lists_the_exported_columns_in_order():
    cols = ", ".join(f"`{c}`" for c in export.VOTE_COLUMNS)
    assert f"The columns, in order: {cols}" in PAGE


def test_the_simulation_table_is_the_benchmarks():
    res = json.loads((ROOT / "benchmarks/results/arena_sampling.json").read_text())
    from benchmarks.arena_sampling import markdown

    table = " ".join(markdown(res).split())
    assert table in PAGE, "run benchmarks/arena_sampling.py --markdown and paste it"
