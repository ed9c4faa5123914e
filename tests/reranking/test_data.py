"""Rerank data: jackknifed k-best lists, targets, PARSEVAL rows, saving."""
import math
import random
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
import spacy_structpref.parsing.grammar as grammar_module
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.experiments.reranking_tables import (evaluate, evaluate_row, format_rows, one_best_row,
                                                           oracle_row, table_row)
from spacy_structpref.reranking import (
    count_fallbacks,
    fold_assignment,
    fold_lists,
    jackknife_lists,
    load_items,
    parse_lists,
    parser_from_trees,
    save_items,
    target_index,
)
from spacy_structpref.scoring.parseval import COLLINS, SentenceStats, evalb, sentence_stats
from spacy_structpref.trees import parse_bracketed, to_bracketed, tree_to_doc

from tests.helpers.fixtures import slow_fixture

N_FOLDS, K = 3, 5


def short_and_long(split, n_short, n_long):
    """Sentences of at most 20 words (parsing stays fast), then a few over the
    40-word cut-off of EVALB's second block."""
    trees = ptb_trees(split)
    return ([t for t in trees if len(t.leaves()) <= 20][:n_short]
            + [t for t in trees if 40 < len(t.leaves()) <= 45][:n_long])


@pytest.fixture(scope="session")
def train():
    return short_and_long("train", 58, 2)


@slow_fixture
def jackknifed(train):
    """A 3-fold jackknife of 60 sentences in worker processes."""
    return jackknife_lists(train, n_folds=N_FOLDS, k=K, with_forest=True, n_jobs=2, progress=False)


@pytest.fixture(scope="module")
def eval_items(train):
    return parse_lists(short_and_long("test", 8, 0), parser_from_trees(train), k=K, with_forest=True)


# ------------------------------------------------------------------ folds
@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12).flatmap(lambda f: st.tuples(st.integers(f, 200), st.just(f))))
def test_fold_assignment_is_a_balanced_contiguous_partition(args):
    n, n_folds = args
    folds = fold_assignment(n, n_folds)
    assert len(folds) == n and folds[0] == 0 and folds[-1] == n_folds - 1
    assert np.all(np.diff(folds) >= 0)  # contiguous blocks, in order
    sizes = np.bincount(folds, minlength=n_folds)
    assert sizes.min() >= 1 and sizes.max() - sizes.min() <= 1


@pytest.mark.parametrize("n,n_folds", [(10, 1), (2, 3), (10, 0)])
def test_fold_assignment_rejects_bad_folds(n, n_folds):
    with pytest.raises(StructPrefError):
        fold_assignment(n, n_folds)


def test_jackknife_never_parses_a_sentence_its_grammar_saw(train, jackknifed, monkeypatch):
    """In this process, with every grammar's training trees recorded; the
    same lists as the jackknife in worker processes."""
    seen = []
    original = grammar_module.estimate_grammar

    def spy(trees, *args, **kwargs):
        trees = list(trees)
        seen.append([to_bracketed(t) for t in trees])
        return original(trees, *args, **kwargs)

    monkeypatch.setattr(grammar_module, "estimate_grammar", spy)
    items = jackknife_lists(train, n_folds=N_FOLDS, k=K, with_forest=True, n_jobs=1, progress=False)
    folds = fold_assignment(len(train), N_FOLDS)
    assert len(seen) == N_FOLDS  # one grammar per fold
    texts = [to_bracketed(t) for t in train]
    for f, grammar_trees in enumerate(seen):
        assert grammar_trees == [t for t, g in zip(texts, folds) if g != f]
    for text, item, f in zip(texts, items, folds):
        assert item.fold == f and text not in seen[f]
    assert [it.to_dict() for it in items] == [it.to_dict() for it in jackknifed]


