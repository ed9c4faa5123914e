# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""One pass over a parameter for what Thinc's ``Optimizer`` does in several
numpy expressions after the gradient is known: the plain SGD step, zeroing the
gradient, weight decay and the running average of the weights. The arithmetic
is Thinc's own, element by element in float32 and in the same order, so the
results are bit for bit the same; only the temporaries and the repeated
passes over memory go (they dominate training a linear model over a hashed
feature table of 10⁷ or more entries, whose gradient is mostly zero but whose
decay and average touch every entry)."""
import numpy


cdef void _fused_update(float* w, float* g, float* ema, Py_ssize_t n, float step, float decay,
                        float keep, bint do_step, bint do_decay, bint do_average) noexcept nogil:
    cdef Py_ssize_t i
    cdef float x
    for i in range(n):
        x = w[i]
        if do_step:
            x = x - step * g[i]
            g[i] = g[i] * 0.0
        if do_decay:
            x = x - decay * x
        w[i] = x
        if do_average:
            ema[i] = ema[i] - keep * (ema[i] - x)


def _flat(name, array, size):
    if not isinstance(array, numpy.ndarray) or array.dtype != numpy.float32 \
            or not array.flags.c_contiguous or array.size != size:
        raise ValueError(f"{name} must be a C-contiguous float32 array of {size} entries")
    return array.reshape(-1)


def fused_update(weights, gradient, averages, step, decay, keep):
    """In place: ``weights -= step * gradient; gradient *= 0`` when ``step`` is
    not None, then ``weights -= decay * weights`` when ``decay`` is not None,
    then ``averages -= keep * (averages - weights)`` when ``averages`` is not
    None. Every factor is rounded to float32 first, as numpy does with a
    Python float times a float32 array."""
    cdef Py_ssize_t n = weights.size
    cdef float[::1] w = _flat("weights", weights, n)
    cdef float[::1] g = _flat("gradient", gradient, n) if step is not None else w
    cdef float[::1] e = _flat("averages", averages, n) if averages is not None else w
    cdef bint do_step = step is not None, do_decay = decay is not None, do_average = averages is not None
    cdef float f_step = step if do_step else 0.0
    cdef float f_decay = decay if do_decay else 0.0
    cdef float f_keep = keep if do_average else 0.0
    if n == 0:
        return
    with nogil:
        _fused_update(&w[0], &g[0], &e[0], n, f_step, f_decay, f_keep, do_step, do_decay, do_average)
