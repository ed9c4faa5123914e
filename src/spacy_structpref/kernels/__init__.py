"""Tree and forest kernels (SPEC §4): the Collins–Duffy subset-tree kernel and
the subtree kernel with Moschitti-style production joins, the packed-forest
kernel, the composite reranking kernel, parallel Gram matrices, and
hash-consed tree sets whose kernel blocks compute each distinct node pair
once."""
from .dag import TreeSetDAG
from .forests import PreparedForest, forest_gram, forest_kernel
from .trees import TreeBatch, composite_gram, composite_kernel, gram, pack, tree_kernel

__all__ = [
    "PreparedForest", "TreeBatch", "TreeSetDAG", "composite_gram", "composite_kernel", "forest_gram",
    "forest_kernel", "gram", "pack", "tree_kernel",
]
