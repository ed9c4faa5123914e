"""The spaCy component ``forest_parser``."""
import pytest
import srsly
from confection import ConfigValidationError
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import raise_error

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.components.forest_parser import DEFAULT_CONFIG, FALLBACK_KEY, PCFG_ARCH, ForestParser
from spacy_structpref.corpora import corpus_docs, ptb_trees
from spacy_structpref.parsing.settings import PCFG, SHARED_SETTINGS
from spacy_structpref.errors import GrammarError, GrammarWarning, StructPrefError
from spacy_structpref.trees import Forest, SymbolTable, doc_to_tree, nbest_trees, to_bracketed

from tests.helpers.fixtures import slow_fixture
from tests.parsing.test_grammar_bad_trees import GOOD, WORD_UNDER_PHRASE


DEFAULT_SHARED = {key: DEFAULT_CONFIG[key] for key in SHARED_SETTINGS}


@slow_fixture
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
        nlp.add_pipe("forest_parser", config={"model": {"@architectures": PCFG_ARCH, "tag_mode": "sometimes"}})
    with pytest.raises(ConfigValidationError, match="tag_mode"):  # a model setting at the component level
        nlp.add_pipe("forest_parser", config={"tag_mode": "hard"})
    pipe = nlp.add_pipe("forest_parser", name="fp2", config={"set_tags": False})
    with pytest.raises(StructPrefError, match="not trained"):
        pipe(Doc(nlp.vocab, words=["a"]))
    with pytest.raises(StructPrefError, match="constituents"):
        pipe.initialize(lambda: [Example(Doc(nlp.vocab, words=["a"]), Doc(nlp.vocab, words=["a"]))])
    with pytest.raises(StructPrefError, match="does not hold a saved forest_parser"):
        pipe.from_disk("/nonexistent/forest_parser")


def test_upstream_tags_kept_or_used(trained):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("forest_parser", config={"model": {"@architectures": PCFG_ARCH, "tag_mode": "hard"}})
    pipe.from_bytes(trained.get_pipe("forest_parser").to_bytes())
    pipe.cfg.update(set_tags=False)
    doc = Doc(nlp.vocab, words="He sold the shares .".split(), tags=["PRP", "VBN", "DT", "NNS", "."])
    doc = nlp(doc)
    assert [t.tag_ for t in doc] == ["PRP", "VBN", "DT", "NNS", "."]
    assert [tag for _, tag in doc._.parse.pos()] == ["PRP", "VBN", "DT", "NNS", "."]


def test_the_memo_keys_on_the_tags_the_grammar_reads_and_forgets_on_new_settings(trained):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("forest_parser", config={"model": {"@architectures": PCFG_ARCH, "tag_mode": "hard"}})
    pipe.from_bytes(trained.get_pipe("forest_parser").to_bytes())
    words = "He sold the shares .".split()
    for tags in (["PRP", "VBN", "DT", "NNS", "."], ["PRP", "VBD", "DT", "NNS", "."]):
        doc = nlp(Doc(nlp.vocab, words=words, tags=tags))
        assert [tag for _, tag in doc._.parse.pos()] == tags
    assert (pipe.memo.hits, pipe.memo.misses) == (0, 2)
    nlp(Doc(nlp.vocab, words=words, tags=["PRP", "VBD", "DT", "NNS", "."]))
    assert pipe.memo.hits == 1
    pipe.cfg.update(k=3)
    assert len(nlp(Doc(nlp.vocab, words=words, tags=["PRP", "VBD", "DT", "NNS", "."]))._.nbest) == 3
    assert (pipe.memo.hits, pipe.memo.misses) == (1, 3)
    pipe.initialize_from_trees(ptb_trees("train")[:60])  # another grammar: parsed again
    nlp(Doc(nlp.vocab, words=words, tags=["PRP", "VBD", "DT", "NNS", "."]))
    assert (pipe.memo.hits, pipe.memo.misses) == (1, 4)
    pipe.memo.size = 0  # no memo: each call parses, nothing is kept
    nlp(Doc(nlp.vocab, words=words, tags=["PRP", "VBD", "DT", "NNS", "."]))
    assert (pipe.memo.hits, pipe.memo.misses, len(pipe.memo)) == (1, 4, 0)


