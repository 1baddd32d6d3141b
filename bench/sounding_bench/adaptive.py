"""`sounding eval retrieval --train-split …`: adaptive strategy selection on a BEIR dataset.

The harness runs its own stack on a data directory of its own (the collection is ingested once
and kept; the learning log and calibrations are emptied at every start, so the selector begins
cold and no query adapter is deployed), with every registered arm selectable. Then:

1. All arms, train: one Retrieve per train query naming every arm. Each arm's own ranking (its
   StrategyResult) scores that arm as a fixed strategy; the fused ranking scores "all arms
   fused". Arms are independent and generation is greedy, so an arm's ranking is the same as
   when it runs alone; a fixed arm's latency is its own `latency_ms`.
2. Adaptive, train: the train queries in order, each a Retrieve that lets the selector choose,
   followed by an Observe whose outcome comes from the qrels (the relevant documents among the
   top 10 are the ones "used"; relevant ones outside the top k are "missed").
3. Calibrate(QUERY_ADAPTER) fits the collection's query adapter to those train outcomes; what
   follows searches with it if it was deployed (the learned ranking every Retrieve gets).
4. All arms, test, as in 1; then adaptive, test, as in 2 (still learning online).

The stack caches greedy generations, so the adaptive passes reuse the all-arms pass's generated
text (identical to decoding again) and an interrupted run resumes where it stopped decoding. Its
arm timeout (and a Retrieve's default deadline) is raised to `ARM_TIMEOUT_S`: on two busy cores
a batch of generations can outlast the deployment's 30 s, and an arm dropped from a Retrieve
would score as an empty ranking; a Retrieve that drops an arm all the same stops the run.

Per system: nDCG@10, recall@100, the mean §5.4 reward (adaptive-strategy spec) as the selector
computes it (`core.plans`: the plan's fused ranking's binary nDCG@10 against the query's relevant
documents, less the latency penalty on its slowest arm's cost), mean arm executions per query and
mean arm cost per query (each arm's `cost_ms`: its latency with cached generations counted at the
time decoding them took, the figure the selector's latency penalty charges); adaptive's mean
end-to-end latency (queries one at a time, as a client sees them, generations served from the
cache); each fixed arm's mean latency inside its worker, measured in the all-arms pass with four
queries in flight (so under load, and decoding unless an earlier run cached the generation). The
regret curve over the train stream after the cold start compares, query by query, the nDCG@10 of the best
fixed plan in hindsight (the set of arms, fused as the service fused the all-arms Retrieve of that
query: by the fusion its Plan names, over the arms' own scores, with equal weights) with the
adaptive result's; its growth is summarised by `regret_growth`. On the test queries every fixed
plan's nDCG@10 and mean reward are reported beside adaptive's, with the best plan by each and the
best plan whose arms each cost under `AFFORDABLE_ARM_MS` on average. Per query, the result lists
adaptive's mode, chosen arms, nDCG@10, reward and top 10 documents.

`run_seeds` repeats the run with the selector seeded differently each time (its exploration
draws) and summarises each figure over the seeds: mean, standard deviation, min and max.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from sounding.core.plans import plan_name, plan_rewards_many
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench import beir
from sounding_bench.fixed_plans import (
    AFFORDABLE_ARM_MS,
    ArmsPass,
    fixed_plan_rewards,
    fixed_plans,
    over_seeds,
    relevant_documents,
    reward_inputs,
    scored_hits,
)
from sounding_bench.harness import calibration_record, own_stack, run_concurrently
from sounding_bench.metrics import beir_scores, per_query, without_self

TOP_K = 100
USED_TOP = 10
ALL_ARMS_IN_FLIGHT = 4
GENERATION_CACHE_ENTRIES = 1_000_000
ARM_TIMEOUT_S = 3600


@dataclass(frozen=True)
class AdaptiveRun:
    """What a run measures: the BEIR dataset at `data`, the split learned from and the split
    measured, each cut to its first `train_limit` and `test_limit` queries if given, with the
    selector seeded by `seed`."""

    data: Path
    train_split: str
    split: str
    train_limit: int | None = None
    test_limit: int | None = None
    # The selector's seed (its exploration draws).
    seed: int = 0


def run(spec: AdaptiveRun, settings: Settings, console: Console) -> tuple[dict, bytes]:
    """The result JSON and the regret curve as a PNG."""
    from sounding_client import ExpansionOptions, Final, Plan, StrategyResult

    train, test = beir.load(spec.data, spec.train_split), beir.load(spec.data, spec.split)
    train_queries = list(train.queries.items())[: spec.train_limit]
    test_queries = list(test.queries.items())[: spec.test_limit]
    # The orchestrator reads the same settings (environment), so these are the arms it selects among.
    arms = sorted(settings.retrieval.selection.arms)
    # The arms and their selection are measured, not the expansion loop (`eval calibration` does).
    no_loop = ExpansionOptions(max_iterations=0)

    # Greedy generations are cached, so the adaptive passes reuse the all-arms pass's generations
    # (same text as decoding again) and an interrupted run resumes without decoding again.
    env = {
        "SOUNDING_MODELS__GENERATOR__CACHE_MAX_ENTRIES": str(GENERATION_CACHE_ENTRIES),
        "SOUNDING_LIMITS__RETRIEVE__ARM_TIMEOUT_S": str(ARM_TIMEOUT_S),
        "SOUNDING_LIMITS__DEADLINES__RETRIEVE_S": str(ARM_TIMEOUT_S),
        "SOUNDING_RETRIEVAL__SELECTION__SEED": str(spec.seed),
    }
    with own_stack(settings, "adaptive", train, console, include_calibrations=True, env=env) as (
        client,
        collection,
    ):

        def all_arms(queries, label):
            """Several queries in flight (order does not matter here; the sidecar batches their
            generations), so the arms' latencies are measured under that load."""
            per_arm: dict[str, dict[str, list[tuple[str, float]]]] = {arm: {} for arm in arms}
            arm_latency = {arm: [] for arm in arms}
            arm_cost: dict[str, dict[str, float]] = {arm: {} for arm in arms}
            fused, fusions = {}, {}

            def one(query_id: str, text: str) -> None:
                for event in client.retrieve(
                    collection, text, top_k=TOP_K + 1, arms=arms, omit_text=True, expansion=no_loop
                ):
                    if isinstance(event, Plan):
                        fusions[query_id] = event.fusion
                    elif isinstance(event, StrategyResult):
                        per_arm[event.arm][query_id] = scored_hits(event.hits)
                        arm_latency[event.arm].append(event.latency_ms)
                        arm_cost[event.arm][query_id] = event.cost_ms
                    elif isinstance(event, Final):
                        _complete(query_id, event)
                        fused[query_id] = without_self(query_id, [h.document_id for h in event.hits])

            with progress_bar(console) as progress:
                task = progress.add_task(f"all arms, {label}", total=len(queries))
                run_concurrently(one, queries, ALL_ARMS_IN_FLIGHT, lambda: progress.advance(task))
            return ArmsPass(per_arm, arm_latency, arm_cost, fusions), fused

        def adaptive(queries, dataset, label):
            rankings, executions, latency, cost, modes, chosen_arms, rewards = {}, [], [], [], [], [], []
            with progress_bar(console) as progress:
                task = progress.add_task(f"adaptive, {label}", total=len(queries))
                for query_id, text in queries:
                    started = time.perf_counter()
                    plan, final, ran, costs = None, None, {}, {}
                    for event in client.retrieve(
                        collection, text, top_k=TOP_K + 1, omit_text=True, expansion=no_loop
                    ):
                        if isinstance(event, Plan):
                            plan = event
                        elif isinstance(event, StrategyResult):
                            ran[event.arm] = scored_hits(event.hits)
                            costs[event.arm] = event.cost_ms
                        elif isinstance(event, Final):
                            final = event
                    if plan is None or final is None:
                        raise RuntimeError(f"the Retrieve of {query_id} ended without its plan or ranking")
                    _complete(query_id, final)
                    latency.append((time.perf_counter() - started) * 1000)
                    cost.append(sum(costs.values()))
                    ranked = without_self(query_id, [h.document_id for h in final.hits])
                    rankings[query_id] = ranked
                    chosen = [a.arm for a in plan.arms if a.chosen]
                    executions.append(len(chosen))
                    modes.append(plan.mode)
                    chosen_arms.append(chosen)
                    relevant = relevant_documents(dataset.qrels[query_id])
                    (rewarded,) = plan_rewards_many([reward_inputs(ran, costs, plan.fusion, relevant)])
                    rewards.append(rewarded[plan_name(chosen)])
                    outcome = _outcome(final.retrieval_id, ranked, relevant)
                    ack = client.observe([outcome])
                    if ack.recorded != 1:
                        raise RuntimeError(f"Observe did not record {query_id}: {ack.rejected}")
                    progress.advance(task)
            return rankings, executions, latency, cost, modes, chosen_arms, rewards

        train_arms, _ = all_arms(train_queries, spec.train_split)
        train_adaptive, train_executions, _, _, train_modes, train_chosen, train_rewards = adaptive(
            train_queries, train, spec.train_split
        )
        adapter = calibration_record(client.calibrate("query_adapter", collection=collection))
        test_arms, test_fused = all_arms(test_queries, spec.split)
        test_adaptive, test_executions, test_latency, test_cost, test_modes, test_chosen, test_rewards = (
            adaptive(test_queries, test, spec.split)
        )

    test_ids, train_ids = [q for q, _ in test_queries], [q for q, _ in train_queries]
    fusion_k = settings.retrieval.fusion_k
    test_plans = fixed_plans(test_arms, fusion_k, TOP_K)
    test_plan_rewards = fixed_plan_rewards(test_arms, test, test_ids)
    fixed = {
        name: {
            "ndcg@10": beir_scores(ranked, test.qrels, test_ids)["ndcg@10"],
            "mean_reward": round(float(np.mean(test_plan_rewards[name])), 4),
            "slowest_arm_mean_cost_ms": round(
                max(float(np.mean(list(test_arms.costs[arm].values()))) for arm in name.split("+")), 1
            ),
        }
        for name, ranked in test_plans.items()
    }
    systems: dict[str, dict[str, Any]] = {
        arm: {
            **beir_scores(test_plans[arm], test.qrels, test_ids),
            "mean_reward": fixed[arm]["mean_reward"],
            "arm_executions_per_query": 1.0,
            "mean_arm_latency_ms_under_load": round(float(np.mean(test_arms.latency[arm])), 1),
            "mean_arm_cost_ms": round(float(np.mean(list(test_arms.costs[arm].values()))), 1),
        }
        for arm in arms
    }
    systems["all_arms_fused"] = {
        **beir_scores(test_fused, test.qrels, test_ids),
        "mean_reward": fixed[plan_name(arms)]["mean_reward"],
        "arm_executions_per_query": float(len(arms)),
        "mean_arm_cost_ms_per_query": round(sum(systems[a]["mean_arm_cost_ms"] for a in arms), 1),
    }
    systems["adaptive"] = {
        **beir_scores(test_adaptive, test.qrels, test_ids),
        "mean_reward": round(float(np.mean(test_rewards)), 4),
        "arm_executions_per_query": round(float(np.mean(test_executions)), 3),
        "mean_arm_cost_ms_per_query": round(float(np.mean(test_cost)), 1),
        "mean_latency_ms_generations_cached": round(float(np.mean(test_latency)), 1),
        "modes": {m: test_modes.count(m) for m in sorted(set(test_modes))},
    }
    regret = _regret(
        fixed_plans(train_arms, fusion_k, TOP_K),
        train_adaptive,
        train,
        train_ids,
        train_modes.count("cold_start"),
    )
    best_plan = max(fixed, key=lambda name: fixed[name]["ndcg@10"])
    best_by_reward = max(fixed, key=lambda name: fixed[name]["mean_reward"])
    affordable = [n for n in fixed if fixed[n]["slowest_arm_mean_cost_ms"] < AFFORDABLE_ARM_MS]
    best_affordable = max(affordable, key=lambda name: fixed[name]["ndcg@10"]) if affordable else None
    best_single = max(arms, key=lambda a: systems[a]["ndcg@10"])
    adaptive_ndcg, adaptive_reward = systems["adaptive"]["ndcg@10"], systems["adaptive"]["mean_reward"]
    result = {
        "dataset": train.name,
        "train_split": spec.train_split,
        "split": spec.split,
        "train_queries": len(train_queries),
        "test_queries": len(test_queries),
        "arms": arms,
        "systems": systems,
        "train_stream": {
            "arm_executions_per_query": round(float(np.mean(train_executions)), 3),
            "modes": {m: train_modes.count(m) for m in sorted(set(train_modes))},
        },
        "regret": regret,
        "query_adapter": adapter,
        "fixed_plans_test": dict(sorted(fixed.items(), key=lambda item: -item[1]["ndcg@10"])),
        "comparisons": {
            "best_fixed_plan": best_plan,
            "adaptive_minus_best_fixed_plan_ndcg": round(adaptive_ndcg - fixed[best_plan]["ndcg@10"], 4),
            "best_fixed_plan_by_reward": best_by_reward,
            "adaptive_minus_best_fixed_plan_reward": round(
                adaptive_reward - fixed[best_by_reward]["mean_reward"], 4
            ),
            "best_affordable_fixed_plan": best_affordable,
            "adaptive_minus_best_affordable_fixed_plan_ndcg": (
                round(adaptive_ndcg - fixed[best_affordable]["ndcg@10"], 4) if best_affordable else None
            ),
            "best_single_arm": best_single,
            "adaptive_minus_all_arms_fused_ndcg": round(
                adaptive_ndcg - systems["all_arms_fused"]["ndcg@10"], 4
            ),
            "adaptive_minus_best_single_ndcg": round(adaptive_ndcg - systems[best_single]["ndcg@10"], 4),
            "adaptive_share_of_all_arm_executions": round(
                systems["adaptive"]["arm_executions_per_query"] / len(arms), 3
            ),
        },
        "per_query": {
            spec.train_split: _per_query(
                train_ids, train_adaptive, train_modes, train_chosen, train_rewards, train
            ),
            spec.split: _per_query(test_ids, test_adaptive, test_modes, test_chosen, test_rewards, test),
        },
    }
    return result, _regret_plot(regret)


