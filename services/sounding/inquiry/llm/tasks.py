"""Task templates of the `llm` inquiry domain (robust-MI spec §2.2.1, §2.3.2, §2.4.3, §2.6):
prompts, answer parsing and question validity filters for detective cases (`dc`), situation
puzzles (`sp`), guessing numbers (`gn`) and any other problem (`generic`).

A prompt is a list of chat messages. The problem is the session's `context`; for `dc` the
suspects are the session's hypotheses (the answer is one of them). The transcript is the list
of (question, answer) turns so far.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sounding.core.clustering import canonical
from sounding.inquiry.domains.bulls_and_cows import (
    CODES_PER_FEEDBACK,
    consistent_secrets,
    feedback_sentence,
    feedback_table,
    parse_feedback,
)

TaskName = Literal["dc", "sp", "gn", "generic"]
TASKS: tuple[TaskName, ...] = ("dc", "sp", "gn", "generic")
# Where a session's states and stop thresholds are kept: its task's name, but a `gn` session
# played by the simulated policy (`inquiry.llm.simulated`) is kept apart from real models' ones.
SIMULATED_GN = "gn_simulated"
CALIBRATION_TASKS: tuple[str, ...] = (*TASKS, SIMULATED_GN)
POLICY_MODELS = ("sidecar", "simulated")
Variant = Literal["base", "skeptical", "alternative"]
VARIANTS: tuple[Variant, ...] = ("base", "skeptical", "alternative")

# §2.4.3: the three prompt variants, applied to the initial and the revision prompt alike.
VARIANT_INSTRUCTIONS: dict[str, str] = {
    "base": "",
    "skeptical": "Assume your current answer might be wrong and look for counterevidence before answering.",
    "alternative": "First think of a plausible alternative explanation, then decide.",
}
# §1.1: the homogeneous (collapse) regime adds this instruction.
COLLAPSE_INSTRUCTION = "Be decisive. Provide one best answer. Do not hedge."

YES_NO_STARTS = (
    "is", "are", "was", "were", "did", "do", "does", "can", "could", "has", "have", "had",
    "will", "would", "should", "may", "might",
)  # fmt: skip
UNPARSED = ""


@dataclass(frozen=True)
class Task:
    name: TaskName
    role: str
    answer_key: str
    answer_format: str
    question_instruction: str
    # Clustering of answers: exact labels for discrete answers, NLI-refined for free text.
    cluster_method: Literal["exact", "embedding", "entailment"]
    answer_tokens: int
    question_tokens: int


TASK_SPECS: dict[str, Task] = {
    "dc": Task(
        "dc",
        "You are a detective solving a murder case. Exactly one of the suspects is the murderer.",
        "suspect",
        '{"suspect": "<full name of one suspect>", "rationale": "<one sentence>"}',
        'Write {m} questions, each to one suspect, as a JSON list: [{{"suspect": "<name>", '
        '"question": "<question>?"}}]',
        "exact",
        128,
        96,
    ),
    "sp": Task(
        "sp",
        "You are solving a situation puzzle. Find the hidden story behind the situation by asking "
        "yes-or-no questions.",
        "explanation",
        '{"explanation": "<your explanation of what really happened>"}',
        "Write {m} yes-or-no questions as a JSON list of strings.",
        "entailment",
        256,
        96,
    ),
    "gn": Task(
        "gn",
        "You are guessing a secret number of 4 distinct digits. After each guess you are told how "
        "many digits are right and in the right position, and how many are right but elsewhere.",
        "guess",
        '{"guess": "<4 distinct digits>"}',
        "Write {m} informative next guesses, each 4 distinct digits, as a JSON list of strings.",
        "exact",
        32,
        48,
    ),
    "generic": Task(
        "generic",
        "You are solving a problem and may ask questions to gather what you need.",
        "answer",
        '{"answer": "<your answer>"}',
        "Write {m} short questions that would help most, as a JSON list of strings.",
        "embedding",
        128,
        96,
    ),
}


@dataclass(frozen=True)
class Problem:
    """What a session knows: the task, its context, the answer choices (dc), and the turns."""

    task: Task
    context: str
    choices: tuple[str, ...] = ()
    collapse: bool = False


# The transcript in a prompt: the latest turns within this many characters, each question and
# answer clipped to TURN_CHARS (a prompt must fit the model's context however long a session runs).
TRANSCRIPT_CHARS = 6000
TURN_CHARS = 1500
TRANSCRIPT_HEADING = "Transcript so far:\n"


def _transcript(turns: Sequence[tuple[str, str]]) -> str:
    if not turns:
        return "No questions asked yet."
    lines: list[str] = []
    size = 0
    for i in range(len(turns), 0, -1):
        q, a = turns[i - 1]
        line = f"Q{i}: {q[:TURN_CHARS]}\nA{i}: {a[:TURN_CHARS]}"
        if lines and size + len(line) > TRANSCRIPT_CHARS:
            lines.append(f"({i} earlier questions left out)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(reversed(lines))


def _system(problem: Problem, variant: Variant = "base") -> str:
    parts = [problem.task.role, VARIANT_INSTRUCTIONS[variant]]
    if problem.collapse:
        parts.append(COLLAPSE_INSTRUCTION)
    return " ".join(p for p in parts if p)


def _situation(problem: Problem, turns: Sequence[tuple[str, str]]) -> str:
    parts = [problem.context.strip()]
    if problem.choices:
        parts.append("Suspects: " + "; ".join(problem.choices) + ".")
    parts.append(TRANSCRIPT_HEADING + _transcript(turns))
    return "\n\n".join(p for p in parts if p)


def initial_prompt(problem: Problem, turns, variant: Variant = "base") -> list[dict[str, str]]:
    """§2.3.2 (1): the current best answer, as JSON."""
    ask = {
        "dc": "Who is the murderer?",
        "sp": "Give your current best explanation.",
        "gn": "Give your next guess.",
        "generic": "Give your current best answer.",
    }[problem.task.name]
    return [
        {"role": "system", "content": _system(problem, variant)},
        {
            "role": "user",
            "content": f"{_situation(problem, turns)}\n\n{ask} Output JSON: {problem.task.answer_format}",
        },
    ]


def revision_prompt(problem: Problem, turns, initial: str, variant: Variant = "base") -> list[dict[str, str]]:
    """§2.3.2 (2): the model's own initial answer, to reconsider; the same JSON schema."""
    return [
        *initial_prompt(problem, turns, variant),
        {"role": "assistant", "content": initial.strip() or "{}"},
        {
            "role": "user",
            "content": "Reconsider your answer. Look for contradictions with the facts and for "
            "alternative hypotheses, then give your final answer in the same JSON format: "
            f"{problem.task.answer_format}",
        },
    ]


