"""The interval method checked by simulation with known truth, before a report shows it.

Why: parity's decisions rest on Student's t over per-prompt differences, and those differences
are not always normal (a word check's WER jumps by whole words, a glitch count is mostly 0, a
predicted MOS has heavy tails). Here differences are drawn from such shapes with a known mean
and the method is run as the report runs it (:func:`evaluation.parity.compare.decide` on
:func:`evaluation.parity.compare.paired_interval`'s formula, vectorised): how often the 90 %
interval covers the truth; how often a candidate exactly one margin worse is failed (``worse``:
nominally 5 %) or passed (``pass``: nominally 5 %); and how often one as good as the reference
passes. ``benchmarks/parity.py`` runs the full grid, ``tests/test_parity.py`` a small one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evaluation.parity.compare import CONFIDENCE

Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]


def _normal(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape)


def _heavy(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.standard_t(3, shape) / np.sqrt(3.0)  # t with 3 df, unit variance


def _skewed(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.exponential(1.0, shape) - 1.0  # skewness 2, unit variance


def _spiky(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """A word check's WER: most prompts the same on both sides, a fifth a word or two apart."""
    hit = rng.random(shape) < 0.2
    return np.where(hit, rng.normal(0, 1, shape), 0.0) / np.sqrt(0.2)


def _counts(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """A glitch count: each side has a finding on 10 % of prompts."""
    p = 0.1
    d = (rng.random(shape) < p).astype(float) - (rng.random(shape) < p).astype(float)
    return d / np.sqrt(2 * p * (1 - p))


SHAPES: dict[str, Sampler] = {
    "normal": _normal,
    "heavy tails (t3)": _heavy,
    "skewed (exponential)": _skewed,
    "spiky (word check)": _spiky,
    "counts (glitches)": _counts,
}
"""Shapes of the per-prompt difference, each with mean 0 and variance 1."""


@dataclass(frozen=True)
class Check:
    """One shape at one number of prompts, the margin one standard deviation of a prompt's
    difference, a ``higher``-is-better measure."""

    shape: str
    prompts: int
    coverage: float
    """Share of 90 % intervals that cover the true mean (nominal 0.90)."""
    worse_at_margin: float
    """Share failed (shown worse) when the candidate is exactly one margin worse (nominal 0.05:
    the false-fail rate at the margin)."""
    pass_at_margin: float
    """Share passed (parity shown) at the same truth (nominal 0.05: the false-pass rate)."""
    pass_when_equal: float
    """Share passed when the candidate is as good as the reference (the power)."""
    worse_when_equal: float
    """Share failed when the candidate is as good as the reference."""


def intervals(d: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise Student's t intervals of the mean (the same formula as
    :func:`evaluation.stats.t_interval`, for many samples at once)."""
    from scipy import stats

    n = d.shape[1]
    m = d.mean(axis=1)
    se = d.std(axis=1, ddof=1) / np.sqrt(n)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * se
    return m - half, m + half


def check(shape: str, n: int, reps: int = 4000, margin: float = 1.0, seed: int = 0) -> Check:
    """Run the method ``reps`` times on ``n`` prompts of ``shape`` (see :class:`Check`)."""
    rng = np.random.default_rng(seed)
    base = SHAPES[shape](rng, (reps, n))
    lo0, hi0 = intervals(base)
    lo1, hi1 = intervals(base - margin)
    return Check(
        shape,
        n,
        coverage=float(np.mean((lo0 <= 0) & (hi0 >= 0))),
        worse_at_margin=float(np.mean(hi1 < -margin)),
        pass_at_margin=float(np.mean(lo1 >= -margin)),
        pass_when_equal=float(np.mean(lo0 >= -margin)),
        worse_when_equal=float(np.mean(hi0 < -margin)),
    )


def grid(
    prompts: tuple[int, ...] = (5, 10, 20, 40), reps: int = 4000, seed: int = 0
) -> list[Check]:
    """:func:`check` for every shape and number of prompts."""
    return [check(s, n, reps, seed=seed + i) for i, s in enumerate(SHAPES) for n in prompts]


__all__ = ["SHAPES", "Check", "check", "grid", "intervals"]
