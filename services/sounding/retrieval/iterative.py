"""The iterative expansion loop of a Retrieve (retrieval-uncertainty spec, "Iterative Retrieval
Loop"): while the estimated recall is below the minimum and iterations and budget remain, pick
the strategy of the most severe open semantic gap, run its expanded queries on the strategy
workers, and merge their rankings into the result. A strategy whose step the gate refuses
(`LoopInputs.refusal`: `core.expansion_gate`, not worth its latency or past the time left) is
passed over for the next gap's; when every strategy was refused or used, the loop stops with
the last refusal as its reason.

Merge: the first `protected_head` positions of the result before the loop stay as they are
(expansions chase recall; the head the caller reads first was ranked by the query itself).
Below them, every expanded query's ranking joins the arms' rankings in the request's fusion
(weight: `fusion_weight` × the arms' mean weight), so a document is listed once, with every
arm and expanded query that found it among its contributions. The loop's running miss rate starts at
the stated one; after a merge that brought `added` new documents into the top k it becomes
miss × (1 − added / k) (`core.expansion.miss_rate_after`), crediting what the loop recovered
below the head. The loop's recall is 1 − that, or the calibrated recall once Calibrate(MISS_RATE)
has run; it decides when the loop stops and is streamed in each Expansion event. A step that
fails or runs past `step_timeout_s` ends the loop (stop reason "step_failed") and is recorded
in `failures`; the result keeps what earlier steps merged. Each step's strategy, the documents
it brought into the result and its latency are kept in `steps` (what the gate learns from).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sounding.core import expansion as core
from sounding.core.expansion_gate import ExpansionStep
from sounding.core.fusion import Fusion
from sounding.core.provenance import Provenance
from sounding.retrieval.fusion import fuse_hits
from sounding.retrieval.protocol import (
    ArmFailure,
    ArmResult,
    Executor,
    ExpansionEvent,
    ExpansionRequest,
    FusedHit,
    QueryExpansion,
)
from sounding.store.tenancy import ResourceRef


@dataclass(frozen=True)
class LoopSettings:
    min_recall: float
    max_iterations: int
    budget: int
    strategies: tuple[str, ...]
    queries_per_step: int
    fusion_weight: float
    protected_head: int


@dataclass
class LoopState:
    """What the loop changes: the result, its running miss rate, and its trace."""

    fused: list[FusedHit]
    miss_rate: float
    expansions: list[QueryExpansion] = field(default_factory=list)
    stop_reason: str = ""
    rankings: dict[str, ArmResult] = field(default_factory=dict)
    failures: list[ArmFailure] = field(default_factory=list)
    steps: list[ExpansionStep] = field(default_factory=list)


@dataclass(frozen=True)
class LoopInputs:
    """What the loop expands: the query (its collection, result size, deadline and vector), the
    gaps found in its result, the arms' rankings and fusion weights, the recall it acts on
    for a miss rate (`retrieval.uncertainty.loop_recall`), and why a strategy's step should not
    run now ("" when it should)."""

    query: str
    collection: ResourceRef
    top_k: int
    timeout_s: float | None
    query_vector: np.ndarray
    gaps: Sequence[core.Gap]
    landed: Mapping[str, ArmResult]
    weights: Mapping[str, float]
    fusion: Fusion
    recall: Callable[[float], Provenance]
    refusal: Callable[[str], str]
    flow: str = ""


async def run_loop(
    state: LoopState,
    inputs: LoopInputs,
    settings: LoopSettings,
    executor: Executor,
    carrier: Mapping[str, str],
    step_timeout_s: float | None = None,
) -> AsyncIterator[ExpansionEvent]:
    """Runs the loop, updating `state` and yielding an event per iteration."""
    landed, weights, top_k, recall = inputs.landed, inputs.weights, inputs.top_k, inputs.recall
    used: list[str] = []
    spent = iteration = 0
    arm_weight = float(np.mean([weights.get(arm, 1.0) for arm in landed])) if landed else 1.0
    all_weights = dict(weights)
    head = state.fused[: settings.protected_head]
    head_ids = {h.document_id for h in head}
    refused = ""
    while True:
        reason = core.stop_reason(
            recall(state.miss_rate).value or 0.0,
            settings.min_recall,
            iteration,
            settings.max_iterations,
            spent,
            settings.budget,
        )
        choice = None if reason else core.select_strategy(inputs.gaps, settings.strategies, used)
        if reason or choice is None:
            state.stop_reason = reason or refused or "no_strategy_left"
            return
        strategy, gap = choice
        used.append(strategy)
        refusal = inputs.refusal(strategy)
        if refusal:
            refused = refusal
            continue
        count = min(settings.queries_per_step, settings.budget - spent)
        request = ExpansionRequest(
            inputs.collection,
            inputs.query,
            strategy,
            count,
            top_k,
            inputs.timeout_s,
            inputs.query_vector,
            inputs.flow,
        )
        step_started = time.perf_counter()
        try:
            async with asyncio.timeout(step_timeout_s):
                result = await executor.expand(request, carrier)
        except Exception as error:
            state.failures.append(ArmFailure.of(f"expansion:{strategy}", error, step_timeout_s))
            state.stop_reason = "step_failed"
            return
        if not result.queries:
            continue  # nothing to expand with (e.g. no graph): try the next gap's strategy
        iteration += 1
        spent += len(result.queries)
        before = {h.document_id for h in state.fused}
        for index, (text, hits) in enumerate(zip(result.queries, result.hits, strict=True)):
            name = f"{strategy}#{iteration}.{index + 1}"
            state.rankings[name] = ArmResult(name, hits, result.latency_ms)
            all_weights[name] = settings.fusion_weight * arm_weight
            documents = {h.document_id for h in hits}
            state.expansions.append(
                QueryExpansion(inputs.query, text, strategy, len(documents), bool(documents - before))
            )
        merged = fuse_hits({**landed, **state.rankings}, all_weights, inputs.fusion, top_k)
        state.fused = [*head, *(h for h in merged if h.document_id not in head_ids)][:top_k]
        added_ids = [h.document_id for h in state.fused if h.document_id not in before]
        added = len(added_ids)
        state.steps.append(
            ExpansionStep(strategy, tuple(added_ids), (time.perf_counter() - step_started) * 1000)
        )
        state.miss_rate = core.miss_rate_after(state.miss_rate, added, top_k)
        yield ExpansionEvent(
            iteration=iteration,
            strategy=strategy,
            gap=gap.description if gap else "no targeted gap: a general rewrite",
            queries=list(result.queries),
            new_hits=added,
            result_count=len({h.document_id for hits in result.hits for h in hits}),
            estimated_recall=recall(state.miss_rate),
        )
