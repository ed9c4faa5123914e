"""Tree kernels on hash-consed tree sets (:class:`~..trees.dag.TreeSetDAG`):
a kernel block between two sets computes Δ once per distinct node pair,
however many trees share the nodes, and a weighted sum over a support set
folds the weights into its distinct subtrees (Aiolli et al. 2006's DAG
view of the Collins & Duffy 2002 kernel). Values that overflow the fast
loops are recomputed with logarithms, as in :mod:`.trees`. A self-kernel
needs a table over one tree's distinct node pairs: a tree of more than
``max_nodes`` distinct nodes is refused (see :mod:`.inputs`)."""
import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, TreeArrays, offsets
from ..trees.dag import TreeSetDAG
from . import _kernels
from .inputs import MAX_NODES, check_lambda, check_max_nodes, check_sigma, check_sizes
from .numerics import cosine, finite_or_raise, log_cosine, log_parameters, with_logs
from .trees import pack


def _packed(dag: TreeSetDAG):
    """The whole DAG packed as one "tree" for the Cython loops, and per
    distinct subtree the trees it occurs in (ascending) and how often."""
    packed = dag.cache.get("packed")
    if packed is None:
        prod, kid_off, kids = dag.dag_arrays()
        n = len(prod)
        zeros = np.zeros(n, dtype=INT)
        # kid_off doubles as child_start: the DAG's children hold no word references
        arrays = pack([TreeArrays(zeros, prod, zeros, zeros, kid_off, kids, 0, dag.symbols)])
        tree_of, node, cnt = dag.occurrence_arrays()
        order = np.argsort(node, kind="stable")
        by_node = (_offsets(node[order], n), tree_of[order].astype(INT), cnt[order])
        packed = dag.cache["packed"] = (arrays, by_node)
    return packed


def dag_nbytes(dag: TreeSetDAG) -> int:
    """Memory held by the packed DAG and its occurrence lists."""
    arrays, by_node = _packed(dag)
    names = ("node_off", "prod", "kid_off", "kids", "run_off", "run_prod", "run_start", "order")
    return int(sum(getattr(arrays, k).nbytes for k in names) + sum(a.nbytes for a in by_node))


def dag_self_kernels(dag: TreeSetDAG, lam: float = 0.4, sigma: float = 1, max_nodes: int = MAX_NODES) -> np.ndarray:
    """K(t, t) of every tree of the set, computed on the DAG and cached per
    (λ, σ) (a :class:`StructPrefError` if one is beyond the double range, or
    a tree has more than ``max_nodes`` distinct nodes)."""
    return finite_or_raise(_self_kernels(dag, check_lambda(lam), check_sigma(sigma), check_max_nodes(max_nodes)),
                           "self-kernel")


def _self_kernels(dag: TreeSetDAG, lam: float, sigma: float, max_nodes: int) -> np.ndarray:
    """K(t, t), inf where it overflows."""
    key = ("self_kernels", lam, sigma)
    done = dag.per_tree.get(key, np.zeros(0))
    if len(done) < len(dag):  # the trees added since the last call: only theirs
        lists = _tree_lists(*dag.occurrence_arrays(len(done)), len(dag) - len(done))
        check_sizes(np.diff(lists[0]), max_nodes, "tree", "split it")
        new = _kernels.dag_self_kernels(*dag.dag_arrays(), *lists, lam, sigma)
        done = dag.per_tree[key] = np.concatenate([done, new])
    return done


def _finite_self_kernels(dag: TreeSetDAG, lam: float, sigma: float, max_nodes: int) -> bool:
    """Whether no K(t, t) of the set overflows (cached while the set is unchanged)."""
    key = ("finite_self_kernels", lam, sigma)
    finite = dag.cache.get(key)
    if finite is None:
        finite = dag.cache[key] = bool(np.isfinite(_self_kernels(dag, lam, sigma, max_nodes)).all())
    return finite