def test_fold_lists_of_parsers_trained_without_their_fold_are_the_jackknife(train, jackknifed):
    """Lists from parsers trained elsewhere (here the PCFGs the jackknife
    itself would build) are the jackknife's, forests included."""
    folds = fold_assignment(len(train), N_FOLDS)
    parsers = [parser_from_trees([t for t, g in zip(train, folds) if g != f]) for f in range(N_FOLDS)]
    items = fold_lists(train, parsers, k=K, with_forest=True, progress=False)
    assert [it.to_dict() for it in items] == [it.to_dict() for it in jackknifed]
    with pytest.raises(StructPrefError, match="2 folds"):
        fold_lists(train, parsers[:1], k=K, progress=False)
    with pytest.raises(StructPrefError, match="gold trees"):
        fold_lists([t.leaves() for t in train], parsers, progress=False)


def test_jackknife_gives_each_sentence_one_list_in_order(train, jackknifed):
    items = jackknifed
    assert len(items) == len(train)
    for tree, item in zip(train, items):
        assert item.gold == tree and item.words == tree.leaves()
        assert 1 <= len(item) <= K and (item.forest is None) == item.fallback
        assert item.log_probs == sorted(item.log_probs, reverse=True)
        assert all(item.tree(i).leaves() == item.words for i in range(len(item)))


def test_jackknife_fold_equals_a_parser_of_the_other_folds(train, jackknifed):
    items = jackknifed
    folds = fold_assignment(len(train), N_FOLDS)
    parser = parser_from_trees([t for t, f in zip(train, folds) if f != 1])
    for item in [it for it in items if it.fold == 1][:4]:
        res = parser.parse(item.words, k=K)
        assert item.candidates == [text for _, text in res.nbest]
        assert item.log_probs == [lp for lp, _ in res.nbest]


# ----------------------------------------------------- full-grammar lists
def test_eval_lists_use_the_forest_parser_of_all_train(train, eval_items):
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": K})
    nlp.initialize(lambda: [Example(d, d) for d in (tree_to_doc(nlp.vocab, t) for t in train)])
    component = nlp.get_pipe("forest_parser")
    assert parser_from_trees(train).grammar.to_dict() == component.grammar.to_dict()
    for item in eval_items:
        doc = nlp(spacy.tokens.Doc(nlp.vocab, words=item.words))
        assert item.fold == -1
        assert item.candidates == [text for _, text in doc._.nbest]
        assert item.log_probs == [lp for lp, _ in doc._.nbest]


def test_parse_lists_in_chunks_equals_in_process(train, eval_items):
    parallel = parse_lists([it.gold for it in eval_items], parser_from_trees(train), k=K, with_forest=True, n_jobs=2)
    assert [it.to_dict() for it in parallel] == [it.to_dict() for it in eval_items]
    assert len({id(it.forest.symbols) for it in parallel if it.forest is not None}) == 1  # one table


def test_words_without_gold_have_no_target(train, eval_items):
    items = parse_lists([it.words for it in eval_items[:2]], parser_from_trees(train), k=K)
    assert [it.candidates for it in items] == [it.candidates for it in eval_items[:2]]
    assert all(it.gold is None and it.stats is None and it.target is None for it in items)
    with pytest.raises(StructPrefError):
        evaluate(items, [0, 0])
    with pytest.raises(StructPrefError):
        items[0].f1()


def test_unparsable_sentence_keeps_the_fallback():
    tree = parse_bracketed("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks))))")  # 3-word sentences only
    items = parse_lists([parse_bracketed("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks) (RB loudly))))")],
                        parser_from_trees([tree]), k=K, with_forest=True)
    (item,) = items
    assert item.fallback and count_fallbacks(items) == 1
    assert len(item) == 1 and item.log_probs == [-math.inf] and item.forest is None and item.target == 0
    assert evaluate(items, [0]).all.sentences == 1


@pytest.mark.parametrize("settings_", [{"tag_mode": "hard"}, {"beam_size": 3}])
def test_bad_settings_are_refused(train, settings_):
    with pytest.raises(StructPrefError):
        parser_from_trees(train[:5], settings_)


def test_bad_arguments_are_refused(train):
    with pytest.raises(StructPrefError):
        jackknife_lists(train[:6], n_folds=1, progress=False)
    with pytest.raises(StructPrefError):
        jackknife_lists(train[:6], n_folds=2, k=0, progress=False)
    with pytest.raises(StructPrefError):
        jackknife_lists([t.leaves() for t in train[:6]], n_folds=2, progress=False)
    with pytest.raises(StructPrefError):
        parse_lists(train[:2], parser_from_trees(train[:5]), n_jobs=0)


