"""The step progress display: its line, and lines that keep coming off a terminal."""

import io
import threading

import pytest
from rich.console import Console
from sounding.runtime.progress import StepProgress

pytestmark = pytest.mark.unit


def test_the_line_states_the_step_the_detail_the_time_so_far_and_the_time_left_at_the_pace():
    now = [100.0]
    progress = StepProgress(Console(file=io.StringIO()), "training", clock=lambda: now[0])
    now[0] = 102.0
    progress.update(10, 110, "loss 0.900")
    assert progress.line() == "training: step 10/110, loss 0.900; 2 s so far"
    now[0] = 122.0  # 10 steps in 20 s: 100 left take 200 s
    progress.update(20, 110, "loss 0.700")
    assert progress.line() == "training: step 20/110, loss 0.700; 22 s so far, about 3 min 0 s left"


def test_off_a_terminal_a_line_comes_every_interval_even_while_a_step_lasts():
    lines = []
    arrived = threading.Event()

    class Lines(io.StringIO):
        def write(self, text):
            lines.extend(line for line in text.splitlines() if line)
            if len(lines) >= 3:
                arrived.set()
            return len(text)

    console = Console(file=Lines(), force_terminal=False)
    with StepProgress(console, "training", interval_s=0.01) as progress:
        progress.update(1, 5, "loss 1.000")
        assert arrived.wait(30)  # no further update: the lines come from the clock, not the steps
    assert all(line.startswith("training: step 1/5, loss 1.000") for line in lines)