def run_seeds(
    spec: AdaptiveRun, seeds: list[int], settings: Settings, console: Console
) -> tuple[dict, bytes]:
    """`run` once per seed (the selector seeded with it), each run's result kept whole, and the
    figures over the seeds (`over_seeds`); the regret plot is the first seed's."""
    runs, plot = {}, b""
    for seed in seeds:
        runs[str(seed)], png = run(replace(spec, seed=seed), settings, console)
        plot = plot or png
    return {"seeds": list(seeds), "over_seeds": over_seeds(list(runs.values())), "runs": runs}, plot


def _complete(query_id: str, final) -> None:
    """A measured Retrieve must have every arm it ran: a dropped one stops the run."""
    if final.failed_arms:
        dropped = ", ".join(f"{f.arm} ({f.code}: {f.message})" for f in final.failed_arms)
        raise RuntimeError(f"the Retrieve of {query_id} dropped arms: {dropped}")


def _outcome(retrieval_id: str, ranked: list[str], relevant: set[str]):
    from sounding_client import RetrievalOutcome

    used = tuple(d for d in ranked[:USED_TOP] if d in relevant)
    missed = tuple(sorted(relevant - set(ranked[:TOP_K])))
    return RetrievalOutcome(
        retrieval_id, used, found_missing_content=bool(missed), missed_document_ids=missed
    )


