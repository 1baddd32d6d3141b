import pytest
from sounding.core import expansion as core
from sounding.core.expansion import Gap

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("where is parseHttpRequest defined", ["parseHttpRequest"]),
        ("read_config fails on empty files", ["read_config"]),
        ("who calls os.path.join()", ["os.path.join"]),
        ("call load() twice", ["load"]),
        ("HttpClient retries", ["HttpClient"]),
        ("how do ships measure depth", []),
    ],
)
def test_identifiers_are_found_in_their_usual_spellings(query, expected):
    assert core.identifiers(query) == expected


def test_identifier_variants_respell_and_introduce_the_name():
    variants = core.identifier_variants("parseHttpRequest")
    assert variants[:3] == ["parse_http_request", "ParseHttpRequest", "parse http request"]
    assert "def parse_http_request" in variants and "class ParseHttpRequest" in variants
    assert "parseHttpRequest" not in variants  # the original spelling is not a variant


def test_code_pattern_queries_take_variants_of_every_identifier_in_turn():
    queries = core.code_pattern_queries("does read_config call parseJson", 4)
    assert queries == [
        "does readConfig call parseJson",
        "does read_config call parse_json",
        "does ReadConfig call parseJson",
        "does read_config call ParseJson",
    ]
    assert core.code_pattern_queries("no identifiers here", 4) == []


def test_gaps_name_their_mitigations_and_come_most_severe_first():
    gaps = core.detect_gaps(
        "is parseJson slow on breast cancer cells",
        ["parsejson", "breast cancer cells", "slow"],
        {"slow", "cancer cells"},
        disagreement=0.4,
        near_threshold=0.3,
    )
    by_kind = {g.kind: g for g in gaps}
    assert by_kind["identifiers"].mitigation == "code_pattern"
    assert by_kind["vocabulary_mismatch"].mitigation == "synonym"
    assert by_kind["vocabulary_mismatch"].severity == pytest.approx(2 / 3)
    assert by_kind["specific_phrasing"].severity == pytest.approx(0.6 / 3)
    assert by_kind["broad_terms"].severity == pytest.approx(0.5 / 3)  # only known one-word terms
    assert by_kind["arm_disagreement"].severity == 0.4
    assert by_kind["crowded_borderline"].severity == 0.5
    assert [g.severity for g in gaps] == sorted((g.severity for g in gaps), reverse=True)


def test_no_signals_no_gaps():
    assert core.detect_gaps("plain", ["plain"], {"plain"}, 0.0, 0.0) == [
        Gap("broad_terms", "one-word terms ['plain'] may be discussed in more specific terms", 0.5, "hyponym")
    ]
    assert core.detect_gaps("", [], set(), 0.0, 0.0) == []


def test_severity_levels_follow_the_thirds():
    assert [Gap("k", "", s, "synonym").level for s in (0.1, 0.5, 0.7)] == ["low", "medium", "high"]


def test_the_strategy_of_the_most_severe_usable_gap_is_chosen():
    gaps = [Gap("a", "", 0.9, "synonym"), Gap("b", "", 0.5, "hyponym"), Gap("c", "", 0.2, "code_pattern")]
    assert core.select_strategy(gaps, ["hyponym", "code_pattern"], []) == ("hyponym", gaps[1])
    assert core.select_strategy(gaps, core.STRATEGIES, ["synonym", "hyponym"]) == ("code_pattern", gaps[2])
    # Without a targeted strategy left, a general rewrite if allowed; else nothing.
    assert core.select_strategy(gaps, ["synonym", "reformulation"], ["synonym"]) == ("reformulation", None)
    assert core.select_strategy(gaps, ["synonym"], ["synonym"]) is None


@pytest.mark.parametrize(
    ("recall", "iteration", "spent", "expected"),
    [
        (0.8, 0, 0, "recall_reached"),
        (0.5, 3, 1, "max_iterations"),
        (0.5, 1, 5, "budget_spent"),
        (0.5, 1, 1, None),
    ],
)
def test_the_loop_stops_on_recall_iterations_or_budget(recall, iteration, spent, expected):
    assert core.stop_reason(recall, 0.7, iteration, 3, spent, 5) == expected


def test_a_merge_lowers_the_miss_rate_by_the_share_it_added():
    assert core.miss_rate_after(0.6, 0, 10) == 0.6
    assert core.miss_rate_after(0.6, 5, 10) == pytest.approx(0.3)
    assert core.miss_rate_after(0.6, 20, 10) == 0.0
