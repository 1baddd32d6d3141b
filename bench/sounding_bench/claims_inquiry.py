"""`sounding eval inquiry --task scifact-claims`: claim verification by corpus inquiry on SciFact,
active query selection against naive retrieval, through the gRPC API.

The protocol (fixed before the first run, bench/README.md):

- A stack of its own (`<cache>/eval/claims`) with SciFact's corpus ingested once; the learning
  log (the corpus inquiry tables included) emptied at every start. Its NLI model is the one the
  harness is given (`--nli-model`; bench/README.md names the one measured).
- Fit, on the held-out fifth of the train claims (`scifact_claims.held_out`: claims the NLI
  model was not trained on): a session per claim with the `eig` policy, run to 8 queries
  (target confidence 1, the cost rule off, λ = 0, and the target-chance rule off), then its
  verdict sent through Observe: the sensor table is fitted from those outcomes (and the outcome
  model learns from every query, here and after).
- Target confidence τ, on the same claims: a `generated_order` session per claim, run to 8
  queries; τ is the largest of 0.50, 0.55, …, 0.95 that at least half the claims reach within
  the 8 queries. The test is also run at the specification's τ = 0.75 (`SPEC_TARGET`) when the
  rule chose another (`at_spec_target` in the result; added after run 5).
- Test: every claim of `--split` (of the train split, the held-out claims again: a look at the
  system during development, never a result), its labels read from `metadata` here only
  (annotated evidence: its label; none: NOT_ENOUGH_INFO). Per claim, in turn, a session of each
  policy (`eig`, `generated_order`, `keywords`, each going first on every third claim) with the
  same stop rule: confidence ≥ τ, at most 8 queries, no candidate left (for `eig` also: τ out of
  reach, a target chance below `min_target_chance`, or none worth its cost, expected gain −
  λ·cost ≤ 0, λ = 1); the diminishing-returns rule off. Nothing of the test claims is observed.

Reported per policy: executed queries per claim (mean, median), the share of claims that reached
τ, verdict accuracy and macro-F1, the ECE of the final confidence, sentences judged and wall
time per claim; the saving 1 − mean(eig)/mean(baseline) against each baseline with a paired
bootstrap (10,000 resamples of the claims, seed 0) 95% interval, and the same over the claims
both policies brought to τ; the share of the saving that comes from the claims where `eig`
gave up (stopped `target_out_of_reach` or `no_viable_queries`); the paired difference in
accuracy (eig − baseline) with its bootstrap interval; every session's queries (each with the
target chance read before it and the answer and confidence after it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from sklearn.metrics import f1_score
from sounding.core.calibration import expected_calibration_error
from sounding.core.claim_evidence import VERDICTS
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench import beir, scifact_claims
from sounding_bench.harness import own_stack

POLICIES = ("eig", "generated_order", "keywords")
BASELINES = ("generated_order", "keywords")
MAX_QUERIES = 8
TARGET_GRID = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))
SPEC_TARGET = 0.75
# The stops of `eig` that give up on the target rather than reach it or run out of queries.
GAVE_UP = ("target_out_of_reach", "no_viable_queries")
REACHED_SHARE = 0.5
BOOTSTRAP_RESAMPLES = 10_000
SEED = 0
# The fit sessions run to 8 queries: a target of 1 is always out of reach.
FIT_PARAMETERS = {"min_target_chance": "0"}


@dataclass(frozen=True)
class Session:
    session_id: str
    answer: str
    confidence: float
    stopping_reason: str
    queries: list[dict]
    beliefs: list[float]
    seconds: float

    @property
    def sentences(self) -> int:
        return sum(q["sentences_read"] for q in self.queries)


def play(
    client,
    collection: str,
    claim: str,
    policy: str,
    target: float,
    parameters: dict[str, str] | None = None,
    cost_sensitivity: float = 1.0,
) -> Session:
    """One corpus session through the API, to its answer (`parameters`: domain parameters beside
    the collection; `cost_sensitivity` 0 runs `eig` without its cost rule)."""
    from sounding_client import Belief, Evidence, InquiryAnswer, InquiryPolicy

    started = time.perf_counter()
    inquiry = client.inquire(
        "corpus",
        InquiryPolicy(
            question_selection=policy,
            max_turns=MAX_QUERIES,
            target_confidence=target,
            min_information_gain=0.0,
            cost_sensitivity=cost_sensitivity,
            seed=SEED,
        ),
        domain_parameters={**(parameters or {}), "collection": collection},
        context=claim,
    )
    queries, beliefs, answer = [], [], None
    for event in inquiry:
        if isinstance(event, Evidence):
            queries.append(
                {
                    "query": event.query,
                    "strategy": event.strategy,
                    "reached": event.reached,
                    "predicted_reach": round(event.predicted_reach, 4),
                    "target_chance": round(event.target_chance, 4),
                    "expected_gain": round(event.expected_information_gain, 4),
                    "actual_gain": round(event.actual_information_gain, 4),
                    "outcome": event.outcome,
                    "strongest_entailment": round(event.strongest_entailment, 4),
                    "strongest_contradiction": round(event.strongest_contradiction, 4),
                    "sentences_read": event.sentences_read,
                    "documents": [h.document_id for h in event.hits],
                }
            )
        elif isinstance(event, Belief):
            leader = max(event.top_hypotheses, key=lambda h: h.probability)
            beliefs.append(leader.probability)
            if queries:
                queries[-1]["answer_after"] = leader.id
                queries[-1]["confidence_after"] = round(leader.probability, 4)
        elif isinstance(event, InquiryAnswer):
            answer = event
    if answer is None:
        raise RuntimeError("the inquiry ended without an answer")
    return Session(
        answer.session_id,
        answer.answer,
        float(answer.confidence.value or 0.0),
        answer.stopping_reason,
        queries,
        beliefs,
        time.perf_counter() - started,
    )


def choose_target(trajectories: list[list[float]]) -> tuple[float, dict[str, float]]:
    """The largest grid value that at least half the trajectories (the largest belief after
    each query) reach, and the share reaching each."""
    shares = {
        f"{t:.2f}": float(np.mean([max(b, default=0.0) >= t for b in trajectories])) for t in TARGET_GRID
    }
    reachable = [t for t in TARGET_GRID if shares[f"{t:.2f}"] >= REACHED_SHARE]
    return (max(reachable) if reachable else TARGET_GRID[0]), shares


def paired_saving(active: np.ndarray, baseline: np.ndarray, seed: int = SEED) -> dict:
    """1 − mean(active)/mean(baseline) and its percentile bootstrap 95% interval over claims."""
    rng = np.random.default_rng(seed)
    n = len(active)
    picks = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    resampled = 1.0 - active[picks].mean(axis=1) / baseline[picks].mean(axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return {
        "saving": round(float(1.0 - active.mean() / baseline.mean()), 4),
        "interval_95": [round(float(low), 4), round(float(high), 4)],
        "resamples": BOOTSTRAP_RESAMPLES,
        "seed": seed,
    }


def paired_difference(active: np.ndarray, baseline: np.ndarray, seed: int = SEED) -> dict:
    """mean(active − baseline) over claims and its percentile bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    differences = active - baseline
    picks = rng.integers(0, len(differences), size=(BOOTSTRAP_RESAMPLES, len(differences)))
    low, high = np.percentile(differences[picks].mean(axis=1), [2.5, 97.5])
    return {
        "difference": round(float(differences.mean()), 4),
        "interval_95": [round(float(low), 4), round(float(high), 4)],
        "resamples": BOOTSTRAP_RESAMPLES,
        "seed": seed,
    }


