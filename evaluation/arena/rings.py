"""Flags for voting rings: voters whose votes look organised rather than heard.

Why flags and not automatic exclusion: every signal here also fits some honest voter (a
listener who truly prefers one system, a class voting from one university network). The
flags tell the admin where to look; the admin excludes with a reason, reversibly
(:mod:`app.arena.audit`). What TTS Arena V2 and V3 check was the model (a voter's share for
one model, coordinated votes for one model, accounts sharing an address: see
``docs/arena.md``); the rules and their numbers are :class:`RingRules`:

* ``one_system``: a voter who picked one system in at least ``one_system_share`` of at least
  ``min_votes`` decisive battles it was in, where the panel (the Bradley–Terry fit of the
  other voters' counted votes) expects far fewer: binomial tail below ``p_value``.
* ``against_panel``: a voter who picked the panel's underdog far more often than the panel
  expects (one-sided z ≥ ``z_against`` over at least ``min_votes`` decisive votes, and at
  least ``against_share`` of them against the panel).
* ``ring``: against-panel voters who agree with each other: on the pairs two of them both
  judged, the same winner (each voter's most frequent) in at least ``agree_share`` of at
  least ``min_shared`` shared votes (a pair weighs the fewer votes of the two on it). Each
  connected group of two or more is one ring.
* ``shared_owner``: one browser session (the owner cookie) voting as two or more voters
  (one browser behind several addresses or logins).
* ``network_burst``: at least ``burst_voters`` voters of one network (IPv4 /24, IPv6 /48)
  casting at least ``burst_votes`` votes within ``burst_window_s``.

The panel is fitted twice: on every counted vote, then again without the voters the first
pass flagged, so a large ring does not hide by pulling the panel towards itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from evaluation.arena.sampling import posterior, tally_of

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class RingRules:
    """The flags' thresholds (``docs/arena.md`` lists them)."""

    min_votes: int = 10
    """Decisive votes a voter needs before its share or its disagreement is judged."""
    one_system_share: float = 0.9
    p_value: float = 0.001
    z_against: float = 3.5
    against_share: float = 0.5
    agree_share: float = 0.8
    min_shared: int = 5
    burst_voters: int = 3
    burst_votes: int = 15
    burst_window_s: float = 600.0


@dataclass(frozen=True)
class Flag:
    """One reason to look at some voters."""

    kind: str
    """``one_system``, ``against_panel``, ``ring``, ``shared_owner`` or ``network_burst``."""
    voters: tuple[str, ...]
    votes: int
    """The votes the flag is about."""
    detail: str
    """What was seen, with its numbers, for the admin."""
    score: float = 0.0
    """How strong (a z or −log10 p); larger is stronger."""
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["voters"] = list(self.voters)
        return d


def decisive(votes: pd.DataFrame) -> pd.DataFrame:
    """Votes with a winner, with ``winner`` and ``loser`` columns (ties carry no direction)."""
    v = votes[votes["choice"].isin(["a", "b"])].copy()
    a_won = v["choice"] == "a"
    v["winner"] = np.where(a_won, v["system_a"], v["system_b"])
    v["loser"] = np.where(a_won, v["system_b"], v["system_a"])
    return v


def panel_prob(votes: pd.DataFrame, judged: pd.DataFrame) -> np.ndarray:
    """For each row of ``judged`` (winner, loser), the panel's chance that the winner wins:
    the Bradley–Terry posterior mean fitted on ``votes``."""
    systems = sorted(set(votes["system_a"]) | set(votes["system_b"]) | set(judged["winner"]))
    systems = sorted(set(systems) | set(judged["loser"]))
    rows = zip(votes["system_a"], votes["system_b"], votes["choice"], strict=True)
    post = posterior(systems, tally_of(rows))
    idx = {s: k for k, s in enumerate(systems)}
    w = judged["winner"].map(idx).to_numpy(dtype=int)
    lo = judged["loser"].map(idx).to_numpy(dtype=int)
    return 1.0 / (1.0 + np.exp(-(post.mean[w] - post.mean[lo])))


def one_system_flags(d: pd.DataFrame, rules: RingRules) -> list[Flag]:
    out = []
    for voter, g in d.groupby("voter", sort=True):
        for s in sorted(set(g["system_a"]) | set(g["system_b"])):
            mine = g[(g["system_a"] == s) | (g["system_b"] == s)]
            n = len(mine)
            if n < rules.min_votes:
                continue
            k = int((mine["winner"] == s).sum())
            p_s = np.where(mine["winner"] == s, mine["p"], 1 - mine["p"])
            p = float(stats.binom.sf(k - 1, n, float(p_s.mean())))
            if k / n >= rules.one_system_share and p < rules.p_value:
                out.append(
                    Flag(
                        "one_system",
                        (str(voter),),
                        n,
                        f"picked {s} in {k} of {n} decisive battles it was in; the panel "
                        f"expects {p_s.mean():.0%} (binomial p = {p:.1e})",
                        round(-np.log10(max(p, 1e-300)), 1),
                        {"system": s, "picked": k, "battles": n, "panel_share": float(p_s.mean())},
                    )
                )
    return out


def against_panel(d: pd.DataFrame, rules: RingRules) -> dict[str, tuple[int, int, float]]:
    """Voters who pick the panel's underdog far too often: voter -> (against, n, z)."""
    out = {}
    for voter, g in d.groupby("voter", sort=True):
        n = len(g)
        if n < rules.min_votes:
            continue
        q = np.minimum(g["p"], 1 - g["p"]).to_numpy()  # the chance of an underdog pick
        against = int((g["p"] < 0.5).sum())
        sd = float(np.sqrt((q * (1 - q)).sum()))
        z = (against - q.sum()) / sd if sd > 0 else 0.0
        if z >= rules.z_against and against / n >= rules.against_share:
            out[str(voter)] = (against, n, float(z))
    return out