def _log_self_kernels(dag: TreeSetDAG, lam: float, sigma: float, max_nodes: int) -> np.ndarray:
    """log K(t, t), recomputed with logarithms for the trees where K(t, t) overflows."""
    def exact(bad):
        trees = np.flatnonzero(bad)
        tree_of, node, cnt = dag.occurrence_arrays()
        keep = np.isin(tree_of, trees)
        lists = _tree_lists(np.searchsorted(trees, tree_of[keep]), node[keep], np.log(cnt[keep]), len(trees))
        return _kernels.dag_self_kernels(*dag.dag_arrays(), *lists, *log_parameters(lam, sigma), True)

    return with_logs(_self_kernels(dag, lam, sigma, max_nodes), exact)


def _tree_lists(tree_of: np.ndarray, node: np.ndarray, cnt: np.ndarray, n_trees: int):
    """``(tree_off, nodes, cnt)`` as ``_kernels.dag_self_kernels`` reads them:
    each tree's distinct nodes ascending (children first), from occurrence
    arrays in that order already (``TreeSetDAG.occurrence_arrays``, or a
    selection of them in order)."""
    return _offsets(tree_of, n_trees), node, cnt


def _production_index(dag: TreeSetDAG):
    """The DAG indexed for :func:`_kernels.dag_node_sums` (cached): its
    nodes renumbered in production order (node ids ascending within a
    production), as ``(order, (run_of_prod, run_start, prod, kid_off,
    kids))``, ``order`` giving the old id of each new number."""
    index = dag.cache.get("production_index")
    if index is None:
        packed = _packed(dag)[0]
        order = packed.order
        run_of_prod = np.full(packed.max_prod + 1, -1, dtype=INT)
        run_of_prod[packed.run_prod] = np.arange(len(packed.run_prod), dtype=INT)
        position = np.empty(len(order), dtype=INT)
        position[order] = np.arange(len(order), dtype=INT)
        counts = np.diff(packed.kid_off)[order]
        kid_off = offsets(counts, INT)
        # kid slot i of new node k: old slot packed.kid_off[order[k]] + (i - kid_off[k])
        slots = np.repeat(packed.kid_off[order] - kid_off[:-1], counts) + np.arange(kid_off[-1], dtype=INT)
        kids = position[packed.kids[slots]]
        index = dag.cache["production_index"] = (order, (run_of_prod, packed.run_start, packed.prod[order],
                                                         kid_off, kids))
    return index


def _check_pair(a: TreeSetDAG, b: TreeSetDAG) -> None:
    if b.symbols is not a.symbols:
        raise StructPrefError("mismatched vocabularies: the two tree sets use different SymbolTables")


def dag_kernel_block(a: TreeSetDAG, b: TreeSetDAG = None, lam: float = 0.4, sigma: float = 1,
                     normalize: bool = False, return_pairs: bool = False, max_nodes: int = MAX_NODES):
    """``K[i, j]`` = tree kernel between tree i of ``a`` and tree j of ``b``
    (default: ``a``). ``return_pairs`` also returns how many distinct node
    pairs Δ was computed for. ``max_nodes``: see :func:`dag_self_kernels`."""
    lam, sigma, max_nodes = check_lambda(lam), check_sigma(sigma), check_max_nodes(max_nodes)
    b = a if b is None else b
    _check_pair(a, b)
    if not len(a) or not len(b):
        K, n_pairs = np.zeros((len(a), len(b))), 0
    else:
        (pa, occ_a), (pb, occ_b) = _packed(a), _packed(b)
        K, n_pairs = _kernels.dag_block(pa, pb, *occ_a, *occ_b, len(a), len(b), lam, sigma)
    if not normalize:
        K = finite_or_raise(K, "kernel")
    else:
        da, db = _self_kernels(a, lam, sigma, max_nodes), _self_kernels(b, lam, sigma, max_nodes)
        if np.isfinite(K).all() and np.isfinite(da).all() and np.isfinite(db).all():
            K = cosine(K, da, db)
        else:
            log_K = with_logs(K, lambda bad: _log_block(a, b, lam, sigma)[bad])
            K = log_cosine(log_K, _log_self_kernels(a, lam, sigma, max_nodes),
                           _log_self_kernels(b, lam, sigma, max_nodes))
    return (K, n_pairs) if return_pairs else K


