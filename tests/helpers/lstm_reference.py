"""Slow reference for the span CRF's BiLSTM: one sequence, one direction,
one step at a time, in float64, from the parameters' values alone."""
import numpy


def _logistic(x):
    return 1.0 / (1.0 + numpy.exp(-x))


def bilstm_reference(params, X, nH: int, depth: int):
    """The stacked BiLSTM's outputs ``(h→_t ; h←_t)`` for each sequence of
    ``X``; ``params`` maps ``Wx{l}``, ``Wh{l}``, ``b{l}`` to arrays shaped as
    the model's (direction first; gates i, f, o, g)."""
    outputs = []
    for x in X:
        inp = numpy.asarray(x, dtype=float)
        for layer in range(depth):
            halves = []
            for direction in (0, 1):
                Wx, Wh, b = (numpy.asarray(params[f"{n}{layer}"][direction], dtype=float)
                             for n in ("Wx", "Wh", "b"))
                h, c, states = numpy.zeros(nH), numpy.zeros(nH), []
                for v in (inp if direction == 0 else inp[::-1]):
                    z = v @ Wx + h @ Wh + b
                    i, f, o = (_logistic(z[k * nH:(k + 1) * nH]) for k in range(3))
                    c = f * c + i * numpy.tanh(z[3 * nH:])
                    h = o * numpy.tanh(c)
                    states.append(h)
                states = numpy.array(states)
                halves.append(states if direction == 0 else states[::-1])
            inp = numpy.concatenate(halves, axis=1)
        outputs.append(inp)
    return outputs
