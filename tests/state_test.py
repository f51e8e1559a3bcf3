"""Tests for minijax/state/: refs, the state primitives, discharge_state and run_state.

Every value is checked against JAX's own state machinery (jax._src.state: AbstractRef,
run_state, discharge_state) on the same program. Mirrors tests/state_test.py in JAX.
"""

import jax
import jax.experimental.pallas  # noqa: F401  (jax.experimental.pallas.ds)
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import core as jcore
from jax._src.state import discharge as jdischarge
from jax._src.state.types import AbstractRef as JRef

import minijax
import minijax.numpy as mnp
from minijax import core
from minijax.state import AbstractRef, discharge_state, ds, run_state

X = np.arange(48, dtype=np.float32).reshape(6, 8) / 7


def test_abstract_ref_prints_as_jax():
    want = JRef(jcore.ShapedArray((8, 8), jnp.float32))
    got = AbstractRef(core.ShapedArray((8, 8), np.float32))
    assert repr(got) == str(want)
    assert got.shape == want.shape and got.dtype == want.dtype


def test_make_jaxpr_of_a_ref_function_types_its_input_as_a_ref():
    def f(r):
        return r[...]

    want = jax.make_jaxpr(f)(JRef(jcore.ShapedArray((8, 8), jnp.float32)))
    got = minijax.make_jaxpr(f)(AbstractRef(core.ShapedArray((8, 8), np.float32)))
    assert str(want.jaxpr).split(". let")[0] == str(got.jaxpr).split(". let")[0]
    assert "Ref{f32[8,8]}" in str(got.jaxpr)
    assert [e.primitive.name for e in got.jaxpr.eqns] == ["get"]


def _program(J, ds_):
    """Reads and writes of a ref: whole, a row, a dynamic slice, +=, in a loop and a cond."""
    def f(r):
        x = r[...]
        r[0, :] = x[1] + 1.0
        r[ds_(2, 3), :] += 2.0
        r[:, 3] = r[:, 4] * 0.5

        def body(i, c):
            r[i, ds_(1, 2)] = r[i, ds_(1, 2)] * 3.0 + c
            return c + 1.0

        J.lax.fori_loop(0, 4, body, 0.0)
        J.lax.cond(r[5, 0] > 0, lambda: r.__setitem__((5, 0), -r[5, 0]), lambda: None)
    return f


def test_run_state_matches_jax():
    want = jdischarge.run_state(_program(jax, jax.experimental.pallas.ds))(jnp.asarray(X))
    got = run_state(_program(minijax, ds))(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_discharge_state_gives_a_pure_jaxpr_returning_final_ref_values():
    ref = AbstractRef(core.ShapedArray(X.shape, np.float32))
    closed = minijax.make_jaxpr(lambda r: (_program(minijax, ds)(r), r[0, 0])[1])(ref)
    pure, consts = discharge_state(closed.jaxpr, closed.consts)
    names = {e.primitive.name for e in pure.eqns}
    assert not names & {"get", "swap", "addupdate"}
    assert {"dynamic_slice", "dynamic_update_slice", "scan", "cond"} <= names
    assert [v.aval.str_short() for v in pure.invars] == ["f32[6,8]"]
    core.check_jaxpr(pure)
    out0, final = core.eval_jaxpr(pure, consts, X)
    want = jdischarge.run_state(_program(jax, jax.experimental.pallas.ds))(jnp.asarray(X))
    np.testing.assert_allclose(np.asarray(final), np.asarray(want), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out0), np.asarray(want)[0, 0], rtol=1e-6)


def test_discharge_of_a_while_loop_with_traced_bound():
    def prog(J, n):
        def f(r):
            J.lax.fori_loop(0, n, lambda i, c: (r.__setitem__(i, r[i] + r[i + 1]), c)[1], 0)
        return f

    def mj(x, n):
        return run_state(prog(minijax, n))(x)

    def jx(x, n):
        return jdischarge.run_state(prog(jax, n))(x)

    x = np.arange(8, dtype=np.float32)
    got = minijax.jit(mj)(x, np.int32(5))
    want = jax.jit(jx)(x, np.int32(5))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))


def test_addupdate_and_swap_directly():
    from minijax.state import ref_addupdate, ref_swap

    def f(refs):
        a, b = refs
        old = ref_swap(a, (1,), mnp.float32(9.0))
        ref_addupdate(b, (ds(0, 2),), mnp.stack([old, old]))

    got = run_state(f)((np.arange(3, dtype=np.float32), np.ones(4, np.float32)))

    def g(refs):
        a, b = refs
        old = a[1]
        a[1] = 9.0
        b[0:2] += jnp.stack([old, old])

    want = jdischarge.run_state(g)((jnp.arange(3.0), jnp.ones(4)))
    for x, y in zip(got, want):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y))


def test_vmap_of_a_batched_ref_reads_and_writes_each_element():
    # vmap over a ref argument inside a traced function: the state batching rules insert a
    # full slice along the batch axis
    def f(r):
        def per_row(row):
            row[ds(0, 2)] = row[ds(1, 2)] * 2.0
            return row[3]
        return minijax.vmap(per_row)(r)

    ref = AbstractRef(core.ShapedArray(X.shape, np.float32))
    closed = minijax.make_jaxpr(f)(ref)
    pure, consts = discharge_state(closed.jaxpr, closed.consts)
    out, final = core.eval_jaxpr(pure, consts, X)
    want = X.copy()
    want[:, 0:2] = X[:, 1:3] * 2
    np.testing.assert_allclose(np.asarray(final), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out), X[:, 3], rtol=1e-6)


def test_errors():
    ref = AbstractRef(core.ShapedArray((4, 8), np.float32))
    with pytest.raises(IndexError, match="too many indices"):
        minijax.make_jaxpr(lambda r: r[0, 0, 0])(ref)
    with pytest.raises(ValueError, match="Invalid shape for `swap`"):
        minijax.make_jaxpr(lambda r: r.__setitem__((0,), mnp.ones(3)))(ref)
    with pytest.raises(TypeError, match="integer scalars"):
        minijax.make_jaxpr(lambda r: r[mnp.zeros(2, np.int32)])(ref)
    with pytest.raises(TypeError, match="immutable"):
        minijax.jit(lambda x: x.__setitem__(0, 1.0))(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="must be a ref"):
        from minijax.state import get_p
        get_p.bind(np.ones(3, np.float32), 0, indexer=(("slice", 3),))
