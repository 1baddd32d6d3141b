"""The benchmark wing's commands, added to `sounding` through the `sounding.commands` entry point:
`sounding eval …` (the harnesses), `sounding models train-nli` and `sounding demo`."""

from __future__ import annotations

import typer

from sounding_bench.cli.demo import demo
from sounding_bench.cli.evaluate import eval_app
from sounding_bench.cli.models import models_app


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
    app.add_typer(models_app, name="models")
    app.command()(demo)
