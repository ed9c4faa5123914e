"""Trees as SVG pictures (no Tk, no browser), laid out by the widths of their
labels, so that a picture is as wide as its words and no wider.

Each leaf column (a word under its preterminal) is as wide as the wider of
the two texts plus a gap; a node spans its children's columns, widened (its
children centred) when its own label is wider than they are. A node stands
over the midpoint of its first and last child, moved inside its span when its
label would stick out, so that no two labels of one row overlap. Texts are
measured in DejaVu Sans (matplotlib's own font files), the first font the
picture asks for; a narrower fallback font only leaves more room. The SVG has
a ``viewBox``, so a page can scale it to its width (``max-width: 100%``).
"""
import functools
from typing import Dict, List, Optional, Tuple
from xml.sax.saxutils import escape

from nltk.tree import Tree

FONT, Y_STEP, MARGIN, GAP = 13, 38, 8, 6
FONT_FAMILY = "DejaVu Sans, Verdana, sans-serif"
# the font file each kind of text is measured in: labels bold, words italic, captions plain
STYLES = {"label": "DejaVuSans-Bold.ttf", "word": "DejaVuSans-Oblique.ttf", "text": "DejaVuSans.ttf"}
Position = Tuple[int, ...]


@functools.lru_cache(maxsize=None)
def _font(style: str):
    import os

    import matplotlib
    from matplotlib.ft2font import FT2Font

    try:
        from matplotlib.ft2font import LoadFlags

        unhinted = LoadFlags.NO_HINTING
    except ImportError:  # matplotlib < 3.10
        from matplotlib.ft2font import LOAD_NO_HINTING as unhinted

    font = FT2Font(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", STYLES[style]))
    font.set_size(FONT, 72)  # 72 dpi: one point is one pixel
    return font, unhinted


@functools.lru_cache(maxsize=4096)
def text_width(text: str, style: str = "word") -> float:
    """The width in pixels of ``text`` at the pictures' font size, in
    DejaVu Sans bold (``style="label"``), oblique (``"word"``) or plain (``"text"``)."""
    if style not in STYLES:
        raise ValueError(f"style is one of {sorted(STYLES)}, got {style!r}")
    if not text:
        return 0.0
    font, unhinted = _font(style)
    font.set_text(text, 0.0, flags=unhinted)  # unhinted: as browsers lay text out
    return font.get_width_height()[0] / 64.0


def _nodes(tree: Tree) -> List[Tuple[Position, object]]:
    """``(tree position, node or word)`` of every node in pre-order, found
    on an explicit stack (nltk's ``treepositions`` and tuple indexing
    recurse: a tree 1,000 deep would exceed Python's recursion limit)."""
    out, stack = [], [((), tree)]
    while stack:
        tp, node = stack.pop()
        out.append((tp, node))
        if isinstance(node, Tree):
            stack.extend((tp + (k,), node[k]) for k in reversed(range(len(node))))
    return out


def leaf_widths(tree: Tree) -> List[float]:
    """The width of each leaf column: its word or its preterminal's label,
    whichever is wider, plus the gap between columns."""
    nodes = _nodes(tree)
    labels = {tp: node.label() for tp, node in nodes if isinstance(node, Tree)}
    return [max(text_width(str(node), "word"), text_width(labels[tp[:-1]], "label")) + GAP
            for tp, node in nodes if not isinstance(node, Tree)]


def layout(tree: Tree) -> Tuple[Dict[Position, Tuple[float, float]], float, float]:
    """``(positions, width, height)``: the centre (x, baseline y) of every
    node's text by tree position, words on the bottom row, and the size of
    the picture. Iterative: any depth."""
    nodes = _nodes(tree)
    leaves = [tp for tp, node in nodes if not isinstance(node, Tree)]
    columns = dict(zip(leaves, leaf_widths(tree)))
    span: Dict[Position, float] = {}
    for tp, node in reversed(nodes):  # children before parents
        if isinstance(node, Tree):
            inner = sum(span[tp + (k,)] for k in range(len(node)))
            span[tp] = max(inner, text_width(node.label(), "label") + GAP)
        else:
            span[tp] = columns[tp]
    height = max((len(tp) for tp in leaves), default=0) + 1
    bottom = MARGIN + FONT + Y_STEP * (height - 1)
    left: Dict[Position, float] = {(): MARGIN}
    for tp, node in nodes:  # parents before children: each child's left edge, the children centred
        if isinstance(node, Tree):
            kids = [tp + (k,) for k in range(len(node))]
            x = left[tp] + (span[tp] - sum(span[k] for k in kids)) / 2
            for kid in kids:
                left[kid] = x
                x += span[kid]
    pos: Dict[Position, Tuple[float, float]] = {}
    for tp, node in reversed(nodes):  # children before parents: a node stands over its first and last child
        if not isinstance(node, Tree):
            pos[tp] = (left[tp] + span[tp] / 2, bottom)
            continue
        half = (text_width(node.label(), "label") + GAP) / 2
        centre = (pos[tp + (0,)][0] + pos[tp + (len(node) - 1,)][0]) / 2
        centre = min(max(centre, left[tp] + half), left[tp] + span[tp] - half)
        pos[tp] = (centre, MARGIN + FONT + Y_STEP * len(tp))
    # in post-order, children left to right before their parent: the order the picture draws them in
    stack, post = [((), tree)], []
    while stack:
        tp, node = stack.pop()
        post.append(tp)
        if isinstance(node, Tree):
            stack.extend((tp + (k,), node[k]) for k in range(len(node)))
    return {tp: pos[tp] for tp in reversed(post)}, span[()] + 2 * MARGIN, bottom + MARGIN


def tree_to_svg(tree: Tree, colors: Optional[Dict[Position, str]] = None) -> str:
    """SVG markup for ``tree`` (words in italics under their preterminals);
    ``colors``: a fill colour for the labels of some nodes, by tree position
    (e.g. a connection path and its anchor)."""
    colors = colors or {}
    pos, width, height = layout(tree)
    parts: List[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT_FAMILY}" font-size="{FONT}" '
        'text-anchor="middle">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for tp, (x, y) in pos.items():
        if tp:
            px, py = pos[tp[:-1]]
            parts.append(f'<line x1="{px:.1f}" y1="{py + 4:.1f}" x2="{x:.1f}" y2="{y - FONT:.1f}" stroke="#888"/>')
    nodes = dict(_nodes(tree))
    for tp, (x, y) in pos.items():
        node = nodes[tp]
        if isinstance(node, Tree):
            fill = escape(colors.get(tp, "#1f3b73"), {'"': "&quot;"})
            parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-weight="bold" fill="{fill}">'
                         f'{escape(node.label())}</text>')
        else:
            parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-style="italic">{escape(str(node))}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