def _log_block(a: TreeSetDAG, b: TreeSetDAG, lam: float, sigma: float) -> np.ndarray:
    """log K between the trees of two sets, computed with logarithms."""
    (pa, (off_a, tree_a, cnt_a)), (pb, (off_b, tree_b, cnt_b)) = _packed(a), _packed(b)
    return _kernels.dag_block(pa, pb, off_a, tree_a, np.log(cnt_a), off_b, tree_b, np.log(cnt_b), len(a), len(b),
                              *log_parameters(lam, sigma), True)[0]


def _node_weights(dag: TreeSetDAG, weights: np.ndarray, lam: float, sigma: float,
                  normalize: bool, max_nodes: int) -> np.ndarray:
    """Σ over the trees holding each DAG node of weight × occurrences. A
    support set is scored against many candidate sets with the same
    weights: the last folding is kept and reused while they are equal."""
    key = (lam, sigma, normalize)
    folded = dag.cache.get("folded")
    if folded is not None and folded[0] == key and np.array_equal(folded[1], weights):
        return folded[2]
    tree_weight = weights / np.sqrt(dag_self_kernels(dag, lam, sigma, max_nodes)) if normalize else weights
    off, tree_of, cnt = _packed(dag)[1]
    n = dag.n_dag_nodes
    node_weight = np.bincount(np.repeat(np.arange(n), np.diff(off)), cnt * tree_weight[tree_of],
                              minlength=n)
    dag.cache["folded"] = (key, weights.copy(), node_weight)
    return node_weight


def dag_weighted_sums(a: TreeSetDAG, weights, b: TreeSetDAG, lam: float = 0.4, sigma: float = 1,
                      normalize: bool = False, max_nodes: int = MAX_NODES) -> np.ndarray:
    """``Σ_i weights[i] K(a_i, b_j)`` for every tree j of ``b``: a learner's
    utilities over its support trees in one pass. The weights are folded
    into the DAG nodes of ``a`` (a distinct subtree weighs Σ weight ×
    occurrences over the trees holding it), so the cost grows with the
    distinct subtrees of ``a``, not with its number of trees; ``a`` is
    indexed by production once (cached while it is unchanged: a support
    scored against many candidate sets), so a node of ``b`` visits only the
    nodes of ``a`` with its production. The sums run in the order of
    ``dag_block``'s weighted column, and equal it bit for bit. The weights
    must be finite numbers; ``max_nodes``: see :func:`dag_self_kernels`."""
    return dag_weighted_sums_over([(a, weights)], b, lam, sigma, normalize, max_nodes)


def dag_weighted_sums_over(supports, b: TreeSetDAG, lam: float = 0.4, sigma: float = 1, normalize: bool = False,
                           max_nodes: int = MAX_NODES) -> np.ndarray:
    """:func:`dag_weighted_sums` summed over ``supports``, pairs ``(a,
    weights)``: the utilities of a support held in several sets (a
    perceptron's chunks) in one pass over ``b``, each support's sums per
    node of ``b`` added before they are gathered into its trees. One support
    gives :func:`dag_weighted_sums` bit for bit; several, the sum of their
    separate calls up to rounding."""
    lam, sigma, max_nodes = check_lambda(lam), check_sigma(sigma), check_max_nodes(max_nodes)
    supports = [(a, _checked_weights(a, b, weights)) for a, weights in supports]
    supports = [(a, weights) for a, weights in supports if len(a)]
    if not supports or not len(b):
        return np.zeros(len(b))
    if normalize and not (_finite_self_kernels(b, lam, sigma, max_nodes)
                          and all(_finite_self_kernels(a, lam, sigma, max_nodes) for a, _ in supports)):
        return _log_weighted_sums_over(supports, b, lam, sigma, normalize, max_nodes)
    # a's weights folded into its nodes, then per node u of b: S(u) = Σ_v w(v) Δ(u, v), v
    # over a's nodes of u's production only; a tree's sum is Σ_u c(u) S(u), u ascending
    node_sums, b_arrays = None, b.dag_arrays()
    for a, weights in supports:
        order, index = _production_index(a)
        part = _kernels.dag_node_sums(*index, _node_weights(a, weights, lam, sigma, normalize, max_nodes)[order],
                                      *b_arrays, lam, sigma)
        node_sums = part if node_sums is None else node_sums + part
    tree_of, nodes, cnt = b.occurrence_arrays()
    # bincount adds in input order: tree by tree, nodes ascending, as dag_block does
    sums = np.bincount(tree_of, cnt * node_sums[nodes], minlength=len(b))
    if not np.isfinite(sums).all():
        return _log_weighted_sums_over(supports, b, lam, sigma, normalize, max_nodes)
    if normalize:
        sums /= np.sqrt(_self_kernels(b, lam, sigma, max_nodes))
    return sums


