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
Nodes are processed level by level (leaves first), all the nodes of a level
at once, in the parameters' dtype (float32): with Thinc's numpy ops as the
Cython kernels of ``_recursive.pyx`` (every level in one call), with other
ops (cupy on a GPU) through the array module, one matrix product per child
position and level; the
gradient is backpropagation through structure (Goller & Küchler 1996) over
the DAG, as Costa et al. (2003) train their recursive network on the
candidate trees of incremental parsing. ``W_k u(c)`` is computed once per
distinct (child, position) pair, however many parents share it. The
node-by-node passes in Cython (``_recursive.pyx``, double precision;
``batched=False``) are the slow reference they are tested against.
"""
from collections import Counter
from dataclasses import dataclass
import threading
from functools import cached_property
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np
from nltk.tree import Tree
from spacy.util import registry
from thinc.api import Model, NumpyOps

from ..errors import StructPrefError
from ..trees.arrays import offsets
from ..trees.dag import TreeSetDAG
from ..trees.normalize import is_preterminal

UNKNOWN, WORD = 0, 1  # label ids of unseen labels and of words (leaves that are not labels)


class Layout(NamedTuple):
    """A label DAG laid out for the batched passes (``_recursive.level_plan``,
    see :class:`_LevelPlan`): rows are the nodes by height, within a height
    by falling number of children; pairs the distinct (child, position)
    pairs."""

    order: np.ndarray        # (rows,) int32: each row's node
    position: np.ndarray     # (nodes,) int32: each node's row
    fills: np.ndarray        # (heights, K) int: per height, its rows with more than k children
    pair_child: np.ndarray   # (pairs,) int32: each pair's child row
    pair_bounds: np.ndarray  # (K, heights + 1) int: the first pair of position k whose child has height h or more
    pair_of: np.ndarray      # (rows, K) int32: the pair of row r's k-th edge (-1: none)
    level_ends: np.ndarray   # (heights,) int: each height's end row
    labels: np.ndarray       # (rows,) int32: each row's label id


@dataclass
class LabelDAG:
    """Candidates as one DAG: per distinct node its label id, children
    (``-1``: none) and height (leaves 0, else one more than its highest
    child), each candidate's root node and each set's range of
    candidates."""

    labels: np.ndarray        # (N,) int
    children: np.ndarray      # (N, K) int, -1 padded, children left-packed (K: at most the net's max_children)
    heights: np.ndarray       # (N,) int
    roots: np.ndarray         # (n_candidates,) int
    set_starts: np.ndarray    # (n_sets + 1,) int
    log_p: Optional[np.ndarray] = None  # (n_candidates,) float: the parser's log p, for log_p_input

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    @cached_property
    def levels(self) -> List[np.ndarray]:
        """Node ids of height 0, 1, ..."""
        order = np.argsort(self.heights, kind="stable")
        bounds = np.searchsorted(self.heights[order], np.arange(self.heights.max(initial=-1) + 2))
        return [order[bounds[h]:bounds[h + 1]] for h in range(len(bounds) - 1)]

    @cached_property
    def layout(self) -> Layout:
        """The DAG laid out for the batched passes, made once however many
        epochs (and minibatches: :func:`concat_label_dags`) use it."""
        from ._recursive import level_plan

        children, heights, n = self.children, np.asarray(self.heights), self.n_nodes
        if children.ndim != 2 or children.shape[0] != n or heights.shape != (n,):
            raise StructPrefError(f"a label DAG of {n} nodes needs children of shape ({n}, K) and {n} heights, "
                                  f"got {children.shape} and {heights.shape}")
        if children.size and not -1 <= children.min() <= children.max() < n:
            raise StructPrefError("the DAG's child ids must be node ids (or -1: none)")
        n_levels = int(heights.max(initial=-1)) + 1
        plan = level_plan(np.ascontiguousarray(children, dtype=np.int_), np.ascontiguousarray(heights, dtype=np.int_),
                          n_levels)
        if plan is None:
            raise StructPrefError("the DAG's heights must put every node above its children")
        order = plan[0]
        level_ends = np.cumsum(np.bincount(heights, minlength=n_levels), dtype=np.int_)
        return Layout(*plan, level_ends, np.asarray(self.labels, dtype=np.int32)[order])


class LabelDAGBatch:
    """Label DAGs as one input of the network, with no sharing across them
    (what :func:`concat_label_dags` makes): the batched passes read a
    layout merged from the parts' own (``_recursive.merge_layouts``),
    without concatenating their nodes; the node arrays of a
    :class:`LabelDAG` are joined when first asked for."""

    def __init__(self, parts: Sequence[LabelDAG]):
        self.parts = list(parts)
        # each part's ids offset by the nodes (candidates) of the parts before it: one
        # concatenation and one addition each, however many parts
        nodes = np.array([len(p.labels) for p in self.parts], dtype=np.int64)
        roots = [p.roots for p in self.parts]
        n_roots = np.array([len(r) for r in roots], dtype=np.int64)
        self.n_nodes = int(nodes.sum())
        self._sizes, self._offsets = nodes, offsets(nodes)[:-1]  # each part's nodes and first node id
        self.roots = np.concatenate([np.zeros(0, dtype=np.int64)] + roots)
        self.roots += np.repeat(self._offsets, n_roots)
        ends = [p.set_starts[1:] for p in self.parts]
        self.set_starts = np.concatenate([np.zeros(1, dtype=np.int64)] + ends)
        self.set_starts[1:] += np.repeat(offsets(n_roots)[:-1], [len(e) for e in ends])
        with_log_p = [p.log_p is not None for p in self.parts]
        if any(with_log_p) and not all(with_log_p):
            raise StructPrefError("some label DAGs carry log probabilities and some do not")
        self.log_p = np.concatenate([p.log_p for p in self.parts]) if self.parts and all(with_log_p) else None

    @cached_property
    def layout(self) -> Layout:
        from ._recursive import merge_layouts

        return Layout(*merge_layouts([p.layout for p in self.parts]))

    @cached_property
    def _joined(self) -> LabelDAG:
        """The parts' nodes in one LabelDAG, ids offset by the nodes before them."""
        parts = self.parts
        width = max((p.children.shape[1] for p in parts), default=0)
        children = np.full((self.n_nodes, width), -1, dtype=np.int64)
        for p, start in zip(parts, self._offsets.tolist()):
            children[start:start + p.n_nodes, :p.children.shape[1]] = p.children
        np.add(children, np.repeat(self._offsets, self._sizes)[:, None], out=children, where=children >= 0)
        return LabelDAG(np.concatenate([np.zeros(0, dtype=np.int64)] + [p.labels for p in parts]), children,
                        np.concatenate([np.zeros(0, dtype=np.int64)] + [p.heights for p in parts]),
                        self.roots, self.set_starts, self.log_p)

    labels = property(lambda self: self._joined.labels)
    children = property(lambda self: self._joined.children)
    heights = property(lambda self: self._joined.heights)
    levels = property(lambda self: self._joined.levels)


