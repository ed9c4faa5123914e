"""PARSEVAL scoring (Black et al. 1991) exactly as EVALB computes it (Sekine
& Collins 1997), by default with its ``COLLINS.prm`` parameters.

EVALB reads each side of a sentence into terminals and brackets:

- a bracket holding one word, ``(X word)``, is a terminal (X is its tag).
  Terminals tagged with a DELETE_LABEL (``-NONE-`` and the punctuation tags
  ``,`` ``:`` ````` ``''`` ``.``) are removed before bracket spans are taken;
  the length used for the cut-off (≤ 40) counts every terminal except the
  DELETE_LABEL_FOR_LENGTH ones (``-NONE-``), punctuation included;
- every other bracket is a constituent. Its label is cut at the first ``-``
  or ``=`` (``NP-SBJ-1`` → ``NP``, ``NP=2`` → ``NP``; a phrase labelled
  ``-LRB-`` gets the empty label), and it is not counted when it spans no
  terminal or when its label is a DELETE_LABEL (``TOP``; also a phrase
  labelled like punctuation, ``(. …)``). The unlabelled root ``( (S …))``
  is counted, with the empty label;
- labels compare equal when they are the same or an EQ_LABEL pair (ADVP ≡
  PRT; tags too). Each gold bracket matches the first unmatched test bracket
  of its span and label: brackets are a multiset, a unary chain X → X gives
  two;
- a test bracket crosses when it overlaps some gold bracket without nesting
  (crossing is unlabelled).

A sentence is *skipped* (status 2) when its test side has no terminal left
(an empty line or ``None``, an all-punctuation sentence), and is an *error*
(status 1) when the sides differ in their number of terminals ("Length
unmatch": a punctuation word tagged with a word tag on one side only, or the
reverse) or in a word ("Words unmatch"). Skipped and error sentences count
in "Number of sentence" and nowhere else: the averages are over the valid
sentences. Each error is reported as EVALB writes it on stderr
(``ParsevalResult.messages``); EVALB gives up at the error after the first
``MAX_ERROR + 1`` (``max_error``; a negative one: at the first error;
``None``: never), here with an :class:`EvalbStopped` that holds what was
read until then. :meth:`ParsevalResult.report` is EVALB's standard output,
character for character, that of a stopped run included (the header and the
lines of the sentences before the last error).

Work is linear in the brackets up to a logarithm: matching takes each
bracket's first free partner from a queue per span and label, and crossing
brackets are found with range-minimum and range-maximum tables over the
word positions, so a chain 100,000 brackets deep scores in a second.

What EVALB leaves undefined is refused instead of imitated: a malformed line
(a word outside a preterminal, too many ``)``) raises a
:class:`~..errors.StructPrefError` naming the line, where EVALB reads past
its arrays or loops until MAX_ERROR; EVALB's fixed buffers (5,000-byte lines,
200 words or brackets a sentence, 30-byte labels) are not imposed. Lines with
too many ``(`` are errors with their counts shown, as in EVALB; a NUL byte
ends a line, as it ends EVALB's C string.
"""
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from nltk.tree import Tree
from spacy.util import registry

from ..errors import StructPrefError

Bracket = Tuple[str, int, int]
OK, ERROR, SKIP = 0, 1, 2  # EVALB's sentence status


