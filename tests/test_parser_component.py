"""The spaCy component ``forest_parser``."""
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example

import spacy_structpref.components.forest_parser  # noqa: F401  (registers the factory)
from spacy_structpref.components.forest_parser import FALLBACK_KEY
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import StructPrefError
from spacy_structpref.trees import Forest, SymbolTable, doc_to_tree, nbest_trees, to_bracketed


@pytest.fixture(scope="module")
def trained():
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": 10})
    train = corpus_docs("ptb", "train", nlp.vocab, limit=200)
    nlp.initialize(lambda: [Example(d, d) for d in train])
    return nlp


def plain(nlp, doc):
    return Doc(nlp.vocab, words=[t.text for t in doc])


def test_nbest_of_text_with_brackets_and_spaces(trained):
    words = ["He", "left", "(", "quietly", ")", " ", "today", "."]
    doc = trained(Doc(trained.vocab, words=words))
    assert doc._.parse.leaves() == words
    trees = nbest_trees(doc)
    assert len(trees) == len(doc._.nbest) >= 2
    assert all(tree.leaves() == words for _, tree in trees)
    assert trees[0][1] == doc._.parse
    assert [lp for lp, _ in trees] == [lp for lp, _ in doc._.nbest]


def test_parse_writes_tree_nbest_forest(trained):
    gold = corpus_docs("ptb", "test", trained.vocab, limit=4)
    docs = list(trained.pipe(plain(trained, d) for d in gold))
    for doc in docs:
        tree = doc._.parse
        assert tree is not None and tree.leaves() == [t.text for t in doc]
        assert [t.tag_ for t in doc] == [tag for _, tag in tree.pos()]
        nbest = doc._.nbest
        assert 1 <= len(nbest) <= 10
        assert [lp for lp, _ in nbest] == sorted((lp for lp, _ in nbest), reverse=True)
        assert nbest[0][1] == to_bracketed(tree)
        forest = Forest.from_dict(doc._.forest, SymbolTable())
        assert forest.log_total >= nbest[0][0] - 1e-9
    # everything on the Doc survives DocBin
    back = list(DocBin(docs=docs, store_user_data=True).get_docs(trained.vocab))
    # (msgpack may hand sequences back as tuples)
    assert [[list(x) for x in d._.nbest] for d in back] == [d._.nbest for d in docs]
    assert [to_bracketed(doc_to_tree(d)) for d in back] == [to_bracketed(d._.parse) for d in docs]


def test_evaluate_reports_parseval_and_fallbacks(trained):
    gold = corpus_docs("ptb", "test", trained.vocab, limit=10)
    scores = trained.evaluate([Example(plain(trained, d), d) for d in gold])
    assert 0.5 < scores["parseval_f"] <= 1.0
    assert "parseval_f_40" in scores and scores["parse_fallbacks"] == 0


def test_fallback_never_raises():
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("forest_parser")
    doc = Doc(nlp.vocab, words=["the", "dog", "barks"])
    doc.spans["constituents"] = []
    from spacy_structpref.trees import parse_bracketed, tree_to_doc
    train = tree_to_doc(nlp.vocab, parse_bracketed("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks))))"))
    nlp.initialize(lambda: [Example(train, train)])
    gold = tree_to_doc(nlp.vocab, parse_bracketed("(TOP (S (NN dog) (NN dog) (NN dog) (NN dog)))"))
    eg = Example(plain(nlp, gold), gold)
    scores = nlp.evaluate([eg])
    assert scores["parse_fallbacks"] == 1
    out = nlp(plain(nlp, gold))
    assert out.user_data[FALLBACK_KEY] and out._.forest is None and len(out._.nbest) == 1
    assert parser.update([eg]) == {"forest_parser": 0.0}


def test_serialisation_round_trips(trained, tmp_path):
    words = "The company said its profit rose 5 % .".split()
    before = trained(Doc(trained.vocab, words=words))._.nbest
    trained.to_disk(tmp_path / "model")
    trained.to_disk(tmp_path / "model")  # overwriting an existing save
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    loaded = spacy.load(tmp_path / "model")
    assert loaded(Doc(loaded.vocab, words=words))._.nbest == before
    nlp2 = spacy.blank("en")
    pipe = nlp2.add_pipe("forest_parser", config={"k": 10})
    pipe.from_bytes(trained.get_pipe("forest_parser").to_bytes())
    assert nlp2(Doc(nlp2.vocab, words=words))._.nbest == before


def test_config_and_errors():
    nlp = spacy.blank("en")
    with pytest.raises(StructPrefError, match="tag_mode"):
        nlp.add_pipe("forest_parser", config={"tag_mode": "sometimes"})
    pipe = nlp.add_pipe("forest_parser", name="fp2", config={"set_tags": False})
    with pytest.raises(StructPrefError, match="no grammar"):
        pipe(Doc(nlp.vocab, words=["a"]))
    with pytest.raises(StructPrefError, match="constituents"):
        pipe.initialize(lambda: [Example(Doc(nlp.vocab, words=["a"]), Doc(nlp.vocab, words=["a"]))])
    with pytest.raises(StructPrefError, match="does not hold a saved forest_parser"):
        pipe.from_disk("/nonexistent/forest_parser")


def test_upstream_tags_kept_or_used(trained):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("forest_parser", config={"tag_mode": "hard", "set_tags": False})
    pipe.from_bytes(trained.get_pipe("forest_parser").to_bytes())
    pipe.cfg.update(tag_mode="hard", set_tags=False)
    doc = Doc(nlp.vocab, words="He sold the shares .".split(), tags=["PRP", "VBN", "DT", "NNS", "."])
    doc = nlp(doc)
    assert [t.tag_ for t in doc] == ["PRP", "VBN", "DT", "NNS", "."]
    assert [tag for _, tag in doc._.parse.pos()] == ["PRP", "VBN", "DT", "NNS", "."]
