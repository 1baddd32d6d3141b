"""The `corpus` inquiry domain: verify a claim against a collection, where the questions are
retrieval queries the server runs itself (active-learning spec §6).

The client names the collection (`domain_parameters["collection"]`) and the claim (`context`);
the hypotheses are the verdicts SUPPORT, CONTRADICT and NOT_ENOUGH_INFO (given with priors, or
left out for a uniform prior). Every step:

1. candidate queries from the claim (`core.query_candidates`, §4.2; the corpus graph's
   neighbours of the claim's entities feed the entity probes; with `llm_queries` = n > 0 the
   sidecar's generator also writes n queries when the session starts), the executed ones and
   near-duplicates left out;
2. each scored from probes that execute nothing (`core.query_scoring`): the outcome model's
   chance that it reaches unread text, its expected information gain over the verdicts, its
   cost, cost-adjusted score and exploration bonus;
3. the policy picks one: `eig` (best adjusted score plus bonus), `eig_softmax` (sampled in
   proportion to exp(score / temperature), seeded), `generated_order` (the naive baseline: the
   candidates in the order generated) or `keywords` (the second baseline: the claim, then its
   key phrases one per query);
4. the server runs it (the retrieval pipeline's arms and fusion, ranking `probe_depth` chunks),
   reads the sentences of those among the first `hits_per_query` it had not read that are about
   the claim (embedding cosine to the claim at least `relevance_floor`; the rest of the ranking
   stays unread, a probe for later candidates' scores), asks the NLI model whether each entails
   or contradicts the claim and updates the belief (`core.claim_evidence`); the outcome model
   learns whether the query reached such text.

The belief's argmax is the answer, NOT_ENOUGH_INFO when it ties (`core.claim_evidence.ranked`).
Stop rules are the engine's (§3.4), and two more for `eig` and `eig_softmax`:
`target_out_of_reach` once a query has run (a claim is looked up at least once), when the chance
that the candidates now available, run in turn by reach, highest first, bring the belief to the
target confidence within the session's remaining queries (`core.claim_evidence.target_chance`)
is below `min_target_chance` (the look-ahead goes at most `LOOKAHEAD_QUERIES` ahead, and a
session with more queries to come than that does not stop on it); `no_viable_queries` when no
candidate is left (every policy) or none is worth its cost: none has a value of information,
expected gain − λ·cost, above zero (§9.3). Every Evidence event carries the target chance read
before its query ran.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from sounding.core import claim_evidence as evidence
from sounding.core import query_candidates, query_scoring
from sounding.core.information import bayes_update, entropy_bits, max_entropy_bits
from sounding.core.query_scoring import Costs
from sounding.core.sentences import split_sentences
from sounding.inquiry.domains import corpus_ranking, corpus_setup
from sounding.inquiry.protocol import (
    BeliefView,
    Choice,
    CorpusBackend,
    EvidenceEvent,
    EvidenceHit,
    EvidenceSentence,
    Policy,
    ScoredHypothesis,
    SearchHit,
)
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits
from sounding.store.corpus_inquiry import ExecutedQuery

CORPUS_POLICIES = ("eig", "eig_softmax", "generated_order", "keywords")
# A candidate at least this alike (cosine) to a query run or an earlier candidate is dropped.
NEAR_DUPLICATE = 0.97
# Sentence pairs per Entail call.
ENTAIL_BATCH = 256
# Sentences per Evidence event (the strongest for or against the claim).
SHOWN_SENTENCES = 5
# The target chance looks this many queries ahead at most (or to the session's last query).
LOOKAHEAD_QUERIES = 10


class CorpusInquiry:
    name = "corpus"

    def __init__(self, setup: dict, state: dict):
        self._setup = setup
        self.claim: str = setup["claim"]
        self.collection: str = setup["collection"]
        self.probabilities = np.asarray(state["probabilities"], float)
        self.found: list[float] = state["found"]
        self.read: list[str] = state["read"]
        self.fetched: list[str] = state.get("fetched", [])
        self.seen_words: list[str] = state["seen_words"]
        self.neighbours: dict[str, list[str]] | None = state["neighbours"]
        self.executed: list[dict] = state["executed"]
        self.scored: dict | None = state["scored"]
        self.written: list[str] = state.get("written", [])
        # Why the last `choose` returned None ('' when it chose): read by the engine.
        self.unchosen = ""

    @classmethod
    def from_state(cls, setup: dict, state: dict) -> CorpusInquiry:
        return cls(setup, state)

    @classmethod
    def from_request(
        cls,
        policy: Policy,
        context: str,
        hypotheses: Sequence,
        parameters: Mapping[str, str],
        limits: InquiryLimits = InquiryLimits(),
    ) -> CorpusInquiry:
        collection, settings = corpus_setup.settings(context, parameters, limits)
        probabilities = corpus_setup.priors(hypotheses)
        setup = {
            "collection": collection,
            "selection": policy.question_selection,
            "seed": policy.seed if policy.seed is not None else random.randrange(2**31),
            **settings,
        }
        state = {
            "probabilities": probabilities.tolist(),
            "found": [0.0, 0.0],
            "read": [],
            "fetched": [],
            "seen_words": [],
            "neighbours": None,
            "executed": [],
            "scored": None,
            "written": [],
        }
        return cls(setup, state)

    def setup(self) -> dict[str, Any]:
        return self._setup

    def state(self) -> dict[str, Any]:
        return {
            "probabilities": self.probabilities.tolist(),
            "found": list(self.found),
            "read": list(self.read),
            "fetched": list(self.fetched),
            "seen_words": list(self.seen_words),
            "neighbours": self.neighbours,
            "executed": list(self.executed),
            "scored": self.scored,
            "written": list(self.written),
        }

    # -- candidates and their scores -------------------------------------------------------

    def _candidates(self) -> list[query_candidates.Candidate]:
        if self._setup["selection"] == "keywords":
            made = query_candidates.keyword_queries(self.claim)
        else:
            made = query_candidates.candidates(
                self.claim,
                self.neighbours or {},
                [" ".join(self.seen_words)],
                self._setup["per_strategy"],
                self.written,
            )
        run = {_normal(e["query"]) for e in self.executed}
        return [c for c in made if _normal(c.text) not in run]

    async def think(self, policy: Policy, turn: int, backend: CorpusBackend) -> None:
        """Score the turn's candidates (once per turn: a resumed session repeats nothing)."""
        if self.scored is not None and self.scored["turn"] == turn and "target_chance" in self.scored:
            return
        if self.neighbours is None:
            await backend.check(self.collection, self._setup["arms"])
            entities = query_candidates.aspects(self.claim)[:3]
            self.neighbours = await backend.related(self.collection, entities, self._setup["per_strategy"])
            count = self._setup["llm_queries"]
            if count and self._setup["selection"] != "keywords":
                written = await backend.generate(query_candidates.llm_prompt(self.claim, count), 24 * count)
                self.written = query_candidates.llm_queries(written, count)
        found = self._candidates()
        if not found:
            self.scored = {"turn": turn, "candidates": [], "target_chance": 0.0, "chance_covers": True}
            return
        run = [e["query"] for e in self.executed]
        vectors = await backend.embed([self.claim, *run, *(c.text for c in found)])
        claim, queries, candidates = vectors[0], vectors[1 : 1 + len(run)], vectors[1 + len(run) :]
        found, candidates = _distinct(found, candidates, queries)
        read, unread = await self._read_and_unread(claim, backend)
        models = await backend.outcome_models(self.collection)
        aspects = [e["aspect"] for e in self.executed]
        scored = []
        costs = Costs(
            models.search_ms,
            models.nli_ms_per_sentence,
            models.sentences_per_query,
            self._setup["cost_scale_ms"],
        )
        for index, (candidate, vector) in enumerate(zip(found, candidates, strict=True)):
            scores = query_scoring.score(
                candidate=candidate,
                vector=vector,
                claim=claim,
                queries_run=queries,
                chunks_read=read,
                chunks_unread=unread,
                aspects_run=aspects,
                belief=self.probabilities,
                table=models.sensor_for(candidate.strategy).given_found(*self.found),
                reach_model=models.reach,
                costs=costs,
                cost_sensitivity=policy.cost_sensitivity,
                exploration_weight=policy.exploration_weight,
            )
            scored.append(
                {
                    "id": f"q{turn + 1}.{index}",
                    "query": candidate.text,
                    "strategy": candidate.strategy,
                    "aspect": candidate.aspect,
                    **asdict(scores),
                }
            )
        steps = max(min(policy.max_turns - len(self.executed), len(scored)), 0)
        reaches = sorted((c["reach"] for c in scored), reverse=True)[:LOOKAHEAD_QUERIES]
        chance = evidence.target_chance(
            self.probabilities, self.found, models.sensor, reaches[:steps], policy.target_confidence
        )
        self.scored = {
            "turn": turn,
            "candidates": scored,
            "target_chance": chance,
            "chance_covers": steps <= LOOKAHEAD_QUERIES,
        }

    async def _read_and_unread(
        self, claim: np.ndarray, backend: CorpusBackend
    ) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of the chunks read, and of those fetched, unread and about the claim."""
        vectors = await backend.chunk_vectors(self.collection, [*self.read, *self.fetched])
        floor = self._setup["relevance_floor"]

        def stacked(ids: Sequence[str], about: bool) -> np.ndarray:
            rows = [
                vectors[c] for c in ids if c in vectors and (not about or float(vectors[c] @ claim) >= floor)
            ]
            return np.stack(rows) if rows else np.zeros((0, len(claim)))

        return stacked(self.read, False), stacked(self.fetched, True)

    def choose(self, policy: Policy, turn: int) -> Choice | None:
        self.unchosen = ""
        candidates = list(self.scored["candidates"]) if self.scored else []
        if not candidates:
            return None
        selection = self._setup["selection"]
        # Sessions started before the rule existed run without it, and it waits for the first
        # query: a claim is looked up at least once.
        floor = self._setup.get("min_target_chance", 0.0)
        in_reach = not self.executed or corpus_ranking.target_in_reach(self.scored or {}, floor)
        temperature = self._setup["temperature"]
        ranked = corpus_ranking.rank(
            candidates, selection, policy.cost_sensitivity, temperature, self._rng(turn), in_reach
        )
        if isinstance(ranked, str):
            self.unchosen = ranked
            return None
        best = ranked[0]
        rationale = (
            f"{best['strategy']} query on '{best['aspect']}': reaches new text with p={best['reach']:.2f}, "
            f"expected gain {best['expected_gain']:.3f} bits at cost {best['cost']:.3f} ({selection})"
        )
        return Choice(corpus_ranking.scored(best), rationale, [corpus_ranking.scored(c) for c in ranked[1:4]])

    def _rng(self, turn: int) -> random.Random:
        return random.Random(f"{self._setup['seed']}:{turn}")

    # -- running a query ---------------------------------------------------------------------

    async def investigate(
        self, session_id: str, turn: int, question_id: str, backend: CorpusBackend
    ) -> EvidenceEvent:
        """Run the pending query, read what is new, update the belief and let the outcome model
        learn whether the query reached new text."""
        scored = self.scored or {"candidates": []}
        chosen = next((c for c in scored["candidates"] if c["id"] == question_id), None)
        if chosen is None:
            raise errors.FailedPrecondition(f"question {question_id!r} is not among this turn's candidates")
        started = time.perf_counter()
        count = self._setup["hits_per_query"]
        ranked = await backend.search(
            self.collection,
            chosen["query"],
            max(count, self._setup.get("probe_depth", corpus_setup.DEFAULT_PROBE_DEPTH)),
            self._setup["arms"],
        )
        search_ms = (time.perf_counter() - started) * 1000
        hits = ranked[:count]
        read = set(self.read)
        new = [h for h in hits if h.chunk_id not in read]
        relevant = await self._about_the_claim(new, backend)
        sentences = [(h, s) for h in relevant for s in _sentences(h.title, h.text)]
        started = time.perf_counter()
        pairs = [(s, self.claim) for _, s in sentences]
        batches = [
            await backend.entail(pairs[i : i + ENTAIL_BATCH]) for i in range(0, len(pairs), ENTAIL_BATCH)
        ]
        scores = np.concatenate(batches) if batches else np.zeros((0, 3))
        nli_ms = (time.perf_counter() - started) * 1000
        before = entropy_bits(self.probabilities)
        found_before = list(self.found)
        reached = bool(relevant)
        thresholds = evidence.Thresholds(
            self._setup["entailing_threshold"], self._setup["contradicting_threshold"]
        )
        outcome = evidence.outcome(scores[:, 0], scores[:, 2], thresholds) if reached else None
        if outcome is not None:
            models = await backend.outcome_models(self.collection)
            table = models.sensor_for(chosen["strategy"]).given_found(*self.found)
            posterior = bayes_update(self.probabilities, 0.0, evidence.likelihood(outcome, table), 0.0)
            self.probabilities = posterior.probabilities
            self.found = [
                evidence.found_strength(self.found[0], outcome, evidence.ENTAILING),
                evidence.found_strength(self.found[1], outcome, evidence.CONTRADICTING),
            ]
        gain = before - entropy_bits(self.probabilities)
        self.read += [h.chunk_id for h in new]
        now_read = set(self.read)
        self.fetched = list(
            dict.fromkeys(
                c for c in [*self.fetched, *(h.chunk_id for h in ranked[count:])] if c not in now_read
            )
        )
        self.seen_words = sorted(
            set(self.seen_words) | {w for _, s in sentences for w in query_candidates.content_words(s)}
        )
        record = {
            "question_id": question_id,
            "query": chosen["query"],
            "strategy": chosen["strategy"],
            "aspect": chosen["aspect"],
            "predicted_reach": chosen["reach"],
            "reached": reached,
            "predicted_gain": chosen["expected_gain"],
            "actual_gain": gain,
            "outcome": [] if outcome is None else outcome.tolist(),
        }
        self.executed.append(record)
        await backend.record_query(
            ExecutedQuery(
                session_id=session_id,
                collection=self.collection,
                turn=turn,
                strategy=chosen["strategy"],
                features=chosen["features"],
                feature_set=query_scoring.FEATURE_SET,
                predicted_reach=chosen["reach"],
                reached=reached,
                predicted_gain=chosen["expected_gain"],
                actual_gain=gain,
                predicted_cost_ms=chosen["cost_ms"],
                cost_ms=search_ms + nli_ms,
                outcome=record["outcome"],
                found_before=found_before,
                search_ms=search_ms,
                nli_ms=nli_ms,
                nli_pairs=len(sentences),
            )
        )
        strongest = sorted(range(len(sentences)), key=lambda i: -max(scores[i, 0], scores[i, 2]))
        return EvidenceEvent(
            session_id=session_id,
            turn=turn,
            question_id=question_id,
            query=chosen["query"],
            strategy=chosen["strategy"],
            hits=[EvidenceHit(h.document_id, h.chunk_id, h.score, h.chunk_id not in read) for h in hits],
            sentences=[
                EvidenceSentence(
                    sentences[i][0].document_id,
                    sentences[i][1],
                    float(scores[i, 0]),
                    float(scores[i, 2]),
                )
                for i in strongest[:SHOWN_SENTENCES]
            ],
            sentences_read=len(sentences),
            outcome=evidence.OUTCOMES[int(np.argmax(outcome))] if outcome is not None else "",
            strongest_entailment=float(scores[:, 0].max(initial=0.0)),
            strongest_contradiction=float(scores[:, 2].max(initial=0.0)),
            predicted_reach=chosen["reach"],
            reached=reached,
            predicted_gain=chosen["expected_gain"],
            actual_gain=gain,
            latency_ms=search_ms + nli_ms,
            target_chance=scored["target_chance"],
        )

    async def _about_the_claim(self, hits: list[SearchHit], backend: CorpusBackend) -> list[SearchHit]:
        """The hits whose chunk is at least `relevance_floor` close to the claim (cosine)."""
        if not hits:
            return []
        claim = (await backend.embed([self.claim]))[0]
        vectors = await backend.chunk_vectors(self.collection, [h.chunk_id for h in hits])
        floor = self._setup["relevance_floor"]
        return [h for h in hits if h.chunk_id in vectors and float(vectors[h.chunk_id] @ claim) >= floor]

    def observe(self, question_id: str, question: str, answer: str) -> None:
        raise errors.InvalidArgument(
            "the corpus domain answers its own questions: send no observations", field="observation"
        )

    # -- belief and answer -------------------------------------------------------------------

    def belief(self) -> BeliefView:
        order = evidence.ranked(self.probabilities)
        return BeliefView(
            entropy_bits(self.probabilities),
            max_entropy_bits(len(evidence.VERDICTS)),
            [ScoredHypothesis(evidence.VERDICTS[i], "", float(self.probabilities[i])) for i in order],
            0.0,
            float(self.probabilities.max()),
        )

    def finished(self) -> str:
        return ""

    def answer(self) -> tuple[str, float]:
        best = evidence.ranked(self.probabilities)[0]
        return evidence.VERDICTS[best], float(self.probabilities[best])


def _distinct(
    found: list[query_candidates.Candidate], vectors: np.ndarray, run: np.ndarray
) -> tuple[list[query_candidates.Candidate], np.ndarray]:
    """The candidates without near-duplicates (cosine at least `NEAR_DUPLICATE` to a query run
    or to an earlier candidate), and their vectors."""
    kept: list[int] = []
    for i, vector in enumerate(vectors):
        earlier = np.concatenate([run, vectors[kept]]) if kept else run
        if not len(earlier) or float((earlier @ vector).max()) < NEAR_DUPLICATE:
            kept.append(i)
    return [found[i] for i in kept], vectors[kept]


def _sentences(title: str, text: str) -> list[str]:
    """What a chunk says, sentence by sentence: its title (a finding, in abstracts) first."""
    return ([title.strip()] if title.strip() else []) + split_sentences(text)


def _normal(text: str) -> str:
    return " ".join(text.lower().split())
