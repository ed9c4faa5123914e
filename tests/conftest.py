import os

import pytest

from tests.helpers.paths import SHARED


def pytest_configure(config):
    # Tests read corpora through NLTK_DATA; default to the shared copy beside the checkout.
    if "NLTK_DATA" not in os.environ and (SHARED / "nltk_data").is_dir():
        os.environ["NLTK_DATA"] = str(SHARED / "nltk_data")


@pytest.fixture(scope="session")
def nlp():
    import spacy

    return spacy.blank("en")
