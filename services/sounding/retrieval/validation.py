"""A Retrieve checked against the deployment's limits and the names the service knows."""

from __future__ import annotations

from sounding.core.expansion import STRATEGIES as EXPANSION_STRATEGIES
from sounding.core.fusion import FUSION_METHODS, MIN_MAX
from sounding.retrieval.protocol import RetrieveQuery
from sounding.retrieval.strategies import STRATEGIES
from sounding.runtime import errors
from sounding.settings.limits import RetrieveLimits


def validate(query: RetrieveQuery, limits: RetrieveLimits = RetrieveLimits()) -> None:
    """The deployment's limits and the names this service knows (the rules RetrieveRequest
    declares, such as a non-empty query and unique arms, are checked before: `serving.validation`)."""
    if len(query.query) > limits.max_query_chars:
        raise errors.InvalidArgument(
            f"query is longer than {limits.max_query_chars} characters", field="query"
        )
    if query.top_k > limits.max_top_k:
        raise errors.InvalidArgument(
            f"top_k must be at most {limits.max_top_k}, got {query.top_k}", field="top_k"
        )
    unknown = sorted(set(query.arms) - set(STRATEGIES))
    if unknown:
        raise errors.InvalidArgument(f"unknown arms {unknown}; known: {sorted(STRATEGIES)}", field="arms")
    if query.fusion_k > limits.max_fusion_k:
        raise errors.InvalidArgument(
            f"fusion_k must be at most {limits.max_fusion_k:g} (0 for the default)", field="fusion_k"
        )
    if query.fusion and query.fusion not in FUSION_METHODS:
        raise errors.InvalidArgument(
            f"unknown fusion {query.fusion!r}; known: {list(FUSION_METHODS)}", field="fusion"
        )
    if query.fusion == MIN_MAX and query.fusion_k:
        raise errors.InvalidArgument("fusion_k is RRF's constant; min_max takes none", field="fusion_k")
    options = query.expansion
    if options.max_iterations is not None and options.max_iterations > limits.max_expansion_iterations:
        raise errors.InvalidArgument(
            f"max_iterations must be at most {limits.max_expansion_iterations}",
            field="expansion.max_iterations",
        )
    if options.budget is not None and options.budget > limits.max_expansion_budget:
        raise errors.InvalidArgument(
            f"budget must be at most {limits.max_expansion_budget}", field="expansion.budget"
        )
    unknown = sorted(set(options.strategies) - set(EXPANSION_STRATEGIES))
    if unknown:
        raise errors.InvalidArgument(
            f"unknown expansion strategies {unknown}; known: {list(EXPANSION_STRATEGIES)}",
            field="expansion.strategies",
        )
