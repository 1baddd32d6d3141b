import pytest
from rich.console import Console
from sounding.settings.config import Settings
from sounding_bench import generation
from sounding_bench.harness import DEMO_CORPUS

pytest.importorskip("torch")  # the [models] extra

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def tokenizer():
    from sounding.models.local_generator import converted_smollm2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(converted_smollm2(Settings().models.cache_dir))


def test_prompts_have_the_length_asked_for_and_differ_from_their_first_token(tokenizer):
    tokens = generation.corpus_tokens(tokenizer, DEMO_CORPUS)
    texts = generation.prompt_texts(tokenizer, tokens, 300, 4)
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert all(abs(len(i) - 300) <= 3 for i in ids)  # decoding and encoding again may merge a few
    assert len({i[0] for i in ids}) == 4
    assert len(tokens) < 300 * 4  # the stream is cycled, not just sliced


@pytest.mark.slow
def test_a_tiny_run_times_both_conditions_every_round():
    spec = generation.GenerationRun((40,), samples=2, rounds=2)
    result = generation.run(spec, Settings(), Console(quiet=True))
    (row,) = result["lengths"]
    conditions = ("shared", "prefix", "distinct")
    assert [len(row["seconds"][c]) for c in conditions] == [2, 2, 2]
    assert all(s > 0 for c in conditions for s in row["seconds"][c])
    assert set(row["median_ratios"]) == {"distinct_over_shared", "distinct_over_prefix"}
    assert len(row["prompt_tokens_after_template"]["shared"]) == 1
