"""A generated task whose labels come in families: the setting in which
Srikumar & Manning (2014, §3) expect label vectors to help, made so that
sharing between labels must pay.

``n_families × n_members`` labels, named ``F<f>:m<k>`` (family f, member
k). An item of label (f, k) has the dense feature vector

    x = u_f + m_k + v_fk + noise,
    u_f ~ N(0, I), m_k ~ N(0, member² I), v_fk ~ N(0, own² I), noise ~ N(0, noise² I):

a family part ``u_f`` every member of the family shares, a member part
``m_k`` (the same for member k of every family, as a plural or a past tense
is the same inflection on every part of speech) and a part ``v_fk`` of the
label's own. A classifier that scores each label with weights of its own
(the one-hot structured SVM) must learn ``u_f + m_k + v_fk`` from that
label's examples alone; one that shares (DISTRO's label vectors) can learn
``u_f`` from the whole family and ``m_k`` from every family. Members are
not equally frequent (``member_weights``): the rare ones have few training
examples, where sharing matters most; the test items are balanced over
labels.

Two tasks: ``multiclass`` (one item per example) and ``sequence``
(first-order chains: the next family drawn from the current family's row
of a peaked transition matrix, the member from ``member_weights``). Each is
seeded: the same seed gives the same task.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.training import Example

from ..errors import StructPrefError

KINDS = ("multiclass", "sequence")
# training items: a sequence model needs more (its steps see whole chains)
TRAIN_SIZE = {"multiclass": 270, "sequence": 800}

# one example: the features of its items (n × width) and their label ids (n,)
Item = Tuple[numpy.ndarray, numpy.ndarray]


@dataclass
class FamilyTask:
    """A generated task: its label names, training and test examples."""

    kind: str
    labels: List[str]
    train: List[Item]
    test: List[Item]

    @property
    def families(self) -> List[str]:
        """Each label's family (``F3`` of ``F3:m1``)."""
        return [label.split(":", 1)[0] for label in self.labels]

    def examples(self, vocab, split: str) -> List[Example]:
        """spaCy Examples of ``split`` (``train`` or ``test``): the features
        in the predicted Doc's ``doc.tensor`` (one token per item), the gold
        labels as tags (``sequence``) or as exclusive ``doc.cats``
        (``multiclass``)."""
        if split not in ("train", "test"):
            raise StructPrefError(f"split must be 'train' or 'test', got {split!r}")
        out = []
        for X, y in getattr(self, split):
            words = ["x"] * len(y)
            predicted = Doc(vocab, words=words)
            predicted.tensor = X.astype("float32")
            if self.kind == "sequence":
                reference = Doc(vocab, words=words, tags=[self.labels[i] for i in y])
            else:
                reference = Doc(vocab, words=words)
                reference.cats = {label: float(i == y[0]) for i, label in enumerate(self.labels)}
            out.append(Example(predicted, reference))
        return out


def family_task(kind: str = "multiclass", seed: int = 0, *, n_families: int = 10, n_members: int = 5,
                width: int = 100, noise: float = 2.5, member: float = 1.0, own: float = 0.5,
                member_weights: Sequence[float] = (4, 2, 1, 1, 1), train_size: Optional[int] = None,
                test_per_label: int = 20, length: int = 8, test_size: int = 150) -> FamilyTask:
    """Generate a task (see the module docstring). ``train_size`` is the
    number of training items (null: :data:`TRAIN_SIZE` of the kind): for
    ``multiclass`` split over the labels in proportion to
    ``member_weights`` (at least one each), for ``sequence`` the items of
    ``train_size // length`` chains of ``length``. Test:
    ``test_per_label`` items of every label (``multiclass``), or
    ``test_size`` chains whose members are drawn uniformly (``sequence``)."""
    if kind not in KINDS:
        raise StructPrefError(f"kind must be one of {KINDS}, got {kind!r}")
    if len(member_weights) != n_members or min(member_weights) <= 0:
        raise StructPrefError(f"member_weights needs {n_members} positive weights, got {list(member_weights)}")
    train_size = TRAIN_SIZE[kind] if train_size is None else train_size
    sizes = (n_families, n_members, width, train_size, test_per_label, length, test_size)
    if min(sizes) < 1 or min(noise, member, own) < 0:
        raise StructPrefError("family_task needs positive sizes and non-negative noise, member and own")
    rng = numpy.random.default_rng(seed)
    family = rng.standard_normal((n_families, 1, width))
    shared = member * rng.standard_normal((1, n_members, width))
    centres = (family + shared + own * rng.standard_normal((n_families, n_members, width))).reshape(-1, width)
    labels = [f"F{f}:m{k}" for f in range(n_families) for k in range(n_members)]
    weights = numpy.asarray(member_weights, dtype="float64") / sum(member_weights)

    def items(ids: numpy.ndarray) -> Item:
        ids = numpy.asarray(ids, dtype=numpy.int64)
        return (centres[ids] + noise * rng.standard_normal((len(ids), width))).astype("float32"), ids

    if kind == "multiclass":
        per_label = numpy.maximum(1, numpy.round(train_size / n_families * weights)).astype(int)
        train_ids = [f * n_members + k for f in range(n_families) for k in range(n_members)
                     for _ in range(per_label[k])]
        test_ids = [i for i in range(len(labels)) for _ in range(test_per_label)]
        return FamilyTask(kind, labels, [items([i]) for i in train_ids], [items([i]) for i in test_ids])

    # sequences: a peaked family transition matrix (a few likely successors per family)
    transitions = rng.dirichlet(numpy.full(n_families, 0.3), size=n_families)

    def chain(member_p: numpy.ndarray) -> Item:
        f = rng.integers(n_families)
        ids = []
        for _ in range(length):
            ids.append(f * n_members + rng.choice(n_members, p=member_p))
            f = rng.choice(n_families, p=transitions[f])
        return items(ids)

    uniform = numpy.full(n_members, 1.0 / n_members)
    return FamilyTask(kind, labels, [chain(weights) for _ in range(max(1, train_size // length))],
                      [chain(uniform) for _ in range(test_size)])
