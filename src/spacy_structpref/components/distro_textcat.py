"""The ``distro_textcat`` component: multiclass classification with
distributed label vectors (DISTRO's atomic case, Srikumar & Manning 2014,
§3.1 and §5.1), writing ``doc.cats``.

A document x gets one label y, scored ``a_yᵀ (W φ(x) + b) + a_yᵀ w_0`` with
``φ(x)`` its bag of words and bigrams (:func:`~..models.sparse_features.SparseBagFeatures`)
and ``a_y`` the unit label vectors, columns of A. It is the DISTRO model of the
``distro_tagger`` applied to sequences of one atomic part (each Doc one
"token"): the loss-augmented argmax of the multiclass hinge loss
``max_y [score(y) + Δ(y, y*)] − score(y*)``, Δ the 0/1 cost, is first-order
Viterbi on one position, and the alternating w / A schedule, the nuclear-norm
proximal step on A and ``onehot = true`` (the multiclass SVM baseline, A = I)
are the tagger's, shared with it (:mod:`.distro`).

Classes are exclusive: ``doc.cats`` gets 1.0 for the predicted label and 0.0
for every other. The gold label of a training Doc is its cat with value 1.
"""
from typing import Callable, Dict, Iterable, List

import numpy
from spacy.scorer import Scorer
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from ..errors import TaggerError
from .distro import DistroPipe


@registry.scorers("spacy_structpref.distro_textcat_scorer.v1")
def make_textcat_scorer() -> Callable:
    return score_exclusive_cats


def score_exclusive_cats(examples: Iterable[Example], **kwargs) -> Dict[str, object]:
    """spaCy's scores of exclusive classes (``Scorer.score_cats``) and
    ``cats_acc``: the fraction of Docs whose highest predicted cat is the
    gold one."""
    examples = list(examples)
    labels = sorted({label for eg in examples for label in eg.reference.cats})
    scores = Scorer.score_cats(examples, "cats", labels=labels, multi_label=False)
    hits = [max(eg.predicted.cats, key=eg.predicted.cats.get) ==
            max(eg.reference.cats, key=eg.reference.cats.get)
            for eg in examples if eg.reference.cats and eg.predicted.cats]
    scores["cats_acc"] = sum(hits) / len(hits) if hits else None
    return scores


class DistroTextcat(DistroPipe):
    """Exclusive multiclass classifier with label vectors; see the module docstring."""

    factory = "distro_textcat"

    def _gold_labels(self, get_examples: Callable[[], Iterable[Example]]) -> List[str]:
        """The label set of the training data: the keys of the gold ``doc.cats``."""
        return sorted({label for eg in get_examples() for label in eg.reference.cats})

    def predict(self, docs: Iterable[Doc]) -> numpy.ndarray:
        """One label id per Doc."""
        from ..models.decode import decode

        docs = list(docs)
        self._require_initialized()
        if not docs:
            return numpy.zeros((0,), dtype="i")
        return decode(self.model.predict(docs))

    def set_annotations(self, docs: Iterable[Doc], label_ids: numpy.ndarray) -> None:
        for doc, i in zip(docs, numpy.asarray(label_ids).tolist()):
            doc.cats = {label: float(j == i) for j, label in enumerate(self.labels)}

    def gold_ids(self, examples: Iterable[Example]) -> numpy.ndarray:
        """The gold label id of every Doc: its cat with value 1 (-1 if it has
        none; more than one, or one this classifier does not know, is an error)."""
        index = {label: i for i, label in enumerate(self.labels)}
        ids = []
        for eg in examples:
            gold = [label for label, value in eg.reference.cats.items() if value == 1.0]
            if len(gold) > 1:
                raise TaggerError(f"{self.name} classifies into exclusive classes, but a Doc has "
                                  f"the cats {gold} all at 1.0: {eg.reference.text[:60]!r}")
            ids.append(self._gold_id(index, gold[0] if gold else None))
        return numpy.asarray(ids, dtype=numpy.int32)
