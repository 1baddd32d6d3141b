"""`sounding demo`: every RPC doing its job on the bundled corpus, on a stack of its own."""

from __future__ import annotations

import functools
import json
import time
from enum import StrEnum
from pathlib import Path

import typer
from sounding.cli.common import console, read_documents, start_stack
from sounding.cli.show import print_calibration, print_retrieve
from sounding.runtime.progress import StepProgress, progress_bar
from sounding.settings.config import Settings

from sounding_bench.harness import DEMO_CORPUS, run_settings


class Step(StrEnum):
    retrieval = "retrieval"
    bulls_and_cows = "bulls-and-cows"
    llm = "llm"
    stop_threshold = "stop-threshold"
    tools = "tools"
    corpus = "corpus"


def demo(
    data_dir: Path = typer.Option(
        None, help="where the demo keeps its LanceDB and logs (default: demo/ under SOUNDING_DATA_DIR)"
    ),
    only: list[Step] = typer.Option(None, help="run only these steps (repeatable); default: all, in order"),
) -> None:
    """Start a stack of its own (on free ports, beside any other), ingest the bundled demo
    corpus, and show every RPC doing its job, step by step: stream Retrieves, report their
    outcomes with Observe, recalibrate the strategy selector, the miss rate, the confidence and
    the query adapter from them (retrieval); play an Inquire game (bulls-and-cows); let
    Sounding's model work a detective case (llm); fit stop thresholds from simulated guessing
    games (stop-threshold); route requests to tools and learn from a mis-route (tools); verify a
    claim against the corpus (corpus: on a machine's first run, after training the NLI model it
    reads sentences with). Stop the stack."""
    from sounding.stack import Stack
    from sounding_client import Client

    settings = run_settings()
    settings = settings.model_copy(update={"data_dir": data_dir or settings.data_dir / "demo"})
    chosen = set(only or Step)
    steps = {
        Step.retrieval: _print_retrieval,
        Step.bulls_and_cows: lambda client: _print_bulls_and_cows(client, "0435"),
        Step.llm: _print_llm_inquiry,
        Step.stop_threshold: _print_simulated_stop_threshold,
        Step.tools: _print_tool_routing,
        Step.corpus: lambda client: _print_corpus_inquiry(client, settings),
    }
    stack = Stack(settings, log_dir=settings.data_dir / "logs")
    try:
        start_stack(stack)
        console.print(f"the processes' own output: {stack.log_dir}", highlight=False)
        with Client(settings.address, timeout=120) as client:
            if "demo" in {c.name for c in client.list_collections()}:
                client.delete_collection("demo")
            client.create_collection("demo", "the demo corpus shipped in examples/")
            documents = list(read_documents(DEMO_CORPUS))
            with progress_bar(console) as progress:
                task = progress.add_task("IngestDocuments", total=len(documents))
                for report in client.ingest("demo", documents, batch_size=4):
                    progress.update(task, completed=report.total_documents)
            for step, show in steps.items():
                if step in chosen:
                    show(client)
            console.rule()
    finally:
        with console.status("stopping the stack"):
            stack.stop()


