"""Preference learning (SPEC §5): learner kernels, the kernel voted
perceptron over preference sets, and the ``L_r`` metric."""
from .kernels import LinearKernel, TreeKernel
from .metrics import gold_rank, loss_at_r
from .perceptron import KernelPerceptron

__all__ = ["KernelPerceptron", "LinearKernel", "TreeKernel", "gold_rank", "loss_at_r"]
