"""A neural span-CRF constituency parser: the :func:`~..models.span_crf.SpanCRF`
scorer under a tree CRF over labelled binary span trees (Stern, Andreas &
Klein 2017; Kitaev & Klein 2018; the CRF loss of Zhang, Zhou & Li 2020).

With the scorer's span scores ``s(i, j, l)`` (the empty label at 0), a
treebank tree T of a sentence x, as its left-factored binary span tree
(:func:`.span_trees.tree_to_spans`), has probability
``p(T | x) = exp(Σ_{(i,j,l) ∈ T} s(i, j, l)) / Z(x)`` (Zhang et al. 2020,
eq. 6-7), Z summing over the canonical binary trees of
:mod:`.span_chart`, which are the treebank trees one to one. Training
minimises ``-log p(T_gold | x)``, whose gradient with respect to
``s(i, j, l)`` is the span marginal minus the gold indicator (Eisner 2016),
plus the cross-entropy of the tagging head, which supplies the preterminals
(never the gold tags).

The 1-best tree is the chart's CKY tree, the k best come from lazy k-best
over the chart (Huang & Chiang 2005), each with its exact ``log p`` under the
predicted tags, and the forest is the posterior-pruned
:func:`.span_chart.span_forest` that keeps the k best trees' hyperedges
(so a reranker's candidates are all in it). The results are
:class:`~.parser.ParseResult` as the PCFG parser gives them.
"""
import itertools
import zlib
from contextlib import contextmanager
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import spacy
import srsly
from nltk.tree import Tree
from spacy.tokens import Doc
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer

from ..errors import SavedModelError, StructPrefError, check_count
from ..models.span_crf import SpanCRF, SpanCRFScores, span_index
from ..models.span_ensemble import ENSEMBLE, assemble, dropout_scores, is_trained, tag_logits
from ..models.weights import check_finite_weights, message_weights
from ..saving import load_errors
from ..trees.arrays import SymbolTable
from . import span_chart
from .parser import TOO_LONG, ParseResult, fallback_result
from .span_trees import BracketWriter, SpanLabels, spans_to_tree, tree_to_spans


def tree_score(chart: np.ndarray, spans: Sequence[Tuple[int, int, int]]) -> float:
    """``S(T)``: the sum of the chart's scores of the tree's labelled spans."""
    i, j, label = np.asarray(spans, dtype=np.int64).T
    return float(chart[i, j, label].sum())


def crf_loss(chart: np.ndarray, gold: Sequence[Tuple[int, int, int]],
             margin: float = 0.0) -> Tuple[float, np.ndarray]:
    """``(-log p(T_gold), gradient)`` of the tree CRF for one sentence's
    chart scores ``(n, n + 1, L)`` and the gold tree's spans ``(i, j, label
    id)``: the gradient is the label marginals minus the gold indicators
    (Eisner 2016; Zhang, Zhou & Li 2020, eq. 7).

    With ``margin`` c > 0 the loss is the softmax-margin (Gimpel & Smith
    2010, eq. 4): ``log Σ_T exp(S(T) + c·Δ(T)) − S(T_gold)``, Δ the Hamming
    cost of Stern, Andreas & Klein (2017, §4): the spans of T whose label
    differs from the gold tree's label of that span (the empty label where
    the gold tree has no constituent). Δ adds up over spans, so it is the
    same inside algorithm on scores raised by c where a label is wrong; the
    gradient is the marginals under those scores minus the gold indicators."""
    i, j, label = (np.array(x, dtype=np.int64) for x in zip(*gold))
    if margin:
        cost = np.full(chart.shape, float(margin))
        cost[:, :, 0] = 0.0
        constituent = label != 0
        cost[i[constituent], j[constituent], 0] = margin  # an empty label where the gold tree has a constituent
        cost[i, j, label] = 0.0
        log_z, mu = span_chart.marginals(chart + cost)
    else:
        log_z, mu = span_chart.marginals(chart)
    mu[i, j, label] -= 1.0
    return log_z - tree_score(chart, gold), mu


