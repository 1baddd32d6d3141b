"""Every `sounding eval` subcommand without an end-to-end test of its own (issue 48, item 2): `tools`,
`calibration`, `inquiry` (its three tasks), `nli`, `encoder` and `generation`, each run as a user
runs it (typer's CliRunner on the `sounding` app with its plugins) on a tiny input written here
in the format its harness reads (BFCL, BEIR, SciFact's BEIR with its evidence annotation,
SNLI-style JSON lines). Each must exit 0 and write its JSON, led by its provenance, whose counts
are the tiny input's sizes, whose measures are proportions, and which names every system or
policy the run compares. Commands that accept `--address` play on the session's stack; the
others start a stack of their own under this test's data directory, or run their models in
process."""

import asyncio
import json
import traceback

import pytest
from sounding.cli import with_plugins
from sounding.inquiry.domains import bulls_and_cows
from sounding.models.client import ModelsClient
from sounding.models.nli import LABELS
from sounding_bench import claims_inquiry, inquiry
from typer.testing import CliRunner

from .conftest import SHORT_NLI_TRAINING, SLOW_MACHINE_DEADLINES, write_tiny_corpus

pytestmark = pytest.mark.integration

PROVENANCE = {"commit", "date", "seed", "settings"}


def run_eval(*arguments: str) -> None:
    """`sounding eval ARGUMENTS…`, which must exit 0 (its output and any exception otherwise)."""
    ran = CliRunner().invoke(with_plugins(), ["eval", *arguments])
    failure = "".join(traceback.format_exception(ran.exception)) if ran.exception else ""
    assert ran.exit_code == 0, ran.output + failure


def result_of(out) -> dict:
    result = json.loads(out.read_text())
    assert PROVENANCE <= result["provenance"].keys()
    return result


def own_stack_environment(monkeypatch, tmp_path) -> None:
    """A command that starts a stack of its own keeps it (its `<cache>/eval/<name>` directory)
    under this test's tmp path; its sidecar trains the NLI model briefly if none is cached, and
    its deadlines hold on a busy machine."""
    monkeypatch.setenv("SOUNDING_DATA_DIR", str(tmp_path / "sounding"))
    for key, value in {**SHORT_NLI_TRAINING, **SLOW_MACHINE_DEADLINES}.items():
        monkeypatch.setenv(key, value)


def own_stack_of(result: dict, tmp_path) -> bool:
    """Whether the result's provenance names a stack the run started under `tmp_path`."""
    return any(s["own"] and s["data_dir"].startswith(str(tmp_path)) for s in result["provenance"]["stacks"])


def is_proportion(value) -> bool:
    return isinstance(value, float | int) and 0.0 <= value <= 1.0


# --- tools: a tiny BFCL directory ---------------------------------------------------------------

TOOLS = {
    "triangle_area": "Calculate the area of a triangle given its base and height.",
    "circle_area": "Calculate the area of a circle given its radius.",
    "weather.forecast": "Get the weather forecast for a city for the coming days.",
    "currency.convert": "Convert an amount of money from one currency to another.",
    "flight.book": "Book a flight between two airports on a given date.",
    "stock.price": "Get the current price of a company's stock by its ticker symbol.",
    "translate.text": "Translate a text into another language.",
    "recipe.find": "Find cooking recipes that use the given ingredients.",
    "email.send": "Send an email to a recipient with a subject and a body.",
    "calendar.add_event": "Add an event to the user's calendar at a date and time.",
    "timer.set": "Set a countdown timer for a number of minutes.",
    "news.headlines": "Get today's top news headlines for a country.",
}
# Offered beside the requests' tools, never meant: more tools than the routers' top 10.
DISTRACTORS = ("email.send", "calendar.add_event", "timer.set", "news.headlines")
# Per labelled file: (request, the tool meant, a second tool offered beside it)
BFCL_REQUESTS = {
    "BFCL_v4_multiple.json": [
        ("What is the area of a triangle with base 10 and height 5?", "triangle_area", "circle_area"),
        ("Will it rain in Lisbon over the next three days?", "weather.forecast", "flight.book"),
        ("How much is 250 US dollars in euros?", "currency.convert", "stock.price"),
    ],
    "BFCL_v4_live_multiple.json": [
        ("Book me a flight from Boston to Denver on 12 May.", "flight.book", "weather.forecast"),
        ("What is Apple's share price right now?", "stock.price", "currency.convert"),
        ("Translate 'good morning' into Japanese.", "translate.text", "recipe.find"),
    ],
    "BFCL_v4_simple_python.json": [
        ("Find me something to cook with chicken, lemon and rice.", "recipe.find", "translate.text"),
        ("Compute the area of a circle of radius 3 meters.", "circle_area", "triangle_area"),
        ("What will the weather be like in Oslo tomorrow?", "weather.forecast", "currency.convert"),
    ],
}
IRRELEVANT_REQUESTS = (
    "Tell me a joke about penguins.",
    "Who wrote the novel Moby-Dick?",
    "Write a haiku about autumn leaves.",
    "What is the meaning of life?",
)