def _print_retrieval(client) -> None:
    from sounding_client import RetrievalOutcome

    finals = []
    for query in ("how do ships measure the depth of water?", "combining rankings"):
        console.rule(f"Retrieve: {query}")
        finals.append(print_retrieve(client, "demo", query, 3, []))
    console.rule("Observe: the agent used each Retrieve's top hit and found it helpful")
    ack = client.observe(
        RetrievalOutcome(f.retrieval_id, (f.hits[0].document_id,), feedback="helpful") for f in finals
    )
    console.print(f"[bold]observe[/bold] recorded {ack.recorded}, rejected {len(ack.rejected)}")
    metrics = client.strategy_metrics()
    for arm in metrics.arms:
        console.print(
            f"  {arm.arm:12} runs {arm.runs:3}  mean reward {arm.mean_reward:.2f}  "
            f"contribution rate {arm.contribution_rate:.2f}  latency {arm.mean_latency_ms:7.1f} ms"
        )
    console.rule("Retrieve and Observe: sixty questions, each with its source document")
    _print_agent_traffic(client, "demo", DEMO_CORPUS.with_name("demo-questions.jsonl"))
    console.rule("Calibrate(BANDIT): retrain the strategy selector on the recorded outcomes")
    print_calibration(client.calibrate("bandit"))
    console.rule("Calibrate(MISS_RATE): map stated miss rates to the misses the agent reported")
    print_calibration(client.calibrate("miss_rate"))
    console.rule("Calibrate(CONFIDENCE): map stated confidence to how often the agent succeeded")
    print_calibration(client.calibrate("confidence"))
    final = client.retrieve_final("demo", "what is chart datum?", top_k=1, synthesis_confidence=0.9)
    console.print(
        f"[bold]confidence[/bold] now {final.confidence.kind}: {final.confidence.value:.2f} "
        f"(stated {final.confidence.inputs.get('stated_confidence', 0.0):.2f}, "
        f"calibration v{final.confidence.calibration_version})"
    )
    console.rule("Calibrate(QUERY_ADAPTER): learn from those outcomes how to search the collection")
    print_calibration(client.calibrate("query_adapter", collection="demo"))


def _print_bulls_and_cows(client, secret: str) -> None:
    from sounding.inquiry.domains import bulls_and_cows
    from sounding_client import Ask, Belief, InquiryAnswer, InquiryPolicy

    console.rule(f"Inquire: bulls and cows, secret {secret} (this terminal plays the oracle)")
    inquiry = client.inquire("bulls_and_cows", InquiryPolicy(question_selection="eig_lookahead"))
    for event in inquiry:
        if isinstance(event, Belief):
            console.print(f"[bold]belief[/bold] {event.entropy_bits:.2f} bits of uncertainty")
        elif isinstance(event, Ask):
            bulls, cows = bulls_and_cows.score(event.question, secret)
            console.print(
                f"[bold]ask[/bold] #{event.turn} {event.question} "
                f"(expected gain {event.expected_information_gain:.2f} bits; {event.rationale}) "
                f"-> {bulls} bulls, {cows} cows"
            )
            inquiry.answer(f"{bulls} {cows}")
        elif isinstance(event, InquiryAnswer):
            console.print(
                f"[bold]answer[/bold] {event.answer} ({event.stopping_reason}, "
                f"{len(event.entropy_bits) - 1} guesses)"
            )


DEMO_CLAIM = "Depths on nautical charts are reduced to a low-water level called chart datum."


def _train_nli_model(settings: Settings) -> None:
    """The sidecar trains its NLI model on the first Entail when no adequate copy is cached;
    the demo trains it here first, in view, so the inquiry's first Entail finds it."""
    from sounding.models.nli import TRAINED_DIR, checkpoint_path, ensure_trained, trained_steps

    config = settings.models.nli
    own = settings.models.cache_dir / TRAINED_DIR
    if config.model or trained_steps(own) >= config.train_steps:
        return
    resuming = " (resuming from its last checkpoint)" if checkpoint_path(own).exists() else ""
    console.print(
        f"First use on this machine: training the NLI model the corpus inquiry reads sentences with"
        f"{resuming}, {config.train_steps} steps (SOUNDING_MODELS__NLI__TRAIN_STEPS; how long on two idle "
        f"cores: bench/README.md, NLI; the lines below say the time left); kept in {own}. Ctrl-C stops "
        "it; the next run resumes from its last checkpoint.",
        highlight=False,
    )
    with StepProgress(console, "training the NLI model") as progress:
        ensure_trained(
            own,
            config.train_steps,
            on_step=lambda step, total, loss: progress.update(step, total, f"loss {loss:.3f}"),
        )


