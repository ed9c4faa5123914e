"""``spacy_structpref.RecursiveNet.v1``: a recursive neural network over
labelled ordered trees and DAGs (Menchetti et al. 2005, §4, eqs. 5–6).

    u(v) = tanh(ω_0 + Ω z(label(v)) + Σ_{k ≤ K} W_k u(c_k(v))),   U(x) = oᵀ u(root(x))

with a state of size ``width`` (25), one matrix per child position up to
``max_children`` (K = 15; later children are pruned), frontier state 0 and
weights initialised uniformly in ±0.01. ``Ω z(label)`` is a row of the label
table ``E``. The words under the preterminals are one WORD input, as in the
paper, or, with a vocabulary that has words (``label_vocab(...,
min_word_sets)``), inputs of their own: an extension of this package, which
gives the net the lexical evidence that the tree-kernel VP gets through its
preterminal productions (Collins & Duffy 2002).

For reranking (Menchetti et al. 2005, §6.3.2) the base parser's log
probability, rescaled as ``a·log p(x) + b``, is one more input of the output
unit: ``U(x) = oᵀ u(root(x)) + v·(a·log p(x) + b)`` (``log_p_input``; the
DAG carries each candidate's ``log_p``). Its weight ``v`` starts at 1, so
training starts from the parser's own ranking (scaled by ``a``).

The input is a :class:`LabelDAG`: the candidates of one or more preference
sets hash-consed into distinct subtrees, so a subtree shared by many
candidates (most of them, in a set) is computed once, forward and backward.
Nodes are processed level by level (leaves first), node by node in Cython
(``_recursive.pyx``, double precision; states and gradients come back in
the parameters' dtype).
"""
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
from nltk.tree import Tree
from spacy.util import registry
from thinc.api import Model

from ..errors import StructPrefError
from ..trees.dag import TreeSetDAG
from ..trees.normalize import is_preterminal

UNKNOWN, WORD = 0, 1  # label ids of unseen labels and of words (leaves that are not labels)


@dataclass
class LabelDAG:
    """Candidates as one DAG: per distinct node its label id and children
    (``-1``: none), the nodes grouped by height, each candidate's root node
    and each set's range of candidates."""

    labels: np.ndarray        # (N,) int
    children: np.ndarray      # (N, K) int, -1 padded, children left-packed
    levels: List[np.ndarray]  # node ids of height 0, 1, ...
    roots: np.ndarray         # (n_candidates,) int
    set_starts: np.ndarray    # (n_sets + 1,) int
    log_p: Optional[np.ndarray] = None  # (n_candidates,) float: the parser's log p, for log_p_input

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    @property
    def heights(self) -> np.ndarray:
        h = np.zeros(self.n_nodes, dtype=np.int64)
        for height, level in enumerate(self.levels):
            h[level] = height
        return h


WORD_KEY = "\x00"  # vocabulary keys of words start with it: no node label does


def label_vocab(sets, min_word_sets: int = 0) -> Dict[str, int]:
    """Ids of the node labels of the candidates of ``sets`` (lists of nltk
    Trees or :class:`~..trees.TreeSetDAG` sets), after the reserved
    UNKNOWN and WORD; with ``min_word_sets`` > 0, then of the words (leaves
    under a preterminal) found in at least that many sets, keyed
    ``WORD_KEY + word``."""
    labels, words = set(), Counter()
    for cands in sets:
        if isinstance(cands, TreeSetDAG):
            symbols = cands.symbols
            prods = [symbols.productions[p] for p in cands.productions]
            labels.update(symbols.labels[label] for label, _ in prods)
            if min_word_sets > 0:
                words.update({symbols.words[-syms[0] - 1] for _, syms in prods
                              if _is_preterminal_production(syms)})
        else:
            subtrees = [t for tree in cands if isinstance(tree, Tree) for t in tree.subtrees()]
            labels.update(t.label() for t in subtrees)
            if min_word_sets > 0:
                words.update({t[0] for t in subtrees if is_preterminal(t)})
    keys = sorted(labels)
    if min_word_sets > 0:
        keys += sorted(WORD_KEY + w for w, n in words.items() if n >= min_word_sets)
    return {key: i + 2 for i, key in enumerate(keys)}


