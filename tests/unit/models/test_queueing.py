from collections import OrderedDict, deque

import pytest
from sounding.models.generators import GenerationParams
from sounding.models.local_generator import _Job, next_batch, prompt_layout
from sounding.models.server import Admission
from sounding.runtime import errors

pytestmark = pytest.mark.unit


def job(flow: str, temperature: float = 0.0, prompt_tokens: int = 2, token: int = 1) -> _Job:
    return _Job((token,) * prompt_tokens, GenerationParams(temperature=temperature), None, flow)


def test_a_batch_takes_flows_round_robin_so_a_flood_cannot_starve_another_flow():
    inquiry = [job("inquiry") for _ in range(20)]
    retrieve = job("retrieve:1")
    pending = OrderedDict([("inquiry", deque(inquiry)), ("retrieve:1", deque([retrieve]))])
    first = next_batch(pending, 4, 2048, 100_000)
    assert first[:2] == [inquiry[0], retrieve]  # one of each flow before a second of either
    assert first[2:] == inquiry[1:3]
    assert list(pending) == ["inquiry"] and len(pending["inquiry"]) == 17


def test_the_flow_served_first_goes_to_the_back():
    a, b = [job("a") for _ in range(3)], [job("b") for _ in range(3)]
    pending = OrderedDict([("a", deque(a)), ("b", deque(b))])
    assert next_batch(pending, 1, 2048, 100_000) == [a[0]]
    assert next_batch(pending, 1, 2048, 100_000) == [b[0]]
    assert next_batch(pending, 1, 2048, 100_000) == [a[1]]


def test_a_batch_holds_only_jobs_that_decode_alike():
    greedy, sampled = job("a"), job("b", temperature=0.7)
    pending = OrderedDict([("a", deque([greedy])), ("b", deque([sampled]))])
    assert next_batch(pending, 8, 2048, 100_000) == [greedy]
    assert next_batch(pending, 8, 2048, 100_000) == [sampled]


def test_a_batch_keeps_its_padded_prompt_tokens_within_the_budget():
    short, long_, short2 = (job(flow, prompt_tokens=n) for flow, n in (("a", 100), ("b", 900), ("c", 100)))
    pending = OrderedDict([("a", deque([short])), ("b", deque([long_])), ("c", deque([short2]))])
    # 2 x 900 tokens would be over 1000: the long prompt waits, the later short one comes along
    assert next_batch(pending, 8, 1000, 100_000) == [short, short2]
    assert next_batch(pending, 8, 1000, 100_000) == [long_]


def test_rows_of_one_prompt_count_its_prefill_once_against_the_budget():
    samples = [job("inquiry", temperature=0.7, prompt_tokens=900) for _ in range(4)]
    other = job("inquiry", temperature=0.7, prompt_tokens=900, token=2)
    pending = OrderedDict([("inquiry", deque([samples[0], other, *samples[1:]]))])
    # one prompt's four rows prefill 900 tokens; the other prompt would make it 1,800
    assert next_batch(pending, 8, 1000, 100_000) == samples
    assert next_batch(pending, 8, 1000, 100_000) == [other]


def test_a_prompt_over_the_budget_still_runs_alone():
    huge, small = job("a", prompt_tokens=5000), job("a", prompt_tokens=10)
    pending = OrderedDict([("a", deque([huge, small]))])
    assert next_batch(pending, 8, 1000, 100_000) == [huge]
    assert next_batch(pending, 8, 1000, 100_000) == [small]


def test_admission_bounds_generations_in_all_and_per_flow():
    admission = Admission(total=3, per_flow=2)
    with admission.admit("a"), admission.admit("a"):
        with pytest.raises(errors.ResourceExhausted):
            with admission.admit("a"):
                pass
        with admission.admit("b"):
            with pytest.raises(errors.ResourceExhausted):
                with admission.admit("c"):
                    pass
    with admission.admit("a"), admission.admit("a"), admission.admit("b"):
        pass  # everything given back


def test_rows_repeating_a_prompt_over_the_budget_still_share_its_batch():
    samples = [job("inquiry", temperature=0.7, prompt_tokens=1500) for _ in range(3)]
    pending = OrderedDict([("inquiry", deque(samples))])
    assert next_batch(pending, 8, 1000, 100_000) == samples


def test_prompts_sharing_a_prefix_count_it_once_and_their_rests_per_prompt():
    def revision(answer: int) -> _Job:
        return _Job((1,) * 900 + (answer,) * 100, GenerationParams(temperature=0.7), None, "inquiry")

    revisions = [revision(answer) for answer in range(2, 12)]
    pending = OrderedDict([("inquiry", deque(revisions))])
    # a pass over the shared 900 tokens, one over the 10 rests of 100 tokens
    assert next_batch(pending, 10, 1000, 100_000) == revisions
    pending = OrderedDict([("inquiry", deque(revisions))])
    assert next_batch(pending, 10, 950, 100_000) == revisions[:9]
    # a shared prefix over the budget is no longer than the oldest prompt, which runs anyway
    pending = OrderedDict([("inquiry", deque(revisions))])
    assert next_batch(pending, 10, 500, 100_000) == revisions[:5]


def test_the_layout_shares_the_common_prefix_and_pads_between_it_and_each_rest():
    a, b, c = (1, 2, 3, 4), (1, 2, 5), (1, 2, 3, 4)
    layout = prompt_layout([a, b, c], pad=0)
    assert layout.common == 2
    assert layout.ids == [[1, 2, 3, 4], [1, 2, 0, 5]]
    assert layout.attention == [[1, 1, 1, 1], [1, 1, 0, 1]]
    assert layout.rows == [0, 1, 0]


def test_one_repeated_prompt_keeps_its_last_token_out_of_the_shared_prefix():
    layout = prompt_layout([(7, 8, 9)] * 3, pad=0)
    assert (layout.common, layout.ids, layout.rows) == (2, [[7, 8, 9]], [0, 0, 0])


def test_a_batch_keeps_its_cache_within_the_budget_new_tokens_included():
    samples = [job("inquiry", temperature=0.7, prompt_tokens=1000) for _ in range(8)]  # 256 new tokens
    pending = OrderedDict([("inquiry", deque(samples))])
    # one prefill, but every row holds a copy of the cache: 4 x 1,256 would be over 5,000
    assert next_batch(pending, 8, 1024, 5000) == samples[:3]
    assert next_batch(pending, 8, 1024, 500) == [samples[3]]  # a longer generation still runs alone
