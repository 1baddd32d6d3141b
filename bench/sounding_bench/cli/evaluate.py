"""`sounding eval`: measurements whose JSON results go to bench/results/ (bench/README.md)."""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import replace
from pathlib import Path

import typer
from sounding.cli.common import console

from sounding_bench.cli.common import write_result
from sounding_bench.cli.eval_choices import (
    BullsAndCowsPolicy,
    InquiryTask,
    LongQueries,
    ToolConfig,
)
from sounding_bench.cli.evaluate_arbench import eval_arbench, eval_arbench_compare
from sounding_bench.cli.evaluate_encoder import eval_encoder
from sounding_bench.cli.evaluate_flood import eval_flood
from sounding_bench.cli.evaluate_generation import eval_generation
from sounding_bench.cli.evaluate_nli import eval_nli
from sounding_bench.cli.evaluate_observe import eval_observe
from sounding_bench.cli.evaluate_replicas import eval_replicas
from sounding_bench.cli.evaluate_simulated import eval_robust_mi_simulated
from sounding_bench.cli.evaluate_throughput import eval_throughput
from sounding_bench.harness import own_settings, run_settings

eval_app = typer.Typer(help="Measure Sounding (results as JSON, for bench/results/).")
eval_app.command("arbench")(eval_arbench)
eval_app.command("arbench-compare")(eval_arbench_compare)
eval_app.command("encoder")(eval_encoder)
eval_app.command("flood")(eval_flood)
eval_app.command("generation")(eval_generation)
eval_app.command("nli")(eval_nli)
eval_app.command("observe")(eval_observe)
eval_app.command("replicas")(eval_replicas)
eval_app.command("robust-mi-simulated")(eval_robust_mi_simulated)
eval_app.command("throughput")(eval_throughput)


@eval_app.callback()
def _prepare() -> None:
    """A harness that started a stack stops it on SIGTERM too, not only on Ctrl-C; the commit
    the run starts at is what its result's provenance names."""
    from sounding_bench.harness import note_start

    note_start()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@eval_app.command("retrieval")
def eval_retrieval(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    split: str = typer.Option("test", help="the split whose queries are measured"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    address: str = typer.Option(None, help="a running orchestrator; default starts a stack"),
    fresh: bool = typer.Option(False, help="re-ingest and re-encode even if cached"),
    train_split: str = typer.Option(
        None, help="adaptive mode: learn from these queries' outcomes first (e.g. train)"
    ),
    train_limit: int = typer.Option(None, help="adaptive mode: only the first N train queries"),
    test_limit: int = typer.Option(None, help="adaptive mode: only the first N test queries"),
    seeds: list[int] = typer.Option(
        [0], "--seed", help="adaptive mode: the selector's seed; repeat the option to run once per seed"
    ),
    background_load: float = typer.Option(
        0.0, min=0.0, max=0.95, help="keep one core busy this share of the time while the queries run"
    ),
    long_queries: LongQueries = typer.Option(
        LongQueries.fail,
        help="queries over the service's query limit: stop before ingesting, cut them, or leave them out",
    ),
    learn_split: str = typer.Option(
        None,
        help="learned ranking: replay this split's outcomes (e.g. train), fit the query adapter, "
        "and measure dense_learned and fused_learned too",
    ),
) -> None:
    """nDCG@10, recall@100 and latency of dense, lexical and fused through the service, beside
    in-process references (bm25s, MiniLM brute force, their RRF, LanceDB hybrid) and ingest rates.

    With --train-split: every arm, all arms fused, and adaptive selection that learns through
    Observe over the train queries and keeps learning on the test queries; the regret curve
    goes to a PNG beside the JSON."""
    settings = run_settings(address)
    if len(set(seeds)) < len(seeds):
        raise typer.BadParameter("each seed once", param_hint="--seed")
    if train_split:
        from sounding_bench import adaptive

        spec = adaptive.AdaptiveRun(data, train_split, split, train_limit=train_limit, test_limit=test_limit)
        if len(seeds) > 1:
            result, plot = adaptive.run_seeds(spec, seeds, settings, console)
            summary = result["over_seeds"]
        else:
            result, plot = adaptive.run(replace(spec, seed=seeds[0]), settings, console)
            summary = {"systems": result["systems"], "comparisons": result["comparisons"]}
        write_result(result, out, settings, seed=seeds[0] if len(seeds) == 1 else None, plot=plot)
        console.print_json(json.dumps(summary))
        console.print(f"written to {out} and {out.with_suffix('.png')}")
        return
    from sounding_bench import retrieval
    from sounding_bench.journal import JournalMismatch

    journal = out.with_name(out.name + ".journal.jsonl")
    spec = retrieval.RetrievalRun(
        data,
        split,
        address=address,
        fresh=fresh,
        background_load=background_load,
        long_queries=long_queries.value,
        journal=journal,
        learn_split=learn_split,
    )
    try:
        result = retrieval.run(spec, settings, console)
    except JournalMismatch as error:
        raise typer.BadParameter(str(error), param_hint="--out") from None
    write_result(result, out, settings)
    journal.unlink(missing_ok=True)
    console.print_json(json.dumps(result["systems"]))
    console.print(f"written to {out}")


@eval_app.command("tools")
def eval_tools(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="the BFCL directory"),
    out: Path = typer.Option(..., help="where to write the JSON result (the PNG goes beside it)"),
    seed: int = typer.Option(0, help="seeds the train/test split and the fallback uses"),
    test_share: float = typer.Option(0.3, min=0.05, max=0.95, help="share of requests held out for test"),
    fallback_share: float = typer.Option(
        0.2, min=0.0, max=1.0, help="share of train turns whose agent used the fallback tool instead"
    ),
    config: list[ToolConfig] = typer.Option(
        list(ToolConfig),
        help="learning configurations: the free tier only, with the teacher, with trusted uses",
    ),
    limit: int = typer.Option(None, help="only the first N requests of each kind (a quick run)"),
) -> None:
    """Tool routing on BFCL: description-only centroids, BM25 and LanceDB hybrid over the tool
    descriptions, and the learning router after a train stream observed through Observe (top-1,
    top-5, MRR on the test set), the share of irrelevant requests it declines, and intake."""
    from sounding_bench import tools

    settings = run_settings()
    spec = tools.ToolsRun(
        data,
        seed=seed,
        test_share=test_share,
        fallback_share=fallback_share,
        configs=tuple(c.value for c in config),
        limit=limit,
    )
    result, plot = tools.run(spec, settings, console)
    write_result(result, out, settings, seed=seed, plot=plot)
    console.print_json(json.dumps({"systems": result["systems"], "comparisons": result["comparisons"]}))
    console.print(f"written to {out} and {out.with_suffix('.png')}")


