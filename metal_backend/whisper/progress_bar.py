"""A one-line text progress bar for long transcriptions, drawn on a terminal's stderr."""

from __future__ import annotations

import sys
from typing import TextIO


class ProgressBar:
    """Callable as transcribe()'s progress(seconds_done, seconds_total); redraws one line in place.

    It draws only when `enabled`, which by default means the stream is a terminal (a log file or a
    pipe gets no carriage-return noise). close() ends the line if anything was drawn.
    """

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30, enabled: bool | None = None):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.drawn = False

    def line(self, done: float, total: float) -> str:
        """The bar's text for `done` of `total` seconds (clamped to 0..total)."""
        total = max(float(total), 0.0)
        done = min(max(float(done), 0.0), total)
        fraction = done / total if total > 0 else 1.0
        filled = int(fraction * self.width)  # full only at 100 %
        bar = "#" * filled + "." * (self.width - filled)
        return f"{self.label} [{bar}] {fraction * 100:3.0f}% {done:.1f}/{total:.1f} s"

    def __call__(self, done: float, total: float) -> None:
        if not self.enabled:
            return
        self.stream.write("\r" + self.line(done, total))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Moves past the bar's line (only when something was drawn)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
