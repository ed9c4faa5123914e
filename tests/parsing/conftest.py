"""The grammar the parsing tests share."""
import pytest


@pytest.fixture(scope="session")
def grammar():
    """The PCFG read off the first 150 PTB-sample training trees."""
    from spacy_structpref.corpora import ptb_trees
    from spacy_structpref.parsing.grammar import estimate_grammar

    return estimate_grammar(ptb_trees("train")[:150])
