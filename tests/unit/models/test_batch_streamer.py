import asyncio

import pytest
from sounding.models.generators import GenerationParams
from sounding.models.local_generator import _BatchStreamer, _Job

# The [models] extra's torch: absent where the unit tests run without it (make test-newer-python).
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.unit
EOS = 0


class LetterTokenizer:
    """Token n decodes to the n-th lowercase letter (1 = 'a'); 0 is the end of text."""

    def decode(self, tokens, skip_special_tokens=True):
        return "".join(chr(ord("a") + t - 1) for t in tokens if t != EOS)


async def run_batch(params: list[GenerationParams], steps: list[list[int]], cancel_row: int | None = None):
    loop = asyncio.get_running_loop()
    jobs = [_Job((1, 2), p, loop) for p in params]
    streamer = _BatchStreamer(LetterTokenizer(), jobs, {EOS})
    streamer.put(torch.tensor([[1, 2]] * len(jobs)))  # the prompt
    for index, step in enumerate(steps):
        if index == 1 and cancel_row is not None:
            jobs[cancel_row].cancelled.set()
        streamer.put(torch.tensor(step))
    streamer.end()
    await asyncio.sleep(0)
    outputs = []
    for job in jobs:
        pieces = []
        while not job.pieces.empty():
            pieces.append(job.pieces.get_nowait())
        outputs.append(
            ("".join(p.text for p in pieces), [p.finish_reason for p in pieces if p.finish_reason])
        )
    return outputs


def test_rows_finish_on_end_of_text_stop_string_or_length_independently():
    params = [
        GenerationParams(max_new_tokens=10),
        GenerationParams(max_new_tokens=10, stop=("c",)),
        GenerationParams(max_new_tokens=2),
    ]
    steps = [[1, 1, 1], [2, 2, 2], [EOS, 3, 3], [EOS, 4, 4]]
    outputs = asyncio.run(run_batch(params, steps))
    assert outputs[0] == ("ab", ["stop"])
    assert outputs[1] == ("ab", ["stop"])  # "abc" reached the stop string "c"
    assert outputs[2] == ("ab", ["length"])


def test_a_row_still_running_when_generation_ends_finishes_with_length():
    outputs = asyncio.run(run_batch([GenerationParams(max_new_tokens=10)], [[1], [2]]))
    assert outputs[0] == ("ab", ["length"])


def test_a_cancelled_row_gets_nothing_more():
    params = [GenerationParams(max_new_tokens=10)] * 2
    outputs = asyncio.run(run_batch(params, [[1, 1], [2, 2], [3, 3]], cancel_row=1))
    assert outputs[0] == ("abc", ["length"])
    assert outputs[1] == ("a", [])