def _print_corpus_inquiry(client, settings: Settings) -> None:
    """The server chooses each query by expected information gain, runs it, judges the new
    sentences against the claim with its NLI model and updates its belief over the verdicts."""
    from sounding_client import Ask, Belief, Evidence, InquiryAnswer, InquiryPolicy

    console.rule("Inquire (corpus): Sounding verifies a claim against the corpus, query by query")
    _train_nli_model(settings)
    console.print(f"[bold]claim[/bold] {DEMO_CLAIM}")
    inquiry = client.inquire(
        "corpus",
        InquiryPolicy(max_turns=4, target_confidence=0.8),
        domain_parameters={"collection": "demo"},
        context=DEMO_CLAIM,
    )
    for event in inquiry:
        if isinstance(event, Belief):
            belief = ", ".join(f"{h.id} {h.probability:.2f}" for h in event.top_hypotheses)
            console.print(f"[bold]belief[/bold] {belief} ({event.entropy_bits:.2f} bits)")
        elif isinstance(event, Ask):
            console.print(
                f"[bold]query[/bold] #{event.turn} {event.question!r} (expected gain "
                f"{event.expected_information_gain:.3f} bits; {len(event.runners_up)} runners-up)"
            )
        elif isinstance(event, Evidence):
            hits = ", ".join(f"{h.document_id}{'' if h.new else ' (read)'}" for h in event.hits)
            console.print(
                f"  found {hits}; {event.sentences_read} new sentences judged (chance of reaching "
                f"the target before it ran: {event.target_chance:.2f})"
            )
            if event.sentences:
                top = event.sentences[0]
                console.print(
                    f"  strongest: {top.text[:90]!r} (entails {top.entailment:.2f}, "
                    f"contradicts {top.contradiction:.2f}); gained {event.actual_information_gain:.3f} bits"
                )
        elif isinstance(event, InquiryAnswer):
            console.print(
                f"[bold]answer[/bold] {event.answer} with confidence {event.confidence.value or 0:.2f} "
                f"({event.stopping_reason}, {len(event.entropy_bits) - 1} queries)"
            )


DEMO_CASE = (
    "The host, Mr. Hale, was found dead in his study at nine in the evening, struck with a brass "
    "candlestick. The butler heard an argument at half past eight. Victor Crane owed Hale money; "
    "Anna Byrne was his niece and heir; Lucy Dunn, the cook, was in the kitchen all evening."
)


def _print_llm_inquiry(client) -> None:
    """A detective case for Sounding's own model (two samples per state, one question) and its
    outcome through Observe."""
    from sounding_client import (
        Ask,
        Belief,
        Hypothesis,
        InquiryAnswer,
        InquiryOutcome,
        InquiryPolicy,
    )

    console.rule("Inquire (llm): SmolLM2 works a detective case and decides when to answer")
    suspects = ["Anna Byrne", "Victor Crane", "Lucy Dunn"]
    inquiry = client.inquire(
        "llm",
        InquiryPolicy(stop_rule="robust_mi_risk", max_turns=1),
        hypotheses=[Hypothesis(f"s{i}", name) for i, name in enumerate(suspects)],
        domain_parameters={"task": "dc", "samples": "2", "answer_tokens": "24", "question_tokens": "48"},
        context=DEMO_CASE,
        timeout=900,
    )
    for event in inquiry:
        if isinstance(event, Belief):
            signal = event.stop_signals[0]
            console.print(
                f"[bold]belief[/bold] answer now: {event.current_answer or '(none parsed)'}; "
                f"{signal.rule} {signal.score:.3f} vs threshold {signal.threshold:.3f} "
                f"({'answer' if signal.answers else 'ask'}); homogeneity {event.homogeneity_bucket}, "
                f"p_max {event.homogeneity.p_max if event.homogeneity else float('nan'):.2f}"
            )
        elif isinstance(event, Ask):
            console.print(f'[bold]ask[/bold] {event.question} -> "I was out walking the dog."')
            inquiry.answer("I was out walking the dog.")
        elif isinstance(event, InquiryAnswer):
            console.print(f"[bold]answer[/bold] {event.answer or '(none)'} ({event.stopping_reason})")
    ack = client.observe([InquiryOutcome(inquiry.session_id, "Victor Crane")])
    console.print(f"[bold]observe[/bold] the true culprit: recorded {ack.recorded} session's states")