class EvalbStopped(StructPrefError):
    """More errors than EVALB's MAX_ERROR allows: EVALB exits there.
    ``result`` is the :class:`ParsevalResult` read until then (``stopped``
    set: its report is the part EVALB prints before it exits)."""

    def __init__(self, message: str, result: "ParsevalResult"):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class EvalbParams:
    """EVALB's parameter file; the defaults are ``COLLINS.prm``.

    ``delete_labels`` (DELETE_LABEL): terminals with such a tag are removed
    with their word, constituents with such a label are not counted;
    ``delete_for_length`` (DELETE_LABEL_FOR_LENGTH): terminals the length
    does not count; ``equal_labels`` / ``equal_words`` (EQ_LABEL / EQ_WORD):
    pairs that compare equal; ``cutoff_length`` (CUTOFF_LEN, ``-c``);
    ``max_error`` (MAX_ERROR, ``-e``: EVALB stops at the error after the
    first ``max_error + 1``, so a negative one at the first; ``None``: never
    stop); ``labeled`` (LABELED)."""
    delete_labels: Tuple[str, ...] = ("TOP", "-NONE-", ",", ":", "``", "''", ".")
    delete_for_length: Tuple[str, ...] = ("-NONE-",)
    equal_labels: Tuple[Tuple[str, str], ...] = (("ADVP", "PRT"),)
    equal_words: Tuple[Tuple[str, str], ...] = ()
    cutoff_length: int = 40
    max_error: Optional[int] = 10
    labeled: bool = True

    def __post_init__(self):
        for name in ("delete_labels", "delete_for_length"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(x, str) for x in value):
                raise StructPrefError(f"EvalbParams.{name} must be a tuple of labels, got {value!r}")
        for name in ("equal_labels", "equal_words"):
            value = getattr(self, name)
            if not all(len(pair) == 2 and all(isinstance(x, str) for x in pair) for pair in value):
                raise StructPrefError(f"EvalbParams.{name} must hold pairs of strings, got {value!r}")
        if isinstance(self.cutoff_length, bool) or not isinstance(self.cutoff_length, int):
            raise StructPrefError(f"EvalbParams.cutoff_length must be an integer, got {self.cutoff_length!r}")
        if self.max_error is not None and (isinstance(self.max_error, bool) or not isinstance(self.max_error, int)):
            raise StructPrefError(f"EvalbParams.max_error must be None or an integer, got {self.max_error!r}")

    def label_eq(self, a: str, b: str) -> bool:
        """EVALB's ``label_comp``."""
        return a == b or (a, b) in self.equal_labels or (b, a) in self.equal_labels

    def word_eq(self, a: str, b: str) -> bool:
        """EVALB's ``word_comp``."""
        return a == b or (a, b) in self.equal_words or (b, a) in self.equal_words


COLLINS = EvalbParams()


@dataclass
class SentenceStats:
    """One sentence's line of EVALB's table: ``length`` (for the cut-off),
    gold / test / matched / crossing brackets, ``words`` (terminals left
    after deletion), ``tags_correct`` and ``status`` (0 valid, 1 error, 2
    skipped). A sentence EVALB rejects (skipped, or an error found comparing
    the two sides) keeps its length and gold brackets and has every other
    count 0, so its F1 is 0; EVALB's line shows 0 gold brackets for it, and
    no total counts it."""
    length: int
    gold: int
    test: int
    matched: int
    crossing: int
    words: int
    tags_correct: int
    status: int = OK

    @property
    def valid(self) -> bool:
        return self.status == OK


@dataclass
class _Side:
    """One side of a sentence as EVALB reads it: the terminals kept, as
    (word, tag); the brackets as [raw label, start, end] in the order they
    open (end -1: never closed); the length; errors met reading it."""
    words: List[Tuple[str, str]] = field(default_factory=list)
    brackets: List[list] = field(default_factory=list)
    length: int = 0
    errors: List[str] = field(default_factory=list)

    def terminal(self, word: str, tag: str, params: EvalbParams) -> None:
        if tag not in params.delete_for_length:
            self.length += 1
        if tag not in params.delete_labels:
            self.words.append((word, tag))


def _read_tree(tree: Tree, params: EvalbParams) -> _Side:
    """The side EVALB reads from the tree's bracketed line (iterative: any depth)."""
    if not isinstance(tree, Tree):
        raise StructPrefError(f"expected an nltk.Tree, got {type(tree).__name__}")
    side = _Side()
    stack, opened = [iter([tree])], []
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            if opened:
                side.brackets[opened.pop()][2] = len(side.words)
        elif not isinstance(node, Tree):
            raise StructPrefError(f"word {node!r} is not the only child of its constituent: EVALB reads "
                                  "only (TAG word) terminals and stops on such a tree")
        elif len(node) == 1 and not isinstance(node[0], Tree):
            side.terminal(node[0], node.label(), params)
        else:
            opened.append(len(side.brackets))
            side.brackets.append([node.label(), len(side.words), -1])
            stack.append(iter(node))
    return side


