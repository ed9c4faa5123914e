"""The fused optimizers give Thinc's SGD and Adam results bit for bit."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thinc.api import registry
from thinc.optimizers import Adam, SGD

from spacy_structpref.models.optimizers import FusedAdam, FusedOptimizer, FusedSGD

SETTINGS = [
    (SGD, FusedSGD, dict(learn_rate=0.1, L2=1e-4, grad_clip=0.0)),
    (SGD, FusedSGD, dict(learn_rate=0.3, L2=0.0, grad_clip=0.0, use_averages=False)),
    (Adam, FusedAdam, dict(learn_rate=0.002, L2=0.0, grad_clip=0.0)),
    (Adam, FusedAdam, dict(learn_rate=0.01, L2=1e-3, grad_clip=0.0)),
    (SGD, FusedSGD, dict(learn_rate=0.1, L2=1e-4, grad_clip=1.0)),
    # spaCy's default optimizer (nlp.initialize): Adam, weight decay, clipping, averages
    (Adam, FusedAdam, dict(learn_rate=0.001, L2=0.01, grad_clip=1.0)),
    (Adam, FusedAdam, dict(learn_rate=0.01, L2=0.0, grad_clip=0.5, use_averages=False)),
    (Adam, FusedAdam, dict(learn_rate=0.01, L2=1e-3, L2_is_weight_decay=False, grad_clip=0.0)),
]


def run(optimizer, shape, steps, seed, lr_scale):
    rng = numpy.random.default_rng(seed)
    weights = rng.normal(size=shape).astype("f")
    gradient = numpy.zeros(shape, dtype="f")
    trace = []
    for _ in range(steps):
        gradient += numpy.where(rng.random(shape) < 0.3, rng.normal(size=shape), 0).astype("f")
        weights, gradient = optimizer((1, "E"), weights, gradient, lr_scale=lr_scale)
        trace.append((weights.copy(), gradient.copy()))
    return trace, optimizer.averages


@pytest.mark.parametrize("thinc_factory,fused_factory,kwargs", SETTINGS)
@given(seed=st.integers(0, 2**16), rows=st.integers(1, 40), lr_scale=st.sampled_from([1.0, 0.1, 3.0]))
@settings(max_examples=25, deadline=None)
def test_fused_optimizer_equals_thinc_bit_for_bit(thinc_factory, fused_factory, kwargs, seed, rows, lr_scale):
    expected, expected_avg = run(thinc_factory(**kwargs), (rows, 7), 12, seed, lr_scale)
    got, got_avg = run(fused_factory(**kwargs), (rows, 7), 12, seed, lr_scale)
    for (w0, g0), (w1, g1) in zip(expected, got):
        assert numpy.array_equal(w0, w1) and numpy.array_equal(g0, g1)
    if expected_avg is None:
        assert got_avg is None
    else:
        assert numpy.array_equal(expected_avg[(1, "E")], got_avg[(1, "E")])


@pytest.mark.parametrize("L2", [0.0, 0.3])
def test_moments_that_decay_below_the_normal_range_become_zero_and_the_weights_stay_thincs(L2):
    """A gradient for 3 steps, then none: the first moment decays by beta1 a
    step into the subnormal range, where Thinc keeps it and the fused Adam
    stores 0; the steps it would make are lost in the weights' rounding."""
    tiny = numpy.finfo(numpy.float32).tiny
    kwargs = dict(learn_rate=0.002, L2=L2, beta1=0.5, grad_clip=0.0)
    thinc, fused = Adam(**kwargs), FusedAdam(**kwargs)
    rng = numpy.random.default_rng(0)
    w0 = rng.normal(size=(6, 5)).astype("f")
    w1 = w0.copy()
    seen_subnormal = False
    for step in range(200):
        g = rng.normal(size=(6, 5)).astype("f") if step < 3 else numpy.zeros((6, 5), dtype="f")
        w0, _ = thinc((1, "E"), w0, g.copy())
        w1, _ = fused((1, "E"), w1, g.copy())
        assert numpy.array_equal(w0, w1)
        for key in ("mom1", "mom2"):
            m0, m1 = getattr(thinc, key)[(1, "E")], getattr(fused, key)[(1, "E")]
            subnormal = (m0 != 0) & (numpy.abs(m0) < tiny)
            seen_subnormal |= bool(subnormal.any())
            assert numpy.array_equal(m1[subnormal], numpy.zeros(int(subnormal.sum()), dtype="f"))
            assert numpy.array_equal(m0[~subnormal], m1[~subnormal])
    assert seen_subnormal
    assert numpy.array_equal(thinc.averages[(1, "E")], fused.averages[(1, "E")])


def test_registered_under_versioned_names():
    assert isinstance(registry.optimizers.get("spacy_structpref.SGD.v1")(0.1), FusedOptimizer)
    assert isinstance(registry.optimizers.get("spacy_structpref.Adam.v1")(), FusedOptimizer)


def test_other_arrays_go_through_thinc():
    """float64 and non-contiguous parameters are Thinc's business, same result."""
    weights = numpy.arange(12, dtype="d").reshape(3, 4)
    gradient = numpy.ones((3, 4))
    expected, _ = SGD(0.1, grad_clip=0.0)((0, "W"), weights.copy(), gradient.copy())
    got, _ = FusedSGD(0.1, grad_clip=0.0)((0, "W"), weights.copy(), gradient.copy())
    assert numpy.array_equal(expected, got)
