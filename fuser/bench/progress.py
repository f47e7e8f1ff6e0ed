"""The progress line on stderr: rewritten in place on a terminal, one line per step in a
log (carriage returns would make a CI log unreadable)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.in_place = self.stream.isatty()
        self.started = time.monotonic()
        self._last_width = 0

    def show(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        line = f"[{self.done}/{self.total} {elapsed:5.0f}s] {text}"
        if self.in_place:
            self.stream.write("\r" + line.ljust(self._last_width))
            self._last_width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def step_done(self) -> None:
        self.done += 1

    def message(self, text: str) -> None:
        """A line that stays (a failure, a note), printed above the progress line."""
        if self.in_place and self._last_width:
            self.stream.write("\r" + " " * self._last_width + "\r")
            self._last_width = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.in_place and self._last_width:
            self.stream.write("\n")
            self.stream.flush()
            self._last_width = 0
