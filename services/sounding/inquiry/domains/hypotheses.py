"""The `hypotheses` inquiry domain: a finite set of hypotheses with a prior, and candidate
questions whose outcome under each hypothesis the client supplies (20-Questions style).

Answers may be noisy (`domain_parameters["noise"]` = ε: the answer differs from the implied one
with probability ε) and the truth may lie outside the set (`domain_parameters["unknown_prior"]`:
the initial unknown mass). A hypothesis that leaves a question's outcome open ("unknown" or no
entry) answers every outcome with equal probability.

Policies: `eig` (cost-adjusted expected information gain plus the exploration bonus, active-
learning spec §3.2–§3.3); `fixed_order` (the questions in the order given: the naive baseline);
`fixed_order_informative` (the order given, skipping questions whose answer the belief already
determines: a stronger baseline).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sounding.core.information import (
    bayes_update,
    cost_adjusted_score,
    entropy_bits,
    expected_information_gain,
    exploration_bonus,
    likelihood_matrix,
    max_entropy_bits,
)
from sounding.inquiry.domains import parameters as parameters_
from sounding.runtime import errors

HYPOTHESES_POLICIES = ("eig", "fixed_order", "fixed_order_informative")
OPEN_OUTCOMES = {"", "unknown"}
# Distinct outcomes of one question: its likelihood table is outcomes x hypotheses.
MAX_OUTCOMES = 64


class HypothesisSet:
    name = "hypotheses"

    def __init__(self, setup: dict, state: dict):
        self._setup = setup
        self.ids: list[str] = setup["ids"]
        self.noise: float = setup["noise"]
        self.questions: list[dict] = setup["questions"]
        self._codes = {q["id"]: np.asarray(q["codes"], dtype=np.int32) for q in self.questions}
        self.probabilities = np.asarray(state["probabilities"], dtype=float)
        self.unknown_mass: float = state["unknown_mass"]
        self.asked: list[str] = state["asked"]

    @classmethod
    def from_state(cls, setup: dict, state: dict) -> HypothesisSet:
        return cls(setup, state)

    @classmethod
    def from_request(
        cls, hypotheses: Sequence, questions: Sequence, parameters: dict | None = None
    ) -> HypothesisSet:
        parameters = parameters or {}
        if not hypotheses:
            raise errors.InvalidArgument("the hypotheses domain needs hypotheses", field="start.hypotheses")
        ids = [h.id for h in hypotheses]
        index = {}
        for i, h in enumerate(hypotheses):
            if not h.id or h.id in index:
                raise errors.InvalidArgument(
                    f"hypotheses[{i}].id must be non-empty and unique", field=f"start.hypotheses[{i}].id"
                )
            if not h.prior >= 0:
                raise errors.InvalidArgument(
                    f"hypotheses[{i}].prior must be >= 0", field=f"start.hypotheses[{i}].prior"
                )
            index[h.id] = i
        noise = parameters_.number(parameters, "noise", 0.0, 0.0, 0.5)
        unknown = parameters_.number(parameters, "unknown_prior", 0.0, 0.0, 0.999)
        priors = np.array([h.prior for h in hypotheses], dtype=float)
        if priors.max() == 0:
            priors = np.full(len(ids), 1.0 / len(ids))
        else:
            priors = priors / priors.max()  # finite priors, however large, sum without overflow
            priors = priors / priors.sum()
        if not questions:
            raise errors.InvalidArgument("the hypotheses domain needs questions", field="start.questions")
        encoded, seen = [], set()
        for q_index, q in enumerate(questions):
            where = f"start.questions[{q_index}]"
            if not q.id or q.id in seen:
                raise errors.InvalidArgument(f"{where}.id must be non-empty and unique", field=f"{where}.id")
            if not q.cost >= 0:
                raise errors.InvalidArgument(f"{where}.cost must be >= 0", field=f"{where}.cost")
            unknown_ids = sorted(k for k in q.outcomes if k not in index)
            if unknown_ids:
                raise errors.InvalidArgument(
                    f"{where}.outcomes names unknown hypotheses {unknown_ids[:3]}", field=f"{where}.outcomes"
                )
            seen.add(q.id)
            alphabet = sorted({v for v in q.outcomes.values() if v.lower() not in OPEN_OUTCOMES})
            if not alphabet:
                raise errors.InvalidArgument(
                    f"{where} has no determined outcome for any hypothesis", field=f"{where}.outcomes"
                )
            if len(alphabet) > MAX_OUTCOMES:
                raise errors.InvalidArgument(
                    f"{where} has {len(alphabet)} distinct outcomes; at most {MAX_OUTCOMES}",
                    field=f"{where}.outcomes",
                )
            code_of = {outcome: code for code, outcome in enumerate(alphabet)}
            codes = [-1] * len(ids)
            for hypothesis_id, outcome in q.outcomes.items():
                if outcome.lower() not in OPEN_OUTCOMES:
                    codes[index[hypothesis_id]] = code_of[outcome]
            encoded.append(
                {"id": q.id, "text": q.text or q.id, "cost": q.cost, "alphabet": alphabet, "codes": codes}
            )
        return cls(
            {
                "ids": ids,
                "descriptions": [h.description for h in hypotheses],
                "noise": noise,
                "questions": encoded,
            },
            {"probabilities": list(priors * (1.0 - unknown)), "unknown_mass": unknown, "asked": []},
        )

    def setup(self) -> dict:
        return self._setup

    def state(self) -> dict:
        return {
            "probabilities": self.probabilities.tolist(),
            "unknown_mass": self.unknown_mass,
            "asked": list(self.asked),
        }

    def belief(self):
        from sounding.inquiry.protocol import BeliefView, ScoredHypothesis

        order = np.argsort(-self.probabilities, kind="stable")[:5]
        top = [
            ScoredHypothesis(self.ids[i], self._setup["descriptions"][i], float(self.probabilities[i]))
            for i in order
        ]
        return BeliefView(
            entropy_bits(self.probabilities, self.unknown_mass),
            max_entropy_bits(len(self.ids), with_unknown=self.unknown_mass > 0),
            top,
            self.unknown_mass,
            float(self.probabilities.max(initial=0.0)),
        )

    def choose(self, policy, turn: int):
        from sounding.inquiry.protocol import Choice, ScoredQuestion

        open_questions = [q for q in self.questions if q["id"] not in self.asked]
        if not open_questions or self.unknown_mass >= 1.0:
            return None
        asked_words = [set(q["text"].lower().split()) for q in self.questions if q["id"] in self.asked]
        scored = []
        for position, q in enumerate(open_questions):
            gain = expected_information_gain(
                self.probabilities,
                self._codes[q["id"]],
                self.unknown_mass,
                np.full(len(q["alphabet"]), 1.0 / len(q["alphabet"])),
                self.noise,
            ).expected_gain
            adjusted = cost_adjusted_score(gain, q["cost"], policy.cost_sensitivity)
            bonus = 0.0
            if policy.exploration_weight > 0:
                words = set(q["text"].lower().split())
                similarity = max((_jaccard(words, w) for w in asked_words), default=0.0)
                similar = sum(_jaccard(words, w) > 0.5 for w in asked_words)
                bonus = exploration_bonus(
                    policy.exploration_weight, 1.0 - similarity, self.noise or 0.5, 1.0, similar
                )
            scored.append((position, ScoredQuestion(q["id"], q["text"], gain, adjusted, q["cost"], bonus)))
        if max(s.expected_information_gain for _, s in scored) <= 1e-12:
            return None
        if policy.question_selection == "fixed_order":
            ranked = [s for _, s in scored]
        elif policy.question_selection == "fixed_order_informative":
            ranked = [s for _, s in scored]
            useful = [s for s in ranked if s.expected_information_gain > 1e-12]
            ranked = useful + [s for s in ranked if s.expected_information_gain <= 1e-12]
        else:
            ranked = [
                s
                for _, s in sorted(
                    scored, key=lambda ps: (-(ps[1].cost_adjusted_score + ps[1].exploration_bonus), ps[0])
                )
            ]
        best = ranked[0]
        rationale = (
            f"expected gain {best.expected_information_gain:.3f} bits at cost {best.cost:g} "
            f"({policy.question_selection})"
        )
        return Choice(best, rationale, ranked[1:4])

    def observe(self, question_id: str, question: str, answer: str) -> None:
        q = next(q for q in self.questions if q["id"] == question_id)
        if answer not in q["alphabet"]:
            raise errors.InvalidArgument(
                f"answer {answer[:64]!r} is not one of {q['alphabet'][:8]}", field="observation.answer"
            )
        results = len(q["alphabet"])
        likelihood = likelihood_matrix(self._codes[question_id], results, self.noise)[
            q["alphabet"].index(answer)
        ]
        posterior = bayes_update(self.probabilities, self.unknown_mass, likelihood, 1.0 / results)
        self.probabilities, self.unknown_mass = posterior.probabilities, posterior.unknown_mass
        self.asked.append(question_id)

    async def think(self, policy, turn: int, backend) -> None:
        """Nothing to precompute: the belief and the choice are computed on demand."""

    def finished(self) -> str:
        return (
            "no_viable_queries" if self.unknown_mass >= 1.0 - 1e-12 and self.probabilities.sum() == 0 else ""
        )

    def answer(self) -> tuple[str, float]:
        if self.probabilities.sum() <= 0:
            return "", 0.0
        best = int(np.argmax(self.probabilities))
        return self.ids[best], float(self.probabilities[best])


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0
