"""Homogeneity diagnostics of a set of sampled answers (robust-MI spec §4.3, axes 1-5).

Semantic collapse: the largest cluster's share `p_max`, the mean pairwise cosine similarity of
the samples' embeddings, and the effective rank exp(H(λ / Σλ)) of their similarity matrix.
Surface repetition: the share of sample pairs that are identical strings, and the mean Jaccard
similarity of their word 3-gram sets. The bucket (§4.3.6) is read from the mean similarity:
high (≥ 0.9), medium (≥ 0.6), low. Prompt sensitivity: 1 − the share of prompt-variant pairs
whose modal answers agree. Simulator-NPC divergence: the surprise −ln p̂(actual) of the real
answer under the imagined answers' distribution (p̂ floored at half an imagined answer, so an
answer nobody imagined is finite), and whether any imagined answer matched it. Task-functional
diversity of an episode's questions (axis 5): for gn the share of the 10 digits and of the 40
digit-position placements its guesses tested; for dc and sp the normalised entropy (0 to 1) of
the suspects the questions address (the spec names the suspects accused; the answers' spread is
axis 1's), or of their kinds (factual, causal, clarification, told apart by their wording).
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

BUCKETS = ("high", "medium", "low")


@dataclass(frozen=True)
class Homogeneity:
    p_max: float
    mean_pairwise_similarity: float
    effective_rank: float
    exact_repetition_rate: float
    trigram_jaccard: float

    @property
    def bucket(self) -> str:
        return bucket(self.mean_pairwise_similarity)


def bucket(mean_similarity: float) -> str:
    if mean_similarity >= 0.9:
        return "high"
    return "medium" if mean_similarity >= 0.6 else "low"


def p_max(labels: Sequence, weights: Sequence[float] | None = None) -> float:
    """The largest cluster's (weighted) share of the samples."""
    if not labels:
        return 0.0
    weights = [1.0] * len(labels) if weights is None else weights
    shares: defaultdict[Hashable, float] = defaultdict(float)
    for label, weight in zip(labels, weights, strict=True):
        shares[label] += weight
    return max(shares.values()) / sum(weights)


def mean_pairwise_similarity(vectors: np.ndarray) -> float:
    """Mean cosine similarity over distinct pairs of L2-normalised rows (1.0 for one sample)."""
    count = vectors.shape[0]
    if count < 2:
        return 1.0
    similarity = vectors @ vectors.T
    return float((similarity.sum() - np.trace(similarity)) / (count * (count - 1)))


def effective_rank(vectors: np.ndarray) -> float:
    """exp of the entropy of the normalised eigenvalues of the sample-sample similarity matrix."""
    if vectors.shape[0] == 0:
        return 0.0
    eigenvalues = np.clip(np.linalg.eigvalsh(vectors @ vectors.T), 0.0, None)
    if eigenvalues.sum() <= 0:
        return 0.0
    share = eigenvalues / eigenvalues.sum()
    share = share[share > 0]
    return float(np.exp(-(share * np.log(share)).sum()))


def exact_repetition_rate(texts: Sequence[str]) -> float:
    pairs = list(itertools.combinations(texts, 2))
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else 1.0


def _trigrams(text: str) -> set[tuple[str, ...]]:
    words = text.lower().split()
    if len(words) < 3:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def trigram_jaccard(texts: Sequence[str]) -> float:
    """Mean Jaccard similarity of word 3-gram sets over sample pairs (texts under three words
    count as one gram)."""
    grams = [_trigrams(t) for t in texts]
    pairs = list(itertools.combinations(grams, 2))
    if not pairs:
        return 1.0
    return float(np.mean([len(a & b) / len(a | b) if a | b else 1.0 for a, b in pairs]))


def diagnose(
    texts: Sequence[str], vectors: np.ndarray, labels: Sequence, weights: Sequence[float] | None = None
) -> Homogeneity:
    return Homogeneity(
        p_max=p_max(labels, weights),
        mean_pairwise_similarity=mean_pairwise_similarity(vectors),
        effective_rank=effective_rank(vectors),
        exact_repetition_rate=exact_repetition_rate(texts),
        trigram_jaccard=trigram_jaccard(texts),
    )


def prompt_sensitivity(modal_answers: Sequence[Hashable]) -> float:
    """1 − agreement rate of the variants' modal answers over all pairs of variants."""
    pairs = list(itertools.combinations(modal_answers, 2))
    if not pairs:
        return 0.0
    return 1.0 - float(np.mean([a == b for a, b in pairs]))


def simulator_divergence(matched: float, draws: int) -> tuple[float, bool]:
    """(surprise, overlap) of the real answer, `matched` being the share of `draws` imagined
    answers that meant the same."""
    return float(-np.log(max(matched, 0.5 / draws))), matched > 0


QUESTION_KINDS = ("factual", "causal", "clarification")
_CAUSAL = re.compile(r"\b(why|because|caused?|causes|reasons?|due to|leads? to|led to|result of)\b")
_CLARIFYING = re.compile(r"\b(do you mean|mean by|clarify|to be clear|you said|did you say)\b")


def question_kind(question: str) -> str:
    """factual, causal or clarification, by the question's wording."""
    text = question.lower()
    if _CLARIFYING.search(text):
        return "clarification"
    if _CAUSAL.search(text):
        return "causal"
    return "factual"


def normalised_entropy(items: Sequence[Hashable], alphabet: int) -> float:
    """Entropy of the items' empirical distribution over ln(min(alphabet, len(items))), in [0, 1]
    (0 with fewer than two items)."""
    most = min(alphabet, len(items))
    if most < 2:
        return 0.0
    _, counts = np.unique(np.asarray([str(i) for i in items]), return_counts=True)
    shares = counts / counts.sum()
    return float(-(shares * np.log(shares)).sum() / np.log(most))


def task_functional_diversity(
    task: str, questions: Sequence[str], addressed: Sequence[str] = (), suspects: int = 0
) -> dict[str, float]:
    """§4.3 axis 5 over one episode's questions (dc: `addressed`, each question's suspect, of
    `suspects`)."""
    if task == "gn":
        guesses = [q for q in questions if len(q) == 4 and q.isdigit()]
        return {
            "digits_tested": len({d for g in guesses for d in g}) / 10,
            "placements_tested": len({(i, d) for g in guesses for i, d in enumerate(g)}) / 40,
        }
    if task == "dc":
        return {"suspect_entropy": normalised_entropy(addressed, suspects)}
    kinds = [question_kind(q) for q in questions]
    return {"question_kind_entropy": normalised_entropy(kinds, len(QUESTION_KINDS))}