def _function(name: str) -> dict:
    parameters = {"type": "dict", "properties": {"value": {"type": "string"}}, "required": ["value"]}
    return {"name": name, "description": TOOLS[name], "parameters": parameters}


def write_bfcl(path) -> None:
    """The four BFCL files the harness reads (one JSON record a line) and the three answer files."""
    (path / "possible_answer").mkdir(parents=True)
    offered = 0
    for name, requests in BFCL_REQUESTS.items():
        stem = name.removeprefix("BFCL_v4_").removesuffix(".json")
        items, answers = [], []
        for i, (text, tool, other) in enumerate(requests):
            question = [[{"role": "user", "content": text}]]
            distractor = DISTRACTORS[offered % len(DISTRACTORS)]
            offered += 1
            functions = [_function(tool), _function(other), _function(distractor)]
            items.append({"id": f"{stem}_{i}", "question": question, "function": functions})
            answers.append({"id": f"{stem}_{i}", "ground_truth": [{tool: {"value": ["x"]}}]})
        (path / name).write_text("".join(json.dumps(x) + "\n" for x in items))
        (path / "possible_answer" / name).write_text("".join(json.dumps(x) + "\n" for x in answers))
    irrelevant = [
        {
            "id": f"live_irrelevance_{i}-0-0",
            "question": [[{"role": "user", "content": text}]],
            "function": [_function("stock.price")],
        }
        for i, text in enumerate(IRRELEVANT_REQUESTS)
    ]
    (path / "BFCL_v4_live_irrelevance.json").write_text("".join(json.dumps(x) + "\n" for x in irrelevant))


def test_eval_tools_routes_a_tiny_bfcl_set_and_writes_its_json(tmp_path, monkeypatch):
    own_stack_environment(monkeypatch, tmp_path)
    data, out = tmp_path / "bfcl", tmp_path / "tools.json"
    write_bfcl(data)
    run_eval("tools", "--data", str(data), "--config", "free", "--out", str(out))
    result = result_of(out)
    assert own_stack_of(result, tmp_path) and result["provenance"]["seed"] == 0
    splits = result["splits"]
    assert splits["tools"] == len(TOOLS)
    assert splits["train"] + splits["test"] == sum(len(r) for r in BFCL_REQUESTS.values())
    assert splits["irrelevance_train"] + splits["irrelevance_test"] == len(IRRELEVANT_REQUESTS)
    assert splits["test"] >= 1 and splits["irrelevance_test"] >= 1
    assert set(result["systems"]) == {
        "description_only",
        "bm25_descriptions",
        "lancedb_hybrid_descriptions",
        "learning_free",
    }
    for name, scores in result["systems"].items():
        assert set(scores) == {"success@1", "success@5", "mrr"}, name
        assert all(is_proportion(v) for v in scores.values()), (name, scores)
    learned = result["learning"]["free"]
    assert len(learned["prequential_top1"]) == splits["train"]
    assert learned["observer"] == {"sent": splits["train"], "dropped": 0, "failed": 0}
    assert learned["learner"]["processed"] == learned["learner"]["events"] == splits["train"]
    assert 0 <= learned["fallback_uses"] <= splits["train"]
    # Without trusted uses nothing validates the free tier's labels: routing is the descriptions'.
    assert learned["learner"]["untrusted_exemplars_route"] is False
    assert result["systems"]["learning_free"] == result["systems"]["description_only"]
    assert set(result["declining"]) == {"description_only", "learning_free"}
    for name, declined in result["declining"].items():
        assert is_proportion(declined["irrelevant_declined"]), name
        assert is_proportion(declined["relevant_declined"]), name
    assert result["intake"] == {}  # measured with trusted uses only
    assert result["comparisons"]["best_learning"] == "learning_free"
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


