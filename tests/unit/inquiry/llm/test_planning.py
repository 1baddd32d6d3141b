import asyncio
import json
import math
import random
from collections import Counter

import numpy as np
import pytest
from sounding.core.hypothesis_planning import entropy
from sounding.inquiry import engine
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import planning, selection, tasks
from sounding.inquiry.llm.assessment import SamplingSettings
from sounding.inquiry.llm.domain import Threshold
from sounding.inquiry.protocol import AnswerEvent, AskEvent, HypothesisIn, Policy, Start
from sounding.runtime import errors

from .fake_backend import FakeBackend

pytestmark = pytest.mark.unit

GN = tasks.Problem(tasks.TASK_SPECS["gn"], "")
SP = tasks.Problem(tasks.TASK_SPECS["sp"], "A man asks for water and is handed a gun. He thanks the barman.")
HICCUPS, THIRST = "He had hiccups and the fright cured them.", "He was thirsty and robbed the bar."
ASK_HICCUPS, ASK_THIRST, ASK_NOTHING = "Did he have hiccups?", "Was he thirsty?", "Was it raining?"


def test_gn_hypotheses_are_the_consistent_secrets_and_a_guesss_outcomes_its_exact_feedback():
    turns = [("0123", bc.feedback_sentence(0, 1))]
    hypotheses = asyncio.run(
        planning.hypothesis_set(FakeBackend(lambda *_: ""), GN, turns, SamplingSettings(), random.Random(0))
    )
    problem, labels = planning.gn_problem(hypotheses, ["4567", "1089"])
    consistent = tasks.consistent_guesses(turns)
    assert hypotheses.members == consistent and hypotheses.entropy() == pytest.approx(
        math.log(len(consistent))
    )
    assert len(problem.prior) == len(consistent) and problem.prior == pytest.approx(1 / len(consistent))
    for row, guess in zip(problem.outcomes, ["4567", "1089"], strict=True):
        assert Counter(labels[o] for o in row) == Counter(
            bc.feedback_sentence(*bc.score(guess, secret)) for secret in consistent
        )


def test_eig_on_gn_is_the_entropy_of_each_guesss_feedback_partition():
    turns = [("0123", bc.feedback_sentence(0, 1))]
    listed = json.dumps(["4567", "0124", "9999"])  # the last is no valid guess and is dropped
    backend = FakeBackend(lambda messages, _: listed)
    chosen = asyncio.run(
        planning.plan_question("eig", backend, GN, turns, SamplingSettings(), random.Random(0), cost=0.1)
    )
    consistent = tasks.consistent_guesses(turns)

    def partition_entropy(guess):
        counts = Counter(bc.score(guess, s) for s in consistent)
        return entropy(np.array(list(counts.values())) / len(consistent))

    assert [c.question for c in chosen.scored] == sorted(
        ["4567", "0124"], key=partition_entropy, reverse=True
    )
    for candidate in chosen.scored:
        assert candidate.reduction == pytest.approx(partition_entropy(candidate.question))
        assert candidate.value == pytest.approx(candidate.reduction - 0.1)
        assert sum(candidate.outcomes.values()) == pytest.approx(1.0)
    assert chosen.question == chosen.scored[0].question and chosen.rationale.startswith("eig")


def sp_backend(entailment):
    """Explanations: hiccups three times in four, thirst once. `entailment(story, statement)`."""
    stories = iter([HICCUPS, THIRST, HICCUPS, HICCUPS] * 10)

    def reply(messages, _):
        if "JSON list" in messages[-1]["content"]:
            return json.dumps([ASK_NOTHING, ASK_HICCUPS, ASK_THIRST])
        return json.dumps({"explanation": next(stories)})

    backend = FakeBackend(reply)

    async def entail(pairs):
        return np.array([[entailment(story, statement), 0.0, 0.0] for story, statement in pairs])

    backend.entail = entail
    return backend


def implied(story, statement):
    """Hiccups implies yes to the hiccups question and no to the thirst question, thirst the
    reverse; nothing is entailed strongly enough about the rain (unknown)."""
    if ASK_NOTHING in statement:
        return 0.4 if statement.endswith("yes.") else 0.1
    answer = "yes" if (story == HICCUPS) == (ASK_HICCUPS in statement) else "no"
    return 0.9 if statement.endswith(f"{answer}.") else 0.05


