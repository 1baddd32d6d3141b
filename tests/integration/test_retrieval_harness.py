"""`sounding eval retrieval` on a tiny BEIR directory against the live stack: every service
system and in-process reference (LanceDB's hybrid search among them) ranks each query; an
interrupted run resumes from its journal."""

import json

import pytest
from rich.console import Console
from sounding.evaluation import retrieval
from sounding.evaluation.journal import read_journal

from .conftest import write_tiny_corpus

pytestmark = pytest.mark.integration

QUERIES = {
    "q1": "how do ships measure water depth",
    "q2": "how does the moon pull the tides of the sea",
    "q3": "x" * 5000,
}
QRELS = {"q1": "sonar", "q2": "tide", "q3": "bread"}


def write_beir(path):
    write_tiny_corpus(path)
    (path / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t, "metadata": {}}) for q, t in QUERIES.items()) + "\n"
    )
    (path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items())
    )


def test_every_system_ranks_each_query_and_a_run_resumes_from_its_journal(stack, tmp_path):
    data = tmp_path / "tinybeir"
    write_beir(data)
    settings = stack.settings.model_copy(update={"data_dir": tmp_path / "harness"})
    address = stack.settings.address
    console = Console(quiet=True)
    with pytest.raises(ValueError, match="1 of 3 queries are longer"):
        retrieval.run(data, "test", address, False, settings, console)

    journal = tmp_path / "run.json.journal.jsonl"
    first = retrieval.run(
        data, "test", address, False, settings, console, long_queries="skip", journal=journal
    )
    assert first["long_queries"] == {"limit_chars": 4096, "longer": 1, "handling": "skip", "measured": 2}
    assert set(first["systems"]) == {
        "dense",
        "lexical",
        "fused",
        "ref_bm25s",
        "ref_minilm",
        "ref_rrf",
        "ref_lancedb_hybrid",
    }
    for name, ranking in first["rankings"].items():
        assert set(ranking) == {"q1", "q2"}, name
        assert ranking["q1"][0] == "sonar" and ranking["q2"][0] == "tide", name
    header = {"data": str(data), "split": "test", "long_queries": "skip", "background_load": 0.0}
    assert set(read_journal(journal, header)) == {"q1", "q2"}

    # A run over the same journal measures nothing again: every query is taken from it.
    again = retrieval.run(
        data, "test", address, False, settings, console, long_queries="skip", journal=journal
    )
    assert again["resumed_queries"] == 2 and again["rankings"] == first["rankings"]