def verbalized_prompt(problem: Problem, turns) -> list[dict[str, str]]:
    """§3.3: the best answer with a confidence from 1 to 10."""
    fields = problem.task.answer_format.rstrip("}") + ', "confidence": <1-10>}'
    return [
        {"role": "system", "content": _system(problem)},
        {
            "role": "user",
            "content": f"{_situation(problem, turns)}\n\nGive your best answer and how confident you "
            f"are in it from 1 (a guess) to 10 (certain). Output JSON: {fields}",
        },
    ]


def question_prompt(problem: Problem, turns, count: int) -> list[dict[str, str]]:
    """§2.6.1: candidate next questions, as a JSON list."""
    return [
        {"role": "system", "content": _system(problem)},
        {
            "role": "user",
            "content": f"{_situation(problem, turns)}\n\nDo not repeat earlier questions. "
            + problem.task.question_instruction.format(m=count),
        },
    ]


def simulator_prompt(problem: Problem, turns, question: str) -> list[dict[str, str]]:
    """§2.7.2: the policy model imagines the other side's answer to a candidate question."""
    answer_as = {
        "dc": "Answer in one or two sentences, as the suspect addressed would.",
        "sp": "Answer with exactly one word: Yes, No or Unknown.",
        "gn": "Answer as the feedback: '<b> digits are present in the answer and in the correct "
        "positions, <c> digits are present in the answer but in the different positions'.",
        "generic": "Answer in one or two sentences.",
    }[problem.task.name]
    return [
        {"role": "system", "content": _system(problem)},
        {
            "role": "user",
            "content": f"{_situation(problem, turns)}\n\nImagine the other side of this conversation and "
            f"give a plausible answer to the next question: {question}\n{answer_as}",
        },
    ]


