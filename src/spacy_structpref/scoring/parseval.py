"""PARSEVAL scoring equivalent to EVALB with its standard parameter file
(``COLLINS.prm``):

- preterminals (POS tags) are not brackets; words tagged with a punctuation
  tag (`` '' . : ,) are deleted before bracket spans are computed, and a
  bracket left without words is dropped;
- brackets labelled TOP (the root added for PTB's outer bracket) or -NONE-
  are not counted;
- ADVP and PRT count as the same label;
- brackets are a multiset: a unary chain X → X gives two brackets, and each
  gold bracket matches at most one test bracket;
- the length cut-off (≤ 40) counts every word except -NONE- ones;
- a test bracket crosses the gold tree when it overlaps some gold bracket
  without nesting; crossing is unlabelled.
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from nltk.tree import Tree
from spacy.util import registry

from ..errors import StructPrefError

Bracket = Tuple[str, int, int]


@dataclass(frozen=True)
class EvalbParams:
    delete_labels: Tuple[str, ...] = ("TOP", "-NONE-", "")
    delete_preterminals: Tuple[str, ...] = (",", ":", "``", "''", ".")
    delete_for_length: Tuple[str, ...] = ("-NONE-",)
    equal_labels: Tuple[Tuple[str, str], ...] = (("PRT", "ADVP"),)
    cutoff_length: int = 40


COLLINS = EvalbParams()


@dataclass
class SentenceStats:
    length: int
    gold: int
    test: int
    matched: int
    crossing: int
    words: int
    tags_correct: int


def brackets(tree: Tree, params: EvalbParams = COLLINS) -> Tuple[List[Bracket], List[Tuple[str, str]]]:
    """EVALB's brackets of a tree and its (word, tag) preterminals."""
    equal = dict(params.equal_labels)
    out: List[Bracket] = []
    leaves: List[Tuple[str, str]] = []

    def walk(node, pos: int) -> int:
        if len(node) == 1 and not isinstance(node[0], Tree):
            leaves.append((node[0], node.label()))
            return pos if node.label() in params.delete_preterminals else pos + 1
        start = pos
        for kid in node:
            if not isinstance(kid, Tree):
                raise StructPrefError(f"word {kid!r} under {node.label()!r} has no preterminal")
            pos = walk(kid, pos)
        label = node.label()
        if label not in params.delete_labels and pos > start:
            out.append((equal.get(label, label), start, pos))
        return pos

    if not isinstance(tree, Tree):
        raise StructPrefError(f"expected an nltk.Tree, got {type(tree).__name__}")
    walk(tree, 0)
    return out, leaves


def _crossing(test: Sequence[Bracket], gold: Sequence[Bracket]) -> int:
    n = 0
    for _, ts, te in test:
        for _, gs, ge in gold:
            if (gs < ts < ge < te) or (ts < gs < te < ge):
                n += 1
                break
    return n


def sentence_stats(gold: Tree, test: Optional[Tree], params: EvalbParams = COLLINS) -> SentenceStats:
    """Counts for one sentence. ``test=None`` (no parse) scores no brackets."""
    gold_br, gold_leaves = brackets(gold, params)
    length = sum(1 for _, tag in gold_leaves if tag not in params.delete_for_length)
    if test is None:
        return SentenceStats(length, len(gold_br), 0, 0, 0, len(gold_leaves), 0)
    test_br, test_leaves = brackets(test, params)
    if [w for w, _ in gold_leaves] != [w for w, _ in test_leaves]:
        raise StructPrefError(
            f"gold and test trees have different words: {len(gold_leaves)} vs {len(test_leaves)} "
            f"({[w for w, _ in gold_leaves][:6]!r} vs {[w for w, _ in test_leaves][:6]!r})")
    matched = sum((Counter(gold_br) & Counter(test_br)).values())
    tags = sum(1 for (_, g), (_, t) in zip(gold_leaves, test_leaves)
               if g == t and g not in params.delete_preterminals)
    words = sum(1 for _, g in gold_leaves if g not in params.delete_preterminals)
    return SentenceStats(length, len(gold_br), len(test_br), matched,
                         _crossing(test_br, gold_br), words, tags)


