"""What a corpus inquiry is started with (`corpus` domain): the claim, the collection, the priors
over the verdicts and the domain parameters, each checked (InvalidArgument names the field)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sounding.core import claim_evidence as evidence
from sounding.core import query_scoring
from sounding.inquiry.domains import parameters as parameters_
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits
from sounding.store.tenancy import checked_name

# Chunks a query reads, candidates per generation strategy, and eig_softmax's temperature.
DEFAULT_HITS, DEFAULT_PER_STRATEGY, DEFAULT_TEMPERATURE = 3, 3, 0.05
# Chunks a query ranks: those past the ones it reads stay unread, and probe later candidates.
DEFAULT_PROBE_DEPTH = 20
# A new chunk is read (its sentences judged) only if its embedding's cosine to the claim's is at
# least this: of the 10 chunks nearest a SciFact train claim (all-MiniLM-L6-v2), 93% of the cited
# abstracts are, and 68% of the others (bench/README.md).
DEFAULT_RELEVANCE_FLOOR = 0.45
# `eig` answers once the chance of reaching the target confidence with the queries to come is
# below this (`core.claim_evidence.target_chance`; chosen on SciFact's held-out train claims,
# bench/README.md); 0 turns the rule off.
DEFAULT_MIN_TARGET_CHANCE = 0.05
# The retrieval arms a query runs with unless `domain_parameters["arms"]` names others.
DEFAULT_ARMS = "dense,lexical"


def settings(context: str, parameters: Mapping[str, str], limits: InquiryLimits) -> tuple[str, dict]:
    """The collection, and the session's settings: the claim and every domain parameter."""
    collection = parameters.get("collection", "")
    if not collection:
        raise errors.InvalidArgument(
            "the corpus domain needs the collection to search", field="start.domain_parameters.collection"
        )
    checked_name(collection, "start.domain_parameters.collection")
    claim = context.strip()
    if not claim:
        raise errors.InvalidArgument("the corpus domain needs the claim to verify", field="start.context")
    if len(claim) > limits.max_claim_chars:
        raise errors.InvalidArgument(
            f"the claim is longer than {limits.max_claim_chars} characters", field="start.context"
        )
    arms = list(
        dict.fromkeys(a.strip() for a in parameters.get("arms", DEFAULT_ARMS).split(",") if a.strip())
    )
    if not arms:
        raise errors.InvalidArgument(
            "arms names at least one retrieval arm", field="start.domain_parameters.arms"
        )
    number, integer = parameters_.number, parameters_.integer
    thresholds = evidence.Thresholds()
    return collection, {
        "claim": claim,
        "arms": arms,
        "hits_per_query": integer(parameters, "hits_per_query", DEFAULT_HITS, 1, 50),
        "probe_depth": integer(parameters, "probe_depth", DEFAULT_PROBE_DEPTH, 1, 100),
        "per_strategy": integer(parameters, "per_strategy", DEFAULT_PER_STRATEGY, 1, 10),
        "temperature": number(parameters, "temperature", DEFAULT_TEMPERATURE, 1e-3, 10.0),
        "llm_queries": integer(parameters, "llm_queries", 0, 0, 5),
        "entailing_threshold": number(parameters, "entailing_threshold", thresholds.entailing, 0.0, 1.0),
        "contradicting_threshold": number(
            parameters, "contradicting_threshold", thresholds.contradicting, 0.0, 1.0
        ),
        "cost_scale_ms": number(parameters, "cost_scale_ms", query_scoring.COST_SCALE_MS, 1.0, 1e9),
        "relevance_floor": number(parameters, "relevance_floor", DEFAULT_RELEVANCE_FLOOR, -1.0, 1.0),
        "min_target_chance": number(parameters, "min_target_chance", DEFAULT_MIN_TARGET_CHANCE, 0.0, 1.0),
    }


def priors(hypotheses: Sequence) -> np.ndarray:
    """The prior over the verdicts: the hypotheses' (which must be the three verdicts), or
    uniform when none are given or all their priors are 0."""
    uniform = np.full(len(evidence.VERDICTS), 1.0 / len(evidence.VERDICTS))
    if not hypotheses:
        return uniform
    if sorted(h.id for h in hypotheses) != sorted(evidence.VERDICTS):
        raise errors.InvalidArgument(
            f"the corpus domain's hypotheses are the verdicts {', '.join(evidence.VERDICTS)}",
            field="start.hypotheses",
        )
    given = np.array([next(h.prior for h in hypotheses if h.id == v) for v in evidence.VERDICTS])
    if given.max() <= 0:
        return uniform
    given = given / given.max()  # finite priors, however large, sum without overflow
    return given / given.sum()
