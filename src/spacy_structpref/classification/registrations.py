"""The Doc kernels of ``kernel_textcat`` and its scorer as registered
functions, so that a config block builds them:

    [components.kernel_textcat.kernel]
    @misc = "spacy_structpref.NamedDocKernel.v1"
    name = "forest"

The ``spacy_misc``/``spacy_scorers`` entry points name these functions, so
this module stays cheap to import: each imports its kernel when it builds one."""
from typing import Any, Dict, Iterable, List, Optional

from spacy.training import Example
from spacy.util import registry


@registry.misc("spacy_structpref.TreeDocKernel.v1")
def make_tree_doc_kernel(lam: float = 0.4, spans_key: str = "constituents", word_clusters: int = 0):
    """Subset-tree kernel (Collins & Duffy 2002) over each Doc's 1-best tree
    (``word_clusters`` > 0: with word-class nodes of that many clusters of the static vectors)."""
    from .kernels import TreeDocKernel

    return TreeDocKernel(lam, spans_key, word_clusters)


@registry.misc("spacy_structpref.ForestDocKernel.v1")
def make_forest_doc_kernel(lam: float = 0.4, alpha: float = 1.0, merit_ratio: Optional[float] = None,
                           n_threads: int = 2, word_clusters: int = 0):
    """Forest kernel (Zhang et al. 2010) over each Doc's packed forest, tempered by ``alpha``
    (``word_clusters``: as the tree kernel's)."""
    from .kernels import ForestDocKernel

    return ForestDocKernel(lam, alpha, merit_ratio, n_threads, word_clusters)


@registry.misc("spacy_structpref.BowDocKernel.v1")
def make_bow_doc_kernel(max_n: int = 2, lowercase: bool = True):
    """Cosine of word 1..max_n-gram counts."""
    from .kernels import BowDocKernel

    return BowDocKernel(max_n, lowercase)


@registry.misc("spacy_structpref.SumDocKernel.v1")
def make_sum_doc_kernel(*kernels: Any, weights: List[float]):
    """``Σ_k w_k K_k``: a composite kernel (the kernels as ``[kernel.*.name]``
    blocks, in order)."""
    from .kernels import SumDocKernel

    return SumDocKernel(kernels, weights)


@registry.misc("spacy_structpref.NamedDocKernel.v1")
def make_named_doc_kernel(name: str = "tree", lam: float = 0.4, alpha: float = 1.0, bow_weight: float = 0.5,
                          merit_ratio: Optional[float] = None, n_threads: int = 2, word_clusters: int = 0):
    """A Doc kernel by name: tree, forest, bow, tree+bow or forest+bow."""
    from .kernels import named_kernel

    return named_kernel(name, lam, alpha, bow_weight, merit_ratio, n_threads, word_clusters)


def score_textcat(examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
    """spaCy's scores of mutually exclusive classes (``Scorer.score_cats``:
    ``cats_score`` = macro F, per-class P/R/F in ``cats_f_per_type``) plus
    ``cats_accuracy``: the share of Docs whose highest-scoring class is the gold one."""
    from spacy.scorer import Scorer

    examples = list(examples)
    scores = Scorer.score_cats(examples, "cats", multi_label=False, **kwargs)
    right = [max(eg.predicted.cats, key=eg.predicted.cats.get) == max(eg.reference.cats, key=eg.reference.cats.get)
             for eg in examples if eg.predicted.cats and eg.reference.cats]
    scores["cats_accuracy"] = sum(right) / len(right) if right else None
    return scores


@registry.scorers("spacy_structpref.textcat_scorer.v1")
def make_textcat_scorer():
    return score_textcat


@registry.readers("spacy_structpref.ParsedQuestions.v1")
def make_parsed_questions(path: str, granularity: str = "coarse", split: str = "all", limit: int = 0):
    """Examples from a parse cache of ``bench/textcat.py --parse-only``:
    predicted Docs with the cached parses, reference Docs with ``doc.cats``."""
    from .data import parsed_examples

    return parsed_examples(path, granularity, split, limit)
