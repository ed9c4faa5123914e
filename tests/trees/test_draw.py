"""Tree pictures laid out by leaf widths (trees/draw.py): as wide as their
words, no two labels of a row overlapping, scalable (viewBox)."""
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from nltk.tree import Tree

from spacy_structpref.trees.brackets import parse_bracketed
from spacy_structpref.trees.draw import FONT, GAP, MARGIN, layout, leaf_widths, text_width, tree_to_svg

from tests.helpers.strategies import trees

# a 33-word sentence: the PTB sample's test split, sentence 55
LONG = ("(TOP (S (NP (NNP Nixon)) (VP (VP (VBD concluded) (NP (NP (CD five) (NNS days)) (PP (IN of) (NP (NP (JJ "
        "private) (NNS talks)) (PP (IN with) (NP (JJ Chinese) (NNS leaders))) (PP (IN in) (NP (NNP Beijing))))))) "
        "(, ,) (CC but) (VP (ADVP (RB apparently)) (VBD failed) (S (VP (TO to) (VP (VB ease) (NP (NP (NNS strains)) "
        "(PP (IN in) (NP (JJ Sino-U.S.) (NNS ties))) (VP (VBN caused) (PP (IN by) (NP (NP (NP (NNP China) (POS 's)) "
        "(NN crackdown)) (PP (IN against) (NP (JJ pro-democracy) (NNS protesters))) (PP (IN in) (NP (NNP June))))"
        ")))))))) (. .)))")


def _size(svg: str):
    root = ET.fromstring(svg)
    return float(root.get("width")), float(root.get("height")), root.get("viewBox")


def test_long_tree_is_as_wide_as_its_leaves():
    tree = parse_bracketed(LONG)
    assert len(tree.leaves()) == 33
    width, height, view_box = _size(tree_to_svg(tree))
    columns = sum(leaf_widths(tree))
    # the columns fill the picture: no blank third (the old drawing: 1,892 px for this tree)
    assert columns + 2 * MARGIN <= width <= 1.02 * columns + 2 * MARGIN
    assert view_box == f"0 0 {width:.0f} {height:.0f}"
    # an independent bound: DejaVu Sans is at most ~0.85 em a character (bold capitals), plus the gaps
    chars = sum(max(len(w), len(t)) for w, t in tree.pos())
    assert width <= 0.85 * FONT * chars + 33 * GAP + 2 * MARGIN
    assert width < 1500


def test_text_width_measures_the_font():
    assert text_width("") == 0
    assert text_width("mmmm") > text_width("iiii") > 0  # proportional, not a fixed width a character
    assert text_width("NNS", "label") > text_width("NNS", "word")  # bold is wider
    assert abs(text_width("concluded") - (text_width("conc") + text_width("luded"))) < 2


def _label_boxes(tree: Tree):
    """(row y, left, right) of every text, as drawn."""
    pos, _, _ = layout(tree)
    boxes = []
    for tp, (x, y) in pos.items():
        node = tree[tp]
        w = text_width(node.label(), "label") if isinstance(node, Tree) else text_width(str(node), "word")
        boxes.append((y, x - w / 2, x + w / 2))
    return boxes


@settings(max_examples=60, deadline=None)
@given(trees(max_depth=5, labels=["S", "NP", "VP", "WHADVP-TMP-LONG"], words=["a", ",", "extraordinarily"]))
def test_no_two_texts_of_a_row_overlap_and_the_picture_holds_them(tree):
    pos, width, height = layout(tree)
    boxes = _label_boxes(tree)
    rows = {}
    for y, left, right in boxes:
        assert 0 <= left and right <= width
        rows.setdefault(y, []).append((left, right))
    for spans in rows.values():
        spans.sort()
        for (_, right), (left, _) in zip(spans, spans[1:]):
            assert right <= left + 1e-6
    # every parent above its children; leaves on the bottom row, in order
    for tp, (x, y) in pos.items():
        if tp:
            assert pos[tp[:-1]][1] < y
    xs = [pos[lp][0] for lp in tree.treepositions("leaves")]
    assert xs == sorted(xs)
    # as wide as the leaf columns unless a label is wider than what it spans
    assert width >= sum(leaf_widths(tree)) + 2 * MARGIN - 1e-6


def test_svg_texts_and_colours():
    tree = parse_bracketed("(TOP (S (NP (DT The) (NN cat)) (VP (VBZ sits))))")
    svg = tree_to_svg(tree, colors={(0, 0): "#e66101"})
    texts = [e.text for e in ET.fromstring(svg) if e.tag.endswith("text")]
    assert sorted(texts) == sorted(["TOP", "S", "NP", "DT", "NN", "VP", "VBZ", "The", "cat", "sits"])
    assert re.search(r'fill="#e66101">NP<', svg)
