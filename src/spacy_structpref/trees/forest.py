"""Packed parse forests: hypergraphs over token spans (Klein & Manning 2001).

Nodes are ``label[start, end)`` items; a hyperedge ``head <- (tail_1 .. tail_k)``
carries its rule (a production id of the shared :class:`SymbolTable`, so
preterminal rules include the word) and its rule probability ``P(e)``. Tail
references follow :mod:`.arrays`: ``t >= 0`` is a node, ``t < 0`` the word at
token ``-t - 1`` (a word has inside 1 and no hyperedges).

Nodes are numbered bottom-up: every tail node id is smaller than its head's
id, and the root is a node with no incoming use. ``state`` keeps a parser's
own (e.g. parent-annotated) state id per node; ``label`` is always the
treebank label, the one kernels compare.

Inside ``β`` and outside ``α`` are held in log space (computed by
:mod:`._forest`), so long sentences neither underflow nor overflow. Kernels
use the quantities that stay in [0, 1]: the node posterior
``μ(v) = α(v)β(v)/β(root)`` and the conditional edge probability
``q(e) = P(e) Π β(tails) / β(head)``.
"""
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError
from .arrays import INT, SymbolTable, TreeArrays, first_bad


class Forest:
    __slots__ = (
        "label", "start", "end", "state",
        "head", "tail_start", "tails", "rule", "prob",
        "root", "n_words", "symbols",
        "log_inside", "log_outside", "log_viterbi",
    )

    def __init__(self, label, start, end, head, tail_start, tails, rule, prob, root,
                 n_words, symbols: SymbolTable, state=None):
        self.label = np.ascontiguousarray(label, dtype=INT)
        self.start = np.ascontiguousarray(start, dtype=INT)
        self.end = np.ascontiguousarray(end, dtype=INT)
        n = len(self.label)
        self.state = (np.full(n, -1, dtype=INT) if state is None
                      else np.ascontiguousarray(state, dtype=INT))
        self.head = np.ascontiguousarray(head, dtype=INT)
        self.tail_start = np.ascontiguousarray(tail_start, dtype=INT)
        self.tails = np.ascontiguousarray(tails, dtype=INT)
        self.rule = np.ascontiguousarray(rule, dtype=INT)
        self.prob = np.ascontiguousarray(prob, dtype=np.float64)
        self.root = int(root) if root is not None else -1
        self.n_words = int(n_words)
        self.symbols = symbols
        self.log_inside: Optional[np.ndarray] = None
        self.log_outside: Optional[np.ndarray] = None
        self.log_viterbi: Optional[np.ndarray] = None
        self._validate()

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        n, e = self.n_nodes, self.n_edges
        if n == 0:
            raise StructPrefError("a forest needs at least one node")
        if not 0 <= self.root < n:
            raise StructPrefError(f"the forest has no root (root={self.root}, {n} nodes)")
        for name in ("start", "end", "state"):
            if len(getattr(self, name)) != n:
                raise StructPrefError(f"forest array {name!r} has {len(getattr(self, name))} entries for {n} nodes")
        if len(self.tail_start) != e + 1 or len(self.rule) != e or len(self.prob) != e:
            raise StructPrefError("forest edge arrays (tail_start, rule, prob) do not match the number of hyperedges")
        if e and (self.head.min() < 0 or self.head.max() >= n):
            raise StructPrefError("a hyperedge head is not a node of the forest")
        # Vectorised: parsers build forests with thousands of hyperedges per sentence.
        sizes = np.diff(self.tail_start)
        if e and (self.tail_start[0] != 0 or np.any(sizes < 0) or self.tail_start[-1] != len(self.tails)):
            raise StructPrefError("forest tail_start must rise from 0 to the number of tails")
        if np.any(sizes == 0):
            raise StructPrefError(f"hyperedge {int(np.argmax(sizes == 0))} has no tails")
        owner = np.repeat(np.arange(e), sizes)
        bad = owner[self.tails >= self.head[owner]]
        if len(bad):
            raise StructPrefError(f"hyperedge {bad[0]}: tail nodes must be numbered below their head (bottom-up order)")
        bad = owner[self.tails < -self.n_words]
        if len(bad):
            raise StructPrefError(f"hyperedge {bad[0]} refers to a word outside the sentence")
        if not np.all(np.isfinite(self.prob) & (self.prob >= 0)):
            raise StructPrefError("hyperedge probabilities must be finite and non-negative")
        self._validate_ids(owner)

    def _validate_ids(self, owner: np.ndarray) -> None:
        """Every id against ``symbols`` and the sentence, and each
        hyperedge's tails those of its rule, so that the compiled kernels
        never index out of range (vectorised, as :meth:`_validate`)."""
        what, sym = "Forest", self.symbols
        if sym is None:
            raise StructPrefError("a Forest needs the SymbolTable its ids come from")
        first_bad(what, "label", (self.label < 0) | (self.label >= len(sym.labels)), self.label,
                  f"is not a label id of the SymbolTable ({len(sym.labels)} labels)")
        first_bad(what, "rule", (self.rule < 0) | (self.rule >= len(sym.productions)), self.rule,
                  f"is not a production id of the SymbolTable ({len(sym.productions)} productions)")
        first_bad(what, "start", (self.start < 0) | (self.start > self.end), self.start,
                  "is negative or after its span's end")
        first_bad(what, "end", self.end > self.n_words, self.end, "lies past the sentence's last word")
        first_bad(what, "state", self.state < -1, self.state, "is not a parser state (or -1)")
        lhs, sym_off, syms, _ = sym.production_arrays()
        first_bad(what, "rule", lhs[self.rule] != self.label[self.head], self.rule,
                  "is a production of another label than its head node's")
        first_bad(what, "tail_start", np.diff(self.tail_start) != np.diff(sym_off)[self.rule],
                  np.arange(self.n_edges), "(a hyperedge) does not have its rule's number of tails")
        # the counts agree, so each tail has its rule's symbol
        symbol = syms[sym_off[self.rule[owner]] + np.arange(len(self.tails)) - self.tail_start[owner]]
        first_bad(what, "tails", (self.tails >= 0) != (symbol >= 0), self.tails,
                  "is a node where its rule has a word, or the reverse")
        first_bad(what, "tails", (self.tails >= 0) & (self.label[np.maximum(self.tails, 0)] != symbol), self.tails,
                  "is a node whose label its hyperedge's rule does not have")

    # ------------------------------------------------------------- structure
    @property
    def n_nodes(self) -> int:
        return len(self.label)

    @property
    def n_edges(self) -> int:
        return len(self.head)

    def edge_tails(self, edge: int) -> np.ndarray:
        return self.tails[self.tail_start[edge]:self.tail_start[edge + 1]]

    def incoming(self) -> List[List[int]]:
        """Hyperedge ids per head node."""
        out: List[List[int]] = [[] for _ in range(self.n_nodes)]
        for k, h in enumerate(self.head):
            out[h].append(k)
        return out

    # ------------------------------------------------------- inside/outside
    def _edge_order(self) -> np.ndarray:
        # Edges sorted by head: nodes are numbered bottom-up, so every tail's
        # edges come before its head's.
        return np.argsort(self.head, kind="stable").astype(INT)

    def compute_inside_outside(self) -> "Forest":
        """Fill ``log_inside``, ``log_outside`` and ``log_viterbi`` (the
        log-probability of each node's best subtree) in one Cython pass."""
        from . import _forest  # here: importing trees must not need compiled code (spaCy plugin imports)

        li, lo, vi = _forest.inside_outside(self.head, self.tail_start, self.tails, self.prob,
                                            self._edge_order(), self.n_nodes, self.root)
        if li[self.root] == -np.inf:
            raise StructPrefError("the forest's root has zero inside probability")
        self.log_inside, self.log_outside, self.log_viterbi = li, lo, vi
        return self

    def _require_scores(self) -> None:
        if self.log_inside is None:
            self.compute_inside_outside()

    @property
    def log_total(self) -> float:
        """log β(root): the total probability of all trees in the forest."""
        self._require_scores()
        return float(self.log_inside[self.root])

    def node_posterior(self) -> np.ndarray:
        self._require_scores()
        return np.exp(self.log_inside + self.log_outside - self.log_total)

    def edge_given_head(self) -> np.ndarray:
        """``q(e) = P(e) Π β(tails) / β(head)``: the probability of choosing e
        below its head."""
        self._require_scores()
        if self.n_edges == 0:
            return np.zeros(0)
        # Σ log β over each edge's node tails (words contribute log 1 = 0), in one pass.
        tail_inside = np.where(self.tails >= 0, self.log_inside[np.maximum(self.tails, 0)], 0.0)
        log_q = (np.add.reduceat(tail_inside, self.tail_start[:-1]) - self.log_inside[self.head])
        with np.errstate(divide="ignore"):
            log_q += np.log(self.prob)
        return np.exp(log_q)

    def edge_posterior(self) -> np.ndarray:
        return self.edge_given_head() * self.node_posterior()[self.head]

    def viterbi_merit(self) -> np.ndarray:
        """Per hyperedge, the log-probability of the best tree that uses it
        (the max-product merit of Huang 2008's forest pruning)."""
        from . import _forest

        self._require_scores()
        return _forest.viterbi_merit(self.head, self.tail_start, self.tails, self.prob, self._edge_order(),
                                     self.log_viterbi, self.root)

    # ------------------------------------------------------------ enumeration
    def trees(self, words: Sequence[str] = None) -> Iterator[Tuple[float, Tree]]:
        """Every tree of the forest with its probability ``Π P(e)`` (unnormalised).

        Exponential: meant for small forests and tests, as the slow reference."""
        incoming = self.incoming()
        words = list(words) if words is not None else None
        memo = {}

        def expand(v: int) -> List[Tuple[float, Tree]]:
            if v in memo:
                return memo[v]
            out = []
            for k in incoming[v]:
                partial = [(self.prob[k], [])]
                _, kid_syms = self.symbols.productions[self.rule[k]]
                for t, sym in zip(self.edge_tails(k), kid_syms):
                    if t < 0:
                        w = words[-t - 1] if words is not None else self.symbols.words[-sym - 1]
                        partial = [(p, kids + [w]) for p, kids in partial]
                    else:
                        partial = [(p * q, kids + [sub]) for p, kids in partial for q, sub in expand(t)]
                lab = self.symbols.labels[self.label[v]]
                out.extend((p, Tree(lab, kids)) for p, kids in partial)
            memo[v] = out
            return out

        yield from expand(self.root)

    # ------------------------------------------------------------ conversions
    @classmethod
    def from_tree_arrays(cls, tree: TreeArrays) -> "Forest":
        """A tree is a forest with exactly one hyperedge (probability 1) per node."""
        n = tree.n_nodes
        return cls(tree.label, tree.start, tree.end, np.arange(n), tree.child_start,
                   tree.children, tree.prod, np.ones(n), n - 1, tree.n_words, tree.symbols)

    def to_dict(self) -> dict:
        """msgpack-serialisable form (symbols are referenced by strings so a
        forest can be read back against any table)."""
        sym = self.symbols
        return {
            "labels": [sym.labels[i] for i in self.label],
            "start": self.start.tolist(), "end": self.end.tolist(), "state": self.state.tolist(),
            "head": self.head.tolist(), "tail_start": self.tail_start.tolist(),
            "tails": self.tails.tolist(),
            "rules": [sym.production_str(r) for r in self.rule],
            "prob": self.prob.tolist(), "root": self.root, "n_words": self.n_words,
        }

    @classmethod
    def from_dict(cls, data: dict, symbols: SymbolTable) -> "Forest":
        label = [symbols.label_id(lab) for lab in data["labels"]]
        tails = np.asarray(data["tails"], dtype=INT)
        tail_start = np.asarray(data["tail_start"], dtype=INT)
        rule = []
        for k, text in enumerate(data["rules"]):
            lhs, _, rhs = text.partition(" -> ")
            kid_syms = []
            for t, tok in zip(tails[tail_start[k]:tail_start[k + 1]], rhs.split(" ")):
                kid_syms.append(symbols.label_id(tok) if t >= 0 else -(symbols.word_id(tok) + 1))
            rule.append(symbols.production_id(symbols.label_id(lhs), kid_syms))
        return cls(label, data["start"], data["end"], data["head"], tail_start, tails, rule,
                   data["prob"], data["root"], data["n_words"], symbols, state=data["state"])


