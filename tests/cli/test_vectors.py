"""``train-vectors`` (spacy_structpref.cli.vectors): the saved vectors are
those of the word_vectors module for the corpus's tokens, keyed as asked."""
import numpy
import pytest
import spacy
from spacy.attrs import ORTH
from typer.testing import CliRunner

from spacy_structpref.cli import app
from spacy_structpref.cli.convert import convert
from spacy_structpref.cli.vectors import corpus_sentences, train_vectors
from spacy_structpref.errors import StructPrefError
from spacy_structpref.models.word_vectors import train_word_vectors
from spacy_structpref.saving import MARKER


@pytest.fixture(scope="module")
def tiny_ptb(tmp_path_factory):
    out = tmp_path_factory.mktemp("ptb")
    convert("ptb", out, limit=40)
    return out


def test_saved_vectors_are_the_trained_ones(tiny_ptb, tmp_path):
    corpora = [tiny_ptb / "train.spacy", tiny_ptb / "dev.spacy"]
    train_vectors(tmp_path / "vectors", corpora, dim=8, window=2, min_count=2)
    nlp = spacy.load(tmp_path / "vectors")
    sentences, _ = corpus_sentences(corpora, "LOWER", nlp.vocab)
    words, vectors = train_word_vectors(sentences, dim=8, window=2, min_count=2)
    table = nlp.vocab.vectors
    assert table.shape == vectors.shape
    for word, vector in zip(words, vectors):
        assert numpy.allclose(table[nlp.vocab.strings[word]], vector)
    # spaCy's StaticVectors looks rows up by the text: "The" reads the row of "the"
    doc = nlp.make_doc("The")
    assert numpy.allclose(table[doc.to_array(ORTH)[0]], vectors[words.index("the")])
    assert (tmp_path / "vectors" / MARKER).is_file()


def test_unknown_attribute_and_no_corpus_are_refused(tiny_ptb, tmp_path):
    with pytest.raises(StructPrefError, match="--spelling must be one of"):
        train_vectors(tmp_path / "v", [tiny_ptb / "train.spacy"], spelling="TAG")
    with pytest.raises(StructPrefError, match="at least one .spacy corpus"):
        train_vectors(tmp_path / "v", [])
    assert not (tmp_path / "v").exists()


def test_command_prints_a_summary(tiny_ptb, tmp_path):
    result = CliRunner().invoke(app, ["train-vectors", str(tmp_path / "v"), str(tiny_ptb / "train.spacy"),
                                      "--dim", "4", "--min-count", "1"])
    assert result.exit_code == 0, result.output
    assert "× 4 dimensions" in result.output and "nearest" in result.output
