"""Slow reference for the subset-tree kernel on nltk trees (Collins & Duffy
2002), and the posterior distribution over a forest's trees that the forest
kernel's expectation is taken under."""
from nltk.tree import Tree


def production(node):
    return (node.label(), tuple(k.label() if isinstance(k, Tree) else "w:" + k for k in node))


def collins_duffy(t1, t2, lam):
    """Plain-Python subset-tree kernel (Collins & Duffy 2002), the slow reference."""
    nodes1 = list(t1.subtrees())
    nodes2 = list(t2.subtrees())
    memo = {}

    def delta(a, b):
        key = (id(a), id(b))
        if key not in memo:
            if production(a) != production(b):
                memo[key] = 0.0
            elif all(not isinstance(k, Tree) for k in a):
                memo[key] = lam
            else:
                out = lam
                for ka, kb in zip(a, b):
                    if isinstance(ka, Tree):
                        out *= 1 + delta(ka, kb)
                memo[key] = out
        return memo[key]

    return sum(delta(a, b) for a in nodes1 for b in nodes2)


def posterior_trees(forest, words):
    trees = list(forest.trees(words))
    total = sum(p for p, _ in trees)
    return [(p / total, t) for p, t in trees]