Input = Union[LabelDAG, LabelDAGBatch]  # what the network takes


@dataclass
class CandidateArrays:
    """A :class:`~..trees.TreeSetDAG`'s node arrays and roots
    (``dag_arrays()``) without its Python structures: what a label DAG and
    a label vocabulary are made from, in a few kilobytes a set."""

    symbols: object           # the SymbolTable of the productions
    productions: np.ndarray   # (n,) int32: each DAG node's production
    kid_off: np.ndarray       # (n + 1,) int32: offsets of its node children in kids
    kids: np.ndarray          # int32 node children
    roots: np.ndarray         # (n_trees,) int: each tree's root node

    @classmethod
    def of(cls, dag: TreeSetDAG) -> "CandidateArrays":
        return cls(dag.symbols, *dag.dag_arrays(), np.asarray(dag.roots, dtype=np.int_))

    def __len__(self) -> int:
        return len(self.roots)


WORD_KEY = "\x00"  # vocabulary keys of words start with it: no node label does


def label_vocab(sets, min_word_sets: int = 0) -> Dict[str, int]:
    """Ids of the node labels of the candidates of ``sets`` (lists of nltk
    Trees, :class:`~..trees.TreeSetDAG` sets or their CandidateArrays), after the reserved
    UNKNOWN and WORD; with ``min_word_sets`` > 0, then of the words (leaves
    under a preterminal) found in at least that many sets, keyed
    ``WORD_KEY + word``."""
    labels, words = set(), Counter()
    for cands in sets:
        if isinstance(cands, (TreeSetDAG, CandidateArrays)):
            symbols = cands.symbols
            prods = [symbols.productions[p] for p in np.unique(cands.productions).tolist()]
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
    """Hash-cons the candidates of ``sets`` (each a list of nltk Trees, a
    :class:`~..trees.TreeSetDAG` or its CandidateArrays; ``share=False`` keeps every node
    separate: the same network values, for checking). A word in the
    vocabulary gets its own id; any other leaf string that is a known label
    (a node kept as a bare label by tree reduction) gets that label, any
    other leaf the WORD label; unseen labels get UNKNOWN; children past
    ``max_children`` are pruned."""
    return LabelDAGBuilder(vocab, max_children).build(sets, share)


