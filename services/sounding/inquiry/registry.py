"""The inquiry domains a session may name: one registered `DomainSpec` each, in `DOMAINS`.

A spec is everything the rest of the service needs to know about a domain: the question
selections and stop rules it accepts and its defaults for them, the deployment limits it is held
to, how a session of it is set up from a start and rebuilt from its stored JSON, whether it runs
its own questions, what it thinks with (the backend the orchestrator builds for it), and what an
outcome of one of its sessions teaches. Nothing outside the domain's own module and its spec
branches on a domain's name. Adding a domain is writing its module and one line in `DOMAINS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from sounding.core.stop_rules import SESSION_STOP_RULES
from sounding.inquiry.domains.bulls_and_cows import POLICIES as BULLS_AND_COWS_POLICIES
from sounding.inquiry.domains.bulls_and_cows import BullsAndCows
from sounding.inquiry.domains.corpus import CORPUS_POLICIES, CorpusInquiry
from sounding.inquiry.domains.hypotheses import HYPOTHESES_POLICIES, HypothesisSet
from sounding.inquiry.llm.domain import DEFAULT_STOP_RULE, LLM_POLICIES, LlmInquiry, Threshold
from sounding.inquiry.protocol import DOMAIN_DEFAULT, Domain, Policy, Start
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits

# What a domain thinks with, built by the orchestrator for each session: the sidecar's
# generators (`inquiry.llm.assessment.Models`), or the corpus tools (search, models, graph and
# outcome models of the tenant: `learning.corpus_backend.CorpusTools`).
Backend = Literal["generators", "corpus_tools"]

# What an InquiryOutcome (Observe) of a finished session teaches: the stop-rule states it assessed
# (calibrated into stop thresholds), its verdict (the corpus sensor table), or nothing (refused).
OutcomeLearning = Literal["none", "stop_states", "verdict"]

# The llm domain's calibrated stop thresholds, by rule and homogeneity bucket.
Calibrated = Mapping[str, Mapping[str, Threshold]]


@dataclass(frozen=True, kw_only=True)
class DomainSpec:
    """One inquiry domain as the engine, the service, the learning and the orchestrator see it."""

    name: str
    # The question selections a start may name, and the one a start naming none gets.
    selections: tuple[str, ...]
    default_selection: str
    # The stop rules a start may name, and the one a start naming none gets; a domain with no
    # `stop_rules` accepts only `default`: the engine's stopping and its own `finished`.
    stop_rules: tuple[str, ...] = ()
    default_stop_rule: str = DOMAIN_DEFAULT
    # A new domain object from a start whose policy has the domain's defaults in place, given the
    # calibrated thresholds and the limits (InvalidArgument names the field of what it refuses).
    from_request: Callable[[Start, Calibrated, InquiryLimits], Domain]
    # The domain object again from its stored setup and state.
    from_state: Callable[[dict, dict], Domain]
    # More checks of the domain parameters, run with the policy's (before the deployment's limits).
    check_parameters: Callable[[Mapping[str, str]], object] | None = None
    # The largest max_turns a start may ask for.
    turn_limit: Callable[[InquiryLimits], int] = lambda limits: limits.max_turns
    # How many sessions of the domain may be open at once (None: as many as streams).
    open_session_limit: Callable[[InquiryLimits], int] | None = None
    # Whether the engine's stopping (target confidence, turns, budget, diminishing returns)
    # applies; a domain that says no stops only by its own `finished`, or at max_turns.
    stops_on_confidence: bool = True
    # Whether the domain runs its own questions (`investigate`) instead of awaiting observations.
    answers_itself: bool = False
    backend: Backend = "generators"
    # The (task, regime) whose calibrated stop thresholds a start of these parameters uses
    # (None: the domain uses none).
    calibration_scope: Callable[[Mapping[str, str]], tuple[str, str]] | None = None
    outcome_learning: OutcomeLearning = "none"

    def session_policy(self, policy: Policy, limits: InquiryLimits) -> Policy:
        """The policy a session of the domain runs by: `default` names replaced by the domain's
        defaults, then checked against what the domain accepts and the limits (InvalidArgument
        naming the field)."""
        selection = (
            self.default_selection
            if policy.question_selection == DOMAIN_DEFAULT
            else policy.question_selection
        )
        if selection not in self.selections:
            raise errors.InvalidArgument(
                f"question_selection {selection[:64]!r} is not one of {', '.join(self.selections)}",
                field="start.policy.question_selection",
            )
        policy = replace(
            policy, question_selection=selection, stop_rule=self.session_stop_rule(policy.stop_rule)
        )
        max_turns = self.turn_limit(limits)
        if not 1 <= policy.max_turns <= max_turns:
            raise errors.InvalidArgument(
                f"max_turns must be in [1, {max_turns}]", field="start.policy.max_turns"
            )
        if not 0 < policy.target_confidence <= 1:
            raise errors.InvalidArgument(
                "target_confidence must be in (0, 1]", field="start.policy.target_confidence"
            )
        return policy

    def session_stop_rule(self, requested: str) -> str:
        """The stop rule a session runs by when the start names `requested`: the domain's default
        for `default`; InvalidArgument (start.policy.stop_rule) for a rule the domain does not
        accept. The one place a stop rule is defaulted and checked."""
        if not self.stop_rules:
            if requested != DOMAIN_DEFAULT:
                raise errors.InvalidArgument(
                    "stop_rule must be 'default' for this domain", field="start.policy.stop_rule"
                )
            return requested
        rule = self.default_stop_rule if requested == DOMAIN_DEFAULT else requested
        if rule not in self.stop_rules:
            raise errors.InvalidArgument(
                f"stop_rule must be one of {', '.join(self.stop_rules)}", field="start.policy.stop_rule"
            )
        return rule


BULLS_AND_COWS = DomainSpec(
    name=BullsAndCows.name,
    selections=BULLS_AND_COWS_POLICIES,
    default_selection="eig",
    from_request=lambda request, calibrated, limits: BullsAndCows(),
    from_state=BullsAndCows.from_state,
    # The game ends only when a guess is confirmed; knowing the secret is not enough.
    stops_on_confidence=False,
)

HYPOTHESES = DomainSpec(
    name=HypothesisSet.name,
    selections=HYPOTHESES_POLICIES,
    default_selection="eig",
    from_request=lambda request, calibrated, limits: HypothesisSet.from_request(
        request.hypotheses, request.questions, dict(request.domain_parameters)
    ),
    from_state=HypothesisSet.from_state,
)

# Questions come from direct prompting unless the start names another selection (robust-MI spec
# §3.1); the session stops by robust_mi_risk unless it names another rule (§2.5).
LLM = DomainSpec(
    name=LlmInquiry.name,
    selections=LLM_POLICIES,
    default_selection=LLM_POLICIES[0],
    stop_rules=SESSION_STOP_RULES,
    default_stop_rule=DEFAULT_STOP_RULE,
    from_request=lambda request, calibrated, limits: LlmInquiry.from_request(
        request.policy, request.context, request.hypotheses, request.domain_parameters, calibrated, limits
    ),
    from_state=LlmInquiry.from_state,
    check_parameters=LlmInquiry.task_and_regime,
    turn_limit=lambda limits: limits.llm_max_turns,
    open_session_limit=lambda limits: limits.max_open_llm_sessions,
    stops_on_confidence=False,
    calibration_scope=LlmInquiry.calibration_scope,
    outcome_learning="stop_states",
)

CORPUS = DomainSpec(
    name=CorpusInquiry.name,
    selections=CORPUS_POLICIES,
    default_selection="eig",
    from_request=lambda request, calibrated, limits: CorpusInquiry.from_request(
        request.policy, request.context, request.hypotheses, request.domain_parameters, limits
    ),
    from_state=CorpusInquiry.from_state,
    answers_itself=True,
    backend="corpus_tools",
    outcome_learning="verdict",
)

# Every domain by name, in the order error messages list them.
DOMAINS: dict[str, DomainSpec] = {
    BULLS_AND_COWS.name: BULLS_AND_COWS,
    HYPOTHESES.name: HYPOTHESES,
    LLM.name: LLM,
    CORPUS.name: CORPUS,
}


def requested_domain(name: str) -> DomainSpec:
    """The spec of the domain a start names (InvalidArgument naming start.domain if none)."""
    spec = DOMAINS.get(name)
    if spec is None:
        raise errors.InvalidArgument(
            f"domain {name[:64]!r} is not one of {', '.join(sorted(DOMAINS))}", field="start.domain"
        )
    return spec
