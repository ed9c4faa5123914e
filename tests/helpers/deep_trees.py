"""Trees deeper than Python's recursion limit, for the tests that every
tree function walks them without recursing."""
from nltk.tree import Tree

DEPTH = 5000


def chain(depth: int, label=lambda level: "X") -> Tree:
    """``(TOP (X (X ... (NN w))))`` with ``depth`` X levels, built without recursion."""
    tree = Tree("NN", ["w"])
    for level in range(depth):
        tree = Tree(label(level), [tree])
    return Tree("TOP", [tree])