# ----------------------------------------------------------------- targets
def brute_force_target(item):
    """Best candidate by exact F1 of the EVALB scorer on restored trees, then log p, then rank."""
    scores = []
    for i in range(len(item)):
        s = sentence_stats(item.gold, item.tree(i))
        f1 = Fraction(2 * s.matched, s.gold + s.test) if s.gold + s.test else Fraction(1)
        scores.append((f1, item.log_probs[i], -i))
    return max(range(len(item)), key=lambda i: scores[i])


def test_target_is_best_f1_with_log_p_tie_break(jackknifed, eval_items):
    items = jackknifed + eval_items
    assert [it.target for it in items] == [brute_force_target(it) for it in items]
    assert any(it.target > 0 for it in items)
    for it in items:
        assert it.f1()[it.target] == it.f1().max()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 3)), min_size=1, max_size=8),
       st.integers(0, 8))
def test_target_index_matches_exact_fractions(cands, gold):
    stats = [SentenceStats(10, gold, t, min(m, t, gold), 0, 10, 10) for m, t, _ in cands]
    log_probs = [-float(lp) for _, _, lp in cands]

    def key(i):
        s = stats[i]
        f1 = Fraction(2 * s.matched, s.gold + s.test) if s.gold + s.test else Fraction(1)
        return f1, log_probs[i], -i
    assert target_index(stats, log_probs) == max(range(len(stats)), key=key)


def test_target_index_rejects_mismatched_inputs():
    with pytest.raises(StructPrefError):
        target_index([], [])
    with pytest.raises(StructPrefError):
        target_index([SentenceStats(1, 1, 1, 1, 0, 1, 1)], [0.0, -1.0])


# -------------------------------------------------------------- evaluation
# The small grammars tag punctuation as words often: EVALB's MAX_ERROR would stop it.
NO_STOP = replace(COLLINS, max_error=None)
FIGURES = {"LR": "recall", "LP": "precision", "F1": "f1", "CB": "avg_crossing", "0CB": "zero_crossing",
           "<=2CB": "le2_crossing_pct", "sentences": "sentences"}


def test_one_best_row_equals_evalb_of_the_one_best_trees(jackknifed):
    items = jackknifed
    reference = evalb([it.gold for it in items], [it.tree(0) for it in items], NO_STOP)
    row = one_best_row(items)
    for key, totals in (("<=40", reference.short), ("all", reference.all)):
        for column, attribute in FIGURES.items():
            assert row[key][column] == pytest.approx(getattr(totals, attribute))
    assert row["all"]["sentences"] == 60 > row["<=40"]["sentences"] == 58
    assert evaluate(items, [it.tree(0) for it in items]).all.as_dict() == reference.all.as_dict()


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_evaluate_any_choice_equals_evalb_of_the_chosen_trees(jackknifed, data):
    items = jackknifed
    chosen = [data.draw(st.integers(0, len(it) - 1)) for it in items]
    reference = evalb([it.gold for it in items], [it.tree(i) for it, i in zip(items, chosen)], NO_STOP)
    result = evaluate(items, chosen)
    assert result.all.as_dict() == reference.all.as_dict()
    assert result.short.as_dict() == reference.short.as_dict()


def test_oracle_row_beats_every_other_choice(jackknifed):
    items = jackknifed
    oracle = oracle_row(items)
    rng = random.Random(0)
    others = [one_best_row(items), table_row("last", evaluate(items, [len(it) - 1 for it in items]))]
    others += [table_row("random", evaluate(items, [rng.randrange(len(it)) for it in items])) for _ in range(5)]
    for row in others:
        for key in ("<=40", "all"):
            assert oracle[key]["F1"] >= row[key]["F1"]
    assert oracle["all"]["F1"] > others[0]["all"]["F1"]


def test_evaluate_refuses_bad_choices(jackknifed):
    items = jackknifed
    with pytest.raises(StructPrefError):
        evaluate(items, [0])
    with pytest.raises(StructPrefError):
        evaluate(items[:1], [len(items[0])])