def parse_outcome(problem: Problem, text: str) -> str:
    """A simulated answer in canonical form: gn, the feedback sentence of the (bulls, cows) it
    states; sp, Yes, No or Unknown; otherwise the stripped text (UNPARSED if empty)."""
    if problem.task.name == "gn":
        feedback = bulls_and_cows(text)
        return UNPARSED if feedback is None else feedback_sentence(*feedback)
    if problem.task.name == "sp":
        return yes_no_unknown(text)
    return text.strip()


def yes_no_unknown(text: str) -> str:
    """Yes or No if the text starts with it, else Unknown (a situation puzzle's referee)."""
    lowered = text.strip().lower()
    return next((w.capitalize() for w in ("yes", "no") if lowered.startswith(w)), "Unknown")


def _outermost(text: str, opening: str, closing: str) -> str | None:
    """From the first `opening` to the last `closing` character, or None."""
    start, end = text.find(opening), text.rfind(closing)
    return text[start : end + 1] if 0 <= start < end else None


def _json_value(text: str, key: str) -> str | None:
    """The string (or number) under `key` in the first JSON object of the text, tolerating
    unfinished JSON."""
    candidate = _outermost(text, "{", "}")
    if candidate:
        try:
            value = json.loads(candidate).get(key)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                return str(value)
        except (json.JSONDecodeError, AttributeError, RecursionError):
            pass
    match = re.search(rf'"{key}"\s*:\s*"?([^"\n}}]*)', text)
    return match.group(1).strip() if match else None


def match_choice(text: str, choices: Sequence[str]) -> str:
    """The choice a text names: the full name, else a distinctive name part (longest first),
    else the letter A-E in the choices' order; the earliest mention wins; UNPARSED if none."""
    lowered = text.lower()
    mentions: list[tuple[int, int, int]] = []
    for index, choice in enumerate(choices):
        names = [choice.lower()] + sorted(
            {p for p in re.findall(r"[a-z][a-z'-]+", choice.lower()) if len(p) > 3 and p not in _TITLES},
            key=len,
            reverse=True,
        )
        for name in names:
            position = lowered.find(name)
            if position >= 0:
                mentions.append((position, -len(name), index))
                break
    if mentions:
        return choices[min(mentions)[2]]
    letter = re.fullmatch(r"\s*\(?([A-Ea-e])\)?[.:]?\s*", text)
    if letter and ord(letter.group(1).upper()) - 65 < len(choices):
        return choices[ord(letter.group(1).upper()) - 65]
    return UNPARSED


_TITLES = {"mr.", "mrs.", "ms.", "dr.", "miss", "professor", "prof", "lady", "lord", "the", "detective"}


def repair_guess(text: str, rng: random.Random) -> str:
    """§2.2.1 GN: the first digits of the text, each kept at its first occurrence, topped up
    with random unused digits to four distinct digits."""
    digits: list[str] = []
    for digit in re.findall(r"\d", text):
        if digit not in digits:
            digits.append(digit)
        if len(digits) == 4:
            break
    unused = [d for d in "0123456789" if d not in digits]
    rng.shuffle(unused)
    return "".join(digits + unused[: 4 - len(digits)])


def parse_answer(problem: Problem, text: str, rng: random.Random) -> str:
    """The answer a generation states, canonical for its task (UNPARSED if none is found)."""
    value = _json_value(text, problem.task.answer_key)
    name = problem.task.name
    if name == "dc":
        return match_choice(value if value else text, problem.choices)
    if name == "gn":
        return repair_guess(value if value is not None else text, rng)
    return (value if value is not None else text).strip()