_C_SPACES = " \t\n\v\f\r"  # C's isspace; not the regex \s, which counts Unicode spaces too
_SPACE = frozenset(_C_SPACES)
_TERMINATOR = re.compile(f"[{re.escape(_C_SPACES)}()]")
_NON_SPACE = re.compile(f"[^{re.escape(_C_SPACES)}]")


def _read_line(text: str, params: EvalbParams, line: int) -> _Side:
    """EVALB's ``read_line``."""
    text = text.split("\0", 1)[0]
    side, opened = _Side(), []
    i, n = 0, len(text)

    def token_end(j: int) -> int:
        found = _TERMINATOR.search(text, j)
        return n if found is None else found.start()

    while i < n:
        c = text[i]
        if c in _SPACE:
            i += 1
        elif c == "(":
            j = token_end(i + 1)
            label = text[i + 1:j]
            if j < n and text[j] in _SPACE:
                found = _NON_SPACE.search(text, j)
                q = n if found is None else found.start()
                k = token_end(q)
                if k < n and text[k] == ")":
                    side.terminal(text[q:k], label, params)
                    i = k + 1
                    continue
                if k >= n or text[k] != "(":
                    if k > q:  # EVALB then fails on the word at every turn until MAX_ERROR
                        raise StructPrefError(f"line {line}: more than two elements in the bracket "
                                              f"({label} {text[q:k]} ...: EVALB cannot read the sentence")
                    side.errors.append("More than two elements in a bracket")
            opened.append(len(side.brackets))
            side.brackets.append([label, len(side.words), -1])
            i = j
        elif c == ")":
            if not opened:
                raise StructPrefError(f"line {line}: unbalanced ')' at character {i + 1} "
                                      "(EVALB reads outside its bracket stack here)")
            side.brackets[opened.pop()][2] = len(side.words)
            i += 1
        else:
            raise StructPrefError(f"line {line}: {text[i:i + 20]!r} at character {i + 1} is outside a "
                                  "preterminal: EVALB cannot read the sentence")
    if opened:
        side.errors.append("Bracketing is unbalanced (too many open bracket)")
    return side


_CUT = re.compile(r"[-=]")


@lru_cache(maxsize=None)
def _deleted(params: EvalbParams) -> frozenset:
    """The labels that compare equal to a DELETE_LABEL."""
    deleted = set(params.delete_labels)
    return frozenset(deleted | {b for a, b in params.equal_labels if a in deleted}
                     | {a for a, b in params.equal_labels if b in deleted})


def _counted(side: _Side, params: EvalbParams) -> List[Bracket]:
    """The brackets EVALB counts (``massage_data``)."""
    out, deleted = [], _deleted(params)
    for label, start, end in side.brackets:
        if start == end:
            continue
        cut = _CUT.search(label)
        if cut is not None:
            label = label[:cut.start()]
        if label not in deleted:
            out.append((label, start, end))
    return out


class _CrossingTable:
    """The gold brackets as crossing reads them: per word position, the
    latest end of a gold bracket starting there and the earliest start of
    one ending there, each as a sparse table (level k holds the extreme of
    every run of 2**k positions) in Python lists, so that a test bracket is
    checked in constant time: the extreme over its inside is that of two
    overlapping runs. Built once per gold side, in O(n log n) for n
    positions (``size``: one more than the largest end of any bracket it
    will be asked about)."""

    def __init__(self, gold: Sequence[Bracket], size: int):
        closed = [b for b in gold if b[2] > b[1]]
        latest_end = np.full(size, -1)
        earliest_start = np.full(size, size)
        if closed:
            gs, ge = np.array([b[1] for b in closed]), np.array([b[2] for b in closed])
            np.maximum.at(latest_end, gs, ge)
            np.minimum.at(earliest_start, ge, gs)
        self.latest_end = _sparse_table(latest_end, np.maximum)
        self.earliest_start = _sparse_table(earliest_start, np.minimum)

    def count(self, test: Sequence[Bracket]) -> int:
        """The test brackets that cross a gold one: ``gs < ts < ge < te`` (a
        gold bracket ends strictly inside, having started before) or ``ts <
        gs < te < ge`` (one starts strictly inside and ends after). A
        bracket left unclosed (end -1) crosses nothing."""
        crossing = 0
        for _, ts, te in test:
            if te - ts < 2:  # no position strictly inside (or unclosed)
                continue
            lo = ts + 1
            level = (te - lo).bit_length() - 1
            late, early, at = self.latest_end[level], self.earliest_start[level], te - (1 << level)
            if max(late[lo], late[at]) > te or min(early[lo], early[at]) < ts:
                crossing += 1
        return crossing


