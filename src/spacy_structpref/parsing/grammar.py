"""Unlexicalised PCFG read off treebank trees (Klein & Manning 2003).

Training trees are annotated (vertical parent annotation, optional tag
parent annotation and Klein & Manning 2003 style tag splits), unary chains are
collapsed into single *chain rules* (so the chart applies at most one chain per
cell and never loops), and nodes with more than two children are binarised
right-branching with horizontal markovisation of order ``h``.

Annotated state names keep the treebank label in front of the first ``^``
(``NP^S``, ``IN^PP``); markovisation intermediates start with ``@``. Both
conventions are what :func:`base_label` and :func:`is_intermediate` rely on.
"""
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import chain
from typing import Dict, Iterable, List, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import GrammarError, GrammarWarning, StructPrefError, check_count
from ..saving import load_errors
from ..trees.normalize import is_preterminal

SEP = "^"
INTERMEDIATE = "@"


def base_label(state: str) -> str:
    """The treebank label of an annotated state (``NP^S`` -> ``NP``)."""
    return state.split(SEP, 1)[0]


def is_intermediate(state: str) -> bool:
    return state.startswith(INTERMEDIATE)


# ------------------------------------------------------------ unknown words
_SUFFIXES = ("ing", "ed", "ion", "er", "est", "ly", "ity", "al", "ive", "ous", "ble", "ic", "es", "s", "y")


def word_signature(word: str, position: int) -> str:
    """Unknown-word class from shape and affixes (after Petrov et al.'s
    English signatures): capitalisation (sentence-initial or not), digits,
    dashes, other punctuation, and a common suffix."""
    sig = ["UNK"]
    letters = [c for c in word if c.isalpha()]
    if word[:1].isupper():
        if all(c.isupper() for c in letters):
            sig.append("-AC")
        elif position == 0:
            sig.append("-INITC")
        else:
            sig.append("-CAPS")
    elif any(c.isupper() for c in letters):
        sig.append("-MIXED")
    elif letters:
        sig.append("-LC")
    if any(c.isdigit() for c in word):
        sig.append("-NUM" if not letters else "-DIG")
    if "-" in word:
        sig.append("-DASH")
    if "." in word:
        sig.append("-PERIOD")
    if "," in word:
        sig.append("-COMMA")
    lower = word.lower()
    if len(letters) >= 3:
        for suf in _SUFFIXES:
            if lower.endswith(suf):
                sig.append("-" + suf)
                break
    return "".join(sig)


# ------------------------------------------------------------ tree transforms
@dataclass(frozen=True)
class Annotation:
    """Every grammar setting (the component config passes them through)."""
    horizontal_markov: int = 2      # siblings remembered in intermediates; -1 = no markovisation
    vertical_markov: int = 2        # 1 = none, 2 = parent, 3 = parent and grandparent
    tag_parent: bool = True         # annotate POS tags with their parent's label
    split_unary_tags: bool = True   # mark DT/RB/... that are the only child of their parent
    split_in: bool = True           # IN also remembers its grandparent (K&M SPLIT-IN)
    split_percent: bool = True      # the word % gets its own tag state (K&M SPLIT-%)

    def __post_init__(self):
        check_annotation(self.horizontal_markov, self.vertical_markov)


def check_annotation(horizontal_markov, vertical_markov) -> None:
    """The markovisation orders (Klein & Manning 2003): ``vertical_markov``
    1 (no parent annotation) or more, ``horizontal_markov`` 0 or more, or -1
    for no markovisation."""
    check_count("horizontal_markov (-1: no markovisation)", horizontal_markov, -1)
    check_count("vertical_markov (1: no parent annotation)", vertical_markov, 1)


_UNARY_TAGS = ("DT", "RB", "JJ", "PRP", "CD", "NN", "NNS")