def giving_up_share(active: list[Session], baseline: list[Session]) -> dict:
    """Of the queries `active` saved against `baseline` (their difference summed over claims),
    the share saved on the claims where `active` gave up (`GAVE_UP`)."""
    saved = sum(len(b.queries) - len(a.queries) for a, b in zip(active, baseline, strict=True))
    by_giving_up = sum(
        len(b.queries) - len(a.queries)
        for a, b in zip(active, baseline, strict=True)
        if a.stopping_reason in GAVE_UP
    )
    return {
        "claims_given_up": sum(a.stopping_reason in GAVE_UP for a in active),
        "queries_saved": saved,
        "queries_saved_giving_up": by_giving_up,
        "share": round(by_giving_up / saved, 4) if saved > 0 else None,
    }


def macro_f1(labels: list[str], answers: list[str]) -> float:
    """Macro-F1 over the three verdicts (a verdict never answered scores 0)."""
    zero: Any = 0.0  # sklearn's stubs type zero_division as a string
    return float(f1_score(labels, answers, labels=list(VERDICTS), average="macro", zero_division=zero))


def _both_reached(active: list[Session], baseline: list[Session]) -> dict:
    """The saving over the claims on which both policies reached the target (a secondary
    measure: how much faster eig gets there, its stop for queries not worth their cost aside)."""
    both = [
        (len(a.queries), len(b.queries))
        for a, b in zip(active, baseline, strict=True)
        if a.stopping_reason == b.stopping_reason == "confidence_reached"
    ]
    if not both:
        return {"claims": 0}
    pairs = np.array(both, float)
    return {"claims": len(both), **paired_saving(pairs[:, 0], pairs[:, 1])}