# --- calibration and encoder: a tiny BEIR directory ---------------------------------------------

VESSELS = ("ship", "trawler", "ferry", "yacht", "tanker", "tug", "liner", "barge", "frigate", "dinghy")
# Five questions a vessel asks, each with the document that answers it, asked twice: 100 train
# queries, which both calibrations need (Calibrate refuses fewer than 50 outcomes, and each
# calibration takes half of them).
TRAIN_QUESTIONS = {
    "measure": ("how does a {} measure the water depth", "sonar"),
    "gauge": ("how does a {} gauge the depth by hand", "lead"),
    "find": ("where does a {} find the charted depth", "chart"),
    "tide": ("when does the tide lift a {}", "tide"),
    "check": ("how does a {} check the depth below it", "sonar"),
}
TEST_QUERIES = {
    "q1": ("how do ships measure water depth", "sonar"),
    "q2": ("how does the moon pull the tides of the sea", "tide"),
    "q3": ("how is bread dough made to rise", "bread"),
}


CALIBRATION_PASSES = (
    "loop_off_uncalibrated",
    "loop_on_uncalibrated",
    "loop_on_calibrated",
    "confidence_calibrated",
)
CALIBRATION_MEASURES = (
    "ndcg@10",
    "recall@100",
    "ece_stated_recall@1",
    "mean_actual_recall@1",
    "missed_share@1",
)


def write_beir(path, train: bool) -> None:
    """The tiny BEIR corpus with TEST_QUERIES as its test split, and (if `train`) the 100 train
    queries of VESSELS × TRAIN_QUESTIONS as its train split."""
    write_tiny_corpus(path)
    queries = {q: text for q, (text, _) in TEST_QUERIES.items()}
    qrels = {"test": {q: document for q, (_, document) in TEST_QUERIES.items()}, "train": {}}
    if train:
        for v, vessel in enumerate(VESSELS):
            for key, (question, document) in TRAIN_QUESTIONS.items():
                for half in ("a", "b"):  # each question twice per vessel, with an article or none
                    text = question.format(vessel)
                    queries[f"t{v}-{key}-{half}"] = text if half == "a" else text.replace(" a ", " ")
                    qrels["train"][f"t{v}-{key}-{half}"] = document
    (path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t, "metadata": {}}) + "\n" for q, t in queries.items())
    )
    for split, pairs in qrels.items():
        if pairs:
            (path / "qrels" / f"{split}.tsv").write_text(
                "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in pairs.items())
            )


def test_eval_calibration_calibrates_on_a_tiny_beir_set_and_writes_its_json(tmp_path, monkeypatch):
    own_stack_environment(monkeypatch, tmp_path)
    data, out = tmp_path / "tinybeir", tmp_path / "calibration.json"
    write_beir(data, train=True)
    # k = 1: the tiny corpus is shorter than the default top 10, where nothing could be missed.
    run_eval("calibration", "--data", str(data), "--k", "1", "--out", str(out))
    result = result_of(out)
    assert own_stack_of(result, tmp_path)
    assert result["train_queries"] == 100 and result["test_queries"] == len(TEST_QUERIES)
    assert result["train_split_halves"]["miss_rate"] == result["train_split_halves"]["confidence"] == 50
    # Both calibrations fitted on their half (the store's calibrations were emptied first);
    # the miss-rate map is deployed, and is at least as calibrated on what it was fitted to.
    assert result["calibration"]["sample_size"] == 50 and result["calibration"]["version"] == "1"
    fitted = result["calibration"]["diagnostics_on_train"]
    assert fitted["miss_rate_ece_after"] <= fitted["miss_rate_ece_before"]
    assert result["confidence_calibration"]["sample_size"] == 50
    assert set(result["passes"]) == set(result["per_query"]) == set(CALIBRATION_PASSES)
    for name, figures in result["passes"].items():
        for measure in CALIBRATION_MEASURES:
            assert is_proportion(figures[measure]), (name, measure, figures)
        assert set(result["per_query"][name]) == set(TEST_QUERIES), name
    # Before Calibrate(MISS_RATE) the miss rate is derived; after it, measured.
    assert result["passes"]["loop_on_uncalibrated"]["miss_rate_kind"] != "measured"
    assert result["passes"]["loop_on_calibrated"]["miss_rate_kind"] == "measured"
    assert set(result["loop_effect"]) == {"uncalibrated", "calibrated"}
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


