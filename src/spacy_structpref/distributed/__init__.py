"""Scale-out on ``dask.distributed`` (Rocklin 2015): parsing a corpus into k-best
lists and forests, the reranker's jackknifed lists, attachment candidate
sets and a learner's utilities over them, and Gram matrices in blocks, each
returning what the single-process path returns (:mod:`.jobs`).

This subpackage is the only place that imports dask, and only when a job
runs on a cluster; ``import spacy_structpref`` never imports it. Install
with ``pip install "spacy-structpref[distributed]"``.
"""
from .cluster import INSTALL_HINT, MissingDependency, local_cluster, require_dask, runner
from .jobs import (attachment_utilities, candidate_sets, gram, jackknife_lists, parse_corpus, parse_lists,
                   read_parsed, read_sentences, read_trees, set_utilities)

__all__ = ["INSTALL_HINT", "MissingDependency", "attachment_utilities", "candidate_sets", "gram", "jackknife_lists",
           "local_cluster", "parse_corpus", "parse_lists", "read_parsed", "read_sentences", "read_trees",
           "require_dask", "runner", "set_utilities"]
