"""A small static vectors table for tests of models that read vectors."""
import numpy as np
from spacy.vectors import Vectors


def set_vectors(vocab, table):
    """Give ``vocab`` a vectors table with ``table``'s rows ({word: vector}); returns ``vocab``."""
    vocab.vectors = Vectors(strings=vocab.strings, data=np.asarray(list(table.values()), dtype="f"),
                            keys=[vocab.strings.add(w) for w in table])
    return vocab
