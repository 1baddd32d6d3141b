"""Journals of long evaluations: each finished unit (an episode, a query) is appended and
flushed as it ends, so a run that stops resumes where it was; a journal belongs to the settings
it was written with (its header), and one of other settings is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path


class JournalMismatch(ValueError):
    """A journal written with other settings than the run's."""


def read_journal(journal: Path, header: dict) -> dict[str, dict]:
    """The units a journal holds, by id; it must have been written with the same settings."""
    if not journal.exists():
        return {}
    lines = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    if lines and lines[0] != {"header": header}:
        raise JournalMismatch(
            f"{journal} was written with other settings ({lines[0].get('header')}); "
            "remove it or run with those settings"
        )
    return {record["id"]: record for record in lines[1:]}


def append_journal(journal: Path, header: dict, record: dict) -> None:
    """Appends one finished unit (the header first, on a new journal), flushed to disk."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    with journal.open("a") as file:
        if file.tell() == 0:
            file.write(json.dumps({"header": header}) + "\n")
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())
