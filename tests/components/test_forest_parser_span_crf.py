"""The ``forest_parser`` component with a span-CRF model
(``spacy_structpref.SpanCRF.v1``): trained through ``update``, the same
outputs as the PCFG's, batches equal to one Doc at a time, saving and
refused loads, the length bound, and the downstream components on its parses."""
import numpy as np
import pytest
import spacy
from nltk.tree import Tree
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.components.forest_parser import FALLBACK_KEY, SPAN_CRF_ARCH
from spacy_structpref.corpora import corpus_docs, ptb_trees
from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.trees import Forest, SymbolTable, nbest_trees, to_bracketed

from tests.helpers.fixtures import slow_fixture

# a small network: the tests check the plumbing, not the accuracy
TINY = {"@architectures": SPAN_CRF_ARCH, "embed_width": 16, "embed_rows": 500, "char_width": 16, "char_dim": 8,
        "lstm_width": 32, "lstm_depth": 1, "hidden_width": 32, "dropout": 0.1}


def span_nlp(**config):
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": 5, "max_length": 40, "model": dict(TINY), **config})
    return nlp


def plain(nlp, doc):
    return Doc(nlp.vocab, words=[t.text for t in doc])


@slow_fixture
def trained():
    """The tiny span CRF after a few updates on 40 short training sentences."""
    nlp = span_nlp()
    train = [d for d in corpus_docs("ptb", "train", nlp.vocab, limit=200) if len(d) <= 15][:40]
    optimizer = nlp.initialize(lambda: [Example(d, d) for d in train])
    first = None
    for _ in range(4):
        losses = nlp.update([Example(plain(nlp, d), d) for d in train], sgd=optimizer)
        first = losses["forest_parser"] if first is None else first
    assert losses["forest_parser"] < first  # it learns
    return nlp


def test_writes_tree_nbest_with_log_p_and_forest(trained):
    docs = [plain(trained, d) for d in corpus_docs("ptb", "test", trained.vocab, limit=4)]
    for doc in trained.pipe(docs):
        words = [t.text for t in doc]
        assert doc._.parse.leaves() == words and [t.tag_ for t in doc] == [tag for _, tag in doc._.parse.pos()]
        trees = nbest_trees(doc)
        assert 1 <= len(trees) <= 5 and to_bracketed(trees[0][1]) == to_bracketed(doc._.parse)
        log_ps = [lp for lp, _ in doc._.nbest]
        assert log_ps == sorted(log_ps, reverse=True) and all(lp <= 1e-9 for lp in log_ps)
        forest = Forest.from_dict(doc._.forest, SymbolTable())
        assert forest.log_total >= log_ps[0] - 1e-6
        assert doc.spans["constituents"]


def test_pipe_batches_equal_one_by_one(trained):
    gold = corpus_docs("ptb", "test", trained.vocab, limit=6)
    batched = list(trained.pipe((plain(trained, d) for d in gold), batch_size=4))
    memo = trained.get_pipe("forest_parser").memo
    single = []
    for d in gold:
        memo.clear()  # each sentence parsed alone, not read back from the batch's parses
        single.append(trained(plain(trained, d)))
    for a, b in zip(batched, single):
        assert [t for _, t in a._.nbest] == [t for _, t in b._.nbest]
        np.testing.assert_allclose([lp for lp, _ in a._.nbest], [lp for lp, _ in b._.nbest], rtol=1e-4)


def test_a_sentence_parsed_again_by_the_same_weights_comes_from_the_memo(trained):
    pipe = trained.get_pipe("forest_parser")
    pipe.memo.clear()
    gold = corpus_docs("ptb", "test", trained.vocab, limit=4)
    first = [d._.nbest for d in trained.pipe(plain(trained, d) for d in gold)]
    hits, misses = pipe.memo.hits, pipe.memo.misses
    assert [d._.nbest for d in trained.pipe(plain(trained, d) for d in gold)] == first
    assert (pipe.memo.hits, pipe.memo.misses) == (hits + 4, misses)
    b = pipe.model.get_ref("labeller").layers[-1].get_param("b")  # a weight moved in place: parsed again
    saved = b.copy()
    b[1] += 1.0
    try:
        moved = [d._.nbest for d in trained.pipe(plain(trained, d) for d in gold)]
        assert pipe.memo.misses == misses + 4 and moved != first
    finally:
        b[:] = saved
    assert [d._.nbest for d in trained.pipe(plain(trained, d) for d in gold)] == first


