"""Fitting a stop rule's threshold from recorded states (robust-MI spec §2.5.3, §3.3, §3.5).

Score rules (lower is readier): τ by the Clopper–Pearson risk control of core.risk_control, so
that the error rate among answered states is at most δ with confidence 1 − α (approximately,
under the `largest_prefix` rule); τ = −∞ (never answer) when no prefix qualifies.
`verbalized_confidence` first maps the stated confidence to accuracy with an isotonic fit and
controls the risk of 1 − mapped confidence. Set rules
(`knowno_set_size`, `cip_lite`): the split-conformal quantile q of the nonconformity scores at
miscoverage δ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core import risk_control, stop_rules
from sounding.core.calibration import IsotonicMap
from sounding.learning.protocol import Curve
from sounding.runtime import errors
from sounding.store.learning import InquiryState

MIN_STATES = 10


@dataclass(frozen=True)
class StopThresholdFit:
    rule: str
    params: dict
    sample_size: int
    summary: str
    diagnostics: dict[str, float]
    curves: tuple[Curve, ...]


def fit(
    states: Sequence[InquiryState],
    rule: str,
    delta: float,
    alpha: float,
    threshold_rule: risk_control.Rule = "fixed_sequence",
) -> StopThresholdFit:
    """A score rule's τ chosen by `threshold_rule` (core.risk_control), or a set rule's quantile
    (which no prefix rule chooses); FailedPrecondition when fewer than MIN_STATES states carry
    the rule's score."""
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
            (),
        )
    confidence_map = None
    if rule == "verbalized_confidence":
        stated = np.asarray([s.stated_confidence for s in usable], dtype=float)
        isotonic = IsotonicMap.fit(stated, 1.0 - np.asarray(erred, dtype=float))
        confidence_map = (list(isotonic.stated), list(isotonic.observed))
        scores = (1.0 - isotonic(stated)).tolist()
    else:
        scores = [s.scores[rule] for s in usable]
    fitted = risk_control.calibrate_threshold(scores, erred, delta, alpha, threshold_rule)
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
    fitted_by = f"{rule} ({threshold_rule})"
    summary = (
        f"{fitted_by}: never answer (no prefix of the {len(usable)} states has an upper "
        f"risk bound <= {delta})"
        if never
        else f"{fitted_by}: tau = {fitted.tau:.4g} answers {fitted.answered} of {len(usable)} states with "
        f"empirical risk {fitted.empirical_risk:.3f}, upper bound {fitted.upper_bound:.3f} <= delta {delta}"
    )
    return StopThresholdFit(
        rule,
        {
            "value": None if never else fitted.tau,
            "never_answer": never,
            "confidence_map": confidence_map,
            "threshold_rule": threshold_rule,
        },
        len(usable),
        summary,
        diagnostics,
        risk_coverage_curves(fitted),
    )


def threshold_value(params: dict) -> float:
    return -math.inf if params["never_answer"] else float(params["value"])


def risk_coverage_curves(fitted: risk_control.ThresholdFit) -> tuple[Curve, ...]:
    """The risk-coverage curve (error rate among the answered states against the share answered)
    with its Clopper-Pearson bound, the level delta and, unless it never answers, the chosen
    threshold's coverage."""
    coverage = tuple(p.coverage for p in fitted.curve)
    labels = {"x_label": "coverage (share of states answered)", "y_label": "error rate among answered states"}
    curves = [
        Curve(name="empirical risk", x=coverage, y=tuple(p.empirical_risk for p in fitted.curve), **labels),
        Curve(
            name=f"Clopper-Pearson bound (alpha {fitted.alpha})",
            x=coverage,
            y=tuple(p.upper_bound for p in fitted.curve),
            **labels,
        ),
        Curve(name=f"delta {fitted.delta}", x=(0.0, 1.0), y=(fitted.delta, fitted.delta), **labels),
    ]
    if not fitted.never_answer:
        chosen = fitted.answered / fitted.sample_size
        curves.append(Curve(name="chosen tau", x=(chosen, chosen), y=(0.0, 1.0), **labels))
    return tuple(curves)
