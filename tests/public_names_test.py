"""Public names JAX users reach for, each run under both modules: `jacobian`,
`ClosedJaxpr.literals`, `numpy_dtype_promotion` (and the `jax_numpy_dtype_promotion` option),
`ShapeDtypeStruct.like`.
"""

import jax
import numpy as np
import pytest

import minijax

X = np.array([0.5, -1.0, 2.0], np.float32)


def _close(got, want):
    g, gt = minijax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert str(gt) == str(wt)
    for a, b in zip(g, w):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_jacobian_is_jacrev_with_its_options():
    def program(J):
        f = lambda x, y: {"s": J.numpy.sin(x) * y, "p": (x * y).sum()}
        return (J.jacobian(f, argnums=(0, 1))(X, X + 1),
                J.jacobian(lambda z: z * z, holomorphic=True)(X.astype(np.complex64)))
    _close(program(minijax), program(jax))


def test_closed_jaxpr_literals_are_its_consts():
    big = np.arange(4, dtype=np.float32)
    for J in (jax, minijax):
        closed = J.make_jaxpr(lambda x: x * big + 2.0)(np.ones(4, np.float32))
        assert len(closed.literals) == len(closed.consts) == 1
        np.testing.assert_array_equal(np.asarray(closed.literals[0]), big)


PAIRS = [(np.float32, np.int32), (np.float32, np.float16), (np.int8, np.int16),
         (np.bool_, np.int32), (np.float32, np.float32), (np.uint8, np.uint8),
         (np.complex64, np.float32)]
SCALARS = [1, 1.5, 2j, True]


def _promotions(J):
    jnp, out = J.numpy, []
    for a, b in PAIRS:
        try:
            out.append(str((jnp.ones(2, a) + jnp.ones(2, b)).dtype))
        except Exception as e:  # the exception type is what is compared
            out.append(type(e).__name__)
    for s in SCALARS:
        for a in (np.int32, np.float32, np.complex64, np.uint8, np.float16):
            try:
                r = jnp.ones(2, a) * s
                out.append((str(r.dtype), r.weak_type))
            except Exception as e:
                out.append(type(e).__name__)
    try:
        out.append(str(jnp.promote_types(np.int8, np.int16)))
    except Exception as e:
        out.append(type(e).__name__)
    return out


def test_numpy_dtype_promotion_strict_and_standard():
    for J in (jax, minijax):
        assert J.config.jax_numpy_dtype_promotion == "standard"
    with minijax.numpy_dtype_promotion("strict"), jax.numpy_dtype_promotion("strict"):
        assert minijax.config.jax_numpy_dtype_promotion == "strict"
        got, want = _promotions(minijax), _promotions(jax)
        assert got == want
        assert "TypePromotionError" in got
        with pytest.raises(ValueError):  # TypePromotionError is a ValueError in both
            minijax.numpy.ones(2, np.float32) + minijax.numpy.ones(2, np.int32)
    assert minijax.config.jax_numpy_dtype_promotion == "standard"
    assert _promotions(minijax)[:len(PAIRS)] == _promotions(jax)[:len(PAIRS)]
    for J in (jax, minijax):
        with pytest.raises(ValueError):
            with J.numpy_dtype_promotion("loose"):
                pass
        with pytest.raises(ValueError):
            J.config.update("jax_numpy_dtype_promotion", "loose")


@pytest.mark.parametrize("value", [1.0, 3, True, np.ones((2, 3)), np.arange(3, dtype=np.int8),
                                   "array", "struct"])
def test_shape_dtype_struct_like(value):
    def program(J):
        v = {"array": J.numpy.arange(3), "struct": J.ShapeDtypeStruct((2,), np.int8)}.get(
            value, value) if isinstance(value, str) else value
        seen = []

        def f(x):
            seen.append(repr(J.ShapeDtypeStruct.like(x)))
            return x
        if not isinstance(v, J.ShapeDtypeStruct):
            J.jit(f)(v)  # on a tracer too
        s = J.ShapeDtypeStruct.like(v)
        return repr(s), s.shape, str(s.dtype), s.weak_type, seen
    assert program(minijax) == program(jax)


def test_shape_dtype_struct_like_rejects_non_arrays():
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.ShapeDtypeStruct.like("not an array")


def _sharding_names(J):
    s, out = J.sharding, []

    def attempt(f):
        try:
            out.append(f())
        except ValueError as e:
            out.append(("ValueError", str(e).replace("minijax", "jax").split(" Got type")[0]))
    m = J.make_mesh((1,), ("x",))
    with J.set_mesh(m):
        out.append(s.get_mesh() == m)
    attempt(lambda: J.jit(lambda x: s.get_mesh())(1.0))
    dev = s.AbstractDevice("TPU v5 lite", 1, "tpu")
    am = s.AbstractMesh((2,), ("x",), abstract_device=dev)
    out += [repr(dev), am.abstract_device == dev, s.get_abstract_mesh().empty]
    with s.use_abstract_mesh(am):
        out.append((s.get_abstract_mesh() == am, s.get_abstract_mesh().axis_names))
    out.append(s.get_abstract_mesh().empty)

    def resize():
        with s.use_abstract_mesh(am), s.use_abstract_mesh(s.AbstractMesh((4,), ("y",))):
            pass
    attempt(resize)
    out.append(s.get_abstract_mesh().empty)
    attempt(lambda: s.use_abstract_mesh(m))
    t = s.ManualAxisType(varying={"x"}, reduced={"y"})
    out.append((sorted(t.varying), sorted(t.to_ct_mat().unreduced), sorted(t.vur),
                sorted(t.update(varying=frozenset()).varying), t.update().vur == t.vur))
    attempt(lambda: s.ManualAxisType(varying={"x"}, unreduced={"x"}))
    d = J.devices()[0]
    sh = s.make_single_device_sharding(d)
    out.append((type(sh).__name__, sh.device_set == {d}, sh.memory_kind))
    return out


def test_sharding_names_as_jax():
    assert _sharding_names(minijax) == _sharding_names(jax)
    assert minijax.sharding.get_mesh() is None  # JAX: its empty Mesh (the docstring says so)
