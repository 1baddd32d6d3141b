"""The `sounding` command line. Errors end a command with one line on stderr (the status code and
field violations of a failed call) and exit status 1; `--debug` shows the traceback instead.

Other distributions add commands through the `sounding.commands` entry point group: each entry is
a function given the app to register on (sounding-bench adds `eval`, `models` and `demo`)."""

from __future__ import annotations

import functools
import logging
import os
import sys
from importlib import metadata
from pathlib import Path

import typer

from sounding.cli import calls, serve

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Sounding: retrieval that states what it may have missed, ask-or-answer inquiry, outcome "
    "learning and calibration, over gRPC.",
    epilog="An error ends a command with one line on stderr and exit status 1 (--debug: the traceback).",
)
app.add_typer(serve.serve_app, name="serve")
token_app = typer.Typer(help="Bearer tokens of the public port (README, Security).")
token_app.command("create")(calls.token_create)
app.add_typer(token_app, name="token")
for command in (
    serve.health,
    serve.up,
    calls.ingest,
    calls.retrieve,
    calls.calibrate,
    calls.limits,
    calls.collections,
    calls.mcp,
):
    app.command()(command)

_debug = False


def _show_version(shown: bool) -> None:
    if shown:
        print(f"sounding {metadata.version('sounding')}")
        raise typer.Exit()


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="show the traceback of an error"),
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    global _debug
    _debug = debug


def describe(error: BaseException) -> str:
    """One line: a failed call's status code, message and field violations; else the error."""
    from sounding_client import SoundingError

    if isinstance(error, SoundingError):
        violations = "; ".join(f"{v.field}: {v.description}" for v in error.field_violations)
        return f"{error.code.name}: {error.message}" + (f" ({violations})" if violations else "")
    message = str(error).strip().replace("\n", " ") or type(error).__name__
    return message if isinstance(error, RuntimeError | OSError) else f"{type(error).__name__}: {message}"


@functools.cache
def with_plugins() -> typer.Typer:
    """The app with every installed distribution's commands added (`sounding.commands` entry
    points), loaded when the command runs rather than on import, so a plugin may import from here."""
    for plugin in metadata.entry_points(group="sounding.commands"):
        plugin.load()(app)
    return app


class _LogFile(logging.FileHandler):
    """A log file created, with its directory, on the first record."""

    def __init__(self, path: Path):
        super().__init__(path, delay=True)

    def _open(self):
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


def quiet_terminal() -> None:
    """A command's terminal shows Sounding's own lines: the notices of the libraries it runs
    (Python warnings, library loggers) go to `<data dir>/logs/cli.log`, and LanceDB's native
    logger, which writes to the terminal itself, keeps to errors. `serve` logs everything to its
    output instead (`telemetry.configure_logging`)."""
    from sounding.settings.config import Settings

    data_dir = os.environ.get("SOUNDING_DATA_DIR") or Settings.model_fields["data_dir"].default
    logging.captureWarnings(True)
    logging.basicConfig(
        level=logging.INFO,
        handlers=[_LogFile(Path(data_dir) / "logs" / "cli.log")],
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        force=True,
    )
    os.environ.setdefault("LANCEDB_LOG", "error")


def main() -> None:
    quiet_terminal()
    try:
        with_plugins()()  # usage errors are click's (exit status 2); typer.Exit ends as SystemExit
    except Exception as error:  # every other error ends as one line, unless --debug
        if _debug:
            raise
        print(f"error: {describe(error)}", file=sys.stderr)
        sys.exit(1)
