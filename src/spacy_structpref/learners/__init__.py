"""Preference learning (Menchetti et al. 2005, §5): learner kernels, the kernel
voted perceptron, the recursive neural network and the linear feature ranker
(Charniak & Johnson 2005) over preference sets, one
learner per class of sets (specialisation), ensembles of learners, the one
training loop (``fit``) and the ``L_r`` metric.

The names below load on first use: the ``spacy_misc`` entry points name the
config functions of :mod:`.registrations`, and resolving one of them must not
pull in the compiled kernels."""
from ..lazy import lazy_names

_MODULES = {
    "CompositeKernel": "kernels", "EnsembleLearner": "ensemble", "FeatureRanker": "features",
    "ForestKernel": "kernels",
    "KernelPerceptron": "perceptron", "Learner": "base", "LinearKernel": "kernels",
    "PreferenceLearner": "base", "RecursiveNetLearner": "recursive", "Schedule": "training",
    "ScoredTrees": "kernels", "SpecialisedLearner": "specialised", "TrainingLog": "base", "TreeKernel": "kernels",
    "fit": "training", "gold_rank": "metrics", "loss_at_r": "metrics", "pairwise_error": "metrics",
}
__all__ = sorted(_MODULES)

__getattr__ = lazy_names(__name__, _MODULES)
