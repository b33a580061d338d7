"""Which two systems battle next: the pair whose vote is expected to teach the board most.

Why not vote counts alone: weighting pairs by how few votes they have (the arena's first rule,
kept here as :func:`count_weighted_pair`, the baseline ``benchmarks/arena_sampling.py``
measures against) spends as many votes on a pair whose order is already plain (a strong
system against a weak one) as on two systems the board cannot yet tell apart. Active sampling
asks instead which vote would change what the board believes most. This is the idea of ASAP
(Mikhailiuk, Wilmot, Pérez-Ortiz, Yue and Mantiuk, "Active Sampling for Pairwise Comparisons
via Approximate Message Passing and Information Gain Maximization", ICPR 2020,
arXiv:2004.05691; code: github.com/gfxdisp/asap), here under the Bradley–Terry model the
board fits:

1. **Posterior.** The counted votes give a Laplace (Gaussian) approximation of the posterior
   of the systems' log-strengths: the Bradley–Terry maximum a posteriori under a N(0, 1)
   prior (a tie is half a win each), and its covariance, the inverse of the Hessian there
   (:func:`posterior`). Battles drawn but not yet voted add their expected information to
   it (:func:`with_pending`), so a burst of new battles spreads over the pairs.
2. **Expected information gain.** A vote between ``i`` and ``j`` depends on the strengths
   only through their difference ``d``, posterior N(m, v). So the information one vote brings
   about all the strengths (the expected Kullback–Leibler divergence from the posterior to
   the next one, ASAP's criterion) is the mutual information between the outcome and ``d``:
   ``H(E[σ(d)]) - E[H(σ(d))]``, computed by Gauss–Hermite quadrature
   (:func:`information_gain`). It is largest for pairs that are close *and* uncertain.
3. **Safeguards a public arena needs** (:class:`SamplingRules`): a share of battles is drawn
   uniformly among all pairs (``explore``), a system below a floor of its fair share of
   votes is put in the next battle (``floor_share``), and the pair is drawn at random among
   the near-best (gain within ``near_best`` of the best, at least ``min_candidates`` pairs),
   weighted by gain, with a random side order: a voter cannot predict the next pair.

The functions take plain arrays and tallies, read no database and import nothing from the app.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

PRIOR_SD = 1.0
"""The prior's sd on a system's natural-log strength (1.0: a 74 % win chance between systems
one sd apart; weak enough that 20 votes dominate it)."""
QUADRATURE_NODES = 24
NEWTON_STEPS = 60
NEWTON_TOL = 1e-9
PAIR_SMOOTHING = 5.0
"""The baseline's weight: ``1 / (PAIR_SMOOTHING + votes on the pair)``."""

PairCounts = Mapping[tuple[str, str], tuple[float, float, float]]
"""Votes per pair ``(x, y)`` with ``x < y``: ``(x won, y won, ties)``."""


@dataclass(frozen=True)
class SamplingRules:
    """How the next pair is drawn (the defaults are the arena's; ``docs/arena.md`` lists them)."""

    explore: float = 0.05
    """Share of battles whose pair is drawn uniformly among all pairs."""
    floor_share: float = 0.5
    """A system with fewer votes than this share of its fair share (2 × votes / systems) is in
    the next battle (once there are at least as many votes as systems)."""
    near_best: float = 0.9
    """Pairs whose gain is at least this share of the best gain are candidates."""
    min_candidates: int = 3
    """At least this many of the best pairs are candidates (when there are that many)."""


@dataclass(frozen=True)
class Posterior:
    """The Laplace approximation of the strengths' posterior (natural-log scale)."""

    systems: tuple[str, ...]
    mean: np.ndarray
    cov: np.ndarray


@dataclass(frozen=True)
class PairChoice:
    """The next battle: its two systems (side A first) and why they were drawn."""

    a: str
    b: str
    why: str
    """``gain`` (among the near-best), ``floor`` (a starved system), ``explore`` (uniform),
    ``only`` (the one pair there is)."""
    gain: float | None = None
    """The pair's expected information gain, in nats (None when not computed)."""
    candidates: int = 1
    """How many pairs the draw was among."""
    detail: dict[str, float] = field(default_factory=dict)


