"""Fixtures shared across the test folders: the corpora's location, a blank
pipeline, and the PTB-sample inventories and parser that several folders'
tests build from the same trees (built once per run). Tests that use a
training fixture (``tests.helpers.fixtures.slow_fixture``) are marked
``slow``."""
import os

import pytest

from tests.helpers.paths import SHARED


def pytest_configure(config):
    # Tests read corpora through NLTK_DATA; default to the shared copy beside the checkout.
    # (So this module imports nothing that imports nltk before this runs.)
    if "NLTK_DATA" not in os.environ and (SHARED / "nltk_data").is_dir():
        os.environ["NLTK_DATA"] = str(SHARED / "nltk_data")


def pytest_collection_modifyitems(items):
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(getattr(d.func, "slow", False) for name in item.fixturenames
               for d in info.name2fixturedefs.get(name, ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def nlp():
    import spacy

    return spacy.blank("en")


def _ptb_inventory(n: int):
    from spacy_structpref.corpora import ptb_trees
    from spacy_structpref.incremental import CPInventory

    return CPInventory.from_trees(ptb_trees("train")[:n])


@pytest.fixture(scope="session")
def ptb_inventory_200():
    """The connection-path inventory of the first 200 PTB-sample training trees."""
    return _ptb_inventory(200)


@pytest.fixture(scope="session")
def ptb_inventory_300():
    """The connection-path inventory of the first 300 PTB-sample training trees."""
    return _ptb_inventory(300)


@pytest.fixture(scope="session")
def short_ptb_parser_nlp():
    """A blank pipeline with a forest_parser whose grammar is read off 300
    short PTB-sample trees (forests kept, 1-best only)."""
    import spacy
    from nltk.tree import Tree

    from spacy_structpref.corpora import ptb_trees

    nlp = spacy.blank("en")
    parser = nlp.add_pipe("forest_parser", config={"k": 1, "store_forest": True, "threshold": 1e-3})
    trees = [t if t.label() == "TOP" else Tree("TOP", [t]) for t in ptb_trees("train") if len(t.leaves()) <= 20]
    parser.initialize_from_trees(trees[:300])
    return nlp
