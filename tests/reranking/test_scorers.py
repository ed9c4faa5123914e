"""The reranking scorers: a reranking problem with a known answer (only one
production tells the gold candidate) is learned by the tree-kernel and
composite-kernel perceptrons and the recursive network; first_k chooses the
targets again; a network with the log p input needs scored candidates and a
matching load."""
import numpy as np
import pytest
from nltk.tree import Tree
from thinc.api import Adam

from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import (CompositeKernel, KernelPerceptron, RecursiveNetLearner, Schedule,
                                       ScoredTrees, TreeKernel, fit)
from spacy_structpref.reranking import RerankItem
from spacy_structpref.reranking.scorers import first_k, rerank, training_sets


def attachment_items(n, seed=0):
    """Sentences whose gold PP attaches to the verb; the candidates attach it to
    the verb, to the object, or mislabel the object, in random order, and the
    parser prefers a wrong one: only the VP -> VBD NP PP production tells."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        w = [f"n{i}", f"x{i}", f"y{i}"]
        obj = f"(NP (NN {w[1]}))"
        pp = f"(PP (IN with) (NP (NN {w[2]})))"
        verb = f"(TOP (S (NP (NN {w[0]})) (VP (VBD saw) {obj} {pp})))"
        noun = f"(TOP (S (NP (NN {w[0]})) (VP (VBD saw) (NP {obj} {pp}))))"
        label = f"(TOP (S (NP (NN {w[0]})) (VP (VBD saw) (ADJP (NN {w[1]})) {pp})))"
        cands = [verb, noun, label]
        order = rng.permutation(3)
        log_probs = [-10.0 - 2 * (c == 0) - rng.random() for c in order]
        gold = Tree.fromstring(verb)
        items.append(RerankItem(gold.leaves(), [cands[c] for c in order], log_probs, gold))
    return items


@pytest.mark.parametrize("make", [
    lambda: (KernelPerceptron(TreeKernel(0.4), loss="setwise"), Schedule(epochs=2)),
    lambda: (KernelPerceptron(TreeKernel(0.4), loss="pairwise"), Schedule()),
    lambda: (KernelPerceptron(CompositeKernel(TreeKernel(0.4), b=0.001), loss="setwise"), Schedule(epochs=2)),
    lambda: (RecursiveNetLearner(width=8, loss="setwise", log_p_input=True, log_p_a=0.1),
             Schedule(epochs=30, batch_size=5, optimizer=Adam(0.05))),
])
def test_a_known_preference_is_learned(make):
    train, test = attachment_items(30), attachment_items(20, seed=1)
    assert rerank(None, test[:1], k=1) == [0]  # a single candidate needs no learner
    assert np.mean([i == item.target for i, item in zip([0] * len(test), test)]) < 0.6
    learner, schedule = make()
    fit(learner, *training_sets(learner, train), schedule=schedule)
    assert rerank(learner, test) == [item.target for item in test]


def test_first_k_chooses_targets_again():
    item = attachment_items(1)[0]
    cut = first_k([item], 1)[0]
    assert len(cut) == 1 and cut.target == 0 and len(item) == 3


def test_log_p_input_needs_log_probabilities_and_a_matching_load():
    items = attachment_items(6)
    learner = RecursiveNetLearner(width=4, log_p_input=True)
    fit(learner, *training_sets(learner, items), schedule=Schedule(optimizer=Adam(0.01)))
    with pytest.raises(StructPrefError, match="ScoredTrees"):
        learner.utilities([Tree.fromstring(items[0].candidates[0])])
    assert len(learner.utilities(ScoredTrees([Tree.fromstring(c) for c in items[0].candidates],
                                             items[0].log_probs))) == 3
    with pytest.raises(StructPrefError, match="log_p_input"):
        RecursiveNetLearner(width=4).from_bytes(learner.to_bytes())
