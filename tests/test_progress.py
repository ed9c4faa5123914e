"""Progress bars on a terminal and in a log: not on a terminal, tqdm's
redraws become short status lines, the first at once, then one every
interval and the last when the bar closes."""
import io
import re

import pytest

from spacy_structpref import progress
from spacy_structpref.progress import LogLines, progress_bar


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_log_lines_write_the_first_status_then_one_an_interval_and_the_last():
    out, clock = io.StringIO(), Clock()
    lines = LogLines(out, interval=30.0, clock=clock)
    lines.write("\rjob:   0%|          | 0/100")
    for n in range(1, 100):  # tqdm redraws: a carriage return, the status, padding
        clock.now = n
        lines.write(f"\rjob: {n:3d}%|#         | {n}/100   ")
    clock.now = 100.0
    lines.write("\rjob: 100%|##########| 100/100")
    lines.write("\n")  # tqdm closing the bar
    assert out.getvalue().splitlines() == ["job:   0%|          | 0/100", "job:  30%|#         | 30/100",
                                           "job:  60%|#         | 60/100", "job:  90%|#         | 90/100",
                                           "job: 100%|##########| 100/100"]
    lines.write("\n")  # nothing new: no line
    assert len(out.getvalue().splitlines()) == 5


@pytest.mark.parametrize("interval,n_lines", [(0.0, None), (3600.0, 2)])
def test_a_bar_not_on_a_terminal_logs_short_lines(interval, n_lines, monkeypatch):
    out = io.StringIO()  # not a terminal
    with progress_bar(total=20000, desc="parse", unit="sent", file=out, interval=interval, mininterval=0) as bar:
        for _ in range(20000):
            bar.update(1)
    text = out.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and text.endswith("\n") and max(map(len, lines)) < 120
    assert re.match(r"parse: +0%", lines[0]) and re.match(r"parse: 100%.*20000/20000", lines[-1])
    assert n_lines is None and len(lines) > 2 or len(lines) == n_lines


def test_disable_none_shows_a_bar_on_a_terminal_only(monkeypatch):
    out = io.StringIO()
    with progress_bar(total=3, file=out, disable=None) as bar:
        bar.update(3)
    assert out.getvalue() == ""
    monkeypatch.setattr(progress, "is_terminal", lambda stream: True)
    with progress_bar(total=3, file=out, disable=None, desc="tty") as bar:
        bar.update(3)
    assert "\r" in out.getvalue() and "tty: 100%" in out.getvalue()