class LabelDAGBuilder:
    """:func:`build_label_dag` over one vocabulary, keeping per SymbolTable
    the templates of its productions (extended as the table grows), so that
    a learner builds each set's DAG without looking at its productions
    again."""

    def __init__(self, vocab: Dict[str, int], max_children: int):
        self.vocab, self.max_children = vocab, max_children
        # id(SymbolTable) -> (the table, per production: whether its template is made, its label id,
        # number of kept child slots, of subtree slots among them, and the slots)
        self._templates: Dict[int, tuple] = {}

    def _templates_of(self, symbols, prod: np.ndarray) -> tuple:
        """Per production of the table: its label id, its number of kept
        child slots and of subtree slots among them, and per slot -1 for a
        subtree or the label id of a leaf; made for the productions of
        ``prod`` that have none yet."""
        _, made, *arrays = self._templates.get(id(symbols), (symbols, np.zeros(0, dtype=bool)))
        if len(made) < len(symbols.productions):
            size = max(len(symbols.productions), 2 * len(made))
            grown = [np.zeros(size, dtype=bool), np.zeros(size, dtype=np.int_), np.zeros(size, dtype=np.int_),
                     np.zeros(size, dtype=np.int_), np.zeros((size, self.max_children), dtype=np.int_)]
            for new, old in zip(grown, [made, *arrays]):
                new[:len(old)] = old
            made, *arrays = grown
        missing = np.unique(prod[~made[prod]]) if len(prod) else prod
        labels, n_slots, kept, slots = arrays
        for p in missing.tolist():
            label, syms = symbols.productions[p]
            word = _is_preterminal_production(syms)
            row = [-1 if sym >= 0 else _leaf_id(self.vocab, symbols.words[-sym - 1], word)
                   for sym in syms[:self.max_children]]
            labels[p], n_slots[p], kept[p] = self.vocab.get(symbols.labels[label], UNKNOWN), len(row), row.count(-1)
            slots[p, :len(row)] = row
        made[missing] = True
        self._templates[id(symbols)] = (symbols, made, *arrays)
        return tuple(arrays)

    def build(self, sets: Sequence[Sequence[Tree]], share: bool = True) -> LabelDAG:
        """The label DAG of ``sets`` (see :func:`build_label_dag`)."""
        from ._recursive import NodeTable

        vocab, max_children = self.vocab, self.max_children
        table = NodeTable(max_children, share)

        def visit(t, is_word: bool = False) -> int:
            if not isinstance(t, Tree):
                return table.node(_leaf_id(vocab, t, is_word), ())
            return table.node(vocab.get(t.label(), UNKNOWN), [visit(c, len(t) == 1) for c in t[:max_children]])

        roots, set_starts = [], [0]
        for cands in sets:
            if isinstance(cands, (TreeSetDAG, CandidateArrays)):
                if not share:
                    raise StructPrefError("share=False needs the candidates as trees, not a TreeSetDAG")
                if isinstance(cands, TreeSetDAG):
                    cands = CandidateArrays.of(cands)
                prod, dag_roots = cands.productions, cands.roots
                if dag_roots.size and not 0 <= dag_roots.min() <= dag_roots.max() < len(prod):
                    raise StructPrefError("the TreeSetDAG's roots must be its nodes")
                roots.extend(table.add_dag(prod, cands.kid_off, cands.kids, dag_roots,
                                           *self._templates_of(cands.symbols, prod)).tolist())
            else:
                roots.extend(visit(t) for t in cands)
            set_starts.append(len(roots))
        labels, children, heights = table.arrays()
        return LabelDAG(labels, children, heights, np.asarray(roots, dtype=np.int64),
                        np.asarray(set_starts, dtype=np.int64))


