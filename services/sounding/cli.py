"""The `sounding` command line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import typer
from rich.console import Console

from sounding.config import Settings
from sounding.models.nli import BUNDLED_TRAINING_DATA as BUNDLED_NLI_TRAINING_DATA
from sounding.progress import progress_bar

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
serve_app = typer.Typer(help="Run a Sounding process.")
eval_app = typer.Typer(help="Measure Sounding (results as JSON, for bench/results/).")


@eval_app.callback()
def _eval_stops_cleanly_on_sigterm() -> None:
    """A harness that started a stack stops it on SIGTERM too, not only on Ctrl-C."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


app.add_typer(serve_app, name="serve")
app.add_typer(eval_app, name="eval")
models_app = typer.Typer(help="Train or prepare the sidecar's models.")
app.add_typer(models_app, name="models")
token_app = typer.Typer(help="Bearer tokens of the public port (README, Security).")
app.add_typer(token_app, name="token")
DEFAULT_NLI_TRAIN = BUNDLED_NLI_TRAINING_DATA


@models_app.command("train-nli")
def train_nli(
    data: Path = typer.Option(
        DEFAULT_NLI_TRAIN, exists=True, dir_okay=False, help="SNLI-style CSV or JSONL (optionally .gz)"
    ),
    epochs: int = typer.Option(3, min=1, max=20),
    max_minutes: float = typer.Option(20.0, min=0.1, help="stop training when this is spent"),
    batch_size: int = typer.Option(32, min=1, max=512),
    learning_rate: float = typer.Option(5e-5, min=1e-7, max=1e-2),
) -> None:
    """Fine-tune the NLI cross-encoder (MiniLM encoder, 3-way head) and save it in the models
    cache, where the sidecar loads it from."""
    from sounding.models import nli

    settings = Settings()
    pairs = nli.read_pairs(data)
    out = settings.models.cache_dir / nli.TRAINED_DIR
    with progress_bar(console) as progress:
        task = progress.add_task(f"training on {len(pairs)} pairs", total=None)

        def on_step(step: int, total: int, loss: float) -> None:
            progress.update(task, completed=step, total=total, description=f"training, loss {loss:.3f}")

        report = nli.train(pairs, out, epochs, batch_size, learning_rate, max_minutes, on_step=on_step)
    console.print(
        f"saved to {report.path}: {report.steps} steps ({report.epochs_run:.2f} epochs) in "
        f"{report.seconds:.0f} s, last loss {report.final_loss:.3f}"
    )


console = Console()

# How the commands that call a running orchestrator reach it.
ADDRESS = typer.Option(None, help="orchestrator address (default from settings)")
TOKEN = typer.Option(None, "--token", envvar="SOUNDING_TOKEN", help="bearer token (or SOUNDING_TOKEN)")
TLS_CA = typer.Option(
    None, "--tls-ca", exists=True, dir_okay=False, help="CA bundle verifying the server: turns TLS on"
)
TLS_CERT = typer.Option(
    None, "--tls-cert", exists=True, dir_okay=False, help="client certificate (mutual TLS)"
)
TLS_KEY = typer.Option(None, "--tls-key", exists=True, dir_okay=False, help="client certificate's key")


def _connect(address: str | None, token: str | None, tls_ca: Path | None, tls_cert: Path | None, tls_key):
    from sounding_client import Client

    return Client(
        address or Settings().address, token=token, ca_file=tls_ca, cert_file=tls_cert, key_file=tls_key
    )


def _run_until_signalled(main) -> None:
    """Run `main()` (a coroutine function) until it ends or SIGINT/SIGTERM arrives."""

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(runner())


@serve_app.callback(invoke_without_command=True)
def serve(ctx: typer.Context) -> None:
    """The orchestrator: public gRPC API, Ray strategy workers, the LanceDB store."""
    if ctx.invoked_subcommand is not None:
        return
    from sounding.gateway.server import serve as serve_orchestrator
    from sounding.store.lock import DataDirectoryInUse

    settings = Settings()
    try:
        _run_until_signalled(lambda: serve_orchestrator(settings))
    except DataDirectoryInUse as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from None
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()


