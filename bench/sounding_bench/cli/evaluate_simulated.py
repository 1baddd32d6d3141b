"""`sounding eval robust-mi-simulated`: every stop rule on SIMULATED guessing-number episodes."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sounding.cli.common import console

from sounding_bench.cli.common import write_result
from sounding_bench.cli.eval_choices import Ablation
from sounding_bench.harness import own_settings, run_settings


def eval_robust_mi_simulated(
    secrets: int = typer.Option(1000, min=1, help="test episodes per regime"),
    calibration: int = typer.Option(500, min=10, help="calibration episodes per regime"),
    seed: int = typer.Option(0, help="shuffles the 5,040 secrets before they are split"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    ablate: list[Ablation] = typer.Option(
        [], help="switch off a part of the full method (spec §5); repeatable"
    ),
) -> None:
    """Play guessing-number episodes with the SIMULATED policy model in both regimes, calibrate
    every stop rule's threshold on the calibration episodes and judge every rule on the test
    episodes (protocol: `sounding_bench/robust_mi_simulated.py`), on a stack of its own whose data
    directory starts empty (so no earlier run's states enter the calibration)."""
    from sounding_bench import robust_mi_simulated

    settings = own_settings(run_settings(), "robust-mi-simulated")
    spec = robust_mi_simulated.RobustMiSimulatedRun(
        calibration, secrets, seed, ablate=tuple(a.value for a in ablate)
    )
    result = robust_mi_simulated.run(spec, settings, console)
    write_result(result, out, settings, seed)
    summary = {
        f"{regime}, {method}": {
            rule: m["rules"][rule] for rule in ("robust_mi_risk", "mi_only", "self_consistency")
        }
        for regime, v in result["regimes"].items()
        for method, m in v["methods"].items()
    }
    console.print_json(json.dumps({"summary": summary, "criteria": result["criteria_6_1"]}, default=str))
    console.print(f"written to {out}")