def parse_confidence(text: str) -> float | None:
    """The stated confidence scaled to [0, 1], or None."""
    value = _json_value(text, "confidence")
    match = re.match(r"\s*(\d+(?:\.\d+)?)", value or "")
    if not match:
        return None
    return min(max(float(match.group(1)), 1.0), 10.0) / 10.0


def parse_questions(problem: Problem, text: str, rng: random.Random) -> list[str]:
    """Candidate questions from a JSON list (or, failing that, from the lines of the text),
    after the validity filters of §2.6.2."""
    items: list = []
    candidate = _outermost(text, "[", "]")
    if candidate:
        try:
            parsed = json.loads(candidate)
            items = parsed if isinstance(parsed, list) else []
        except (json.JSONDecodeError, RecursionError):
            items = []
    if not items:
        items = [line.strip(" -*0123456789.)\t\"',") for line in text.splitlines() if line.strip()]
    questions = []
    for item in items:
        question = _question(problem, item, rng)
        if question:
            questions.append(question)
    return questions


def _question(problem: Problem, item, rng: random.Random) -> str:
    name = problem.task.name
    if name == "gn":
        text = str(item.get("guess", "")) if isinstance(item, dict) else str(item)
        digits = re.findall(r"\d", text)
        return text.strip() if len(digits) == 4 == len(set(digits)) == len(text.strip()) else ""
    if name == "dc":
        if isinstance(item, dict):
            suspect = match_choice(str(item.get("suspect", "")), problem.choices)
            question = str(item.get("question", "")).strip()
        else:
            question = str(item).strip()
            named = {match_choice(part, problem.choices) for part in re.split(r"[,;:]", question)}
            named.discard(UNPARSED)
            suspect = named.pop() if len(named) == 1 else UNPARSED
        if not suspect or not question.endswith("?"):
            return ""
        return f"{suspect}: {question}"
    text = (item.get("question", "") if isinstance(item, dict) else str(item)).strip()
    if not text.endswith("?") or len(text) < 8:
        return ""
    if name == "sp" and canonical(text).split(" ", 1)[0] not in YES_NO_STARTS:
        return ""
    return text


def addressed_suspect(question: str, choices: Sequence[str]) -> str:
    """The suspect a dc question is addressed to (`<suspect>: <question>`)."""
    head = question.split(":", 1)[0]
    return head if head in choices else match_choice(question, choices)


def unasked(questions: Sequence[str], turns: Sequence[tuple[str, str]]) -> list[str]:
    """The candidates without duplicates (by canonical text) and not asked before."""
    seen = {canonical(q) for q, _ in turns}
    kept = []
    for question in questions:
        key = canonical(question)
        if key not in seen:
            seen.add(key)
            kept.append(question)
    return kept


def bulls_and_cows(feedback: str) -> tuple[int, int] | None:
    """(bulls, cows) from GN feedback in any form the bulls_and_cows domain reads (AR-Bench's
    wording, "xAyB", "b bulls c cows", ...), or None."""
    try:
        return parse_feedback(feedback)
    except ValueError:
        return None


def consistent_guesses(turns: Sequence[tuple[str, str]]) -> list[str]:
    """The secrets consistent with every turn whose guess and feedback parse (every secret not yet
    guessed, if the feedback contradicts itself)."""
    table = feedback_table()
    history, guessed = [], set()
    for guess, feedback in turns:
        parsed = bulls_and_cows(feedback)
        if guess in table.index:
            guessed.add(guess)
            if parsed is not None:
                history.append((table.index[guess], parsed[0] * CODES_PER_FEEDBACK + parsed[1]))
    found = [table.strings[i] for i in consistent_secrets(history)]
    return found or [s for s in table.strings if s not in guessed]


def char_f1(predicted: str, truth: str) -> float:
    """Character-level F1 (bag of non-space characters, case-folded), as AR-Bench scores SP."""
    p = Counter(c for c in predicted.lower() if not c.isspace())
    t = Counter(c for c in truth.lower() if not c.isspace())
    overlap = sum((p & t).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(p.values()), overlap / sum(t.values())
    return 2 * precision * recall / (precision + recall)
