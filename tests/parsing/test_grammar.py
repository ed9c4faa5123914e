"""Grammar extraction: annotation, binarisation, chains, lexicon."""
from collections import defaultdict

import pytest
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.parsing.grammar import (Annotation, Grammar, annotate, base_label, estimate_grammar,
                                              is_intermediate, word_signature)
from spacy_structpref.trees.brackets import parse_bracketed, to_bracketed

from tests.helpers.deep_trees import DEPTH, chain

PLAIN = Annotation(horizontal_markov=-1, vertical_markov=1, tag_parent=False, split_unary_tags=False,
                   split_in=False, split_percent=False)
T1 = "(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .)))"
T2 = "(TOP (S (NP (DT the) (JJ big) (NN cat)) (VP (VBZ sees) (NP (PRP it))) (. .)))"


def test_annotate_parent_and_tags():
    tree = annotate(parse_bracketed(T2), Annotation())
    assert tree.label() == "TOP"
    assert tree[0].label() == "S^TOP"
    assert tree[0][0].label() == "NP^S"
    assert tree[0][0][0].label() == "DT^NP"
    # unary-tag split: PRP is the only child of its NP
    assert tree[0][1][1][0].label() == "PRP^NP^U"
    assert [base_label(t.label()) for t in tree.subtrees()] == [t.label() for t in parse_bracketed(T2).subtrees()]


def test_plain_grammar_probabilities_by_hand():
    g = estimate_grammar([parse_bracketed(T1), parse_bracketed(T2)], PLAIN)
    rules = {(g.states[a], g.states[b], g.states[c]): p for a, b, c, p in g.binary}
    chains = {tuple(g.states[s] for s in ch): p for ch, p in g.chains}
    # S -> NP VP . (twice), unmarkovised: S -> NP @S|NP ; @S|NP -> VP .
    assert rules[("S", "NP", "@S|NP")] == 1.0
    assert rules[("@S|NP", "VP", ".")] == 1.0
    # NP: DT NN once, DT JJ NN once, chain NP -> PRP once: 3 occurrences
    assert rules[("NP", "DT", "NN")] == pytest.approx(1 / 3)
    assert rules[("NP", "DT", "@NP|DT")] == pytest.approx(1 / 3)
    assert chains[("NP", "PRP")] == pytest.approx(1 / 3)
    # VP: chain VP -> VBZ once, VP -> VBZ NP once
    assert chains[("VP", "VBZ")] == pytest.approx(0.5)
    assert rules[("VP", "VBZ", "NP")] == pytest.approx(0.5)
    assert chains[("TOP", "S")] == 1.0


def test_unary_chains_are_collapsed():
    tree = parse_bracketed("(TOP (S (VP (VB go))))")
    g = estimate_grammar([tree], PLAIN)
    assert [tuple(g.states[s] for s in ch) for ch, _ in g.chains] == [("TOP", "S", "VP", "VB")]
    assert g.binary == []


def test_markovisation_order():
    tree = parse_bracketed("(TOP (NP (DT a) (JJ b) (JJ c) (JJ d) (NN e)))")
    for h, expected in ((1, {"@NP|DT", "@NP|JJ"}), (2, {"@NP|DT", "@NP|DT,JJ", "@NP|JJ,JJ"})):
        ann = Annotation(horizontal_markov=h, vertical_markov=1, tag_parent=False, split_unary_tags=False)
        g = estimate_grammar([tree], ann)
        assert {s for s in g.states if is_intermediate(s)} == expected


def test_rule_probabilities_normalised_per_lhs():
    from spacy_structpref.corpora import ptb_trees

    g = estimate_grammar(ptb_trees("train")[:200])
    total = defaultdict(float)
    for a, _, _, p in g.binary:
        total[a] += p
    for ch, p in g.chains:
        total[ch[0]] += p
    for state, mass in total.items():
        assert mass == pytest.approx(1.0), g.states[state]


def test_lexicon_and_signatures():
    from spacy_structpref.corpora import ptb_trees

    g = estimate_grammar(ptb_trees("train")[:300])
    ids, probs = g.tag_scores("the", 3)
    best = g.states[ids[probs.argmax()]]
    assert base_label(best) == "DT"
    ids, probs = g.tag_scores("Blorfington", 5)  # unknown capitalised word: a proper noun
    assert base_label(g.states[ids[probs.argmax()]]) == "NNP"
    ids, probs = g.tag_scores("glorpified", 5)
    assert base_label(g.states[ids[probs.argmax()]]) in ("VBN", "VBD", "JJ")
    assert word_signature("1,234", 3) == "UNK-NUM-COMMA"
    assert word_signature("Walking", 0) == "UNK-INITC-ing"
    assert word_signature("walked", 2) == "UNK-LC-ed"


def test_round_trip_and_errors():
    g = estimate_grammar([parse_bracketed(T1), parse_bracketed(T2)])
    g2 = Grammar.from_dict(g.to_dict())
    assert g2.states == g.states and g2.binary == g.binary and g2.chains == g.chains
    assert (g2.tag_scores("dog", 1)[1] == g.tag_scores("dog", 1)[1]).all()
    with pytest.raises(StructPrefError, match="TOP"):
        estimate_grammar([Tree("S", [Tree("NN", ["x"])])])
    with pytest.raises(StructPrefError, match="zero trees"):
        estimate_grammar([])


def test_grammar_of_a_deep_tree():
    """annotate and estimate_grammar walk a tree deeper than the recursion
    limit (a recursive estimate_grammar fails from depth ~990)."""
    deep = chain(DEPTH)
    assert to_bracketed(annotate(deep, Annotation())) == (
        "(TOP (X^TOP " + "(X^X " * (DEPTH - 1) + "(NN^X^U w)" + ")" * (DEPTH + 1))
    grammar = estimate_grammar([deep])
    assert [([grammar.states[s] for s in states], p) for states, p in grammar.chains] == [
        (["TOP", "X^TOP"] + ["X^X"] * (DEPTH - 1) + ["NN^X^U"], 1.0)]
    assert grammar.tag_word == {"w": {grammar.state_id("NN^X^U"): 1.0}}
