"""The memo of parses (spacy_structpref.parsing.memo)."""
import pytest
from hypothesis import given, settings, strategies as st

from spacy_structpref.errors import StructPrefError
from spacy_structpref.parsing.memo import ParseMemo


class Parser:
    """Parses a key as its upper-case form, counting the keys it parsed."""

    def __init__(self):
        self.calls = []

    def __call__(self, keys):
        def parse(positions):
            self.calls.append([keys[p] for p in positions])
            return [keys[p].upper() for p in positions]
        return parse


def test_kept_sentences_are_not_parsed_again_and_the_rest_are_in_order():
    memo, parser = ParseMemo(size=10), Parser()
    assert memo.results("s", ["a", "b"], parser(["a", "b"])) == ["A", "B"]
    keys = ["c", "a", "d", "b", "c"]
    assert memo.results("s", keys, parser(keys)) == ["C", "A", "D", "B", "C"]
    assert parser.calls == [["a", "b"], ["c", "d", "c"]]
    assert (memo.hits, memo.misses) == (2, 5) and len(memo) == 4


def test_another_state_empties_the_memo():
    memo, parser = ParseMemo(), Parser()
    memo.results("weights 1", ["a"], parser(["a"]))
    memo.results("weights 2", ["a"], parser(["a"]))
    memo.results("weights 2", ["a"], parser(["a"]))
    assert parser.calls == [["a"], ["a"]]


def test_the_least_recently_used_go_first_and_size_0_keeps_nothing():
    memo, parser = ParseMemo(size=2), Parser()
    for key in ["a", "b", "a", "c"]:  # b, used least recently, goes when c comes
        memo.results("s", [key], parser([key]))
    memo.results("s", ["a", "b"], parser(["a", "b"]))
    assert parser.calls == [["a"], ["b"], ["c"], ["b"]]
    none, parser = ParseMemo(size=0), Parser()
    for _ in range(2):
        none.results("s", ["a"], parser(["a"]))
    assert parser.calls == [["a"], ["a"]] and len(none) == 0
    with pytest.raises(StructPrefError, match="size"):
        ParseMemo(size=-1)


@settings(max_examples=100, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["s", "t"]), st.lists(st.sampled_from("abcdef"), max_size=6)),
                      max_size=8), size=st.integers(0, 4))
def test_results_are_always_the_parsers_and_what_is_parsed_follows_a_reference_lru(calls, size):
    memo, parser = ParseMemo(size=size), Parser()
    kept, kept_state = [], None  # the reference: keys kept, least recently used first
    for state, keys in calls:
        if state != kept_state:
            kept, kept_state = [], state
        todo = [k for k in keys if k not in kept]
        assert memo.results(state, keys, parser(keys)) == [k.upper() for k in keys]
        assert parser.calls[-1:] == ([todo] if todo else [])
        parser.calls.clear()
        kept += [k for k in dict.fromkeys(todo) if size]
        for k in keys:
            if k in kept:
                kept.remove(k)
                kept.append(k)
        del kept[:max(0, len(kept) - size)]
        assert len(memo) == len(kept) <= size
