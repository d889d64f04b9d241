"""Training curves: the `(agent-steps when it ended, return)` pairs of the episodes a run ended,
and the two figures read off them everywhere (the progress bar, metrics.csv, `poca compare`, the
benchmarks and the tests): the mean of the last `LAST` episodes, and the agent-steps at which that
running mean first reached a threshold (sample efficiency).
"""

from __future__ import annotations

import math

import numpy as np

LAST = 20  # episodes a running mean is taken over


def mean_of_last(returns, last: int = LAST) -> float:
    """Mean of the last `last` returns (NaN when there are none).

    >>> mean_of_last([0.0, 1.0, 1.0], last=2)
    1.0
    >>> mean_of_last([])
    nan
    """
    return float(np.mean(returns[-last:])) if len(returns) else math.nan


def steps_to_threshold(curve, threshold: float | None, last: int = LAST) -> int | None:
    """Agent-steps at which the mean return of the last `last` episodes of `curve` first reached
    `threshold` (None if never, with fewer than `last` episodes, or no threshold).

    >>> curve = [(10, 0.0), (20, 1.0), (30, 1.0), (40, 0.0)]
    >>> steps_to_threshold(curve, 1.0, last=2)
    30
    >>> steps_to_threshold(curve, 1.0, last=3) is None
    True
    """
    if threshold is None or len(curve) < last:
        return None
    window = np.convolve([r for _, r in curve], np.ones(last) / last, "valid")
    hits = np.flatnonzero(window >= threshold - 1e-9)
    return int(curve[hits[0] + last - 1][0]) if len(hits) else None


def smoothed(curve, grid, last: int = LAST) -> np.ndarray:
    """At each agent-step count of `grid`, the mean return of the last `last` episodes that had
    ended by then (NaN before any)."""
    steps = np.array([s for s, _ in curve], dtype=float)
    returns = np.array([r for _, r in curve], dtype=float)
    ends = np.searchsorted(steps, grid, side="right")
    return np.array([returns[max(0, n - last):n].mean() if n else math.nan for n in ends])
