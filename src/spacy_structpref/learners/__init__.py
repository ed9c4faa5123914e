"""Preference learning (SPEC §5): learner kernels, the kernel voted
perceptron and the recursive neural network over preference sets, one
learner per class of sets (specialisation), and the ``L_r`` metric."""
from .base import PreferenceLearner
from .kernels import LinearKernel, TreeKernel
from .metrics import gold_rank, loss_at_r
from .perceptron import KernelPerceptron
from .recursive import RecursiveNetLearner
from .specialised import SpecialisedLearner

__all__ = ["KernelPerceptron", "LinearKernel", "PreferenceLearner", "RecursiveNetLearner",
           "SpecialisedLearner", "TreeKernel", "gold_rank", "loss_at_r"]
