"""Candidate queries for claim verification, strategy by strategy (active-learning spec §4.2)."""

import pytest
from sounding.core.query_candidates import (
    Candidate,
    candidates,
    coverage,
    decompose,
    entity_probes,
    keyword_queries,
    least_covered,
    llm_prompt,
    llm_queries,
    refute,
)

pytestmark = pytest.mark.unit

CLAIM = "Aspirin inhibits the production of PGE2, which is associated with tumor growth."


def test_decomposition_cuts_at_clause_boundaries_and_keeps_contentful_parts():
    assert decompose(CLAIM) == ["Aspirin inhibits the production of PGE2", "is associated with tumor growth"]
    assert decompose("Vitamin D deficiency causes rickets.") == []  # one clause: nothing to cut


@pytest.mark.parametrize(
    "claim, refuted",
    [
        ("Aspirin inhibits PGE2.", "Aspirin promotes PGE2."),
        ("Increased sleep improves memory.", "Decreased sleep improves memory."),
        ("Folic acid does not affect CKD progression.", "Folic acid does affect CKD progression."),
        ("ALDH1 is associated with prognosis.", "ALDH1 is not associated with prognosis."),
        ("Biomaterials lack inductive properties.", None),
    ],
)
def test_refutation_turns_the_claims_polarity(claim, refuted):
    assert refute(claim) == refuted


def test_entity_probes_pair_claim_entities_with_their_graph_neighbours_in_turn():
    neighbours = {"aspirin": ["cox-2", "aspirin", "bleeding"], "pge2": ["cox-2", "inflammation"]}
    probes = entity_probes(["aspirin", "pge2"], neighbours, limit=3)
    assert [(p.text, p.aspect) for p in probes] == [
        ("aspirin cox-2", "aspirin"),
        ("pge2 cox-2", "pge2"),
        ("aspirin bleeding", "aspirin"),
    ]


def test_aspect_queries_target_what_the_evidence_seen_covers_least():
    assert coverage("tumor growth", ["Tumor size was measured."]) == 0.5
    seen = ["PGE2 production fell with aspirin."]
    targeted = least_covered(CLAIM, seen, limit=2)
    assert [c.aspect for c in targeted] == ["tumor growth", "pge2"]
    assert all(c.strategy == "aspect" and c.text.startswith("aspirin inhibits") for c in targeted)


def test_candidates_come_in_generation_order_without_repeats():
    made = candidates(CLAIM, {"aspirin inhibits": ["cox-2"]})
    assert [c.strategy for c in made] == [
        "confirmation",
        "decomposition",
        "decomposition",
        "refutation",
        "entity_probe",
        "aspect",
        "aspect",
        "aspect",
    ]
    assert made[0].text == CLAIM and made[4].text == "aspirin inhibits cox-2"
    assert len({c.text.lower() for c in made}) == len(made)


def test_the_keyword_baseline_is_the_claim_then_one_key_phrase_a_query():
    queries = keyword_queries(CLAIM)
    assert queries[0].text == CLAIM
    assert [q.text for q in queries[1:]] == ["aspirin inhibits", "tumor growth", "pge2", "production"]


def test_a_models_answer_is_read_as_one_query_a_line():
    answer = "\n".join(
        [
            "Sure, here they are:",
            '1. "aspirin and stroke"',
            "2) aspirin bleeding elderly",
            "- Aspirin and stroke",
            "ok",
            "Query 3: low dose aspirin trial",
        ]
    )
    assert llm_queries(answer, 5) == [
        "aspirin and stroke",
        "aspirin bleeding elderly",
        "low dose aspirin trial",
    ]
    assert llm_queries(answer, 2) == ["aspirin and stroke", "aspirin bleeding elderly"]
    assert "Claim: X rises." in llm_prompt("X rises.", 3)[0]["content"]
    made = candidates("Aspirin cuts stroke risk.", written=["aspirin stroke trial"])
    assert made[-1] == Candidate("aspirin stroke trial", "llm", "aspirin stroke trial")