def concat_label_dags(parts: Sequence[LabelDAG]) -> LabelDAGBatch:
    """One network input holding the sets of every part, in order (no
    sharing across parts): a minibatch from sets converted once each, each
    laid out once. Log probabilities are carried when every part has
    them."""
    return LabelDAGBatch(parts)


@registry.architectures("spacy_structpref.RecursiveNet.v1")
def RecursiveNet(width: int = 25, max_children: int = 15, n_labels: int = 2,
                 init_scale: float = 0.01, seed: int = 0, log_p_input: bool = False,
                 log_p_a: float = 1.0, log_p_b: float = 0.0, batched: bool = True) -> Model[Input, np.ndarray]:
    """Utilities ``U(x)`` (one per candidate) of a :class:`LabelDAG`;
    ``log_p_input`` adds ``v·(log_p_a·log p + log_p_b)`` (the DAG must carry
    ``log_p``). ``batched=False`` computes node by node in double precision
    (the slow reference of the batched passes; the weights and their saves
    are the same)."""
    if width < 1 or max_children < 1 or n_labels < 2 or init_scale <= 0:
        raise StructPrefError("RecursiveNet needs width >= 1, max_children >= 1, n_labels >= 2 "
                              f"and init_scale > 0, got {width}, {max_children}, {n_labels}, "
                              f"{init_scale}")
    params = {"E": None, "W": None, "b": None, "o": None}
    if log_p_input:
        params["v"] = None
    return Model("recursive_net", _forward if batched else _forward_node_by_node, init=_init, params=params,
                 dims={"nO": width, "nK": max_children, "nV": n_labels},
                 attrs={"init_scale": init_scale, "seed": seed, "log_p_input": bool(log_p_input),
                        "log_p_a": float(log_p_a), "log_p_b": float(log_p_b)})


def _init(model: Model, X=None, Y=None) -> Model:
    H, K, V = model.get_dim("nO"), model.get_dim("nK"), model.get_dim("nV")
    rng = np.random.default_rng(model.attrs["seed"])
    s = model.attrs["init_scale"]
    for name, shape in (("E", (V, H)), ("W", (K, H, H)), ("b", (H,)), ("o", (H,))):
        model.set_param(name, model.ops.asarray(rng.uniform(-s, s, shape).astype("f")))
    if model.attrs["log_p_input"]:
        model.set_param("v", model.ops.asarray(np.ones(1, dtype="f")))
    return model