def test_eval_encoder_compares_the_three_encoders_on_a_tiny_beir_set(tmp_path, monkeypatch):
    monkeypatch.setenv("SOUNDING_DATA_DIR", str(tmp_path / "sounding"))  # the exports it makes
    data, out = tmp_path / "tinybeir", tmp_path / "encoder.json"
    write_beir(data, train=False)
    run_eval("encoder", "--data", str(data), "--documents", "4", "--out", str(out))
    result = result_of(out)
    assert result["documents"] == 4 and result["queries"] == len(TEST_QUERIES)
    assert set(result["encoders"]) == {"torch_fp32", "onnx_fp32", "onnx_int8"}
    for name, figures in result["encoders"].items():
        assert is_proportion(figures["ndcg@10"]) and is_proportion(figures["recall@100"]), name
        assert figures["documents_per_s"] > 0 and figures["queries_per_s_batch_64"] > 0, name
        assert set(figures["per_query"]) == set(TEST_QUERIES), name
    assert set(result["verdict"]["against_torch_fp32"]) == {"onnx_fp32", "onnx_int8"}
    assert result["verdict"]["cpu_default"] in result["encoders"]
    assert (tmp_path / "sounding" / "cache" / "eval" / "encoder").is_dir()


# --- inquiry ------------------------------------------------------------------------------------

# The other policies play the first only (`--comparison-games 1`): not 0123, every policy's
# first guess.
SECRETS = ["5042", "9876", "0123"]


def test_eval_inquiry_plays_bulls_and_cows_with_every_policy(stack, tmp_path):
    secrets, out = tmp_path / "secrets.json", tmp_path / "bulls-and-cows.json"
    secrets.write_text(json.dumps(SECRETS))
    run_eval(
        "inquiry",
        "--task",
        "bulls-and-cows",
        "--secrets",
        str(secrets),
        "--policy",
        "eig",
        "--comparison-games",
        "1",
        "--out",
        str(out),
        "--address",
        stack.settings.address,
    )
    result = result_of(out)
    assert {"own": False, "address": stack.settings.address} in result["provenance"]["stacks"]
    assert result["task"] == "bulls-and-cows" and result["secrets"] == len(SECRETS)
    assert set(result["policies"]) == set(bulls_and_cows.POLICIES)
    for name, played in result["policies"].items():
        games = len(SECRETS) if name == "eig" else 1
        assert played["games"] == games and len(played["turns_by_secret"]) == games, name
        assert set(played["turns_by_secret"]) == (set(SECRETS) if name == "eig" else {SECRETS[0]}), name
        assert played["solved"] == games, (name, played)  # every policy finds a secret eventually
        assert 1 <= played["mean_turns"] <= played["max_turns"] <= 25, name
        assert sum(played["turn_histogram"].values()) == games, name


def test_eval_inquiry_plays_a_tiny_hypotheses_game_with_every_policy(stack, tmp_path):
    out = tmp_path / "hypotheses.json"
    run_eval(
        "inquiry",
        "--task",
        "hypotheses",
        "--hypotheses",
        "8",
        "--questions",
        "12",
        "--games",
        "2",
        "--noise",
        "0,0.1",
        "--out",
        str(out),
        "--address",
        stack.settings.address,
    )
    result = result_of(out)
    assert {"own": False, "address": stack.settings.address} in result["provenance"]["stacks"]
    assert result["task"] == "hypotheses" and result["games"] == 2
    assert result["hypotheses"] == 8 and result["questions"] == 12
    assert set(result["settings"]) == {"noise=0.0", "noise=0.1"}
    for name, setting in result["settings"].items():
        assert set(setting["policies"]) == set(inquiry.HYPOTHESES_POLICIES), name
        for policy, played in setting["policies"].items():
            assert 0 <= played["correct"] <= 2 and 0 <= played["reached_target"] <= 2, (name, policy)
            assert 0 <= played["mean_questions"] <= played["max_questions"] <= 12, (name, policy)
        assert set(setting["eig_question_reduction"]) == set(inquiry.HYPOTHESES_POLICIES[1:]), name
    # Without noise every answer is true and the 8 hypotheses differ: every policy reaches the
    # target on the right hypothesis, eig with no more questions than the fixed order.
    noiseless = result["settings"]["noise=0.0"]
    assert noiseless["games_all_reached"] == 2
    for policy, played in noiseless["policies"].items():
        assert played["reached_target"] == played["correct"] == 2, (policy, played)
    assert (
        noiseless["policies"]["eig"]["mean_questions"]
        <= noiseless["policies"]["fixed_order"]["mean_questions"]
    )


