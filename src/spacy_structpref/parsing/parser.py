"""The PCFG parser: chart (Cython), conversion of the pruned chart into a
treebank-space :class:`~spacy_structpref.trees.Forest`, Viterbi and lazy
k-best extraction (Huang & Chiang 2005, algorithm 3).

The forest users see has full n-ary productions: a binary chart edge whose
right child is a markovisation intermediate is expanded with the
intermediate's own edges, the n-ary edge's probability being the product of
the binarised rules; a chain rule becomes a path of unary edges through
per-chain nodes (the chain's probability on the top edge, 1 below). Node
labels are plain treebank labels, ``state`` the parser's annotated state.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError, check_count
from ..trees.arrays import SymbolTable, offsets
from ..trees.brackets import escape_label, escape_word, to_bracketed
from ..trees.dag import TreeSetDAG
from ..trees.forest import Forest, ForestBuilder
from .grammar import Grammar, base_label, is_intermediate

TAG_MODES = ("ignore", "hard", "soft")
TOO_LONG, NO_PARSE = "too long", "no parse"  # why a ParseResult is a fallback


@dataclass
class ParseResult:
    words: List[str]
    tree: Tree
    log_prob: float
    forest: Optional[Forest]
    nbest: List[Tuple[float, str]]  # (log-probability, bracketed tree), best first
    fallback: bool
    fallback_reason: str = ""  # TOO_LONG or NO_PARSE when ``fallback``


def flat_tree(words: Sequence[str], tags: Sequence[str]) -> Tree:
    """``(TOP (S (tag word) ...))``: the tree a parser gives a sentence it does not parse."""
    return Tree("TOP", [Tree("S", [Tree(t, [w]) for w, t in zip(words, tags)])])


def fallback_result(words: List[str], tags: Sequence[str], reason: str) -> ParseResult:
    """The :func:`flat_tree` as a parse: log-probability ``-inf``, no forest,
    itself the one-tree k-best list, flagged with ``reason`` (TOO_LONG or NO_PARSE)."""
    tree = flat_tree(words, tags)
    return ParseResult(words, tree, float("-inf"), None, [(float("-inf"), to_bracketed(tree))], True, reason)


def check_settings(beam: float = 1e-4, threshold: float = 1e-5, merit_threshold: float = 0.0,
                   max_expansions: int = 2000, tag_mode: str = "ignore", tag_bonus: float = 10.0,
                   max_length: Optional[int] = None) -> None:
    """Raise a :class:`StructPrefError` for a search setting that would make
    every parse fail or fall back (see :class:`Parser`)."""
    if tag_mode not in TAG_MODES:
        raise StructPrefError(f"tag_mode must be one of {TAG_MODES}, got {tag_mode!r}")
    if not all(isinstance(x, (int, float)) and 0 <= x < 1 for x in (beam, threshold, merit_threshold)):
        raise StructPrefError(f"beam, threshold and merit_threshold must lie in [0, 1), "
                              f"got {beam!r}, {threshold!r} and {merit_threshold!r}")
    check_count("max_expansions", max_expansions, 1)
    # a bonus of 0 would zero the upstream tag's score, a negative one make it negative
    if not isinstance(tag_bonus, (int, float)) or not 0 < tag_bonus < float("inf"):
        raise StructPrefError(f"tag_bonus must be a finite number above 0, got {tag_bonus!r}")
    if max_length is not None:
        check_count("max_length (None: no bound)", max_length, 1)


class Parser:
    """CKY parser over a :class:`Grammar`.

    ``beam``: items below this fraction of the best item of their cell layer
    are dropped while filling the chart; ``threshold``: chart hyperedges
    whose posterior is below it are pruned before the forest is built;
    ``merit_threshold``: then forest hyperedges whose best tree is less
    probable than this fraction of the Viterbi tree's are pruned (Huang
    2008), and inside/outside recomputed on what is left;
    ``max_expansions``: cap on the n-ary edges one node may get when
    intermediates are expanded (the most probable are kept);
    ``max_length``: sentences of more words get the flat fallback tree
    without a chart (CKY time grows with the cube of the length, memory
    with its square; None: no bound)."""

    def __init__(self, grammar: Grammar, beam: float = 1e-4, threshold: float = 1e-5,
                 merit_threshold: float = 0.0, max_expansions: int = 2000, tag_mode: str = "ignore",
                 tag_bonus: float = 10.0, symbols: SymbolTable = None, max_length: Optional[int] = None):
        check_settings(beam, threshold, merit_threshold, max_expansions, tag_mode, tag_bonus, max_length)
        self.grammar = grammar
        self.beam, self.threshold, self.merit_threshold = beam, threshold, merit_threshold
        self.max_expansions, self.max_length = max_expansions, max_length
        self.tag_mode, self.tag_bonus = tag_mode, tag_bonus
        self.symbols = symbols if symbols is not None else SymbolTable()
        g = grammar
        S = g.n_states
        binary = sorted(g.binary, key=lambda r: (r[1], r[2], r[0]))
        self.b_parent = np.array([r[0] for r in binary], dtype=np.int32)
        self.b_left = np.array([r[1] for r in binary], dtype=np.int32)
        self.b_right = np.array([r[2] for r in binary], dtype=np.int32)
        self.b_prob = np.array([r[3] for r in binary], dtype=np.float64)
        self.bl_start = np.searchsorted(self.b_left, np.arange(S + 1)).astype(np.int32)
        chains = sorted(g.chains, key=lambda c: (c[0][-1], c[0][0]))
        self.chain_states = [c[0] for c in chains]
        bottoms = np.array([c[0][-1] for c in chains], dtype=np.int32)
        self.c_top = np.array([c[0][0] for c in chains], dtype=np.int32)
        self.c_prob = np.array([c[1] for c in chains], dtype=np.float64)
        self.c_start = np.searchsorted(bottoms, np.arange(S + 1)).astype(np.int32)
        self.inter = np.array([is_intermediate(s) for s in g.states])
        self.labels = [base_label(s) for s in g.states]
        self._label_ids = [self.symbols.label_id(lab) for lab in self.labels]
        self._rule_ids: Dict[tuple, int] = {}  # shared by the sentences' ForestBuilders

    # --------------------------------------------------------------- lexicon
    def _lexical_row(self, i: int, word: str, tag: Optional[str]) -> Tuple[np.ndarray, np.ndarray]:
        """(tag state ids, scores) of word i, upstream ``tag`` applied per ``tag_mode``."""
        return self._upstream(*self.grammar.tag_scores(word, i), tag)

    def _upstream(self, ids: np.ndarray, probs: np.ndarray, tag: Optional[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Tag-state scores with an upstream ``tag`` applied per ``tag_mode``."""
        if tag and self.tag_mode != "ignore":
            match = np.array([self.labels[t] == tag for t in ids], dtype=bool)
            if self.tag_mode == "hard" and match.any():
                ids, probs = ids[match], probs[match]
            elif self.tag_mode == "soft":
                probs = np.where(match, probs * self.tag_bonus, probs)
        return ids, probs

    def lexical_scores(self, words: Sequence[str], tags: Sequence[str] = None) -> np.ndarray:
        lex = np.zeros((len(words), self.grammar.n_states))
        for i, w in enumerate(words):
            ids, probs = self._lexical_row(i, w, tags[i] if tags is not None else None)
            lex[i, ids] = probs
        return lex

    # ----------------------------------------------------------------- parse
    def parse(self, words: Sequence[str], tags: Sequence[str] = None, k: int = 1,
              with_forest: bool = True) -> ParseResult:
        """Best tree, the k best trees with their log-probabilities and the
        pruned forest; a flat fallback tree (``fallback=True``) when the
        sentence is longer than ``max_length`` (``fallback_reason`` "too
        long") or the grammar cannot parse it ("no parse")."""
        from . import _chart

        words = [str(w) for w in words]
        if not words:
            raise StructPrefError("cannot parse an empty sentence")
        if tags is not None and len(tags) != len(words):
            raise StructPrefError(f"{len(tags)} tags for {len(words)} words")
        if self.max_length is not None and len(words) > self.max_length:
            return self._fallback(words, tags, TOO_LONG)
        lex = self.lexical_scores(words, tags)
        forest = None
        for beam in (self.beam, 0.0):
            forest = self._forest(_chart, words, lex, beam)
            if forest is not None or beam == 0.0:
                break
        if forest is None:
            return self._fallback(words, tags, NO_PARSE)
        extractor = KBest(forest, words)
        found = extractor.best(k)
        if not found:  # cannot happen for a forest with a finite root score
            raise StructPrefError("k-best extraction found no tree in a non-empty forest")
        tree = extractor.tree(forest.root, found[0][2])
        nbest = [(lp, text) for lp, text, _ in found]
        return ParseResult(words, tree, found[0][0], forest if with_forest else None, nbest, False)

    def _fallback(self, words: List[str], tags: Optional[Sequence[str]], reason: str) -> ParseResult:
        return fallback_result(words, self.fallback_tags(words, tags), reason)

    def fallback_tree(self, words: Sequence[str], tags: Sequence[str] = None) -> Tree:
        """A flat ``(TOP (S tags...))`` tree with each word's best tag (one
        word at a time: no chart, no sentence-sized score matrix)."""
        return flat_tree(words, self.fallback_tags(words, tags))

    def fallback_tags(self, words: Sequence[str], tags: Sequence[str] = None) -> List[str]:
        """Each word's most probable tag taken alone: the treebank tag of
        largest ``P(T | w)``, summed over its annotated states (upstream
        ``tags`` applied per ``tag_mode``). Not ``P(w | T)``, the chart's
        lexical score: that favours tags of few word types (WP$ for every
        unknown word)."""
        best_tags = []
        for i, w in enumerate(words):
            ids, post = self._upstream(*self.grammar.tag_posterior(w, i), tags[i] if tags is not None else None)
            total: Dict[str, float] = {}
            for t, p in zip(ids.tolist(), post.tolist()):
                total[self.labels[t]] = total.get(self.labels[t], 0.0) + p
            best_tags.append(max(total, key=total.get) if total else "NN")
        return best_tags

    def _forest(self, _chart, words, lex, beam) -> Optional[Forest]:
        g = self.grammar
        args = (self.bl_start, self.b_right, self.b_parent, self.b_prob, self.c_start, self.c_top, self.c_prob)
        pre, fin, scale, act, nact = _chart.inside(*args, lex, beam)
        edges = _chart.outside(*args, pre, fin, scale, act, nact, g.root, self.threshold)
        if edges is None:
            return None
        return self._build(words, lex, *edges)

    # ------------------------------------------------- chart -> n-ary forest
    def _build(self, words, lex, binary, chains, lexical) -> Optional[Forest]:
        n = len(words)
        bins: Dict[Tuple[int, int, int], List[Tuple[int, int, int, float]]] = {}
        rows, _ = binary
        for i, k, j, r in rows.tolist():
            bins.setdefault((int(self.b_parent[r]), i, j), []).append(
                (k, int(self.b_left[r]), int(self.b_right[r]), float(self.b_prob[r])))
        chain_in: Dict[Tuple[int, int, int], List[int]] = {}
        for i, j, r, _ in chains[0].tolist():
            chain_in.setdefault((int(self.c_top[r]), i, j), []).append(r)
        lexset = {(i, t) for i, t, _, _ in lexical[0].tolist()}

        lab_id = self._label_ids
        builder = ForestBuilder(self.symbols, n, words, rule_ids=self._rule_ids)
        add_node, add_edge, add_edges = builder.add_node_id, builder.add_edge, builder.add_edges
        made: Dict[tuple, Optional[int]] = {}
        inter_memo: Dict[tuple, List[Tuple[List[int], float]]] = {}
        cap = self.max_expansions

        # Generators driven by _run: a sub-result is ``yield``-ed for, so
        # sentence-long derivation chains need no deep Python recursion.
        def nary(s, i, j):
            """(tail ids, probability) of the n-ary edges below state s over [i, j)."""
            if j - i == 1 and (i, s) in lexset:
                return [([-(i + 1)], float(lex[i, s]))]
            out = []
            for k, b, c, p in bins.get((s, i, j), ()):
                left = yield node(b, i, k, True)
                if left is None:
                    continue
                if self.inter[c]:
                    key = (c, k, j)
                    expansions = inter_memo.get(key)
                    if expansions is None:
                        expansions = inter_memo[key] = yield nary(c, k, j)
                    out.extend(([left] + t, p * q) for t, q in expansions)
                else:
                    right = yield node(c, k, j, True)
                    if right is not None:
                        out.append(([left, right], p))
            if len(out) > cap:
                out.sort(key=lambda e: -e[1])
                del out[cap:]
            return out

        def node(s, i, j, final):
            """Forest node for state s over [i, j) (or None): ``final`` items
            may carry a chain rule on top; when none is present they coincide
            with the pre-chain item."""
            if final and (s, i, j) not in chain_in:
                final = False
            key = (s, i, j, final)
            if key in made:
                return made[key]
            made[key] = None  # the chart is acyclic; this only guards against bugs
            edges = yield nary(s, i, j)
            if final:
                edges = list(edges)
                for r in chain_in[(s, i, j)]:
                    path = self.chain_states[r]
                    below = yield node(path[-1], i, j, False)
                    if below is None:
                        continue
                    for depth in range(len(path) - 2, 0, -1):  # chain-internal nodes, bottom-up
                        mid = add_node(lab_id[path[depth]], i, j, path[depth])
                        add_edge(mid, [below], 1.0)
                        below = mid
                    edges.append(([below], float(self.c_prob[r])))
            if not edges:
                return None
            v = add_node(lab_id[s], i, j, s)
            add_edges(v, edges)
            made[key] = v
            return v

        root = _run(node(self.grammar.root, 0, n, True))
        if root is None:
            return None
        forest = builder.build(root).compute_inside_outside()
        if self.merit_threshold > 0:
            forest = prune_by_merit(forest, self.merit_threshold)
        return forest