def _is_preterminal_production(syms) -> bool:
    """A production ``label -> word`` of a SymbolTable (words are negative)."""
    return len(syms) == 1 and syms[0] < 0


def _leaf_id(vocab: Dict[str, int], leaf: str, is_word: bool) -> int:
    """A word's own id when the vocabulary has words; else the label id of a
    leaf that is a known label (a bare label left by tree reduction, or a
    punctuation word spelt as its tag), else WORD."""
    found = vocab.get(WORD_KEY + leaf) if is_word else None
    return vocab.get(leaf, WORD) if found is None else found


def build_label_dag(sets: Sequence[Sequence[Tree]], vocab: Dict[str, int],
                    max_children: int, share: bool = True) -> LabelDAG:
    """Hash-cons the candidates of ``sets`` (each a list of nltk Trees or a
    :class:`~..trees.TreeSetDAG`; ``share=False`` keeps every node
    separate: the same network values, for checking). A word in the
    vocabulary gets its own id; any other leaf string that is a known label
    (a node kept as a bare label by tree reduction) gets that label, any
    other leaf the WORD label; unseen labels get UNKNOWN; children past
    ``max_children`` are pruned."""
    ids: Dict[tuple, int] = {}
    labels: List[int] = []
    kids: List[tuple] = []
    heights: List[int] = []

    def node(label: int, children: tuple) -> int:
        key = (label, children)
        found = ids.get(key) if share else None
        if found is not None:
            return found
        height = 0
        for c in children:
            if heights[c] >= height:
                height = heights[c] + 1
        labels.append(label)
        kids.append(children)
        heights.append(height)
        if share:
            ids[key] = len(labels) - 1
        return len(labels) - 1

    # per production of a SymbolTable: (label id, per kept child slot None for a
    # subtree or the label id of a leaf, number of subtree slots kept)
    templates: Dict[tuple, tuple] = {}

    def template(symbols, p: int) -> tuple:
        found = templates.get((id(symbols), p))
        if found is None:
            label, syms = symbols.productions[p]
            word = _is_preterminal_production(syms)
            slots = tuple(None if sym >= 0 else _leaf_id(vocab, symbols.words[-sym - 1], word)
                          for sym in syms[:max_children])
            found = templates[id(symbols), p] = (vocab.get(symbols.labels[label], UNKNOWN), slots,
                                                 sum(slot is None for slot in slots))
        return found

    def visit(t, is_word: bool = False) -> int:
        if not isinstance(t, Tree):
            return node(_leaf_id(vocab, t, is_word), ())
        children = tuple(visit(c, len(t) == 1) for c in t[:max_children])
        return node(vocab.get(t.label(), UNKNOWN), children)

    def dag_roots(dag: TreeSetDAG) -> List[int]:
        # DAG ids are topological (children first): one pass down marks the
        # subtrees that pruning keeps, one pass up maps each of them once
        symbols, node_kids = dag.symbols, dag.children
        shapes = [template(symbols, p) for p in dag.productions]
        n = len(shapes)
        used = [False] * n
        for r in dag.roots:
            used[r] = True
        for d in range(n - 1, -1, -1):
            if used[d]:
                for c in node_kids[d][:shapes[d][2]]:
                    used[c] = True
        mapped = [-1] * n
        for d in range(n):
            if not used[d]:
                continue
            label, slots, kept = shapes[d]
            if kept == len(slots):  # subtrees only
                children = tuple([mapped[c] for c in node_kids[d][:kept]])
            else:
                below = iter(node_kids[d])
                children = tuple([mapped[next(below)] if slot is None else node(slot, ())
                                  for slot in slots])
            mapped[d] = node(label, children)
        return [mapped[r] for r in dag.roots]

    roots, set_starts = [], [0]
    for cands in sets:
        if isinstance(cands, TreeSetDAG):
            if not share:
                raise StructPrefError("share=False needs the candidates as trees, not a TreeSetDAG")
            roots.extend(dag_roots(cands))
        else:
            roots.extend(visit(t) for t in cands)
        set_starts.append(len(roots))
    children = np.full((len(labels), max_children), -1, dtype=np.int64)
    for i, c in enumerate(kids):
        children[i, :len(c)] = c
    return _label_dag(np.asarray(labels, dtype=np.int64), children,
                      np.asarray(heights, dtype=np.int64), np.asarray(roots, dtype=np.int64),
                      np.asarray(set_starts, dtype=np.int64))


