"""Journals of long evaluations (resume where a run stopped)."""

import pytest
from sounding_bench import journal as journal_file

pytestmark = pytest.mark.unit

HEADER = {"task": "gn", "data": "train.json", "stop_rule": "all", "regime": "normal", "max_turns": 1}


def test_a_journal_returns_the_played_episodes_by_id(tmp_path):
    journal = tmp_path / "out.json.journal.jsonl"
    assert journal_file.read_journal(journal, HEADER) == {}
    journal_file.append_journal(journal, HEADER, {"id": "0", "states": [1]})
    journal_file.append_journal(journal, HEADER, {"id": "3", "states": [2]})
    assert journal_file.read_journal(journal, HEADER) == {
        "0": {"id": "0", "states": [1]},
        "3": {"id": "3", "states": [2]},
    }
    assert journal.read_text().count("header") == 1


def test_a_journal_written_with_other_settings_is_refused(tmp_path):
    journal = tmp_path / "out.json.journal.jsonl"
    journal_file.append_journal(journal, HEADER, {"id": "0"})
    with pytest.raises(journal_file.JournalMismatch, match="other settings"):
        journal_file.read_journal(journal, {**HEADER, "max_turns": 2})