def node_states(model: Model, dag: Input):
    """The state ``u(v)`` of every node of the DAG, one row each, on the
    model's device (the candidates' root states ``[dag.roots]`` are the
    adaptive representation of Menchetti et al. 2005, §6.3.3: Table 4 and
    Fig. 2)."""
    plan = _LevelPlan(dag, model)
    U, child_states = _level_states(model, plan)
    states = model.ops.xp.take(U, plan.position, axis=0)
    if child_states is None:  # the kernels' U is scratch
        _SCRATCH.give(U)
    return states


def _checked_layout(model: Model, dag: Input) -> Layout:
    """The DAG's layout, with clear errors for a DAG that does not fit the
    network (label ids, number of children, roots; the layout checks the
    child ids and heights)."""
    E, W = model.get_param("E"), model.get_param("W")
    layout = dag.layout
    labels = layout.labels
    if labels.size and not 0 <= labels.min() <= labels.max() < E.shape[0]:
        raise StructPrefError(f"label ids {int(labels.min())}–{int(labels.max())} are outside the "
                              f"network's {E.shape[0]} labels: build the DAG with the network's vocabulary")
    if layout.pair_of.shape[1] > W.shape[0]:
        raise StructPrefError(f"the DAG has nodes of {layout.pair_of.shape[1]} children, this network at most "
                              f"{W.shape[0]}")
    if dag.roots.size and not 0 <= dag.roots.min() <= dag.roots.max() < dag.n_nodes:
        raise StructPrefError("the DAG's roots must be node ids")
    return layout


def _order(dag: Input) -> np.ndarray:
    """Node ids, children before parents."""
    return np.ascontiguousarray(np.concatenate(dag.levels) if dag.levels else np.zeros(0), dtype=np.int_)


class _LevelPlan:
    """A DAG laid out for the batched passes (every node of a height at
    once, heights bottom up: our batching of the network's recursion).
    Rows: the nodes in height order, in a height by falling number of
    children, so that the rows with a k-th child are a prefix of their
    height. Pairs: the distinct (child, position k) pairs, ``W_k u(child)``
    each computed once however many parents share it (hash-consed DAGs
    share children widely). Index arrays are int32 on the model's device.

    ``position[v]``: node v's row; ``labels`` per row; ``level_ends``: each
    height's end row; ``pair_of[r, k]``: the pair of row r's k-th edge (-1:
    none); ``pair_child``: each pair's child row; ``pair_bounds[k, h]``: the
    first pair of position k whose child has height h or more; ``roots``:
    each candidate's root row. The array path reads them as ``levels``: per
    height ``(start, end, fill, blocks)``, ``fill[k]`` the number of its rows
    with a k-th child, ``blocks``: ``(k, a, b)``, the pairs ``a:b`` of
    position k whose child has this height; and ``positions``: ``(k, a,
    b)``, the pairs of each position."""

    def __init__(self, dag: Input, model: Model):
        layout = _checked_layout(model, dag)
        self.fills, self.pair_bounds, self.level_ends = layout.fills, layout.pair_bounds, layout.level_ends
        ops = model.ops
        self.position = ops.asarray(layout.position)
        self.labels = ops.asarray(layout.labels)
        self.pair_of = ops.asarray(layout.pair_of)
        self.pair_child = ops.asarray(layout.pair_child)
        self.roots = ops.asarray(layout.position[dag.roots])

    @cached_property  # the array path reads it forward and backward
    def levels(self) -> List[tuple]:
        bounds = self.pair_bounds.tolist()
        starts = [0, *self.level_ends[:-1].tolist()]
        return [(start, int(end), [int(m) for m in fill if m],
                 [(k, b[h], b[h + 1]) for k, b in enumerate(bounds) if b[h + 1] > b[h]])
                for h, (start, end, fill) in enumerate(zip(starts, self.level_ends, self.fills))]

    @cached_property
    def positions(self) -> List[tuple]:
        return [(k, b[0], b[-1]) for k, b in enumerate(self.pair_bounds.tolist())]