def annotate(tree: Tree, ann: Annotation) -> Tree:
    """Copy of a (TOP-rooted) tree with annotated state labels."""
    from ..trees.brackets import fold

    if not isinstance(tree, Tree):
        raise StructPrefError(f"expected an nltk.Tree, got {type(tree).__name__}")
    n_up = ann.vertical_markov - 1
    keep = max(n_up, 2)  # the ancestors a state names: n_up for a phrase, parent and grandparent for a tag

    # the walk's items are (node, its nearest ancestors' labels); a preterminal or a word ends it
    def children(item):
        node, ancestors = item
        if not isinstance(node, Tree) or is_preterminal(node):
            return None
        below = (ancestors + (node.label(),))[-keep:]
        return [(kid, below) for kid in node]

    def combine(item, kids):
        node, ancestors = item
        if not isinstance(node, Tree):
            raise StructPrefError(f"word {node!r} under non-preterminal {ancestors[-1]!r}: "
                                  "every word needs a POS tag")
        label = node.label()
        if kids is None:
            word = node[0]
            state = label
            parts = []
            if ann.tag_parent and ancestors:
                parts.append(ancestors[-1])
            if ann.split_in and label == "IN" and len(ancestors) >= 2:
                parts.append(ancestors[-2])
            if ann.split_percent and word == "%":
                parts = ["%"]
            if parts:
                state = label + SEP + SEP.join(parts)
            return Tree(state, [word])
        state = label
        if label != "TOP" and n_up > 0 and ancestors:
            state = label + SEP + SEP.join(reversed(ancestors[-n_up:]))
        if (ann.split_unary_tags and len(node) == 1 and is_preterminal(node[0])
                and node[0].label() in _UNARY_TAGS):
            kids[0].set_label(kids[0].label() + SEP + "U")
        return Tree(state, kids)

    return fold((tree, ()), combine, children)


