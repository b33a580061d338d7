"""Simulated listening tests with known truth (raters, prompts, bad raters).

Why here and not in the benchmark: the benchmark, the tests and anyone checking a new statistic
need the same generator. Ratings are drawn from a crossed random-effects model, the one the
statistics must survive:

    latent = system mean + rater effect (sd 0.5) + prompt effect (sd 0.3) + noise (sd 0.6)

rounded and clipped to the scale. The truth a MOS interval must cover is the expected rating of
a random rater on a random prompt (:func:`expected_rating`), not the latent mean: clipping at 5
pulls a 4.0 system's expected rating below 4.0.

Bad raters (``BAD_KINDS``): ``random`` (uniform clicks), ``straight`` (one score for everything),
``inverted`` (reads the scale upside down), ``middle`` (3 or 4 at random, never listens).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

BAD_KINDS = ("random", "straight", "inverted", "middle")


@dataclass(frozen=True)
class MosModel:
    system_means: dict[str, float] = field(
        default_factory=lambda: {"s30": 3.0, "s35": 3.5, "s40": 4.0}
    )
    rater_sd: float = 0.5
    prompt_sd: float = 0.3
    noise_sd: float = 0.6
    prompts: int = 12
    honest: int = 30
    bad: dict[str, int] = field(default_factory=lambda: {k: 2 for k in BAD_KINDS})
    gold_mean: float = 4.6
    """A natural recording; set ``gold_system`` to make the gold a take of a system instead."""
    gold_system: str | None = None
    anchor_mean: float = 1.3
    trap_answer: int = 2
    screening: bool = True
    lapse: float = 0.0
    """Chance that an honest rater misses the trap's instruction."""


def expected_rating(mu: float, sd: float, low: int = 1, high: int = 5) -> float:
    """E[clip(round(N(mu, sd)), low, high)] exactly (normal CDF at the rounding edges)."""
    ks = np.arange(low, high + 1)
    edges = np.concatenate([[-np.inf], ks[:-1] + 0.5, [np.inf]])
    p = np.diff(stats.norm.cdf(edges, mu, sd))
    return float((ks * p).sum())


def truth(model: MosModel) -> dict[str, float]:
    sd = float(np.sqrt(model.rater_sd**2 + model.prompt_sd**2 + model.noise_sd**2))
    return {s: expected_rating(m, sd) for s, m in model.system_means.items()}


def _score(latent: float) -> float:
    """A latent rating as the score given: rounded (half to even, as ``np.rint``), 1..5."""
    return float(min(5, max(1, round(latent))))


def mos_ratings(model: MosModel, rng: np.random.Generator, order: int = 0) -> pd.DataFrame:
    """One simulated MOS test: rows rater_id, kind, prompt_id, system_id, role, expected, score.

    Latin square: rater r hears prompt k from system ``(k + r + order) % S``; ``order`` shifts
    which system comes first (both system orders are simulated)."""
    systems = list(model.system_means)
    mus = np.array([model.system_means[s] for s in systems])
    if order:
        systems, mus = systems[::-1], mus[::-1]
    P = model.prompts
    prompt_fx = rng.normal(0, model.prompt_sd, P)
    kinds = ["honest"] * model.honest + [k for k, n in model.bad.items() for _ in range(n)]
    rows = []
    for r, kind in enumerate(kinds):
        rfx = rng.normal(0, model.rater_sd)
        flat = int(rng.integers(1, 6))
        rid = f"r{r:03d}"
        sys_idx = (np.arange(P) + r) % len(systems)
        lat = mus[sys_idx] + rfx + prompt_fx + rng.normal(0, model.noise_sd, P)
        items = [(f"p{k:02d}", systems[sys_idx[k]], "item", np.nan, lat[k]) for k in range(P)]
        if model.screening:
            gmu = (
                model.system_means[model.gold_system] + prompt_fx[0]
                if model.gold_system
                else model.gold_mean
            )
            noise = rng.normal(0, model.noise_sd, 2)
            items += [
                ("anchor", "__anchor__", "gold", 1.0, model.anchor_mean + rfx + noise[0]),
                ("gold", "__gold__", "gold", 5.0, gmu + rfx + noise[1]),
                ("trap", "__trap__", "trap", float(model.trap_answer), np.nan),
            ]
        for pid, sid, role, exp, la in items:
            if kind == "honest":
                if role == "trap":
                    s = model.trap_answer if rng.random() >= model.lapse else rng.integers(1, 6)
                else:
                    s = _score(la)
            elif kind == "random":
                s = rng.integers(1, 6)
            elif kind == "straight":
                s = flat
            elif kind == "inverted":
                s = model.trap_answer if role == "trap" else 6 - _score(la)
            else:  # middle
                s = rng.integers(3, 5)
            rows.append([rid, kind, pid, sid, role, exp, float(s)])
    return pd.DataFrame(
        rows, columns=["rater_id", "kind", "prompt_id", "system_id", "role", "expected", "score"]
    )


# --------------------------------------------------------------------------- A/B with CMOS


@dataclass(frozen=True)
class AbModel:
    """CMOS answers (-3..+3, how much better y is than x) for every pair of systems.

    ``answer = clip(round(true difference + rater sensitivity + prompt effect + noise))``: the
    rater and prompt terms make votes of one rater (or on one prompt) lean together, which is
    what a vote-level interval or test ignores."""

    system_means: dict[str, float] = field(
        default_factory=lambda: {"s30": 3.0, "s35": 3.5, "s40": 4.0}
    )
    rater_sd: float = 0.3
    prompt_sd: float = 0.2
    noise_sd: float = 0.6 * float(np.sqrt(2))
    prompts: int = 12
    raters: int = 30


