"""Docs the tests build and run through a pipeline."""
from spacy.tokens import Doc


def parsed(nlp, texts):
    return [nlp(Doc(nlp.vocab, words=t.split())) for t in texts]
