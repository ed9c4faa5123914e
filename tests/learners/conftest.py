"""The attachment preference sets the learner tests share."""
import pytest


@pytest.fixture(scope="session")
def attachment_sets(ptb_inventory_300):
    """``((candidates, gold), (candidates, gold))`` of the first 40 PTB-sample
    training and 10 dev trees, against the 300-tree inventory."""
    from spacy_structpref.corpora import ptb_trees

    from tests.helpers.attachment_data import candidates_and_gold

    train, dev = ptb_trees("train")[:40], ptb_trees("dev")[:10]
    return candidates_and_gold(train, ptb_inventory_300), candidates_and_gold(dev, ptb_inventory_300)
