"""The SciFact claims harness on tiny data: labels from the evidence annotation, NLI pairs from
rationale sentences, the target rule, the paired saving and the per-policy summary."""

import json

import numpy as np
import pytest
from sounding_bench import claims_inquiry, scifact_claims

pytestmark = pytest.mark.unit


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "qrels").mkdir()
    corpus = [
        {"_id": "d1", "title": "T1", "text": "Aspirin cut strokes. Bleeding rose. Dose mattered."},
        {"_id": "d2", "title": "T2", "text": "Statins lower LDL. Muscle pain was rare."},
    ]
    queries = [
        {
            "_id": "1",
            "text": "Aspirin reduces stroke.",
            "metadata": {"d1": [{"sentences": [0], "label": "SUPPORT"}]},
        },
        {
            "_id": "2",
            "text": "Statins raise LDL.",
            "metadata": {"d2": [{"sentences": [0], "label": "CONTRADICT"}]},
        },
        {"_id": "3", "text": "Aspirin cures colds.", "metadata": {}},
        {"_id": "4", "text": "Not in any split.", "metadata": {}},
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t1\n3\td1\t1\n")
    return tmp_path


def test_verdicts_come_from_the_evidence_annotation_and_none_is_not_enough_info(tiny):
    claims = scifact_claims.load_claims(tiny, "test")
    assert [(c.id, c.verdict, c.cited) for c in claims] == [
        ("1", "SUPPORT", ("d1",)),
        ("2", "CONTRADICT", ("d2",)),
        ("3", "NOT_ENOUGH_INFO", ("d1",)),
    ]
    assert claims[0].rationales == {"d1": (0,)}


def test_nli_pairs_label_rationales_by_verdict_and_other_sentences_neutral(tiny):
    claims = scifact_claims.load_claims(tiny, "test")
    pairs = scifact_claims.nli_pairs(claims, scifact_claims.read_documents(tiny), neutral_per_document=5)
    by_claim = {}
    for p in pairs:
        by_claim.setdefault(p.hypothesis, []).append((p.premise, p.label))
    assert ("Aspirin cut strokes.", "entailment") in by_claim["Aspirin reduces stroke."]
    assert ("Statins lower LDL.", "contradiction") in by_claim["Statins raise LDL."]
    assert {label for _, label in by_claim["Aspirin cures colds."]} == {"neutral"}
    assert len(by_claim["Aspirin cures colds."]) == 3  # every sentence of d1, none a rationale
    assert ("Bleeding rose.", "neutral") in by_claim["Aspirin reduces stroke."]


def test_nearest_uncited_ranks_by_cosine_and_skips_the_cited(tiny):
    documents = scifact_claims.read_documents(tiny)
    claims = scifact_claims.load_claims(tiny, "test")
    # d1 is nearer every claim than d2; claims 1 and 3 cite d1, claim 2 cites d2.
    vectors = {"T1. " + documents["d1"]["text"]: [1.0, 0.0], "T2. " + documents["d2"]["text"]: [0.6, 0.8]}

    def embed(texts):
        return np.array([vectors.get(t, [0.8, 0.6]) for t in texts])

    assert scifact_claims.nearest_uncited(claims, documents, embed, count=1) == {
        "1": ["d2"],
        "2": ["d1"],
        "3": ["d2"],
    }
    assert scifact_claims.nearest_uncited(claims, documents, embed, count=0) == {"1": [], "2": [], "3": []}


def test_uncited_documents_give_their_title_and_the_sentences_closest_in_words_as_neutral(tiny):
    documents = scifact_claims.read_documents(tiny)
    claims = scifact_claims.load_claims(tiny, "test")[:1]  # "Aspirin reduces stroke.", cites d1
    plain = scifact_claims.nli_pairs(claims, documents, neutral_per_document=1)
    pairs = scifact_claims.nli_pairs(claims, documents, neutral_per_document=1, uncited={"1": ["d2"]})
    added = pairs[len(plain) :]
    assert pairs[: len(plain)] == plain
    # d2's title, then the first of its sentences: neither shares a content word with the claim.
    assert [(p.premise, p.label) for p in added] == [("T2", "neutral"), ("Statins lower LDL.", "neutral")]
    stroke = {"d2": {"title": "", "text": "Muscle pain was rare. Stroke rates fell with aspirin."}}
    claim = scifact_claims.Claim("9", "Aspirin reduces stroke.", "NOT_ENOUGH_INFO", ())
    [pair] = scifact_claims.nli_pairs([claim], stroke, neutral_per_document=1, uncited={"9": ["d2"]})
    assert (pair.premise, pair.label) == ("Stroke rates fell with aspirin.", "neutral")  # no title


def test_claim_pairs_without_hard_negatives_are_the_cited_abstracts_pairs(tiny):
    claims = scifact_claims.load_claims(tiny, "test")
    documents = scifact_claims.read_documents(tiny)
    assert scifact_claims.claim_pairs(tiny, claims, 0) == scifact_claims.nli_pairs(claims, documents)


def test_the_held_out_part_is_a_fixed_fifth_of_the_claims():
    ids = [str(i) for i in range(2000)]
    share = np.mean([scifact_claims.held_out(i) for i in ids])
    assert 0.17 < share < 0.23
    assert [scifact_claims.held_out(i) for i in ids[:50]] == [scifact_claims.held_out(i) for i in ids[:50]]


def test_the_target_is_the_largest_grid_value_half_the_claims_reach():
    # Largest beliefs within the budget: 0.97, 0.81, 0.72, 0.55.
    trajectories = [[0.4, 0.97], [0.81], [0.6, 0.72, 0.7], [0.55]]
    target, shares = claims_inquiry.choose_target(trajectories)
    assert shares["0.70"] == 0.75 and shares["0.75"] == 0.5 and shares["0.85"] == 0.25
    assert target == 0.8  # 0.80: 2 of 4 reach it; 0.85: 1 of 4
    assert claims_inquiry.choose_target([[0.3], [0.4]])[0] == 0.5


def test_the_saving_is_one_minus_the_ratio_of_means_with_a_bootstrap_interval():
    active = np.array([1, 2, 1, 3, 1, 2] * 10, float)
    naive = np.array([3, 3, 2, 4, 2, 4] * 10, float)
    saving = claims_inquiry.paired_saving(active, naive)
    assert saving["saving"] == pytest.approx(1 - 10 / 18, abs=1e-4)
    low, high = saving["interval_95"]
    assert low < saving["saving"] < high and high - low < 0.2
    same = claims_inquiry.paired_saving(naive, naive)
    assert same["saving"] == 0 and same["interval_95"] == [0, 0]


def test_a_policys_summary_counts_queries_reaching_the_target_and_accuracy():
    def session(answer, confidence, reason, queries):
        return claims_inquiry.Session(
            "s", answer, confidence, reason, [{"sentences_read": 4}] * queries, [], 1.0
        )

    sessions = [
        session("SUPPORT", 0.9, "confidence_reached", 1),
        session("NOT_ENOUGH_INFO", 0.6, "max_queries_reached", 8),
        session("CONTRADICT", 0.85, "confidence_reached", 3),
    ]
    result = claims_inquiry.summary(sessions, ["SUPPORT", "SUPPORT", "CONTRADICT"], 0.8)
    assert result["mean_queries"] == 4.0 and result["median_queries"] == 3.0
    assert result["reached_target"] == pytest.approx(2 / 3, abs=1e-4)
    assert result["accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert result["stopping_reasons"] == {"confidence_reached": 2, "max_queries_reached": 1}
    assert result["mean_sentences_judged"] == pytest.approx(16.0)
    # F1: SUPPORT 2/3 (1 of 2 found, 1 of 1 right), CONTRADICT 1, NOT_ENOUGH_INFO 0.
    assert result["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3, abs=1e-4)


def _session(answer, reason, queries):
    return claims_inquiry.Session("s", answer, 0.9, reason, [{"sentences_read": 1}] * queries, [], 1.0)


def test_the_share_of_the_saving_from_giving_up_and_the_paired_accuracy_difference():
    eig = [
        _session("SUPPORT", "target_out_of_reach", 1),  # gave up: saved 7
        _session("SUPPORT", "confidence_reached", 2),  # reached: saved 1
        _session("CONTRADICT", "no_viable_queries", 4),  # gave up: saved 4
    ]
    naive = [
        _session("SUPPORT", "max_queries_reached", 8),
        _session("SUPPORT", "confidence_reached", 3),
        _session("SUPPORT", "confidence_reached", 8),
    ]
    shared = claims_inquiry.giving_up_share(eig, naive)
    assert shared == {
        "claims_given_up": 2,
        "queries_saved": 12,
        "queries_saved_giving_up": 11,
        "share": 0.9167,
    }
    labels = ["SUPPORT", "SUPPORT", "SUPPORT"]
    runs = {"eig": eig, "generated_order": naive, "keywords": naive}
    compared = claims_inquiry.compare(runs, labels, 0.75)
    # eig wrong on the third claim, the baseline right on all three: −1/3.
    accuracy = compared["accuracy_difference"]["generated_order"]
    assert accuracy["difference"] == pytest.approx(-1 / 3, abs=1e-4)
    low, high = accuracy["interval_95"]
    assert low <= accuracy["difference"] <= high <= 0
    assert compared["savings_where_both_reached_target"]["generated_order"]["claims"] == 1
    assert compared["target_confidence"] == 0.75 and compared["policies"]["eig"]["target"] == 0.75
