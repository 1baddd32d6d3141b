"""The progress displays of the CLI and the evaluation harnesses."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


class StepProgress:
    """Progress of a loop of known length (`update(step, total, detail)`): a live bar with the
    time left on a terminal; elsewhere (a pipe, a log) one line every `interval_s` seconds, however
    slow the steps, e.g. "training: step 120/924, loss 0.652; 1 min 46 s so far, about 11 min left"."""

    def __init__(
        self,
        console: Console,
        description: str,
        interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._console = console
        self._description = description
        self._interval_s = interval_s
        self._clock = clock
        self._state = (0, 0, "")
        self._first: tuple[float, int] | None = None  # when and at which step the pace is measured from
        self._started = clock()
        self._stop = threading.Event()
        self._lines: threading.Thread | None = None
        self._bar: Progress | None = None
        self._printed = ""  # the last line printed off a terminal

    def __enter__(self) -> StepProgress:
        if self._console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=self._console,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._description, total=None)
        else:
            self._lines = threading.Thread(target=self._print_lines, name="progress-lines", daemon=True)
            self._lines.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._bar is not None:
            self._bar.stop()
        if self._lines is not None:
            self._lines.join()
            if self.line() != self._printed:
                self._console.print(self.line(), highlight=False, soft_wrap=True)

    def update(self, step: int, total: int, detail: str = "") -> None:
        if self._first is None:
            self._first = (self._clock(), step)
        self._state = (step, total, detail)
        if self._bar is not None:
            description = f"{self._description}, {detail}" if detail else self._description
            self._bar.update(self._task, completed=step, total=total, description=description)

    def line(self) -> str:
        """The state as one line: steps, the detail, the time so far and the time left at the
        pace since the first update."""
        step, total, detail = self._state
        now = self._clock()
        text = f"{self._description}: step {step}/{total}" + (f", {detail}" if detail else "")
        text += f"; {_duration(now - self._started)} so far"
        if self._first is not None and step > self._first[1] and total > step:
            at, first_step = self._first
            left = (now - at) / (step - first_step) * (total - step)
            text += f", about {_duration(left)} left"
        return text

    def _print_lines(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._printed = self.line()
            self._console.print(self._printed, highlight=False, soft_wrap=True)


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
