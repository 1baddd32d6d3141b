"""`sounding eval arbench`: AR-Bench episodes through Inquire's llm domain."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table
from sounding.cli.common import console
from sounding.settings.config import Settings

from sounding_bench.cli.common import write_result
from sounding_bench.cli.eval_choices import Ablation, ArbenchTask, QuestionSelection, Regime, StopRule
from sounding_bench.harness import own_settings, run_settings


def eval_arbench(
    task: ArbenchTask = typer.Option(
        ..., help="the AR-Bench task: detective cases, situation puzzles or guess numbers"
    ),
    data: Path = typer.Option(..., exists=True, dir_okay=False, help="an AR-Bench JSON file of the task"),
    stop_rule: StopRule = typer.Option(
        StopRule.all, help="a stop rule, or 'all': one trajectory per episode with every rule judged on it"
    ),
    regime: Regime = typer.Option(
        Regime.normal, help="normal (T 0.7, top-p 0.95) or collapse (T 0.1, decisive)"
    ),
    question_selection: QuestionSelection = typer.Option(
        QuestionSelection.direct_prompting, help="how the llm domain chooses its questions"
    ),
    ablate: list[Ablation] = typer.Option(
        [], help="switch off a part of the full method (spec §5); repeatable; episode_tau is a calibration's"
    ),
    limit: int = typer.Option(20, min=1, help="the first N episodes"),
    max_turns: int = typer.Option(5, min=1, max=25, help="questions before the answer is forced"),
    samples: int = typer.Option(4, min=2, max=32, help="k: sampled answers per state and prompt variant"),
    answer_tokens: int = typer.Option(0, min=0, help="token budget of an answer (0: the task's)"),
    question_tokens: int = typer.Option(0, min=0, help="token budget of a question list (0: the task's)"),
    seed: int = typer.Option(0, help="seed of every random choice (recorded in the result)"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    address: str = typer.Option(None, help="a running orchestrator; default starts a stack of its own"),
) -> None:
    """Play AR-Bench episodes through Inquire's llm domain, the NPC on the same generator
    backend; accuracy (F1 for sp), questions asked, ECE over visited states and the Spearman
    correlation between stop score and error, per stop rule. Played episodes are kept in
    `<out>.journal.jsonl` until the result is written, so an interrupted run resumes there."""
    from sounding_bench import arbench
    from sounding_bench.journal import JournalMismatch

    if Ablation.episode_tau in ablate:
        raise typer.BadParameter(
            "episode_tau changes how thresholds are calibrated, and this harness uses the stack's: "
            "calibrate them with `sounding calibrate stop_threshold --one-state-per-session` first",
            param_hint="--ablate",
        )
    journal = out.with_name(out.name + ".journal.jsonl")
    spec = arbench.ArbenchRun(
        task.value,
        data,
        stop_rule.value,
        regime.value,
        limit,
        max_turns,
        samples,
        question_selection=question_selection.value,
        ablate=tuple(a.value for a in ablate),
        answer_tokens=answer_tokens,
        question_tokens=question_tokens,
        seed=seed,
        journal=journal,
        address=address,
    )
    # A stack of its own has its own data directory.
    settings = run_settings(address) if address else own_settings(run_settings(), "arbench")
    try:
        result = arbench.run(spec, settings, console)
    except JournalMismatch as error:
        raise typer.BadParameter(str(error), param_hint="--out") from None
    write_result(result, out, settings, seed)
    journal.unlink(missing_ok=True)
    console.print_json(json.dumps({"rules": result["rules"], "homogeneity_mean": result["homogeneity_mean"]}))
    console.print(f"written to {out}")


def eval_arbench_compare(
    runs: list[Path] = typer.Argument(
        ..., exists=True, dir_okay=False, help="`sounding eval arbench` results of one task"
    ),
    reference: str = typer.Option(
        "",
        help="the system the others are compared with, <run>/<rule> with <run> a file's name without "
        ".json (default: the first run's robust_mi_risk)",
    ),
    seed: int = typer.Option(0, help="seed of the bootstrap resamples"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
) -> None:
    """Compare AR-Bench runs on the episodes they share: every run's stop rules against the
    reference, per episode (score, questions, forced), with paired bootstrap 95% intervals
    (`sounding_bench/arbench_compare.py`). Runs of different methods on the same episodes give
    the spec's §6.1 comparisons."""
    from sounding_bench import arbench_compare

    try:
        names = arbench_compare.run_names([str(p) for p in runs])
        result = arbench_compare.compare(
            {name: json.loads(p.read_text()) for name, p in zip(names, runs, strict=True)}, reference, seed
        )
    except arbench_compare.NotComparable as error:
        raise typer.BadParameter(str(error), param_hint="RUNS") from None
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise typer.BadParameter(
            f"not a `sounding eval arbench` result: {error}", param_hint="RUNS"
        ) from None
    write_result({"runs": [str(p) for p in runs], **result}, out, Settings(), seed)
    table = Table(title=f"{result['reference']} minus each system, {result['episodes_paired']} episodes")
    table.add_column("system", overflow="fold")
    for heading in arbench_compare.MEASURES:
        table.add_column(heading)
    for name, found in result["reference_minus"].items():
        table.add_row(name, *(f"{d['difference']:+.3f} {d['interval_95'] or ''}" for d in found.values()))
    console.print(table)
    console.print(f"written to {out}")
