"""The generated label-family tasks: seeded, sized as asked, their items
drawn around family + member + own centres, their Examples well formed."""
import numpy
import pytest
import spacy

from spacy_structpref.corpora.label_families import TRAIN_SIZE, family_task
from spacy_structpref.errors import StructPrefError


def test_same_seed_same_task():
    for kind in ("multiclass", "sequence"):
        a, b, c = family_task(kind, 3), family_task(kind, 3), family_task(kind, 4)
        for (xa, ya), (xb, yb) in zip(a.train + a.test, b.train + b.test):
            numpy.testing.assert_array_equal(xa, xb)
            numpy.testing.assert_array_equal(ya, yb)
        assert not numpy.array_equal(a.train[0][0], c.train[0][0])


def test_multiclass_sizes_follow_member_weights():
    task = family_task("multiclass", 0, n_families=3, n_members=4, member_weights=(4, 2, 1, 1), train_size=24,
                       test_per_label=5, width=7)
    assert task.labels == [f"F{f}:m{k}" for f in range(3) for k in range(4)]
    assert task.families == ["F0"] * 4 + ["F1"] * 4 + ["F2"] * 4
    counts = numpy.bincount(numpy.concatenate([y for _, y in task.train]), minlength=12)
    # 24 / 3 = 8 items per family split 4 : 2 : 1 : 1
    assert counts.tolist() == [4, 2, 1, 1] * 3
    assert numpy.bincount(numpy.concatenate([y for _, y in task.test])).tolist() == [5] * 12
    assert all(x.shape == (1, 7) and x.dtype == numpy.float32 for x, _ in task.train + task.test)


def test_items_lie_around_family_plus_member_centres():
    """With little noise, an item is nearest the mean of its own label's
    items; two members of a family are nearer each other than members of
    different families with a different member part."""
    task = family_task("multiclass", 1, noise=0.05, own=0.1, train_size=500, width=200)
    X = numpy.concatenate([x for x, _ in task.train])
    y = numpy.concatenate([t for _, t in task.train])
    means = numpy.stack([X[y == i].mean(axis=0) for i in range(len(task.labels))])
    nearest = ((X[:, None, :] - means[None]) ** 2).sum(-1).argmin(axis=1)
    assert (nearest == y).all()
    dist = numpy.linalg.norm(means[:, None] - means[None], axis=-1)
    # F0:m0 - F0:m1 share u_0; F0:m0 - F1:m1 share nothing
    assert dist[0, 1] < dist[0, 6]
    # F0:m0 - F1:m0 share the member part m_0: nearer than F0:m0 - F1:m1
    assert dist[0, 5] < dist[0, 6]


def test_sequences_are_chains_of_the_asked_length():
    task = family_task("sequence", 0, length=6, test_size=10)
    assert len(task.train) == TRAIN_SIZE["sequence"] // 6 and len(task.test) == 10
    assert all(x.shape == (6, 100) and y.shape == (6,) for x, y in task.train + task.test)
    # a peaked family transition matrix: successive families are far from uniform
    fams = numpy.concatenate([y[:-1] // 5 * 10 + y[1:] // 5 for _, y in task.train])
    pairs = numpy.bincount(fams, minlength=100).reshape(10, 10)
    assert (pairs.max(axis=1) > 3 * pairs.mean(axis=1)).mean() > 0.5


@pytest.mark.parametrize("kind", ["multiclass", "sequence"])
def test_examples(kind):
    task = family_task(kind, 0, train_size=16, test_size=2, test_per_label=1)
    vocab = spacy.blank("xx").vocab
    train = task.examples(vocab, "train")
    assert len(train) == len(task.train)
    for eg, (x, y) in zip(train, task.train):
        numpy.testing.assert_array_equal(eg.predicted.tensor, x)
        if kind == "sequence":
            assert [t.tag_ for t in eg.reference] == [task.labels[i] for i in y]
        else:
            assert eg.reference.cats[task.labels[y[0]]] == 1.0 and sum(eg.reference.cats.values()) == 1.0
    with pytest.raises(StructPrefError, match="split"):
        task.examples(vocab, "dev")


def test_bad_settings():
    with pytest.raises(StructPrefError, match="kind"):
        family_task("tree")
    with pytest.raises(StructPrefError, match="member_weights"):
        family_task(member_weights=(1, 2))
    with pytest.raises(StructPrefError, match="positive sizes"):
        family_task(width=0)