def _print_simulated_stop_threshold(client) -> None:
    """Guessing games played by the SIMULATED policy model (its answers drawn from the secrets
    consistent so far; under collapse nine draws in ten land on one of them) in both regimes,
    their outcomes through Observe, a robust-MI stop threshold per regime fitted from their
    states, and one more game that stops by the normal regime's, its guesses chosen by value of
    information."""
    from sounding.inquiry.domains import bulls_and_cows
    from sounding.inquiry.llm.tasks import SIMULATED_GN
    from sounding_client import Ask, Belief, InquiryAnswer, InquiryPolicy

    from sounding_bench import robust_mi_simulated as simulated

    console.rule("Calibrate(STOP_THRESHOLD): a robust-MI threshold from SIMULATED guessing games")
    calibrating, (secret,) = simulated.split_secrets(120, 1, seed=0)
    for regime in simulated.REGIMES:
        with progress_bar(console) as progress:
            task = progress.add_task(f"simulated games, {regime}", total=len(calibrating))
            played = simulated.play_episodes(
                client, calibrating, regime, 0, functools.partial(progress.advance, task)
            )
        console.print(
            f"[bold]observe[/bold] {sum(p['outcome_recorded'] for p in played)} {regime} games' secrets"
        )
        print_calibration(client.calibrate("stop_threshold", task=SIMULATED_GN, regime=regime))
    inquiry = client.inquire(
        "llm",
        InquiryPolicy(question_selection="voi", stop_rule="robust_mi_risk", max_turns=12, seed=1),
        domain_parameters={"task": "gn", "policy_model": "simulated", "signals": "all"},
    )
    for event in inquiry:
        if isinstance(event, Belief) and not event.stop_signals:  # the secret was guessed
            console.print(f"[bold]belief[/bold] {event.current_answer}: the feedback names the secret")
        elif isinstance(event, Belief):
            signals = {s.rule: s for s in event.stop_signals}
            robust, plain = signals["robust_mi_risk"], signals["self_consistency"]
            console.print(
                f"[bold]belief[/bold] answer now {event.current_answer}: robust MI {robust.score:.3f} vs "
                f"threshold {robust.threshold:.3f} (v{robust.calibration_version}: "
                f"{'answer' if robust.answers else 'ask'}); plain sampling would "
                f"{'answer' if plain.answers else 'ask'} (p_max {1 - plain.score:.2f})"
            )
        elif isinstance(event, Ask):
            bulls, cows = bulls_and_cows.score(event.question, secret)
            console.print(
                f"[bold]ask[/bold] {event.question} (VoI {event.cost_adjusted_score:.3f} nats, best of "
                f"{len(event.runners_up) + 1}) -> {bulls} bulls, {cows} cows"
            )
            inquiry.answer(bulls_and_cows.feedback_sentence(bulls, cows))
        elif isinstance(event, InquiryAnswer):
            console.print(
                f"[bold]answer[/bold] {event.answer} ({event.stopping_reason}; the secret was {secret})"
            )


def _print_agent_traffic(client, collection: str, questions: Path) -> None:
    """Each question (with the id of the document it was written from) through a Retrieve on
    the cheap arms, stating the agent's synthesis confidence 0.9; its outcome through Observe: the
    source document used (and the agent successful) when it ranked first, reported missing when
    it did not."""
    from sounding_client import ExpansionOptions, RetrievalOutcome

    asked = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    outcomes, stated = [], []
    with progress_bar(console) as progress:
        task = progress.add_task("Retrieve", total=len(asked))
        for question in asked:
            final = client.retrieve_final(
                collection,
                question["question"],
                top_k=1,
                arms=("dense", "lexical"),
                expansion=ExpansionOptions(max_iterations=0),
                omit_text=True,
                synthesis_confidence=0.9,
            )
            source = question["document_id"]
            found = source in {hit.document_id for hit in final.hits}
            outcomes.append(
                RetrievalOutcome(
                    final.retrieval_id,
                    (source,) if found else (),
                    feedback="helpful" if found else "not_helpful",
                    agent_success=found,
                    found_missing_content=not found,
                    missed_document_ids=() if found else (source,),
                )
            )
            stated.append(final.uncertainty.miss_rate.value)
            progress.update(task, advance=1)
    ack = client.observe(outcomes)
    missed = sum(o.found_missing_content for o in outcomes)
    console.print(
        f"[bold]observe[/bold] recorded {ack.recorded}, rejected {len(ack.rejected)}: the source "
        f"document ranked first for {len(outcomes) - missed} of {len(outcomes)} questions; "
        f"stated miss rate {sum(stated) / len(stated):.2f} on average, observed {missed / len(outcomes):.2f}"
    )


