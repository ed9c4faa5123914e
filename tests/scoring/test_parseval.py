import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.scoring import evalb
from spacy_structpref.scoring.parseval import brackets, sentence_stats
from spacy_structpref.trees import parse_bracketed as P
from spacy_structpref.trees import to_bracketed
from tests.helpers.strategies import trees

GOLD = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"


def stats(gold, test):
    return sentence_stats(P(gold), P(test) if test else None)


def test_gold_against_gold_is_perfect_on_ptb_test():
    trees = ptb_trees("test")
    r = evalb(trees, trees)
    for totals in (r.all, r.short):
        assert totals.f1 == totals.recall == totals.precision == 100.0
        assert totals.exact_match == 100.0 and totals.avg_crossing == 0.0
        assert totals.zero_crossing == totals.le2_crossing_pct == 100.0
    assert r.all.sentences == 413 and r.short.sentences < 413


def test_gold_brackets_exclude_top_preterminals_and_punctuation():
    br, leaves = brackets(P(GOLD))
    assert sorted(br) == sorted([("S", 0, 6), ("NP", 0, 2), ("VP", 2, 6), ("PP", 3, 6), ("NP", 4, 6)])
    assert len(leaves) == 6 and (".", ".") not in leaves  # punctuation terminals are deleted


def test_wrong_attachment_hand_computed():
    s = stats(GOLD, "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (PP (IN on) (NP (DT the) (NN mat))) (. .)))")
    assert (s.gold, s.test, s.matched, s.crossing) == (5, 5, 4, 0)


def test_crossing_bracket_hand_computed():
    s = stats(GOLD, "(TOP (S (X (NP (DT The) (NN cat)) (VBD sat)) (PP (IN on) (NP (DT the) (NN mat))) (. .)))")
    # X[0,3) crosses VP[2,6); matched S, NP, PP, NP.
    assert (s.gold, s.test, s.matched, s.crossing) == (5, 5, 4, 1)


def test_three_crossings_and_summary_percentages():
    gold = "(TOP (S (A (X a) (X b)) (B (X c) (X d)) (C (X e) (X f))))"
    test = "(TOP (S (X a) (D (X b) (X c)) (E (X d) (X e)) (X f)))"
    # D[1,3) crosses A[0,2) and B[2,4); E[3,5) crosses B and C: 2 crossing test brackets.
    s = stats(gold, test)
    assert (s.gold, s.test, s.matched, s.crossing) == (4, 3, 1, 2)
    r = evalb([P(gold), P(gold)], [P(test), P(gold)])
    assert r.all.avg_crossing == 1.0 and r.all.zero_crossing == 50.0 and r.all.le2_crossing_pct == 100.0
    assert r.all.exact_match == 50.0
    assert r.all.recall == pytest.approx(100 * 5 / 8) and r.all.precision == pytest.approx(100 * 5 / 7)


def test_punctuation_attachment_is_ignored():
    s = stats(GOLD, "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))) (. .))))")
    assert s.matched == s.gold == s.test == 5


def test_bracket_of_only_punctuation_is_dropped():
    s = sentence_stats(P("(TOP (S (NP (DT a) (NN b)) (, ,) (VP (VBZ c))))"),
                       P("(TOP (S (NP (DT a) (NN b)) (PRN (, ,)) (VP (VBZ c))))"))
    assert s.matched == s.gold == s.test == 3
    br, _ = brackets(P("(TOP (S (NP (DT a)) (PRN (, ,) (`` ``)) (VP (VBZ c))))"))
    assert ("PRN", 1, 1) not in br and all(b[0] != "PRN" for b in br)


def test_advp_equals_prt():
    s = stats("(TOP (S (VP (VB give) (PRT (RP up)))))", "(TOP (S (VP (VB give) (ADVP (RP up)))))")
    assert s.matched == s.gold == s.test == 3


def test_preterminals_do_not_count_but_tagging_is_reported():
    s = stats(GOLD, GOLD.replace("(VBD sat)", "(VBN sat)").replace("(NN cat)", "(NNS cat)"))
    assert s.matched == s.gold == s.test == 5
    assert (s.tags_correct, s.words) == (4, 6)


