"""Thinc's SGD and Adam with their elementwise bookkeeping in one pass.

``spacy_structpref.SGD.v1`` and ``spacy_structpref.Adam.v1`` take the same
arguments as Thinc's ``SGD.v1`` and ``Adam.v1`` and give the same weights bit
for bit. Thinc's Adam kernel makes three passes over a parameter (the moments
and the step, the weights, the gradient's reset), and Thinc then decays the
weights and updates their running average in numpy expressions, each another
pass with a temporary as large. A linear tagger over a hashed feature table
(Srikumar & Manning 2014) has 10⁷–10⁸ weights of which a minibatch touches
few, so those passes were most of its training time; here the step, Adam's
included, and the rest are one compiled pass
(:func:`._optimizer.fused_update`). Gradient clipping is Thinc's own call,
made first as Thinc makes it; anything else (RAdam, L2 added to the gradient,
arrays not float32 in main memory) goes through Thinc's code unchanged."""
from typing import Tuple

import numpy
from thinc.api import registry
from thinc.backends import get_array_ops
from thinc.optimizers import ADAM_DEFAULTS, SGD_DEFAULTS, Optimizer

#: Thinc's ``update_averages`` caps the averaging decay here.
MAX_AVERAGE_DECAY = 0.9999


class FusedOptimizer(Optimizer):
    """A Thinc ``Optimizer`` whose SGD and Adam updates of float32 numpy
    parameters end in one fused pass; see the module docstring."""

    __slots__ = ()

    def _fusable(self, weights, gradient) -> bool:
        return (isinstance(weights, numpy.ndarray) and isinstance(gradient, numpy.ndarray)
                and weights.dtype == numpy.float32 and gradient.dtype == numpy.float32
                and weights.flags.c_contiguous and gradient.flags.c_contiguous
                and weights.shape == gradient.shape and not self.use_radam
                and (self.L2 == 0 or self.L2_is_weight_decay)
                and (self.b1 > 0.0 and self.b2 > 0.0 or self.b2 == 0.0))

    def __call__(self, key: Tuple[int, str], weights, gradient, *, lr_scale: float = 1.0):
        if len(gradient) < 1 or not self._fusable(weights, gradient):
            return super().__call__(key, weights, gradient, lr_scale=lr_scale)
        from ._optimizer import fused_update  # compiled extension: imported on first use

        self.nr_update[key] += 1
        nr_upd = self.nr_update[key]
        ops = get_array_ops(weights)
        if self.grad_clip:
            gradient = ops.clip_gradient(gradient, self.grad_clip)
        moments = None
        if self.b1 > 0.0 and self.b2 > 0.0:
            moments = self._moments(key, weights.size)
            # Thinc's Optimizer._adam: the bias correction in the step size
            step = self.learn_rate * (1.0 - self.b2 ** nr_upd) ** 0.5 / (1.0 - self.b1 ** nr_upd) * lr_scale
        else:
            step = lr_scale * self.learn_rate
        decay = lr_scale * self.learn_rate * self.L2 if self.L2 != 0 else None
        averages = keep = None
        if self.averages is not None:
            if key not in self.averages:
                self.averages[key] = numpy.zeros(weights.shape, dtype=numpy.float32)
            averages = self.averages[key]
            keep = 1 - min((1.0 + nr_upd) / (10.0 + nr_upd), MAX_AVERAGE_DECAY)
        fused_update(weights, gradient, averages, step, decay, keep, moments, self.b1, self.b2, self.eps)
        return weights, gradient

    def _moments(self, key: Tuple[int, str], size: int):
        """Adam's moments of one parameter, kept where Thinc keeps them."""
        for store in (self.mom1, self.mom2):
            if key not in store:
                store[key] = numpy.zeros((size,), dtype=numpy.float32)
        return self.mom1[key], self.mom2[key]


@registry.optimizers("spacy_structpref.SGD.v1")
def FusedSGD(learn_rate: float, *, L2: float = SGD_DEFAULTS["L2"], grad_clip: float = SGD_DEFAULTS["grad_clip"],
             L2_is_weight_decay: bool = SGD_DEFAULTS["L2_is_weight_decay"], use_averages: bool = True
             ) -> FusedOptimizer:
    """Thinc's ``SGD.v1`` (same arguments, same results) with the fused update."""
    return FusedOptimizer(learn_rate, L2=L2, grad_clip=grad_clip, L2_is_weight_decay=L2_is_weight_decay,
                          beta1=0.0, beta2=0.0, use_averages=use_averages)


@registry.optimizers("spacy_structpref.Adam.v1")
def FusedAdam(learn_rate: float = ADAM_DEFAULTS["learn_rate"], *, L2: float = ADAM_DEFAULTS["L2"],
              beta1: float = ADAM_DEFAULTS["beta1"], beta2: float = ADAM_DEFAULTS["beta2"],
              eps: float = ADAM_DEFAULTS["eps"], grad_clip: float = ADAM_DEFAULTS["grad_clip"],
              L2_is_weight_decay: bool = ADAM_DEFAULTS["L2_is_weight_decay"], use_averages: bool = True
              ) -> FusedOptimizer:
    """Thinc's ``Adam.v1`` (same arguments, same results) with the fused update."""
    return FusedOptimizer(learn_rate, L2=L2, beta1=beta1, beta2=beta2, eps=eps, grad_clip=grad_clip,
                          L2_is_weight_decay=L2_is_weight_decay, use_averages=use_averages)