def nbest_of(nlp, words):
    return nlp(Doc(nlp.vocab, words=words))._.nbest


def test_bytes_and_disk_round_trips(trained, tmp_path):
    words = "The company said its profit rose .".split()
    before = nbest_of(trained, words)
    fresh = span_nlp()
    fresh.get_pipe("forest_parser").from_bytes(trained.get_pipe("forest_parser").to_bytes())
    assert nbest_of(fresh, words) == before
    trained.to_disk(tmp_path / "nlp")
    saved = {p.name for p in (tmp_path / "nlp" / "forest_parser").iterdir()}
    assert {"cfg.json", "labels.msgpack", "model.msgpack", "tags.msgpack"} <= saved
    assert nbest_of(spacy.load(tmp_path / "nlp"), words) == before


def test_exclude_keeps_the_excluded_parts(trained):
    source = trained.get_pipe("forest_parser")
    pipe = span_nlp(k=2).get_pipe("forest_parser")
    pipe.from_bytes(source.to_bytes(), exclude=["cfg"])
    assert pipe.cfg["k"] == 2 and pipe.parser.labels == source.parser.labels
    empty = span_nlp(k=2).get_pipe("forest_parser")
    empty.from_bytes(source.to_bytes(exclude=["model", "labels", "tags"]))
    assert empty.cfg["k"] == 5 and empty._parser is None


def test_wrong_model_loads_are_refused_and_change_nothing(trained, tmp_path):
    span = trained.get_pipe("forest_parser")
    pcfg_nlp = spacy.blank("en")
    pcfg = pcfg_nlp.add_pipe("forest_parser", config={"k": 3})
    pcfg.initialize_from_trees([Tree("TOP", [t]) if t.label() != "TOP" else t for t in ptb_trees("train")[:20]])
    grammar, cfg = pcfg.grammar, dict(pcfg.cfg)
    with pytest.raises(SavedModelError, match="SpanCRF"):
        pcfg.from_bytes(span.to_bytes())
    span.to_disk(tmp_path / "span")
    with pytest.raises(SavedModelError, match="SpanCRF"):
        pcfg.from_disk(tmp_path / "span")
    assert pcfg.grammar is grammar and pcfg.cfg == cfg
    model, parser, before = span.model, span.parser, dict(span.cfg)
    with pytest.raises(SavedModelError, match="PCFG"):
        span.from_bytes(pcfg.to_bytes())
    assert span.model is model and span.parser is parser and span.cfg == before


def test_lists_from_dropout_samples_set_at_load_batch_like_one_by_one(trained, tmp_path):
    trained.to_disk(tmp_path / "nlp")
    with pytest.warns(UserWarning, match="samples = 3 given at load"):
        nlp = spacy.load(tmp_path / "nlp", config={"components": {"forest_parser": {"samples": 3}}})
    assert nlp.get_pipe("forest_parser").parser.samples == 3
    gold = corpus_docs("ptb", "test", nlp.vocab, limit=6)
    batched = list(nlp.pipe((plain(nlp, d) for d in gold), batch_size=4))
    single = [trained(plain(trained, d)) for d in gold]
    added = 0
    for a, d in zip(batched, gold):
        nlp.get_pipe("forest_parser").memo.clear()
        b = nlp(plain(nlp, d))
        assert [t for _, t in a._.nbest] == [t for _, t in b._.nbest]
        assert len(a._.nbest) == len({t for _, t in a._.nbest})
    for a, own in zip(batched, single):
        # the model's k // 2 best kept, first, with their log p
        assert [t for _, t in a._.nbest[:2]] == [t for _, t in own._.nbest[:2]]
        np.testing.assert_allclose([lp for lp, _ in a._.nbest[:2]], [lp for lp, _ in own._.nbest[:2]], rtol=1e-6)
        added += len({t for _, t in a._.nbest} - {t for _, t in own._.nbest})
    assert added > 0


def test_samples_need_a_span_crf_and_a_count():
    with pytest.raises(StructPrefError, match="needs a span CRF"):
        spacy.blank("en").add_pipe("forest_parser", config={"samples": 2})
    with pytest.raises(StructPrefError, match="samples"):
        span_nlp(samples=-1)