class _Scratch:
    """Float32 work arrays of the CPU kernels, reused from one pass to the
    next: a fresh array of a few megabytes costs a page fault per 4 KiB
    (the allocator hands big blocks back to the system when they are
    freed), a third of a minibatch's time at a state of 25. An array is
    taken while a pass uses it and given back after it, so passes that
    overlap (two ``begin_update`` before their backprops, threads) each
    get their own; at most ``keep`` blocks wait, the largest kept."""

    def __init__(self, keep: int = 6):
        self.keep = keep
        self._free: List[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, rows: int, width: int, zero: bool = False) -> np.ndarray:
        n = rows * width
        with self._lock:
            fits = [i for i, block in enumerate(self._free) if block.size >= n]
            block = self._free.pop(min(fits, key=lambda i: self._free[i].size)) if fits else None
        if block is None:
            block = np.empty(max(n, 1), dtype=np.float32)
        out = block[:n].reshape(rows, width)
        if zero:
            out.fill(0.0)
        return out

    def give(self, *arrays: np.ndarray) -> None:
        with self._lock:
            self._free.extend(a.base if a.base is not None else a for a in arrays)
            self._free.sort(key=lambda block: -block.size)
            del self._free[self.keep:]


_SCRATCH = _Scratch()


def _uses_kernels(model: Model, dtype) -> bool:
    """Whether the passes run as the Cython kernels of ``_recursive.pyx``:
    single precision with numpy ops. Others (cupy's on a GPU, double
    weights) go height by height through the array module."""
    return isinstance(model.ops, NumpyOps) and dtype == np.float32


# products of at most this many multiply-adds go to numpy's BLAS on a CPU: it runs
# them on one thread, at a fraction of the fixed cost of a BLIS call; larger ones
# would be split across threads, which contend on a loaded machine
_SMALL_PRODUCT = 1 << 18


def _gemm(ops, dtype):
    """``ops.gemm``, except for double weights (Thinc's BLIS kernel takes
    float32 only) and for small products on a CPU: those through the
    array module."""
    def dot(x, y, out=None, trans1=False, trans2=False):
        x, y = (x.T if trans1 else x), (y.T if trans2 else y)
        return ops.xp.dot(x, y) if out is None else ops.xp.dot(x, y, out=out)

    if dtype != np.float32:
        return dot
    if ops.xp is not np:
        return ops.gemm

    def gemm(x, y, out=None, trans1=False, trans2=False):
        rows, inner = x.shape[::-1] if trans1 else x.shape
        small = rows * inner * y.shape[0 if trans2 else 1] <= _SMALL_PRODUCT
        return (dot if small else ops.gemm)(x, y, out=out, trans1=trans1, trans2=trans2)

    return gemm


def _level_states(model: Model, plan: _LevelPlan):
    """Every row's state, and per pair its child's state (None from the
    kernels, whose backward pass reads the child's row): per height the
    pre-activations ``ω_0 + Ω z(label)`` plus the products of the rows'
    edges, then tanh (Menchetti et al. 2005, eq. 5), then ``W_k u(child)``
    of the pairs whose child has that height (through the array module:
    one gather per child position, one product ``U_children W_kᵀ``)."""
    xp = model.ops.xp
    E, W, b = (model.get_param(n) for n in ("E", "W", "b"))
    n_pairs = len(plan.pair_child)
    if _uses_kernels(model, E.dtype):
        from ._recursive import plan_forward

        U, products = _SCRATCH.take(len(plan.labels), E.shape[1]), _SCRATCH.take(n_pairs, E.shape[1])
        plan_forward(plan.labels, plan.pair_of, plan.pair_child, plan.level_ends, plan.pair_bounds,
                     *(np.ascontiguousarray(a) for a in (E, W, b)), U, products)
        _SCRATCH.give(products)
        return U, None
    gemm = _gemm(model.ops, E.dtype)
    U = xp.take(E, plan.labels, axis=0)
    U += b
    child_states = xp.empty((n_pairs, U.shape[1]), dtype=U.dtype)
    products = xp.empty_like(child_states)
    for start, end, fill, blocks in plan.levels:
        pre = U[start:end]
        for k, m in enumerate(fill):
            pre[:m] += xp.take(products, plan.pair_of[start:start + m, k], axis=0)
        xp.tanh(pre, out=pre)
        for k, a, b in blocks:
            xp.take(U, plan.pair_child[a:b], axis=0, out=child_states[a:b])
            gemm(child_states[a:b], W[k], out=products[a:b], trans2=True)
    return U, child_states