# --- SciFact: a tiny BEIR directory with SciFact's evidence annotation ---------------------------

ABSTRACTS = {
    "d1": (
        "Vitamin D and bone density in older women",
        "We gave vitamin D supplements to 300 women over 70 for two years. "
        "Bone mineral density increased in the supplemented group compared with placebo. "
        "Fracture rates did not differ between the groups. The supplement was well tolerated.",
    ),
    "d2": (
        "Daily aspirin and colorectal adenomas",
        "We followed 2,000 adults who took aspirin daily for five years. "
        "Daily aspirin reduced the incidence of colorectal adenomas by a third. "
        "Gastrointestinal bleeding was more common with aspirin. Adherence was high.",
    ),
    "d3": (
        "Sleep deprivation and memory consolidation",
        "Forty volunteers were kept awake for one night after learning word pairs. "
        "Sleep deprivation impaired the consolidation of the new memories. "
        "Recall recovered partly after two nights of normal sleep.",
    ),
    "d4": (
        "Coffee and atrial fibrillation",
        "We studied the coffee habits of 10,000 adults over ten years. "
        "Coffee consumption was not associated with a higher risk of atrial fibrillation. "
        "Heavy drinkers reported more palpitations.",
    ),
    "d5": (
        "Exercise and mood in students",
        "Students who ran three times a week reported better mood. Their examination results did not change.",
    ),
}
# id: (claim, split, cited document, its evidence: (rationale sentences, label) or None). Train
# claim "t3" falls in the held-out fifth (`scifact_claims.held_out`), "t1" does not.
CLAIMS = {
    "t3": (
        "Vitamin D supplements increase bone mineral density in older women.",
        "train",
        "d1",
        ([1], "SUPPORT"),
    ),
    "t1": (
        "Daily aspirin increases the incidence of colorectal adenomas.",
        "train",
        "d2",
        ([1], "CONTRADICT"),
    ),
    "1": ("Sleep deprivation impairs memory consolidation.", "test", "d3", ([1], "SUPPORT")),
    "2": ("Coffee consumption raises the risk of atrial fibrillation.", "test", "d4", ([1], "CONTRADICT")),
    "4": ("Running improves examination results of students.", "test", "d5", None),
}


def write_scifact(path) -> None:
    """ABSTRACTS and CLAIMS in BEIR SciFact's layout: claims' evidence in their `metadata`."""
    path.mkdir()
    (path / "qrels").mkdir()
    (path / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": i, "title": title, "text": text, "metadata": {}}) + "\n"
            for i, (title, text) in ABSTRACTS.items()
        )
    )
    queries = []
    for claim_id, (text, _, document, evidence) in CLAIMS.items():
        metadata = {document: [{"sentences": evidence[0], "label": evidence[1]}]} if evidence else {}
        queries.append(json.dumps({"_id": claim_id, "text": text, "metadata": metadata}) + "\n")
    (path / "queries.jsonl").write_text("".join(queries))
    for split in ("train", "test"):
        rows = [f"{c}\t{document}\t1\n" for c, (_, s, document, _) in CLAIMS.items() if s == split]
        (path / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(rows))


