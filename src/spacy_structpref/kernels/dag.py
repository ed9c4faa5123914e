"""Tree kernels on hash-consed tree sets (:class:`~..trees.dag.TreeSetDAG`):
a kernel block between two sets computes Δ once per distinct node pair,
however many trees share the nodes, and a weighted sum over a support set
folds the weights into its distinct subtrees (Aiolli et al. 2006's DAG
view of the Collins & Duffy 2002 kernel)."""
import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, TreeArrays
from ..trees.dag import TreeSetDAG
from . import _kernels
from .inputs import check_lambda, check_sigma
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


def dag_self_kernels(dag: TreeSetDAG, lam: float = 0.4, sigma: float = 1) -> np.ndarray:
    """K(t, t) of every tree of the set, computed on the DAG and cached per (λ, σ)."""
    key = ("self_kernels", check_lambda(lam), check_sigma(sigma))
    done = dag.per_tree.get(key, np.zeros(0))
    if len(done) < len(dag):
        tree_of, node, cnt = dag.occurrence_arrays(len(done))
        order = np.lexsort((node, tree_of))  # each tree's nodes ascending: children first
        tree_off = _offsets(tree_of, len(dag) - len(done))
        new = _kernels.dag_self_kernels(*dag.dag_arrays(), tree_off, node[order], cnt[order],
                                        key[1], key[2])
        done = dag.per_tree[key] = np.concatenate([done, new])
    return done


def _check_pair(a: TreeSetDAG, b: TreeSetDAG) -> None:
    if b.symbols is not a.symbols:
        raise StructPrefError("mismatched vocabularies: the two tree sets use different SymbolTables")


def dag_kernel_block(a: TreeSetDAG, b: TreeSetDAG = None, lam: float = 0.4, sigma: float = 1,
                     normalize: bool = False, return_pairs: bool = False):
    """``K[i, j]`` = tree kernel between tree i of ``a`` and tree j of ``b``
    (default: ``a``). ``return_pairs`` also returns how many distinct node
    pairs Δ was computed for."""
    lam, sigma = check_lambda(lam), check_sigma(sigma)
    b = a if b is None else b
    _check_pair(a, b)
    if not len(a) or not len(b):
        K, n_pairs = np.zeros((len(a), len(b))), 0
    else:
        (pa, occ_a), (pb, occ_b) = _packed(a), _packed(b)
        K, n_pairs = _kernels.dag_block(pa, pb, *occ_a, *occ_b, len(a), len(b), lam, sigma)
    if normalize:
        K /= np.sqrt(np.outer(dag_self_kernels(a, lam, sigma), dag_self_kernels(b, lam, sigma)))
    return (K, n_pairs) if return_pairs else K


def _node_weights(dag: TreeSetDAG, weights: np.ndarray, lam: float, sigma: float,
                  normalize: bool) -> np.ndarray:
    """Σ over the trees holding each DAG node of weight × occurrences. A
    support set is scored against many candidate sets with the same
    weights: the last folding is kept and reused while they are equal."""
    key = (lam, sigma, normalize)
    folded = dag.cache.get("folded")
    if folded is not None and folded[0] == key and np.array_equal(folded[1], weights):
        return folded[2]
    tree_weight = weights / np.sqrt(dag_self_kernels(dag, lam, sigma)) if normalize else weights
    off, tree_of, cnt = _packed(dag)[1]
    n = dag.n_dag_nodes
    node_weight = np.bincount(np.repeat(np.arange(n), np.diff(off)), cnt * tree_weight[tree_of],
                              minlength=n)
    dag.cache["folded"] = (key, weights.copy(), node_weight)
    return node_weight


def dag_weighted_sums(a: TreeSetDAG, weights, b: TreeSetDAG, lam: float = 0.4, sigma: float = 1,
                      normalize: bool = False) -> np.ndarray:
    """``Σ_i weights[i] K(a_i, b_j)`` for every tree j of ``b``: a learner's
    utilities over its support trees in one pass. The weights are folded
    into the DAG nodes of ``a`` (a distinct subtree weighs Σ weight ×
    occurrences over the trees holding it), so the cost grows with the
    distinct subtrees of ``a``, not with its number of trees."""
    lam, sigma = check_lambda(lam), check_sigma(sigma)
    _check_pair(a, b)
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(a),):
        raise StructPrefError(f"{len(a)} trees but weights of shape {weights.shape}")
    if not len(a) or not len(b):
        return np.zeros(len(b))
    node_weight = _node_weights(a, weights, lam, sigma, normalize)
    n = a.n_dag_nodes
    pa, pb = _packed(a)[0], _packed(b)
    # ``b`` as the rows, ``a`` collapsed into one weighted column
    K, _ = _kernels.dag_block(pb[0], pa, *pb[1], np.arange(n + 1, dtype=INT), np.zeros(n, dtype=INT),
                              node_weight, len(b), 1, lam, sigma)
    sums = K[:, 0]
    if normalize:
        sums /= np.sqrt(dag_self_kernels(b, lam, sigma))
    return sums


def _offsets(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(INT)