def _checked_weights(a: TreeSetDAG, b: TreeSetDAG, weights) -> np.ndarray:
    """One support's weights as a float array, checked (and the two sets' vocabularies)."""
    _check_pair(a, b)
    try:
        weights = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise StructPrefError(f"the weights must be numbers, got {weights!r}") from None
    if weights.shape != (len(a),):
        raise StructPrefError(f"{len(a)} trees but weights of shape {weights.shape}")
    if not np.isfinite(weights).all():
        raise StructPrefError(f"the weights must be finite, got {weights[~np.isfinite(weights)][0]} for tree "
                              f"{int(np.flatnonzero(~np.isfinite(weights))[0])}")
    return weights


def _log_weighted_sums_over(supports, b: TreeSetDAG, lam: float, sigma: float, normalize: bool,
                            max_nodes: int) -> np.ndarray:
    """The sums of :func:`dag_weighted_sums_over` where they overflow: each
    support's with logarithms, then added."""
    sums = sum(_log_weighted_sums(a, weights, b, lam, sigma, normalize, max_nodes) for a, weights in supports)
    return finite_or_raise(sums, "kernel sum")


def _log_weighted_sums(a: TreeSetDAG, weights: np.ndarray, b: TreeSetDAG, lam: float, sigma: float,
                       normalize: bool, max_nodes: int) -> np.ndarray:
    """:func:`dag_weighted_sums` with logarithms: the positive and the
    negative weights are folded into two columns of log node weights."""
    with np.errstate(divide="ignore"):
        log_w = np.log(np.abs(weights))
    if normalize:
        log_w = log_w - _log_self_kernels(a, lam, sigma, max_nodes) / 2
    off, tree_of, cnt = _packed(a)[1]
    n = a.n_dag_nodes
    node = np.repeat(np.arange(n), np.diff(off))
    terms = np.log(cnt) + log_w[tree_of]
    columns = [_group_logsumexp(node[side], terms[side], n) for side in (weights[tree_of] > 0, weights[tree_of] < 0)]
    pa, (pb, (off_b, tree_b, cnt_b)) = _packed(a)[0], _packed(b)
    L, _ = _kernels.dag_block(pb, pa, off_b, tree_b, np.log(cnt_b), np.arange(0, 2 * n + 1, 2, dtype=INT),
                              np.tile(np.array([0, 1], dtype=INT), n), np.column_stack(columns).ravel(),
                              len(b), 2, *log_parameters(lam, sigma), True)
    if normalize:
        L -= _log_self_kernels(b, lam, sigma, max_nodes)[:, None] / 2
    with np.errstate(over="ignore", invalid="ignore"):  # beyond the double range: raised just below
        sums = np.exp(L[:, 0]) - np.exp(L[:, 1])
    return finite_or_raise(sums, "kernel sum")


def _group_logsumexp(groups: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``log Σ exp(values)`` per group id in ``range(n)`` (-inf for an empty group)."""
    top = np.full(n, -np.inf)
    np.maximum.at(top, groups, values)
    shift = np.where(np.isfinite(top), top, 0.0)
    total = np.zeros(n)
    np.add.at(total, groups, np.exp(values - shift[groups]))
    with np.errstate(divide="ignore"):
        return shift + np.log(total)


def _offsets(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(INT)
