"""What the `llm` domain measures at a state: sampled answers, their self-revisions, clusters,
the stop rules' scores, homogeneity diagnostics, and the next question (robust-MI spec §2.3–§2.6,
§3.2–§3.5, §4.3).

Plain sampling (the base prompt, k initial answers, each revised once) gives `mi_only` and, from
its initial answers, the self-consistency, semantic-entropy and conformal-set signals. Robust MI
runs the three prompt variants with diversity-steered sampling (§2.4.4): candidates are drawn in
rounds of concurrent generations; one is accepted when its embedding's cosine similarity to every
accepted answer is at most the threshold, and after the last round the remaining slots take the
last rejected candidates. Every rejected candidate is a draw from the model that lands next to an
accepted answer, so the importance weight of an accepted answer is 1 + the rejected draws most
similar to it: the weighted counts then estimate the model's own answer frequencies (this is the
acceptance-rate estimate of §2.4.4; `diversity="unweighted"` is the ablation with weights 1).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol

import numpy as np

from sounding.core import clustering, homogeneity, stop_rules
from sounding.core.mutual_information import mutual_information
from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.tasks import Problem, Variant
from sounding.runtime import errors

Diversity = Literal["weighted", "unweighted", "off"]
Regime = Literal["normal", "collapse"]
REGIMES: dict[Regime, tuple[float, float]] = {"normal": (0.7, 0.95), "collapse": (0.1, 1.0)}


@dataclass(frozen=True)
class Calibration:
    """What a state's scores are measured with, from the thresholds in force for its homogeneity
    bucket: the conformal quantile of the set rules, and the verbalized confidence's isotonic
    map (None: the stated confidence as it is)."""

    quantile: float
    confidence_map: Callable[[float], float] | None = None


class Backend(Protocol):
    """The models an assessment needs (the sidecar's client satisfies it through `Models`)."""

    async def text(
        self, messages: Sequence[dict[str, str]], temperature: float, top_p: float, max_tokens: int
    ) -> str: ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def cluster(self, texts: Sequence[str], method: str) -> list[int]: ...

    async def entail(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """(entailment, neutral, contradiction) per (premise, hypothesis)."""
        ...


class Models:
    """`Backend` over the sidecar client for one session of a tenant: its generations form one
    flow in the sidecar, at most `in_flight` at once, cached within the tenant's scope; a failed
    clustering falls back to exact strings (§2.3.4)."""

    def __init__(self, client, flow: str = "", in_flight: int = 8, timeout: float = 600.0, tenant: str = ""):
        self._client = client
        self._flow = flow
        self._tenant = tenant
        self._in_flight = asyncio.Semaphore(in_flight)
        self._timeout = timeout

    async def text(self, messages, temperature, top_p, max_tokens) -> str:
        pieces = []
        async with self._in_flight:
            async for piece in self._client.generate(
                messages,
                max_new_tokens=max_tokens,
                temperature=temperature,
                top_p=top_p,
                timeout=self._timeout,
                flow=self._flow,
                cache_scope=self._tenant,
            ):
                pieces.append(piece.text)
        return "".join(pieces)

    async def embed(self, texts):
        return await self._client.embed(texts, timeout=self._timeout)

    async def entail(self, pairs):
        return await self._client.entail(pairs, timeout=self._timeout)

    async def cluster(self, texts, method):
        try:
            return await self._client.cluster(texts, method, timeout=self._timeout)
        except errors.SoundingError:
            return clustering.exact_clusters(texts)


@dataclass(frozen=True)
class SamplingSettings:
    samples: int = 4
    regime: Regime = "normal"
    diversity: Diversity = "weighted"
    # §2.4.4 defaults: 0.90 for answers.
    similarity_threshold: float = 0.9
    max_tries: int = 5
    question_candidates: int = 5
    # 0: the task's default token budgets.
    answer_tokens: int = 0
    question_tokens: int = 0
    # Robust MI's prompt variants, the first `variants` of tasks.VARIANTS (§5 "− robust MI": 1).
    variants: int = 3
    # How VoI's slate is thinned (§5 "− DPP": "top", the first candidates listed) and chosen
    # from (§5 "− MI-based selection": "random", a random valid candidate).
    slate: Literal["dpp", "top"] = "dpp"
    choice: Literal["best", "random"] = "best"
    # VoI's uncertainty measure (§5 "MI → self-consistency", "MI → set size").
    measure: Literal["robust_mi", "self_consistency", "set_size"] = "robust_mi"


def worst_case_tokens(problem: Problem, settings: SamplingSettings, rules: set[str], states: int) -> int:
    """The most tokens `assess` and direct prompting can generate over `states` states: per
    state, k plain answers and their revisions; for robust MI, each of the three variants'
    diversity-steered draws (at most max_tries rounds of k) and k revisions; the verbalized
    confidence; and two attempts at a question list."""
    k = settings.samples
    answers = 2 * k
    if "robust_mi_risk" in rules:
        answers += settings.variants * (settings.max_tries + 1) * k
    answer_tokens = settings.answer_tokens or problem.task.answer_tokens
    question_tokens = settings.question_tokens or problem.task.question_tokens
    verbal = answer_tokens + 16 if "verbalized_confidence" in rules else 0
    return states * (answers * answer_tokens + verbal + 2 * question_tokens)


@dataclass
class PairSamples:
    """k (initial, revised) answers of one prompt variant, with weights and cluster labels."""

    variant: str
    initial_texts: list[str]
    revised_texts: list[str]
    initial: list[str]
    revised: list[str]
    weights: list[float]
    initial_labels: list[int] = field(default_factory=list)
    revised_labels: list[int] = field(default_factory=list)
    mutual_information: float = 0.0


@dataclass
class Assessment:
    """Everything measured at one state; JSON-serialisable (stored with the session)."""

    turn: int
    scores: dict[str, float]
    # The answer now: the largest cluster of the revisions (of the plain initial answers if no
    # revision parses), and its weighted share.
    answer: str
    answer_share: float
    # Answer clusters of the plain initial samples: (representative answer, share), largest first.
    distribution: list[tuple[str, float]]
    homogeneity: dict[str, float | bool]
    bucket: str
    verbalized_confidence: float | None = None
    pairs: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


async def sample_pairs(
    backend: Backend,
    problem: Problem,
    turns,
    variant: Variant,
    settings: SamplingSettings,
    diversity: Diversity,
    rng: random.Random,
) -> PairSamples:
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.answer_tokens or problem.task.answer_tokens
    prompt = tasks.initial_prompt(problem, turns, variant)

    async def draw(count: int) -> list[str]:
        return list(
            await asyncio.gather(*(backend.text(prompt, temperature, top_p, tokens) for _ in range(count)))
        )

    k = settings.samples
    if diversity == "off":
        accepted, weights = await draw(k), [1.0] * k
    else:
        accepted, weights = await _diverse(backend, draw, problem, k, settings, rng)
        if diversity == "unweighted":
            weights = [1.0] * len(accepted)
    revised_texts = list(
        await asyncio.gather(
            *(
                backend.text(tasks.revision_prompt(problem, turns, y0, variant), temperature, top_p, tokens)
                for y0 in accepted
            )
        )
    )
    total = sum(weights)
    return PairSamples(
        variant,
        accepted,
        revised_texts,
        [tasks.parse_answer(problem, t, rng) for t in accepted],
        [tasks.parse_answer(problem, t, rng) for t in revised_texts],
        [w * len(weights) / total for w in weights],
    )


async def _diverse(backend, draw, problem, k, settings, rng) -> tuple[list[str], list[float]]:
    accepted: list[str] = []
    weights: list[float] = []
    vectors: list[np.ndarray] = []
    rejected: list[str] = []
    for attempt in range(settings.max_tries):
        needed = k - len(accepted)
        if needed == 0:
            break
        candidates = await draw(needed)
        embedded = await backend.embed([_answer_text(problem, c, rng) for c in candidates])
        rejected = []
        for text, vector in zip(candidates, embedded, strict=True):
            similarities = [float(vector @ v) for v in vectors]
            if len(accepted) < k and (not similarities or max(similarities) <= settings.similarity_threshold):
                accepted.append(text)
                weights.append(1.0)
                vectors.append(vector)
            else:
                rejected.append(text)
                if similarities:
                    weights[int(np.argmax(similarities))] += 1.0
        if attempt == settings.max_tries - 1:
            for text in rejected[: k - len(accepted)]:
                # Accepted for want of anything else: its draw was already counted as a rejection.
                accepted.append(text)
                weights.append(1.0)
    return accepted, weights


def _answer_text(problem: Problem, text: str, rng: random.Random) -> str:
    """What diversity is judged on: the parsed answer (the whole text if none parses)."""
    return tasks.parse_answer(problem, text, rng) or text


async def label_answers(backend: Backend, problem: Problem, answers: Sequence[str]) -> list[int]:
    """Cluster labels of all answers of a state at once; unparsed answers are singletons."""
    parsed = [(i, a) for i, a in enumerate(answers) if a != tasks.UNPARSED]
    labels = [0] * len(answers)
    if parsed:
        texts = [a for _, a in parsed]
        method = problem.task.cluster_method
        found = (
            clustering.exact_clusters(texts) if method == "exact" else await backend.cluster(texts, method)
        )
        for (index, _), label in zip(parsed, found, strict=True):
            labels[index] = label
    next_label = max((labels[i] for i, _ in parsed), default=-1) + 1
    for index, answer in enumerate(answers):
        if answer == tasks.UNPARSED:
            labels[index] = next_label
            next_label += 1
    return labels


async def score_pairs(backend: Backend, problem: Problem, sampled: Sequence[PairSamples]) -> None:
    """Cluster every answer of the samples at once and set each one's labels and self-revision
    MI."""
    answers = [a for s in sampled for a in (*s.initial, *s.revised)]
    labels = await label_answers(backend, problem, answers)
    offset = 0
    for samples in sampled:
        k = len(samples.initial)
        samples.initial_labels = labels[offset : offset + k]
        samples.revised_labels = labels[offset + k : offset + 2 * k]
        offset += 2 * k
        samples.mutual_information = mutual_information(
            samples.initial_labels, samples.revised_labels, weights=samples.weights
        )


async def assess(
    backend: Backend,
    problem: Problem,
    turns,
    turn: int,
    rules: set[str],
    settings: SamplingSettings,
    rng: random.Random,
    calibration: Callable[[str], Calibration],
) -> Assessment:
    """Measure the state for the given stop rules (the plain samples are always drawn: they give
    the answer distribution and diagnostics); the set size and the mapped verbalized confidence
    use `calibration` of the state's homogeneity bucket."""
    jobs = [sample_pairs(backend, problem, turns, "base", settings, "off", rng)]
    robust = "robust_mi_risk" in rules
    if robust:
        jobs += [
            sample_pairs(backend, problem, turns, v, settings, settings.diversity, rng)
            for v in tasks.VARIANTS[: settings.variants]
        ]
    verbalized = "verbalized_confidence" in rules
    temperature, top_p = REGIMES[settings.regime]
    verbal_job = (
        backend.text(
            tasks.verbalized_prompt(problem, turns),
            temperature,
            top_p,
            (settings.answer_tokens or problem.task.answer_tokens) + 16,
        )
        if verbalized
        else asyncio.sleep(0, result="")
    )
    sampled, verbal_text = await asyncio.gather(asyncio.gather(*jobs), verbal_job)
    sampled[0].variant = "plain"  # the base prompt without diversity steering
    await score_pairs(backend, problem, sampled)
    plain = sampled[0]
    distribution = stop_rules.cluster_distribution(plain.initial_labels)
    representative = {label: plain.initial[plain.initial_labels.index(label)] for label in distribution}
    scores: dict[str, float] = {
        "mi_only": plain.mutual_information,
        "self_consistency": 1.0 - max(distribution.values()),
        "semantic_entropy": stop_rules.semantic_entropy(distribution),
    }
    vectors = await backend.embed([a or t for a, t in zip(plain.initial, plain.initial_texts, strict=True)])
    diagnostics = homogeneity.diagnose(plain.initial_texts, vectors, plain.initial_labels)
    calibrated = calibration(diagnostics.bucket)
    set_size = len(stop_rules.prediction_set(distribution, calibrated.quantile))
    scores["knowno_set_size"] = scores["cip_lite"] = float(set_size)
    if robust:
        scores["robust_mi_risk"] = max(s.mutual_information for s in sampled[1:])
    stated = tasks.parse_confidence(verbal_text) if verbalized else None
    if verbalized:
        confidence = stated if stated is not None else 0.0
        if calibrated.confidence_map is not None:
            confidence = float(calibrated.confidence_map(confidence))
        scores["verbalized_confidence"] = 1.0 - confidence
    answer, share = _majority(
        [
            (a, label, w)
            for s in sampled
            for a, label, w in zip(s.revised, s.revised_labels, s.weights, strict=True)
        ]
    )
    if answer == tasks.UNPARSED:  # no revision parsed: the plain initial answers' majority
        answer, share = _majority(list(zip(plain.initial, plain.initial_labels, plain.weights, strict=True)))
    sensitivity = {}
    if robust and settings.variants > 1:  # each variant's modal answer: its heaviest cluster
        modal = [
            next(iter(stop_rules.cluster_distribution(s.initial_labels, s.weights))) for s in sampled[1:]
        ]
        sensitivity["prompt_sensitivity"] = homogeneity.prompt_sensitivity(modal)
    return Assessment(
        turn=turn,
        scores=scores,
        answer=answer,
        answer_share=share,
        distribution=[(representative[label], p) for label, p in distribution.items()],
        homogeneity={k: float(v) for k, v in asdict(diagnostics).items()} | sensitivity,
        bucket=diagnostics.bucket,
        verbalized_confidence=stated,
        pairs=[asdict(s) for s in sampled],
    )


def _majority(items: Sequence[tuple[str, int, float]]) -> tuple[str, float]:
    """The first parsed answer of the heaviest cluster, and the cluster's share of the weight."""
    totals: dict[int, float] = {}
    for answer, label, weight in items:
        totals[label] = totals.get(label, 0.0) + (weight if answer != tasks.UNPARSED else 0.0)
    if not totals or max(totals.values()) == 0:
        return tasks.UNPARSED, 0.0
    best = max(
        totals, key=lambda label: (totals[label], -min(i for i, x in enumerate(items) if x[1] == label))
    )
    answer = next(a for a, label, _ in items if label == best and a != tasks.UNPARSED)
    return answer, totals[best] / sum(w for _, _, w in items)