def _per_query(ids, rankings, modes, chosen, rewards, dataset) -> list[dict]:
    scores = per_query(rankings, dataset.qrels, ids, ("ndcg@10",))
    return [
        {
            "query_id": q,
            "mode": m,
            "arms": arms,
            "ndcg@10": scores[q]["ndcg@10"],
            "reward": round(reward, 4),
            "top10": rankings[q][:USED_TOP],
        }
        for q, m, arms, reward in zip(ids, modes, chosen, rewards, strict=True)
    ]


def _regret(
    plans: dict[str, dict[str, list[str]]], adaptive: dict[str, list[str]], dataset, ids, cold_start: int
) -> dict:
    """Regret per train query against the best fixed plan in hindsight (best mean nDCG@10 over
    the queries after the cold start), summed from the first query after the cold start (the
    cold start runs every arm: its regret is the all-arms fusion's, not the selector's)."""

    def ndcg(rankings: dict[str, list[str]]) -> np.ndarray:
        scores = per_query(rankings, dataset.qrels, ids, ("ndcg@10",))
        return np.array([scores[q]["ndcg@10"] for q in ids])[cold_start:]

    values = {name: ndcg(r) for name, r in plans.items()}
    best = max(values, key=lambda name: values[name].mean())
    regret = values[best] - ndcg(adaptive)
    half = len(regret) // 2
    cumulative = np.cumsum(regret)
    return {
        "best_fixed_plan": best,
        "cold_start_queries": cold_start,
        "first_query": cold_start + 1,
        "cumulative": [round(float(v), 4) for v in cumulative],
        "mean_regret_first_half": round(float(regret[:half].mean()), 4) if half else None,
        "mean_regret_second_half": round(float(regret[half:].mean()), 4) if half else None,
        **regret_growth(cumulative),
        "note": "regret_t = nDCG@10(best fixed plan) - nDCG@10(adaptive), train query t after the cold start",
    }