def _sparse_table(values: np.ndarray, op) -> List[List[int]]:
    levels = [values]
    while 2 ** len(levels) <= len(values):
        prev, half = levels[-1], 2 ** (len(levels) - 1)
        levels.append(op(prev[:-half], prev[half:]))
    return [level.tolist() for level in levels]


@dataclass
class _Gold:
    """What scoring reads of a gold side, prepared once for any number of
    test sides: its counted brackets, each with the labels that compare
    equal to its own, and their crossing table."""
    side: _Side
    brackets: List[Bracket]
    equal: List[List[str]]
    crossing: _CrossingTable

    @classmethod
    def of(cls, side: _Side, params: EvalbParams) -> "_Gold":
        brackets = _counted(side, params)
        return cls(side, brackets, [_equal_to(label, params) for label, _, _ in brackets],
                   _CrossingTable(brackets, len(side.words) + 1))


def _score(gold: _Gold, test: _Side, params: EvalbParams) -> Tuple[SentenceStats, List[str]]:
    """EVALB's ``calc_result``: the sentence's counts and its error messages."""
    gold_side = gold.side
    messages = gold_side.errors + test.errors
    status = ERROR if messages else OK

    def rejected(why: int) -> SentenceStats:
        return SentenceStats(gold_side.length, len(gold.brackets), 0, 0, 0, 0, 0, why)

    if not test.words:
        return rejected(SKIP), messages
    if len(gold_side.words) != len(test.words):
        return rejected(ERROR), messages + [f"Length unmatch ({len(gold_side.words)}|{len(test.words)})"]
    for (gw, _), (tw, _) in zip(gold_side.words, test.words):
        if not params.word_eq(gw, tw):
            return rejected(ERROR), messages + [f"Words unmatch ({gw}|{tw})"]
    test_br = _counted(test, params)
    # the free test brackets of each span, in order, one queue per label (unlabelled: one per span)
    free: Dict[Tuple[int, int, str], deque] = defaultdict(deque)
    for j, (label, start, end) in enumerate(test_br):
        free[(start, end, label if params.labeled else "")].append(j)
    matched = 0
    for (_, start, end), equal in zip(gold.brackets, gold.equal):
        # the first free test bracket of the span whose label compares equal
        queues = [q for q in (free.get((start, end, other)) for other in equal) if q]
        if queues:
            min(queues, key=lambda q: q[0]).popleft()
            matched += 1
    tags = sum(params.label_eq(g, t) for (_, g), (_, t) in zip(gold_side.words, test.words))
    return SentenceStats(gold_side.length, len(gold.brackets), len(test_br), matched, gold.crossing.count(test_br),
                         len(gold_side.words), tags, status), messages


def _equal_to(label: str, params: EvalbParams) -> List[str]:
    """The labels that compare equal to ``label`` (EVALB's ``label_comp``),
    or ``[""]`` for unlabelled bracketing."""
    if not params.labeled:
        return [""]
    return [label] + [b for a, b in params.equal_labels if a == label] + [a for a, b in params.equal_labels
                                                                           if b == label]


