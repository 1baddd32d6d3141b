"""`sounding eval retrieval` on a tiny BEIR directory against the live stack: every service
system and in-process reference (LanceDB's hybrid search among them) ranks each query; an
interrupted run resumes from its journal."""

import json

import pytest
from rich.console import Console
from sounding_bench import retrieval
from sounding_bench.journal import read_journal

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
        retrieval.run(retrieval.RetrievalRun(data, "test", address), settings, console)

    journal = tmp_path / "run.json.journal.jsonl"
    spec = retrieval.RetrievalRun(data, "test", address, long_queries="skip", journal=journal)
    first = retrieval.run(spec, settings, console)
    assert first["long_queries"] == {"limit_chars": 4096, "longer": 1, "handling": "skip", "measured": 2}
    assert set(first["systems"]) == {
        "dense",
        "lexical",
        "fused",
        "fused_rrf",
        "ref_bm25s",
        "ref_minilm",
        "ref_rrf",
        "ref_lancedb_hybrid",
    }
    for name, ranking in first["rankings"].items():
        assert set(ranking) == {"q1", "q2"}, name
        assert ranking["q1"][0] == "sonar" and ranking["q2"][0] == "tide", name
    header = {
        "data": str(data),
        "split": "test",
        "long_queries": "skip",
        "background_load": 0.0,
        "learn_split": None,
    }
    assert set(read_journal(journal, header)) == {"q1", "q2"}

    # A run over the same journal measures nothing again: every query is taken from it.
    again = retrieval.run(spec, settings, console)
    assert again["resumed_queries"] == 2 and again["rankings"] == first["rankings"]


SHIPS = ("ship", "trawler", "ferry", "yacht", "tanker", "tug", "liner", "barge", "frigate", "dinghy")
MEASURES = ("measure", "find", "gauge", "check", "know", "tell")


def test_learning_from_the_train_outcomes_fits_a_query_adapter_and_measures_it(stack, tmp_path):
    # Agents asking how a vessel finds the depth always need the chart (a "depth below a datum"),
    # which the base embeddings rank below the sonar page.
    data = tmp_path / "depthbeir"
    write_beir(data)
    with (data / "corpus.jsonl").open("a") as corpus:  # a collection of this test's own
        corpus.write(
            json.dumps({"_id": "kelp", "title": "Kelp", "text": "Kelp forests grow in cold seas."}) + "\n"
        )
    train = {
        f"t{i}-{j}": f"how does a {ship} {verb} the water depth"
        for i, ship in enumerate(SHIPS)
        for j, verb in enumerate(MEASURES)
    }
    with (data / "queries.jsonl").open("a") as queries:
        queries.write(
            "".join(json.dumps({"_id": q, "text": t, "metadata": {}}) + "\n" for q, t in train.items())
        )
    (data / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\tchart\t1\n" for q in train)
    )
    settings = stack.settings.model_copy(update={"data_dir": tmp_path / "harness"})

    def measured() -> dict:
        spec = retrieval.RetrievalRun(
            data, "test", stack.settings.address, long_queries="skip", learn_split="train"
        )
        return retrieval.run(spec, settings, Console(quiet=True))

    result = measured()
    learning = result["learning"]
    assert learning["outcomes_recorded"] == len(train) == 60
    assert learning["deployed"] and learning["version"] == "1"
    d = learning["diagnostics"]
    assert d["holdout_ndcg_at_10_candidate"] > d["holdout_ndcg_at_10_base"]
    assert {"dense_learned", "fused_learned", "fused_learned_rrf"} <= set(result["systems"])
    # The base systems still rank the sonar page first for the test query about depth; the
    # adapter's ranking puts the chart above where the base ranking had it.
    assert result["rankings"]["dense"]["q1"][0] == "sonar"
    learned, base = result["rankings"]["dense_learned"]["q1"], result["rankings"]["dense"]["q1"]
    assert learned.index("chart") < base.index("chart")
    assert "fused_learned_ndcg_minus_ref_lancedb_hybrid" in result["comparisons"]
    assert "fused_learned_minus_fused_learned_rrf_ndcg" in result["comparisons"]
    # A second run measures the adapter already deployed instead of replaying the outcomes again.
    again = measured()
    assert again["learning"] == {"split": "train", "reused_adapter_version": 1}
    assert again["rankings"]["dense_learned"] == result["rankings"]["dense_learned"]
