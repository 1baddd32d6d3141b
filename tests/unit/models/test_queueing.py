from collections import OrderedDict, deque

import pytest
from sounding import errors
from sounding.models.generators import GenerationParams, _Job, next_batch
from sounding.models.server import Admission

pytestmark = pytest.mark.unit


def job(flow: str, temperature: float = 0.0) -> _Job:
    return _Job([1, 2], GenerationParams(temperature=temperature), None, flow)


def test_a_batch_takes_flows_round_robin_so_a_flood_cannot_starve_another_flow():
    inquiry = [job("inquiry") for _ in range(20)]
    retrieve = job("retrieve:1")
    pending = OrderedDict([("inquiry", deque(inquiry)), ("retrieve:1", deque([retrieve]))])
    first = next_batch(pending, 4)
    assert first[:2] == [inquiry[0], retrieve]  # one of each flow before a second of either
    assert first[2:] == inquiry[1:3]
    assert list(pending) == ["inquiry"] and len(pending["inquiry"]) == 17


def test_the_flow_served_first_goes_to_the_back():
    a, b = [job("a") for _ in range(3)], [job("b") for _ in range(3)]
    pending = OrderedDict([("a", deque(a)), ("b", deque(b))])
    assert next_batch(pending, 1) == [a[0]]
    assert next_batch(pending, 1) == [b[0]]
    assert next_batch(pending, 1) == [a[1]]


def test_a_batch_holds_only_jobs_that_decode_alike():
    greedy, sampled = job("a"), job("b", temperature=0.7)
    pending = OrderedDict([("a", deque([greedy])), ("b", deque([sampled]))])
    assert next_batch(pending, 8) == [greedy]
    assert next_batch(pending, 8) == [sampled]


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
