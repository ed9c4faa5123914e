"""Tree and forest kernels: the Collins–Duffy subset-tree kernel and the
subtree kernel with Moschitti-style production joins, the packed-forest
kernel (Zhang et al. 2010), the composite reranking kernel, parallel Gram
matrices, and kernel blocks on hash-consed tree sets
(:class:`~spacy_structpref.trees.TreeSetDAG`) that compute each distinct
node pair once."""
from .composite import composite_gram, composite_kernel
from .dag import dag_kernel_block, dag_nbytes, dag_self_kernels, dag_weighted_sums, dag_weighted_sums_over
from .forests import PreparedForest, forest_block, forest_gram, forest_kernel, normalise_forest_gram
from .trees import TreeBatch, gram, pack, tree_kernel

__all__ = [
    "PreparedForest", "TreeBatch", "composite_gram", "composite_kernel", "dag_kernel_block", "dag_nbytes",
    "dag_self_kernels", "dag_weighted_sums", "dag_weighted_sums_over", "forest_block", "forest_gram", "forest_kernel", "gram",
    "normalise_forest_gram", "pack", "tree_kernel",
]
