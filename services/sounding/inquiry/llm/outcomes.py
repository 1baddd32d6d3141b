"""Calibration states from an llm session and its ground truth (robust-MI spec §2.5.2): for every
assessed state, the stop rules' scores, whether that state's answer was wrong, and the
nonconformity 1 − p̂(true answer) of its plain samples.

Wrong means: dc, the suspect differs from the true one; gn, the guess differs; sp, the
character-level F1 against the true story is below `SP_CORRECT_F1`; generic, the canonical
strings differ.
"""

from __future__ import annotations

from sounding.core.clustering import canonical
from sounding.inquiry.llm import ablations, tasks
from sounding.store.learning import InquiryState

# An SP explanation counts as right from this character-level F1 on (AR-Bench scores SP by the
# F1 itself; the calibration needs a right/wrong cut).
SP_CORRECT_F1 = 0.5


def is_correct(task: str, answer: str, truth: str, choices=()) -> bool:
    if answer == tasks.UNPARSED:
        return False
    if task == "dc":
        return answer == (tasks.match_choice(truth, choices) or truth)
    if task == "sp":
        return tasks.char_f1(answer, truth) >= SP_CORRECT_F1
    return canonical(answer) == canonical(truth)


def state_records(session_id: str, setup: dict, state: dict, truth: str) -> list[InquiryState]:
    records = []
    for assessed in state["assessments"]:
        plain = assessed["pairs"][0]
        right = [is_correct(setup["task"], a, truth, setup["choices"]) for a in plain["initial"]]
        probability = sum(right) / len(right) if right else 0.0
        records.append(
            InquiryState(
                session_id=session_id,
                task=ablations.calibration_task(
                    setup["task"], setup.get("policy_model", "sidecar"), setup.get("ablate", ())
                ),
                regime=setup["regime"],
                bucket=assessed["bucket"],
                turn=assessed["turn"],
                scores=assessed["scores"],
                error=not is_correct(setup["task"], assessed["answer"], truth, setup["choices"]),
                nonconformity=1.0 - probability,
                stated_confidence=assessed["verbalized_confidence"],
            )
        )
    return records
