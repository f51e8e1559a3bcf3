"""A new primitive written against `jax.extend.core`, `jax.interpreters.{ad,batching,mlir}`,
as JAX's "JAX Internals: primitives" tutorial writes it, run under `jax` and under `minijax`
(whose own machinery sits at the same paths): the same values eagerly, under `jit` (lowered
with `mlir.lower_fun`), `jvp`, `grad` (a transpose rule) and `vmap`, and the same jaxpr.
Mirrors tests/extend_test.py in JAX.
"""

import importlib

import jax
import numpy as np

import minijax


def _modules(J):
    name = J.__name__
    return [importlib.import_module(f"{name}.{m}") for m in
            ("extend.core", "interpreters.ad", "interpreters.batching", "interpreters.mlir")]


def tutorial(J):
    """multiply_add(x, y, z) = x * y + z as its own primitive, with every rule."""
    ext, ad, batching, mlir = _modules(J)
    prim = ext.Primitive("multiply_add")
    prim.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
    prim.def_abstract_eval(lambda x, y, z: J.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(lambda x, y, z: x * y + z,
                                                multiple_results=False))
    mul_add = lambda x, y, z: prim.bind(x, y, z)
    ad.defjvp(prim, lambda g, x, y, z: mul_add(g, y, J.numpy.zeros_like(z)),
              lambda g, x, y, z: mul_add(x, g, J.numpy.zeros_like(z)),
              lambda g, x, y, z: g)

    def batch_rule(args, dims, **params):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        moved = [J.numpy.broadcast_to(a, (size,) + a.shape) if d is None else
                 J.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims)]
        return mul_add(*moved), 0
    batching.primitive_batchers[prim] = batch_rule

    x, y, z = (np.arange(3, dtype=np.float32) + k for k in (1.0, 2.0, 3.0))
    return [mul_add(x, y, z),
            J.jit(mul_add)(x, y, z),
            J.jvp(mul_add, (x, y, z), (z, x, y)),
            J.vmap(mul_add, in_axes=(0, None, 0))(np.ones((2, 3), np.float32), y,
                                                  np.ones((2, 3), np.float32)),
            J.jit(J.vmap(mul_add, in_axes=(0, 0, None)))(np.ones((2, 3), np.float32),
                                                         np.ones((2, 3), np.float32), z),
            str(J.make_jaxpr(mul_add)(x, y, z))]


def test_tutorial_primitive_runs_the_same_under_both_modules():
    got, want = tutorial(minijax), tutorial(jax)
    assert got[-1] == want[-1]
    for g, w in zip(jax.tree.leaves(got[:-1]), jax.tree.leaves(want[:-1])):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_extend_core_names_are_minijax_own():
    from minijax import core
    from minijax.extend import core as ext
    for name in ("Primitive", "Jaxpr", "ClosedJaxpr", "JaxprEqn", "Literal", "Var",
                 "jaxpr_as_fun", "check_jaxpr"):
        assert getattr(ext, name) is getattr(core, name)
        assert hasattr(jax.extend.core, name), name


def tutorial_rules(J):
    """The tutorial's own spellings: an eager call before any abstract evaluation rule, a
    lowering registered for 'cpu' that returns a list of values, a jvp rule that receives
    tuples, a batching rule taking (values, batch axes) only."""
    from jax.extend.mlir.dialects import stablehlo as hlo  # the IR builders, in both
    ext, ad, batching, mlir = _modules(J)
    prim = ext.Primitive("multiply_add")
    seen = []
    prim.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
    eager = float(prim.bind(2.0, 2.0, 10.0))  # no abstract eval yet: the impl alone runs
    prim.def_abstract_eval(lambda x, y, z: J.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, lambda ctx, x, y, z: [hlo.AddOp(hlo.MulOp(x, y), z).result],
                           platform="cpu")

    def jvp(primals, tangents):
        seen.append((type(primals).__name__, type(tangents).__name__))
        (x, y, z), (xt, yt, zt) = primals, tangents
        zeros = lambda t: J.numpy.zeros_like(x) if type(t).__name__ == "Zero" else t
        return prim.bind(x, y, z), prim.bind(zeros(xt), y, prim.bind(x, zeros(yt), zeros(zt)))
    ad.primitive_jvps[prim] = jvp

    def batch(vector_arg_values, batch_axes):
        assert all(d == 0 for d in batch_axes)
        return prim.bind(*vector_arg_values), batch_axes[0]
    batching.primitive_batchers[prim] = batch
    x = np.float32(2.0)
    return [eager, float(J.jit(lambda a, b: prim.bind(a, a, b))(x, 10.0)),
            [float(v) for v in J.jvp(lambda a: prim.bind(a, a, 10.0), (x,), (1.0,))],
            np.asarray(J.vmap(lambda a: prim.bind(a, a, a))(np.arange(3.0))).tolist(),
            seen]


def test_tutorial_rule_spellings_as_jax():
    assert tutorial_rules(minijax) == tutorial_rules(jax)