@serve_app.command("models")
def serve_models() -> None:
    """The models sidecar: embeddings (micro-batched) and generation."""
    # OpenMP threads that spin while waiting steal the cores the other processes (Ray workers,
    # orchestrator) need, and then wait for them: measured here with two busy cores, SmolLM2
    # decoded 2.9 tokens/s (batch of 8) with spinning threads and 32 tokens/s with passive ones.
    # Set before torch loads; an explicit setting in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from sounding.models.server import serve as serve_sidecar

    _run_until_signalled(lambda: serve_sidecar(Settings()))


@app.command()
def health(
    address: str = typer.Option(None, help="host:port (default: SOUNDING_ADDRESS)"),
    service: str = typer.Option("", help="a service's name; empty: the server as a whole"),
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
    timeout: float = typer.Option(3.0, help="seconds to wait for the answer"),
) -> None:
    """Check a server's gRPC health (over TLS with --tls-ca): exit 0 when SERVING, 1 otherwise.
    For probes that cannot speak TLS themselves (deploy/: Kubernetes' gRPC probes cannot)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from sounding_client.credentials import channel_credentials

    address = address or Settings().address
    credentials = channel_credentials(None, tls_ca, tls_cert, tls_key)
    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    with channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.RpcError as error:
            console.print(f"{address}: {error.code().name} {error.details()}")
            raise typer.Exit(1) from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    console.print(f"{address}: {status}")
    if answer.status != health_pb2.HealthCheckResponse.SERVING:
        raise typer.Exit(1)


def _start(stack) -> None:
    """Start the sidecar, then Ray and the orchestrator, saying where each serves."""
    settings = stack.settings
    with console.status("starting the models sidecar"):
        stack.start_models()
    console.print(f"models sidecar serving on {settings.models.address}")
    with console.status("starting Ray and the orchestrator"):
        stack.start_orchestrator()
    console.print(f"orchestrator serving on {settings.address} (data in {settings.data_dir})")


@app.command()
def up(
    data_dir: Path = typer.Option(None, help="LanceDB directory and caches (default ./.sounding)"),
) -> None:
    """Start the sidecar, Ray and the orchestrator, and start again any of them that exits;
    Ctrl-C stops them cleanly (the orchestrator drains first)."""
    from sounding.stack import Stack

    settings = Settings() if data_dir is None else Settings(data_dir=data_dir)
    stack = Stack(settings)
    try:
        _start(stack)
        stack.supervise()
        console.print("Ctrl-C stops everything.")
        # Also when started in the background, where the shell leaves SIGINT ignored.
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, signal.default_int_handler)
        seen = 0
        while True:
            time.sleep(0.5)
            for _, name in stack.restarts[seen:]:
                console.print(f"[yellow]{name} exited; started again[/yellow]")
            seen = len(stack.restarts)
    except KeyboardInterrupt:
        console.print("stopping…")
    finally:
        stack.stop()


def _read_documents(path: Path):
    """Documents from a .jsonl file (BEIR corpus or {id,text,title,metadata} lines) or from the
    .txt/.md files under a directory (id = relative path)."""
    if path.is_file():
        with path.open() as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)
        return
    for file in sorted(p for p in path.rglob("*") if p.suffix in {".txt", ".md"} and p.is_file()):
        yield {"id": str(file.relative_to(path)), "title": file.stem, "text": file.read_text()}


@app.command()
def ingest(
    path: Path = typer.Argument(..., exists=True, help="FILE.jsonl or a directory of .txt/.md files"),
    collection: str = typer.Option(..., "--collection", "-c"),
    batch_size: int = typer.Option(64, min=1, max=2000),
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """Ingest documents, creating the collection if needed, with a progress bar."""
    from sounding_client import SoundingError

    documents = list(_read_documents(path))
    with _connect(address, token, tls_ca, tls_cert, tls_key) as client:
        try:
            try:
                client.get_collection(collection)
            except SoundingError as error:
                if error.reason != "COLLECTION_NOT_FOUND":
                    raise
                client.create_collection(collection)
            with progress_bar(console) as progress:
                task = progress.add_task(f"ingesting into {collection}", total=len(documents))
                for report in client.ingest(collection, documents, batch_size=batch_size):
                    progress.update(task, completed=report.total_documents)
            info = client.get_collection(collection)
        except SoundingError as error:
            console.print(f"[red]{error}[/red] {error.fields or ''}")
            raise typer.Exit(1) from None
    console.print(
        f"{collection}: {info.document_count} documents, {info.chunk_count} chunks "
        f"({report.elapsed_seconds:.1f} s, {report.total_documents / report.elapsed_seconds:.1f} docs/s)"
    )


@app.command()
def retrieve(
    query: str = typer.Argument(...),
    collection: str = typer.Option(..., "--collection", "-c"),
    top_k: int = typer.Option(5, "--top-k", "-k"),
    arm: list[str] = typer.Option([], "--arm", help="run only these arms (repeatable)"),
    max_iterations: int = typer.Option(
        None, help="expansion loop iterations (0: off; default from settings)"
    ),
    min_recall: float = typer.Option(None, help="expand while the estimated recall is below this"),
    expansion: list[str] = typer.Option([], "--expansion", help="allowed expansion strategies (repeatable)"),
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """Stream a Retrieve, printing each event as it arrives."""
    from sounding_client import ExpansionOptions, SoundingError

    options = ExpansionOptions(
        min_recall=min_recall, max_iterations=max_iterations, strategies=tuple(expansion)
    )
    with _connect(address, token, tls_ca, tls_cert, tls_key) as client:
        try:
            _print_retrieve(client, collection, query, top_k, arm, options)
        except SoundingError as error:
            console.print(f"[red]{error}[/red] {error.fields or ''}")
            raise typer.Exit(1) from None


def _print_retrieve(client, collection: str, query: str, top_k: int, arms: list[str], expansion=None):
    """Prints every event; returns the Final one."""
    from sounding_client import Expansion, Final, Fused, Plan, StrategyResult

    final = None
    for event in client.retrieve(collection, query, top_k=top_k, arms=arms, expansion=expansion):
        if isinstance(event, Plan):
            planned = ", ".join(
                f"{a.arm} ({a.reason}, score {a.score:.2f})"
                if a.chosen
                else f"[dim]{a.arm} ({a.reason})[/dim]"
                for a in event.arms
            )
            console.print(f"[bold]plan[/bold] {event.retrieval_id}: {planned}")
        elif isinstance(event, StrategyResult):
            top = ", ".join(h.document_id for h in event.hits[:top_k])
            console.print(f"[bold]{event.arm}[/bold] {event.latency_ms:.1f} ms: {top}")
            if event.generated_text:
                console.print(f"     generated: {event.generated_text[:200]!r}", style="dim", highlight=False)
        elif isinstance(event, Fused):
            console.print(f"[bold]fused[/bold] {', '.join(h.document_id for h in event.hits)}")
        elif isinstance(event, Expansion):
            console.print(
                f"[bold]expansion[/bold] #{event.iteration} {event.strategy} ({event.gap}): "
                f"{event.queries} -> {event.new_hits} new, recall {event.estimated_recall.value:.2f} "
                f"({event.estimated_recall.kind})",
                highlight=False,
            )
        elif isinstance(event, Final):
            console.print(f"[bold]final[/bold] {event.latency_ms:.1f} ms")
            for rank, hit in enumerate(event.hits, start=1):
                found = ", ".join(f"{c.arm}#{c.rank}" for c in hit.contributions)
                console.print(
                    f"  {rank}. [cyan]{hit.document_id}[/cyan] {hit.score:.4f} ({found}) {hit.title}"
                )
                console.print(f"     {hit.text[:160]}…", style="dim", highlight=False)
            u = event.uncertainty
            console.print(
                f"  corpus coverage: {u.corpus_coverage.value} ({u.corpus_coverage.kind}: "
                f"{u.corpus_coverage.reason})\n"
                f"  miss rate: {u.miss_rate.value:.2f} ({u.miss_rate.kind}: {u.miss_rate.formula})\n"
                f"  estimated recall: {u.estimated_recall.kind} ({u.estimated_recall.reason})\n"
                f"  query difficulty: {u.query_difficulty.value:.2f} ({u.query_difficulty.formula})"
            )
            for gap in u.semantic_gaps:
                console.print(
                    f"  gap {gap.kind} (severity {gap.severity:.2f}, mitigation {gap.mitigation}): "
                    f"{gap.description}",
                    highlight=False,
                )
            final = event
    return final


def _print_bulls_and_cows(client, secret: str) -> None:
    from sounding_client import Ask, Belief, InquiryAnswer

    from sounding.inquiry.domains import bulls_and_cows

    table = bulls_and_cows.feedback_table()
    inquiry = client.inquire("bulls_and_cows")
    for event in inquiry:
        if isinstance(event, Belief):
            console.print(f"[bold]belief[/bold] {event.entropy_bits:.2f} bits of uncertainty")
        elif isinstance(event, Ask):
            code = int(table.table[table.index[event.question], table.index[secret]])
            bulls, cows = divmod(code, bulls_and_cows.CODES_PER_FEEDBACK)
            console.print(
                f"[bold]ask[/bold] #{event.turn} {event.question} "
                f"(expected gain {event.expected_information_gain:.2f} bits) -> {bulls} bulls, {cows} cows"
            )
            inquiry.answer(f"{bulls} {cows}")
        elif isinstance(event, InquiryAnswer):
            console.print(
                f"[bold]answer[/bold] {event.answer} ({event.stopping_reason}, "
                f"{len(event.entropy_bits) - 1} guesses)"
            )


DEMO_CASE = (
    "The host, Mr. Hale, was found dead in his study at nine in the evening, struck with a brass "
    "candlestick. The butler heard an argument at half past eight. Victor Crane owed Hale money; "
    "Anna Byrne was his niece and heir; Lucy Dunn, the cook, was in the kitchen all evening."
)


def _print_llm_inquiry(client) -> None:
    """A detective case for Sounding's own model (two samples per state, one question), its
    outcome through Observe, and a stop-threshold calibration from the recorded states."""
    from sounding_client import (
        Ask,
        Belief,
        Hypothesis,
        InquiryAnswer,
        InquiryOutcome,
        InquiryPolicy,
    )

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
                f"p_max {event.homogeneity.p_max:.2f}"
            )
        elif isinstance(event, Ask):
            console.print(f'[bold]ask[/bold] {event.question} -> "I was out walking the dog."')
            inquiry.answer("I was out walking the dog.")
        elif isinstance(event, InquiryAnswer):
            console.print(f"[bold]answer[/bold] {event.answer or '(none)'} ({event.stopping_reason})")
    ack = client.observe([InquiryOutcome(inquiry.session_id, "Victor Crane")])
    console.print(f"[bold]observe[/bold] the true culprit: recorded {ack.recorded} session's states")
    _print_calibration(client.calibrate("stop_threshold", task="dc", regime="normal"))


def _print_agent_traffic(client, collection: str, questions: Path) -> None:
    """Each question (with the id of the document it was written from) through a Retrieve on
    the cheap arms, its outcome through Observe: the source document used when it ranked first,
    reported missing when it did not."""
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
            )
            source = question["document_id"]
            found = source in {hit.document_id for hit in final.hits}
            outcomes.append(
                RetrievalOutcome(
                    final.retrieval_id,
                    (source,) if found else (),
                    feedback="helpful" if found else "not_helpful",
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


def _print_calibration(events) -> None:
    from sounding_client import CalibrationReport, SoundingError

    try:
        for event in events:
            if isinstance(event, CalibrationReport):
                console.print(
                    f"[bold]calibrate[/bold] {event.target} v{event.version}, {event.sample_size} "
                    f"outcomes: {event.summary}",
                    highlight=False,
                )
            else:
                console.print(f"[bold]calibrate[/bold] {event.stage}", style="dim")
    except SoundingError as error:
        console.print(f"[bold]calibrate[/bold] refused: {error.code.name}: {error.message}")


@app.command()
def demo(
    data_dir: Path = typer.Option(Path(".sounding/demo"), help="where the demo keeps its LanceDB"),
) -> None:
    """Start the stack, ingest the bundled demo corpus, stream Retrieves, report their outcomes
    with Observe, recalibrate the strategy selector and the miss rate from them, play an Inquire
    game, let Sounding's model work a detective case, stop the stack."""
    from sounding_client import Client, RetrievalOutcome

    from sounding.stack import Stack

    corpus = Path(__file__).resolve().parents[2] / "examples" / "demo-corpus.jsonl"
    settings = Settings(data_dir=data_dir)
    stack = Stack(settings, log_dir=data_dir / "logs")
    try:
        _start(stack)
        with Client(settings.address, timeout=120) as client:
            if "demo" in {c.name for c in client.list_collections()}:
                client.delete_collection("demo")
            client.create_collection("demo", "the demo corpus shipped in examples/")
            documents = list(_read_documents(corpus))
            with progress_bar(console) as progress:
                task = progress.add_task("IngestDocuments", total=len(documents))
                for report in client.ingest("demo", documents, batch_size=4):
                    progress.update(task, completed=report.total_documents)
            finals = []
            for query in ("how do ships measure the depth of water?", "combining rankings"):
                console.rule(f"Retrieve: {query}")
                finals.append(_print_retrieve(client, "demo", query, 3, []))
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
            _print_agent_traffic(client, "demo", corpus.with_name("demo-questions.jsonl"))
            console.rule("Calibrate(BANDIT): retrain the strategy selector on the recorded outcomes")
            _print_calibration(client.calibrate("bandit"))
            console.rule("Calibrate(MISS_RATE): map stated miss rates to the misses the agent reported")
            _print_calibration(client.calibrate("miss_rate"))
            console.rule("Inquire: bulls and cows, secret 0435 (this terminal plays the oracle)")
            _print_bulls_and_cows(client, "0435")
            console.rule("Inquire (llm): SmolLM2 works a detective case and decides when to answer")
            _print_llm_inquiry(client)
            console.rule()
    finally:
        with console.status("stopping the stack"):
            stack.stop()