@eval_app.command("calibration")
def eval_calibration(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    train_split: str = typer.Option("train", help="queries whose outcomes are observed and fitted"),
    split: str = typer.Option("test", help="queries the calibration is judged on"),
    out: Path = typer.Option(..., help="where to write the JSON result (the PNG goes beside it)"),
    k: int = typer.Option(10, min=1, max=100, help="the top k whose recall is stated and judged"),
    train_limit: int = typer.Option(None, help="only the first N train queries"),
    test_limit: int = typer.Option(None, help="only the first N test queries"),
) -> None:
    """Honesty of the stated miss rate and recall before and after Calibrate(MISS_RATE) (ECE of
    stated recall@k, AUROC of the miss rate), and the expansion loop's effect on recall@100 and
    nDCG@10."""
    from sounding_bench import calibration

    settings = run_settings()
    spec = calibration.CalibrationRun(
        data, train_split, split, k=k, train_limit=train_limit, test_limit=test_limit
    )
    result, plot = calibration.run(spec, settings, console)
    write_result(result, out, settings, plot=plot)
    console.print_json(json.dumps({"passes": result["passes"], "loop_effect": result["loop_effect"]}))
    console.print(f"written to {out} and {out.with_suffix('.png')}")


@eval_app.command("fuzz")
def eval_fuzz(
    requests: int = typer.Option(10_000, min=16, help="generated calls to send"),
    seed: int = typer.Option(0, help="seed of every random choice (recorded in the result)"),
    concurrency: int = typer.Option(4, min=1, max=64, help="calls in flight at once"),
    health_p99_ms: float = typer.Option(100.0, help="health checks' p99 latency must stay below this"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
) -> None:
    """Generated requests for every RPC of SoundingService, CorpusService and the sidecar, on a
    stack of its own (a fresh data directory): every call must end with a canonical code other
    than UNKNOWN and INTERNAL, no process may die, health must keep answering (exit status 1
    otherwise)."""
    from sounding_bench import fuzz

    settings = own_settings(run_settings(), "fuzz")
    result = fuzz.run(fuzz.FuzzRun(requests, seed=seed, concurrency=concurrency), settings, console)
    write_result(result, out, settings, seed)
    console.print_json(json.dumps({k: result[k] for k in ("requests", "codes", "health", "alive")}))
    console.print(f"{len(result['forbidden'])} calls ended UNKNOWN or INTERNAL; written to {out}")
    health = result["health"]
    if (
        result["forbidden"]
        or not all(result["alive"].values())
        or health["not_serving"]
        or not health["p99_ms"] < health_p99_ms
    ):
        raise typer.Exit(1)


@eval_app.command("load")
def eval_load(
    out: Path = typer.Option(..., help="where to write the JSON result"),
    duration: float = typer.Option(300.0, min=10.0, help="seconds of traffic"),
    retrieve_streams: int = typer.Option(32, min=1, max=256, help="concurrent Retrieve streams"),
    inquiry_sessions: int = typer.Option(4, min=0, max=64, help="concurrent bulls-and-cows sessions"),
    hyde_every: int = typer.Option(20, min=0, help="one Retrieve in this many also asks for HyDE (0: never)"),
    kills: bool = typer.Option(
        False, help="SIGKILL the sidecar, a strategy worker, the orchestrator in turn"
    ),
    data: Path = typer.Option(
        None, exists=True, file_okay=False, help="a BEIR dataset: its corpus and queries"
    ),
    corpus_limit: int = typer.Option(1000, min=1, help="documents of the corpus to ingest first"),
    seed: int = typer.Option(0, help="seed of every random choice (recorded in the result)"),
) -> None:
    """Retrieve, Observe, Inquire and ingest traffic at once on a supervised stack of its own (a
    fresh data directory) for `duration` seconds, memory sampled; with --kills, the three
    processes are killed in turn at a quarter, half and three quarters of the run. Afterwards
    every acknowledged observation, document and session must be there."""
    from sounding_bench import load

    settings = own_settings(run_settings(), "load")
    spec = load.LoadRun(
        duration,
        retrieve_streams=retrieve_streams,
        inquiry_sessions=inquiry_sessions,
        hyde_every=hyde_every,
        kills=load.planned_kills(duration) if kills else (),
        seed=seed,
        data=data,
        corpus_limit=corpus_limit,
    )
    result = load.run(spec, settings, console)
    write_result(result, out, settings, seed)
    summary = {k: result[k] for k in ("calls", "errors", "kills", "verification", "memory")}
    console.print_json(json.dumps(summary))
    console.print(f"written to {out}")


@eval_app.command("inquiry")
def eval_inquiry(
    task: InquiryTask = typer.Option(InquiryTask.bulls_and_cows, help="the game played"),
    secrets: str = typer.Option("all", help="bulls-and-cows: 'all' (5,040 secrets) or a JSON list"),
    policy: BullsAndCowsPolicy = typer.Option(
        BullsAndCowsPolicy.eig,
        help="bulls-and-cows: the policy under test (every other policy runs too); hypotheses compares "
        "eig with both fixed orders",
    ),
    comparison_games: int = typer.Option(0, help="bulls-and-cows: games for each other policy (0: all)"),
    games: int = typer.Option(100, help="hypotheses: secrets played per policy and noise level"),
    hypotheses: int = typer.Option(1000, help="hypotheses: number of hypotheses"),
    questions: int = typer.Option(200, help="hypotheses: number of attribute questions"),
    noise: str = typer.Option("0,0.1", help="hypotheses: comma-separated answer noise levels"),
    target_confidence: float = typer.Option(0.95, help="hypotheses: confidence to reach"),
    data: Path = typer.Option(
        None, exists=True, file_okay=False, help="scifact-claims: BEIR SciFact directory"
    ),
    split: str = typer.Option("test", help="scifact-claims: the claims measured"),
    nli_model: str = typer.Option("", help="scifact-claims: the sidecar's NLI model (default: its own)"),
    limit: int = typer.Option(None, min=1, help="scifact-claims: only the first N claims of each part"),
    domain_parameter: list[str] = typer.Option(
        [], help="scifact-claims: KEY=VALUE, a corpus domain parameter for every session (repeatable)"
    ),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    address: str = typer.Option(None, help="a running orchestrator; default starts a stack"),
) -> None:
    """Play inquiry games through the gRPC API (the harness is client and oracle); scifact-claims
    verifies SciFact claims by corpus inquiry on a stack of its own."""
    from sounding_bench import inquiry

    if task is InquiryTask.scifact_claims:
        from sounding_bench import claims_inquiry

        if data is None:
            raise typer.BadParameter("scifact-claims needs the dataset", param_hint="--data")
        pairs = [p.split("=", 1) for p in domain_parameter]
        if any(len(p) != 2 for p in pairs):
            raise typer.BadParameter("KEY=VALUE", param_hint="--domain-parameter")
        parameters = {key: value for key, value in pairs}
        spec = claims_inquiry.ClaimsInquiryRun(data, split, nli_model, limit=limit, parameters=parameters)
        settings = run_settings()
        result = claims_inquiry.run(spec, settings, console)
        write_result(result, out, settings, claims_inquiry.SEED)
        console.print_json(json.dumps({"policies": result["policies"], "savings": result["savings"]}))
        console.print(f"written to {out}")
        return

    try:
        noise_levels = tuple(float(level) for level in noise.split(","))
    except ValueError:
        raise typer.BadParameter("comma-separated numbers", param_hint="--noise") from None
    settings = run_settings(address)
    if task is InquiryTask.bulls_and_cows:
        chosen = tuple(inquiry.load_secrets(secrets))
        spec = inquiry.BullsAndCowsRun(
            chosen, policy.value, comparison_games=comparison_games or None, address=address
        )
        result = inquiry.run(spec, settings, console)
        summary = {
            k: {m: v[m] for m in ("solved", "mean_turns", "max_turns")} for k, v in result["policies"].items()
        }
    else:
        spec = inquiry.HypothesesRun(
            hypotheses=hypotheses,
            questions=questions,
            games=games,
            noise_levels=noise_levels,
            target_confidence=target_confidence,
            address=address,
        )
        result = inquiry.run(spec, settings, console)
        summary = {
            name: {"reduction": v["eig_question_reduction"]}
            | {p: v["policies"][p]["mean_questions_where_all_reached"] for p in v["policies"]}
            for name, v in result["settings"].items()
        }
    write_result(result, out, settings)
    console.print_json(json.dumps(summary))
    console.print(f"written to {out}")
