"""Every `sounding eval`, `sounding models` and `sounding demo` command the READMEs show, and
every command a committed result records in its provenance, still parses: its subcommand exists
and it names only options the command has. (Parsed, not run: values are not converted, so paths
need not exist here.)"""

import json
import re
import shlex
from pathlib import Path

import pytest
import typer.main
from sounding.cli import with_plugins

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = (ROOT / "README.md", ROOT / "bench" / "README.md")
COMMAND = re.compile(r"sounding (?:eval|models|demo)\b[^`\n]*")
# A shown command with a placeholder or an elision is a shape, not a command line.
PLACEHOLDER = re.compile(r"…|<[^>]*>|\[|\]")


def shown_commands() -> list[str]:
    commands = set()
    for document in DOCUMENTS:
        for match in COMMAND.finditer(document.read_text()):
            line = match.group(0).split(" #")[0].strip()
            if not PLACEHOLDER.search(line) and line.split()[-1] not in {"--out", "--name"}:
                commands.add(line)
    return sorted(commands)


def recorded_commands() -> list[str]:
    commands = set()
    for path in (ROOT / "bench" / "results").rglob("*.json"):
        result = json.loads(path.read_text())
        provenance = result.get("provenance") if isinstance(result, dict) else None
        if provenance and provenance.get("command", "").startswith("sounding "):
            commands.add(provenance["command"])
    return sorted(commands)


def parse(line: str) -> tuple[str, list[str]]:
    """(the command reached, the options given); NoSuchOption or LookupError if it would fail."""
    command, parent, name = typer.main.get_command(with_plugins()), None, "sounding"
    args = shlex.split(line)[1:]
    while True:
        context = command.context_class(command, info_name=name, parent=parent)
        parser = command.make_parser(context)
        if not hasattr(command, "get_command"):
            options, rest, _ = parser.parse_args(args)
            return name, sorted(options)
        parser.allow_interspersed_args = False
        _, rest, _ = parser.parse_args(args)
        if not rest:
            return name, []  # a group alone shows its help
        sub = command.get_command(context, rest[0])
        if sub is None:
            raise LookupError(f"{name} has no command {rest[:1]}")
        command, parent, name, args = sub, context, rest[0], rest[1:]


def test_there_are_commands_to_check():
    assert len(shown_commands()) >= 20 and len(recorded_commands()) >= 20


@pytest.mark.parametrize("line", shown_commands() + recorded_commands())
def test_the_command_still_parses(line):
    parse(line)


def test_a_command_naming_an_option_it_lacks_does_not_parse():
    with pytest.raises(Exception, match="No such option: --bogus"):
        parse("sounding eval retrieval --data d --bogus x")
    with pytest.raises(LookupError, match="has no command"):
        parse("sounding eval retrieve --data d")