def concat_label_dags(parts: Sequence[LabelDAG]) -> LabelDAG:
    """One DAG holding the sets of every part, in order (no sharing across
    parts): a minibatch from sets converted once each. Log probabilities
    are carried when every part has them."""
    offsets = np.cumsum([0] + [p.n_nodes for p in parts])
    children = np.concatenate([np.where(p.children >= 0, p.children + o, -1)
                               for p, o in zip(parts, offsets)])
    heights = np.concatenate([p.heights for p in parts])
    roots = np.concatenate([p.roots + o for p, o in zip(parts, offsets)])
    starts = np.cumsum([0] + [len(p.roots) for p in parts])
    set_starts = np.concatenate([[0]] + [p.set_starts[1:] + s for p, s in zip(parts, starts)])
    with_log_p = [p.log_p is not None for p in parts]
    if any(with_log_p) and not all(with_log_p):
        raise StructPrefError("some label DAGs carry log probabilities and some do not")
    log_p = np.concatenate([p.log_p for p in parts]) if parts and all(with_log_p) else None
    return _label_dag(np.concatenate([p.labels for p in parts]), children, heights, roots,
                      set_starts.astype(np.int64), log_p)


def _label_dag(labels, children, heights, roots, set_starts, log_p=None) -> LabelDAG:
    order = np.argsort(heights, kind="stable")
    bounds = np.searchsorted(heights[order], np.arange(heights.max(initial=-1) + 2))
    levels = [order[bounds[h]:bounds[h + 1]] for h in range(len(bounds) - 1)]
    return LabelDAG(labels, children, levels, roots, set_starts, log_p)


@registry.architectures("spacy_structpref.RecursiveNet.v1")
def RecursiveNet(width: int = 25, max_children: int = 15, n_labels: int = 2,
                 init_scale: float = 0.01, seed: int = 0, log_p_input: bool = False,
                 log_p_a: float = 1.0, log_p_b: float = 0.0) -> Model[LabelDAG, np.ndarray]:
    """Utilities ``U(x)`` (one per candidate) of a :class:`LabelDAG`;
    ``log_p_input`` adds ``v·(log_p_a·log p + log_p_b)`` (the DAG must carry ``log_p``)."""
    if width < 1 or max_children < 1 or n_labels < 2 or init_scale <= 0:
        raise StructPrefError("RecursiveNet needs width >= 1, max_children >= 1, n_labels >= 2 "
                              f"and init_scale > 0, got {width}, {max_children}, {n_labels}, "
                              f"{init_scale}")
    params = {"E": None, "W": None, "b": None, "o": None}
    if log_p_input:
        params["v"] = None
    return Model("recursive_net", _forward, init=_init, params=params,
                 dims={"nO": width, "nK": max_children, "nV": n_labels},
                 attrs={"init_scale": init_scale, "seed": seed, "log_p_input": bool(log_p_input),
                        "log_p_a": float(log_p_a), "log_p_b": float(log_p_b)})


def _init(model: Model, X=None, Y=None) -> Model:
    H, K, V = model.get_dim("nO"), model.get_dim("nK"), model.get_dim("nV")
    rng = np.random.default_rng(model.attrs["seed"])
    s = model.attrs["init_scale"]
    for name, shape in (("E", (V, H)), ("W", (K, H, H)), ("b", (H,)), ("o", (H,))):
        model.set_param(name, rng.uniform(-s, s, shape).astype("f"))
    if model.attrs["log_p_input"]:
        model.set_param("v", np.ones(1, dtype="f"))
    return model