TEXTS = ["He sold the shares .", "Prices fell sharply .", "The company said its profit rose 5 % .",
         "It rose .", "The stock closed at $ 10 ."]


def _parses(docs):
    return [(d._.nbest, [(s.label_, s.start, s.end) for s in d.spans["constituents"]]) for d in docs]


def test_pipe_in_batches_matches_one_by_one(trained):
    memo = trained.get_pipe("forest_parser").memo
    one_by_one = []
    for text in TEXTS:
        memo.clear()  # each sentence parsed alone, not read back from another call's parses
        one_by_one.append(trained(text))
    memo.clear()
    batched = list(trained.pipe(TEXTS, batch_size=2))
    assert _parses(batched) == _parses(one_by_one)


@pytest.mark.parametrize("where", ["nlp", "pipe"])
def test_error_handler_gets_the_failing_doc_and_the_rest_flows(trained, monkeypatch, where):
    component = trained.get_pipe("forest_parser")
    parser = component.parser
    parse = parser.parse

    def fragile(words, *args, **kwargs):
        if "BOOM" in words:
            raise RuntimeError("cannot parse BOOM")
        return parse(words, *args, **kwargs)

    monkeypatch.setattr(parser, "parse", fragile)
    failed = []

    def handler(name, proc, docs, error):
        failed.append((name, proc, [d.text for d in docs], str(error)))

    texts = TEXTS[:2] + ["BOOM goes the parser ."] + TEXTS[2:]
    with pytest.raises(RuntimeError, match="BOOM"):  # spaCy's default handler re-raises
        list(trained.pipe(texts, batch_size=2))
    if where == "nlp":
        trained.set_error_handler(handler)
    else:
        component.set_error_handler(handler)
    try:
        docs = list(trained.pipe(texts, batch_size=2))
    finally:
        trained.set_error_handler(raise_error)  # the fixture's pipeline is shared
    assert failed == [("forest_parser", component, ["BOOM goes the parser ."], "cannot parse BOOM")]
    assert [d.text for d in docs] == TEXTS
    assert _parses(docs) == _parses(trained(t) for t in TEXTS)


def test_spans_key_setting_writes_there_and_round_trips(tmp_path):
    from spacy_structpref.trees import parse_bracketed, tree_to_doc

    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("forest_parser", config={"spans_key": "syntax", "k": 3})
    gold = [tree_to_doc(nlp.vocab, parse_bracketed(t), spans_key="syntax") for t in
            ["(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks))))", "(TOP (S (NP (DT a) (NN cat)) (VP (VBZ sleeps))))"]]
    nlp.initialize(lambda: [Example(plain(nlp, g), g) for g in gold])
    doc = nlp("the cat barks")
    assert "constituents" not in doc.spans
    assert to_bracketed(doc_to_tree(doc, "syntax")) == "(TOP (S (NP (DT the) (NN cat)) (VP (VBZ barks))))"
    assert nlp.evaluate([Example(plain(nlp, g), g) for g in gold])["parse_fallbacks"] == 0
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert loaded.get_pipe("forest_parser").cfg["spans_key"] == "syntax"
    again = loaded("the cat barks")
    assert "constituents" not in again.spans
    assert [(s.label_, s.start, s.end) for s in again.spans["syntax"]] == \
        [(s.label_, s.start, s.end) for s in doc.spans["syntax"]]
    with pytest.raises(StructPrefError, match="spans_key"):
        nlp.add_pipe("forest_parser", name="bad", config={"spans_key": ""})
    assert pipe.cfg["spans_key"] == "syntax"