def tally_arrays(
    systems: list[str] | tuple[str, ...], tally: PairCounts
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, games, score_i)`` per pair with votes: indices into ``systems``, the number of
    votes and ``i``'s score (wins + half the ties). Pairs naming an unknown system are left out."""
    index = {s: k for k, s in enumerate(systems)}
    rows = []
    for (x, y), (wx, wy, t) in tally.items():
        if x in index and y in index and x != y and wx + wy + t > 0:
            rows.append((index[x], index[y], wx + wy + t, wx + t / 2))
    if not rows:
        z = np.zeros(0)
        return z.astype(int), z.astype(int), z, z
    a = np.array(rows, dtype=float)
    return a[:, 0].astype(int), a[:, 1].astype(int), a[:, 2], a[:, 3]


def posterior(
    systems: list[str] | tuple[str, ...],
    tally: PairCounts,
    *,
    prior_sd: float = PRIOR_SD,
    start: np.ndarray | None = None,
) -> Posterior:
    """The Bradley–Terry MAP under a N(0, ``prior_sd``²) prior, by Newton's method, and the
    inverse Hessian there (``start``: a previous mean, to converge in a step or two)."""
    n = len(systems)
    i, j, games, score = tally_arrays(systems, tally)
    theta = np.zeros(n) if start is None or len(start) != n else np.array(start, dtype=float)
    prec = 1.0 / prior_sd**2
    hess = np.eye(n) * prec
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(theta[i] - theta[j])))
        r = score - games * p
        grad = np.bincount(i, r, n) - np.bincount(j, r, n) - prec * theta
        w = games * p * (1.0 - p)
        hess = np.eye(n) * prec
        np.add.at(hess, (i, i), w)
        np.add.at(hess, (j, j), w)
        np.add.at(hess, (i, j), -w)
        np.add.at(hess, (j, i), -w)
        step = np.linalg.solve(hess, grad)
        theta = theta + step
        if float(np.abs(step).max(initial=0.0)) < NEWTON_TOL:
            break
    return Posterior(tuple(systems), theta, np.linalg.inv(hess))


def with_pending(post: Posterior, pending: Mapping[tuple[str, str], float]) -> Posterior:
    """The posterior as it will be once the votes on their way are in (battles made but not
    yet voted, per pair): their expected information ``n·p(1 − p)`` is added to the
    precision, the mean is left alone. Without it, battles drawn before the last ones are
    voted all go to the same few pairs."""
    index = {s: k for k, s in enumerate(post.systems)}
    rows = [(index[x], index[y], n) for (x, y), n in pending.items() if x in index and y in index]
    if not rows:
        return post
    prec = np.linalg.inv(post.cov)
    for i, j, n in rows:
        p = 1.0 / (1.0 + np.exp(-(post.mean[i] - post.mean[j])))
        w = n * p * (1.0 - p)
        prec[i, i] += w
        prec[j, j] += w
        prec[i, j] -= w
        prec[j, i] -= w
    return Posterior(post.systems, post.mean, np.linalg.inv(prec))