def brackets(tree: Tree, params: EvalbParams = COLLINS) -> Tuple[List[Bracket], List[Tuple[str, str]]]:
    """The brackets EVALB counts in a tree (label cut at ``-``/``=``, start,
    end over the terminals kept) and those terminals, as (word, tag)."""
    side = _read_tree(tree, params)
    return _counted(side, params), side.words


def sentence_stats(gold: Tree, test: Optional[Tree], params: EvalbParams = COLLINS) -> SentenceStats:
    """EVALB's counts for one sentence; ``test=None`` (no parse) is skipped,
    as EVALB skips an empty test line."""
    return _score(_Gold.of(_read_tree(gold, params), params), _Side() if test is None else _read_tree(test, params),
                  params)[0]


def candidate_stats(gold: Tree, candidates: Sequence[str], params: EvalbParams = COLLINS) -> List[SentenceStats]:
    """EVALB's counts of each candidate, a bracketed line, against one gold
    tree: what :func:`sentence_stats` gives for the candidate read as a
    tree, with the gold side prepared once and each candidate read as EVALB
    reads a test line (a k-best list's scores). A candidate EVALB cannot
    read cleanly (a bracket left open, a word outside a preterminal) is an
    error naming it."""
    prepared = _Gold.of(_read_tree(gold, params), params)
    out = []
    for i, text in enumerate(candidates):
        try:
            side = _read_line(text, params, i + 1)
            if side.errors or not text.strip():
                raise StructPrefError(f"{text[:80]!r}{' (' + side.errors[0] + ')' if side.errors else ''}")
        except StructPrefError as err:
            raise StructPrefError(f"candidate {i} is not a bracketed tree EVALB reads: {err}") from None
        out.append(_score(prepared, side, params)[0])
    return out


@dataclass
class ParsevalTotals:
    """EVALB's sums over sentences (one summary block): every sentence counts
    in ``sentences``, errors and skipped ones only there."""
    sentences: int = 0
    errors: int = 0
    skipped: int = 0
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
        if s.status == ERROR:
            self.errors += 1
            return
        if s.status == SKIP:
            self.skipped += 1
            return
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
    def valid(self) -> int:
        return self.sentences - self.errors - self.skipped

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold if self.gold else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test if self.test else 0.0

    @property
    def f1(self) -> float:
        """2PR/(P+R); 0 where P + R = 0 (EVALB prints ``-nan`` there)."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def _pct(self, n: int) -> float:
        return 100.0 * n / self.valid if self.valid else 0.0

    @property
    def exact_match(self) -> float:
        return self._pct(self.exact)

    @property
    def avg_crossing(self) -> float:
        return self.crossing / self.valid if self.valid else 0.0

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
        return {"sentences": self.sentences, "errors": self.errors, "skipped": self.skipped,
                "valid": self.valid, "recall": self.recall, "precision": self.precision,
                "f1": self.f1, "exact": self.exact_match, "avg_crossing": self.avg_crossing,
                "zero_crossing": self.zero_crossing, "le2_crossing": self.le2_crossing_pct,
                "tagging_accuracy": self.tagging_accuracy, "gold_brackets": self.gold,
                "test_brackets": self.test, "matched_brackets": self.matched}

    def summary(self) -> List[str]:
        """This block of EVALB's summary, line by line."""
        p, r = self.precision, self.recall
        f = f"{2 * p * r / (p + r):6.2f}" if p + r else "  -nan"  # 0/0 in C on x86: -nan
        return [f"Number of sentence        = {self.sentences:6d}",
                f"Number of Error sentence  = {self.errors:6d}",
                f"Number of Skip  sentence  = {self.skipped:6d}",
                f"Number of Valid sentence  = {self.valid:6d}",
                f"Bracketing Recall         = {r:6.2f}",
                f"Bracketing Precision      = {p:6.2f}",
                f"Bracketing FMeasure       = {f}",
                f"Complete match            = {self.exact_match:6.2f}",
                f"Average crossing          = {self.avg_crossing:6.2f}",
                f"No crossing               = {self.zero_crossing:6.2f}",
                f"2 or less crossing        = {self.le2_crossing_pct:6.2f}",
                f"Tagging accuracy          = {self.tagging_accuracy:6.2f}"]