def sampled_list(chart: np.ndarray, listed, sampled: Sequence[np.ndarray], k: int):
    """A k-best list that keeps the first ``k // 2`` (at least one) of
    ``listed`` (the chart's k best, ``(S(T), spans)``) and fills the rest
    with distinct trees taken in turn from the k-best lists of the
    ``sampled`` charts (every sample's best, then every sample's second,
    ...), then, should they run out, from the rest of ``listed``; each tree
    scored under ``chart``, best first (the chart's best stays first)."""
    kept = [spans for _, spans in listed[:max(1, k // 2)]]
    seen = {tuple(sorted(spans)) for spans in kept}
    pools = [[spans for _, spans in span_chart.kbest(c, k)] for c in sampled]
    in_turn = (pool[rank] for rank in range(k) for pool in pools if rank < len(pool))
    for spans in itertools.chain(in_turn, (spans for _, spans in listed[len(kept):])):
        if len(kept) == k:
            break
        key = tuple(sorted(spans))
        if key not in seen:
            seen.add(key)
            kept.append(spans)
    return sorted(((tree_score(chart, spans), spans) for spans in kept), key=lambda x: -x[0])


def tag_loss(logits, gold: Sequence[int]) -> Tuple[float, np.ndarray]:
    """``(cross-entropy, gradient)`` of a softmax over tag logits (n, tags)
    against the gold tag ids: the gradient is ``softmax - one-hot``."""
    logits = np.asarray(logits, dtype=np.float64)
    rows = np.arange(len(gold))
    log_p = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    grad = np.exp(log_p)
    grad[rows, gold] -= 1.0
    return -float(log_p[rows, gold].sum()), grad


@contextmanager
def seeded_generator(random, seed: int) -> Iterator[None]:
    """Run the block with the backend's global generator (``numpy.random``
    or ``cupy.random``, whose draws Thinc's dropout masks take) seeded by
    ``seed``, and give the caller's generator back unchanged afterwards:
    numpy's state is saved and restored; cupy keeps one generator object
    per device, which is swapped for a freshly seeded one and put back."""
    if hasattr(random, "set_random_state"):  # cupy
        saved, restore = random.get_random_state(), random.set_random_state
        random.set_random_state(random.RandomState(seed))
    else:
        saved, restore = random.get_state(), random.set_state
        random.seed(seed)
    try:
        yield
    finally:
        restore(saved)


class SpanParser:
    """Span-CRF parser over a ``SpanCRF`` model.

    ``labels``: the span label vocabulary (``nO`` of the model), ``tags``: the
    tag set of the tagging head (``nT``); ``vocab``: the spaCy vocabulary the
    words' lexical features come from (default: a blank English one, named by
    ``lang`` when saved); ``symbols``: the table its forests' labels are
    interned in; ``threshold``: forest hyperedges whose posterior is
    below it are pruned; ``max_length``: longer sentences get the flat
    fallback tree (the chart's time grows with the cube of the length, its
    memory with the square; None: no bound); ``batch_size``: sentences per
    forward pass in :meth:`parse_many`; ``samples``: with S > 0, a k-best
    list keeps the model's k // 2 best trees and fills the rest from the
    k-best lists of S forward passes with the training dropout on (Monte
    Carlo dropout, Gal & Ghahramani 2016: a free ensemble, whose lists hold
    the gold tree more often than the model's own k best), every tree
    scored by its exact ``log p`` under the model without dropout."""

    def __init__(self, model: Model, labels: SpanLabels, tags: Sequence[str], vocab: Optional[Vocab] = None,
                 threshold: float = 1e-5, max_length: Optional[int] = None, batch_size: int = 64,
                 samples: int = 0):
        if not isinstance(labels, SpanLabels):
            raise StructPrefError(f"labels must be SpanLabels, got {type(labels).__name__}")
        tags = tuple(tags)
        if not tags or not all(isinstance(t, str) and t for t in tags) or len(set(tags)) != len(tags):
            raise StructPrefError(f"tags must be distinct non-empty strings, got {tags[:5]!r}")
        if not isinstance(threshold, (int, float)) or not 0 <= threshold < 1:
            raise StructPrefError(f"threshold must lie in [0, 1), got {threshold!r}")
        if max_length is not None:
            check_count("max_length (None: no bound)", max_length, 1)
        check_count("batch_size", batch_size, 1)
        check_count("samples", samples, 0)
        self.model, self.labels, self.tags = model, labels, tags
        self.vocab = vocab if vocab is not None else spacy.blank("en").vocab
        self.threshold, self.max_length, self.batch_size = threshold, max_length, batch_size
        self.samples = samples
        self._tag_index = {t: i for i, t in enumerate(tags)}
        # one table for all of this parser's forests, as the PCFG parser's, so that they can be compared
        self.symbols = SymbolTable()
        self._set_dims()

    @classmethod
    def from_trees(cls, trees: Sequence[Tree], model: Optional[Model] = None, **settings) -> "SpanParser":
        """A parser whose labels and tags are those of ``trees`` (TOP-rooted
        treebank trees), its model (default: ``SpanCRF()``) initialized on them."""
        trees = list(trees)
        if not trees:
            raise StructPrefError("a span parser needs at least one training tree")
        tags = sorted({tag for tree in trees for _, tag in tree.pos()})
        parser = cls(model if model is not None else SpanCRF(), SpanLabels.from_trees(trees), tags, **settings)
        parser.model.initialize(X=parser.docs([tree.leaves() for tree in trees[:64]]))
        return parser

    @classmethod
    def ensemble(cls, parsers: Sequence["SpanParser"], weights: Optional[Sequence[float]] = None) -> "SpanParser":
        """A parser whose model is the ensemble of the trained ``parsers``'
        models (:mod:`..models.span_ensemble`: span scores and tag
        log-probabilities averaged with ``weights``), in the first parser's
        labels, tags, vocabulary (the members read its static vectors) and
        settings; a label or tag only other members know is left out. The
        members are the parsers' models themselves, not copies."""
        parsers = list(parsers)
        if len(parsers) < 2:
            raise StructPrefError(f"an ensemble needs at least two span parsers, got {len(parsers)}")
        for p in parsers:
            if not isinstance(p, SpanParser) or p.model.name == ENSEMBLE:
                raise StructPrefError("an ensemble's members must be span parsers of single SpanCRF models, got "
                                      f"{getattr(getattr(p, 'model', None), 'name', type(p).__name__)!r}")
            if not is_trained(p.model):
                raise StructPrefError("an ensemble's members must be trained span parsers")
        first = parsers[0]
        label_maps = [[p.labels.index(label) - 1 if label in p.labels else -1 for label in first.labels.labels[1:]]
                      for p in parsers]
        tag_maps = [[p._tag_index.get(tag, -1) for tag in first.tags] for p in parsers]
        model = assemble([p.model for p in parsers], label_maps, tag_maps, weights)
        return cls(model, first.labels, first.tags, vocab=first.vocab, threshold=first.threshold,
                   max_length=first.max_length, batch_size=first.batch_size, samples=first.samples)

    def _set_dims(self) -> None:
        for dim, value in (("nO", len(self.labels)), ("nT", len(self.tags))):
            if self.model.has_dim(dim) and self.model.get_dim(dim) != value:
                raise StructPrefError(f"the model's {dim} is {self.model.get_dim(dim)}, the parser has {value} "
                                      f"{'span labels' if dim == 'nO' else 'tags'}")
            self.model.set_dim(dim, value)

    def docs(self, sentences: Sequence[Sequence[str]]) -> List[Doc]:
        out = []
        for words in sentences:
            words = [str(w) for w in words]
            if not words or not all(words):
                raise StructPrefError(f"cannot parse {words!r}: a sentence needs words, each a non-empty string")
            out.append(Doc(self.vocab, words=words))
        return out

    # --------------------------------------------------------------- training
    def update(self, trees: Sequence[Tree], sgd: Optional[Optimizer] = None) -> float:
        """One gradient step on a batch of gold trees: returns the summed loss
        ``Σ -log p(T_gold) + tag cross-entropy`` (the softmax-margin in place
        of ``-log p`` when the model's ``margin`` is above 0; the gradient is
        the batch mean); with ``sgd`` the optimizer is applied."""
        gold = [tree_to_spans(tree) for tree in trees]
        if not gold:
            raise StructPrefError("update needs at least one tree")
        scores, backprop = self.model.begin_update(self.docs([words for words, _, _ in gold]))
        scores = scores.on_host(self.model.ops)
        d_spans = np.zeros(scores.spans.shape, dtype=np.float32)
        d_tags = np.zeros(scores.tags.shape, dtype=np.float32)
        span_at, tag_at = scores.span_offsets(), scores.tag_offsets()
        loss, margin = 0.0, self.model.attrs.get("margin", 0.0)
        for b, (words, tags, spans) in enumerate(gold):
            n = len(words)
            chart = self._chart(scores.spans[span_at[b]:span_at[b + 1]], n)
            span_loss, d_chart = crf_loss(chart, [(i, j, self.labels.index(label)) for i, j, label in spans], margin)
            d_spans[span_at[b]:span_at[b + 1]] = d_chart[span_index(n)][:, 1:]
            logits = scores.tags[tag_at[b]:tag_at[b + 1]]
            t_loss, d_tags[tag_at[b]:tag_at[b + 1]] = tag_loss(logits, [self._tag_id(t) for t in tags])
            loss += span_loss + t_loss
        scale = 1.0 / len(gold)
        backprop(SpanCRFScores(d_spans * scale, d_tags * scale, scores.lengths))
        if sgd is not None:
            self.model.finish_update(sgd)
        return loss

    def _tag_id(self, tag: str) -> int:
        try:
            return self._tag_index[tag]
        except KeyError:
            raise StructPrefError(f"unknown tag {tag!r}: the parser's tags are {', '.join(self.tags[:8])}, ...") \
                from None

    def _chart(self, span_scores, n: int) -> np.ndarray:
        """The chart's ``(n, n + 1, L)`` float64 scores: the model's rows in
        :func:`span_index` order, the empty label at 0."""
        chart = np.zeros((n, n + 1, len(self.labels)))
        i, j = span_index(n)
        chart[i, j, 1:] = span_scores
        return chart

    # ---------------------------------------------------------------- parsing
    def parse(self, words: Sequence[str], k: int = 1, with_forest: bool = True) -> ParseResult:
        """Best tree, the k best trees with their log-probabilities and the
        pruned forest; a flat fallback tree (``fallback=True``, reason "too
        long") for a sentence longer than ``max_length``."""
        return self.parse_many([words], k=k, with_forest=with_forest)[0]

    def parse_many(self, sentences: Sequence[Sequence[str]], k: int = 1,
                   with_forest: bool = True) -> List[ParseResult]:
        """:meth:`parse` of each sentence, the model run on ``batch_size``
        sentences at a time."""
        check_count("k", k, 1)
        docs = self.docs(sentences)
        out: List[Optional[ParseResult]] = [None] * len(docs)
        long = [b for b, doc in enumerate(docs) if self.max_length is not None and len(doc) > self.max_length]
        if long:
            logits = tag_logits(self.model, [docs[b] for b in long])
            for b, x in zip(long, logits):
                out[b] = self._fallback(docs[b], self.model.ops.to_numpy(x))
        todo = [b for b, doc in enumerate(docs) if out[b] is None]
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            scores = self.model.predict([docs[b] for b in batch]).on_host(self.model.ops)
            span_at, tag_at = scores.span_offsets(), scores.tag_offsets()
            for x, b in enumerate(batch):
                words = [t.text for t in docs[b]]
                chart = self._chart(scores.spans[span_at[x]:span_at[x + 1]], len(words))
                tags = [self.tags[t] for t in scores.tags[tag_at[x]:tag_at[x + 1]].argmax(axis=1).tolist()]
                sampled = self._sampled_charts(docs[b]) if self.samples and k > 1 else []
                out[b] = self._decode(words, tags, chart, k, with_forest, sampled)
        return out

    def _sampled_charts(self, doc: Doc) -> List[np.ndarray]:
        """The charts of ``samples`` forward passes over the sentence with
        dropout on, in one batch of copies; the masks are drawn from the
        backend's generator seeded by the words, so that a sentence gets the
        same list alone or in any batch."""
        with seeded_generator(self.model.ops.xp.random, zlib.crc32("\x1f".join(t.text for t in doc).encode("utf8"))):
            scores = dropout_scores(self.model, [doc] * self.samples).on_host(self.model.ops)
        span_at = scores.span_offsets()
        return [self._chart(scores.spans[span_at[s]:span_at[s + 1]], len(doc)) for s in range(self.samples)]

    def _decode(self, words: List[str], tags: List[str], chart: np.ndarray, k: int,
                with_forest: bool, sampled: Sequence[np.ndarray] = ()) -> ParseResult:
        log_z = span_chart.log_partition(chart)
        labels = self.labels.labels
        listed = span_chart.kbest(chart, k)
        if sampled:
            listed = sampled_list(chart, listed, sampled, k)
        named = [[(i, j, labels[lab]) for i, j, lab in spans] for _, spans in listed]  # the 1-best first
        writer = BracketWriter(words, tags)
        # the forest keeps the listed trees (the first too: on ties it need not be the Viterbi tree the
        # forest keeps anyway), so that a reranker's candidates are all in it
        forest = span_chart.span_forest(chart, self.labels, words, tags, self.threshold, symbols=self.symbols,
                                        keep=[spans for _, spans in listed]) if with_forest else None
        return ParseResult(words, spans_to_tree(words, tags, named[0]), listed[0][0] - log_z, forest,
                           [(score - log_z, writer.write(spans)) for (score, _), spans in zip(listed, named)], False)

    def _fallback(self, doc: Doc, logits) -> ParseResult:
        return fallback_result([t.text for t in doc], [self.tags[t] for t in logits.argmax(axis=1).tolist()],
                               TOO_LONG)

    # ------------------------------------------------------------ serialising
    def to_bytes(self) -> bytes:
        return srsly.msgpack_dumps({
            "model": self.model.to_bytes(), "labels": self.labels.to_dict(), "tags": list(self.tags),
            "lang": self.vocab.lang, "threshold": self.threshold, "max_length": self.max_length,
            "batch_size": self.batch_size, "samples": self.samples})

    def from_bytes(self, data: bytes) -> "SpanParser":
        """Load what :meth:`to_bytes` wrote into this parser, whose model
        must have the saved model's architecture and be either uninitialized
        or of the saved label and tag counts."""
        with load_errors("a span parser"):
            msg = srsly.msgpack_loads(data)
            labels, tags = SpanLabels.from_dict(msg["labels"]), tuple(msg["tags"])
            settings = {key: msg[key] for key in ("threshold", "max_length", "batch_size")}
            settings["samples"] = msg.get("samples", 0)  # saves from before the setting list without samples
            vocab = self.vocab if self.vocab.lang == msg["lang"] else spacy.blank(msg["lang"]).vocab
            initialized = is_trained(self.model)
            for dim, value in (("nO", len(labels)), ("nT", len(tags))):
                if self.model.get_dim(dim) != value:
                    if initialized:
                        raise SavedModelError(f"cannot load a span parser of {value} {dim} into an initialized "
                                              f"model of {self.model.get_dim(dim)}: load into a new model")
                    self.model.set_dim(dim, value, force=True)
            check_finite_weights("the span parser", message_weights(srsly.msgpack_loads(msg["model"])))
            self.model.from_bytes(msg["model"])
        SpanParser.__init__(self, self.model, labels, tags, vocab=vocab, **settings)
        return self