def summary(sessions: list[Session], labels: list[str], target: float) -> dict:
    queries = np.array([len(s.queries) for s in sessions], float)
    answers = [s.answer for s in sessions]
    correct = np.array([a == label for a, label in zip(answers, labels, strict=True)], float)
    return {
        "mean_queries": round(float(queries.mean()), 4),
        "median_queries": float(np.median(queries)),
        "reached_target": round(
            float(np.mean([s.stopping_reason == "confidence_reached" for s in sessions])), 4
        ),
        "stopping_reasons": {
            r: sum(s.stopping_reason == r for s in sessions)
            for r in sorted({s.stopping_reason for s in sessions})
        },
        "accuracy": round(float(correct.mean()), 4),
        "macro_f1": round(macro_f1(labels, answers), 4),
        "ece": round(expected_calibration_error([s.confidence for s in sessions], correct), 4),
        "mean_sentences_judged": round(float(np.mean([s.sentences for s in sessions])), 2),
        "mean_seconds": round(float(np.mean([s.seconds for s in sessions])), 3),
        "target": target,
    }


def compare(runs: dict[str, list[Session]], labels: list[str], target: float) -> dict:
    """The policies' summaries at `target` and eig against each baseline: the saving over all
    claims and over those both brought to the target, the share of the saving from giving up,
    and the paired accuracy difference."""
    queries = {p: np.array([len(s.queries) for s in runs[p]], float) for p in POLICIES}
    correct = {
        p: np.array([s.answer == label for s, label in zip(runs[p], labels, strict=True)], float)
        for p in POLICIES
    }
    return {
        "target_confidence": target,
        "policies": {p: summary(runs[p], labels, target) for p in POLICIES},
        "savings": {b: paired_saving(queries["eig"], queries[b]) for b in BASELINES},
        "savings_where_both_reached_target": {b: _both_reached(runs["eig"], runs[b]) for b in BASELINES},
        "saving_from_giving_up": {b: giving_up_share(runs["eig"], runs[b]) for b in BASELINES},
        "accuracy_difference": {b: paired_difference(correct["eig"], correct[b]) for b in BASELINES},
    }


def per_claim(claims: list, runs: dict[str, list[Session]]) -> list[dict]:
    return [
        {
            "id": claim.id,
            "claim": claim.text,
            "label": claim.verdict,
            **{
                p: {
                    "answer": runs[p][i].answer,
                    "confidence": round(runs[p][i].confidence, 4),
                    "stopping_reason": runs[p][i].stopping_reason,
                    "queries": runs[p][i].queries,
                }
                for p in POLICIES
            },
        }
        for i, claim in enumerate(claims)
    ]


@dataclass(frozen=True)
class ClaimsInquiryRun:
    """What a run measures: SciFact's BEIR directory at `data` and the split whose claims are
    tested, with the sidecar's NLI model `nli_model` (empty: its default); `limit`: only the
    first claims of each part, for a quick look; `parameters`: domain parameters for every
    session, to try settings other than the defaults."""

    data: Path
    split: str
    nli_model: str
    limit: int | None = None
    parameters: dict[str, str] = field(default_factory=dict)


def play_test_claims(
    client, collection: str, claims: list, target: float, spec: ClaimsInquiryRun, console: Console
) -> dict[str, list[Session]]:
    """A session of each policy per claim at `target`, the policies taking turns going first
    (the first warms the caches for the others)."""
    runs: dict[str, list[Session]] = {p: [] for p in POLICIES}
    with progress_bar(console) as progress:
        task = progress.add_task(
            f"test at {target:.2f}: {len(claims)} claims x {len(POLICIES)} policies", total=len(claims)
        )
        for index, claim in enumerate(claims):
            order = POLICIES[index % len(POLICIES) :] + POLICIES[: index % len(POLICIES)]
            for policy in order:
                runs[policy].append(play(client, collection, claim.text, policy, target, spec.parameters))
            progress.advance(task)
    return runs


