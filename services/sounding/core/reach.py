"""The outcome model of corpus inquiry (active-learning spec §5): predicts whether a candidate
query will reach new text (retrieve something the session has not read yet), from features a
cheap probe gives before the query runs, and learns from every executed query's actual outcome.

It is a Bayesian logistic regression with a diagonal Gaussian posterior over its weights,
updated online by assumed-density filtering (Chapelle & Li 2011, "An empirical evaluation of
Thompson sampling", algorithm 3): each outcome moves the mean to the regularised maximum a
posteriori weights and adds the example's curvature to the precision. Its predictive variance of
the logit is what the exploration bonus's prediction-uncertainty term reads (§3.3): a model that
has seen few queries like a candidate is unsure of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

NEWTON_STEPS = 8


def _sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0))))


@dataclass
class ReachModel:
    """Weights' posterior mean and precision, one entry per feature; `prior_mean` starts the
    mean (the bias first, e.g. a prior reach of 0.5 is a zero bias)."""

    features: tuple[str, ...]
    mean: np.ndarray = field(default_factory=lambda: np.zeros(0))
    precision: np.ndarray = field(default_factory=lambda: np.zeros(0))
    updates: int = 0

    def __post_init__(self) -> None:
        n = len(self.features)
        if len(self.mean) == 0:
            self.mean = np.zeros(n)
        if len(self.precision) == 0:
            self.precision = np.ones(n)
        if self.mean.shape != (n,) or self.precision.shape != (n,):
            raise ValueError("mean and precision need one entry per feature")

    def logit(self, x: ArrayLike) -> tuple[float, float]:
        """(mean, variance) of the logit w·x under the posterior."""
        x = np.asarray(x, float)
        return float(self.mean @ x), float((x * x / self.precision).sum())

    def predict(self, x: ArrayLike) -> tuple[float, float]:
        """(P(reach), confidence): the probit-adjusted probability and 1 / (1 + logit variance)."""
        mean, variance = self.logit(x)
        return _sigmoid(mean / np.sqrt(1.0 + np.pi * variance / 8.0)), 1.0 / (1.0 + variance)

    def update(self, x: ArrayLike, reached: float) -> None:
        """Learn one executed query's outcome (`reached` in [0, 1]: a share of new text counts
        as a soft label)."""
        x = np.asarray(x, float)
        w = self.mean.copy()
        for _ in range(NEWTON_STEPS):
            p = _sigmoid(float(w @ x))
            gradient = self.precision * (w - self.mean) + (p - reached) * x
            hessian = self.precision + p * (1 - p) * x * x
            w = w - gradient / hessian
        p = _sigmoid(float(w @ x))
        self.mean = w
        self.precision = self.precision + p * (1 - p) * x * x
        self.updates += 1

    def to_dict(self) -> dict:
        return {
            "features": list(self.features),
            "mean": self.mean.tolist(),
            "precision": self.precision.tolist(),
            "updates": self.updates,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ReachModel:
        return cls(
            tuple(data["features"]),
            np.asarray(data["mean"], float),
            np.asarray(data["precision"], float),
            int(data["updates"]),
        )
