"""Commands that call a running orchestrator (ingest, retrieve, collections, the MCP server) and the local
ones about its configuration (limits, token create)."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path

import typer

from sounding.cli.common import ADDRESS, TLS_CA, TLS_CERT, TLS_KEY, TOKEN, connect, console, read_documents
from sounding.cli.show import print_retrieve
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings


# The choices typer validates and --help lists; tests/unit/cli/test_choices.py keeps each equal to
# the names the service accepts.
class Arm(StrEnum):
    dense = "dense"
    lexical = "lexical"
    hyde = "hyde"
    query2doc = "query2doc"
    multi_query = "multi_query"
    grounded = "grounded"


class FusionMethod(StrEnum):
    min_max = "min_max"
    rrf = "rrf"


class ExpansionStrategy(StrEnum):
    synonym = "synonym"
    hypernym = "hypernym"
    hyponym = "hyponym"
    related_concept = "related_concept"
    code_pattern = "code_pattern"
    negative_sampling = "negative_sampling"
    reformulation = "reformulation"


class CalibrationTarget(StrEnum):
    bandit = "bandit"
    miss_rate = "miss_rate"
    stop_threshold = "stop_threshold"
    confidence = "confidence"
    query_adapter = "query_adapter"


class Role(StrEnum):
    reader = "reader"
    writer = "writer"
    admin = "admin"


def ingest(
    path: Path = typer.Argument(..., exists=True, help="FILE.jsonl or a directory of .txt/.md files"),
    collection: str = typer.Option(..., "--collection", "-c", help="the collection to ingest into"),
    batch_size: int = typer.Option(64, min=1, max=2000, help="documents per IngestDocuments message"),
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """Ingest documents, creating the collection if needed, with a progress bar."""
    from sounding_client import SoundingError

    documents = list(read_documents(path))
    with connect(address, token, tls_ca, tls_cert, tls_key) as client:
        try:
            client.get_collection(collection)
        except SoundingError as error:
            if error.reason != "COLLECTION_NOT_FOUND":
                raise
            client.create_collection(collection)
        elapsed = 0.0
        with progress_bar(console) as progress:
            task = progress.add_task(f"ingesting into {collection}", total=len(documents))
            for report in client.ingest(collection, documents, batch_size=batch_size):
                progress.update(task, completed=report.total_documents)
                elapsed = report.elapsed_seconds
        info = client.get_collection(collection)
    rate = f", {len(documents) / elapsed:.1f} docs/s" if elapsed else ""
    console.print(
        f"{collection}: {info.document_count} documents, {info.chunk_count} chunks ({elapsed:.1f} s{rate})"
    )


def retrieve(
    query: str = typer.Argument(..., help="the query"),
    collection: str = typer.Option(..., "--collection", "-c", help="the collection to search"),
    top_k: int = typer.Option(5, "--top-k", "-k", min=1, max=1000, help="hits in the final ranking"),
    arm: list[Arm] = typer.Option([], "--arm", help="run only these arms (repeatable; default: planned)"),
    max_iterations: int = typer.Option(
        None, help="expansion loop iterations (0: off; default from settings)"
    ),
    min_recall: float = typer.Option(None, help="expand while the estimated recall is below this"),
    expansion: list[ExpansionStrategy] = typer.Option(
        [], "--expansion", help="allowed expansion strategies (repeatable; default: all)"
    ),
    learned_ranking: bool = typer.Option(
        True, help="search with the collection's query adapter, if Calibrate deployed one"
    ),
    fusion: FusionMethod = typer.Option(
        None, help="how the arms' rankings are fused (default: the deployment's, or the adapter's)"
    ),
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """Stream a Retrieve, printing each event as it arrives."""
    from sounding_client import ExpansionOptions

    options = ExpansionOptions(
        min_recall=min_recall, max_iterations=max_iterations, strategies=tuple(e.value for e in expansion)
    )
    with connect(address, token, tls_ca, tls_cert, tls_key) as client:
        print_retrieve(
            client,
            collection,
            query,
            top_k,
            [a.value for a in arm],
            options,
            learned_ranking,
            fusion.value if fusion else None,
        )


def collections(
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """List collections."""
    with connect(address, token, tls_ca, tls_cert, tls_key) as client:
        for c in client.list_collections():
            console.print(
                f"{c.name}: {c.document_count} documents, {c.chunk_count} chunks, {c.embedding_model}"
            )


def limits(markdown: bool = typer.Option(False, help="the README's table, in Markdown")) -> None:
    """Every limit on what a client can make Sounding do: its setting, default and current value."""
    from rich.table import Table

    from sounding.settings.limits import limit_rows

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


def calibrate(
    target: CalibrationTarget = typer.Argument(..., help="what to fit from the recorded outcomes"),
    task: str = typer.Option("", help="stop_threshold: the llm task the threshold applies to (dc, sp, gn)"),
    regime: str = typer.Option("", help="stop_threshold: the decoding regime (normal or collapse)"),
    stop_rule: str = typer.Option("", help="stop_threshold: the rule to fit (default robust_mi_risk)"),
    collection: str = typer.Option("", help="query_adapter: the collection to fit it for"),
    one_state_per_session: bool = typer.Option(
        False, help="stop_threshold: fit on one state per recorded session (episode-level calibration)"
    ),
    threshold_rule: str = typer.Option(
        "", help="stop_threshold: fixed_sequence (default, the bound holds) or largest_prefix (the spec's)"
    ),
    plot: Path = typer.Option(None, help="draw the fit's diagram into this PNG (the [plot] extra)"),
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """Run a Calibrate and print its report; with --plot, draw the curves the server returned."""
    from sounding_client import CalibrationReport

    from sounding.settings import extras

    if plot is not None:
        extras.require(extras.DRAWING)
    report = None
    with connect(address, token, tls_ca, tls_cert, tls_key) as client:
        events = client.calibrate(
            target.value,
            task=task,
            regime=regime,
            stop_rule=stop_rule,
            collection=collection,
            one_state_per_session=one_state_per_session,
            threshold_rule=threshold_rule,
        )
        for event in events:
            if isinstance(event, CalibrationReport):
                report = event
            else:
                console.print(f"{event.stage} ({event.fraction:.0%})", style="dim", highlight=False)
    if report is None:
        raise RuntimeError("Calibrate ended without its report")
    state = "deployed" if report.deployed else "not deployed"
    console.print(
        f"{report.target} v{report.version} ({state}), {report.sample_size} samples: {report.summary}"
    )
    for name, value in sorted(report.diagnostics.items()):
        console.print(f"  {name} = {value:.4g}", highlight=False)
    if plot is not None:
        if not report.curves:
            raise RuntimeError(f"Calibrate({target.value}) returns no curves to draw")
        from sounding.cli.plots import calibration_png

        plot.write_bytes(calibration_png(report.curves, f"Calibrate({target.value}) v{report.version}"))
        console.print(f"diagram written to {plot}")


def token_create(
    tenant: str = typer.Option(..., help="the tenant the token acts for"),
    role: Role = typer.Option(Role.reader, help="what the token may do (each role includes the ones before)"),
    file: Path = typer.Option(..., help="the token file to add it to (created if missing)"),
) -> None:
    """Make a token for a tenant and role: its hash goes into the token file (a running server
    picks it up within a second), the token itself is printed once and stored nowhere."""
    import datetime
    import tempfile

    from pydantic import ValidationError

    from sounding.serving import auth

    token, digest = auth.new_token()
    try:
        auth.TokenEntry(sha256=digest, tenant=tenant, role=role.value)
    except ValidationError as error:
        first = error.errors()[0]
        raise typer.BadParameter(first["msg"], param_hint=f"--{first['loc'][0]}") from None
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


class McpTransport(StrEnum):
    stdio = "stdio"
    http = "http"


def mcp(
    transport: McpTransport = typer.Option(
        McpTransport.stdio, help="stdio, or streamable HTTP on --host/--port"
    ),
    host: str = typer.Option("127.0.0.1", help="http: the interface to listen on"),
    port: int = typer.Option(8000, min=1, max=65535, help="http: the port to listen on"),
    address: str = ADDRESS,
    token: str = TOKEN,
    tls_ca: Path = TLS_CA,
    tls_cert: Path = TLS_CERT,
    tls_key: Path = TLS_KEY,
) -> None:
    """Serve Sounding to MCP clients (desktop assistants, IDE agents): retrieve, verify_claim,
    report_outcome, route_tool and report_tool_use, and the collections as resources, calling the
    orchestrator at --address. Logs go to stderr (stdout is the stdio transport's)."""
    from sounding_client import AsyncClient

    from sounding.cli.mcp_server import build_server
    from sounding.runtime import telemetry

    settings = Settings()
    telemetry.configure_logging(settings.log_level, settings.log_format)

    def connect() -> AsyncClient:
        return AsyncClient(
            address or settings.address, token=token, ca_file=tls_ca, cert_file=tls_cert, key_file=tls_key
        )

    server = build_server(connect)
    if transport is McpTransport.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)
