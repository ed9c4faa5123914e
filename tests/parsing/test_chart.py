"""CKY chart, treebank-space forests and lazy k-best against brute force.

The reference enumerates every derivation of the binarised grammar directly
(pure Python recursion over binary rules, chain rules and the lexicon, no
chart, no pruning) and turns it into a treebank tree; the parser's forest
must hold exactly those trees with exactly those probabilities."""
import math
from collections import defaultdict
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.parsing.grammar import base_label, estimate_grammar
from spacy_structpref.parsing.parser import KBest, Parser, kbest
from spacy_structpref.trees.brackets import to_bracketed

from tests.helpers.forest_reference import reference_scores

SENTENCES = [
    "The company said .",
    "It rose 5 % .",
    "Prices fell sharply .",
    "He sold the shares .",
    "The stock closed at $ 10 .",
]
VOCAB = ["the", "company", "said", "it", "rose", "fell", "shares", "sold", "he", "%", "5", "of", "and", ".", "stock"]


@pytest.fixture(scope="module")
def exact(grammar):
    return Parser(grammar, beam=0.0, threshold=0.0)


def brute_force(grammar, parser, words):
    """{bracketed treebank tree: probability} over all derivations."""
    lex = parser.lexical_scores(words)
    g = grammar
    by_parent = defaultdict(list)
    for a, b, c, p in g.binary:
        by_parent[a].append((b, c, p))
    chains_by_top = defaultdict(list)
    for ch, p in g.chains:
        chains_by_top[ch[0]].append((ch, p))
    lab = [base_label(s) for s in g.states]

    @lru_cache(maxsize=None)
    def kids_of(s, i, j):
        """(probability, list of child strings) for s's binary expansions,
        intermediates flattened into their parent."""
        out = []
        for b, c, p in by_parent[s]:
            for k in range(i + 1, j):
                for pl, tl in fin(b, i, k):
                    if g.states[c].startswith("@"):
                        out.extend((p * pl * pr, [tl] + kr) for pr, kr in kids_of(c, k, j))
                    else:
                        out.extend((p * pl * pr, [tl, tr]) for pr, tr in fin(c, k, j))
        return tuple(out)

    @lru_cache(maxsize=None)
    def pre(s, i, j):
        out = []
        if j - i == 1 and lex[i, s] > 0:
            out.append((lex[i, s], f"({lab[s]} {words[i]})"))
        out.extend((p, f"({lab[s]} {' '.join(kids)})") for p, kids in kids_of(s, i, j))
        return tuple(out)

    @lru_cache(maxsize=None)
    def fin(s, i, j):
        out = list(pre(s, i, j))
        for ch, p in chains_by_top[s]:
            for pb, tb in pre(ch[-1], i, j):
                text = tb
                for x in reversed(ch[:-1]):
                    text = f"({lab[x]} {text})"
                out.append((p * pb, text))
        return tuple(out)

    dist = defaultdict(float)
    for p, text in fin(g.root, 0, len(words)):
        dist[text] += p
    return dist


def n_trees(forest):
    """Number of trees in a forest (DP), to keep enumeration affordable."""
    count = np.zeros(forest.n_nodes)
    for e in range(forest.n_edges):
        tails = forest.edge_tails(e)
        count[forest.head[e]] += np.prod([count[t] for t in tails if t >= 0])
    return count[forest.root]


def forest_dist(forest, words):
    assert n_trees(forest) < 50000, "forest too large to enumerate in a test"
    dist = defaultdict(float)
    for p, tree in forest.trees(words):
        dist[to_bracketed(tree)] += p
    return dist


@pytest.mark.parametrize("sentence", SENTENCES[:3])
def test_forest_holds_exactly_the_grammars_trees(grammar, exact, sentence):
    words = sentence.split()
    ref = brute_force(grammar, exact, words)
    res = exact.parse(words, k=5)
    assert not res.fallback and ref
    got = forest_dist(res.forest, words)
    assert set(got) == set(ref)
    for text, p in ref.items():
        assert got[text] == pytest.approx(p, rel=1e-9)
    assert res.forest.log_total == pytest.approx(math.log(sum(ref.values())), rel=1e-9)
    # node labels are treebank labels, states the annotated ones
    labels = {res.forest.symbols.labels[x] for x in res.forest.label}
    assert not any("^" in x or x.startswith("@") for x in labels)
    assert (res.forest.state >= 0).all()


