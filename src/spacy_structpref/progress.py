"""Progress bars that read well on a terminal and in a log file.

tqdm redraws its bar in place with carriage returns. On a terminal that is
one line changing; written to a file (``nohup``, a CI log, a project run
piped through ``tee``) every redraw stays, on a single line thousands of
characters long. :func:`progress_bar` gives the tqdm bar a
:class:`LogLines` stream when its output is not a terminal: the bar's first
status, then one every ``interval`` seconds and the last, each on a line of
its own.
"""
import sys
import time
from typing import Callable, Optional, TextIO

LOG_INTERVAL = 30.0  # seconds between two status lines in a log


class LogLines:
    """A file-like stream for tqdm that is not a terminal: of the statuses
    tqdm draws (each after a carriage return), writes the first, then the
    latest once ``interval`` seconds have passed since the last line
    written, and the latest when tqdm ends its line (closing the bar)."""

    def __init__(self, stream: TextIO, interval: float = LOG_INTERVAL, clock: Callable[[], float] = time.monotonic):
        self.stream, self.interval, self.clock = stream, interval, clock
        self.pending, self.written, self.last = "", "", None

    def write(self, text: str) -> None:
        for i, piece in enumerate(text.split("\n")):
            if i:  # tqdm ends the bar's line: its last status is due
                self._emit()
            status = piece.rsplit("\r", 1)[-1].strip()  # what a terminal would show now
            if status:
                self.pending = status
                if self.last is None or self.clock() - self.last >= self.interval:
                    self._emit()

    def _emit(self) -> None:
        if self.pending and self.pending != self.written:
            self.stream.write(self.pending + "\n")
            self.stream.flush()
            self.written, self.last = self.pending, self.clock()
        self.pending = ""

    def flush(self) -> None:
        self.stream.flush()


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_bar(iterable=None, *, file: Optional[TextIO] = None, disable: Optional[bool] = False,
                 interval: Optional[float] = None, **settings):
    """``tqdm(iterable, **settings)`` on ``file`` (stderr by default): the
    bar in place on a terminal, status lines every ``interval`` seconds
    (default :data:`LOG_INTERVAL`; :class:`LogLines`) anywhere else; nothing when ``disable``, and, as
    tqdm's ``disable=None``, nothing but on a terminal when ``disable`` is None."""
    from tqdm import tqdm

    stream = file if file is not None else sys.stderr
    if disable is None:
        disable = not is_terminal(stream)
    if not disable and not is_terminal(stream):
        stream = LogLines(stream, LOG_INTERVAL if interval is None else interval)
    return tqdm(iterable, file=stream, disable=disable, **settings)