def entropy(p: np.ndarray) -> np.ndarray:
    """The Bernoulli entropy in nats (0 at 0 and 1)."""
    q = np.clip(p, 1e-15, 1 - 1e-15)
    return -(q * np.log(q) + (1 - q) * np.log(1 - q))


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def information_gain(post: Posterior, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Expected information gain (nats) of one vote between systems ``i[k]`` and ``j[k]``:
    the mutual information between its outcome and the strengths, ``H(E p) - E H(p)`` with
    ``p = σ(d)`` and ``d`` the pair's difference under the posterior."""
    m = post.mean[i] - post.mean[j]
    c = post.cov
    v = np.maximum(c[i, i] + c[j, j] - 2 * c[i, j], 0.0)
    d = m[:, None] + np.sqrt(v)[:, None] * _NODES[None, :]
    p = 1.0 / (1.0 + np.exp(-d))
    return entropy(p @ _WEIGHTS) - entropy(p) @ _WEIGHTS


def all_pairs(n: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(i, j)``, ``i < j``, of every pair (``allowed``: an n × n mask of pairs that
    may battle, e.g. systems that speak a common language)."""
    i, j = np.triu_indices(n, 1)
    if allowed is not None:
        keep = allowed[i, j]
        i, j = i[keep], j[keep]
    return i, j


def appearances(systems: list[str] | tuple[str, ...], tally: PairCounts) -> np.ndarray:
    """Counted votes each system took part in."""
    i, j, games, _ = tally_arrays(systems, tally)
    n = len(systems)
    return np.bincount(i, games, n) + np.bincount(j, games, n)


def _ordered(systems, x: int, y: int, rng: np.random.Generator) -> tuple[str, str]:
    a, b = systems[x], systems[y]
    return (a, b) if rng.random() < 0.5 else (b, a)


def _starved(seen: np.ndarray, i: np.ndarray, j: np.ndarray, rules: SamplingRules) -> int | None:
    """The system furthest below its floor among those in an allowed pair, if any is."""
    n = len(seen)
    total = seen.sum() / 2
    if total < n or rules.floor_share <= 0:
        return None
    floor = rules.floor_share * 2 * total / n
    present = np.zeros(n, dtype=bool)
    present[i] = present[j] = True
    short = np.where(present & (seen < floor), seen, np.inf)
    return None if not np.isfinite(short.min()) else int(np.argmin(short))


def choose_pair(
    post: Posterior,
    tally: PairCounts,
    rng: np.random.Generator,
    rules: SamplingRules | None = None,
    allowed: np.ndarray | None = None,
) -> PairChoice:
    """The next battle's pair by expected information gain, with the safeguards of
    :class:`SamplingRules`; ``allowed`` masks pairs that may not battle."""
    rules = rules or SamplingRules()
    systems = post.systems
    i, j = all_pairs(len(systems), allowed)
    if len(i) == 0:
        raise ValueError("no two systems may battle (two systems with a common language needed)")
    if len(i) == 1:
        return PairChoice(*_ordered(systems, i[0], j[0], rng), why="only")
    if rng.random() < rules.explore:
        k = int(rng.integers(len(i)))
        return PairChoice(*_ordered(systems, i[k], j[k], rng), "explore", candidates=len(i))
    why = "gain"
    s = _starved(appearances(systems, tally), i, j, rules)
    if s is not None:
        keep = (i == s) | (j == s)
        i, j, why = i[keep], j[keep], "floor"
    gain = information_gain(post, i, j)
    order = np.argsort(-gain, kind="stable")
    best = float(gain[order[0]])
    near = gain >= rules.near_best * best
    near[order[: rules.min_candidates]] = True
    cand = np.flatnonzero(near)
    w = np.maximum(gain[cand], 1e-12)
    k = int(cand[rng.choice(len(cand), p=w / w.sum())])
    return PairChoice(
        *_ordered(systems, i[k], j[k], rng),
        why,
        gain=float(gain[k]),
        candidates=len(cand),
        detail={"best_gain": best},
    )


def count_weighted_pair(
    systems: list[str] | tuple[str, ...],
    pair_votes: Mapping[tuple[str, str], float],
    rng: np.random.Generator,
    allowed: np.ndarray | None = None,
) -> PairChoice:
    """The arena's first rule (the baseline): two systems drawn with weight
    ``1 / (PAIR_SMOOTHING + votes on the pair)``, in a random order."""
    i, j = all_pairs(len(systems), allowed)
    if len(i) == 0:
        raise ValueError("no two systems may battle (two systems with a common language needed)")
    n = np.array([pair_votes.get((systems[x], systems[y]), 0) for x, y in zip(i, j, strict=True)])
    w = 1.0 / (PAIR_SMOOTHING + n)
    k = int(rng.choice(len(i), p=w / w.sum()))
    return PairChoice(*_ordered(systems, i[k], j[k], rng), "count", candidates=len(i))


def tally_of(rows: Iterable[tuple]) -> dict[tuple[str, str], tuple[float, ...]]:
    """A :data:`PairCounts` from ``(system_a, system_b, choice)`` rows, or ``(…, n)`` rows of ``n``
    such votes (``a``, ``b``, ``tie`` or ``both_bad``; both of the last two are ties, as on
    the board)."""
    out: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        a, b, choice = row[:3]
        n = float(row[3]) if len(row) > 3 else 1.0
        if a == b:
            continue
        x, y = sorted((a, b))
        t = out.setdefault((x, y), [0.0, 0.0, 0.0])
        if choice in ("tie", "both_bad"):
            t[2] += n
        else:
            winner = a if choice == "a" else b
            t[0 if winner == x else 1] += n
    return {k: tuple(v) for k, v in out.items()}


def pair_totals(tally: PairCounts) -> dict[tuple[str, str], float]:
    """Votes per pair (the baseline's input)."""
    return {k: float(sum(v)) for k, v in tally.items()}


__all__ = [
    "PAIR_SMOOTHING",
    "PRIOR_SD",
    "PairChoice",
    "Posterior",
    "SamplingRules",
    "PairCounts",
    "all_pairs",
    "appearances",
    "choose_pair",
    "count_weighted_pair",
    "entropy",
    "information_gain",
    "pair_totals",
    "posterior",
    "tally_arrays",
    "tally_of",
    "with_pending",
]
