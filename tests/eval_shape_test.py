"""`eval_shape` against JAX's: pytrees in and out, ShapeDtypeStructs and duck-typed arrays in,
weak types, errors, and use under a transformation. Each case runs under both modules."""

import functools

import jax
import numpy as np
import pytest

import minijax


class _Duck:  # has shape and dtype, nothing else: JAX's eval_shape accepts it
    shape = (2, 3)
    dtype = np.float16


def _structs(J, tree):
    """Each output leaf as (shape, dtype name, weak_type), with the tree's own printed form."""
    leaves, treedef = J.tree_util.tree_flatten(tree)
    assert all(type(x) is J.ShapeDtypeStruct for x in leaves)
    return str(treedef).replace("PyTreeDef", ""), [
        (x.shape, np.dtype(x.dtype).name, x.weak_type) for x in leaves]


# name: J -> (function, args, kwargs)
CASES = {
    "array": lambda J: (J.numpy.sin, (np.ones((2, 3), np.float32),), {}),
    "python scalar is weak": lambda J: (lambda x: x * 2, (1.0,), {}),
    "python int plus strong int": lambda J: (lambda x, y: x + y, (3, np.int32(2)), {}),
    "struct in": lambda J: (lambda a, x: J.numpy.tanh(J.numpy.dot(a, x)),
                            (J.ShapeDtypeStruct((4, 5), np.float32),
                             J.ShapeDtypeStruct((5, 2), np.float32)), {}),
    "weak struct in": lambda J: (lambda x: x + np.float16(1),
                                 (J.ShapeDtypeStruct((3,), np.float32, weak_type=True),), {}),
    "duck-typed in": lambda J: (lambda x: x + 1, (_Duck(),), {}),
    "float64 canonicalized": lambda J: (lambda x: x, (np.zeros(3, np.float64),), {}),
    "pytrees and kwargs": lambda J: (
        lambda p, *, scale: {"w": p["w"] @ p["w"].T * scale, "n": (p["b"].sum(), 3, 2.5)},
        ({"w": np.ones((3, 2), np.float32), "b": J.ShapeDtypeStruct((2,), np.int32)},),
        {"scale": 0.5}),
    "partial of unhashable": lambda J: (functools.partial(lambda x, d: x * d["k"], d={"k": 2.0}),
                                        (np.ones(2, np.float32),), {}),
    "jitted function": lambda J: (J.jit(lambda x: (x.astype(np.int32), x > 0)),
                                  (np.ones(4, np.float32),), {}),
    "grad inside": lambda J: (J.grad(lambda x: (x ** 2).sum()), (np.ones(3, np.float32),), {}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_eval_shape_matches_jax(name):
    results = []
    for J in (jax, minijax):
        f, args, kwargs = CASES[name](J)
        results.append(_structs(J, J.eval_shape(f, *args, **kwargs)))
    assert results[0] == results[1]


def test_eval_shape_does_no_flops_and_matches_the_call():
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return x.reshape(-1)[:5]
    out = minijax.eval_shape(f, minijax.ShapeDtypeStruct((1000, 1000), np.float32))
    assert "Array" not in calls and len(calls) == 1  # traced once, never run on values
    ref = jax.eval_shape(f, jax.ShapeDtypeStruct((1000, 1000), np.float32))
    assert (out.shape, out.dtype, out.weak_type) == (ref.shape, ref.dtype, ref.weak_type)
    assert repr(out) == repr(ref)


def test_eval_shape_under_a_transformation_matches_jax():
    # eval_shape of a closure over a tracer, inside vmap: the per-example shape
    res = []
    for J in (jax, minijax):
        def g(x, J=J):
            s = J.eval_shape(lambda y: J.numpy.outer(x, y), np.ones(2, np.float32))
            return J.numpy.zeros(s.shape, s.dtype) + x.sum()
        res.append(np.asarray(J.vmap(g)(np.ones((4, 3), np.float32))))
    np.testing.assert_array_equal(res[0], res[1])
    assert res[0].shape == res[1].shape == (4, 3, 2)


def test_eval_shape_errors_match_jax_and_leave_no_trace_state():
    for f, args in [(lambda x: x + np.ones(4, np.float32), (np.ones(3, np.float32),)),
                    (lambda x: x.reshape(7), (np.ones(3, np.float32),))]:
        kinds = []
        for J in (jax, minijax):
            with pytest.raises(Exception) as e:
                J.eval_shape(f, *args)
            kinds.append(type(e.value))
        assert kinds[1] is kinds[0] or issubclass(kinds[1], kinds[0]), kinds
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace
    with pytest.raises(TypeError):  # a string is not an array type, in JAX as here
        jax.eval_shape(lambda x: x, "abc")
    with pytest.raises(TypeError):
        minijax.eval_shape(lambda x: x, "abc")
