import numpy as np
import pytest
from sounding.core.tool_routing import (
    NO_ROUTE,
    CentroidBank,
    FlagReason,
    LabelTier,
    Route,
    detect,
    fold,
    parse_teacher,
    teacher_messages,
    tier_for,
)

pytestmark = pytest.mark.unit


def test_a_tool_without_exemplars_is_its_description():
    assert fold([3.0, 4.0], np.empty((0, 2)), 2.0) == pytest.approx([0.6, 0.8])


def test_the_fold_is_the_weighted_mean_of_description_and_exemplars_made_unit():
    # d = (1, 0) counted twice, exemplars (0, 1) and (0, 2) -> unit (0, 1) each:
    # (2 * (1, 0) + (0, 1) + (0, 1)) / 4 = (0.5, 0.5) -> (1, 1) / sqrt 2.
    centroid = fold([1.0, 0.0], [[0.0, 1.0], [0.0, 2.0]], description_weight=2.0)
    assert centroid == pytest.approx([2**-0.5, 2**-0.5])
    # With weight 0 the description no longer counts.
    assert fold([1.0, 0.0], [[0.0, 1.0]], description_weight=0.0) == pytest.approx([0.0, 1.0])


def test_more_exemplars_pull_a_centroid_further_from_its_description():
    one = fold([1.0, 0.0], [[0.0, 1.0]], 3.0)
    three = fold([1.0, 0.0], [[0.0, 1.0]] * 3, 3.0)
    assert three[1] > one[1] > 0


def test_the_bank_ranks_by_cosine_with_the_margin_over_the_second():
    bank = CentroidBank.folded(
        {"weather": [1.0, 0.0, 0.0], "search": [0.0, 1.0, 0.0], "shell": [0.0, 0.0, 1.0]},
        {},
        description_weight=1.0,
    )
    route = bank.rank([0.9, 0.3, 0.0], top_k=2)
    assert route.ok and [name for name, _ in route.candidates] == ["weather", "search"]
    scores = [s for _, s in route.candidates]
    assert scores == pytest.approx([0.9 / np.hypot(0.9, 0.3), 0.3 / np.hypot(0.9, 0.3)], abs=1e-6)
    assert route.top1 == "weather" and route.margin == pytest.approx(scores[0] - scores[1])


def test_ranking_among_offered_tools_skips_the_others_and_unknown_names():
    bank = CentroidBank(["a", "b"], [[1.0, 0.0], [0.0, 1.0]])
    route = bank.rank([1.0, 0.0], top_k=5, among=["b", "missing"])
    assert route.candidates == (("b", 0.0),) and route.margin == 0.0


def test_an_empty_bank_or_offer_cannot_rank():
    empty = CentroidBank.folded({}, {}, 1.0)
    assert empty.rank([1.0, 0.0], top_k=3) == NO_ROUTE
    assert CentroidBank(["a"], [[1.0]]).rank([1.0], top_k=3, among=["nope"]) == NO_ROUTE
    assert NO_ROUTE.top1 == "" and NO_ROUTE.margin == 0.0 and not NO_ROUTE.ok


def test_exemplars_move_a_tools_rank():
    descriptions = {"weather": [1.0, 0.0], "calendar": [0.8, 0.6]}
    request = [0.5, 0.866]  # closer to calendar's description ...
    assert CentroidBank.folded(descriptions, {}, 1.0).rank(request, 1).top1 == "calendar"
    # ... until weather has been confirmed for requests like it.
    learned = CentroidBank.folded(descriptions, {"weather": [request] * 4}, 1.0)
    assert learned.rank(request, 1).top1 == "weather"


ROUTE = Route((("weather", 0.8), ("search", 0.5)), ok=True, margin=0.3)


@pytest.mark.parametrize(
    "used, route, expected",
    [
        ("shell", ROUTE, FlagReason.FALLBACK),
        ("shell", NO_ROUTE, FlagReason.FALLBACK),
        ("search", ROUTE, FlagReason.DISAGREEMENT),
        ("weather", ROUTE, FlagReason.NONE),
        # Without a ranker only the fallback heuristic flags.
        ("search", NO_ROUTE, FlagReason.NONE),
    ],
)
def test_detection(used, route, expected):
    assert detect(used, route, fallback_tools={"shell", "fs"}) == expected


REGISTERED = {"weather", "search"}


@pytest.mark.parametrize(
    "margin, expected",
    # Binary fractions: "at the floor" is exactly equal, so a `>` in place of `>=` fails.
    [(0.375, LabelTier.FREE), (0.25, LabelTier.FREE), (0.125, LabelTier.TEACHER)],
)
def test_the_oracle_labels_free_at_or_above_the_margin_floor_and_escalates_below(margin, expected):
    route = Route((("weather", 0.75), ("search", 0.75 - margin)), ok=True, margin=margin)
    assert tier_for(route, 0.25, "search", None, REGISTERED, {"shell"}, False) == expected


def test_the_margin_is_over_the_second_best_tool_however_few_are_asked_for():
    bank = CentroidBank(["a", "b", "c"], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    query = [0.8, 0.6]
    assert bank.rank(query, 1).margin == bank.rank(query, 3).margin == pytest.approx(0.2)
    assert bank.rank(query, 1).candidates == (("a", pytest.approx(0.8)),)
    assert CentroidBank(["a"], [[1.0, 0.0]]).rank(query, 5).margin == pytest.approx(0.8)


def test_a_ranker_that_cannot_rank_escalates():
    assert tier_for(NO_ROUTE, 0.0, "shell", None, REGISTERED, {"shell"}, False) == LabelTier.TEACHER


@pytest.mark.parametrize(
    "used, success, trust, expected",
    [
        ("search", True, True, LabelTier.TRUSTED),
        ("search", None, True, LabelTier.TEACHER),  # success unknown: not trusted
        ("search", False, True, LabelTier.TEACHER),
        ("shell", True, True, LabelTier.TEACHER),  # a fallback is never its own label
        ("unregistered", True, True, LabelTier.TEACHER),
        ("search", True, False, LabelTier.TEACHER),  # the option off
    ],
)
def test_trusting_successful_uses_of_registered_tools(used, success, trust, expected):
    low = Route((("weather", 0.5), ("search", 0.49)), ok=True, margin=0.01)
    assert tier_for(low, 0.1, used, success, REGISTERED, {"shell"}, trust) == expected


def test_the_teacher_is_asked_for_a_name_among_the_candidates():
    system, user = teacher_messages("rain tomorrow?", [("weather", "the forecast"), ("search", "the web")])
    assert "- weather: the forecast\n- search: the web" in system["content"]
    assert user == {"role": "user", "content": "rain tomorrow?"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("weather", "weather"),
        ("  `weather`.\n", "weather"),
        ('"search"', "search"),
        ("none", None),
        ("Weather", None),  # names are exact
        ("weather or search", None),
        ("I would use weather", None),
        ("", None),
    ],
)
def test_the_teachers_answer_is_parsed_strictly(text, expected):
    assert parse_teacher(text, {"weather", "search"}) == expected


def test_the_decline_word_is_a_decline_even_when_a_tool_bears_it():
    assert parse_teacher("none", {"none", "search"}) is None
