"""Rung 1: primitives, `bind`, and the evaluation trace (minijax/core.py, jax/_src/core.py)."""

from __future__ import annotations

import contextlib

import numpy as np


class Primitive:
    """An operation: `impl` computes it on NumPy arrays, `shape_rule` gives its output's
    (shape, dtype) from its inputs' (used by tracing)."""

    def __init__(self, name, impl, shape_rule):
        self.name, self.impl, self.shape_rule = name, impl, shape_rule

    def bind(self, *args, **params):
        # BUILD rung 1: hand the primitive to the current trace
        return current_trace().process_primitive(self, list(args), params)
        # END BUILD

    def __repr__(self):
        return self.name


class Trace:
    """An interpreter: what binding a primitive means while this trace is current."""

    def process_primitive(self, prim, args, params):
        raise NotImplementedError


class EvalTrace(Trace):
    """The bottom interpreter: run the primitive's NumPy implementation."""

    def process_primitive(self, prim, args, params):
        # BUILD rung 1: evaluate on concrete values
        return prim.impl(*[np.asarray(a) for a in args], **params)
        # END BUILD


_trace_stack = [EvalTrace()]


def current_trace() -> Trace:
    return _trace_stack[-1]


@contextlib.contextmanager
def set_current_trace(trace: Trace):
    """Make `trace` current inside the block (JAX: jax/_src/core.py set_current_trace)."""
    # BUILD rung 1: push the trace, pop it when the block ends (even on an error)
    _trace_stack.append(trace)
    try:
        yield trace
    finally:
        _trace_stack.pop()
    # END BUILD


class Tracer:
    """A value owned by a trace; Python operators bind primitives."""

    __array_priority__ = 1000
    shape: tuple
    dtype: np.dtype

    def __add__(self, other):
        return add(self, other)

    __radd__ = __add__

    def __mul__(self, other):
        return mul(self, other)

    __rmul__ = __mul__

    def __neg__(self):
        return neg(self)

    def __sub__(self, other):
        return add(self, neg(other))

    def __rsub__(self, other):
        return add(other, neg(self))

    def __matmul__(self, other):
        return dot(self, other)


def shape_dtype(x) -> tuple[tuple, np.dtype]:
    if isinstance(x, Tracer):
        return x.shape, x.dtype
    x = np.asarray(x)
    return x.shape, x.dtype


def _same(*xs):
    (s, d), *rest = map(shape_dtype, xs)
    if any(r[0] != s for r in rest):
        raise TypeError(f"shapes differ: {[shape_dtype(x)[0] for x in xs]} (broadcast first)")
    return s, d


def _reduced(x, *, axes):
    s, d = shape_dtype(x)
    return tuple(n for i, n in enumerate(s) if i not in axes), d


add_p = Primitive("add", np.add, _same)
mul_p = Primitive("mul", np.multiply, _same)
neg_p = Primitive("neg", np.negative, _same)
sin_p = Primitive("sin", np.sin, _same)
cos_p = Primitive("cos", np.cos, _same)
exp_p = Primitive("exp", np.exp, _same)
log_p = Primitive("log", np.log, _same)
max_p = Primitive("max", np.maximum, _same)
gt_p = Primitive("gt", np.greater, lambda x, y: (_same(x, y)[0], np.dtype(bool)))
select_p = Primitive("select", np.where, lambda p, x, y: _same(x, y))
reduce_sum_p = Primitive("reduce_sum", lambda x, *, axes: np.sum(x, axes), _reduced)
dot_p = Primitive("dot", np.dot, lambda x, y: (shape_dtype(x)[0][:-1] + shape_dtype(y)[0][1:],
                                               shape_dtype(x)[1]))
transpose_p = Primitive("transpose", lambda x, *, perm: np.transpose(x, perm),
                        lambda x, *, perm: (tuple(shape_dtype(x)[0][i] for i in perm),
                                            shape_dtype(x)[1]))


def _broadcast_impl(x, *, shape, dims):
    kept = [1] * len(shape)
    for d, n in zip(dims, np.shape(x)):
        kept[d] = n
    return np.broadcast_to(np.reshape(x, kept), shape)


broadcast_p = Primitive("broadcast_in_dim", _broadcast_impl,
                        lambda x, *, shape, dims: (shape, shape_dtype(x)[1]))


def add(x, y): return add_p.bind(x, y)
def mul(x, y): return mul_p.bind(x, y)
def neg(x): return neg_p.bind(x)
def sin(x): return sin_p.bind(x)
def cos(x): return cos_p.bind(x)
def exp(x): return exp_p.bind(x)
def log(x): return log_p.bind(x)
def maximum(x, y): return max_p.bind(x, y)
def greater(x, y): return gt_p.bind(x, y)
def select(p, x, y): return select_p.bind(p, x, y)
def reduce_sum(x, axes): return reduce_sum_p.bind(x, axes=tuple(axes))
def dot(x, y): return dot_p.bind(x, y)
def transpose(x, perm): return transpose_p.bind(x, perm=tuple(perm))
def broadcast_in_dim(x, shape, dims): return broadcast_p.bind(x, shape=tuple(shape),
                                                              dims=tuple(dims))