def _run(gen):
    """Drive a generator that ``yield``-s a generator for each sub-result it
    needs and is sent that sub-result back: recursion on an explicit stack,
    so forests and derivations as deep as long sentences need no raised
    recursion limit."""
    stack, value = [gen], None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
        else:
            stack.append(sub)
            value = None


def prune_by_merit(forest: Forest, ratio: float) -> Forest:
    """Sub-forest of the hyperedges whose best tree has probability at least
    ``ratio`` times the Viterbi tree's (Huang 2008, forest pruning), with
    inside/outside recomputed.

    The kept edges are closed: a kept edge's tails keep their own best edges
    (whose merit is at least as high), and its head stays reachable."""
    merit = forest.viterbi_merit()  # also fills forest.log_viterbi
    keep = merit >= forest.log_viterbi[forest.root] + np.log(ratio)
    if keep.all():
        return forest
    sizes = np.diff(forest.tail_start)[keep]
    owner_keep = np.repeat(keep, np.diff(forest.tail_start))
    tails = forest.tails[owner_keep]
    alive = np.zeros(forest.n_nodes, dtype=bool)
    alive[forest.head[keep]] = True
    new_id = np.cumsum(alive) - 1  # keeps the bottom-up order
    tails = np.where(tails >= 0, new_id[np.maximum(tails, 0)], tails)
    out = Forest(forest.label[alive], forest.start[alive], forest.end[alive], new_id[forest.head[keep]],
                 offsets(sizes), tails, forest.rule[keep], forest.prob[keep],
                 new_id[forest.root], forest.n_words, forest.symbols, state=forest.state[alive])
    return out.compute_inside_outside()