def _pairs(systems: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(systems) for b in systems[i + 1 :]]


def ab_truth(model: AbModel) -> dict[tuple[str, str], dict[str, float]]:
    """Per pair (x < y): the expected CMOS of y over x and the share of decisive votes for x."""
    sd = float(np.sqrt(model.rater_sd**2 + model.prompt_sd**2 + model.noise_sd**2))
    out = {}
    for x, y in _pairs(sorted(model.system_means)):
        mu = model.system_means[y] - model.system_means[x]
        ks = np.arange(-3, 4)
        edges = np.concatenate([[-np.inf], ks[:-1] + 0.5, [np.inf]])
        p = np.diff(stats.norm.cdf(edges, mu, sd))
        out[(x, y)] = {
            "cmos": float((ks * p).sum()),
            "share_x": float(p[ks < 0].sum() / p[ks != 0].sum()),
        }
    return out


def ab_votes(model: AbModel, rng: np.random.Generator, order: int = 0) -> pd.DataFrame:
    """Rows as the store's ``ab_frame``: rater_id, prompt_id, system_a, system_b (as
    presented, sides random), choice (a/b/tie), cmos (how much better the second clip is)."""
    systems = sorted(model.system_means)
    pairs = _pairs(systems)
    if order:
        pairs = pairs[::-1]
    P, R, K = model.prompts, model.raters, len(pairs)
    pfx = rng.normal(0, model.prompt_sd, (K, P))  # per pair and prompt
    rfx = rng.normal(0, model.rater_sd, (R, K))  # per rater and pair
    r = np.repeat(np.arange(R), P)
    k = np.tile(np.arange(P), R)
    pair = (k + r) % K
    d = np.array([model.system_means[y] - model.system_means[x] for x, y in pairs])[pair]
    noise = rng.normal(0, model.noise_sd, R * P)
    c = np.clip(np.rint(d + rfx[r, pair] + pfx[pair, k] + noise), -3, 3)
    second = rng.random(R * P) < 0.5  # y shown second: the answer is as presented
    xs = np.array([x for x, _ in pairs])[pair]
    ys = np.array([y for _, y in pairs])[pair]
    cm = np.where(second, c, -c)
    return pd.DataFrame(
        {
            "rater_id": [f"r{i:03d}" for i in r],
            "prompt_id": [f"p{j:02d}" for j in k],
            "system_a": np.where(second, xs, ys),
            "system_b": np.where(second, ys, xs),
            "choice": np.where(cm == 0, "tie", np.where(cm > 0, "b", "a")),
            "cmos": cm.astype(float),
        }
    )


# --------------------------------------------------------------------------- MUSHRA


@dataclass(frozen=True)
class MushraModel:
    """0-100 scores: every rater rates every condition on each screen (one screen per prompt)."""

    system_means: dict[str, float] = field(
        default_factory=lambda: {"s60": 60.0, "s70": 70.0, "s80": 80.0}
    )
    rater_sd: float = 10.0
    prompt_sd: float = 6.0
    noise_sd: float = 12.0
    prompts: int = 8
    raters: int = 30


def censored_mean(mu: float, sd: float, low: float = 0.0, high: float = 100.0) -> float:
    """E[clip(N(mu, sd), low, high)]."""
    a, b = (low - mu) / sd, (high - mu) / sd
    pa, pb = stats.norm.cdf(a), stats.norm.cdf(b)
    inner = mu * (pb - pa) + sd * (stats.norm.pdf(a) - stats.norm.pdf(b))
    return float(low * pa + inner + high * (1 - pb))


def mushra_truth(model: MushraModel) -> dict[str, float]:
    sd = float(np.sqrt(model.rater_sd**2 + model.prompt_sd**2 + model.noise_sd**2))
    return {s: censored_mean(m, sd) for s, m in model.system_means.items()}


def mushra_scores(model: MushraModel, rng: np.random.Generator) -> pd.DataFrame:
    """Rows as ``mushra_frame`` (role ``item`` only): rater_id, assignment_id, prompt_id,
    system_id, role, score."""
    systems = list(model.system_means)
    mus = np.array([model.system_means[s] for s in systems])
    R, P, S = model.raters, model.prompts, len(systems)
    pfx = rng.normal(0, model.prompt_sd, P)
    rfx = rng.normal(0, model.rater_sd, R)
    noise = rng.normal(0, model.noise_sd, (R, P, S))
    sc = np.clip(mus[None, None, :] + rfx[:, None, None] + pfx[None, :, None] + noise, 0, 100)
    r, k, s = (a.ravel() for a in np.indices((R, P, S)))
    return pd.DataFrame(
        {
            "rater_id": [f"r{i:03d}" for i in r],
            "assignment_id": [f"r{i:03d}-{j}" for i, j in zip(r, k, strict=True)],
            "prompt_id": [f"p{j:02d}" for j in k],
            "system_id": np.array(systems)[s],
            "role": "item",
            "score": sc.ravel(),
        }
    )


__all__ = [
    "BAD_KINDS",
    "AbModel",
    "MosModel",
    "MushraModel",
    "ab_truth",
    "ab_votes",
    "censored_mean",
    "expected_rating",
    "mos_ratings",
    "mushra_scores",
    "mushra_truth",
    "truth",
]
