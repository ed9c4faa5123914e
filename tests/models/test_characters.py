"""Character features (models.characters): the byte embedding's output and
gradient against a loop over words and positions, words sharing bytes at
the same position included; spaCy's architecture's saves load and give the
same vectors; a bad feature name is refused."""
import numpy as np
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.ml.models import CharacterEmbed as SpacysCharacterEmbed
from spacy.tokens import Doc
from thinc.api import fix_random_seed

from spacy_structpref.errors import StructPrefError
from spacy_structpref.models.characters import CharacterEmbed, CharacterFeatures

VOCAB = spacy.blank("en").vocab


def embed(nM=3, nC=4, seed=0):
    model = CharacterEmbed(nM=nM, nC=nC)
    model.initialize()
    model.set_param("E", np.random.default_rng(seed).normal(size=(nC, 256, nM)).astype("f"))
    return model


def reference(model, docs, dY):
    """Output and table gradient by a loop over every word and byte position."""
    E = model.get_param("E")
    nC, _, nM = E.shape
    Y, dE = [], np.zeros_like(E)
    for doc, dy in zip(docs, dY):
        ids = doc.to_utf8_array(nr_char=nC)
        Y.append(np.stack([np.concatenate([E[c, ids[w, c]] for c in range(nC)]) for w in range(len(doc))]))
        for w in range(len(doc)):
            for c in range(nC):
                dE[c, ids[w, c]] += dy[w, c * nM:(c + 1) * nM]
    return Y, dE


def check_against_reference(docs, seed=0):
    model = embed(seed=seed)
    Y, backprop = model.begin_update(docs)
    rng = np.random.default_rng(seed + 1)
    dY = [rng.normal(size=y.shape).astype("f") for y in Y]
    model.set_grad("E", np.zeros_like(model.get_param("E")))
    assert backprop(dY) == []
    want_Y, want_dE = reference(model, docs, dY)
    for got, want in zip(Y, want_Y):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(model.get_grad("E"), want_dE, rtol=1e-6, atol=1e-6)


def test_every_occurrence_of_a_byte_at_a_position_adds_its_gradient():
    # "cats", "dogs", "bats": the same last bytes in one Doc, where a fancy-index update keeps one term
    check_against_reference([Doc(VOCAB, words=["cats", "dogs", "bats", "s"]), Doc(VOCAB, words=["hats"])])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.text("abs\u00e9\u4e2d", min_size=1, max_size=6), min_size=1, max_size=5),
                min_size=1, max_size=3), st.integers(0, 100))
def test_output_and_gradient_equal_the_loop_over_words_and_positions(sentences, seed):
    check_against_reference([Doc(VOCAB, words=words) for words in sentences], seed)


def test_a_save_of_spacys_architecture_loads_and_gives_the_same_vectors():
    docs = [Doc(VOCAB, words=["The", "cats", "sat", "."]), Doc(VOCAB, words=["Dogs"])]
    fix_random_seed(0)
    spacys = SpacysCharacterEmbed(width=8, rows=50, nM=3, nC=4, include_static_vectors=False)
    spacys.initialize(X=docs)
    ours = CharacterFeatures(width=8, rows=50, nM=3, nC=4)
    ours.initialize(X=docs)
    assert [node.name for node in ours.walk()] == [node.name for node in spacys.walk()]
    for node in spacys.walk():
        if node.name == "charembed":
            node.set_param("E", np.random.default_rng(1).normal(size=node.get_param("E").shape).astype("f"))
    ours.from_bytes(spacys.to_bytes())
    for got, want in zip(ours.predict(docs), spacys.predict(docs)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_unknown_feature_is_refused():
    with pytest.raises(StructPrefError, match="NOPE"):
        CharacterFeatures(width=8, rows=50, nM=3, nC=4, feature="NOPE")
