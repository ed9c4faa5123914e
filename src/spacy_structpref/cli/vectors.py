"""``train-vectors``: static word vectors trained on the corpora themselves
(:mod:`spacy_structpref.models.word_vectors`), saved as a blank pipeline whose
vocab holds them, the form ``[initialize] vectors`` of a training config reads."""
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from wasabi import msg

from ..errors import StructPrefError

# how tokens may be normalised for training, and the Token property that spells each
SPELLINGS = {"ORTH": "orth_", "LOWER": "lower_", "NORM": "norm_"}
SHOWN_RANKS = (50, 200, 1000, 5000)  # frequency ranks of the words whose neighbours the summary shows


def corpus_sentences(paths: Sequence[Path], spelling: str, vocab) -> Tuple[List[List[str]], Dict[str, str]]:
    """The sentences (one per Doc) of the ``.spacy`` files ``paths``, each
    token spelt by ``spelling`` (a key of :data:`SPELLINGS`), and the
    spelling of every surface form (text) seen."""
    from ..trees.doc import read_docs

    if spelling not in SPELLINGS:
        raise StructPrefError(f"--spelling must be one of {', '.join(SPELLINGS)}, got {spelling!r}")
    spell = SPELLINGS[spelling]
    sentences, forms = [], {}
    for path in paths:
        for doc in read_docs(path, vocab):
            sentences.append([getattr(token, spell) for token in doc])
            forms.update((token.text, spelt) for token, spelt in zip(doc, sentences[-1]))
    return sentences, forms


def train_vectors(output: Path, corpora: Sequence[Path], *, lang: str = "en", spelling: str = "LOWER",
                  dim: int = 300, window: int = 2, min_count: int = 2, seed: int = 0) -> None:
    """Train PPMI–SVD vectors on the tokens of ``corpora``, spelt by
    ``spelling``, and save a blank ``lang`` pipeline holding them at
    ``output`` in one atomic step; print a summary and a few words'
    nearest neighbours. spaCy looks vectors up by a token's text (a saved
    table keeps no other key attribute), so every surface form the corpora
    hold gets the row of its spelling ("The" that of "the")."""
    import numpy
    import spacy
    from spacy.vectors import Vectors

    from ..models.word_vectors import train_word_vectors
    from ..saving import atomic_directory

    if not corpora:
        raise StructPrefError("give at least one .spacy corpus to train the vectors on")
    nlp = spacy.blank(lang)
    sentences, forms = corpus_sentences(corpora, spelling, nlp.vocab)
    words, vectors = train_word_vectors(sentences, dim=dim, window=window, min_count=min_count, seed=seed)
    table = Vectors(strings=nlp.vocab.strings, data=vectors, keys=[nlp.vocab.strings.add(w) for w in words])
    rows = {word: row for row, word in enumerate(words)}
    for form, spelt in sorted(forms.items()):
        if spelt in rows and form != spelt:
            table.add(nlp.vocab.strings.add(form), row=rows[spelt])
    nlp.vocab.vectors = table
    with atomic_directory(output, "vectors") as tmp:
        nlp.to_disk(tmp)
    msg.good(f"{len(words)} words ({table.n_keys} surface forms) × {dim} dimensions from {len(sentences)} "
             f"sentences, {sum(map(len, sentences))} tokens: {output}")
    shown = [(rank, words[rank], ", ".join(words[i] for i in numpy.argsort(-(vectors @ vectors[rank]))[1:6]))
             for rank in SHOWN_RANKS if rank < len(words)]
    msg.table(shown, header=("rank", "word", "nearest (cosine)"), divider=True)
