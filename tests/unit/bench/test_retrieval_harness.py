"""`sounding eval retrieval`'s handling of queries the service would refuse."""

import pytest
from sounding_bench.retrieval import fit_queries

pytestmark = pytest.mark.unit

QUERIES = {"a": "short", "b": "x" * 12, "c": "y" * 10}


def test_long_queries_stop_the_run_before_anything_is_ingested_with_their_count():
    with pytest.raises(ValueError, match="1 of 3 queries are longer than the service's 10-character limit"):
        fit_queries(QUERIES, 10, "fail")


def test_long_queries_are_cut_to_the_limit_or_left_out_as_asked():
    cut, record = fit_queries(QUERIES, 10, "truncate")
    assert cut == {"a": "short", "b": "x" * 10, "c": "y" * 10}
    assert record == {"limit_chars": 10, "longer": 1, "handling": "truncate", "measured": 3}
    kept, record = fit_queries(QUERIES, 10, "skip")
    assert list(kept) == ["a", "c"] and record["measured"] == 2
    assert fit_queries(QUERIES, 100, "fail")[0] == QUERIES
