# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""One pass over a parameter for what Thinc's ``Optimizer`` does in several
passes after the gradient is known: the SGD step or Adam's (Kingma & Ba 2015,
Algorithm 1, with Thinc's bias correction folded into the step size), zeroing
the gradient, weight decay and the running average of the weights. The arithmetic
is Thinc's own, element by element in float32 and in the same order, so the
results are bit for bit the same (Adam's subnormal moments aside: see
:func:`fused_update`); only the temporaries and the repeated
passes over memory go (they dominate training a linear model over a hashed
feature table of 10⁷ or more entries, whose gradient is mostly zero but whose
decay and average touch every entry)."""
from libc.float cimport FLT_MIN
from libc.math cimport fabsf, sqrtf

import numpy


cdef inline void _settle(float* w, float* ema, Py_ssize_t i, float x, float decay, float keep, bint do_decay,
                         bint do_average) noexcept nogil:
    # after the step: weight decay, the stored weight, its running average
    if do_decay:
        x = x - decay * x
    w[i] = x
    if do_average:
        ema[i] = ema[i] - keep * (ema[i] - x)


cdef void _adam_step(float* w, float* g, float* m1, float* m2, float* ema, Py_ssize_t n, float step, float b1,
                     float b2, float eps, float decay, float keep, bint do_decay, bint do_average) noexcept nogil:
    # Thinc's _adam_momentum and VecVec.add_i, operation for operation, then _settle; the flags are
    # loop-invariant, so the compiler unswitches them and vectorises each version (sqrt and division are exact
    # in every lane)
    cdef Py_ssize_t i
    cdef float gi, u1, u2, x, one_minus_b1 = 1 - b1, one_minus_b2 = 1 - b2, minus_step = -step
    for i in range(n):
        gi = g[i]
        u1 = m1[i] * b1
        u1 = u1 + gi * one_minus_b1
        u2 = m2[i] * b2
        u2 = u2 + one_minus_b2 * (gi * gi)
        # a moment decaying below the smallest normal float becomes 0, not subnormal: see fused_update
        u1 = u1 if fabsf(u1) >= FLT_MIN else 0.0
        u2 = u2 if u2 >= FLT_MIN else 0.0
        m1[i] = u1
        m2[i] = u2
        x = w[i] + (u1 / (sqrtf(u2) + eps)) * minus_step
        g[i] = 0.0
        _settle(w, ema, i, x, decay, keep, do_decay, do_average)


cdef void _fused_update(float* w, float* g, float* ema, Py_ssize_t n, float step, float decay, float keep,
                        bint do_step, bint do_decay, bint do_average) noexcept nogil:
    cdef Py_ssize_t i
    cdef float x
    for i in range(n):
        x = w[i]
        if do_step:
            x = x - step * g[i]
            g[i] = g[i] * 0.0
        _settle(w, ema, i, x, decay, keep, do_decay, do_average)


def _flat(name, array, size):
    if not isinstance(array, numpy.ndarray) or array.dtype != numpy.float32 \
            or not array.flags.c_contiguous or array.size != size:
        raise ValueError(f"{name} must be a C-contiguous float32 array of {size} entries")
    return array.reshape(-1)


def fused_update(weights, gradient, averages, step, decay, keep, moments=None, beta1=0.0, beta2=0.0, eps=0.0):
    """In place: the step, when ``step`` is not None: ``weights -= step *
    gradient`` or, with ``moments`` (Adam's first and second moments, flat
    arrays of the same size), Adam's update of the moments and ``weights -=
    step * m1 / (sqrt(m2) + eps)``; either zeroes the gradient. Then ``weights
    -= decay * weights`` when ``decay`` is not None, then ``averages -= keep *
    (averages - weights)`` when ``averages`` is not None. Every factor is
    rounded to float32 first, as numpy and Thinc's kernels do.

    One departure from Thinc's Adam: a moment whose magnitude falls below
    float32's smallest normal number (about 1.2e-38) is stored as 0. The
    first moment of a weight that no longer gets a gradient decays by β1 a
    step and reaches that range after some 800 steps; DISTRO's label
    projection gives every column of a touched feature row a gradient, so
    most of its table's moments get there, and subnormal arithmetic made a
    step over a 131,072 × 437 table twelve times slower (1.44 s against
    0.12 s). The step such a moment would make, under 1.2e-38 / eps times
    the step size, is lost in the rounding of every weight above about 1e-25
    (eps 1e-8, step size 0.002), and a subnormal second moment is lost in
    eps, so the weights stay Thinc's bit for bit."""
    cdef Py_ssize_t n = weights.size
    cdef float[::1] w = _flat("weights", weights, n)
    cdef float[::1] g = _flat("gradient", gradient, n) if step is not None else w
    cdef float[::1] e = _flat("averages", averages, n) if averages is not None else w
    cdef bint do_adam = moments is not None
    if do_adam and step is None:
        raise ValueError("Adam's moments need a step size")
    cdef float[::1] m1 = _flat("first moment", moments[0], n) if do_adam else w
    cdef float[::1] m2 = _flat("second moment", moments[1], n) if do_adam else w
    cdef bint do_step = step is not None, do_decay = decay is not None, do_average = averages is not None
    cdef float f_step = step if do_step else 0.0
    cdef float f_decay = decay if do_decay else 0.0
    cdef float f_keep = keep if do_average else 0.0
    cdef float f_b1 = beta1, f_b2 = beta2, f_eps = eps
    if n == 0:
        return
    with nogil:
        if do_adam:
            _adam_step(&w[0], &g[0], &m1[0], &m2[0], &e[0], n, f_step, f_b1, f_b2, f_eps, f_decay, f_keep, do_decay,
                       do_average)
        else:
            _fused_update(&w[0], &g[0], &e[0], n, f_step, f_decay, f_keep, do_step, do_decay, do_average)
