import random

import pytest
from sounding.inquiry.llm import tasks

pytestmark = pytest.mark.unit

SUSPECTS = ("Mr. Theodore Blake", "Dr. Margaret Langley", "Mr. Oliver Grant")


def problem(task: str, choices=()) -> tasks.Problem:
    return tasks.Problem(tasks.TASK_SPECS[task], "A case.", tuple(choices))


def test_match_choice_by_full_name_distinctive_part_or_letter():
    assert tasks.match_choice("It was Dr. Margaret Langley.", SUSPECTS) == "Dr. Margaret Langley"
    assert tasks.match_choice("I think Grant did it, not Blake", SUSPECTS) == "Mr. Oliver Grant"
    assert tasks.match_choice("B", SUSPECTS) == "Dr. Margaret Langley"
    assert tasks.match_choice("the butler", SUSPECTS) == tasks.UNPARSED


def test_parse_answer_reads_json_even_unfinished():
    dc = problem("dc", SUSPECTS)
    rng = random.Random(0)
    assert (
        tasks.parse_answer(dc, '{"suspect": "Oliver Grant", "rationale": "he lied"}', rng)
        == "Mr. Oliver Grant"
    )
    assert (
        tasks.parse_answer(dc, '{"suspect": "Margaret Langley", "rationale": "she', rng)
        == "Dr. Margaret Langley"
    )
    sp = problem("sp")
    assert tasks.parse_answer(sp, '{"explanation": "He was teleported."}', rng) == "He was teleported."


def test_gn_guesses_are_repaired_to_four_distinct_digits():
    rng = random.Random(0)
    assert tasks.repair_guess("1123", rng)[:3] == "123"
    repaired = tasks.repair_guess("guess 77", rng)
    assert len(repaired) == 4 == len(set(repaired)) and repaired[0] == "7"
    assert tasks.parse_answer(problem("gn"), '{"guess": "0435"}', rng) == "0435"


def test_question_filters():
    rng = random.Random(0)
    sp = problem("sp")
    parsed = tasks.parse_questions(
        sp, '["Was he alone?", "Tell me more.", "Did it rain?", "Was he alone?"]', rng
    )
    assert parsed == ["Was he alone?", "Did it rain?", "Was he alone?"]
    assert tasks.unasked(parsed, [("Did it rain?", "Yes")]) == ["Was he alone?"]
    gn = problem("gn")
    assert tasks.parse_questions(gn, '["1234", "1123", "98765", "5670"]', rng) == ["1234", "5670"]
    dc = problem("dc", SUSPECTS)
    text = '[{"suspect": "Grant", "question": "Where were you?"}, {"suspect": "Nobody", "question": "Why?"}]'
    assert tasks.parse_questions(dc, text, rng) == ["Mr. Oliver Grant: Where were you?"]
    assert tasks.addressed_suspect("Mr. Oliver Grant: Where were you?", SUSPECTS) == "Mr. Oliver Grant"


def test_bulls_and_cows_feedback_in_ar_bench_wording_and_short_forms():
    worded = (
        "2 digits are present in the answer and in the correct positions \n"
        "1 digits are present in the answer but in the different positions"
    )
    assert tasks.bulls_and_cows(worded) == (2, 1)
    assert tasks.bulls_and_cows("4A0B") == (4, 0)
    assert tasks.bulls_and_cows("1 bull and 2 cows") == (1, 2)
    assert tasks.bulls_and_cows("no idea") is None


def test_char_f1():
    assert tasks.char_f1("abc", "abc") == 1.0
    assert tasks.char_f1("abc", "xyz") == 0.0
    assert tasks.char_f1("aab", "ab") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))


def test_prompts_carry_variant_regime_and_transcript():
    dc = tasks.Problem(tasks.TASK_SPECS["dc"], "A case.", SUSPECTS, collapse=True)
    turns = [("Mr. Oliver Grant: Where were you?", "In the garden.")]
    skeptical = tasks.initial_prompt(dc, turns, "skeptical")
    assert tasks.VARIANT_INSTRUCTIONS["skeptical"] in skeptical[0]["content"]
    assert tasks.COLLAPSE_INSTRUCTION in skeptical[0]["content"]
    assert "In the garden." in skeptical[1]["content"] and "Dr. Margaret Langley" in skeptical[1]["content"]
    revision = tasks.revision_prompt(dc, turns, '{"suspect": "Grant"}', "skeptical")
    assert revision[2] == {"role": "assistant", "content": '{"suspect": "Grant"}'}
    assert "Reconsider" in revision[3]["content"]