def node_states(model: Model, dag: LabelDAG) -> np.ndarray:
    """The state ``u(v)`` of every node of the DAG, one row each (the
    candidates' root states ``[dag.roots]`` are the adaptive representation
    of Menchetti et al. 2005, §6.3.3: Table 4 and Fig. 2)."""
    return _node_states(model, dag).astype(model.get_param("E").dtype, copy=False)


def _order(dag: LabelDAG) -> np.ndarray:
    """Node ids, children before parents."""
    return np.ascontiguousarray(np.concatenate(dag.levels) if dag.levels else np.zeros(0), dtype=np.int_)


def _node_states(model: Model, dag: LabelDAG) -> np.ndarray:
    """Every node's state, in double precision, after checking the DAG's ids."""
    from ._recursive import forward

    E, W, b = (model.get_param(n) for n in ("E", "W", "b"))
    if dag.labels.size and not 0 <= dag.labels.min() <= dag.labels.max() < E.shape[0]:
        raise StructPrefError(f"label ids {int(dag.labels.min())}–{int(dag.labels.max())} are outside the "
                              f"network's {E.shape[0]} labels: build the DAG with the network's vocabulary")
    if dag.children.ndim != 2 or dag.children.shape[0] != dag.n_nodes or dag.children.shape[1] > W.shape[0]:
        raise StructPrefError(f"the DAG's children must be (nodes, at most {W.shape[0]}) for this network, "
                              f"got {dag.children.shape} for {dag.n_nodes} nodes")
    if dag.children.size and not -1 <= dag.children.min() <= dag.children.max() < dag.n_nodes:
        raise StructPrefError("the DAG's child ids must be node ids (or -1: none)")
    order = _order(dag)
    if len(order) != dag.n_nodes or (len(order) and not 0 <= order.min() <= order.max() < dag.n_nodes):
        raise StructPrefError("the DAG's levels must hold every node once")
    U = np.zeros((dag.n_nodes, E.shape[1]), dtype=np.float64)
    forward(order, np.ascontiguousarray(dag.labels, dtype=np.int_),
            np.ascontiguousarray(dag.children, dtype=np.int_), _f64(E), _f64(W), _f64(b), U)
    return U


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def _forward(model: Model, dag: LabelDAG, is_train: bool):
    E, W, o = (model.get_param(n) for n in ("E", "W", "o"))
    U64 = _node_states(model, dag)
    U = U64.astype(E.dtype, copy=False)
    scores = U[dag.roots] @ o
    log_p_in = None
    if model.attrs["log_p_input"]:
        if dag.log_p is None:
            raise StructPrefError("the network takes a log p input: build the DAG from sets with "
                                  "log probabilities (ScoredTrees)")
        log_p_in = (model.attrs["log_p_a"] * np.asarray(dag.log_p, dtype=np.float64)
                    + model.attrs["log_p_b"]).astype(U.dtype)
        scores = scores + model.get_param("v")[0] * log_p_in

    def backprop(d_scores: np.ndarray) -> LabelDAG:
        from ._recursive import backward

        d_scores = np.asarray(d_scores, dtype=np.float64)
        dU = np.zeros_like(U64)
        np.add.at(dU, dag.roots, np.outer(d_scores, o))
        dE, dW, db = np.zeros(E.shape), np.zeros(W.shape), np.zeros(W.shape[1])
        backward(_order(dag), np.ascontiguousarray(dag.labels, dtype=np.int_),
                 np.ascontiguousarray(dag.children, dtype=np.int_), _f64(W), U64, dU, dE, dW, db)
        do = U64[dag.roots].T @ d_scores
        for name, grad in (("E", dE), ("W", dW), ("b", db), ("o", do)):
            model.inc_grad(name, grad.astype(E.dtype, copy=False))
        if log_p_in is not None:
            model.inc_grad("v", np.array([d_scores @ log_p_in], dtype=U.dtype))
        return dag

    return scores, backprop