def regret_growth(cumulative: np.ndarray) -> dict:
    """How cumulative regret R(t) grows over the whole stream it is given: the least-squares
    slope of R against t (the mean regret per query the trend implies) and, while R stays
    positive over the whole stream, the slope of log R against log t (below 1: sublinear).
    Otherwise the log-log slope means nothing: R reached zero or below, and growth counts as
    sublinear when it ends there (the stream did at least as well as the best fixed arm)."""
    t = np.arange(1, len(cumulative) + 1)
    slope = trend = None
    if len(cumulative) >= 2:
        trend = round(float(np.polyfit(t, cumulative, 1)[0]), 5)
        if (cumulative > 0).all():
            slope = round(float(np.polyfit(np.log(t), np.log(cumulative), 1)[0]), 3)
    return {
        "final_cumulative": round(float(cumulative[-1]), 4),
        "max_cumulative": round(float(cumulative.max()), 4),
        "linear_slope": trend,
        "log_log_slope": slope,
        "sublinear": bool(slope < 1) if slope is not None else bool(cumulative[-1] <= 0),
    }


def _regret_plot(regret: dict) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cumulative = regret["cumulative"]
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.plot(range(1, len(cumulative) + 1), cumulative, label="adaptive vs best fixed plan")
    axis.axhline(0, color="grey", linewidth=0.5)
    axis.set_xlabel(f"train query after the cold start of {regret['cold_start_queries']}")
    axis.set_ylabel("cumulative regret (nDCG@10)")
    axis.set_title(f"Regret against {regret['best_fixed_plan']} (best in hindsight)")
    axis.legend()
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()
