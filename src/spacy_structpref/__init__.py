"""spacy-structpref: learning preferences over linguistic structures for spaCy.

Kept light on purpose: spaCy imports every plugin's factories whenever a
pipeline is created, so heavy parts (Cython kernels, parsers, learners) are
imported lazily by the modules that need them.
"""
from .about import __version__

__all__ = ["__version__"]