def test_serialisation_honours_exclude(trained, tmp_path):
    source = trained.get_pipe("forest_parser")
    words = "He sold the shares .".split()
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("forest_parser", config={"k": 2})
    pipe.from_bytes(source.to_bytes(exclude=["grammar"]))
    assert pipe.grammar is None and pipe.cfg["k"] == 10
    pipe.from_bytes(source.to_bytes(), exclude=["cfg"])
    assert pipe.grammar is not None and pipe.cfg["k"] == 10  # cfg kept from the first load
    source.to_disk(tmp_path / "no_grammar", exclude=["grammar"])
    assert not (tmp_path / "no_grammar" / "grammar.msgpack").exists()
    fresh = spacy.blank("en").add_pipe("forest_parser", config={"k": 2})
    fresh.from_disk(tmp_path / "no_grammar")
    assert fresh.grammar is None and fresh.cfg["k"] == 10
    source.to_disk(tmp_path / "full")
    fresh = spacy.blank("en").add_pipe("forest_parser", config={"k": 2})
    fresh.from_disk(tmp_path / "full", exclude=["cfg"])
    assert fresh.cfg["k"] == 2 and fresh.grammar is not None
    doc = fresh(Doc(fresh.vocab, words=words))
    assert len(doc._.nbest) == 2
    assert doc._.nbest == [list(x) for x in trained(Doc(trained.vocab, words=words))._.nbest[:2]]


def test_long_doc_falls_back_at_once_and_is_counted(trained):
    """A 500-token Doc (minutes and GBs of CKY) gets, with the default
    max_length, the flat fallback tree at once, flagged "too long" and
    counted."""
    import time
    import tracemalloc

    from spacy_structpref.parsing.parser import TOO_LONG

    assert trained.get_pipe("forest_parser").cfg["max_length"] == 100
    words = [t.text for d in corpus_docs("ptb", "test", trained.vocab, limit=40) for t in d][:500]
    tracemalloc.start()
    start = time.perf_counter()
    doc = trained(Doc(trained.vocab, words=words))
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 10 and peak < 100e6
    assert doc.user_data[FALLBACK_KEY] == TOO_LONG
    assert doc._.parse.leaves() == words and len(doc._.nbest) == 1 and doc._.forest is None
    gold = corpus_docs("ptb", "test", trained.vocab, limit=3)
    scores = trained.evaluate([Example(Doc(trained.vocab, words=words), doc)] +
                              [Example(plain(trained, d), d) for d in gold])
    assert scores["parse_fallbacks"] == 1 and scores["parse_too_long"] == 1


def test_one_unknown_word_gets_its_likeliest_tag():
    """``nlp("dog")`` after 300 PTB trees: no parse, and the fallback tags
    the word NN (P(T | w)), not WP$ (P(w | T))."""
    from spacy_structpref.corpora import ptb_trees

    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser").initialize_from_trees(list(ptb_trees("train"))[:300])
    doc = nlp("dog")
    assert doc.user_data[FALLBACK_KEY] == "no parse"
    assert str(doc._.parse) == "(TOP (S (NN dog)))" and doc[0].tag_ == "NN"
    assert [t.tag_ for t in nlp("Dog dogs")] == ["NNP", "NNS"]


@pytest.mark.parametrize("set_tags", [True, False])
def test_fallback_honours_set_tags(trained, set_tags):
    """A fallback tree's tags reach token.tag_ only with set_tags."""
    parser = trained.get_pipe("forest_parser")
    words = ["the"] * (parser.cfg["max_length"] + 1)
    doc = Doc(trained.vocab, words=words, tags=["XX"] * len(words))
    before = parser.cfg["set_tags"]
    parser.cfg["set_tags"] = set_tags
    try:
        doc = trained(doc)
    finally:
        parser.cfg["set_tags"] = before
    assert doc.user_data[FALLBACK_KEY] == "too long"
    assert {t.tag_ for t in doc} == ({"DT"} if set_tags else {"XX"})
    assert {t for _, t in doc._.parse.pos()} == ({"DT"} if set_tags else {"XX"})


