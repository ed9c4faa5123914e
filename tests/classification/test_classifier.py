"""The kernel classifier keeps only its support items, prepared with its
kernel, and predicts its training labels back on a separable slice."""
from spacy_structpref.classification.classifier import KernelClassifier
from spacy_structpref.classification.kernels import named_kernel
from spacy_structpref.trees import TreeSetDAG

from tests.helpers.docs import parsed


def test_classifier_keeps_support_items_only_and_its_kernel(short_ptb_parser_nlp):
    docs = parsed(short_ptb_parser_nlp, ["Who is he ?", "Where is it ?", "Who was she ?", "Where was he ?"] * 3)
    gold = ["HUM", "LOC"] * 6
    clf = KernelClassifier(named_kernel("tree"), [1.0]).fit(docs, gold, progress=False)
    assert 0 < len(clf.support_items) <= len(docs)
    assert isinstance(clf.support_prepared(), TreeSetDAG)
    assert clf.predict(docs) == gold
