"""The parses of sentences seen before, while the parser stays the same.

A frozen parser under a component that trains on its output (the parse
reranker in ``spacy train``) parses the same dev sentences at every
evaluation: with forests and 50-best lists that is most of such a training.
A :class:`ParseMemo` keeps the last ``size`` distinct sentences' results
under a *state*: whatever else the results depend on (a digest of the
weights, the settings); a call under another state empties it first, so a
parser whose weights moved parses again."""
from collections import OrderedDict
from typing import Callable, Hashable, List, Sequence

from ..errors import check_count


class ParseMemo:
    """Results by sentence key (e.g. the words, with the tags where the
    parser reads them), least recently used dropped beyond ``size`` (0: keep
    nothing). Results are shared with the callers that asked for the same
    sentence: they must not be changed in place."""

    def __init__(self, size: int = 512):
        self.size = check_count("the parse memo's size", size, 0)
        self._state: Hashable = None
        self._results: "OrderedDict[Hashable, object]" = OrderedDict()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._results)

    def clear(self) -> None:
        self._results.clear()

    def results(self, state: Hashable, keys: Sequence[Hashable], parse: Callable[[List[int]], list]) -> list:
        """The result of each key under ``state``: those not kept come from
        ``parse(positions)`` (the positions in ``keys`` to parse, in order;
        one result each), and are kept."""
        if state != self._state:
            self._results.clear()
            self._state = state
        out = [self._results.get(key) for key in keys]
        todo = [p for p, res in enumerate(out) if res is None]
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        if todo:
            for p, res in zip(todo, parse(todo)):
                out[p] = res
                if self.size:
                    self._results[keys[p]] = res
        for key in keys:
            if key in self._results:
                self._results.move_to_end(key)
        while len(self._results) > self.size:
            self._results.popitem(last=False)
        return out