class ForestBuilder:
    """Incremental construction: add nodes bottom-up, then hyperedges.

    ``words``: the sentence, for the word tails of preterminal rules (or give
    them to each :meth:`add_edge`). ``rule_ids``: production ids by
    ``(head label, tail symbols...)``; parsers pass one dict to all their
    builders over the same ``symbols``, so a rule is interned once, not once
    per hyperedge."""

    # Slots: add_node_id/add_edges are a parser's hot path.
    __slots__ = ("symbols", "n_words", "word_symbols", "rule_ids", "label", "start", "end", "state",
                 "head", "tails", "tail_start", "rule", "prob")

    def __init__(self, symbols: SymbolTable, n_words: int, words: Sequence[str] = None,
                 rule_ids: Dict[tuple, int] = None) -> None:
        self.symbols = symbols
        self.n_words = n_words
        self.word_symbols = None if words is None else [-(symbols.word_id(w) + 1) for w in words]
        self.rule_ids = {} if rule_ids is None else rule_ids
        self.label: List[int] = []
        self.start: List[int] = []
        self.end: List[int] = []
        self.state: List[int] = []
        self.head: List[int] = []
        self.tails: List[int] = []
        self.tail_start: List[int] = [0]
        self.rule: List[int] = []
        self.prob: List[float] = []

    def add_node(self, label: str, start: int, end: int, state: int = -1) -> int:
        return self.add_node_id(self.symbols.label_id(label), start, end, state)

    def add_node_id(self, label_id: int, start: int, end: int, state: int = -1) -> int:
        """:meth:`add_node` with the label already interned in ``symbols``."""
        self.label.append(label_id)
        self.start.append(start)
        self.end.append(end)
        self.state.append(state)
        return len(self.label) - 1

    def add_edge(self, head: int, tails: Sequence[int], prob: float, words: Sequence[str] = None) -> int:
        """One hyperedge (see :meth:`add_edges`); returns its id."""
        self.add_edges(head, [(tails, prob)], words)
        return len(self.head) - 1

    def add_edges(self, head: int, edges: Sequence[Tuple[Sequence[int], float]], words: Sequence[str] = None) -> None:
        """A hyperedge ``head <- tails`` of probability ``prob`` per ``(tails, prob)``
        of ``edges`` (one call per head: a parser's hot path). ``tails``: node
        ids (>= 0) or word refs (< 0); ``words``, if the builder was made
        without them, supplies the sentence so that preterminal rules include
        their word."""
        if words is None:
            word_symbols = self.word_symbols
        else:  # interns only the words these edges use, keyed like self.word_symbols
            word_symbols = {-t - 1: -(self.symbols.word_id(words[-t - 1]) + 1)
                            for tails, _ in edges for t in tails if t < 0}
        label, rule_ids, all_tails = self.label, self.rule_ids, self.tails
        tail_start, heads, rules, probs = self.tail_start, self.head, self.rule, self.prob
        head_label = label[head]
        for tails, prob in edges:
            if word_symbols is None and any(t < 0 for t in tails):
                raise StructPrefError("a hyperedge with word tails needs the sentence's words")
            key = (head_label, *[label[t] if t >= 0 else word_symbols[-t - 1] for t in tails])
            rule = rule_ids.get(key)
            if rule is None:
                rule = rule_ids[key] = self.symbols.production_id(head_label, key[1:])
            heads.append(head)
            all_tails.extend(tails)
            tail_start.append(len(all_tails))
            rules.append(rule)
            probs.append(prob)

    def build(self, root: int) -> Forest:
        return Forest(self.label, self.start, self.end, self.head, self.tail_start, self.tails, self.rule,
                      self.prob, root, self.n_words, self.symbols, state=self.state)
