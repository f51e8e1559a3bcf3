"""Tests for minijax/state/: refs, the state primitives, discharge_state and run_state.

Every value is checked against JAX's own state machinery (jax._src.state: AbstractRef,
run_state, discharge_state) on the same program. Mirrors tests/state_test.py in JAX.
"""

import re

import jax
import jax.experimental.pallas  # jax.experimental.pallas.ds
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


def _ref_program(ds_, addupdate, swap):
    """get / set / swap / addupdate with static and dynamic (traced) starts, on a 2-D ref."""
    def f(r, i):
        x = r[...]
        r[...] = x + 1.0
        y = r[1]
        r[0, ds_(i, 2)] = y[:2]
        z = r[ds_(i, 2), 1:3]
        addupdate(r, (i, ds_(0, 2)), z[0])
        addupdate(r, (2,), y)
        old = swap(r, (3, i), 7.0)
        return [x, old]
    return f


def _trace_jax(f, *avals):
    from jax._src import api_util, linear_util as lu
    from jax._src.interpreters import partial_eval as jpe
    dbg = api_util.debug_info("f", f, avals, {})
    return jpe.trace_to_jaxpr_dynamic(lu.wrap_init(f, debug_info=dbg), list(avals))[0]


def _sorted_effects(text):
    # JAX prints a jaxpr's effects in set order (which varies run to run); minijax sorts them
    return re.sub(r": \{ (.*?) \}", lambda m: ": { " + ", ".join(
        sorted(m.group(1).split(", "))) + " }", text)


def test_state_primitives_and_ref_effects_print_as_jax():
    from jax._src.state import primitives as jstate

    from minijax.state import ref_addupdate, ref_swap
    want = _trace_jax(
        _ref_program(jax.experimental.pallas.ds, jstate.ref_addupdate, jstate.ref_swap),
        JRef(jcore.ShapedArray((4, 4), jnp.float32)), jcore.ShapedArray((), jnp.int32))
    got = minijax.make_jaxpr(_ref_program(ds, ref_addupdate, ref_swap))(
        AbstractRef(core.ShapedArray((4, 4), np.float32)), np.int32(0)).jaxpr
    want_text = want.pretty_print(print_effects=True)
    assert "<- a[...]" in want_text and "a[b,:2] +=" in want_text
    assert got.pretty_print(print_effects=True) == _sorted_effects(want_text)
    assert str(got) == str(want)  # without effects


def test_ref_effects_name_their_ref_dce_keeps_writes_and_pallas_call_has_none():
    from jax._src.interpreters import partial_eval as jpe
    from jax.experimental import pallas as jpl

    from minijax.experimental import pallas as mpl
    from minijax.interpreters import partial_eval as mpe

    def effects_of(jaxpr):  # (kind, position of the ref among the invars)
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # minijax's kernel jaxpr is a ClosedJaxpr
        return sorted((type(e).__name__, jaxpr.invars.index(e.input)) for e in jaxpr.effects)

    def f(r, s):
        _ = s[...]  # an unused read: dead code
        r[0] = 1.0  # writes stay
        return []

    avals = [JRef(jcore.ShapedArray((4,), jnp.float32))] * 2
    want = jpe.dce_jaxpr(_trace_jax(f, *avals), [])[0]
    got = mpe.dce_jaxpr(minijax.make_jaxpr(f)(
        *[AbstractRef(core.ShapedArray((4,), np.float32))] * 2).jaxpr, [])[0]
    assert str(got) == str(want) and effects_of(got) == effects_of(want)
    assert effects_of(got) == [("WriteEffect", 0)]

    def run(P, J):
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2.0
            o_ref[0] += x_ref[P.ds(P.program_id(0), 1)][0]
        call = P.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4,), jnp.float32),
                             grid=(1,), interpret=True)
        return J.make_jaxpr(call)(np.ones(4, np.float32))

    want, got = run(jpl, jax), run(mpl, minijax)
    assert got.jaxpr.effects == set() == want.jaxpr.effects
    assert got.eqns[0].effects == set() == want.eqns[0].effects
    kw, kg = want.eqns[0].params["jaxpr"], got.eqns[0].params["jaxpr"].jaxpr
    assert effects_of(kg) == effects_of(kw) == [("ReadEffect", 0), ("ReadEffect", 1),
                                                ("WriteEffect", 1)]
    assert kg.pretty_print(print_effects=True) == _sorted_effects(
        kw.pretty_print(print_effects=True).replace("Ref<default>", "Ref"))