def test_sp_hypotheses_are_clustered_explanations_and_outcomes_the_most_entailed_statement():
    backend = sp_backend(implied)
    hypotheses = asyncio.run(planning.hypothesis_set(backend, SP, [], SamplingSettings(), random.Random(0)))
    assert hypotheses.members == [HICCUPS, THIRST] and hypotheses.most_probable() == (HICCUPS, 0.75)
    assert hypotheses.entropy() == pytest.approx(entropy([0.75, 0.25]))
    problem, labels = asyncio.run(planning.sp_problem(backend, hypotheses, [ASK_NOTHING, ASK_HICCUPS]))
    assert labels == ["Yes", "No", "Unknown"]
    assert problem.prior == pytest.approx([6 / 8, 2 / 8])  # hiccups, thirst: eight samples
    assert problem.outcomes.tolist() == [[2, 2], [0, 1]]  # rain: both unknown (0.4 < 0.5)
    assert problem.noise == planning.SP_NOISE


def test_eig_on_sp_asks_the_question_that_tells_the_stories_apart():
    backend = sp_backend(implied)
    chosen = asyncio.run(
        planning.plan_question("eig", backend, SP, [], SamplingSettings(), random.Random(0), cost=0.0)
    )
    assert chosen.question in (ASK_HICCUPS, ASK_THIRST)
    by_question = {c.question: c for c in chosen.scored}
    assert by_question[ASK_NOTHING].reduction == pytest.approx(0.0)
    # Through the channel: p(o | z) = 0.9 + 0.1/3 for the implied answer, 0.1/3 for the others.
    likely, other = 1 - planning.SP_NOISE + planning.SP_NOISE / 3, planning.SP_NOISE / 3
    prior = np.array([0.75, 0.25])
    joint = np.array([[likely, other], [other, likely], [other, other]]) * prior
    expected = entropy(prior) - sum(row.sum() * entropy(row / row.sum()) for row in joint)
    assert by_question[ASK_HICCUPS].reduction == pytest.approx(expected)
    assert by_question[ASK_HICCUPS].outcomes["Yes"] == pytest.approx(joint[0].sum())


def test_uot_scores_each_question_by_its_best_two_question_plan():
    backend = sp_backend(implied)
    chosen = asyncio.run(
        planning.plan_question("uot", backend, SP, [], SamplingSettings(), random.Random(0), cost=0.0)
    )
    by_question = {c.question: c.reduction for c in chosen.scored}
    # The rain question learns nothing first, then the best follow-up: its EIG alone.
    eig = asyncio.run(
        planning.plan_question("eig", sp_backend(implied), SP, [], SamplingSettings(), random.Random(0), 0.0)
    )
    best_single = max(c.reduction for c in eig.scored)
    assert by_question[ASK_NOTHING] == pytest.approx(best_single)
    assert by_question[ASK_HICCUPS] > best_single and chosen.question != ASK_NOTHING
    assert chosen.rationale.startswith("uot: two-step gain")


def test_naive_prompting_asks_for_one_question_and_asks_what_it_gets():
    backend = FakeBackend(lambda messages, _: json.dumps([ASK_THIRST, ASK_HICCUPS]))
    chosen = asyncio.run(
        selection.naive_prompting(backend, SP, [(ASK_THIRST, "No")], SamplingSettings(), random.Random(0))
    )
    assert backend.calls[0] == tasks.question_prompt(SP, [(ASK_THIRST, "No")], 1)
    assert chosen.question == ASK_THIRST and chosen.scored == []  # a repeat, as the model wrote it


def play(start, secret, thresholds=None):
    """The session's asks until it answers, the client telling the truth about `secret`."""
    session = engine.start(start, thresholds)
    asks, events = [], asyncio.run(engine.advance(session))
    while not isinstance(events[-1], AnswerEvent):
        ask = events[-1]
        assert isinstance(ask, AskEvent)
        asks.append(ask)
        feedback = bc.feedback_sentence(*bc.score(ask.chosen.question, secret))
        events = asyncio.run(engine.observe(session, ask.chosen.question_id, feedback))
    return asks, events[-1]