def agreeing_groups(d: pd.DataFrame, voters: list[str], rules: RingRules) -> list[list[str]]:
    """Connected groups (2 or more) of ``voters`` who name the same winners on shared pairs."""
    pref: dict[str, dict[tuple[str, str], tuple[str, int]]] = {}
    for voter in voters:
        g = d[d["voter"] == voter]
        pairs: dict[tuple[str, str], list[str]] = {}
        for w, lo in zip(g["winner"], g["loser"], strict=True):
            pairs.setdefault(tuple(sorted((w, lo))), []).append(w)
        pref[voter] = {p: (max(sorted(set(ws)), key=ws.count), len(ws)) for p, ws in pairs.items()}
    parent = {v: v for v in voters}

    def root(v: str) -> str:
        while parent[v] != v:
            v = parent[v]
        return v

    for k, a in enumerate(voters):
        for b in voters[k + 1 :]:
            shared = set(pref[a]) & set(pref[b])
            weight = {p: min(pref[a][p][1], pref[b][p][1]) for p in shared}
            n = sum(weight.values())
            same = sum(w for p, w in weight.items() if pref[a][p][0] == pref[b][p][0])
            if n >= rules.min_shared and same / n >= rules.agree_share:
                parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for v in voters:
        groups.setdefault(root(v), []).append(v)
    return [sorted(g) for g in groups.values() if len(g) >= 2]


def panel_flags(votes: pd.DataFrame, rules: RingRules) -> list[Flag]:
    """``one_system``, ``against_panel`` and ``ring``, with the panel fitted twice."""
    d = decisive(votes[votes["voter"].notna()])
    if d.empty:
        return []
    suspects: set[str] = set()
    for _ in range(2):
        panel = votes[~votes["voter"].isin(suspects)]
        d["p"] = panel_prob(panel, d)
        flags = one_system_flags(d, rules)
        against = against_panel(d, rules)
        suspects = {v for f in flags for v in f.voters} | set(against)
    rings = agreeing_groups(d, sorted(against), rules)
    in_ring = {v for g in rings for v in g}
    for g in rings:
        n = int(sum(against[v][1] for v in g))
        k = int(sum(against[v][0] for v in g))
        flags.append(
            Flag(
                "ring",
                tuple(g),
                n,
                f"{len(g)} voters who agree with each other and against the panel: "
                f"{k} of {n} decisive votes for the panel's underdog",
                round(min(against[v][2] for v in g), 1),
                {"against": k, "decisive": n},
            )
        )
    for v, (k, n, z) in sorted(against.items()):
        if v not in in_ring:
            flags.append(
                Flag(
                    "against_panel",
                    (v,),
                    n,
                    f"{k} of {n} decisive votes for the panel's underdog (z = {z:.1f})",
                    round(z, 1),
                    {"against": k, "decisive": n},
                )
            )
    return flags


def shared_owner_flags(votes: pd.DataFrame) -> list[Flag]:
    out = []
    v = votes[votes["owner"].notna() & votes["voter"].notna()]
    for owner, g in v.groupby("owner", sort=True):
        voters = sorted(set(g["voter"]))
        if len(voters) >= 2:
            out.append(
                Flag(
                    "shared_owner",
                    tuple(voters),
                    len(g),
                    f"one browser session voted as {len(voters)} voters ({len(g)} votes)",
                    float(len(voters)),
                    {"owner": str(owner)[:12]},
                )
            )
    return out


def burst_flags(votes: pd.DataFrame, rules: RingRules) -> list[Flag]:
    out = []
    v = votes[votes["network"].notna() & votes["voter"].notna()].sort_values("voted_ts")
    for net, g in v.groupby("network", sort=True):
        ts = g["voted_ts"].to_numpy(dtype=float)
        ends = np.searchsorted(ts, ts + rules.burst_window_s, side="right")
        best = int(np.argmax(ends - np.arange(len(ts)))) if len(ts) else 0
        window = g.iloc[best : ends[best]] if len(ts) else g
        voters = sorted(set(window["voter"]))
        if len(window) >= rules.burst_votes and len(voters) >= rules.burst_voters:
            out.append(
                Flag(
                    "network_burst",
                    tuple(voters),
                    len(window),
                    f"{len(window)} votes from {len(voters)} voters of one network within "
                    f"{rules.burst_window_s / 60:.0f} min",
                    float(len(voters)),
                    {"network": str(net)[:12]},
                )
            )
    return out


def ring_flags(votes: pd.DataFrame, rules: RingRules | None = None) -> list[Flag]:
    """Every flag for a table of votes with ``system_a``, ``system_b``, ``choice``,
    ``voter``, and (where known) ``owner``, ``network`` and ``voted_ts``; strongest first
    within each kind."""
    rules = rules or RingRules()
    if votes.empty:
        return []
    flags = panel_flags(votes, rules)
    if "owner" in votes:
        flags += shared_owner_flags(votes)
    if "network" in votes and "voted_ts" in votes:
        flags += burst_flags(votes, rules)
    kinds = ["ring", "one_system", "against_panel", "shared_owner", "network_burst"]
    return sorted(flags, key=lambda f: (kinds.index(f.kind), -f.score, f.voters))


__all__ = [
    "Flag",
    "RingRules",
    "against_panel",
    "agreeing_groups",
    "burst_flags",
    "decisive",
    "one_system_flags",
    "panel_flags",
    "panel_prob",
    "ring_flags",
    "shared_owner_flags",
]
