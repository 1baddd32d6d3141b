"""`sounding eval arbench-compare`: paired comparisons of `sounding eval arbench` runs on the
episodes they share (robust-MI spec §6.1; issue 21, item 4).

A system is one run's stop rule, named `<run>/<rule>` (`<run>` the result file's name without
`.json`). Every system of every run is compared with the reference system (by default the first
run's `robust_mi_risk`): per episode both sides' AR-Bench score (accuracy, or F1 for sp),
questions asked and forced answer; differences reference minus system, with paired percentile
bootstrap 95% intervals over the episodes all runs share (none from fewer than two). Runs must
be of one task and one data file (episode ids are positions in it); their regimes and settings
are recorded beside the comparison. So a `voi` run's robust_mi_risk can be set against a
`cip_full` run's cip_lite in the collapse regime (§6.1 criterion 1), and against an `--ablate
robust` run (criterion 4's robust against naive MI). The premature-answer rate of criterion 2
needs the ground truth of every state, which only the simulated harness has
(`sounding_bench.robust_mi_simulated`).

Each run's per-episode outcomes are its `per_episode` record; a result written before that
record existed is judged again from its trajectories (gn and dc only: an sp trajectory keeps a
clipped hidden story, so F1 against it is not the F1 the run scored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from sounding_bench import arbench
from sounding_bench.metrics import paired_difference

REFERENCE_RULE = "robust_mi_risk"
MEASURES = ("score", "questions", "forced")


class NotComparable(ValueError):
    """Runs that cannot be paired: a different task, no shared episode, an unknown reference."""


def outcomes_of(result: Mapping) -> dict[str, dict[str, dict]]:
    """{rule: {episode id: outcome}} of one run (see the module docstring for older results)."""
    recorded = result.get("per_episode")
    if recorded is None:
        if result["task"] == "sp":
            raise NotComparable(
                "this sp result predates per-episode scores and its trajectories keep clipped "
                "stories: run it again to compare it"
            )
        played = [{**t, "_truth": t["truth"]} for t in result["trajectories"]]
        episodes = [{"id": t["id"], "choices": []} for t in played]
        recorded = arbench.per_episode(result["task"], played, episodes, list(result["rules"]))
    by_rule = {rule: {o["id"]: o for o in found} for rule, found in recorded.items()}
    if any(len(by_id) < len(recorded[rule]) for rule, by_id in by_rule.items()):
        raise NotComparable("a run records one episode twice")
    return by_rule


def _episode_order(episode_id: str) -> tuple:
    return (0, int(episode_id), "") if episode_id.isdigit() else (1, 0, episode_id)


def compare(runs: Mapping[str, Mapping], reference: str = "", seed: int = 0) -> dict:
    """`runs`: {run name: `sounding eval arbench` result}, the first being the default
    reference's run. Raises NotComparable."""
    if not runs:
        raise NotComparable("no run to compare")
    tasks = {name: r["task"] for name, r in runs.items()}
    if len(set(tasks.values())) > 1:
        raise NotComparable(f"the runs are of different tasks: {tasks}")
    data = {name: r.get("data", "") for name, r in runs.items()}
    if len(set(data.values())) > 1:
        raise NotComparable(f"the runs played different data files (episode ids are positions): {data}")
    systems = {
        f"{name}/{rule}": found
        for name, result in runs.items()
        for rule, found in outcomes_of(result).items()
    }
    reference = reference or f"{next(iter(runs))}/{REFERENCE_RULE}"
    if reference not in systems:
        raise NotComparable(f"no system {reference!r}; the runs have {sorted(systems)}")
    if not all(systems.values()):
        raise NotComparable(f"no episode with states in {sorted(n for n, f in systems.items() if not f)}")
    shared = sorted(set.intersection(*(set(found) for found in systems.values())), key=_episode_order)
    if not shared:
        raise NotComparable("the runs share no episode")

    def column(system: str, measure: str) -> np.ndarray:
        return np.asarray([float(systems[system][i][measure]) for i in shared])

    return {
        "task": next(iter(tasks.values())),
        "data": next(iter(data.values())),
        "runs": {
            name: {"regime": r.get("regime"), "settings": r.get("settings", {})} for name, r in runs.items()
        },
        "reference": reference,
        "episodes_paired": len(shared),
        "episodes_left_out": {name: len(found) - len(shared) for name, found in systems.items()},
        "systems": {
            name: {measure: round(float(column(name, measure).mean()), 4) for measure in MEASURES}
            for name in systems
        },
        "reference_minus": {
            name: {
                measure: paired_difference(column(reference, measure), column(name, measure), seed)
                for measure in MEASURES
            }
            for name in systems
            if name != reference
        },
        "episode_ids": shared,
    }


def run_names(paths: Sequence[str]) -> list[str]:
    """Each run's name: its file's stem (two runs of one stem cannot be told apart)."""
    names = [Path(p).name.removesuffix(".json") for p in paths]
    if len(set(names)) < len(names):
        raise NotComparable(f"two runs share a file name: {names}")
    return names