def test_duplicates_are_a_multiset():
    s = stats("(TOP (S (NP (NP (NNS dogs))) (VP (VBP bark))))", "(TOP (S (NP (NNS dogs)) (VP (VBP bark))))")
    assert (s.gold, s.test, s.matched) == (4, 3, 3)
    s = stats("(TOP (S (NP (NNS dogs)) (VP (VBP bark))))", "(TOP (S (NP (NP (NP (NNS dogs)))) (VP (VBP bark))))")
    assert (s.gold, s.test, s.matched) == (3, 5, 3)


def test_length_cutoff_counts_punctuation():
    words = " ".join(f"(NN w{i})" for i in range(40))
    forty = P(f"(TOP (S (NP {words})))")
    forty_one = P(f"(TOP (S (NP {words}) (. .)))")
    r = evalb([forty, forty_one], [forty, forty_one])
    assert r.all.sentences == 2 and r.short.sentences == 1


def test_missing_parse_is_skipped_as_evalb_skips_an_empty_line():
    r = evalb([P(GOLD), P(GOLD)], [None, P(GOLD)])
    assert (r.all.sentences, r.all.skipped, r.all.valid) == (2, 1, 1)
    assert r.all.recall == 100.0 and r.all.gold == 5 and r.all.exact_match == 100.0
    assert r.sentences[0].status == 2 and not r.sentences[0].valid and r.messages == []


def test_word_mismatch_is_an_error_sentence_and_count_mismatch_raises():
    r = evalb([P(GOLD), P(GOLD)], [P(GOLD.replace("mat", "hat")), P(GOLD)])
    assert (r.all.errors, r.all.valid, r.all.f1) == (1, 1, 100.0)
    assert r.messages == [(0, "1 : Words unmatch (mat|hat)")]
    with pytest.raises(StructPrefError, match="test trees"):
        evalb([P(GOLD)], [])


def test_punctuation_tagged_as_a_word_is_a_length_error():
    s = stats(GOLD, GOLD.replace("(. .)", "(NN .)"))
    assert (s.status, s.gold, s.test, s.matched, s.length) == (1, 5, 0, 0, 7)  # F1 0: never a reranking target


def test_phrase_labelled_like_punctuation_is_deleted_and_unlabelled_root_counts():
    s = stats("( (S (NP (DT a) (NN b)) (VP (VBZ c))))", "( (S (, (DT a) (NN b)) (VP (VBZ c))))")
    assert (s.gold, s.test, s.matched) == (4, 3, 3)  # root "", S, NP, VP against root "", S, VP


def test_evalb_stops_after_max_error_plus_one_errors():
    """EVALB's Error() prints its line, then exits once it has counted more
    than MAX_ERROR + 1: at the 12th error with -e 10, at the first with any
    negative -e; what it printed until then is the header and the lines of
    the sentences before the error."""
    from dataclasses import replace

    from spacy_structpref.scoring.parseval import _HEAD, COLLINS, EvalbStopped

    bad = P(GOLD.replace("mat", "hat"))
    assert evalb([P(GOLD)] * 11, [bad] * 11).all.errors == 11
    with pytest.raises(EvalbStopped, match="MAX_ERROR 10") as stop:
        evalb([P(GOLD)] * 16, [P(GOLD)] * 3 + [bad] * 13)
    result = stop.value.result
    assert result.stopped and [n for n, _ in result.messages] == list(range(3, 15))
    assert result.messages[-1][1] == "15 : Words unmatch (mat|hat)"
    lines = result.report().splitlines()
    assert lines[:3] == _HEAD and len(lines) == 3 + 14 and lines[-1].startswith("  14")
    for negative in (-1, -5):
        with pytest.raises(EvalbStopped, match=f"MAX_ERROR {negative}") as stop:
            evalb([P(GOLD)] * 3, [P(GOLD), bad, bad], replace(COLLINS, max_error=negative))
        assert stop.value.result.messages == [(1, "2 : Words unmatch (mat|hat)")]
    assert evalb([P(GOLD)] * 12, [bad] * 12, replace(COLLINS, max_error=None)).all.errors == 12
    for wrong in (1.5, True, "3"):
        with pytest.raises(StructPrefError, match="max_error"):
            replace(COLLINS, max_error=wrong)


