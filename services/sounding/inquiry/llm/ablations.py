"""The robust-MI spec's ablations of the full method (§5) that a session applies, named in the
`llm` domain's `ablate` parameter (comma-separated):

- `risk_tau`: every rule's documented default threshold instead of the calibrated one;
- `robust`: robust MI from one prompt variant without diversity steering (naive MI);
- `weights`: diversity steering without importance weights;
- `entailment`: sp answers clustered by embedding instead of entailment;
- `dpp`: VoI's slate is the first candidates listed instead of a DPP selection;
- `voi`: a random valid candidate is asked instead of the one of largest VoI;
- `mi_to_sc`, `mi_to_setsize`: VoI measures 1 − p_max, or the conformal set's size, instead of
  robust MI (the stop rule is the session's policy: self_consistency or knowno_set_size).

`dpp`, `voi`, `mi_to_sc` and `mi_to_setsize` change VoI and need `question_selection=voi`;
`entailment` needs a task that clusters by entailment (sp). A session whose states are measured
differently (robust, weights, entailment) is calibrated apart from the full method: its states
and thresholds are kept under `calibration_task`, the task's name followed by `+<ablation>`.
Where the spec leaves a choice: `risk_tau`'s fixed threshold is the documented default, not one
tuned on a development split.

`episode_tau` (one state per episode in the calibration) belongs to Calibrate
(`one_state_per_session`), not to a session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.assessment import SamplingSettings
from sounding.inquiry.llm.tasks import Task
from sounding.runtime import errors

SESSION_ABLATIONS = ("risk_tau", "robust", "weights", "entailment", "dpp", "voi", "mi_to_sc", "mi_to_setsize")
VOI_ABLATIONS = ("dpp", "voi", "mi_to_sc", "mi_to_setsize")
# Ablations that change how a state is measured; the others change the thresholds read or the
# questions asked (as question_selection does, which the calibration does not separate either).
MEASURING_ABLATIONS = ("robust", "weights", "entailment")


def named(parameters: Mapping[str, str]) -> list[str]:
    """The ablations the domain parameters name, sorted (InvalidArgument for an unknown one)."""
    ablate = {a.strip() for a in parameters.get("ablate", "").split(",") if a.strip()}
    unknown = sorted(ablate - set(SESSION_ABLATIONS))
    if unknown:
        raise errors.InvalidArgument(
            f"ablate names {', '.join(u[:32] for u in unknown[:3])}; a session ablates any of "
            f"{', '.join(SESSION_ABLATIONS)}",
            field="start.domain_parameters.ablate",
        )
    return sorted(ablate)


def applicable(ablate: Sequence[str], task: str, question_selection: str) -> list[str]:
    """The ablations that change a session of this task and question selection."""
    return [
        a
        for a in ablate
        if (a not in VOI_ABLATIONS or question_selection == "voi")
        and (a != "entailment" or tasks.TASK_SPECS[task].cluster_method == "entailment")
    ]


def validate(ablate: Sequence[str], task: str, question_selection: str) -> None:
    """InvalidArgument for an ablation that would change nothing in this session, or two that
    swap VoI's measure at once."""
    idle = sorted(set(ablate) - set(applicable(ablate, task, question_selection)))
    if idle:
        raise errors.InvalidArgument(
            f"ablating {', '.join(idle)} changes nothing here: {', '.join(VOI_ABLATIONS)} need "
            "question_selection voi, entailment a task clustered by entailment (sp)",
            field="start.domain_parameters.ablate",
        )
    if {"mi_to_sc", "mi_to_setsize"} <= set(ablate):
        raise errors.InvalidArgument(
            "mi_to_sc and mi_to_setsize both swap VoI's measure: ablate one",
            field="start.domain_parameters.ablate",
        )


def calibration_task(task: str, policy_model: str, ablate: Sequence[str] = ()) -> str:
    """Where a session's states and thresholds are kept: the task (a gn session of the simulated
    policy under `gn_simulated`), then `+<ablation>` for each state-changing ablation."""
    base = tasks.SIMULATED_GN if policy_model == "simulated" else task
    return base + "".join(f"+{a}" for a in sorted(ablate) if a in MEASURING_ABLATIONS)


def is_calibration_task(name: str) -> bool:
    base, *ablated = name.split("+")
    return (
        base in tasks.CALIBRATION_TASKS
        and all(a in MEASURING_ABLATIONS for a in ablated)
        and ablated == sorted(set(ablated))
    )


def sampling(settings: SamplingSettings, ablate: Sequence[str]) -> SamplingSettings:
    diversity = "off" if "robust" in ablate else "unweighted" if "weights" in ablate else settings.diversity
    measure = settings.measure
    if "mi_to_setsize" in ablate:
        measure = "set_size"
    elif "mi_to_sc" in ablate:
        measure = "self_consistency"
    return replace(
        settings,
        diversity=diversity,
        variants=1 if "robust" in ablate else settings.variants,
        slate="top" if "dpp" in ablate else settings.slate,
        choice="random" if "voi" in ablate else settings.choice,
        measure=measure,
    )


def task(spec: Task, ablate: Sequence[str]) -> Task:
    ablated = "entailment" in ablate and spec.cluster_method == "entailment"
    return replace(spec, cluster_method="embedding") if ablated else spec