@pytest.mark.parametrize("sentence", SENTENCES)
def test_kbest_matches_sorted_enumeration(grammar, sentence):
    words = sentence.split()
    res = Parser(grammar, beam=0.0, threshold=1e-4).parse(words, k=20)
    ref = sorted(forest_dist(res.forest, words).items(), key=lambda kv: -kv[1])
    got = res.nbest
    assert len(got) == min(20, len(ref))
    assert [lp for lp, _ in got] == pytest.approx([math.log(p) for _, p in ref[:len(got)]], rel=1e-9)
    probs = dict(ref)
    for lp, text in got:
        assert math.log(probs[text]) == pytest.approx(lp, rel=1e-9)
    assert to_bracketed(res.tree) == got[0][1]
    assert res.log_prob == got[0][0]


def test_inside_outside_matches_numpy_reference(exact):
    words = "The stock closed at $ 10 .".split()
    f = exact.parse(words).forest
    ref_inside, ref_outside, _, _ = reference_scores(f)
    np.testing.assert_allclose(f.log_inside, ref_inside, rtol=1e-10)
    reach = np.isfinite(ref_outside)
    np.testing.assert_allclose(f.log_outside[reach], ref_outside[reach], rtol=1e-10)


def test_pruning_keeps_a_subforest(grammar, exact):
    words = "He sold the shares of the company .".split()
    full = exact.parse(words, k=1)
    pruned = Parser(grammar, beam=1e-3, threshold=1e-3).parse(words, k=1)
    assert pruned.forest.n_edges < full.forest.n_edges
    assert pruned.log_prob == pytest.approx(full.log_prob)  # the Viterbi tree survives
    assert pruned.forest.log_total <= full.forest.log_total + 1e-9
    post = pruned.forest.edge_posterior()
    assert post.max() <= 1 + 1e-9 and pruned.forest.node_posterior()[pruned.forest.root] == pytest.approx(1.0)


def test_long_real_sentence_posteriors(grammar):
    tree = ptb_trees("train")[118]  # 54 words, in the grammar's training data
    res = Parser(grammar).parse(tree.leaves(), k=3)
    assert not res.fallback
    f = res.forest
    mu = f.node_posterior()
    assert mu[f.root] == pytest.approx(1.0) and mu.max() <= 1 + 1e-9
    assert res.nbest[0][0] <= f.log_total


def test_scaling_beyond_float_range():
    """A 300-word sentence whose only tree has probability e^-850: plain
    probabilities would underflow; the scaled chart gets it exactly."""
    from spacy_structpref.parsing.grammar import Annotation
    from spacy_structpref.trees.brackets import parse_bracketed

    plain = Annotation(horizontal_markov=-1, vertical_markov=1, tag_parent=False, split_unary_tags=False,
                       split_in=False, split_percent=False)
    other = " ".join(f"(NN w{i}) (NN v{i})" for i in range(21))
    g = estimate_grammar([parse_bracketed("(TOP (NP (NN a) (NP (NN a) (NP (NN a) (NN a)))))"),
                          parse_bracketed("(TOP (NP (NN b) (NN c)))"),
                          parse_bracketed(f"(TOP (X {other}))")], plain)
    n = 300
    res = Parser(g).parse(["a"] * n, k=2)
    # P(TOP -> NP) = 2/3 (chain), NP -> NN NP 2/4, NP -> NN NN 2/4; P(a | NN) = 4 / 48
    expected = math.log(2 / 3) + (n - 1) * math.log(0.5) + n * math.log(4 / 48)
    assert expected < -745
    assert len(res.nbest) == 1
    assert res.log_prob == pytest.approx(expected, rel=1e-9)
    assert res.forest.log_total == pytest.approx(expected, rel=1e-9)


def test_unparseable_sentence_gets_fallback():
    from spacy_structpref.trees.brackets import parse_bracketed

    g = estimate_grammar([parse_bracketed("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks))))")])
    res = Parser(g).parse("dog dog dog dog".split(), k=5)
    assert res.fallback and res.forest is None
    assert res.tree.leaves() == ["dog"] * 4 and res.tree.label() == "TOP"
    assert len(res.nbest) == 1


def _posterior_reference(grammar, word, position):
    """P(T | w) summed by treebank tag, from the grammar's tables: for a known
    word ``tag_word`` smoothed by its signature's ``tag_sig`` with weight
    ``smooth``, for an unknown one ``tag_sig`` alone."""
    from spacy_structpref.parsing.grammar import word_signature

    sig = grammar.tag_sig.get(word_signature(word, position)) or grammar.tag_sig[""]
    if word in grammar.word_count:
        c, seen = grammar.word_count[word], grammar.tag_word[word]
        post = {t: (seen.get(t, 0.0) * c + grammar.smooth * sig.get(t, 0.0)) / (c + grammar.smooth)
                for t in set(seen) | set(sig)}
    else:
        post = sig
    total = defaultdict(float)
    for t, p in post.items():
        total[base_label(grammar.states[t])] += p
    return total


