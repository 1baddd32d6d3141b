"""`sounding eval tools`' parts on a tiny BFCL-shaped directory."""

import json

import pytest
from sounding_bench import tools

pytestmark = pytest.mark.unit


def write_bfcl(path):
    (path / "possible_answer").mkdir()
    items = {
        "BFCL_v4_multiple.json": [
            {
                "id": "multiple_0",
                "question": [[{"role": "user", "content": "Weather in Oslo?"}]],
                "function": [
                    {
                        "name": "get_weather",
                        "description": "Forecast.",
                        "parameters": {"properties": {"city": {}}},
                    },
                    {"name": "send_email", "description": "Mail."},
                ],
            }
        ],
        "BFCL_v4_live_multiple.json": [
            {
                "id": "live_multiple_0",
                "question": [
                    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Mail Bo."}]
                ],
                "function": [{"name": "send_email", "description": "Another description, ignored."}],
            }
        ],
        "BFCL_v4_simple_python.json": [
            {"id": "simple_0", "question": [[{"role": "user", "content": "x" * 5000}]], "function": []}
        ],
        "BFCL_v4_live_irrelevance.json": [
            {
                "id": "irrelevance_0",
                "question": [[{"role": "user", "content": "Tell a joke."}]],
                "function": [{"name": "unrelated", "description": "Never pooled."}],
            }
        ],
    }
    answers = {
        "BFCL_v4_multiple.json": [
            {"id": "multiple_0", "ground_truth": [{"get_weather": {"city": ["Oslo"]}}]}
        ],
        "BFCL_v4_live_multiple.json": [{"id": "live_multiple_0", "ground_truth": [{"send_email": {}}]}],
        "BFCL_v4_simple_python.json": [{"id": "simple_0", "ground_truth": [{"get_weather": {}}, {"x": {}}]}],
    }
    for name, records in items.items():
        (path / name).write_text("\n".join(json.dumps(r) for r in records) + "\n")
    for name, records in answers.items():
        (path / "possible_answer" / name).write_text("\n".join(json.dumps(r) for r in records) + "\n")


def test_load_pools_the_labelled_files_functions_and_reads_the_first_turns_user_messages(tmp_path):
    write_bfcl(tmp_path)
    pooled, labelled, irrelevant = tools.load(tmp_path)
    assert sorted(pooled) == ["get_weather", "send_email"]
    assert pooled["send_email"]["description"] == "Mail."  # the first definition wins
    assert [(r.id, r.text, r.tool) for r in labelled[:2]] == [
        ("multiple_0", "Weather in Oslo?", "get_weather"),
        ("live_multiple_0", "Mail Bo.", "send_email"),
    ]
    assert len(labelled[2].text) == tools.MAX_REQUEST_CHARS and labelled[2].tool == "get_weather"
    assert [(r.id, r.tool) for r in irrelevant] == [("irrelevance_0", None)]


def test_the_split_is_seeded_and_disjoint():
    requests = [tools.Request(str(i), "", "t") for i in range(100)]
    train, test = tools.split(requests, 0.3, seed=7)
    again = tools.split(requests, 0.3, seed=7)
    assert (len(train), len(test)) == (70, 30) and (train, test) == again
    assert {r.id for r in train}.isdisjoint({r.id for r in test})
    assert tools.split(requests, 0.3, seed=8)[1] != test


def test_the_decline_threshold_separates_train_scores_best():
    cut = tools._threshold(accepted=[0.6, 0.7, 0.8, 0.35], declined=[0.2, 0.3, 0.4])
    assert cut == 0.6  # accepts 3 of 4 and declines 3 of 3: balanced accuracy 0.875
    assert tools._declining(cut, [0.5, 0.9], [0.1, 0.65]) == {
        "threshold": 0.6,
        "irrelevant_declined": 0.5,
        "relevant_declined": 0.5,
    }


def test_scores_are_trec_evals_success_and_reciprocal_rank():
    requests = [tools.Request("a", "", "x"), tools.Request("b", "", "y")]
    scores = tools._scores({"a": ["x", "z"], "b": ["z", "w", "y"]}, requests)
    assert scores == {"success@1": 0.5, "success@5": 1.0, "mrr": round((1 + 1 / 3) / 2, 4)}
