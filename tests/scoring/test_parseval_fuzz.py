"""A bounded fuzz of the EVALB scorer: on any pair of trees its counts are
consistent and the tree and line readers agree, with no nan or inf; on any
lines it scores or names the bad line."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.scoring.parseval import COLLINS, EvalbParams, evalb, evalb_lines, sentence_stats
from spacy_structpref.trees import to_bracketed

from tests.helpers.strategies import trees

pytestmark = pytest.mark.fuzz

EVALB_TAGS = ["NN", "VB", ",", ".", "-NONE-", "``"]
EVALB_LABELS = ["S", "NP", "VP", "PRT", "ADVP", "NP-SBJ", "TOP", ".", ""]


@st.composite
def tree_pairs(draw):
    """A gold tree and a test tree over the same words, bracketed and tagged
    independently (so punctuation tags may differ: EVALB's length errors)."""
    gold = draw(trees(labels=EVALB_LABELS, tags=EVALB_TAGS, words=["a", "b", "."]))
    words = gold.leaves()
    test = draw(trees(labels=EVALB_LABELS, tags=EVALB_TAGS, words=["w"]))
    leaves = test.treepositions("leaves")
    if len(leaves) < len(words):
        test = Tree("TOP", [test] + [Tree(draw(st.sampled_from(EVALB_TAGS)), ["w"])
                                     for _ in range(len(words) - len(leaves))])
        leaves = test.treepositions("leaves")
    for pos, word in zip(leaves, words):  # extra leaves keep "w": EVALB's length or word errors
        test[pos] = word
    if draw(st.booleans()):
        test = gold.copy(deep=True)
    return gold, test


@settings(max_examples=400, deadline=None)
@given(tree_pairs())
def test_evalb_counts_are_consistent_and_both_readers_agree(pair):
    gold, test = pair
    s = sentence_stats(gold, test)
    assert s.status in (0, 1, 2) and 0 <= s.matched <= min(s.gold, s.test) and s.crossing <= s.test
    if s.status != 0:
        assert s.test == s.matched == s.crossing == 0
    if test == gold:
        assert s.status == 2 or (s.matched == s.gold == s.test and s.crossing == 0)
    texts = [to_bracketed(gold)], [to_bracketed(test)]
    params = EvalbParams(max_error=None)
    by_tree, by_line = evalb([gold], [test], params), evalb_lines(*texts, params)
    assert by_tree.report() == by_line.report() and by_tree.messages == by_line.messages
    figures = by_tree.all.as_dict()
    assert all(v == v and abs(v) != float("inf") for v in figures.values())  # no nan, no inf


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="() aNV\t\0", max_size=30), min_size=1, max_size=3), st.data())
def test_evalb_on_any_lines_scores_or_names_the_line(gold, data):
    test = data.draw(st.lists(st.text(alphabet="() aNV\t", max_size=30), min_size=0, max_size=4))
    try:
        result = evalb_lines(gold, test, COLLINS)
    except StructPrefError as err:
        assert "line " in str(err) or "MAX_ERROR" in str(err)
        return
    assert result.all.sentences <= len(gold) and result.report().endswith("\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(tree_pairs(), min_size=1, max_size=6), st.integers(-3, 3))
def test_evalb_stops_where_evalb_does_or_scores_everything(pairs, max_error):
    """With MAX_ERROR m, EVALB exits at error m + 2 (any negative m: at the
    first): a stopped result has exactly that many messages and its report
    is the header and the sentence lines before the last error; a run that
    does not stop has at most m + 1 errors and matches the unbounded run."""
    from spacy_structpref.scoring.parseval import EvalbStopped

    golds, tests = [g for g, _ in pairs], [t for _, t in pairs]
    every = evalb(golds, tests, EvalbParams(max_error=None))
    try:
        result = evalb(golds, tests, EvalbParams(max_error=max_error))
    except EvalbStopped as stop:
        result = stop.result
        assert result.stopped and len(result.messages) == max(max_error, -1) + 2
        assert result.messages == every.messages[:len(result.messages)]
        lines = result.report().splitlines()
        assert len(lines) == 3 + result.messages[-1][0] and "Summary" not in result.report()
        return
    assert len(result.messages) <= max(max_error, -1) + 1 and result.report() == every.report()