def test_table_shows_both_blocks_and_every_row(jackknifed):
    items = jackknifed
    text = format_rows([one_best_row(items), oracle_row(items)])
    assert "≤ 40 words" in text and "all sentences (60 sentences)" in text
    assert text.count("PCFG 1-best") == 2 and text.count("oracle") == 2
    with pytest.raises(StructPrefError):
        format_rows([])


def test_rerank_table_command_prints_the_saved_table_and_gains(jackknifed, tmp_path):
    import srsly
    from typer.testing import CliRunner

    from spacy_structpref.cli import app

    items = jackknifed
    rows = [one_best_row(items), evaluate_row("second", items, [min(1, len(i) - 1) for i in items]),
            oracle_row(items)]
    srsly.write_json(tmp_path / "table.json", {"rows": rows})
    out = CliRunner().invoke(app, ["rerank-table", str(tmp_path / "table.json")])
    assert out.exit_code == 0, out.output
    gain = rows[1]["<=40"]["F1"] - rows[0]["<=40"]["F1"]
    assert out.output.count("second") == 3 and f"{gain:+6.2f}  second" in out.output
    assert not any(line.endswith("  oracle") for line in out.output.splitlines())  # no gain for the oracle
    srsly.write_json(tmp_path / "bad.json", {"rows": [{"name": "x", "<=40": {}}]})
    out = CliRunner().invoke(app, ["rerank-table", str(tmp_path / "bad.json")])
    assert out.exit_code == 1 and "not a reranking table" in " ".join(out.output.split())


# ------------------------------------------------------------------ saving
def test_save_load_round_trip(tmp_path, jackknifed, eval_items):
    items = jackknifed[:10] + eval_items
    path = tmp_path / "lists.msgpack"
    path.write_bytes(b"old")
    save_items(path, items)
    assert [p.name for p in tmp_path.iterdir()] == ["lists.msgpack"]  # replaced, no temporary left
    back = load_items(path)
    assert [it.to_dict() for it in back] == [it.to_dict() for it in items]
    assert [it.gold for it in back] == [it.gold for it in items]
    forests = [(a.forest, b.forest) for a, b in zip(items, back) if a.forest is not None]
    assert len(forests) >= 10 and all(b.forest is None for a, b in zip(items, back) if a.forest is None)
    for a, b in forests:
        assert b.log_total == pytest.approx(a.log_total)
    assert forests[0][1].symbols is forests[-1][1].symbols


def test_load_refuses_what_is_not_rerank_data(tmp_path):
    with pytest.raises(StructPrefError):
        load_items(tmp_path / "missing.msgpack")
    import srsly
    srsly.write_msgpack(tmp_path / "other.msgpack", {"weights": [1, 2]})
    with pytest.raises(StructPrefError):
        load_items(tmp_path / "other.msgpack")


def test_lists_of_an_older_format_are_rescored_on_load(tmp_path, jackknifed):
    import srsly

    items = jackknifed[:8]
    save_items(tmp_path / "lists.msgpack", items)
    data = srsly.read_msgpack(tmp_path / "lists.msgpack")
    data["version"] = 1  # scored by an older scorer: every count and target wrong
    for d in data["items"]:
        d["stats"] = [[0] * len(s) for s in d["stats"]]
        d["target"] = len(d["candidates"]) - 1
    srsly.write_msgpack(tmp_path / "old.msgpack", data)
    loaded = load_items(tmp_path / "old.msgpack")
    assert [i.stats for i in loaded] == [i.stats for i in items]
    assert [i.target for i in loaded] == [i.target for i in items]
    data["version"] = 99
    srsly.write_msgpack(tmp_path / "future.msgpack", data)
    with pytest.raises(StructPrefError, match="format version"):
        load_items(tmp_path / "future.msgpack")


def test_fallback_survives_saving(tmp_path):
    tree = parse_bracketed("(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks))))")  # 3-word sentences only
    items = parse_lists([["the", "dog", "barks", "loudly"]],
                        parser_from_trees([tree]), k=K)
    save_items(tmp_path / "f.msgpack", items)
    (back,) = load_items(tmp_path / "f.msgpack")
    assert back.fallback and back.log_probs == [-math.inf] and back.target is None