def test_long_doc_falls_back_within_max_length_rules(trained):
    """A 300-token Doc is longer than max_length (40): the flat fallback tree
    at once, flagged; without a bound it is parsed by the chart."""
    import time
    import tracemalloc

    words = [t.text for d in corpus_docs("ptb", "test", trained.vocab, limit=40) for t in d][:300]
    tracemalloc.start()
    start = time.perf_counter()
    doc = trained(Doc(trained.vocab, words=words))
    seconds, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 5 and peak < 100e6
    assert doc.user_data[FALLBACK_KEY] == "too long" and doc._.parse.leaves() == words and doc._.forest is None
    unbounded = span_nlp(max_length=None, k=1, store_forest=False)
    unbounded.get_pipe("forest_parser").from_bytes(trained.get_pipe("forest_parser").to_bytes(exclude=["cfg"]))
    doc = unbounded(Doc(unbounded.vocab, words=words))
    assert FALLBACK_KEY not in doc.user_data and doc._.parse.leaves() == words


def test_rerank_lists_from_the_span_parser(trained):
    from spacy_structpref.reranking.data import parse_lists

    trees = [t if t.label() == "TOP" else Tree("TOP", [t]) for t in ptb_trees("test")[:3]]
    items = parse_lists(trees, trained.get_pipe("forest_parser").parser, k=5, with_forest=True, n_jobs=1)
    assert len(items) == 3
    assert all(1 <= len(item.candidates) <= 5 for item in items)


def test_kernel_textcat_runs_on_span_crf_parses(trained):
    from tests.components.test_kernel_textcat import labelled_examples, questions

    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", source=trained)
    nlp.add_pipe("kernel_textcat", config={"kernel": {"name": "forest+bow", "bow_weight": 0.3},
                                           "C_grid": [1.0], "dev_every": 4})
    nlp.get_pipe("kernel_textcat").initialize(lambda: labelled_examples(nlp, questions(12)), nlp=nlp)
    doc = nlp(Doc(nlp.vocab, words="What is the capital of France ?".split()))
    assert sum(doc.cats.values()) == pytest.approx(1.0)


def test_reranker_cannot_jackknife_span_crf_lists(trained):
    """Jackknifing rebuilds the PCFG on other folds: after a span CRF it is a
    clear error, not a PCFG silently standing in."""
    from spacy_structpref.errors import StructPrefError

    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", source=trained)
    reranker = nlp.add_pipe("parse_reranker", config={"k": 5, "n_folds": 2})
    train = [d for d in corpus_docs("ptb", "train", nlp.vocab, limit=4)]
    with pytest.raises(StructPrefError, match="SpanCRF"):
        reranker.initialize(lambda: [Example(d, d) for d in train], nlp=nlp)


def test_static_vectors_travel_with_the_parser_or_it_refuses(tmp_path):
    from thinc.api import Config

    from tests.helpers.vectors import set_vectors

    from spacy_structpref.errors import StructPrefError

    def with_vectors(nlp, seed):
        words = ["the", "a", "of", "and", "to"]
        set_vectors(nlp.vocab, dict(zip(words, np.random.default_rng(seed).standard_normal((len(words), 4)))))
        return nlp

    nlp = with_vectors(span_nlp(model={**TINY, "include_static_vectors": True}), 0)
    train = [d for d in corpus_docs("ptb", "train", nlp.vocab, limit=30) if len(d) <= 12][:5]
    nlp.initialize(lambda: [Example(d, d) for d in train])
    nlp.to_disk(tmp_path / "parser")
    loaded = spacy.load(tmp_path / "parser")
    doc = plain(loaded, train[0])
    assert loaded(doc)._.parse.leaves() == [t.text for t in doc]
    # sourced by a config without [initialize] vectors (spacy assemble, spacy train): spaCy keeps the
    # pipeline's own, empty vectors; a clear error, not parses from zero vectors
    config = {"nlp": {"lang": "en", "pipeline": ["forest_parser"]},
              "components": {"forest_parser": {"source": str(tmp_path / "parser")}}}
    bare = spacy.util.load_model_from_config(Config(config), auto_fill=True)
    with pytest.raises(StructPrefError, match="reads static vectors, but this pipeline has none"):
        bare(plain(bare, train[0]))
    # other vectors: the pipeline saved with them is refused at load
    with_vectors(bare, 1)
    bare.to_disk(tmp_path / "mixed")
    with pytest.raises(StructPrefError, match="trained on another vector table"):
        spacy.load(tmp_path / "mixed")