def test_eval_inquiry_verifies_a_tiny_scifact_claim_with_every_policy(tmp_path, monkeypatch):
    own_stack_environment(monkeypatch, tmp_path)
    data, out = tmp_path / "scifact", tmp_path / "claims.json"
    write_scifact(data)
    run_eval("inquiry", "--task", "scifact-claims", "--data", str(data), "--limit", "1", "--out", str(out))
    result = result_of(out)
    assert own_stack_of(result, tmp_path) and result["provenance"]["seed"] == claims_inquiry.SEED
    assert result["claims"] == 1 and result["labels"] == {"SUPPORT": 1, "CONTRADICT": 0, "NOT_ENOUGH_INFO": 0}
    # The fit: the one held-out train claim, its session's verdict observed.
    assert result["protocol"]["fit_claims"] == 1 and result["protocol"]["observed"] == 1
    assert set(result["fit"]) == {"eig", "generated_order"}
    assert set(result["policies"]) == set(claims_inquiry.POLICIES)
    for policy, figures in result["policies"].items():
        assert is_proportion(figures["accuracy"]) and is_proportion(figures["reached_target"]), policy
        assert 0 <= figures["mean_queries"] <= claims_inquiry.MAX_QUERIES, policy
        assert sum(figures["stopping_reasons"].values()) == 1, policy
    assert set(result["savings"]) == set(claims_inquiry.BASELINES)
    (claim,) = result["per_claim"]
    assert claim["id"] == "1" and claim["label"] == "SUPPORT"
    for policy in claims_inquiry.POLICIES:
        assert claim[policy]["answer"] in ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"), policy
        assert all(q["documents"] for q in claim[policy]["queries"]), policy
    assert result["learned"]["observed_sessions"] == 1 and result["learned"]["queries"] >= 1
    assert result["target_confidence"] in claims_inquiry.TARGET_GRID
    at_spec = result["at_spec_target"]  # the specification's target too, unless the rule chose it
    assert isinstance(at_spec, str) or set(at_spec["policies"]) == set(claims_inquiry.POLICIES)


# --- nli ----------------------------------------------------------------------------------------

NLI_PAIRS = [  # premise, hypothesis, label ("-": none, a row left out)
    ("A man is playing a guitar on stage.", "A man is performing music.", "entailment"),
    ("A man is playing a guitar on stage.", "The man is asleep.", "contradiction"),
    ("Two dogs run across a field.", "The dogs are brown.", "neutral"),
    ("A child eats an apple.", "A child eats fruit.", "entailment"),
    ("A woman reads in a library.", "The woman is reading.", "-"),
]


@pytest.fixture
def trained_nli(stack):
    """The NLI model the stack's sidecar reads with, trained (briefly) by its first Entail if none
    was cached: `sounding eval nli` reads that model from the models cache."""

    async def entail():
        models = ModelsClient(stack.settings.models.address)
        try:
            await models.entail([("A dog runs.", "An animal moves.")], timeout=600)
        finally:
            await models.close()

    asyncio.run(entail())


def test_eval_nli_classifies_a_tiny_pair_file_and_tiny_scifact_claims(trained_nli, tmp_path):
    pairs, out = tmp_path / "pairs.jsonl", tmp_path / "nli.json"
    rows = ({"premise": p, "hypothesis": h, "label": label} for p, h, label in NLI_PAIRS)
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run_eval("nli", "--data", str(pairs), "--out", str(out))
    result = result_of(out)
    assert result["data"] == str(pairs) and result["pairs"] == 4
    assert result["skipped_rows"] == {"no label": 1}
    assert result["classes"] == list(LABELS) and set(result["f1"]) == set(LABELS)
    assert is_proportion(result["accuracy"]) and is_proportion(result["macro_f1"])
    assert all(is_proportion(v) for v in result["f1"].values())

    # SciFact's train claims, only the held-out one: its rationale entails it, the other sentences
    # of its abstract (two of them) are neutral.
    data, out = tmp_path / "scifact", tmp_path / "nli-scifact.json"
    write_scifact(data)
    run_eval("nli", "--scifact", str(data), "--split", "train", "--out", str(out))
    result = result_of(out)
    assert result["claims"] == 1 and result["held_out_only"] is True
    assert result["pairs_by_label"] == {"entailment": 1, "neutral": 2} and result["pairs"] == 3
    assert is_proportion(result["accuracy"])


# --- generation ---------------------------------------------------------------------------------


def test_eval_generation_times_shared_prefills_on_a_tiny_prompt(tmp_path):
    out = tmp_path / "generation.json"
    run_eval("generation", "--lengths", "16", "--samples", "2", "--rounds", "1", "--out", str(out))
    result = result_of(out)
    assert result["samples"] == 2 and result["rounds"] == 1
    (length,) = result["lengths"]
    assert length["prompt_text_tokens"] == 16
    assert set(length["seconds"]) == {"shared", "prefix", "distinct"}
    assert all(len(v) == 1 and v[0] > 0 for v in length["seconds"].values())
    assert set(length["median_ratios"]) == {"distinct_over_shared", "distinct_over_prefix"}
    assert all(r > 0 for r in length["median_ratios"].values())
    # Every condition's prompts hold the 16-token text and the chat template around it.
    assert all(min(tokens) > 16 for tokens in length["prompt_tokens_after_template"].values())
