"""The choices of `sounding eval`'s options, which typer validates and --help lists;
tests/unit/cli/test_choices.py keeps them equal to the names the harnesses accept."""

from __future__ import annotations

from enum import StrEnum


class ArbenchTask(StrEnum):
    dc = "dc"
    sp = "sp"
    gn = "gn"


class StopRule(StrEnum):
    all = "all"
    robust_mi_risk = "robust_mi_risk"
    mi_only = "mi_only"
    self_consistency = "self_consistency"
    semantic_entropy = "semantic_entropy"
    verbalized_confidence = "verbalized_confidence"
    knowno_set_size = "knowno_set_size"
    cip_lite = "cip_lite"
    hypothesis_entropy = "hypothesis_entropy"


class QuestionSelection(StrEnum):
    direct_prompting = "direct_prompting"
    naive_prompting = "naive_prompting"
    voi = "voi"
    cip_full = "cip_full"
    eig = "eig"
    uot = "uot"


class Ablation(StrEnum):
    risk_tau = "risk_tau"
    robust = "robust"
    weights = "weights"
    entailment = "entailment"
    dpp = "dpp"
    voi = "voi"
    mi_to_sc = "mi_to_sc"
    mi_to_setsize = "mi_to_setsize"
    episode_tau = "episode_tau"


class ToolConfig(StrEnum):
    free = "free"
    teacher = "teacher"
    trusted = "trusted"


class Regime(StrEnum):
    normal = "normal"
    collapse = "collapse"


class LongQueries(StrEnum):
    fail = "fail"
    truncate = "truncate"
    skip = "skip"


class InquiryTask(StrEnum):
    bulls_and_cows = "bulls-and-cows"
    hypotheses = "hypotheses"
    scifact_claims = "scifact-claims"


class BullsAndCowsPolicy(StrEnum):
    eig = "eig"
    eig_lookahead = "eig_lookahead"
    naive = "naive"
    random_consistent = "random_consistent"
