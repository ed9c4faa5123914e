"""Short names of the scores our components report, as tables print them
(spaCy's own: ``TAG`` for ``tag_acc``). Fractions are shown × 100, counts
as they are."""
from typing import Any

SCORE_NAMES = {
    "tag_acc": "TAG",
    "parseval_p": "PARSEVAL P",
    "parseval_r": "PARSEVAL R",
    "parseval_f": "PARSEVAL F",
    "parseval_f_40": "PARSEVAL F ≤40",
    "attach_acc": "ATTACH ACC",
    "parse_fallbacks": "PARSE FALLBACKS",
    "parse_too_long": "PARSE TOO LONG",
    "attach_fallbacks": "ATTACH FALLBACKS",
    "cats_accuracy": "CATS ACC",
    "cats_held_out_acc": "CATS HELD-OUT ACC",
    "cats_macro_f": "CATS MACRO F",
    "attach_too_long": "ATTACH TOO LONG",
    "effective_rank": "EFFECTIVE RANK",
    "rank_share": "RANK SHARE",
}


def format_score(value: Any) -> str:
    """A fraction as a percentage with two decimals, a count as it is, a missing score as ``-``."""
    if value is None or isinstance(value, bool):
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{100 * value:.2f}"