@token_app.command("create")
def token_create(
    tenant: str = typer.Option(..., help="the tenant the token acts for"),
    role: str = typer.Option("reader", help="reader, writer or admin"),
    file: Path = typer.Option(..., help="the token file to add it to (created if missing)"),
) -> None:
    """Make a token for a tenant and role: its hash goes into the token file (a running server
    picks it up within a second), the token itself is printed once and stored nowhere."""
    import datetime
    import tempfile

    from pydantic import ValidationError

    from sounding import auth

    token, digest = auth.new_token()
    try:
        auth.TokenEntry(sha256=digest, tenant=tenant, role=role)
    except ValidationError as error:
        first = error.errors()[0]
        console.print(f"{first['loc'][0]}: {first['msg']}", style="red", markup=False)
        raise typer.Exit(2) from None
    existing = file.read_text() if file.exists() else ""
    if existing:
        auth.read_token_file(file)  # never extend a file the server cannot read
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    entry = f'\n# created {created}\n[[tokens]]\nsha256 = "{digest}"\ntenant = "{tenant}"\nrole = "{role}"\n'
    # Written whole and renamed into place: a server reloading it never reads half a file.
    with tempfile.NamedTemporaryFile("w", dir=file.parent, prefix=f".{file.name}.", delete=False) as staged:
        staged.write(existing + entry)
    os.chmod(staged.name, 0o600)
    os.replace(staged.name, file)
    console.print(f"added a {role} token of tenant {tenant} to {file}; the token (shown only now):")
    print(token)


