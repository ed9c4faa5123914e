"""The label similarity map and the shipped DISTRO configs."""

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.cli.label_map import cluster_order, describe_families, draw_label_map, label_similarity
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import StructPrefError
from spacy_structpref.scoring.label_space import family_closeness

from tests.helpers.fixtures import slow_fixture
from tests.helpers.paths import CONFIGS


@slow_fixture
def model_dir(tmp_path_factory):
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"model": {"rank": 6}, "w_steps": 2, "a_steps": 2})
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d)
                for d in corpus_docs("ptb", "train", nlp.vocab, limit=40)]
    opt = nlp.initialize(lambda: examples)
    for i in range(0, 40, 8):
        nlp.update(examples[i:i + 8], sgd=opt)
    path = tmp_path_factory.mktemp("distro") / "model"
    nlp.to_disk(path)
    return path


@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_draws_map(model_dir, tmp_path, suffix, magic):
    out, label_space = draw_label_map(model_dir, tmp_path / f"map{suffix}")
    assert out.read_bytes().startswith(magic)
    assert "effective rank" in label_space and "no structure" not in label_space


def test_one_hot_label_space_says_it_has_no_structure(tmp_path):
    """One-hot label vectors (the SSVM baseline, or DISTRO before its first A
    step): every similarity is 0, and the output says so instead of listing
    zeros in alphabetical order as if they meant something."""
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("distro_tagger")
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d)
                for d in corpus_docs("ptb", "train", nlp.vocab, limit=10)]
    nlp.initialize(lambda: examples)
    n = len(tagger.labels)
    assert not tagger.has_label_structure and tagger.effective_rank == n
    assert tagger.describe_label_space().startswith(f"{n} tags, label vectors of d = {n}, effective rank {n}: "
                                                     "orthogonal label vectors, every similarity is 0")
    with pytest.warns(UserWarning, match=f"effective rank {n}: orthogonal .* no tag is closer to 'NN'"):
        sims = tagger.most_similar("NN", n=3)
    assert [s for _, s in sims] == [0.0, 0.0, 0.0]
    nlp.to_disk(tmp_path / "onehot")
    out, label_space = draw_label_map(tmp_path / "onehot", tmp_path / "map.png")
    assert out.is_file() and "no structure yet" in label_space


def test_trained_label_space_has_structure(model_dir, recwarn):
    tagger = spacy.load(model_dir).get_pipe("distro_tagger")
    assert tagger.has_label_structure and tagger.effective_rank <= 6
    sims = tagger.most_similar("NN", n=3)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
    assert sims[0][1] >= sims[1][1] >= sims[2][1] and sims[0][1] > 0


def test_similarity_matrix(model_dir):
    tagger = spacy.load(model_dir).get_pipe("distro_tagger")
    labels, sims, coords = label_similarity(tagger)
    assert labels == list(tagger.labels) and coords.shape == (len(labels), 2)
    numpy.testing.assert_allclose(numpy.diag(sims), 1.0, atol=1e-5)
    v = tagger.label_vectors
    assert sims[0, 1] == pytest.approx(float(v[labels[0]] @ v[labels[1]]), abs=1e-5)


def test_brown_tags_with_dollars_draw(tmp_path):
    """Brown's PP$$ (two "$") is drawn as text, not taken by matplotlib as
    the start of mathtext (which fails)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"model": {"rank": 3}, "w_steps": 1, "a_steps": 1})
    words, tags = ["His", "Times", "is", "hers", "NEWS"], ["PP$", "NN-TL", "BEZ", "PP$$", "NN-HL"]
    gold = [Doc(nlp.vocab, words=words, tags=tags), Doc(nlp.vocab, words=words[::-1], tags=["NN"] * 5)]
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold]
    opt = nlp.initialize(lambda: examples)
    for _ in range(4):
        nlp.update(examples, sgd=opt)
    nlp.to_disk(tmp_path / "brownish")
    for suffix in (".png", ".svg"):
        out, label_space = draw_label_map(tmp_path / "brownish", tmp_path / f"map{suffix}")
        assert out.stat().st_size > 0
    assert "2 variant tags" in label_space and "median rank" in label_space


def test_bad_input(model_dir, tmp_path):
    with pytest.raises(StructPrefError, match="must end in"):
        draw_label_map(model_dir, tmp_path / "map.jpg")
    with pytest.raises(StructPrefError, match="no trained pipeline"):
        draw_label_map(tmp_path / "missing", tmp_path / "map.png")
    spacy.blank("en").to_disk(tmp_path / "empty")
    with pytest.raises(StructPrefError, match="no distro_tagger"):
        draw_label_map(tmp_path / "empty", tmp_path / "map.png")


@pytest.mark.parametrize("name,onehot", [("distro_sparse.cfg", False), ("ssvm_baseline.cfg", True),
                                         ("distro_tok2vec.cfg", False)])
def test_configs_build_and_tag(name, onehot):
    config = spacy.util.load_config(CONFIGS / name, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d)
                for d in corpus_docs("ptb", "train", nlp.vocab, limit=5)]
    nlp.initialize(lambda: examples)
    tagger = nlp.get_pipe("distro_tagger")
    assert tagger.model.attrs["onehot"] is onehot
    if onehot:
        numpy.testing.assert_array_equal(tagger.label_matrix, numpy.eye(len(tagger.labels)))
    doc = nlp(Doc(nlp.vocab, words=["A", "test", "."]))
    assert all(t.tag_ in tagger.labels for t in doc)


def test_cluster_order_puts_families_together():
    """Three families of unit vectors around three orthogonal directions,
    shuffled: the leaf order of the clustering lists each family as one run."""
    rng = numpy.random.default_rng(0)
    centres = numpy.eye(6)[:3]
    family = rng.permutation(numpy.repeat(numpy.arange(3), 4))
    A = centres[family] + 0.2 * rng.standard_normal((12, 6))
    A /= numpy.linalg.norm(A, axis=1, keepdims=True)
    order, tree = cluster_order(A @ A.T)
    assert sorted(order.tolist()) == list(range(12)) and tree.shape == (11, 4)
    runs = [family[i] for k, i in enumerate(order) if k == 0 or family[i] != family[order[k - 1]]]
    assert sorted(runs) == [0, 1, 2]
    assert cluster_order(numpy.eye(2))[0].tolist() == [0, 1]


def test_families_in_words():
    labels = ["NN", "NNS", "NNP", "VB", "VBZ"]
    sims = numpy.eye(5)
    sims[0, 1] = sims[1, 0] = 0.6
    text = describe_families(family_closeness(labels, sims))
    assert text.startswith("2 label families: the nearest label is of the same family for 2 of 5")
    assert text.endswith("(within NOUN 0.20, VERB 0.00)")
