import pytest

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.scoring import evalb
from spacy_structpref.scoring.parseval import brackets, sentence_stats
from spacy_structpref.trees import parse_bracketed as P

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
    assert len(leaves) == 7


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


def test_missing_parse_scores_zero_brackets():
    r = evalb([P(GOLD)], [None])
    assert r.all.recall == 0.0 and r.all.test == 0 and r.all.gold == 5


def test_word_mismatch_and_count_mismatch_raise():
    with pytest.raises(StructPrefError, match="different words"):
        stats(GOLD, GOLD.replace("mat", "hat"))
    with pytest.raises(StructPrefError, match="test trees"):
        evalb([P(GOLD)], [])


def test_table_has_both_columns():
    text = evalb([P(GOLD)], [P(GOLD)]).table()
    assert "len<=40" in text and "Bracketing F-measure" in text and "100.00" in text


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
    empty = nlp.make_doc(gold.text)
    assert scorer([Example(empty, gold)])["parseval_r"] == 0.0