@app.command()
def limits(markdown: bool = typer.Option(False, help="the README's table, in Markdown")) -> None:
    """Every limit on what a client can make Sounding do: its setting, default and current value."""
    from rich.table import Table

    from sounding.config import limit_rows

    rows = limit_rows(Settings().limits)
    if markdown:
        print("| setting | default | what it bounds |\n| --- | --- | --- |")
        for setting, default, _, description in rows:
            print(f"| `{setting}` | {default} | {description} |")
        return
    table = Table("setting", "default", "value", "what it bounds")
    for row in rows:
        table.add_row(*row, style="bold" if row[1] != row[2] else None)
    console.print(table)


@app.command()
def collections(
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """List collections."""
    with _connect(address, token, tls_ca, tls_cert, tls_key) as client:
        for c in client.list_collections():
            console.print(
                f"{c.name}: {c.document_count} documents, {c.chunk_count} chunks, {c.embedding_model}"
            )


@eval_app.command("retrieval")
def eval_retrieval(
    data: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR dataset directory"),
    split: str = typer.Option("test"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    address: str = typer.Option(None, help="a running orchestrator; default starts a stack"),
    fresh: bool = typer.Option(False, help="re-ingest and re-encode even if cached"),
    train_split: str = typer.Option(
        None, help="adaptive mode: learn from these queries' outcomes first (e.g. train)"
    ),
    train_limit: int = typer.Option(None, help="adaptive mode: only the first N train queries"),
    test_limit: int = typer.Option(None, help="adaptive mode: only the first N test queries"),
    background_load: float = typer.Option(
        0.0, min=0.0, max=0.95, help="keep one core busy this share of the time while the queries run"
    ),
) -> None:
    """nDCG@10, recall@100 and latency of dense, lexical and fused through the service, beside
    in-process references (bm25s, MiniLM brute force, their RRF) and ingest rates.

    With --train-split: every arm, all arms fused, and adaptive selection that learns through
    Observe over the train queries and keeps learning on the test queries; the regret curve
    goes to a PNG beside the JSON."""
    if train_split:
        from sounding.evaluation import adaptive
        from sounding.evaluation.harness import write

        result, plot = adaptive.run(data, train_split, split, Settings(), console, train_limit, test_limit)
        write(result, plot, out)
        console.print_json(json.dumps({"systems": result["systems"], "comparisons": result["comparisons"]}))
        console.print(f"written to {out} and {out.with_suffix('.png')}")
        return
    from sounding.evaluation.harness import provenance
    from sounding.evaluation.retrieval import run

    settings = Settings()
    result = {
        "provenance": provenance(settings),
        **run(data, split, address, fresh, settings, console, background_load),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    console.print_json(json.dumps(result["systems"]))
    console.print(f"written to {out}")


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
    from sounding.evaluation import calibration
    from sounding.evaluation.harness import write

    result, plot = calibration.run(data, train_split, split, Settings(), console, k, train_limit, test_limit)
    write(result, plot, out)
    console.print_json(json.dumps({"passes": result["passes"], "loop_effect": result["loop_effect"]}))
    console.print(f"written to {out} and {out.with_suffix('.png')}")


@eval_app.command("nli")
def eval_nli(
    data: Path = typer.Option(..., exists=True, dir_okay=False, help="SNLI-style CSV or JSONL"),
    model: Path = typer.Option(None, help="a sequence-classification NLI model; default: the trained one"),
    out: Path = typer.Option(None, help="also write the JSON result here"),
) -> None:
    """Accuracy and per-class F1 of the NLI model on labelled pairs."""
    from sounding.models import nli

    path = model or Settings().models.cache_dir / nli.TRAINED_DIR
    if not path.exists():
        console.print(f"[red]no NLI model at {path}[/red]; run `sounding models train-nli` first")
        raise typer.Exit(1)
    pairs = nli.read_pairs(data)
    with console.status(f"classifying {len(pairs)} pairs"):
        result = {"data": str(data), "model": str(path), **nli.evaluate(nli.NliModel(path), pairs)}
    console.print_json(json.dumps(result))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")


@eval_app.command("arbench")
def eval_arbench(
    task: str = typer.Option(..., help="dc, sp or gn"),
    data: Path = typer.Option(..., exists=True, dir_okay=False, help="an AR-Bench JSON file of the task"),
    stop_rule: str = typer.Option(
        "all", help="a stop rule, or 'all': one trajectory per episode with every rule judged on it"
    ),
    regime: str = typer.Option("normal", help="normal (T 0.7, top-p 0.95) or collapse (T 0.1, decisive)"),
    limit: int = typer.Option(20, min=1, help="the first N episodes"),
    max_turns: int = typer.Option(5, min=1, max=25, help="questions before the answer is forced"),
    samples: int = typer.Option(4, min=2, max=32, help="k: sampled answers per state and prompt variant"),
    answer_tokens: int = typer.Option(0, min=0, help="token budget of an answer (0: the task's)"),
    question_tokens: int = typer.Option(0, min=0, help="token budget of a question list (0: the task's)"),
    seed: int = typer.Option(0),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    address: str = typer.Option(None, help="a running orchestrator; default starts a stack of its own"),
) -> None:
    """Play AR-Bench episodes through Inquire's llm domain, the NPC on the same generator
    backend; accuracy (F1 for sp), questions asked, ECE over visited states and the Spearman
    correlation between stop score and error, per stop rule. Played episodes are kept in
    `<out>.journal.jsonl` until the result is written, so an interrupted run resumes there."""
    from sounding_client import Client

    from sounding.core.stop_rules import STOP_RULES
    from sounding.evaluation import arbench
    from sounding.stack import serving

    if task not in ("dc", "sp", "gn"):
        raise typer.BadParameter("dc, sp or gn", param_hint="--task")
    if stop_rule != "all" and stop_rule not in STOP_RULES:
        raise typer.BadParameter(f"'all' or one of {', '.join(STOP_RULES)}", param_hint="--stop-rule")
    if regime not in ("normal", "collapse"):
        raise typer.BadParameter("normal or collapse", param_hint="--regime")
    journal = out.with_name(out.name + ".journal.jsonl")
    settings = Settings()
    if not address:  # a stack of its own: its own data directory; greedy NPC replies are cached
        settings = settings.model_copy(update={"data_dir": settings.cache_dir / "eval" / "arbench"})
    env = {"SOUNDING_MODELS__GENERATOR__CACHE_MAX_ENTRIES": "1000000"}
    with serving(settings, address, env) as running, Client(running, timeout=3600) as client:
        try:
            result = arbench.run(
                client,
                settings.models,
                task,
                data,
                stop_rule,
                regime,
                limit,
                max_turns,
                samples,
                console,
                answer_tokens,
                question_tokens,
                seed,
                journal,
            )
        except arbench.JournalMismatch as error:
            raise typer.BadParameter(str(error), param_hint="--out") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    journal.unlink(missing_ok=True)
    console.print_json(json.dumps({"rules": result["rules"], "homogeneity_mean": result["homogeneity_mean"]}))
    console.print(f"written to {out}")


@eval_app.command("fuzz")
def eval_fuzz(
    requests: int = typer.Option(10_000, min=16, help="generated calls to send"),
    seed: int = typer.Option(0),
    concurrency: int = typer.Option(4, min=1, max=64, help="calls in flight at once"),
    health_p99_ms: float = typer.Option(100.0, help="health checks' p99 latency must stay below this"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
) -> None:
    """Generated requests for every RPC of SoundingService, CorpusService and the sidecar, on a
    stack of its own (a fresh data directory): every call must end with a canonical code other
    than UNKNOWN and INTERNAL, no process may die, health must keep answering (exit status 1
    otherwise)."""
    import shutil

    from sounding_client import Client

    from sounding.evaluation import fuzz
    from sounding.evaluation.harness import provenance
    from sounding.stack import Stack

    settings = Settings()
    settings = settings.model_copy(update={"data_dir": settings.cache_dir / "eval" / "fuzz"})
    shutil.rmtree(settings.data_dir, ignore_errors=True)
    env = {"SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]'}
    corpus = Path(__file__).resolve().parents[2] / "examples" / "demo-corpus.jsonl"
    with Stack(settings, env=env, log_dir=settings.data_dir / "logs") as stack:
        with Client(settings.address, timeout=1800) as client:
            pools = fuzz.prepare(client, list(_read_documents(corpus)), settings.models.address)
        processes = fuzz.stack_processes(stack.orchestrator.pid, stack.models.pid)
        with progress_bar(console) as progress:
            task = progress.add_task("fuzzing", total=requests)
            result = fuzz.run(
                settings.address,
                settings.models.address,
                requests,
                pools,
                seed,
                concurrency,
                alive=lambda: fuzz.still_alive(processes),
                progress=lambda sent: progress.update(task, completed=sent),
            )
    result = {"provenance": provenance(settings, seed), "concurrency": concurrency, **result}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
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
    seed: int = typer.Option(0),
) -> None:
    """Retrieve, Observe, Inquire and ingest traffic at once on a supervised stack of its own (a
    fresh data directory) for `duration` seconds, memory sampled; with --kills, the three
    processes are killed in turn at a quarter, half and three quarters of the run. Afterwards
    every acknowledged observation, document and session must be there."""
    import shutil

    from sounding_client import Client

    from sounding.evaluation import load
    from sounding.evaluation.harness import provenance
    from sounding.stack import Stack

    settings = Settings()
    settings = settings.model_copy(update={"data_dir": settings.cache_dir / "eval" / "load"})
    shutil.rmtree(settings.data_dir, ignore_errors=True)
    source = (
        data / "corpus.jsonl"
        if data
        else Path(__file__).resolve().parents[2] / "examples" / "demo-corpus.jsonl"
    )
    documents = []
    for document in _read_documents(source):
        documents.append(
            {
                "id": document.get("_id", document.get("id")),
                "title": document.get("title", ""),
                "text": document["text"],
            }
        )
        if len(documents) == corpus_limit:
            break
    queries = load.queries_from(data / "queries.jsonl" if data else None)
    env = {"SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]'}
    stack = Stack(settings, env=env, log_dir=settings.data_dir / "logs")
    try:
        _start(stack)
        stack.supervise()
        with Client(settings.address, timeout=1800) as client:
            client.create_collection(load.RETRIEVE_COLLECTION)
            with progress_bar(console) as progress:
                task = progress.add_task(f"ingesting {len(documents)} documents", total=len(documents))
                for report in client.ingest(load.RETRIEVE_COLLECTION, documents, batch_size=64):
                    progress.update(task, completed=report.total_documents)
            client.create_collection(load.INGEST_COLLECTION)
        planned = (
            [
                load.Kill(duration * share, what)
                for share, what in ((0.25, "sidecar"), (0.5, "worker"), (0.75, "orchestrator"))
            ]
            if kills
            else []
        )
        with progress_bar(console) as progress:
            task = progress.add_task("traffic", total=duration)
            result = load.run(
                stack,
                lambda: Client(settings.address, timeout=120),
                queries,
                duration,
                retrieve_streams,
                inquiry_sessions,
                hyde_every,
                kills=planned,
                seed=seed,
                progress=lambda elapsed: progress.update(task, completed=min(elapsed, duration)),
            )
    finally:
        with console.status("stopping the stack"):
            stack.stop()
    result = {
        "provenance": provenance(settings, seed),
        "corpus": str(source),
        "documents": len(documents),
        **result,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: result[k] for k in ("calls", "errors", "kills", "verification", "memory")}
    console.print_json(json.dumps(summary))
    console.print(f"written to {out}")


@eval_app.command("inquiry")
def eval_inquiry(
    task: str = typer.Option("bulls-and-cows", help="bulls-and-cows or hypotheses"),
    secrets: str = typer.Option("all", help="bulls-and-cows: 'all' (5,040 secrets) or a JSON list"),
    policy: str = typer.Option(
        "eig",
        help="bulls-and-cows: the policy under test (naive and "
        "random_consistent run too); hypotheses compares eig with both fixed orders",
    ),
    comparison_games: int = typer.Option(
        0, help="bulls-and-cows: games for the comparison policies (0: all)"
    ),
    games: int = typer.Option(100, help="hypotheses: secrets played per policy and noise level"),
    hypotheses: int = typer.Option(1000, help="hypotheses: number of hypotheses"),
    questions: int = typer.Option(200, help="hypotheses: number of attribute questions"),
    noise: str = typer.Option("0,0.1", help="hypotheses: comma-separated answer noise levels"),
    target_confidence: float = typer.Option(0.95, help="hypotheses: confidence to reach"),
    out: Path = typer.Option(..., help="where to write the JSON result"),
    address: str = typer.Option(None, help="a running orchestrator; default starts a stack"),
) -> None:
    """Play inquiry games through the gRPC API (the harness is client and oracle)."""
    from sounding_client import Client

    from sounding.evaluation import inquiry
    from sounding.stack import serving

    if task not in ("bulls-and-cows", "hypotheses"):
        raise typer.BadParameter("bulls-and-cows or hypotheses", param_hint="--task")
    try:
        noise_levels = tuple(float(level) for level in noise.split(","))
    except ValueError:
        raise typer.BadParameter("comma-separated numbers", param_hint="--noise") from None
    chosen = inquiry.load_secrets(secrets) if task == "bulls-and-cows" else []
    settings = Settings()
    with serving(settings, address) as running, Client(running, timeout=600) as client:
        if task == "bulls-and-cows":
            result = inquiry.bulls_and_cows(client, chosen, policy, console, comparison_games or None)
            summary = {
                k: {m: v[m] for m in ("solved", "mean_turns", "max_turns")}
                for k, v in result["policies"].items()
            }
        else:
            result = inquiry.hypotheses(
                client, console, hypotheses, questions, games, noise_levels, target_confidence
            )
            summary = {
                name: {"reduction": v["eig_question_reduction"]}
                | {p: v["policies"][p]["mean_questions_where_all_reached"] for p in v["policies"]}
                for name, v in result["settings"].items()
            }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    console.print_json(json.dumps(summary))
    console.print(f"written to {out}")


if __name__ == "__main__":
    sys.exit(app())
