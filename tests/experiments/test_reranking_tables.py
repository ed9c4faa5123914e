"""The reranking table's gains are measured from the base parser's own row."""
import pytest

from spacy_structpref.errors import StructPrefError
from spacy_structpref.experiments.reranking_tables import base_parser_row, format_gains


def rows(*named):
    return [{"name": name, "<=40": {"F1": f1}} for name, f1 in named]


@pytest.mark.parametrize("base", ["PCFG 1-best", "span CRF 1-best"])
def test_gains_over_the_base_parser_whichever_it_is(base):
    table = rows((base, 80.0), ("VP tree", 81.5), ("VP forest", 79.25), ("oracle", 92.0))
    assert base_parser_row(table) == base
    assert format_gains(table).splitlines() == [" +1.50  VP tree", " -0.75  VP forest"]


def test_a_table_without_a_base_parser_row_is_refused():
    table = rows(("VP tree", 81.5), ("oracle", 92.0))
    assert base_parser_row(table) is None
    with pytest.raises(StructPrefError, match="1-best"):
        format_gains(table)