# ------------------------------------------------------------------ k-best
class KBest:
    """Lazy k-best derivations of a forest (Huang & Chiang 2005, algorithm 3).

    Derivations of a node are found on demand, in compiled code
    (``_kbest.ForestKBest``): ``kth(v, r)`` pops candidates from v's heap
    until it knows the r-th best, and a popped derivation ``(e, ranks)``
    pushes its successors only then. Ties are broken by edge id, then by
    ranks, so a list is one fixed order of the forest's derivations."""

    def __init__(self, forest: Forest, words: Sequence[str] = None):
        from . import _kbest

        if not isinstance(forest, Forest):
            raise StructPrefError(f"k-best extraction needs a Forest, got {type(forest).__name__}")
        self.forest = forest
        self.words = words
        ts, tails = forest.tail_start.tolist(), forest.tails.tolist()
        self.tails = [tails[ts[e]:ts[e + 1]] for e in range(forest.n_edges)]
        in_edges = np.argsort(forest.head, kind="stable").astype(np.intc)
        node_tail = forest.tails >= 0
        edge_of_tail = np.repeat(np.arange(forest.n_edges), np.diff(forest.tail_start))
        n_node_tails = np.bincount(edge_of_tail[node_tail], minlength=forest.n_edges)
        with np.errstate(divide="ignore"):
            logp = np.log(forest.prob)
        self._core = _kbest.ForestKBest(
            offsets(np.bincount(forest.head, minlength=forest.n_nodes), np.intc), in_edges,
            offsets(n_node_tails, np.intc), forest.tails[node_tail].astype(np.intc), logp,
            forest.label.astype(np.intc), forest.start.astype(np.intc), forest.end.astype(np.intc))
        self._text: Dict[Tuple[int, int], str] = {}
        sym = forest.symbols
        self.label = [sym.labels[x] for x in forest.label.tolist()]
        written = {lab: escape_label(lab) for lab in set(self.label)}
        self.label_text = [written[lab] for lab in self.label]
        self.rule = forest.rule.tolist()

    def kth(self, v: int, r: int):
        """The r-th (0-based) best derivation ``(logp, edge, ranks)`` of node v, or None."""
        return self._core.kth(v, r)

    def _word(self, e, q, t):
        if self.words is not None:
            return self.words[-t - 1]
        sym = self.forest.symbols
        return sym.words[-sym.productions[self.rule[e]][1][q] - 1]

    def _fold(self, v: int, r: int, leaf, combine, memo: dict):
        """Bottom-up over the r-th derivation of v (found already):
        ``leaf(e, q, t)`` for the word at tail q of edge e, ``combine(v, e,
        kids)`` for a node; results are memoised by (node, rank) in ``memo``."""
        kth = self._core.kth

        def walk(v, r):
            _, e, ranks = kth(v, r)
            it = iter(ranks)
            kids = []
            for q, t in enumerate(self.tails[e]):
                if t < 0:
                    kids.append(leaf(e, q, t))
                    continue
                key = (t, next(it))
                sub = memo.get(key)
                if sub is None:
                    sub = memo[key] = yield walk(*key)
                kids.append(sub)
            return combine(v, e, kids)

        out = memo.get((v, r))
        if out is None:
            out = memo[(v, r)] = _run(walk(v, r))
        return out

    def text(self, v: int, r: int) -> str:
        """Bracketed string of the r-th derivation of v (memoised: k-best
        lists share most of their subtrees)."""
        return self._fold(v, r, lambda e, q, t: escape_word(self._word(e, q, t)),
                          lambda v, e, kids: "(" + self.label_text[v] + " " + " ".join(kids) + ")", self._text)

    def tree(self, v: int, r: int) -> Tree:
        return self._fold(v, r, self._word, lambda v, e, kids: Tree(self.label[v], kids), {})

    def _distinct(self, k: int):
        """``(logp, rank)`` of the root's derivations, best first, up to k
        distinct trees: distinct annotated derivations can yield the same
        treebank tree, of which the first is kept."""
        if k < 1:
            raise StructPrefError(f"k must be at least 1, got {k}")
        root, seen, r = self.forest.root, set(), 0
        while len(seen) < k:
            d = self._core.kth(root, r)
            if d is None:
                return
            x = self._core.key(root, r)
            if x not in seen:
                seen.add(x)
                yield float(d[0]), r
            r += 1

    def best(self, k: int) -> List[Tuple[float, str, int]]:
        """Up to k distinct trees ``(logp, bracketed, derivation rank)``, best first."""
        root = self.forest.root
        return [(lp, self.text(root, r), r) for lp, r in self._distinct(k)]

    def dag(self, k: int, symbols: SymbolTable = None) -> Tuple[TreeSetDAG, List[float]]:
        """The trees of :meth:`best` as one hash-consed set, built from the
        derivations directly: ``(dag, logps)``, ``dag[i]`` the i-th best tree
        and ``logps[i]`` its log-probability. Each (node, rank) subderivation
        is interned once, so the trees share their common subtrees. Nodes and
        words are interned in ``symbols`` (default: the forest's table)."""
        symbols = self.forest.symbols if symbols is None else symbols
        out = TreeSetDAG(symbols=symbols)
        prods: Dict[int, int] = {}  # production id in ``symbols`` per hyperedge

        def leaf(e, q, t):
            return -(symbols.word_id(self._word(e, q, t)) + 1), None

        def combine(v, e, kids):
            label = symbols.label_id(self.label[v])
            prod = prods.get(e)
            if prod is None:
                prod = prods[e] = symbols.production_id(label, [sym for sym, _ in kids])
            return label, out.intern(prod, [d for _, d in kids if d is not None])

        memo: dict = {}
        root, logps = self.forest.root, []
        for lp, r in self._distinct(k):
            out.add_root(self._fold(root, r, leaf, combine, memo)[1])
            logps.append(lp)
        return out, logps


def kbest(forest: Forest, k: int, words: Sequence[str] = None) -> List[Tuple[float, str]]:
    """The ``k`` most probable trees of a forest, best first, as
    ``(log-probability, bracketed string)``."""
    return [(lp, text) for lp, text, _ in KBest(forest, words).best(k)]
