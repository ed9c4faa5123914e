"""The learners and learner kernels as registered functions
(``spacy.util.registry.misc``), so that a config block builds them:

    [learner]
    @misc = "spacy_structpref.KernelPerceptron.v1"
    loss = "setwise"

    [learner.kernel]
    @misc = "spacy_structpref.TreeKernel.v1"
    lam = 0.4

The ``spacy_misc`` entry points name these functions, so this module stays
cheap to import: each imports its learner or kernel when it builds one."""
from typing import TYPE_CHECKING, Optional

from spacy.util import registry
from thinc.api import Optimizer

from .base import LearnerKernel, PreferenceLearner

if TYPE_CHECKING:
    from .ensemble import EnsembleLearner
    from .features import FeatureRanker
    from .kernels import CompositeKernel, ForestKernel, LinearKernel, TreeKernel
    from .perceptron import KernelPerceptron
    from .recursive import RecursiveNetLearner
    from .specialised import SpecialisedLearner
    from .training import Schedule


@registry.misc("spacy_structpref.TreeKernel.v1")
def make_tree_kernel(lam: float = 0.4, sigma: float = 1, normalize: bool = True) -> "TreeKernel":
    """A subset-tree (``sigma = 1``) or subtree (``sigma = 0``) kernel with its own SymbolTable."""
    from .kernels import TreeKernel

    return TreeKernel(lam, sigma, normalize)


@registry.misc("spacy_structpref.LinearKernel.v1")
def make_linear_kernel() -> "LinearKernel":
    from .kernels import LinearKernel

    return LinearKernel()


@registry.misc("spacy_structpref.CompositeKernel.v1")
def make_composite_kernel(tree_kernel: LearnerKernel, b: float = 0.2) -> "CompositeKernel":
    """``K(x, x') + b · log p · log p'`` over the ``tree_kernel`` block's kernel."""
    from .kernels import CompositeKernel

    return CompositeKernel(tree_kernel, b)


@registry.misc("spacy_structpref.ForestKernel.v1")
def make_forest_kernel(lam: float = 0.4, alpha: float = 1.0, normalize: bool = True) -> "ForestKernel":
    """The forest kernel of Zhang et al. (2010), hyperedge probabilities
    tempered by ``alpha``, with its own SymbolTable: for a
    ``parse_reranker``'s perceptron (alone, or under a composite kernel)."""
    from .kernels import ForestKernel

    return ForestKernel(lam, alpha, normalize)


@registry.misc("spacy_structpref.KernelPerceptron.v1")
def make_kernel_perceptron(kernel: LearnerKernel, loss: str = "setwise", average: bool = True,
                           seed: int = 0) -> "KernelPerceptron":
    from .perceptron import KernelPerceptron

    return KernelPerceptron(kernel, loss=loss, average=average, seed=seed)


def perceptron_config(kernel: dict) -> dict:
    """The config block of a component's default learner: the setwise
    kernel voted perceptron over the ``kernel`` block (spaCy's epochs are
    its passes)."""
    return {"@misc": "spacy_structpref.KernelPerceptron.v1", "loss": "setwise", "average": True, "seed": 0,
            "kernel": kernel}


@registry.misc("spacy_structpref.RecursiveNetLearner.v1")
def make_recursive_net_learner(width: int = 25, max_children: int = 15, loss: str = "setwise", seed: int = 0,
                               log_p_input: bool = False, log_p_a: float = 1.0, log_p_b: float = 0.0,
                               min_word_sets: int = 0, batched: bool = True) -> "RecursiveNetLearner":
    """``log_p_input``: the parser's ``log_p_a·log p + log_p_b`` as an input (reranking);
    ``min_word_sets``: words found in at least that many training sets are
    inputs of their own (0: every word is one WORD input); ``batched=False``:
    the network node by node (the slow reference)."""
    from .recursive import RecursiveNetLearner

    return RecursiveNetLearner(width, max_children, loss=loss, seed=seed, log_p_input=log_p_input,
                               log_p_a=log_p_a, log_p_b=log_p_b, min_word_sets=min_word_sets, batched=batched)


@registry.misc("spacy_structpref.FeatureRanker.v1")
def make_feature_ranker(hash_bits: int = 20, learn_rate: float = 0.1, l2: float = 0.0001, log_p_weight: float = 1.0,
                        seed: int = 0) -> "FeatureRanker":
    """The linear reranker over hashed tree features (Charniak & Johnson 2005)
    with the parser's log p and the constituent count: ``2^hash_bits``
    weights (8 to 24 bits), AdaGrad's ``learn_rate``, the ``l2`` penalty,
    a's start ``log_p_weight``."""
    from .features import FeatureRanker

    return FeatureRanker(hash_bits, learn_rate, l2, log_p_weight, seed)


@registry.misc("spacy_structpref.Schedule.v1")
def make_schedule(epochs: int = 1, batch_size: int = 32, patience: Optional[int] = None,
                  optimizer: Optional[Optimizer] = None, progress: Optional[bool] = None) -> "Schedule":
    """How :func:`~.training.fit` trains a learner (a config's ``[schedule]``
    block): ``epochs``, ``batch_size`` sets per update, ``patience`` (None:
    no validation sets; 0: every epoch, keeping the best on them), the
    ``optimizer`` of a learner with gradients, a ``progress`` bar."""
    from .training import Schedule

    return Schedule(epochs, batch_size, patience, optimizer, progress)


@registry.misc("spacy_structpref.SpecialisedLearner.v1")
def make_specialised_learner(prototype: PreferenceLearner) -> "SpecialisedLearner":
    """One clone of ``prototype`` per class of sets."""
    from .specialised import SpecialisedLearner

    return SpecialisedLearner(prototype)


@registry.misc("spacy_structpref.EnsembleLearner.v1")
def make_ensemble_learner(prototype: PreferenceLearner, n_members: int = 3,
                          seed_step: int = 1000) -> "EnsembleLearner":
    """``n_members`` clones of ``prototype`` seeded ``seed``, ``seed + seed_step``, …;
    their utilities averaged."""
    from .ensemble import EnsembleLearner

    return EnsembleLearner.of_clones(prototype, n_members, seed_step)
