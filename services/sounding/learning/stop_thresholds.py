"""Fitting a stop rule's threshold from recorded states (robust-MI spec §2.5.3, §3.3, §3.5).

Score rules (lower is readier): τ by the Clopper–Pearson risk control of core.risk_control, so
that the error rate among answered states is at most δ with confidence 1 − α; τ = −∞ (never
answer) when no prefix qualifies. `verbalized_confidence` first maps the stated confidence to
accuracy with an isotonic fit and controls the risk of 1 − mapped confidence. Set rules
(`knowno_set_size`, `cip_lite`): the split-conformal quantile q of the nonconformity scores at
miscoverage δ.
"""

from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sounding import errors
from sounding.core import risk_control, stop_rules
from sounding.core.calibration import IsotonicMap
from sounding.store.learning import InquiryState

MIN_STATES = 10


@dataclass(frozen=True)
class StopThresholdFit:
    rule: str
    params: dict
    sample_size: int
    summary: str
    diagnostics: dict[str, float]
    plot_png: bytes


def fit(states: Sequence[InquiryState], rule: str, delta: float, alpha: float) -> StopThresholdFit:
    """FailedPrecondition when fewer than MIN_STATES states carry the rule's score."""
    if rule not in stop_rules.STOP_RULES:
        raise errors.InvalidArgument(
            f"stop_rule must be one of {', '.join(stop_rules.STOP_RULES)}", field="stop_rule"
        )
    if rule == "verbalized_confidence":
        usable = [s for s in states if s.stated_confidence is not None]
    elif rule in stop_rules.SET_RULES:
        usable = list(states)
    else:
        usable = [s for s in states if rule in s.scores]
    if len(usable) < MIN_STATES:
        raise errors.FailedPrecondition(
            f"calibrating {rule} needs at least {MIN_STATES} recorded states with its score; "
            f"{len(usable)} are recorded",
            reason="TOO_FEW_OUTCOMES",
        )
    erred = [s.error for s in usable]
    if rule in stop_rules.SET_RULES:
        quantile = stop_rules.conformal_quantile([s.nonconformity for s in usable], delta)
        covered = np.mean([s.nonconformity <= quantile for s in usable])
        return StopThresholdFit(
            rule,
            {"value": quantile, "never_answer": False, "confidence_map": None},
            len(usable),
            f"{rule}: split-conformal q = {quantile:.3f} at miscoverage {delta} from {len(usable)} states "
            f"(true answer inside the set on {covered:.1%} of them)",
            {"quantile": quantile, "coverage_on_states": float(covered), "error_rate": float(np.mean(erred))},
            b"",
        )
    confidence_map = None
    if rule == "verbalized_confidence":
        stated = np.asarray([s.stated_confidence for s in usable], dtype=float)
        isotonic = IsotonicMap.fit(stated, 1.0 - np.asarray(erred, dtype=float))
        confidence_map = (list(isotonic.stated), list(isotonic.observed))
        scores = (1.0 - isotonic(stated)).tolist()
    else:
        scores = [s.scores[rule] for s in usable]
    fitted = risk_control.calibrate_threshold(scores, erred, delta, alpha)
    never = fitted.never_answer
    diagnostics = {
        "tau": -1.0 if never else fitted.tau,
        "never_answer": float(never),
        "answered": float(fitted.answered),
        "coverage": fitted.answered / len(usable),
        "error_rate_all": float(np.mean(erred)),
        "delta": delta,
        "alpha": alpha,
    }
    if fitted.empirical_risk is not None and fitted.upper_bound is not None:
        diagnostics["empirical_risk"] = fitted.empirical_risk
        diagnostics["risk_upper_bound"] = fitted.upper_bound
    summary = (
        f"{rule}: never answer (no prefix of the {len(usable)} states has an upper risk bound <= {delta})"
        if never
        else f"{rule}: tau = {fitted.tau:.4g} answers {fitted.answered} of {len(usable)} states with "
        f"empirical risk {fitted.empirical_risk:.3f}, upper bound {fitted.upper_bound:.3f} <= delta {delta}"
    )
    return StopThresholdFit(
        rule,
        {"value": None if never else fitted.tau, "never_answer": never, "confidence_map": confidence_map},
        len(usable),
        summary,
        diagnostics,
        risk_coverage_png(fitted, rule),
    )


def threshold_value(params: dict) -> float:
    return -math.inf if params["never_answer"] else float(params["value"])


def risk_coverage_png(fitted: risk_control.ThresholdFit, rule: str) -> bytes:
    """The diagram as PNG; empty where matplotlib (the [eval] extra) is not installed."""
    if importlib.util.find_spec("matplotlib") is None:
        return b""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 4))
    coverage = [p.coverage for p in fitted.curve]
    axis.plot(coverage, [p.empirical_risk for p in fitted.curve], label="empirical risk")
    axis.plot(
        coverage, [p.upper_bound for p in fitted.curve], label=f"Clopper-Pearson bound (alpha {fitted.alpha})"
    )
    axis.axhline(fitted.delta, color="grey", linestyle="--", linewidth=0.8, label=f"delta {fitted.delta}")
    if not fitted.never_answer:
        axis.axvline(fitted.answered / fitted.sample_size, color="black", linewidth=0.8, label="chosen tau")
    axis.set_xlabel("coverage (share of states answered)")
    axis.set_ylabel("error rate among answered states")
    axis.set_title(f"Risk-coverage: {rule}")
    axis.set_ylim(0, 1)
    axis.legend(fontsize="small")
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()