def test_max_length_setting():
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"max_length": 3})
    from spacy_structpref.trees import parse_bracketed, tree_to_doc
    train = tree_to_doc(nlp.vocab, parse_bracketed("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks))))"))
    nlp.initialize(lambda: [Example(train, train)])
    assert FALLBACK_KEY not in nlp(Doc(nlp.vocab, words=["the", "dog", "barks"])).user_data
    assert nlp(Doc(nlp.vocab, words=["the", "dog", "dog", "barks"])).user_data[FALLBACK_KEY] == "too long"
    assert nlp(Doc(nlp.vocab, words=["the", "dog"])).user_data[FALLBACK_KEY] == "no parse"
    unbounded = spacy.blank("en")
    unbounded.add_pipe("forest_parser", config={"max_length": None}).from_bytes(
        nlp.get_pipe("forest_parser").to_bytes(exclude=["cfg"]))
    assert unbounded(Doc(unbounded.vocab, words=["the", "dog", "dog", "barks"])).user_data[FALLBACK_KEY] == "no parse"


SHARED_BAD = [("threshold", 1.0, "threshold"), ("max_length", 0, "max_length"), ("k", 0, "k must"),
              ("k", True, "k must|forest_parser -> k")]
MODEL_BAD = [
    ("max_expansions", 0, "max_expansions"), ("max_expansions", -3, "max_expansions"),
    ("max_expansions", 2.5, "max_expansions"), ("rare_threshold", -1, "rare_threshold"),
    ("tag_bonus", 0.0, "tag_bonus"), ("tag_bonus", -1.0, "tag_bonus"), ("tag_bonus", float("inf"), "tag_bonus"),
    ("smooth", -1.0, "smooth"), ("smooth", float("nan"), "smooth"), ("beam", 1.5, "beam"), ("beam", -0.1, "beam"),
    ("merit_threshold", float("nan"), "merit_threshold"),
]


def finite(value) -> bool:
    """spaCy refuses nan and inf in a config itself."""
    return value == value and abs(value) != float("inf")


@pytest.mark.parametrize("setting,value,match", SHARED_BAD)
def test_bad_settings_fail_when_the_pipeline_is_built(setting, value, match):
    """Settings that would make every parse fall back or fail are refused
    when the pipeline is built, not at the first parse. A save with one is
    refused and leaves the component's cfg as it was (checked before it is
    adopted)."""
    nlp = spacy.blank("en")
    # spaCy's own type check catches a float where an int is declared
    with pytest.raises((StructPrefError, ConfigValidationError), match=match):
        nlp.add_pipe("forest_parser", config={setting: value})
    with pytest.raises(StructPrefError, match=match):
        ForestParser(nlp.vocab, PCFG(), **{**DEFAULT_SHARED, setting: value})
    pipe = nlp.add_pipe("forest_parser")
    before = dict(pipe.cfg)
    with pytest.raises(StructPrefError, match=match):
        pipe.from_bytes(srsly.msgpack_dumps({"cfg": {**pipe.cfg, setting: value}}))
    assert pipe.cfg == before


@pytest.mark.parametrize("setting,value,match", MODEL_BAD)
def test_bad_model_settings_fail_when_the_pipeline_is_built(setting, value, match):
    """The PCFG's settings (smooth=-1 would raise ZeroDivisionError at the
    first parse, a bad beam prune everything) are refused when its model
    block is resolved."""
    config = {setting: value, "tag_mode": "soft"} if setting == "tag_bonus" else {setting: value}
    if finite(value):
        with pytest.raises((StructPrefError, ConfigValidationError), match=match):
            spacy.blank("en").add_pipe("forest_parser", config={"model": {"@architectures": PCFG_ARCH, **config}})
    with pytest.raises(StructPrefError, match=match):
        PCFG(**config)


def test_forest_parser_initializes_from_trees_skipping_bad_ones():
    pipe = spacy.blank("es").add_pipe("forest_parser")
    with pytest.raises(GrammarError, match="tree 1"):
        pipe.initialize_from_trees([GOOD[0], WORD_UNDER_PHRASE])
    with pytest.warns(GrammarWarning):
        pipe.initialize_from_trees([GOOD[0], WORD_UNDER_PHRASE, GOOD[1]], skip_bad_trees=True)
    assert pipe.grammar.skipped_trees == 1
