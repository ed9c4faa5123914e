"""Preference learning (SPEC §5): learner kernels, the kernel voted
perceptron and the recursive neural network over preference sets, and the
``L_r`` metric."""
from .base import PreferenceLearner
from .kernels import LinearKernel, TreeKernel
from .metrics import gold_rank, loss_at_r
from .perceptron import KernelPerceptron
from .recursive import RecursiveNetLearner

__all__ = ["KernelPerceptron", "LinearKernel", "PreferenceLearner", "RecursiveNetLearner",
           "TreeKernel", "gold_rank", "loss_at_r"]
