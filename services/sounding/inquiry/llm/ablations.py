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

`episode_tau` (one state per episode in the calibration) belongs to Calibrate, not to a session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from sounding import errors
from sounding.inquiry.llm.assessment import SamplingSettings
from sounding.inquiry.llm.tasks import Task

SESSION_ABLATIONS = ("risk_tau", "robust", "weights", "entailment", "dpp", "voi", "mi_to_sc", "mi_to_setsize")


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
    return replace(spec, cluster_method="embedding") if "entailment" in ablate else spec