DEMO_TOOLS = (
    ("convert_units", "Convert a quantity between units of measure: metres, feet, kilograms, pounds."),
    ("fx_quote", "ISO 4217 pair lookup."),
    ("get_weather", "Get the weather forecast for a city."),
    ("send_email", "Send an email message to a recipient."),
)
# Requests the agent served with `fx_quote`, which the router sends to `convert_units` at first.
CURRENCY_REQUESTS = (
    "Convert 20 pounds sterling into dollars.",
    "Convert 50 euros to yen.",
    "What is 80 pounds in euros?",
    "Convert 1000 yen into dollars.",
)


def _print_tool_routing(client) -> None:
    """Route by description; the agent reports (through the non-blocking observer) that the
    tersely described `fx_quote` served such requests, plus a fallback to `shell`; the router
    learns, and the same kind of request routes differently."""
    from sounding_client import SoundingError, Tool, ToolUseObserver

    console.rule("RouteTool and Observe(ToolUse): a terse tool description, a mis-route, a lesson")
    toolset = "demo-tools"
    try:  # a demo run before taught these tools: start them from their descriptions again
        existing = [t.name for t in client.list_tools(toolset)]
    except SoundingError as error:
        if error.code.name != "NOT_FOUND":
            raise
        existing = []
    if existing:
        client.delete_tools(toolset, existing, forget_exemplars=True)
    client.put_tools(toolset, [Tool(name, description) for name, description in DEMO_TOOLS])
    _print_routes(client, toolset)
    before = client.tool_metrics(toolset)  # an earlier demo run's events are counted there too
    observer = ToolUseObserver(client)
    for asked in CURRENCY_REQUESTS:
        observer.observe(toolset, asked, "fx_quote", success=True)
    observer.observe(toolset, "What's the forecast for Oslo tomorrow?", "shell")
    observer.close(timeout=10)
    console.print(f"[bold]observe[/bold] {observer.sent} tool uses sent without blocking the agent")
    metrics = client.tool_metrics(toolset)
    for _ in range(300):
        if metrics.processed >= metrics.events:
            break
        time.sleep(0.1)
        metrics = client.tool_metrics(toolset)
    counts = {
        name: getattr(metrics, name) - getattr(before, name)
        for name in ("processed", "flagged_disagreement", "flagged_fallback", "labels_trusted", "labels_free")
    }
    console.print(
        f"[bold]learned[/bold] {counts['processed']} events: {counts['flagged_disagreement']} disagreed "
        f"with the router, {counts['flagged_fallback']} fell back to a general tool; labels: "
        f"{counts['labels_trusted']} from successful uses, {counts['labels_free']} from the router; "
        f"exemplars {metrics.exemplars}"
    )
    _print_routes(client, toolset)


def _print_routes(client, toolset: str) -> None:
    for request in ("Convert 300 dollars to yen.", "Convert 5 kilograms to pounds."):
        route = client.route_tool(toolset, request, top_k=2)
        ranked = ", ".join(f"{name} {score:.3f}" for name, score in route.candidates)
        console.print(f"[bold]route[/bold] {request!r} -> {ranked} (margin {route.margin:.3f})")
