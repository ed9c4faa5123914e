"""Features of a whole parse tree for a linear reranker, in the manner of
Charniak & Johnson (2005, §4): local rules with and without the grandparent,
child-label bigrams, constituent lengths and edges ("heavy" and "edges"
features), head words and head-to-dependent pairs of tags and of words
(heads found by the head table of Collins 1999, appendix A) and the shape
of coordinations. Each is a string; a learner hashes them.

Trees are NLTK trees of the treebank's form: a preterminal is a node whose
only child is a word, and unary chains are nested nodes.
"""
from typing import Dict, List, Sequence, Tuple

from nltk.tree import Tree

from ..errors import StructPrefError

# Collins (1999, appendix A): the direction to search the children in and
# the labels in order of priority; the first child (in that direction)
# with the first label found is the head, else the first child.
_HEAD_RULES = {
    "ADJP": ("left", "NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB"),
    "ADVP": ("right", "RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN"),
    "CONJP": ("right", "CC RB IN"),
    "FRAG": ("right", ""),
    "INTJ": ("left", ""),
    "LST": ("right", "LS :"),
    "NAC": ("left", "NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW"),
    "PP": ("right", "IN TO VBG VBN RP FW"),
    "PRN": ("left", ""),
    "PRT": ("right", "RP"),
    "QP": ("left", "$ IN NNS NN JJ RB DT CD NCD QP JJR JJS"),
    "RRC": ("right", "VP NP ADVP ADJP PP"),
    "S": ("left", "TO IN VP S SBAR ADJP UCP NP"),
    "SBAR": ("left", "WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG"),
    "SBARQ": ("left", "SQ S SINV SBARQ FRAG"),
    "SINV": ("left", "VBZ VBD VBP VB MD VP S SINV ADJP NP"),
    "SQ": ("left", "VBZ VBD VBP VB MD VP SQ"),
    "UCP": ("right", ""),
    "VP": ("left", "TO VBD VBN MD VBZ VB VBG VBP VP ADJP NN NNS NP"),
    "WHADJP": ("left", "CC WRB JJ ADJP"),
    "WHADVP": ("right", "CC WRB"),
    "WHNP": ("left", "WDT WP WP$ WHADJP WHPP WHNP"),
    "WHPP": ("right", "IN TO FW"),
}
HEAD_RULES: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    label: (direction, tuple(labels.split())) for label, (direction, labels) in _HEAD_RULES.items()}
# Collins's special case for noun phrases, searched in this order (each a
# direction and a label set; the last word when none matches)
_NP_RULES = (("right", {"NN", "NNP", "NNPS", "NNS", "NX", "POS", "JJR"}), ("left", {"NP"}),
             ("right", {"$", "ADJP", "PRN"}), ("right", {"CD"}), ("right", {"JJ", "JJS", "RB", "QP"}))
_CONJUNCT_SEPARATORS = {"CC", ",", ":"}


def head_child(label: str, children: Sequence[str]) -> int:
    """Index of the head among ``children`` (their labels) of a node labelled
    ``label`` (function tags and ``=n`` indices ignored), by Collins's table;
    a label the table lacks takes its first child, as his unknown labels do."""
    if not children:
        raise StructPrefError(f"a {label!r} node without children has no head")
    base = label.split("-")[0].split("=")[0] or label
    if base in ("NP", "NX"):
        for direction, labels in _NP_RULES:
            order = range(len(children) - 1, -1, -1) if direction == "right" else range(len(children))
            for i in order:
                if children[i] in labels:
                    return i
        return len(children) - 1
    direction, priority = HEAD_RULES.get(base, ("left", ()))
    order = list(range(len(children) - 1, -1, -1) if direction == "right" else range(len(children)))
    for wanted in priority:
        for i in order:
            if children[i] == wanted:
                return i
    return order[0]


def _bucket(length: int) -> int:
    """Lengths 1–5 as they are, then 6–7, 8–10, 11–20, 21 and more."""
    if length <= 5:
        return length
    return 6 if length <= 7 else (8 if length <= 10 else (11 if length <= 20 else 21))


def tree_features(tree: Tree) -> Tuple[List[str], int]:
    """``(features, number of constituents)`` of a parse tree (preterminals
    are not constituents). Every constituent contributes its rule, its rule
    under the grandparent, its child-label bigrams, its label with its length
    (bucketed) and with the words just outside it, its label, length bucket,
    whether it ends the sentence and its parent, its head word and its
    head-tagged rule, and for each non-head child the head's and the child's
    head tags and head words; a constituent with a CC child also gives its
    conjuncts' labels (and whether they are alike) and whether their lengths
    differ much."""
    if not isinstance(tree, Tree) or not len(tree):
        raise StructPrefError(f"tree features need a non-empty nltk Tree, got {tree!r}")
    words = [word.lower() for word in tree.leaves()]
    out: List[str] = []
    count = 0

    def visit(node: Tree, parent: str, start: int) -> Tuple[int, str, str]:
        nonlocal count
        if len(node) == 1 and isinstance(node[0], str):
            return start + 1, words[start], node.label()
        if any(isinstance(child, str) for child in node):
            raise StructPrefError(f"a {node.label()!r} node mixes words and constituents: not a treebank tree")
        label, kids = node.label(), [child.label() for child in node]
        count += 1
        rule = label + ">" + " ".join(kids)
        out.append("R:" + rule)
        out.append("G:" + parent + "^" + rule)
        out.extend(f"B:{label}:{a}_{b}" for a, b in zip(["<"] + kids, kids + [">"]))
        end, heads, spans = start, [], []
        for child in node:
            child_end, word, tag = visit(child, label, end)
            spans.append(child_end - end)
            heads.append((word, tag))
            end = child_end
        length = _bucket(end - start)
        before = words[start - 1] if start else "<s>"
        after = words[end] if end < len(words) else "</s>"
        out.append(f"L:{label}:{length}")
        out.append(f"E:{label}:{before}:{after}")
        out.append(f"H:{label}:{length}:{'final' if end == len(words) else 'mid'}:{parent}")
        h = head_child(label, kids)
        word, tag = heads[h]
        out.append(f"HW:{label}:{word}")
        out.append(f"HR:{tag}:{rule}")
        for i, (kid, (child_word, child_tag)) in enumerate(zip(kids, heads)):
            if i != h:
                side = "L" if i < h else "R"
                out.append(f"DT:{label}{side}{kid}:{tag}:{child_tag}")
                out.append(f"DW:{label}{side}{kid}:{word}:{child_word}")
        if "CC" in kids:
            conjuncts = [(kid, n) for kid, n in zip(kids, spans) if kid not in _CONJUNCT_SEPARATORS]
            labels = [kid for kid, _ in conjuncts]
            out.append(f"C:{label}:{'='.join(labels)}:{len(set(labels)) == 1}")
            if len(conjuncts) >= 2:
                gap = abs(_bucket(conjuncts[0][1]) - _bucket(conjuncts[-1][1]))
                out.append(f"CL:{label}:{min(2, gap // 3)}")
        return end, word, tag

    visit(tree, "ROOT", 0)
    return out, count