def test_stop_message_names_the_error_it_stops_at():
    """The stop blames what EVALB reports (here unbalanced brackets), not words."""
    from spacy_structpref.scoring.parseval import EvalbStopped, evalb_lines

    line = "(TOP (S (NP (PRP He)) (VP (VBD left))))"
    with pytest.raises(EvalbStopped, match="too many open bracket") as stop:
        evalb_lines([line] * 12, [line[:-1]] * 12)
    assert "word" not in str(stop.value).lower()


def _crossing_reference(test, gold):
    """EVALB's loop: each test bracket against every gold one."""
    return sum(any(gs < ts < ge < te or ts < gs < te < ge for _, gs, ge in gold) for _, ts, te in test)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 12)), max_size=15),
       st.lists(st.tuples(st.integers(0, 12), st.integers(1, 12)), max_size=15))
def test_crossing_equals_the_pairwise_count(test, gold):
    from spacy_structpref.scoring.parseval import _CrossingTable

    # a == b: a bracket left unclosed (end -1), which EVALB reads but which crosses nothing
    test = [("X", min(a, b), max(a, b)) if a != b else ("X", a, -1) for a, b in test]
    gold = [("X", min(a, b), max(a, b)) if a != b else ("X", a, -1) for a, b in gold]
    assert _CrossingTable(gold, 13).count(test) == _crossing_reference(test, gold)


# labels and tags that exercise EVALB's rules: a deleted label (TOP), an equal pair (ADVP, PRT), a
# function tag cut off (NP-SBJ), deleted terminals (punctuation, -NONE-)
_LABELS = ["S", "NP", "NP-SBJ", "ADVP", "PRT", "TOP"]
_TAGS = ["DT", "NN", ".", ",", "-NONE-"]


def _rebracketed(draw, leaves):
    """A random tree over the preterminals ``leaves``, in order."""
    if len(leaves) == 1:
        return leaves[0] if draw(st.booleans()) else Tree(draw(st.sampled_from(_LABELS)), [leaves[0]])
    cuts = sorted(set(draw(st.lists(st.integers(1, len(leaves) - 1), min_size=1, max_size=2))))
    bounds = [0] + cuts + [len(leaves)]
    return Tree(draw(st.sampled_from(_LABELS)), [_rebracketed(draw, leaves[a:b]) for a, b in zip(bounds, bounds[1:])])


@settings(max_examples=200, deadline=None)
@given(trees(labels=_LABELS, tags=_TAGS), st.lists(trees(labels=_LABELS, tags=_TAGS), max_size=2), st.data())
def test_a_list_scores_as_its_trees_one_by_one(gold, others, data):
    """candidate_stats (the gold side prepared once, each candidate read as
    a line) equals sentence_stats of each candidate read as a tree: over
    trees of the gold's words (crossing, matching, equal and deleted
    labels) and trees of other words (length and word errors)."""
    from spacy_structpref.scoring.parseval import candidate_stats

    leaves = list(gold.subtrees(lambda t: t.height() == 2))
    candidates = [gold] + [_rebracketed(data.draw, leaves) for _ in range(3)] + others
    texts = [to_bracketed(c) for c in candidates]
    assert candidate_stats(gold, texts) == [sentence_stats(gold, P(text)) for text in texts]


@pytest.mark.parametrize("text", ["", "(S (NN a)", "(S (NN a) b)"])
def test_a_candidate_evalb_cannot_read_is_refused(text):
    from spacy_structpref.scoring.parseval import candidate_stats

    with pytest.raises(StructPrefError, match="candidate 1 "):
        candidate_stats(P("(S (NN a))"), ["(S (NN a))", text])