@dataclass
class ParsevalTotals:
    sentences: int = 0
    gold: int = 0
    test: int = 0
    matched: int = 0
    crossing: int = 0
    exact: int = 0
    no_crossing: int = 0
    le2_crossing: int = 0
    words: int = 0
    tags_correct: int = 0

    def add(self, s: SentenceStats) -> None:
        self.sentences += 1
        self.gold += s.gold
        self.test += s.test
        self.matched += s.matched
        self.crossing += s.crossing
        self.exact += int(s.matched == s.gold == s.test)
        self.no_crossing += int(s.crossing == 0)
        self.le2_crossing += int(s.crossing <= 2)
        self.words += s.words
        self.tags_correct += s.tags_correct

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold if self.gold else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test if self.test else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def _pct(self, n: int) -> float:
        return 100.0 * n / self.sentences if self.sentences else 0.0

    @property
    def exact_match(self) -> float:
        return self._pct(self.exact)

    @property
    def avg_crossing(self) -> float:
        return self.crossing / self.sentences if self.sentences else 0.0

    @property
    def zero_crossing(self) -> float:
        return self._pct(self.no_crossing)

    @property
    def le2_crossing_pct(self) -> float:
        return self._pct(self.le2_crossing)

    @property
    def tagging_accuracy(self) -> float:
        return 100.0 * self.tags_correct / self.words if self.words else 0.0

    def as_dict(self) -> Dict[str, float]:
        return {"sentences": self.sentences, "recall": self.recall, "precision": self.precision,
                "f1": self.f1, "exact": self.exact_match, "avg_crossing": self.avg_crossing,
                "zero_crossing": self.zero_crossing, "le2_crossing": self.le2_crossing_pct,
                "tagging_accuracy": self.tagging_accuracy, "gold_brackets": self.gold,
                "test_brackets": self.test, "matched_brackets": self.matched}


@dataclass
class ParsevalResult:
    all: ParsevalTotals = field(default_factory=ParsevalTotals)
    short: ParsevalTotals = field(default_factory=ParsevalTotals)
    cutoff: int = 40
    sentences: List[SentenceStats] = field(default_factory=list)

    def add(self, stats: SentenceStats) -> None:
        """Count one sentence, in the ≤ cutoff totals too when it is short enough."""
        self.sentences.append(stats)
        self.all.add(stats)
        if stats.length <= self.cutoff:
            self.short.add(stats)

    def table(self) -> str:
        """EVALB's summary as a readable table."""
        rows = [("Number of sentences", "sentences", "{:d}"),
                ("Bracketing recall", "recall", "{:.2f}"),
                ("Bracketing precision", "precision", "{:.2f}"),
                ("Bracketing F-measure", "f1", "{:.2f}"),
                ("Complete match", "exact", "{:.2f}"),
                ("Average crossing", "avg_crossing", "{:.2f}"),
                ("No crossing", "zero_crossing", "{:.2f}"),
                ("2 or less crossing", "le2_crossing", "{:.2f}"),
                ("Tagging accuracy", "tagging_accuracy", "{:.2f}")]
        a, s = self.all.as_dict(), self.short.as_dict()
        head = f"{'':24}{'all':>10}{'len<=' + str(self.cutoff):>10}"
        lines = [head, "-" * len(head)]
        for name, key, fmt in rows:
            lines.append(f"{name:24}{fmt.format(a[key]):>10}{fmt.format(s[key]):>10}")
        return "\n".join(lines)


def evalb(gold_trees: Iterable[Tree], test_trees: Iterable[Optional[Tree]],
          params: EvalbParams = COLLINS) -> ParsevalResult:
    """Score test trees against gold trees, sentence by sentence."""
    gold_trees, test_trees = list(gold_trees), list(test_trees)
    if len(gold_trees) != len(test_trees):
        raise StructPrefError(f"{len(gold_trees)} gold trees but {len(test_trees)} test trees")
    result = ParsevalResult(cutoff=params.cutoff_length)
    for gold, test in zip(gold_trees, test_trees):
        result.add(sentence_stats(gold, test, params))
    return result


def score_parseval(examples, *, spans_key: str = "constituents", **kwargs) -> Dict[str, float]:
    """spaCy scorer over the constituents in ``doc.spans[spans_key]``;
    fractions in [0, 1] as spaCy's other scores (crossing brackets: average
    per sentence)."""
    from ..trees.doc import doc_to_tree

    golds, tests = [], []
    for eg in examples:
        gold = doc_to_tree(eg.reference, spans_key)
        if gold is None:
            continue  # nothing to score against
        golds.append(gold)
        tests.append(doc_to_tree(eg.predicted, spans_key))
    result = evalb(golds, tests)
    scores: Dict[str, float] = {}
    for suffix, totals in (("", result.all), ("_40", result.short)):
        scores[f"parseval_p{suffix}"] = totals.precision / 100
        scores[f"parseval_r{suffix}"] = totals.recall / 100
        scores[f"parseval_f{suffix}"] = totals.f1 / 100
        scores[f"parseval_exact{suffix}"] = totals.exact_match / 100
        scores[f"parseval_cb{suffix}"] = totals.avg_crossing
        scores[f"parseval_0cb{suffix}"] = totals.zero_crossing / 100
        scores[f"parseval_le2cb{suffix}"] = totals.le2_crossing_pct / 100
    return scores


@registry.scorers("spacy_structpref.parseval_scorer.v1")
def make_parseval_scorer():
    return score_parseval
