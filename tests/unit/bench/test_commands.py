"""The benchmark wing's commands join `sounding` through the `sounding.commands` entry point."""

import pytest
from sounding.cli import with_plugins
from typer.testing import CliRunner

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("command", "listed"), [(["eval"], "retrieval"), (["models"], "train-nli"), ([], "demo")]
)
def test_the_bench_adds_its_commands_through_the_entry_point(command, listed):
    shown = CliRunner().invoke(with_plugins(), [*command, "--help"])
    assert shown.exit_code == 0, shown.output
    assert listed in shown.output
