import json

import numpy as np
import pytest
from sounding_bench import encoder

pytestmark = pytest.mark.unit


def figures(ndcg, p50, batch, documents):
    return {
        "ndcg@10": ndcg,
        "single_query_ms": {"latency_ms_p50": p50},
        "queries_per_s_batch_64": batch,
        "documents_per_s": documents,
    }


def test_onnx_fp32_is_the_default_when_it_holds_quality_and_is_faster():
    verdict = encoder.verdict(
        {
            "torch_fp32": figures(0.645, 30.0, 60.0, 10.0),
            "onnx_fp32": figures(0.645, 15.0, 75.0, 9.6),
            "onnx_int8": figures(0.643, 14.0, 80.0, 10.5),
        }
    )
    assert verdict["cpu_default"] == "onnx_fp32"
    assert verdict["against_torch_fp32"]["onnx_fp32"]["wins"]
    # int8 wins against torch, but not by the margin its different vectors must earn.
    assert verdict["against_torch_fp32"]["onnx_int8"]["wins"]


def test_int8_replaces_fp32_only_by_its_margin_and_only_holding_quality():
    fast_int8 = figures(0.643, 12.0, 90.0, 12.0)
    chosen = encoder.verdict(
        {
            "torch_fp32": figures(0.645, 30.0, 60.0, 10.0),
            "onnx_fp32": figures(0.645, 15.0, 75.0, 10.0),
            "onnx_int8": fast_int8,
        }
    )
    assert chosen["cpu_default"] == "onnx_int8"
    worse = encoder.verdict(
        {
            "torch_fp32": figures(0.645, 30.0, 60.0, 10.0),
            "onnx_fp32": figures(0.645, 15.0, 75.0, 10.0),
            "onnx_int8": {**fast_int8, "ndcg@10": 0.640},
        }
    )
    assert worse["cpu_default"] == "onnx_fp32"
    assert not worse["against_torch_fp32"]["onnx_int8"]["holds_quality"]


def test_torch_stays_when_onnx_is_slower_on_documents():
    verdict = encoder.verdict(
        {
            "torch_fp32": figures(0.645, 30.0, 60.0, 10.0),
            "onnx_fp32": figures(0.645, 15.0, 75.0, 9.4),
            "onnx_int8": figures(0.600, 14.0, 80.0, 9.0),
        }
    )
    assert verdict["cpu_default"] == "torch_fp32"
    assert verdict["against_torch_fp32"]["onnx_fp32"]["documents_ratio"] == 0.94


@pytest.fixture
def tiny(tmp_path):
    corpus = [{"_id": f"d{i}", "title": "", "text": f"document {i}"} for i in range(6)]
    queries = [{"_id": "q1", "text": "document 2"}, {"_id": "q2", "text": "document 4"}]
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td4\t1\n")
    return tmp_path


def one_hot(texts):
    """A text 'document N' (or anything ending in N) as the unit vector of axis N."""
    vectors = np.zeros((len(texts), 8), dtype=np.float32)
    vectors[np.arange(len(texts)), [int(t.split()[-1]) for t in texts]] = 1.0
    return vectors


def test_measure_ranks_each_encoders_own_vectors_and_times_every_path(tiny):
    class Console:
        def print(self, *_):
            pass

    spec = encoder.EncoderRun(tiny, "test", tiny / "cache")
    shifted = lambda texts: np.roll(one_hot(texts), 1, axis=0)  # noqa: E731  (rows misaligned)
    result = encoder.measure(spec, {"torch_fp32": one_hot, "wrong": shifted}, Console())
    assert (result["documents"], result["queries"]) == (6, 2)
    exact, wrong = result["encoders"]["torch_fp32"], result["encoders"]["wrong"]
    assert exact["ndcg@10"] == 1.0 and exact["per_query"] == {"q1": {"ndcg@10": 1.0}, "q2": {"ndcg@10": 1.0}}
    assert wrong["ndcg@10"] < 1.0
    for measured in (exact, wrong):
        assert measured["documents_per_s"] > 0 and measured["queries_per_s_batch_64"] > 0
        assert measured["single_query_ms"]["latency_ms_p50"] >= 0