def _log_p_input(model: Model, dag: Input, dtype):
    """``a·log p + b`` of each candidate on the model's device (None: the net has no such input)."""
    if not model.attrs["log_p_input"]:
        return None
    if dag.log_p is None:
        raise StructPrefError("the network takes a log p input: build the DAG from sets with "
                              "log probabilities (ScoredTrees)")
    log_p = model.attrs["log_p_a"] * np.asarray(dag.log_p, dtype=np.float64) + model.attrs["log_p_b"]
    return model.ops.asarray(log_p, dtype=dtype)


def _forward(model: Model, dag: Input, is_train: bool):
    """Forward and backward height by height (backpropagation through
    structure, Goller & Küchler 1996). The backward pass takes the heights
    top down: the gradients of the pairs whose child has the height go to
    the children (``dP W_k``), then the height's gradients at the
    pre-activations go to its edges' pairs; ``dW_k = dPᵀ U_children`` over
    each position's pairs."""
    ops, xp = model.ops, model.ops.xp
    W, o = model.get_param("W"), model.get_param("o")
    plan = _LevelPlan(dag, model)
    gemm = _gemm(ops, W.dtype)
    U, child_states = _level_states(model, plan)
    root_states = xp.take(U, plan.roots, axis=0)
    scores = gemm(root_states, o.reshape(-1, 1)).reshape(-1)
    log_p_in = _log_p_input(model, dag, W.dtype)
    if log_p_in is not None:
        scores = scores + model.get_param("v")[0] * log_p_in
    kernels = child_states is None  # U is scratch, given back when the backward pass is done
    if kernels and not is_train:
        _SCRATCH.give(U)
        U = None
    used = []

    def backprop(d_scores) -> Input:
        if U is None or used:
            raise StructPrefError("the recursive net's backprop runs once, after begin_update")
        used.append(True)
        d_scores = ops.asarray(d_scores, dtype=W.dtype).reshape(-1, 1)
        # dX: the gradient at each row's state, then (in place, height by height) at its pre-activation
        dE, dW = xp.zeros_like(model.get_param("E")), xp.zeros_like(W)
        if kernels:
            from ._recursive import plan_backward

            dX, d_pairs = _SCRATCH.take(*U.shape, zero=True), _SCRATCH.take(len(plan.pair_child), U.shape[1], True)
            ops.scatter_add(dX, plan.roots, xp.ascontiguousarray(d_scores * o))
            db = xp.zeros_like(model.get_param("b"))
            plan_backward(plan.labels, plan.pair_of, plan.pair_child, plan.level_ends, plan.pair_bounds,
                          np.ascontiguousarray(W), U, dX, d_pairs, dE, db, dW)
            _SCRATCH.give(U, dX, d_pairs)
        else:
            dX = xp.zeros_like(U)
            ops.scatter_add(dX, plan.roots, xp.ascontiguousarray(d_scores * o))
            d_pairs = xp.zeros((len(plan.pair_child), U.shape[1]), dtype=U.dtype)
            _backward_levels(ops, plan, W, U, child_states, dX, d_pairs)
            _position_grads(gemm, plan, d_pairs, child_states, dW)
            ops.scatter_add(dE, plan.labels, dX)
            db = dE.sum(axis=0)
        model.inc_grad("E", dE)
        model.inc_grad("W", dW)
        model.inc_grad("b", db)
        model.inc_grad("o", gemm(root_states, d_scores, trans1=True).reshape(-1))
        if log_p_in is not None:
            model.inc_grad("v", (log_p_in.reshape(1, -1) @ d_scores).reshape(1))
        return dag

    return scores, backprop