def run(spec: ClaimsInquiryRun, settings: Settings, console: Console) -> dict:
    """The result JSON (the protocol above)."""
    dataset = beir.load(spec.data, spec.split)
    fit_claims = [c for c in scifact_claims.load_claims(spec.data, "train") if scifact_claims.held_out(c.id)][
        : spec.limit
    ]
    test_claims = scifact_claims.load_claims(spec.data, spec.split)
    if spec.split == "train":  # the other train claims trained the NLI model: measuring there flatters it
        test_claims = [c for c in test_claims if scifact_claims.held_out(c.id)]
    test_claims = test_claims[: spec.limit]
    env = {"SOUNDING_MODELS__NLI__MODEL": spec.nli_model} if spec.nli_model else {}
    with own_stack(settings, "claims", dataset, console, env=env) as (client, collection):
        from sounding_client import InquiryOutcome

        with progress_bar(console) as progress:
            task = progress.add_task("fit: eig sessions on held-out train claims", total=len(fit_claims))
            fitted = []
            for claim in fit_claims:
                fitted.append(
                    play(
                        client,
                        collection,
                        claim.text,
                        "eig",
                        1.0,
                        {**spec.parameters, **FIT_PARAMETERS},
                        cost_sensitivity=0.0,
                    )
                )
                progress.advance(task)
        observed = client.observe(
            [InquiryOutcome(f.session_id, c.verdict) for f, c in zip(fitted, fit_claims, strict=True)]
        )
        with progress_bar(console) as progress:
            task = progress.add_task(
                "target: generated_order on held-out train claims", total=len(fit_claims)
            )
            naive = []
            for claim in fit_claims:
                naive.append(play(client, collection, claim.text, "generated_order", 1.0, spec.parameters))
                progress.advance(task)
        target, shares = choose_target([s.beliefs[1:] for s in naive])
        console.print(
            f"target confidence {target:.2f} (reached by {shares[f'{target:.2f}']:.0%} in 8 queries)"
        )
        runs = {
            t: play_test_claims(client, collection, test_claims, t, spec, console)
            for t in sorted({target, SPEC_TARGET})
        }
        metrics = client.strategy_metrics().corpus_inquiry
    labels = [c.verdict for c in test_claims]
    at_spec_target = (
        {
            **compare(runs[SPEC_TARGET], labels, SPEC_TARGET),
            "per_claim": per_claim(test_claims, runs[SPEC_TARGET]),
        }
        if SPEC_TARGET != target
        else "the rule chose it: the results above"
    )
    return {
        "data": str(spec.data),
        "split": spec.split,
        "claims": len(test_claims),
        "labels": {v: labels.count(v) for v in VERDICTS},
        "nli_model": spec.nli_model or "the sidecar's default",
        "protocol": {
            "max_queries": MAX_QUERIES,
            "target_grid": list(TARGET_GRID),
            "target_rule": f"largest value at least {REACHED_SHARE:.0%} of the held-out train claims reach",
            "fit_claims": len(fit_claims),
            "fit_cost_sensitivity": 0.0,
            "fit_domain_parameters": FIT_PARAMETERS,
            "observed": observed.recorded,
            "min_information_gain": 0.0,
            "domain_parameters": spec.parameters,
        },
        "target_shares": shares,
        "fit": {
            "eig": summary(fitted, [c.verdict for c in fit_claims], 1.0),
            "generated_order": summary(naive, [c.verdict for c in fit_claims], 1.0),
        },
        **compare(runs[target], labels, target),
        "at_spec_target": at_spec_target,
        "learned": {
            "queries": metrics.queries if metrics else 0,
            "observed_sessions": metrics.observed_sessions if metrics else 0,
            "information_gain_mae": metrics.information_gain_mae if metrics else None,
            "information_gain_mae_last_100": metrics.information_gain_mae_last_100 if metrics else None,
            "reach_mae": metrics.reach_mae if metrics else None,
            "reach_accuracy": metrics.reach_accuracy if metrics else None,
            "strategies": metrics.strategies if metrics else {},
        },
        "per_claim": per_claim(test_claims, runs[target]),
    }