@pytest.mark.parametrize(("selection_name", "asked"), [("naive_prompting", 3), ("direct_prompting", 0)])
def test_naive_prompting_asks_until_the_turn_cap_whatever_the_stop_rule_says(selection_name, asked):
    # A threshold every state meets: mi_only answers at the first state.
    always = {"mi_only": {"": Threshold(math.inf)}}
    start = Start(
        "llm",
        Policy(question_selection=selection_name, stop_rule="mi_only", max_turns=3, seed=0),
        {"task": "gn", "policy_model": "simulated", "samples": "2"},
    )
    asks, answer = play(start, "5813", always)
    assert len(asks) == asked and answer.answer != "5813"
    assert all(a.rationale.startswith("naive prompting") for a in asks)
    assert answer.forced == (selection_name == "naive_prompting")


def test_eig_plays_simulated_gn_to_the_secret_with_every_ask_scored():
    start = Start(
        "llm",
        Policy(question_selection="eig", stop_rule="robust_mi_risk", max_turns=12, seed=3),
        {"task": "gn", "policy_model": "simulated", "samples": "2", "run_to_max_turns": "true"},
    )
    asks, answer = play(start, "5813")
    assert answer.answer == "5813"
    for ask in asks:
        assert ask.rationale.startswith("eig")
        scores = [ask.chosen.expected_information_gain] + [
            q.expected_information_gain for q in ask.runners_up
        ]
        assert scores == sorted(scores, reverse=True) and len(ask.runners_up) >= 1


@pytest.mark.parametrize("method", planning.PLANNING_METHODS)
def test_planning_methods_are_refused_where_no_hypothesis_set_is_defined(method):
    suspects = (HypothesisIn("a", "Alice Archer", 0.5), HypothesisIn("b", "Bruno Baker", 0.5))
    start = Start(
        "llm",
        Policy(question_selection=method, stop_rule="robust_mi_risk"),
        {"task": "dc"},
        hypotheses=suspects,
        context="A case.",
    )
    with pytest.raises(errors.InvalidArgument) as refused:
        engine.start(start)
    assert refused.value.field == "start.policy.question_selection"


def test_an_unnamed_question_selection_is_the_domains_default():
    llm = engine.start(Start("llm", Policy(), {"task": "gn"}))
    assert llm.policy.question_selection == "direct_prompting" and llm.policy.stop_rule == "robust_mi_risk"
    assert engine.start(Start("bulls_and_cows", Policy())).policy.question_selection == "eig"
    explicit = engine.start(Start("llm", Policy(question_selection="eig"), {"task": "gn"}))
    assert explicit.policy.question_selection == "eig"


def simulated_gn(selection_name: str, stop_rule: str, seed: int = 3, signals: str = "rule") -> Start:
    return Start(
        "llm",
        Policy(question_selection=selection_name, stop_rule=stop_rule, max_turns=12, seed=seed),
        {"task": "gn", "policy_model": "simulated", "samples": "2", "signals": signals},
    )


@pytest.mark.parametrize("seed", range(4))
def test_hypothesis_entropy_answers_with_the_last_consistent_secret_never_before(seed):
    """§3.8's stop: the consistent secrets' entropy below 0.5 nats (one left), MAP answered."""
    secret = "5813"
    asks, answer = play(simulated_gn("eig", "hypothesis_entropy", seed), secret)
    assert answer.answer == secret and not answer.forced
    turns = [(a.chosen.question, bc.feedback_sentence(*bc.score(a.chosen.question, secret))) for a in asks]
    solved_by_guessing = asks and asks[-1].chosen.question == secret
    if not solved_by_guessing:  # the rule answered: one secret was left and it was named
        assert tasks.consistent_guesses(turns) == [secret]
    for index in range(len(asks)):  # it asked on while more than one was consistent
        assert len(tasks.consistent_guesses(turns[:index])) > 1


def test_hypothesis_entropy_is_read_by_the_planning_selections_only():
    session = engine.start(simulated_gn("eig", "robust_mi_risk", signals="all"))
    belief = asyncio.run(engine.advance(session))[0]
    signal = next(s for s in belief.stop_signals if s.rule == "hypothesis_entropy")
    assert signal.score == pytest.approx(math.log(5040)) and not signal.answers and signal.answer
    assert signal.threshold == 0.5 and signal.calibration_version == 0
    voi = asyncio.run(engine.advance(engine.start(simulated_gn("voi", "robust_mi_risk", signals="all"))))[0]
    assert "hypothesis_entropy" not in {s.rule for s in voi.stop_signals}
    with pytest.raises(errors.InvalidArgument, match="hypothesis set of eig or uot") as refused:
        engine.start(simulated_gn("direct_prompting", "hypothesis_entropy"))
    assert refused.value.field == "start.policy.stop_rule"