def _position_grads(gemm, plan: _LevelPlan, d_pairs, child_states, dW) -> None:
    """``dW_k = dPᵀ U_children`` over the pairs of each position k."""
    for k, a, b in plan.positions:
        if b > a:
            gemm(d_pairs[a:b], child_states[a:b], out=dW[k], trans1=True)


def _backward_levels(ops, plan: _LevelPlan, W, U, child_states, dX, d_pairs) -> None:
    """The backward pass through the array module: ``dX`` from the
    gradients at the states to those at the pre-activations, ``d_pairs``
    filled in."""
    gemm = _gemm(ops, W.dtype)
    d_tanh = U * U
    ops.xp.subtract(1, d_tanh, out=d_tanh)
    for start, end, fill, blocks in reversed(plan.levels):
        for k, a, b in blocks:  # a pair's parents are all higher: its gradient is complete
            ops.scatter_add(dX, plan.pair_child[a:b], gemm(d_pairs[a:b], W[k]))
        d_pre = dX[start:end]
        d_pre *= d_tanh[start:end]
        for k, m in enumerate(fill):
            ops.scatter_add(d_pairs, ops.xp.ascontiguousarray(plan.pair_of[start:start + m, k]), d_pre[:m])


def _node_states(model: Model, dag: Input) -> np.ndarray:
    """Every node's state in double precision, node by node (the reference)."""
    from ._recursive import forward

    _checked_layout(model, dag)
    E, W, b = (model.ops.to_numpy(model.get_param(n)) for n in ("E", "W", "b"))
    U = np.zeros((dag.n_nodes, E.shape[1]), dtype=np.float64)
    forward(_order(dag), np.ascontiguousarray(dag.labels, dtype=np.int_),
            np.ascontiguousarray(dag.children, dtype=np.int_), _f64(E), _f64(W), _f64(b), U)
    return U


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def _forward_node_by_node(model: Model, dag: Input, is_train: bool):
    """The passes node by node in double precision (``_recursive.pyx``):
    the reference the batched ones are checked against."""
    ops = model.ops
    E, W, o = (ops.to_numpy(model.get_param(n)) for n in ("E", "W", "o"))
    U64 = _node_states(model, dag)
    U = U64.astype(E.dtype, copy=False)
    scores = U[dag.roots] @ o
    log_p_in = _log_p_input(model, dag, E.dtype)
    if log_p_in is not None:
        log_p_in = ops.to_numpy(log_p_in)
        scores = scores + ops.to_numpy(model.get_param("v"))[0] * log_p_in

    def backprop(d_scores) -> LabelDAG:
        from ._recursive import backward

        d_scores = np.asarray(ops.to_numpy(d_scores), dtype=np.float64)
        dU = np.zeros_like(U64)
        np.add.at(dU, dag.roots, np.outer(d_scores, o))
        dE, dW, db = np.zeros(E.shape), np.zeros(W.shape), np.zeros(W.shape[1])
        backward(_order(dag), np.ascontiguousarray(dag.labels, dtype=np.int_),
                 np.ascontiguousarray(dag.children, dtype=np.int_), _f64(W), U64, dU, dE, dW, db)
        do = U64[dag.roots].T @ d_scores
        for name, grad in (("E", dE), ("W", dW), ("b", db), ("o", do)):
            model.inc_grad(name, ops.asarray(grad, dtype=E.dtype))
        if log_p_in is not None:
            model.inc_grad("v", ops.asarray([d_scores @ log_p_in], dtype=E.dtype))
        return dag

    return ops.asarray(scores), backprop
