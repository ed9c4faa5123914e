"""Trees as SVG pictures (no Tk, no browser): leaves evenly spaced along the
bottom, each node centred over its children."""
from typing import Dict, List, Optional, Tuple
from xml.sax.saxutils import escape

from nltk.tree import Tree

X_STEP, Y_STEP, MARGIN, FONT, CHAR = 70, 50, 20, 13, 8


def tree_to_svg(tree: Tree, colors: Optional[Dict[Tuple[int, ...], str]] = None) -> str:
    """SVG markup for ``tree`` (words in italics under their preterminals);
    ``colors``: a fill colour for the labels of some nodes, by tree position
    (e.g. a connection path and its anchor)."""
    colors = colors or {}
    height = tree.height()
    pos: Dict[Tuple[int, ...], Tuple[float, float]] = {}
    leaf_positions = tree.treepositions("leaves")
    x = MARGIN
    for lp in leaf_positions:
        # Each word gets room for itself and its tag, so long words never overlap.
        room = max(X_STEP / 2, CHAR * max(len(str(tree[lp])), len(tree[lp[:-1]].label())) + 12)
        pos[lp] = (x + room / 2, MARGIN + Y_STEP * (height - 1))
        x += room
    for tp in sorted(tree.treepositions(), key=len, reverse=True):
        if tp in pos:
            continue
        kids = [pos[tp + (k,)] for k in range(len(tree[tp]))]
        pos[tp] = (sum(x for x, _ in kids) / len(kids), MARGIN + Y_STEP * len(tp))
    width = x + MARGIN
    total_height = 2 * MARGIN + Y_STEP * height
    parts: List[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{total_height:.0f}" '
        f'font-family="sans-serif" font-size="{FONT}" text-anchor="middle">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for tp, (x, y) in pos.items():
        if tp:
            px, py = pos[tp[:-1]]
            parts.append(f'<line x1="{px:.1f}" y1="{py + 4:.1f}" x2="{x:.1f}" y2="{y - FONT:.1f}" stroke="#888"/>')
    for tp, (x, y) in pos.items():
        node = tree[tp]
        if isinstance(node, Tree):
            fill = escape(colors.get(tp, "#1f3b73"), {'"': "&quot;"})
            parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-weight="bold" fill="{fill}">{escape(node.label())}</text>')
        else:
            parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-style="italic">{escape(str(node))}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
