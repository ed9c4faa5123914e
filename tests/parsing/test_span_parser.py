"""The span-CRF parser (parsing.span_parser): the CRF and tag losses against
finite differences and enumeration, training a tiny model, batched against
one-by-one parsing, k-best lists, saving, fallbacks and bad input."""
import itertools

import numpy as np
import pytest
from thinc.api import Adam, fix_random_seed
from thinc.util import has_cupy_gpu

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.models.span_crf import SpanCRF
from spacy_structpref.models.span_ensemble import SpanCRFEnsemble
from spacy_structpref.parsing import span_chart
from spacy_structpref.parsing.parser import TOO_LONG
from spacy_structpref.parsing.span_parser import (SpanParser, crf_loss, sampled_list, seeded_generator, tag_loss,
                                                  tree_score)
from spacy_structpref.parsing.span_trees import SpanLabels, spans_to_tree, tree_to_spans
from spacy_structpref.scoring.parseval import EvalbParams, evalb
from spacy_structpref.trees.brackets import parse_bracketed, to_bracketed
from spacy_structpref.trees.forest import Forest

SMALL = dict(embed_width=32, embed_rows=500, char_width=32, char_dim=8, char_count=6, lstm_width=64,
             lstm_depth=1, hidden_width=64, dropout=0.0)


def bracketings(i, j):
    """Every full binary bracketing of [i, j) as a list of spans."""
    if j - i == 1:
        yield [(i, j)]
        return
    for k in range(i + 1, j):
        for left in bracketings(i, k):
            for right in bracketings(k, j):
                yield [(i, j)] + left + right


def canonical(spans, labels):
    """Whether no right child of two or more words has the empty label 0."""
    return not any(lab == 0 and j - i > 1 and any(b == j and a < i for a, b in spans)
                   for (i, j), lab in zip(spans, labels))


def random_chart(n, L, seed):
    chart = np.random.default_rng(seed).normal(size=(n, n + 1, L))
    chart[:, :, 0] = 0.0
    return chart


