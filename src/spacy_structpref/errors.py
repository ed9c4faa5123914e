"""Exceptions with messages that name the problem, and the checks of
plain arguments (counts, numbers) that raise them at a function's boundary,
so that a wrong type is a :class:`StructPrefError` like a wrong value and
never a bare ``TypeError`` from deep inside."""
import math
from numbers import Integral, Real


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


def check_count(name: str, value, minimum: int, maximum: float = math.inf, *,
                error: type = StructPrefError) -> int:
    """``value`` as an int, or an ``error`` (a :class:`StructPrefError`)
    unless it is an integer (not a bool) from ``minimum`` to ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or not minimum <= value <= maximum:
        bound = f"from {minimum} to {maximum}" if maximum < math.inf else f"of at least {minimum}"
        raise error(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def check_number(name: str, value, minimum: float = -math.inf, maximum: float = math.inf, *,
                 above: bool = False, error: type = StructPrefError) -> float:
    """``value`` as a float, or an ``error`` (a :class:`StructPrefError`)
    unless it is a finite real number (not a bool) from ``minimum``
    (``above``: strictly above it) to ``maximum``."""
    ok = (not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)
          and (value > minimum if above else value >= minimum) and value <= maximum)
    if not ok:
        low = f"above {minimum}" if above else f"at least {minimum}"
        bound = {(True, True): f"{low} and at most {maximum}", (True, False): low,
                 (False, True): f"at most {maximum}", (False, False): ""}[(minimum > -math.inf, maximum < math.inf)]
        raise error(f"{name} must be a finite number{' ' + bound if bound else ''}, got {value!r}")
    return float(value)
