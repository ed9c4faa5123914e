"""``ensemble-span-parser`` (cli.ensemble): two tiny trained span-CRF
pipelines assembled into one that spacy.load rebuilds, parsing as the
library's ensemble of the same parsers, its dev scores in meta.json, and the
pipelines it refuses."""
import json

import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.cli.ensemble import ensemble_span_parser
from spacy_structpref.components.forest_parser import ENSEMBLE_ARCH
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import StructPrefError
from spacy_structpref.parsing.span_parser import SpanParser

from tests.components.test_forest_parser_span_crf import plain, span_nlp
from tests.helpers.fixtures import slow_fixture


def train_tiny(sentences, seed):
    from thinc.api import fix_random_seed

    fix_random_seed(seed)
    nlp = span_nlp()
    optimizer = nlp.initialize(lambda: [Example(d, d) for d in sentences])
    for _ in range(2):
        nlp.update([Example(plain(nlp, d), d) for d in sentences], sgd=optimizer)
    return nlp


@slow_fixture
def members(tmp_path_factory):
    """Two tiny span-CRF pipelines on disk, the second trained on fewer
    sentences (fewer labels and tags), and a dev corpus."""
    root = tmp_path_factory.mktemp("members")
    docs = [d for d in corpus_docs("ptb", "train", spacy.blank("en").vocab, limit=200) if len(d) <= 15]
    paths = []
    for m, sentences in enumerate((docs[:30], docs[30:40])):
        train_tiny(sentences, m).to_disk(root / f"m{m}")
        paths.append(root / f"m{m}")
    DocBin(docs=corpus_docs("ptb", "dev", spacy.blank("en").vocab, limit=8)).to_disk(root / "dev.spacy")
    return paths, root / "dev.spacy"


def test_the_saved_ensemble_parses_as_the_librarys_ensemble_of_its_members(members, tmp_path):
    paths, dev = members
    out = ensemble_span_parser(paths, tmp_path / "ens", weights=[2.0, 1.0], dev=dev)
    nlp = spacy.load(out)
    assert nlp.config["components"]["forest_parser"]["model"]["@architectures"] == ENSEMBLE_ARCH
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ensemble"]["weights"] == [2.0, 1.0] and isinstance(meta["performance"]["parseval_f"], float)
    loaded = [spacy.load(p).get_pipe("forest_parser").parser for p in paths]
    assert loaded[1].labels != loaded[0].labels or loaded[1].tags != loaded[0].tags
    reference = SpanParser.ensemble(loaded, [2.0, 1.0])
    sentences = [[t.text for t in d] for d in corpus_docs("ptb", "test", nlp.vocab, limit=5)]
    docs = list(nlp.pipe(Doc(nlp.vocab, words=words) for words in sentences))
    for doc, expected in zip(docs, reference.parse_many(sentences, k=5, with_forest=False)):
        assert [text for _, text in doc._.nbest] == [text for _, text in expected.nbest]
        assert [lp for lp, _ in doc._.nbest] == pytest.approx([lp for lp, _ in expected.nbest], abs=1e-4)
    assert [p.name for p in tmp_path.iterdir()] == ["ens"]  # nothing left beside it


def test_an_ensemble_pipeline_is_not_trained_further(members, tmp_path):
    paths, _ = members
    nlp = spacy.load(ensemble_span_parser(paths, tmp_path / "ens"))
    doc = next(iter(corpus_docs("ptb", "train", nlp.vocab, limit=1)))
    with pytest.raises(StructPrefError, match="not trained"):
        nlp.update([Example(plain(nlp, doc), doc)])
    assert "performance" not in json.loads((tmp_path / "ens" / "meta.json").read_text())


def test_what_cannot_be_assembled_is_refused(members, tmp_path):
    paths, _ = members
    with pytest.raises(StructPrefError, match="at least two"):
        ensemble_span_parser(paths[:1], tmp_path / "one")
    pcfg = spacy.blank("en")
    pcfg.add_pipe("forest_parser")
    pcfg.to_disk(tmp_path / "pcfg")
    with pytest.raises(StructPrefError, match="members are spacy_structpref.SpanCRF.v1"):
        ensemble_span_parser([paths[0], tmp_path / "pcfg"], tmp_path / "bad")
    spacy.blank("en").to_disk(tmp_path / "blank")
    with pytest.raises(StructPrefError, match="no forest_parser"):
        ensemble_span_parser([paths[0], tmp_path / "blank"], tmp_path / "bad")
    with pytest.raises(StructPrefError, match="2 members but 3 weights"):
        ensemble_span_parser(paths, tmp_path / "bad", weights=[1.0, 1.0, 1.0])
    assert not (tmp_path / "bad").exists()
    ensemble = spacy.load(ensemble_span_parser(paths, tmp_path / "ens"))
    with pytest.raises(StructPrefError, match="members are spacy_structpref.SpanCRF.v1"):
        ensemble_span_parser([paths[0], tmp_path / "ens"], tmp_path / "bad")
    with pytest.raises(StructPrefError, match="takes a span parser of that architecture"):
        ensemble.get_pipe("forest_parser").use_span_parser(spacy.load(paths[0]).get_pipe("forest_parser").parser)
