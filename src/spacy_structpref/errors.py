"""Exceptions with messages that name the problem."""


class StructPrefError(ValueError):
    """Base class for every input error raised by spacy-structpref."""


class BracketError(StructPrefError):
    """A bracketed tree string is malformed."""


class TreeDocMismatch(StructPrefError):
    """A tree's leaves do not match the words of the Doc it is put on."""


class CorpusError(StructPrefError):
    """An unknown corpus name, or corpus data that cannot be found."""


class TaggerError(StructPrefError):
    """A distro_tagger or its model got a setting, label or input it cannot use."""


class SavedModelError(StructPrefError):
    """A saved component or learner is missing, damaged or does not fit the
    loading object, or a save's target path cannot take it."""


class GrammarError(StructPrefError):
    """A grammar's states, rules or lexicon are inconsistent (e.g. an id
    outside its state list), whether built by hand or loaded from a file."""


class CorpusWarning(UserWarning):
    """Bad sentences were left out of a corpus, as asked (``skip_bad``)."""


class GrammarWarning(UserWarning):
    """Bad trees were left out of a grammar's training, as asked (``skip_bad_trees``)."""