@pytest.mark.parametrize("n, L", [(1, 3), (3, 2), (4, 2)])
def test_crf_loss_is_minus_log_probability_by_enumeration(n, L):
    chart = random_chart(n, L, seed=n)
    trees = [(spans, labels) for spans in bracketings(0, n)
             for labels in itertools.product(range(L), repeat=len(spans)) if canonical(spans, labels)]
    log_z = np.logaddexp.reduce([sum(chart[i, j, lab] for (i, j), lab in zip(spans, labels))
                                 for spans, labels in trees])
    spans, labels = trees[len(trees) // 3]
    gold = [(i, j, lab) for (i, j), lab in zip(spans, labels)]
    loss, _ = crf_loss(chart, gold)
    assert loss == pytest.approx(log_z - sum(chart[i, j, lab] for i, j, lab in gold), abs=1e-10)


def hamming(spans, labels, gold):
    """Stern et al.'s (2017) cost, written out: the spans of a tree whose
    label is not the gold tree's label of that span (0 where gold has none)."""
    gold_label = {(i, j): lab for i, j, lab in gold}
    return sum(lab != gold_label.get((i, j), 0) for (i, j), lab in zip(spans, labels))


@pytest.mark.parametrize("n, L, margin", [(1, 3, 1.0), (3, 2, 0.5), (4, 3, 2.0), (4, 2, 1.0)])
def test_softmax_margin_is_its_sum_over_every_tree(n, L, margin):
    chart = random_chart(n, L, seed=10 + n)
    trees = [(spans, labels) for spans in bracketings(0, n)
             for labels in itertools.product(range(L), repeat=len(spans)) if canonical(spans, labels)]
    for spans, labels in (trees[len(trees) // 2], trees[-1]):
        gold = [(i, j, lab) for (i, j), lab in zip(spans, labels)]
        gold_score = sum(chart[i, j, lab] for i, j, lab in gold)
        augmented = np.logaddexp.reduce([sum(chart[i, j, lab] for (i, j), lab in zip(sp, lb))
                                         + margin * hamming(sp, lb, gold) for sp, lb in trees])
        loss, _ = crf_loss(chart, gold, margin)
        assert loss == pytest.approx(augmented - gold_score, abs=1e-10)
        # the cost only adds mass to wrong trees: the loss bounds the CRF's from above
        assert loss >= crf_loss(chart, gold)[0] - 1e-12
    assert crf_loss(chart, gold, 0.0)[0] == crf_loss(chart, gold)[0]


@pytest.mark.parametrize("n, seed", [(1, 0), (3, 1), (4, 2)])
def test_nbest_is_every_treebank_tree_once_with_its_crf_probability(n, seed):
    """Every labelled binary derivation, un-binarised, gives the treebank
    trees; the parser's k-best list over a random chart (empty-label scores
    random, not 0) holds each of them exactly once, with log p = the score of
    its left-factored spans - log Z, and their probabilities sum to 1."""
    names = ["", "A", "B"]
    chart = np.random.default_rng(seed).normal(size=(n, n + 1, len(names)))
    words, tags = [f"w{i}" for i in range(n)], ["T"] * n
    treebank = {to_bracketed(spans_to_tree(words, tags, [(i, j, names[lab]) for (i, j), lab in zip(spans, labels)]))
                for spans in bracketings(0, n) for labels in itertools.product(range(len(names)), repeat=len(spans))}
    scores = {text: sum(chart[i, j, names.index(lab)] for i, j, lab in tree_to_spans(parse_bracketed(text))[2])
              for text in treebank}
    log_z = np.logaddexp.reduce(list(scores.values()))
    parser = SpanParser(SpanCRF(**SMALL), SpanLabels(names), tags=["T"])
    result = parser._decode(words, tags, chart, k=len(treebank) + 3, with_forest=False)
    assert sorted(text for _, text in result.nbest) == sorted(treebank)
    for log_p, text in result.nbest:
        assert log_p == pytest.approx(scores[text] - log_z, abs=1e-9)
    assert np.exp([log_p for log_p, _ in result.nbest]).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("margin, seed", [(0.0, 7), (1.5, 8)])
def test_crf_loss_gradient_matches_finite_differences(margin, seed):
    """The CRF's gradient, and the softmax-margin's (margin > 0)."""
    n, L = 5, 3
    chart = random_chart(n, L, seed=seed)
    gold = [(0, 5, 1), (0, 2, 0), (0, 1, 2), (1, 2, 0), (2, 5, 1), (2, 3, 0), (3, 5, 2), (3, 4, 1), (4, 5, 0)]
    _, grad = crf_loss(chart, gold, margin)
    eps = 1e-6
    for i in range(n):
        for j in range(i + 1, n + 1):
            for lab in range(L):
                up, down = chart.copy(), chart.copy()
                up[i, j, lab] += eps
                down[i, j, lab] -= eps
                numeric = (crf_loss(up, gold, margin)[0] - crf_loss(down, gold, margin)[0]) / (2 * eps)
                assert numeric == pytest.approx(grad[i, j, lab], abs=1e-7)


def test_tag_loss_gradient_matches_finite_differences():
    logits = np.random.default_rng(3).normal(size=(4, 5))
    gold = [0, 4, 2, 2]
    loss, grad = tag_loss(logits, gold)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert loss == pytest.approx(-sum(log_p[r, g] for r, g in enumerate(gold)))
    eps = 1e-6
    for r in range(4):
        for c in range(5):
            up, down = logits.copy(), logits.copy()
            up[r, c] += eps
            down[r, c] -= eps
            assert (tag_loss(up, gold)[0] - tag_loss(down, gold)[0]) / (2 * eps) == pytest.approx(grad[r, c],
                                                                                             abs=1e-7)


@pytest.fixture(scope="module")
def short_trees():
    return [t for t in ptb_trees("train") if 3 <= len(t.leaves()) <= 12][:20]


@pytest.fixture(scope="module")
def trained(short_trees):
    fix_random_seed(0)
    parser = SpanParser.from_trees(short_trees, SpanCRF(**SMALL), batch_size=7)
    opt = Adam(5e-3)
    losses = []
    for epoch in range(60):
        losses.append(sum(parser.update(short_trees[b:b + 5], opt) for b in range(0, len(short_trees), 5)))
    return parser, losses


def test_a_tiny_model_learns_its_training_trees(trained, short_trees):
    parser, losses = trained
    assert losses[-1] < 0.05 * losses[0]
    results = parser.parse_many([t.leaves() for t in short_trees], with_forest=False)
    assert evalb(short_trees, [r.tree for r in results], EvalbParams(max_error=None)).all.f1 >= 97.0


def test_the_models_margin_turns_the_loss_into_the_softmax_margin(short_trees):
    fix_random_seed(1)
    parser = SpanParser.from_trees(short_trees, SpanCRF(**SMALL, margin=1.0))
    assert parser.model.attrs["margin"] == 1.0
    batch = short_trees[:4]
    docs = parser.docs([t.leaves() for t in batch])
    scores = parser.model.predict(docs)
    span_at, tag_at = scores.span_offsets(), scores.tag_offsets()
    expected = {0.0: 0.0, 1.0: 0.0}
    for b, tree in enumerate(batch):
        words, tags, spans = tree_to_spans(tree)
        chart = parser._chart(scores.spans[span_at[b]:span_at[b + 1]], len(words))
        gold = [(i, j, parser.labels.index(label)) for i, j, label in spans]
        tag_part = tag_loss(scores.tags[tag_at[b]:tag_at[b + 1]], [parser.tags.index(t) for t in tags])[0]
        for margin in expected:
            expected[margin] += crf_loss(chart, gold, margin)[0] + tag_part
    assert parser.update(batch) == pytest.approx(expected[1.0], rel=1e-6)
    parser.model.attrs["margin"] = 0.0
    assert parser.update(batch) == pytest.approx(expected[0.0], rel=1e-6) and expected[0.0] < expected[1.0]


def test_parse_many_equals_parsing_one_by_one(trained, short_trees):
    # a high forest threshold keeps the tiny model's (flat) forests small
    parser = SpanParser(trained[0].model, trained[0].labels, trained[0].tags, threshold=0.01, batch_size=4)
    sentences = [t.leaves() for t in short_trees[:9]]
    together = parser.parse_many(sentences, k=5)
    for words, batch in zip(sentences, together):
        alone = parser.parse(words, k=5)
        assert to_bracketed(alone.tree) == to_bracketed(batch.tree)
        assert [text for _, text in alone.nbest] == [text for _, text in batch.nbest]
        np.testing.assert_allclose([lp for lp, _ in alone.nbest], [lp for lp, _ in batch.nbest], atol=1e-4)
        assert alone.forest.n_edges == batch.forest.n_edges


def test_kbest_lists_distinct_trees_best_first_with_log_probabilities(trained, short_trees):
    parser, _ = trained
    # a low threshold: the trained tiny model is sure of its training sentences
    result = SpanParser(parser.model, parser.labels, parser.tags, threshold=1e-9).parse(short_trees[0].leaves(), k=10)
    logps = [lp for lp, _ in result.nbest]
    texts = [text for _, text in result.nbest]
    assert len(texts) == 10 and len(set(texts)) == 10
    assert logps == sorted(logps, reverse=True) and logps[0] <= 0.0
    assert np.exp(logps).sum() <= 1.0 + 1e-9
    assert result.log_prob == logps[0] and to_bracketed(result.tree) == texts[0]
    assert parse_bracketed(texts[0]).leaves() == short_trees[0].leaves()
    assert isinstance(result.forest, Forest) and not result.fallback


def test_the_forest_holds_every_kbest_tree(trained, short_trees):
    parser, _ = trained
    # A threshold that prunes most of the forest still leaves the 20 listed trees in it.
    parser = SpanParser(parser.model, parser.labels, parser.tags, threshold=0.2)
    dropped = 0
    for tree in short_trees[:5]:
        result = parser.parse(tree.leaves(), k=20)
        in_forest = {to_bracketed(t) for _, t in result.forest.trees(tree.leaves())}
        assert all(text in in_forest for _, text in result.nbest)
        # the forest of a 1-best parse keeps the Viterbi tree only: the threshold alone drops listed trees
        alone = {to_bracketed(t) for _, t in parser.parse(tree.leaves(), k=1).forest.trees(tree.leaves())}
        dropped += sum(text not in alone for _, text in result.nbest)
    assert dropped > 0
    fast = parser.parse(short_trees[0].leaves(), with_forest=False)
    assert fast.forest is None and len(fast.nbest) == 1


def test_round_trip_through_bytes_parses_identically(trained, short_trees):
    parser, _ = trained
    fresh = SpanParser(SpanCRF(**SMALL), SpanLabels(["", "S"]), ["NN"]).from_bytes(parser.to_bytes())
    assert fresh.labels == parser.labels and fresh.tags == parser.tags and fresh.batch_size == 7
    for tree in short_trees[:5]:
        a, b = (p.parse(tree.leaves(), k=3, with_forest=False) for p in (parser, fresh))
        assert a.nbest == b.nbest


def test_saved_weights_with_nan_are_refused(short_trees):
    """Bytes whose model holds a NaN weight (a diverged training, or crafted)
    are refused before anything loads: every score would be NaN."""
    import srsly

    from spacy_structpref.errors import SavedModelError

    msg = srsly.msgpack_loads(SpanParser.from_trees(short_trees[:3], SpanCRF(**SMALL)).to_bytes())
    weights = srsly.msgpack_loads(msg["model"])
    values = next(p for p in weights["params"] if p)
    name = next(iter(values))
    values[name] = values[name].copy()
    values[name].flat[0] = np.nan
    msg["model"] = srsly.msgpack_dumps(weights)
    fresh = SpanParser(SpanCRF(**SMALL), SpanLabels(["", "S"]), ["NN"])
    with pytest.raises(SavedModelError, match=f"{name} hold 1 NaN or infinite value"):
        fresh.from_bytes(srsly.msgpack_dumps(msg))


def test_sentences_over_max_length_get_the_flat_fallback(trained, short_trees):
    parser, _ = trained
    words = short_trees[0].leaves()
    capped = SpanParser(parser.model, parser.labels, parser.tags, max_length=len(words) - 1)
    result, ok = capped.parse_many([words, words[:len(words) - 1]], with_forest=False)
    assert result.fallback and result.fallback_reason == TOO_LONG and result.log_prob == float("-inf")
    assert result.forest is None and result.tree.leaves() == words
    assert [t.label() for t in result.tree] == ["S"] and result.tree[0].height() == 3
    assert not ok.fallback


def test_bad_input_is_refused(trained, short_trees):
    parser, _ = trained
    for sentences in ([[]], [["a", ""]]):
        with pytest.raises(StructPrefError):
            parser.parse_many(sentences)
    for k in (0, 1.5, True):
        with pytest.raises(StructPrefError):
            parser.parse(["a", "b"], k=k)
    with pytest.raises(StructPrefError, match="at least one tree"):
        parser.update([])
    with pytest.raises(StructPrefError, match="unknown tag"):
        parser.update([parse_bracketed("(TOP (S (NP (XYZ a)) (VP (VBZ b))))")])
    with pytest.raises(StructPrefError, match="unknown span label"):
        parser.update([parse_bracketed("(TOP (S (QQ (DT a)) (VP (VBZ b))))")])
    for settings in (dict(threshold=1.5), dict(max_length=0), dict(batch_size=0), dict(samples=-1),
                     dict(samples=1.5)):
        with pytest.raises(StructPrefError):
            SpanParser(parser.model, parser.labels, parser.tags, **settings)
    with pytest.raises(StructPrefError, match="tags"):
        SpanParser(parser.model, parser.labels, parser.tags[:-1])
    with pytest.raises(SavedModelError):
        SpanParser(SpanCRF(**SMALL), parser.labels, parser.tags).from_bytes(b"not msgpack")
    fix_random_seed(5)
    other = SpanParser.from_trees(short_trees[:3], SpanCRF(**SMALL))
    with pytest.raises(SavedModelError, match="new model"):
        other.from_bytes(parser.to_bytes())


def every_tree(chart):
    """``{sorted spans: S(T)}`` of every labelled tree of a small chart, by
    enumerating its k best with k above their number."""
    return {tuple(sorted(spans)): score for score, spans in span_chart.kbest(chart, 10 ** 6)}


@pytest.mark.parametrize("n, L, k, seed", [(3, 3, 6, 0), (4, 2, 10, 1), (4, 3, 7, 2), (2, 2, 50, 3)])
def test_a_sampled_list_keeps_the_charts_best_half_and_scores_every_tree_exactly(n, L, k, seed):
    chart = random_chart(n, L, seed)
    samples = [chart + random_chart(n, L, seed * 10 + s) for s in range(3)]
    everything = every_tree(chart)
    listed = span_chart.kbest(chart, k)
    got = sampled_list(chart, listed, samples, k)
    keys = [tuple(sorted(spans)) for _, spans in got]
    assert len(keys) == min(k, len(everything)) and len(set(keys)) == len(keys)
    for score, key in zip([score for score, _ in got], keys):
        assert score == pytest.approx(everything[key]) == pytest.approx(tree_score(chart, list(key)))
    assert [score for score, _ in got] == sorted((score for score, _ in got), reverse=True)
    assert {tuple(sorted(spans)) for _, spans in listed[:max(1, k // 2)]} <= set(keys)
    # the rest come from the samples' lists, in turn, before the chart's own next trees
    pools = [[tuple(sorted(spans)) for _, spans in span_chart.kbest(c, k)] for c in samples]
    from_samples = set().union(*pools)
    rest = [key for key in keys if key not in {tuple(sorted(sp)) for _, sp in listed[:max(1, k // 2)]}]
    if len(from_samples) >= k:
        assert set(rest) <= from_samples


def test_a_list_sampled_from_the_chart_itself_is_its_k_best():
    chart = random_chart(4, 3, 4)
    listed = span_chart.kbest(chart, 12)
    got = sampled_list(chart, listed, [chart, chart], 12)
    assert [tuple(sorted(spans)) for _, spans in got] == [tuple(sorted(spans)) for _, spans in listed]
    np.testing.assert_allclose([score for score, _ in got], [score for score, _ in listed])


@pytest.fixture(scope="module")
def with_dropout(short_trees):
    fix_random_seed(2)
    parser = SpanParser.from_trees(short_trees, SpanCRF(**{**SMALL, "dropout": 0.3}), batch_size=4)
    opt = Adam(5e-3)
    for epoch in range(8):
        for b in range(0, len(short_trees), 5):
            parser.update(short_trees[b:b + 5], opt)
    # a high threshold: the forests of a little-trained model are large, and the test enumerates them
    return SpanParser(parser.model, parser.labels, parser.tags, threshold=0.5, batch_size=4, samples=4)


def test_dropout_samples_add_trees_scored_under_the_model_without_dropout(with_dropout, short_trees):
    parser = with_dropout
    plain = SpanParser(parser.model, parser.labels, parser.tags, threshold=0.5, batch_size=4)
    state = np.random.get_state()[1].copy()
    new = 0
    for tree in short_trees[:6]:
        words = tree.leaves()
        got, own = parser.parse(words, k=8), plain.parse(words, k=8)
        assert got.nbest[0] == own.nbest[0] and got.log_prob == own.log_prob
        assert [text for _, text in got.nbest[:4]] == [text for _, text in own.nbest[:4]]
        texts = [text for _, text in got.nbest]
        assert len(texts) == 8 and len(set(texts)) == 8
        assert [lp for lp, _ in got.nbest] == sorted((lp for lp, _ in got.nbest), reverse=True)
        # each tree's log p, recomputed from its bracketed text under the model without dropout
        chart = parser._chart(parser.model.predict(parser.docs([words])).spans, len(words))
        log_z = span_chart.log_partition(chart)
        for log_p, text in got.nbest:
            spans = [(i, j, parser.labels.index(label)) for i, j, label in tree_to_spans(parse_bracketed(text))[2]]
            assert log_p == pytest.approx(tree_score(chart, spans) - log_z, abs=1e-4)
        in_forest = {to_bracketed(t) for _, t in got.forest.trees(words)}
        assert set(texts) <= in_forest
        new += len(set(texts) - {text for _, text in own.nbest})
    assert new > 0
    assert (np.random.get_state()[1] == state).all()  # numpy's generator left as it was


def test_sampled_lists_are_the_same_alone_in_any_batch_and_after_a_save(with_dropout, short_trees):
    parser = with_dropout
    sentences = [t.leaves() for t in short_trees[:7]]
    together = parser.parse_many(sentences, k=6, with_forest=False)
    reversed_ = parser.parse_many(sentences[::-1], k=6, with_forest=False)[::-1]
    fresh = SpanParser(SpanCRF(**{**SMALL, "dropout": 0.3}), SpanLabels(["", "S"]), ["NN"])
    fresh.from_bytes(parser.to_bytes())
    assert fresh.samples == 4
    for words, a, b in zip(sentences, together, reversed_):
        alone = parser.parse(words, k=6, with_forest=False)
        loaded = fresh.parse(words, k=6, with_forest=False)
        for other in (b, alone, loaded):
            assert [text for _, text in other.nbest] == [text for _, text in a.nbest]
            np.testing.assert_allclose([lp for lp, _ in other.nbest], [lp for lp, _ in a.nbest], atol=1e-4)


@pytest.fixture(scope="module")
def ensemble(trained, short_trees):
    """The trained parser (weight 3) with an untrained-looking one of fewer
    labels and tags (weight 1)."""
    fix_random_seed(3)
    other = SpanParser.from_trees(short_trees[:4], SpanCRF(**SMALL))
    assert len(other.labels) < len(trained[0].labels) and len(other.tags) < len(trained[0].tags)
    return SpanParser.ensemble([trained[0], other], [3.0, 1.0]), other


def test_an_ensembles_chart_is_the_weighted_mean_of_its_members_charts_by_label(trained, ensemble, short_trees):
    parser, _ = trained
    ens, other = ensemble
    assert ens.labels == parser.labels and ens.tags == parser.tags
    for tree in short_trees[:4]:
        words = tree.leaves()
        charts = [p._chart(p.model.predict(p.docs([words])).spans, len(words)) for p in (parser, other)]
        expected = charts[0].copy()
        for c, label in enumerate(parser.labels.labels[1:], start=1):
            if label in other.labels:
                expected[:, :, c] = (3 * charts[0][:, :, c] + charts[1][:, :, other.labels.index(label)]) / 4
        got = ens._chart(ens.model.predict(ens.docs([words])).spans, len(words))
        i, j = np.triu_indices(len(words), 1, len(words) + 1)
        np.testing.assert_allclose(got[i, j], expected[i, j], rtol=1e-5, atol=1e-5)
        result = ens.parse(words, k=3, with_forest=False)
        best = span_chart.kbest(expected, 3)
        log_z = span_chart.log_partition(expected)
        np.testing.assert_allclose([lp for lp, _ in result.nbest], [s - log_z for s, _ in best], atol=1e-3)


def test_an_ensembles_dropout_sample_is_the_mean_of_its_members_samples(with_dropout, trained, short_trees):
    from spacy_structpref.models.span_ensemble import dropout_scores

    ens = SpanParser.ensemble([with_dropout, trained[0]], [1.0, 1.0])
    words = short_trees[0].leaves()
    docs = ens.docs([words])
    np.random.seed(11)
    got = ens._chart(dropout_scores(ens.model, docs).spans, len(words))
    np.random.seed(11)
    members = [p._chart(dropout_scores(p.model, docs).spans, len(words)) for p in (with_dropout, trained[0])]
    assert not np.allclose(got, ens._chart(ens.model.predict(docs).spans, len(words)))  # dropout was on
    i, j = np.triu_indices(len(words), 1, len(words) + 1)
    assert ens.labels == trained[0].labels == with_dropout.labels  # both trained on short_trees
    np.testing.assert_allclose(got[i, j], (members[0][i, j] + members[1][i, j]) / 2, rtol=1e-5, atol=1e-5)
    ens.samples = 3
    result = ens.parse(words, k=6, with_forest=False)
    assert len({text for _, text in result.nbest}) == 6 and result.nbest[0][1] == to_bracketed(ens.parse(
        words, k=1, with_forest=False).tree)


def test_a_saved_ensemble_parses_as_before_and_is_not_trained(trained, ensemble, short_trees):
    ens, _ = ensemble
    fresh = SpanParser(SpanCRFEnsemble(SpanCRF(**SMALL), SpanCRF(**SMALL)), SpanLabels(["", "S"]), ["NN"])
    fresh.from_bytes(ens.to_bytes())
    for tree in short_trees[:4]:
        a, b = (p.parse(tree.leaves(), k=3, with_forest=False) for p in (ens, fresh))
        assert a.nbest == b.nbest
    with pytest.raises(StructPrefError, match="not trained"):
        ens.update(short_trees[:2])
    with pytest.raises(StructPrefError, match="assembled from trained"):
        SpanParser.from_trees(short_trees[:3], SpanCRFEnsemble(SpanCRF(**SMALL), SpanCRF(**SMALL)))
    with pytest.raises(StructPrefError, match="at least two"):
        SpanParser.ensemble([trained[0]])
    with pytest.raises(StructPrefError, match="single SpanCRF"):
        SpanParser.ensemble([trained[0], ens])
    with pytest.raises(StructPrefError, match="trained span parsers"):
        SpanParser.ensemble([trained[0], SpanParser(SpanCRF(**SMALL), trained[0].labels, trained[0].tags)])


@pytest.mark.gpu
@pytest.mark.skipif(not has_cupy_gpu, reason="needs cupy and a GPU")
def test_on_a_gpu_training_and_parsing_follow_the_cpu(short_trees):
    """The same parser with its model on cupy: the same losses step by step
    (the tree CRF runs on the host) and the same best-tree probabilities."""
    fix_random_seed(0)
    cpu = SpanParser.from_trees(short_trees, SpanCRF(**SMALL), batch_size=7)
    model = SpanCRF(**SMALL)
    SpanParser(model, cpu.labels, cpu.tags).model.initialize(X=cpu.docs([short_trees[0].leaves()]))
    model.from_bytes(cpu.model.to_bytes())  # not Model.copy(): it drops the references the forward pass reads
    model.to_gpu(0)
    gpu = SpanParser(model, cpu.labels, cpu.tags, batch_size=7)
    losses = {}
    for name, parser in (("cpu", cpu), ("gpu", gpu)):
        opt = Adam(5e-3)
        losses[name] = [parser.update(short_trees[b:b + 5], opt) for b in range(0, 20, 5)]
    np.testing.assert_allclose(losses["gpu"], losses["cpu"], rtol=1e-3)
    sentences = [t.leaves() for t in short_trees[:6]]
    best = [[r.log_prob for r in parser.parse_many(sentences, k=3)] for parser in (cpu, gpu)]
    np.testing.assert_allclose(best[1], best[0], atol=1e-2)


class _PerDeviceGenerator:
    """numpy's RandomState behind cupy.random's documented interface (one
    generator object per device: get_random_state, set_random_state and
    the RandomState class), to test the swap without a GPU."""
    RandomState = np.random.RandomState

    def __init__(self, seed):
        self.current = np.random.RandomState(seed)

    def get_random_state(self):
        return self.current

    def set_random_state(self, state):
        self.current = state

    def uniform(self, *args):
        return self.current.uniform(*args)


def test_a_seeded_block_draws_the_seeds_numbers_and_gives_numpys_generator_back():
    np.random.seed(11)
    expected_after = np.random.RandomState(11).uniform(size=3)
    with seeded_generator(np.random, 5):
        inside = np.random.uniform(size=4)
    np.testing.assert_array_equal(inside, np.random.RandomState(5).uniform(size=4))
    np.testing.assert_array_equal(np.random.uniform(size=3), expected_after)


def test_a_seeded_block_swaps_a_per_device_generator_and_puts_the_callers_back():
    random = _PerDeviceGenerator(11)
    callers = random.get_random_state()
    expected_after = np.random.RandomState(11).uniform(size=3)
    with seeded_generator(random, 5):
        inside = random.uniform(0.0, 1.0, 4)
        assert random.get_random_state() is not callers
    np.testing.assert_array_equal(inside, np.random.RandomState(5).uniform(0.0, 1.0, 4))
    assert random.get_random_state() is callers
    np.testing.assert_array_equal(random.uniform(0.0, 1.0, 3), expected_after)
    with pytest.raises(ValueError), seeded_generator(random, 6):
        raise ValueError("a failing block")
    assert random.get_random_state() is callers


@pytest.mark.gpu
@pytest.mark.skipif(not has_cupy_gpu, reason="needs cupy and a GPU")
def test_on_a_gpu_a_seeded_block_leaves_cupys_generator_where_it_was():
    import cupy

    cupy.random.seed(11)
    expected_after = cupy.random.RandomState(11).uniform(0.0, 1.0, 3)
    with seeded_generator(cupy.random, 5):
        inside = cupy.random.uniform(0.0, 1.0, 4)
    cupy.testing.assert_array_equal(inside, cupy.random.RandomState(5).uniform(0.0, 1.0, 4))
    cupy.testing.assert_array_equal(cupy.random.uniform(0.0, 1.0, 3), expected_after)