# ------------------------------------------------------------------ grammar
@dataclass
class Grammar:
    """A binarised PCFG over annotated states.

    ``binary``: (parent, left, right, prob); ``chains``: (states top..bottom,
    prob) for collapsed unary chains; ``lexicon``: tag state -> word
    probabilities with the signature model for rare/unknown words."""
    annotation: Annotation
    states: List[str]
    binary: List[Tuple[int, int, int, float]]
    chains: List[Tuple[Tuple[int, ...], float]]
    tag_word: Dict[str, Dict[int, float]]       # word -> {tag state: P(T|w)}
    tag_sig: Dict[str, Dict[int, float]]        # signature -> {tag state: P(T|sig)}
    tag_prior: Dict[int, float]                 # P(T)
    word_count: Dict[str, int]
    sig_count: Dict[str, int]
    n_tokens: int
    smooth: float = 1.0
    _ids: Dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self._ids = {s: i for i, s in enumerate(self.states)}
        self._validate()
        self.base = [base_label(s) for s in self.states]
        self.root = self._ids.get("TOP", -1)
        if self.root < 0:
            raise GrammarError("the grammar has no TOP state: training trees must be TOP-rooted (normalize_tree)")
        self._lex_cache: Dict[Tuple[str, bool], Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.skipped_trees = 0  # bad trees estimate_grammar left out (not saved)

    def _validate(self) -> None:
        """Every id within the states and every probability finite, checked
        with numpy before the chart (compiled, unchecked) indexes with them."""
        S = len(self.states)
        if not all(isinstance(s, str) for s in self.states) or len(self._ids) != S:
            raise GrammarError("grammar states must be distinct strings")
        _check_states("binary rule", [x for r in self.binary for x in r[:3]],
                      np.repeat(np.arange(len(self.binary)), 3), S)
        _check_probabilities("binary rule", [r[3] for r in self.binary])
        for i, (states, _) in enumerate(self.chains):
            if len(states) < 2:
                raise GrammarError(f"grammar chain rule {i} has {len(states)} state(s); a chain needs 2 or more")
        _check_states("chain rule", [x for states, _ in self.chains for x in states],
                      np.repeat(np.arange(len(self.chains)), [len(states) for states, _ in self.chains]), S)
        _check_probabilities("chain rule", [p for _, p in self.chains])
        prior = np.fromiter(self.tag_prior, dtype=np.int64, count=len(self.tag_prior))
        _check_states("tag_prior entry", prior, prior, S)
        probs = np.fromiter(self.tag_prior.values(), dtype=np.float64, count=len(self.tag_prior))
        if not np.all(np.isfinite(probs) & (probs > 0)):
            raise GrammarError("grammar tag_prior probabilities must be finite and positive (the lexicon "
                               "divides by them)")
        if "" not in self.tag_sig:
            raise GrammarError("grammar tag_sig lacks the rare-word distribution (key \"\")")
        if set(self.word_count) != set(self.tag_word):
            raise GrammarError("grammar word_count and tag_word must list the same words")
        for name, table in (("tag_word", self.tag_word), ("tag_sig", self.tag_sig)):
            tags = np.fromiter(chain.from_iterable(table.values()), dtype=np.int64)
            unknown = tags[~np.isin(tags, prior)]
            if len(unknown):
                raise GrammarError(f"grammar {name} refers to tag state {unknown[0]}, which has no tag_prior "
                                   f"entry (the grammar has {S} states)")
            _check_probabilities(name, list(chain.from_iterable(d.values() for d in table.values())))
        counts = list(self.word_count.values()) + list(self.sig_count.values())
        if not all(isinstance(c, (int, np.integer)) and c >= 0 for c in counts) or self.n_tokens <= 0:
            raise GrammarError("grammar word and signature counts must be non-negative integers and "
                               "n_tokens positive")
        if not (np.isfinite(self.smooth) and self.smooth >= 0):
            raise GrammarError(f"grammar smooth must be finite and non-negative, got {self.smooth}")

    @property
    def n_states(self) -> int:
        return len(self.states)

    def state_id(self, state: str) -> int:
        return self._ids[state]

    # ---------------------------------------------------------------- lexicon
    def tag_scores(self, word: str, position: int) -> Tuple[np.ndarray, np.ndarray]:
        """(tag state ids, P(word | tag)) for one token: the chart's lexical scores."""
        ids, scores, _ = self._lexicon(word, position)
        return ids, scores

    def tag_posterior(self, word: str, position: int) -> Tuple[np.ndarray, np.ndarray]:
        """(tag state ids, P(tag | word)) for one token, the same states as
        :meth:`tag_scores`: the best tag of a word taken alone is the argmax
        of this, not of P(word | tag), which favours rare tags (a tag seen
        with few word types gives each of them a high probability)."""
        ids, _, posterior = self._lexicon(word, position)
        return ids, posterior

    def _lexicon(self, word: str, position: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tag state ids, P(w | T), P(T | w)) of one token, cached."""
        key = (word, position == 0)  # the signature marks sentence-initial capitals
        hit = self._lex_cache.get(key)
        if hit is not None:
            return hit
        sig = word_signature(word, position)
        sig_dist = self.tag_sig.get(sig) or self.tag_sig.get("")  # "" holds P(T | rare word)
        if word in self.word_count:
            c = self.word_count[word]
            seen = self.tag_word[word]
            tags = set(seen) | set(sig_dist)
            p_w = c / self.n_tokens
            post = {t: (seen.get(t, 0.0) * c + self.smooth * sig_dist.get(t, 0.0)) / (c + self.smooth)
                    for t in tags}
        else:
            p_w = (self.sig_count.get(sig, 0) + 1.0) / self.n_tokens
            post = sig_dist
        ids = np.fromiter(post.keys(), dtype=np.int32, count=len(post))
        posterior = np.fromiter(post.values(), dtype=np.float64, count=len(post))
        scores = posterior * p_w / np.array([self.tag_prior[t] for t in post], dtype=np.float64)
        keep = scores > 0
        out = (ids[keep], scores[keep], posterior[keep])
        if len(self._lex_cache) < 200000:
            self._lex_cache[key] = out
        return out

    # -------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        return {
            "annotation": self.annotation.__dict__,
            "states": self.states,
            "binary": [list(r) for r in self.binary],
            "chains": [[list(s), p] for s, p in self.chains],
            "tag_word": {w: {str(t): p for t, p in d.items()} for w, d in self.tag_word.items()},
            "tag_sig": {w: {str(t): p for t, p in d.items()} for w, d in self.tag_sig.items()},
            "tag_prior": {str(t): p for t, p in self.tag_prior.items()},
            "word_count": self.word_count, "sig_count": self.sig_count,
            "n_tokens": self.n_tokens, "smooth": self.smooth,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Grammar":
        """The grammar :meth:`to_dict` gave; malformed data is a
        :class:`~..errors.SavedModelError`, inconsistent data a :class:`GrammarError`."""
        def ints(m):
            return {int(t): float(p) for t, p in m.items()}

        with load_errors("a grammar"):
            return cls(
                annotation=Annotation(**d["annotation"]), states=list(d["states"]),
                binary=[(int(a), int(b), int(c), float(p)) for a, b, c, p in d["binary"]],
                chains=[(tuple(int(x) for x in s), float(p)) for s, p in d["chains"]],
                tag_word={w: ints(m) for w, m in d["tag_word"].items()},
                tag_sig={w: ints(m) for w, m in d["tag_sig"].items()},
                tag_prior=ints(d["tag_prior"]), word_count=dict(d["word_count"]),
                sig_count=dict(d["sig_count"]), n_tokens=int(d["n_tokens"]), smooth=float(d["smooth"]))


def _check_states(what: str, ids, rows, n_states: int) -> None:
    """State ids ``ids`` (of entries ``rows``: a rule, a chain) within ``range(n_states)``."""
    ids = np.asarray(ids, dtype=np.int64)
    bad = np.flatnonzero((ids < 0) | (ids >= n_states))
    if len(bad):
        raise GrammarError(f"grammar {what} {rows[bad[0]]} refers to state {ids[bad[0]]}, but the grammar "
                           f"has {n_states} states")


def _check_probabilities(what: str, probs) -> None:
    p = np.asarray(probs, dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(p) & (p >= 0)))
    if len(bad):
        raise GrammarError(f"grammar {what} probability {p[bad[0]]} (entry {bad[0]}) is not a finite "
                           "non-negative number")


def _binarise(label: str, kids: List[str], h: int) -> List[Tuple[str, str, str]]:
    """Right-branching binarisation of ``label -> kids`` (len >= 2) into
    binary rules, intermediates remembering the last ``h`` siblings."""
    rules = []
    parent = label
    for i in range(len(kids) - 2):
        done = [base_label(k) for k in kids[:i + 1]]
        if h >= 0:
            done = done[len(done) - h:] if h > 0 else []
        inter = f"{INTERMEDIATE}{label}|{','.join(done)}"
        rules.append((parent, kids[i], inter))
        parent = inter
    rules.append((parent, kids[-2], kids[-1]))
    return rules


def estimate_grammar(trees: Iterable[Tree], annotation: Annotation = Annotation(),
                     rare_threshold: int = 2, smooth: float = 1.0, sig_smooth: float = 1.0,
                     base_signatures: bool = True, skip_bad_trees: bool = False) -> Grammar:
    """Relative-frequency PCFG from TOP-rooted treebank trees.

    Lexicon: ``P(w | T) = P(T | w) P(w) / P(T)``; words seen at most
    ``rare_threshold`` times train ``P(T | signature)``, which smooths known
    words' ``P(T | w)`` (weight ``smooth``) and scores unknown words.

    A tree that is not a treebank tree (not rooted in TOP, or see
    :func:`~spacy_structpref.trees.tree_problem`: a word under a phrase, a
    childless constituent) raises a :class:`GrammarError` naming it; with
    ``skip_bad_trees`` such trees are left out instead, counted in the
    grammar's ``skipped_trees`` and in a :class:`GrammarWarning`."""
    from ..trees.normalize import tree_problem

    lhs_count: Counter = Counter()
    bin_count: Counter = Counter()
    chain_count: Counter = Counter()
    tagword: Counter = Counter()
    n_trees = 0
    skipped: List[str] = []
    for index, tree in enumerate(trees):
        problem = tree_problem(tree)
        if problem is None and tree.label() != "TOP":
            problem = f"rooted in {tree.label()!r}, not TOP (see normalize_tree)"
        if problem is not None:
            if not skip_bad_trees:
                raise GrammarError(f"grammar training tree {index}: {problem}; pass skip_bad_trees=True "
                                   "to leave such trees out (counted)")
            skipped.append(f"tree {index}: {problem}")
            continue
        n_trees += 1
        tags = []  # (word, tag state) left to right: children are pushed in reverse
        stack = [annotate(tree, annotation)]
        while stack:
            node = stack.pop()
            chain = [node.label()]
            while len(node) == 1 and not is_preterminal(node):
                node = node[0]
                chain.append(node.label())
            if len(chain) > 1:
                chain_count[tuple(chain)] += 1
                lhs_count[chain[0]] += 1
            if is_preterminal(node):
                tags.append((node[0], node.label()))
                continue
            kids = [k.label() for k in node]
            for a, b, c in _binarise(node.label(), kids, annotation.horizontal_markov):
                bin_count[(a, b, c)] += 1
                lhs_count[a] += 1
            stack.extend(reversed(node))
        for leaf_i, (word, tag) in enumerate(tags):
            tagword[(word, tag, leaf_i)] += 1
    if not n_trees:
        raise StructPrefError("cannot estimate a grammar from zero trees"
                              + (f" ({len(skipped)} bad trees skipped, the first {skipped[0]})" if skipped else ""))
    if skipped:
        warnings.warn(f"estimate_grammar skipped {len(skipped)} bad trees of {len(skipped) + n_trees}; "
                      f"the first, {skipped[0]}", GrammarWarning, stacklevel=2)

    states: Dict[str, int] = {"TOP": 0}

    def sid(s: str) -> int:
        if s not in states:
            states[s] = len(states)
        return states[s]

    binary = [(sid(a), sid(b), sid(c), n / lhs_count[a]) for (a, b, c), n in sorted(bin_count.items())]
    chains = [(tuple(sid(s) for s in ch), n / lhs_count[ch[0]]) for ch, n in sorted(chain_count.items())]

    word_count: Counter = Counter()
    tag_count: Counter = Counter()
    wt: Dict[str, Counter] = defaultdict(Counter)
    for (word, tag, _), n in tagword.items():
        word_count[word] += n
        tag_count[sid(tag)] += n
        wt[word][sid(tag)] += n
    names = [None] * len(states)
    for name, i in states.items():
        names[i] = name
    # The signature model is estimated over treebank tags when base_signatures
    # is set (annotated tag states are too sparse among rare words: a state
    # seen once, with a rare word, would claim every unknown word) and spread
    # over a tag's annotated states by their relative frequency P(T | tag).
    group = (lambda t: base_label(names[t])) if base_signatures else (lambda t: t)
    sig_tag: Dict[str, Counter] = defaultdict(Counter)
    rare_tag: Counter = Counter()
    sig_count: Counter = Counter()
    for (word, tag, pos), n in tagword.items():
        if word_count[word] <= rare_threshold:
            sig = word_signature(word, pos)
            sig_tag[sig][group(sid(tag))] += n
            rare_tag[group(sid(tag))] += n
            sig_count[sig] += n
    group_count: Counter = Counter()
    for t, c in tag_count.items():
        group_count[group(t)] += c
    members = defaultdict(list)
    for t, c in tag_count.items():
        if group(t) in rare_tag:
            members[group(t)].append((t, c / group_count[group(t)]))
    n_tokens = sum(word_count.values())
    n_rare = sum(rare_tag.values()) or 1
    rare_prior = {b: c / n_rare for b, c in rare_tag.items()}

    def spread(dist):
        return {t: p * share for b, p in dist.items() for t, share in members[b]}

    tag_sig = {"": spread(rare_prior)}
    for sig, counts in sig_tag.items():
        tot = sum(counts.values())
        tag_sig[sig] = spread({b: (counts.get(b, 0) + sig_smooth * p) / (tot + sig_smooth)
                               for b, p in rare_prior.items()})
    tag_word = {w: {t: c / word_count[w] for t, c in d.items()} for w, d in wt.items()}
    tag_prior = {t: c / n_tokens for t, c in tag_count.items()}
    grammar = Grammar(annotation, names, binary, chains, tag_word, tag_sig, tag_prior,
                      dict(word_count), dict(sig_count), n_tokens, smooth)
    grammar.skipped_trees = len(skipped)
    return grammar
