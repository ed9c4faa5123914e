"""Word clusters of static vectors: words pointing one way share a class, a
token falls back from its lower-case form to its spelling, and the clusters
round-trip and refuse damaged saves."""
import numpy as np
import pytest
import spacy
from spacy.tokens import Doc

from spacy_structpref.classification.word_clusters import WordClusters
from spacy_structpref.errors import SavedModelError, StructPrefError

from tests.helpers.vectors import set_vectors


def families_vocab():
    """Three directions, three words each (lengths differ: the clusters are
    by direction), one zero vector."""
    rng = np.random.default_rng(0)
    axes = np.eye(6)[:3] * 5
    table = {}
    for axis, words in zip(axes, (["cat", "dog", "Horse"], ["red", "blue", "green"], ["run", "walk", "swim"])):
        for scale, word in zip((1.0, 3.0, 0.5), words):
            table[word] = scale * (axis + rng.normal(scale=0.3, size=6))
    table["nothing"] = np.zeros(6)
    return set_vectors(spacy.blank("en").vocab, table)


def test_words_of_one_direction_share_a_cluster_and_lookup_falls_back_to_the_spelling():
    vocab = families_vocab()
    clusters = WordClusters.fit(vocab.vectors, 3)
    doc = Doc(vocab, words=["Cat", "dog", "Horse", "red", "blue", "green", "run", "walk", "swim", "nothing", "zebra"])
    got = clusters.classes(doc)
    assert got[0] == got[1] == got[2]  # "Cat" by its lower-case form, "Horse" by its own spelling
    assert got[3] == got[4] == got[5] and got[6] == got[7] == got[8]
    assert len({got[0], got[3], got[6]}) == 3
    assert got[9] is None and got[10] is None  # a zero vector, no vector
    again = WordClusters.from_dict(clusters.to_dict())
    assert again.classes(doc) == got and again.n_clusters == 3 and len(again) == len(clusters) == 9


def test_bad_settings_and_saves_are_refused():
    vocab = families_vocab()
    with pytest.raises(StructPrefError, match="10 word clusters need at least as many non-zero vectors"):
        WordClusters.fit(vocab.vectors, 10)
    with pytest.raises(StructPrefError, match="at least as many non-zero vectors; the pipeline's table has 0"):
        WordClusters.fit(spacy.blank("en").vocab.vectors, 2)
    with pytest.raises(StructPrefError, match="word_clusters must be an integer"):
        WordClusters.fit(vocab.vectors, 0)
    data = WordClusters.fit(vocab.vectors, 3).to_dict()
    for bad in ({**data, "classes": data["classes"][:-1]}, {**data, "n_clusters": 2},
                {k: v for k, v in data.items() if k != "keys"}, {**data, "keys": ["x"] * len(data["keys"])}):
        with pytest.raises(SavedModelError, match="saved word clusters are damaged"):
            WordClusters.from_dict(bad)
