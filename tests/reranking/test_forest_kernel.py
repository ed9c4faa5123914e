"""The forest-kernel reranking scorer: each candidate's compatible
sub-forest (tempered by α) and the kernel between them equal their
definitions enumerated over the trees of a small PP-attachment forest."""
import numpy as np
import pytest

from spacy_structpref.trees import to_bracketed


def pp_forest():
    """"I saw men with scopes": the PP under the VP or the object NP, the object
    an NP or an ADJP, and a VP-internal X[1, 3) that crosses NP[2, 5)."""
    from spacy_structpref.trees import ForestBuilder, SymbolTable

    words = ["I", "saw", "men", "with", "scopes"]
    fb = ForestBuilder(SymbolTable(), 5, words)
    prp, vbd, nns, in_, nns2 = (fb.add_node(tag, i, i + 1) for i, tag in enumerate(["PRP", "VBD", "NNS", "IN", "NNS"]))
    for node, i in ((prp, 0), (vbd, 1), (nns, 2), (in_, 3), (nns2, 4)):
        fb.add_edge(node, [-(i + 1)], 1.0)
    np_i, np_men, adjp, np_sc = (fb.add_node(lab, s, s + 1) for lab, s in (("NP", 0), ("NP", 2), ("ADJP", 2), ("NP", 4)))
    for node, tail, p in ((np_i, prp, 1.0), (np_men, nns, 0.7), (adjp, nns, 0.3), (np_sc, nns2, 1.0)):
        fb.add_edge(node, [tail], p)
    pp = fb.add_node("PP", 3, 5)
    fb.add_edge(pp, [in_, np_sc], 1.0)
    np_big = fb.add_node("NP", 2, 5)
    fb.add_edge(np_big, [np_men, pp], 0.4)
    x = fb.add_node("X", 1, 3)
    fb.add_edge(x, [vbd, np_men], 0.2)
    vp = fb.add_node("VP", 1, 5)
    for tails, p in (([vbd, np_men, pp], 0.3), ([vbd, adjp, pp], 0.1), ([vbd, np_big], 0.5), ([x, pp], 0.1)):
        fb.add_edge(vp, tails, p)
    s = fb.add_node("S", 0, 5)
    fb.add_edge(s, [np_i, vp], 1.0)
    top = fb.add_node("TOP", 0, 5)
    fb.add_edge(top, [s], 1.0)
    return fb.build(top).compute_inside_outside()


def crosses(tree, brackets):
    from spacy_structpref.trees.doc import constituent_spans

    return any(s < a < e < b or a < s < b < e for s, e, _ in constituent_spans(tree) for a, b in brackets)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 3.0])
def test_forest_kernel_scorer_equals_its_enumerated_definition(alpha):
    from spacy_structpref.kernels import tree_kernel
    from spacy_structpref.learners.kernels import ForestKernel
    from spacy_structpref.reranking.forest_kernel import candidate_brackets, compatible_subforest

    forest = pp_forest()
    trees = [t for _, t in forest.trees()]
    assert len(trees) == 4
    candidates = [to_bracketed(t) for t in trees]
    subs = [compatible_subforest(forest, candidate_brackets(c), alpha) for c in candidates]
    expected = []
    for c in candidates:  # the compatible trees of the whole forest, with P(t)^α renormalised
        kept = [(p ** alpha, t) for p, t in forest.trees() if not crosses(t, candidate_brackets(c))]
        z = sum(p for p, _ in kept)
        expected.append({to_bracketed(t): p / z for p, t in kept})
    for sub, want in zip(subs, expected):
        got = list(sub.trees())
        z = sum(p for p, _ in got)
        assert {to_bracketed(t): pytest.approx(p / z) for p, t in got} == want
    assert len({len(w) for w in expected}) > 1  # the candidates stand for different sub-forests
    raw = np.array([[sum(p * q * tree_kernel(t, u, lam=0.4) for t, p in a.items() for u, q in b.items())
                     for b in expected] for a in expected])
    kernel = ForestKernel(0.4, alpha, symbols=forest.symbols)
    prepared = kernel.prepare(subs)
    np.testing.assert_allclose(kernel.block(prepared, prepared), raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))),
                               rtol=1e-9)
    w = np.array([1.0, -0.5, 0.0, 2.0])
    np.testing.assert_allclose(kernel.weighted_sums([(prepared, w)], prepared), w @ kernel.block(prepared, prepared))


def test_a_candidate_outside_the_forest_is_refused():
    from spacy_structpref.reranking.forest_kernel import (NoCompatibleTree, candidate_brackets, candidate_subforest,
                                                          compatible_subforest)

    forest = pp_forest()
    # (men with) as a constituent crosses NP[2, 5), PP[3, 5) and X[1, 3): no tree of the forest is compatible
    outside = "(TOP (S (NP (PRP I)) (VP (VBD saw) (NP (NNS men) (IN with)) (NP (NNS scopes)))))"
    with pytest.raises(NoCompatibleTree):
        compatible_subforest(forest, candidate_brackets(outside), 1.0)
    with pytest.raises(NoCompatibleTree, match="not a tree of its forest"):
        candidate_subforest(forest, outside, 0.5)
    inside = to_bracketed(next(t for _, t in forest.trees()))
    assert len(list(candidate_subforest(forest, inside).trees())) >= 1