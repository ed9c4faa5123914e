"""PARSEVAL rows of a reranking experiment, in the form of Menchetti et al.
(2005), Table 3: labelled recall (LR), labelled precision (LP), F1, mean
crossing brackets per sentence (CB), % sentences with no crossing bracket
(0CB) and with at most two (≤2CB), for sentences of ≤ 40 words and for all;
counted as EVALB counts them with ``COLLINS.prm``
(:mod:`spacy_structpref.scoring.parseval`), micro-averaged over the corpus.
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

from nltk.tree import Tree

from ..errors import StructPrefError
from ..reranking.data import RerankItem
from ..scoring.parseval import COLLINS, ParsevalResult, ParsevalTotals, sentence_stats

COLUMNS = ("LR", "LP", "F1", "CB", "0CB", "<=2CB")
BLOCKS = (("<=40", f"≤ {COLLINS.cutoff_length} words"), ("all", "all sentences"))
Row = Dict[str, Union[str, Dict[str, float]]]


def evaluate(items: Sequence[RerankItem], chosen: Sequence[Union[int, Tree]]) -> ParsevalResult:
    """EVALB's figures for the chosen parse of each item: a candidate index
    (scored from the item's stored counts) or a tree (scored against gold)."""
    if len(items) != len(chosen):
        raise StructPrefError(f"{len(chosen)} choices for {len(items)} items")
    result = ParsevalResult(cutoff=COLLINS.cutoff_length)
    for n, (item, pick) in enumerate(zip(items, chosen)):
        if item.gold is None:
            raise StructPrefError(f"item {n} has no gold tree to evaluate against")
        if isinstance(pick, Tree):
            stats = sentence_stats(item.gold, pick, COLLINS)
        elif 0 <= pick < len(item):
            stats = item.stats[pick]
        else:
            raise StructPrefError(f"item {n} has {len(item)} candidates, candidate {pick} was chosen")
        result.add(stats)
    return result


def parseval_figures(scores: Dict[str, float]) -> Dict[str, float]:
    """The figures of :data:`COLUMNS` (and ``sentences``) of one block of
    EVALB's summary as ``ParsevalTotals.as_dict`` (and ``evaluate-parse``'s
    JSON) gives them."""
    return {"LR": scores["recall"], "LP": scores["precision"], "F1": scores["f1"], "CB": scores["avg_crossing"],
            "0CB": scores["zero_crossing"], "<=2CB": scores["le2_crossing"], "sentences": scores["sentences"]}


def _figures(totals: ParsevalTotals) -> Dict[str, float]:
    return parseval_figures(totals.as_dict())


def table_row(name: str, result: ParsevalResult) -> Row:
    """``{"name": ..., "<=40": figures, "all": figures}``, figures keyed by
    :data:`COLUMNS` (percentages; CB per sentence) plus ``sentences``."""
    return {"name": name, "<=40": _figures(result.short), "all": _figures(result.all)}


def evaluate_row(name: str, items: Sequence[RerankItem], chosen: Sequence[Union[int, Tree]]) -> Row:
    return table_row(name, evaluate(items, chosen))


def one_best_row(items: Sequence[RerankItem], name: str = "PCFG 1-best") -> Row:
    """The parser's own choice: candidate 0 of every list."""
    return evaluate_row(name, items, [0] * len(items))


def oracle_row(items: Sequence[RerankItem], name: str = "oracle") -> Row:
    """The best a reranker of these lists can do: every item's target."""
    return evaluate_row(name, items, [item.target for item in items])


def table_blocks(rows: Sequence[Row]) -> List[Tuple[str, Tuple[str, ...], List[Tuple[str, ...]]]]:
    """The rows as Table 3's two blocks, ≤ 40 words and all sentences: each
    ``(title, header, cells)``, the figures formatted."""
    if not rows:
        raise StructPrefError("no rows to format")
    header = ("Model",) + tuple(c.replace("<=", "≤") for c in COLUMNS)
    return [(f"{title} ({rows[0][key]['sentences']} sentences)", header,
             [(row["name"], *(f"{row[key][c]:.2f}" for c in COLUMNS)) for row in rows])
            for key, title in BLOCKS]


def format_rows(rows: Sequence[Row]) -> str:
    """The rows as two wasabi tables, ≤ 40 words and all sentences."""
    from wasabi import table

    out: List[str] = []
    for title, header, data in table_blocks(rows):
        out.append(title)
        out.append(table(data, header=header, divider=True, aligns=("l",) + ("r",) * len(COLUMNS)))
    return "\n".join(out)


def print_rows(rows: Sequence[Row]) -> None:
    print(format_rows(rows))


def base_parser_row(rows: Sequence[Row]) -> Optional[str]:
    """The name of the base parser's own row (``PCFG 1-best``, ``span CRF
    1-best``: the first that ends in ``1-best``), None when there is none."""
    return next((row["name"] for row in rows if row["name"].endswith("1-best")), None)


def format_gains(rows: Sequence[Row], base: Optional[str] = None, oracle: str = "oracle") -> str:
    """Each scorer's F1 (≤ 40 words) minus the ``base`` row's (default: the
    base parser's own, :func:`base_parser_row`), best first."""
    names = [row["name"] for row in rows]
    base = base_parser_row(rows) if base is None else base
    if base not in names:
        raise StructPrefError(f"no {base or 'base parser (… 1-best)'!r} row among {names}")
    f1 = rows[names.index(base)]["<=40"]["F1"]
    gains = sorted(((row["<=40"]["F1"] - f1, row["name"]) for row in rows if row["name"] not in (base, oracle)),
                   reverse=True)
    return "\n".join(f"{gain:+6.2f}  {name}" for gain, name in gains)


def read_rows(path) -> List[Row]:
    """The rows of a table written as JSON (``{"rows": [...]}``), checked."""
    import srsly

    try:
        rows = srsly.read_json(path)["rows"]
        ok = all(isinstance(row["name"], str) and all(isinstance(row[key][c], (int, float))
                                                      for key, _ in BLOCKS for c in COLUMNS) for row in rows)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StructPrefError(f"{path} is not a reranking table (JSON with rows of {', '.join(COLUMNS)} "
                              f"for ≤ 40 and all): {type(err).__name__} {err}") from None
    if not ok:
        raise StructPrefError(f"{path} is not a reranking table: a row has a non-numeric figure or no name")
    if not rows:
        raise StructPrefError(f"{path} has no rows")
    return rows