def test_fallback_tags_maximise_tag_given_word(grammar):
    """The flat fallback's tags are the argmax of P(T | w) summed over a
    tag's annotated states, word by word, not of P(w | T) (which gave every
    unknown lowercase word WP$)."""
    words = "the dog glorpified Blorfington 's 1,234 shares of XYZZY quickly .".split()
    tags = Parser(grammar).fallback_tags(words)
    for i, (word, tag) in enumerate(zip(words, tags)):
        total = _posterior_reference(grammar, word, i)
        assert total[tag] == pytest.approx(max(total.values()), rel=1e-12), (word, tag)
    assert tags[:2] == ["DT", "NN"] and "WP$" not in tags
    res = Parser(grammar, max_length=3).parse(words)
    assert res.fallback and [t for _, t in res.tree.pos()] == tags


def test_fallback_tags_follow_upstream_tags_by_tag_mode(grammar):
    words, upstream = ["the", "dog"], ["NN", "VB"]
    assert Parser(grammar, tag_mode="hard").fallback_tags(words, upstream)[1] == "VB"
    assert Parser(grammar, tag_mode="ignore").fallback_tags(words, upstream) == ["DT", "NN"]


def test_bad_input(exact):
    from spacy_structpref.errors import StructPrefError

    with pytest.raises(StructPrefError, match="empty"):
        exact.parse([])
    with pytest.raises(StructPrefError, match="tags"):
        exact.parse(["a", "b"], tags=["DT"])
    with pytest.raises(StructPrefError, match="tag_mode"):
        Parser(exact.grammar, tag_mode="maybe")
    with pytest.raises(StructPrefError, match="k must"):
        kbest(exact.parse("The company said .".split()).forest, 0)
    with pytest.raises(StructPrefError, match="Forest"):
        kbest(None, 1)


def test_tag_constraints(grammar):
    words = "He sold the shares .".split()
    free = [t for _, t in Parser(grammar).parse(words).tree.pos()]
    tags = list(free)
    tags[1] = "VBN" if free[1] == "VBD" else "VBD"
    hard = Parser(grammar, tag_mode="hard").parse(words, tags=tags)
    assert [t for _, t in hard.tree.pos()] == tags
    soft = Parser(grammar, tag_mode="soft", tag_bonus=1e6).parse(words, tags=tags)
    assert [t for _, t in soft.tree.pos()] == tags
    ignored = Parser(grammar, tag_mode="ignore").parse(words, tags=tags)
    assert [t for _, t in ignored.tree.pos()] == free


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5), st.integers(1, 8))
def test_kbest_property(grammar, words, k):
    parser = Parser(grammar, beam=0.0, threshold=1e-4)
    res = parser.parse(words, k=k)
    lps = [lp for lp, _ in res.nbest]
    assert lps == sorted(lps, reverse=True)
    assert len({t for _, t in res.nbest}) == len(res.nbest)
    if res.fallback or n_trees(res.forest) > 50000:
        return
    dist = forest_dist(res.forest, words)
    top = sorted(dist.values(), reverse=True)[:k]
    assert lps == pytest.approx([math.log(p) for p in top], rel=1e-9)
    assert math.log(sum(dist.values())) == pytest.approx(res.forest.log_total, rel=1e-9)
    extractor = KBest(res.forest, words)
    assert [t for _, t, _ in extractor.best(k)] == [t for _, t in res.nbest]


@pytest.mark.parametrize("ratio", [1e-1, 1e-2])
def test_merit_pruning_keeps_every_good_tree(grammar, ratio):
    words = "He sold the shares .".split()
    full = Parser(grammar, beam=0.0, threshold=1e-4).parse(words, k=1)
    pruned = Parser(grammar, beam=0.0, threshold=1e-4, merit_threshold=ratio).parse(words, k=1)
    d_full, d_pruned = forest_dist(full.forest, words), forest_dist(pruned.forest, words)
    best = max(d_full.values())
    good = {t for t, p in d_full.items() if p >= ratio * best}
    assert good <= set(d_pruned) <= set(d_full)
    assert len(d_pruned) < len(d_full)
    for t, p in d_pruned.items():
        assert p == pytest.approx(d_full[t], rel=1e-12)
    assert pruned.forest.log_total == pytest.approx(math.log(sum(d_pruned.values())), rel=1e-9)
    assert pruned.log_prob == pytest.approx(full.log_prob)
