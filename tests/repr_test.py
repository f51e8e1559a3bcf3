"""Reprs a reader compares with JAX's: tracers under each transformation, abstract values,
treedefs. One program, two modules: the printed text must be identical.
"""

import collections

import jax
import numpy as np
import pytest

import minijax

NT = collections.namedtuple("NT", "a b")


def _seen(J, transform, *args):
    """The reprs of the values a fresh function sees while `transform` runs it."""
    seen = []

    def f(x, *rest):
        seen.append(repr(x))
        return x.sum() if hasattr(x, "sum") else x

    transform(J, f)(*args)
    return seen


F32 = np.ones((2, 3), np.float32)
V3 = np.arange(3, dtype=np.float32)
CASES = {
    "jit_weak": (lambda J, f: J.jit(f), 1.0),
    "jit_array": (lambda J, f: J.jit(f), F32),
    "jit_int": (lambda J, f: J.jit(f), np.arange(3, dtype=np.int32)),
    "make_jaxpr": (lambda J, f: J.make_jaxpr(f), V3),
    "jvp": (lambda J, f: lambda x: J.jvp(f, (x,), (x,)), 2.0),
    "jvp_array": (lambda J, f: lambda x: J.jvp(f, (x,), (x,)), V3),
    "grad": (lambda J, f: J.grad(f), 1.5),
    "vjp": (lambda J, f: lambda x: J.vjp(f, x), V3),
    "linearize": (lambda J, f: lambda x: J.linearize(f, x), V3),
    "vmap": (lambda J, f: J.vmap(f), V3),
    "vmap_axis1": (lambda J, f: J.vmap(f, in_axes=1), F32),
    "vmap_of_vmap": (lambda J, f: J.vmap(J.vmap(f)), F32),
    "jit_of_grad": (lambda J, f: J.jit(J.grad(f)), 1.0),
    "vmap_of_grad": (lambda J, f: J.vmap(J.grad(f)), V3),
    "grad_of_jit_inner_vmap": (lambda J, f: J.grad(lambda x: J.vmap(f)(x).sum()), V3),
    "jvp_of_vmap": (lambda J, f: lambda x: J.jvp(J.vmap(f), (x,), (x,)), V3),
    "jit_of_vmap": (lambda J, f: J.jit(J.vmap(f)), F32),
}


@pytest.mark.parametrize("name", CASES)
def test_tracer_reprs_match_jax(name):
    transform, *args = CASES[name]
    assert _seen(minijax, transform, *args) == _seen(jax, transform, *args)


@pytest.mark.parametrize("value", [np.float32(1.0), 1.0, 3, True, np.ones((2, 3)),
                                   np.arange(4, dtype=np.uint8)])
def test_aval_str_matches_jax_typeof(value):
    assert str(minijax.core.get_aval(value)) == str(jax.typeof(value))


@pytest.mark.parametrize("tree", [NT(1, 2), NT(NT(1, (2,)), [3]), [NT(a=None, b={"k": 1})],
                                  collections.OrderedDict(b=1, a=NT(2, 3))])
def test_treedef_reprs_match_jax(tree):
    assert (repr(minijax.tree_util.tree_structure(tree))
            == repr(jax.tree_util.tree_structure(tree)))


# arrays of each length around the line width, empty ones, weak types, several rows
ARRAYS = {
    "short": lambda J: J.numpy.arange(5.0),
    "full last line": lambda J: J.numpy.array([0.0, 0.841471, 0.9092974, 0.14112, -0.7568025]),
    "two lines": lambda J: J.numpy.linspace(0.0, 1.0, 9),
    "empty": lambda J: J.numpy.zeros((0, 3)),
    "weak": lambda J: J.numpy.asarray(2.5) * 2.0,
    "rows": lambda J: J.numpy.arange(24.0).reshape(4, 6) / 8,
    "ints": lambda J: J.numpy.arange(40),
}


@pytest.mark.parametrize("name", ARRAYS)
def test_array_reprs_match_jax(name):
    # JAX's repr puts `dtype=` after one space, or after six where the last line is full
    assert repr(ARRAYS[name](minijax)) == repr(ARRAYS[name](jax))