def test_a_chain_100000_deep_scores_in_seconds():
    """Matching and crossing brackets are linear up to a logarithm: a chain
    of 100,000 brackets, as a tree and as a line, and a flat sentence of
    20,000 phrases."""
    import time

    from spacy_structpref.scoring.parseval import evalb_lines
    from tests.helpers.deep_trees import chain

    start = time.perf_counter()
    deep = chain(100_000, label=lambda level: ("S", "NP", "VP")[level % 3])
    r = evalb([deep], [deep])
    assert (r.all.matched, r.all.gold, r.all.crossing) == (100_000, 100_000, 0)
    line = "(TOP " + "(S " * 100_000 + "(NN w)" + ")" * 100_001
    wide = "(TOP (S " + " ".join(f"(NP (NN w{i}))" for i in range(20_000)) + "))"
    shifted = "(TOP (S " + " ".join(f"(NP (NN w{i}) (NN w{i + 1}))" for i in range(0, 20_000, 2)) + "))"
    r = evalb_lines([line, wide], [line, shifted])
    assert r.sentences[0].matched == 100_000 and r.sentences[1].crossing == 0
    assert time.perf_counter() - start < 60


def test_table_has_both_columns():
    text = evalb([P(GOLD)], [P(GOLD)]).table()
    assert "len<=40" in text and "Bracketing F-measure" in text and "100.00" in text
    assert "Error sentences" in text and "Skipped sentences" in text


def test_spacy_scorer_on_examples(nlp):
    from spacy.training import Example
    from spacy.util import registry

    from spacy_structpref.trees import tree_to_doc

    scorer = registry.scorers.get("spacy_structpref.parseval_scorer.v1")()
    gold = tree_to_doc(nlp.vocab, P(GOLD))
    pred = tree_to_doc(nlp.vocab, P(
        "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (PP (IN on) (NP (DT the) (NN mat))) (. .)))"))
    scores = scorer([Example(pred, gold)])
    assert scores["parseval_f"] == pytest.approx(0.8) and scores["parseval_f_40"] == pytest.approx(0.8)
    assert scores["parseval_cb"] == 0.0
    assert scores["parseval_errors"] == scores["parseval_skipped"] == 0
    empty = nlp.make_doc(gold.text)
    scores = scorer([Example(empty, gold)])
    assert scores["parseval_r"] == 0.0 and scores["parseval_skipped"] == 1


def test_lines_as_evalb_reads_them():
    from spacy_structpref.scoring.parseval import evalb_lines

    line = "(TOP (S (NP (PRP He)) (VP (VBD left))))"
    r = evalb_lines([line, "", line], [line, "", line + "\0 (junk"])  # a NUL ends the line
    assert (r.all.sentences, r.all.skipped, r.all.valid, r.all.f1) == (3, 1, 2, 100.0)
    r = evalb_lines([line, line], [line])
    assert r.messages == [(1, "2 : Number of lines unmatch (too many lines in gold file)")]
    assert r.all.sentences == 1
    r = evalb_lines([line], [line, line])
    assert r.messages == [(1, "2 : Number of lines unmatch (too many lines in test file)")]
    r = evalb_lines([line], ["(TOP (S (NP (PRP He)) (VP (VBD left))"])  # EVALB: an error, counts shown
    assert r.messages == [(0, "1 : Bracketing is unbalanced (too many open bracket)")]
    assert r.sentences[0].status == 1 and r.sentences[0].matched == 2  # the unclosed S matches nothing


@pytest.mark.parametrize("bad,match", [
    ("(TOP (S (NP He (PRP he)) (VP (VBD left))))", "line 1: more than two elements"),
    ("(TOP (S (NP (PRP He))) (VP (VBD left))))", "line 1: unbalanced"),
    ("He (TOP (S (NP (PRP He)) (VP (VBD left))))", "line 1: 'He"),
])
def test_lines_evalb_cannot_read_raise_with_the_line(bad, match):
    from spacy_structpref.scoring.parseval import evalb_lines

    with pytest.raises(StructPrefError, match=match):
        evalb_lines(["(TOP (S (NP (PRP He)) (VP (VBD left))))"], [bad])


def test_word_outside_a_preterminal_in_a_tree_raises():
    from nltk.tree import Tree

    with pytest.raises(StructPrefError, match="only child"):
        sentence_stats(P(GOLD), Tree("TOP", [Tree("S", ["a", Tree("NN", ["b"])])]))


def test_deep_trees_are_read_without_recursion():
    deep = "(TOP " + "(S " * 5000 + "(NN w)" + ")" * 5001
    s = stats(deep, deep)
    assert s.gold == s.test == s.matched == 5000