_HEAD = ["  Sent.                        Matched  Bracket   Cross        Correct Tag",
         " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy",
         "=" * 76]


def _sentence_line(line: int, s: SentenceStats) -> str:
    # A rejected sentence (no terminal compared) shows zeros; an error met
    # reading a line (an unclosed bracket) shows its counts, as in EVALB.
    gold = s.gold if s.status == OK or s.words else 0
    recall = 100.0 * s.matched / gold if gold else 0.0
    precision = 100.0 * s.matched / s.test if s.test else 0.0
    accuracy = 100.0 * s.tags_correct / s.words if s.words else 0.0
    return (f"{line:4d}  {s.length:3d}    {s.status:d}  {recall:6.2f} {precision:6.2f}   {s.matched:3d}    "
            f"{gold:3d}  {s.test:3d}    {s.crossing:3d}   {s.words:4d}  {s.tags_correct:4d}   {accuracy:6.2f}")


@dataclass
class ParsevalResult:
    """EVALB's result: totals for all sentences and for those of at most
    ``cutoff`` words, each sentence's counts (sentence ``i`` is EVALB's line
    ``i + 1``), and ``messages``: EVALB's error lines, each with the number
    of sentence lines printed before it."""
    all: ParsevalTotals = field(default_factory=ParsevalTotals)
    short: ParsevalTotals = field(default_factory=ParsevalTotals)
    cutoff: int = 40
    sentences: List[SentenceStats] = field(default_factory=list)
    messages: List[Tuple[int, str]] = field(default_factory=list)
    max_error: Optional[int] = None
    stopped: bool = False  # EVALB would have exited at the last message

    def error(self, text: str) -> None:
        """Report an error at the sentence being read, as EVALB's ``Error``;
        beyond ``max_error`` + 1 errors, stop as EVALB does."""
        self.messages.append((len(self.sentences), f"{len(self.sentences) + 1} : {text}"))
        if self.max_error is not None and len(self.messages) - 1 > self.max_error:
            self.stopped = True
            raise EvalbStopped(
                f"EVALB stops at its error {len(self.messages)} (MAX_ERROR {self.max_error}), sentence "
                f"{self.messages[-1][1]}; the errors are listed in order (the stopped result's messages): "
                "fix what they name, or pass a larger max_error (EVALB's -e; None: never stop) to score the "
                "valid sentences and count the others", self)

    def add(self, stats: SentenceStats, messages: Iterable[str] = ()) -> None:
        """Count one sentence, in the ≤ cutoff totals too when it is short
        enough; ``messages``: the errors EVALB reports for it."""
        for text in messages:
            self.error(text)
        self.sentences.append(stats)
        self.all.add(stats)
        if stats.length <= self.cutoff:
            self.short.add(stats)

    def report(self) -> str:
        """EVALB's standard output (its errors go to ``messages``); of a
        ``stopped`` result, what EVALB prints before it exits: the header and
        the lines of the sentences before the last error."""
        out = list(_HEAD)
        out.extend(_sentence_line(i, s) for i, s in enumerate(self.sentences, 1))
        if self.stopped:
            return "\n".join(out) + "\n"
        out.append("=" * 76)
        a = self.all
        total = f"  {a.words:5d} {a.tags_correct:5d}   {a.tagging_accuracy:6.2f}"
        if a.gold > 0 and a.test > 0:
            total = (f"                {a.recall:6.2f} {a.precision:6.2f} {a.matched:6d} {a.gold:5d} "
                     f"{a.test:5d}  {a.crossing:5d}" + total)
        out += [total, "=== Summary ===", "", "-- All --", *a.summary(),
                "", f"-- len<={self.cutoff} --", *self.short.summary()]
        return "\n".join(out) + "\n"

    def table(self) -> str:
        """EVALB's summary as a readable table."""
        rows = [("Number of sentences", "sentences", "{:d}"),
                ("Error sentences", "errors", "{:d}"),
                ("Skipped sentences", "skipped", "{:d}"),
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
    """Score test trees against gold trees as EVALB scores their bracketed
    lines; a test tree ``None`` is an empty line (skipped). Gold and test
    lists of different lengths are refused."""
    gold_trees, test_trees = list(gold_trees), list(test_trees)
    if len(gold_trees) != len(test_trees):
        raise StructPrefError(f"{len(gold_trees)} gold trees but {len(test_trees)} test trees")
    result = ParsevalResult(cutoff=params.cutoff_length, max_error=params.max_error)
    for gold, test in zip(gold_trees, test_trees):
        result.add(*_score(_Gold.of(_read_tree(gold, params), params),
                           _Side() if test is None else _read_tree(test, params), params))
    return result


def evalb_lines(gold_lines: Iterable[str], test_lines: Iterable[str],
                params: EvalbParams = COLLINS) -> ParsevalResult:
    """EVALB on the lines of a gold and a test file: every gold line is a
    sentence (a blank one too); when one file has more lines, EVALB's
    "Number of lines unmatch" error and the common lines scored."""
    gold_lines, test_lines = list(gold_lines), list(test_lines)
    result = ParsevalResult(cutoff=params.cutoff_length, max_error=params.max_error)
    for i, text in enumerate(gold_lines):
        gold = _read_line(text, params, i + 1)
        if i >= len(test_lines):
            for message in gold.errors:
                result.error(message)
            result.error("Number of lines unmatch (too many lines in gold file)")
            return result
        result.add(*_score(_Gold.of(gold, params), _read_line(test_lines[i], params, i + 1), params))
    if len(test_lines) > len(gold_lines):
        result.error("Number of lines unmatch (too many lines in test file)")
    return result


def read_lines(path: Union[str, Path]) -> List[str]:
    """A file's lines as EVALB's ``fgets`` sees them: split at ``\\n`` only,
    bytes that are not UTF-8 kept (as surrogate escapes)."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
            text = f.read()
    except OSError as err:
        raise StructPrefError(f"cannot read {path}: {err.strerror or err}") from None
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def evalb_files(gold_path: Union[str, Path], test_path: Union[str, Path],
                params: EvalbParams = COLLINS) -> ParsevalResult:
    """``evalb -p COLLINS.prm GOLD TEST`` (other parameters through ``params``)."""
    return evalb_lines(read_lines(gold_path), read_lines(test_path), params)


def score_parseval(examples, *, spans_key: str = "constituents", **kwargs) -> Dict[str, float]:
    """spaCy scorer over the constituents in ``doc.spans[spans_key]``;
    fractions in [0, 1] as spaCy's other scores (crossing brackets: average
    per sentence), and EVALB's counts of error and skipped sentences (a Doc
    without constituents is skipped). Never stops at MAX_ERROR."""
    from ..trees.doc import doc_to_tree

    golds, tests = [], []
    for eg in examples:
        gold = doc_to_tree(eg.reference, spans_key)
        if gold is None:
            continue  # nothing to score against
        golds.append(gold)
        tests.append(doc_to_tree(eg.predicted, spans_key))
    result = evalb(golds, tests, replace(COLLINS, max_error=None))
    scores: Dict[str, float] = {}
    for suffix, totals in (("", result.all), ("_40", result.short)):
        scores[f"parseval_p{suffix}"] = totals.precision / 100
        scores[f"parseval_r{suffix}"] = totals.recall / 100
        scores[f"parseval_f{suffix}"] = totals.f1 / 100
        scores[f"parseval_exact{suffix}"] = totals.exact_match / 100
        scores[f"parseval_cb{suffix}"] = totals.avg_crossing
        scores[f"parseval_0cb{suffix}"] = totals.zero_crossing / 100
        scores[f"parseval_le2cb{suffix}"] = totals.le2_crossing_pct / 100
    scores["parseval_errors"] = result.all.errors
    scores["parseval_skipped"] = result.all.skipped
    return scores


@registry.scorers("spacy_structpref.parseval_scorer.v1")
def make_parseval_scorer():
    return score_parseval
