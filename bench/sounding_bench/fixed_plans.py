"""Fixed plans replayed from an all-arms pass (`sounding_bench.adaptive`): every set of the arms
that ran, fused as the service fuses a request naming them, and each one's §5.4 reward on each
query as the selector computes it (`core.plans`); and the figures of repeated runs over their
seeds (`over_seeds`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sounding.core.fusion import MIN_MAX, Fusion
from sounding.core.plans import PlanInputs, plan_rewards_many, plans

from sounding_bench.metrics import without_self

# An arm set is affordable when each of its arms' mean cost per query is below this.
AFFORDABLE_ARM_MS = 1000.0


def relevant_documents(qrels: dict[str, int]) -> set[str]:
    return {d for d, grade in qrels.items() if grade > 0}


@dataclass(frozen=True)
class ArmsPass:
    """An all-arms pass: per arm and query, the arm's (document, score) ranking and its cost;
    per arm, its latencies; per query, the fusion the service fused that Retrieve with."""

    scored: dict[str, dict[str, list[tuple[str, float]]]]
    latency: dict[str, list[float]]
    costs: dict[str, dict[str, float]]
    fusions: dict[str, str]


def scored_hits(hits) -> list[tuple[str, float]]:
    """An arm's (document, score) ranking, each document at its first (best) rank (the query's
    own id stays: the service fused with it)."""
    seen: set[str] = set()
    scored = []
    for hit in hits:
        if hit.document_id not in seen:
            seen.add(hit.document_id)
            scored.append((hit.document_id, hit.score))
    return scored


def reward_inputs(
    scored: dict[str, list[tuple[str, float]]], costs: dict[str, float], fusion: str, relevant: set[str]
) -> PlanInputs:
    """What `core.plans` rewards a query's plans on: the arms' rankings (with their scores if the
    Retrieve fused by min-max), costs, and the query's relevant documents as the ones needed."""
    return PlanInputs(
        {arm: [doc for doc, _ in ranking] for arm, ranking in scored.items()},
        costs,
        relevant,
        "",
        scores={arm: [s for _, s in ranking] for arm, ranking in scored.items()}
        if fusion == MIN_MAX
        else None,
    )


def fixed_plans(arms_pass: ArmsPass, fusion_k: float, limit: int) -> dict[str, dict[str, list[str]]]:
    """Every non-empty set of arms as a fixed plan ("dense+lexical"): per query, its arms'
    rankings fused with equal weights by the fusion the service used for that query's Retrieve
    (RRF with `fusion_k`, or min-max over the arms' scores), as it fuses a request naming them,
    then without the query's own id (`metrics.without_self`), cut to its first `limit` documents."""
    queries = list(arms_pass.fusions)
    return {
        plan: {
            query: without_self(
                query,
                [
                    item.key
                    for item in Fusion(arms_pass.fusions[query], fusion_k).fuse(
                        {arm: arms_pass.scored[arm][query] for arm in plan.split("+")}
                    )
                ],
            )[:limit]
            for query in queries
        }
        for plan in plans(sorted(arms_pass.scored))
    }


def fixed_plan_rewards(arms_pass: ArmsPass, dataset, ids: list[str]) -> dict[str, np.ndarray]:
    """Each fixed plan's §5.4 reward on each query of `ids`, as the selector computes it."""
    rewarded = plan_rewards_many(
        [
            reward_inputs(
                {arm: ranking[query] for arm, ranking in arms_pass.scored.items()},
                {arm: cost[query] for arm, cost in arms_pass.costs.items()},
                arms_pass.fusions[query],
                relevant_documents(dataset.qrels[query]),
            )
            for query in ids
        ]
    )
    return {plan: np.array([r[plan] for r in rewarded]) for plan in plans(sorted(arms_pass.scored))}


def _spread(values: list[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    return {
        "mean": round(float(array.mean()), 4),
        "std": round(float(array.std(ddof=1)) if len(array) > 1 else 0.0, 4),
        "min": round(float(array.min()), 4),
        "max": round(float(array.max()), 4),
    }


def over_seeds(results: list[dict]) -> dict:
    """Each system's and fixed plan's nDCG@10 and mean reward over the runs (mean, std, min,
    max), and adaptive against the best fixed plan by mean reward and against the best plan
    whose arms each cost under `AFFORDABLE_ARM_MS` in every run, by mean nDCG@10."""
    metrics = ("ndcg@10", "mean_reward")
    systems = {
        name: {m: _spread([r["systems"][name][m] for r in results]) for m in metrics}
        for name in results[0]["systems"]
    }
    fixed = {
        plan: {m: _spread([r["fixed_plans_test"][plan][m] for r in results]) for m in metrics}
        for plan in results[0]["fixed_plans_test"]
    }
    affordable = [
        plan
        for plan in fixed
        if all(r["fixed_plans_test"][plan]["slowest_arm_mean_cost_ms"] < AFFORDABLE_ARM_MS for r in results)
    ]
    by_reward = max(fixed, key=lambda plan: fixed[plan]["mean_reward"]["mean"])
    best_affordable = max(affordable, key=lambda plan: fixed[plan]["ndcg@10"]["mean"]) if affordable else None
    adaptive = systems["adaptive"]
    return {
        "runs": len(results),
        "systems": systems,
        "fixed_plans_test": fixed,
        "best_fixed_plan_by_reward": by_reward,
        "adaptive_minus_best_fixed_plan_reward": round(
            adaptive["mean_reward"]["mean"] - fixed[by_reward]["mean_reward"]["mean"], 4
        ),
        "best_affordable_fixed_plan": best_affordable,
        "adaptive_minus_best_affordable_fixed_plan_ndcg": (
            round(adaptive["ndcg@10"]["mean"] - fixed[best_affordable]["ndcg@10"]["mean"], 4)
            if best_affordable
            else None
        ),
    }
