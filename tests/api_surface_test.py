"""The top-level names of `jax` that minijax adds beyond the transformations, each run under
both modules with JAX's result as the expected one: `pmap` and `smap` (on the 8 CPU devices
tests/conftest.py asks for), device and process queries, `device_get`, caches and live arrays,
`custom_gradient`, `linear_transpose`, `closure_convert`, `ensure_compile_time_eval`,
`named_call`/`named_scope`, `fwd_and_bwd`, arrays from per-device blocks, `memory.Space`,
`dlpack`, refs, the
configuration options as context managers and `make_user_context`, and the submodules
`custom_batching`, `profiler`, `typing`, `version` and `monitoring`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import warnings

import jax
import numpy as np
import pytest

import minijax

X = np.arange(24.0, dtype=np.float32).reshape(4, 6)


def _same(got, want, rtol=1e-6):
    g, gt = minijax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert str(gt) == str(wt)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol)


def _both(program):
    _same(program(minijax), program(jax))


def _raises_in_both(program, exc):
    for J in (jax, minijax):
        with pytest.raises(exc):
            program(J)


# ---------------------------------------------------------------------------------------------
# pmap, smap
# ---------------------------------------------------------------------------------------------

def test_pmap_psum_over_the_named_axis():
    def program(J):
        f = J.pmap(lambda v: v * 2 + J.lax.psum(v, "i"), axis_name="i")
        return f(X), J.pmap(lambda v: J.lax.pmax(v.sum(), "i") - v.sum(), "i")(X)
    _both(program)


def test_pmap_in_axes_out_axes_and_pytrees():
    def program(J):
        g = J.pmap(lambda a, b: {"dot": a @ b["w"], "tot": a.sum() + b["c"]},
                   in_axes=(1, {"w": None, "c": 0}), out_axes={"dot": 0, "tot": None})
        return g(X.T, {"w": np.ones(6, np.float32), "c": np.arange(4.0, dtype=np.float32)})
    _same(*[program(J) for J in (minijax, jax)])


def test_pmap_out_axes_one_and_keyword_arguments():
    def program(J):
        f = J.pmap(lambda a, *, b: a[:, None] * b, out_axes=1)
        return f(X, b=np.full((4, 3), 2.0, np.float32))
    _both(program)


def test_pmap_static_broadcasted_argnums():
    def program(J):
        f = J.pmap(lambda n, v: v ** n + J.lax.psum(1.0, "d"), "d",
                   static_broadcasted_argnums=0)
        return f(2, X), f(3, X[:2])
    _both(program)


def test_pmap_result_is_laid_out_over_the_devices():
    for J in (jax, minijax):
        out = J.pmap(lambda v: v + 1)(X)
        assert len(out.sharding.device_set) == 4
        assert len(out.addressable_shards) == 4


def test_pmap_of_grad_and_grad_of_pmap():
    def program(J):
        loss = lambda w, x: J.lax.pmean(J.numpy.tanh(x * w).sum(), "b")
        per_device = J.pmap(J.grad(loss), "b", in_axes=(None, 0))(0.5, X)
        return per_device, J.grad(lambda w: J.pmap(lambda x: (x * w).sum())(X).sum())(1.0)
    _both(program)


def test_pmap_errors():
    _raises_in_both(lambda J: J.pmap(lambda a: a, in_axes=None)(X), ValueError)
    _raises_in_both(lambda J: J.pmap(lambda a: a, in_axes=1.0)(X), TypeError)
    _raises_in_both(lambda J: J.pmap(lambda a: a)(np.ones((9, 2), np.float32)), ValueError)
    _raises_in_both(lambda J: J.pmap(lambda a, b: a + b)(X, np.ones((3, 6))), ValueError)
    _raises_in_both(lambda J: J.pmap(lambda a: a, axis_size=3)(X), ValueError)


def test_smap_over_one_axis_of_the_mesh_in_context():
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)

    def program(J, axis_type):
        mesh = J.make_mesh((8,), ("x",), axis_types=(getattr(J.sharding.AxisType, axis_type),))
        f = J.smap(lambda v: v - J.lax.pmean(v, "x"), in_axes=0, out_axes=0, axis_name="x")
        with J.set_mesh(mesh):
            if axis_type == "Explicit":  # the argument must already be split along x
                return f(J.reshard(x, J.P("x")))
            return f(x), J.smap(lambda v: J.lax.psum(v, "x"), in_axes=1, out_axes=None,
                                axis_name="x")(np.ones((3, 8), np.float32))
    for axis_type in ("Auto", "Explicit"):
        _same(program(minijax, axis_type), program(jax, axis_type))

    def unsplit(J):  # Explicit, and the argument replicated: shard_map's error in both
        mesh = J.make_mesh((8,), ("x",), axis_types=(J.sharding.AxisType.Explicit,))
        with J.set_mesh(mesh):
            J.smap(lambda v: v, in_axes=0, out_axes=0, axis_name="x")(x)
    _raises_in_both(unsplit, ValueError)


def test_smap_rejects_what_jax_rejects():
    _raises_in_both(lambda J: J.smap(lambda v: v, out_axes=0, axis_name=("x",)), TypeError)
    _raises_in_both(lambda J: J.smap(lambda v: v, in_axes=0.5, out_axes=0, axis_name="x"),
                    TypeError)


# ---------------------------------------------------------------------------------------------
# Devices, processes, arrays on the host
# ---------------------------------------------------------------------------------------------

def test_device_and_process_queries():
    for name in ("default_backend", "local_device_count", "process_index", "process_count",
                 "process_indices", "device_count"):
        assert getattr(minijax, name)() == getattr(jax, name)(), name
    for old, new in (("host_id", "process_index"), ("host_count", "process_count"),
                     ("host_ids", "process_indices")):
        with pytest.warns(UserWarning, match="renamed"):  # (JAX's names `new` twice)
            want = getattr(jax, old)()
        with pytest.warns(UserWarning, match=f"jax.{old} has been renamed to jax.{new}"):
            assert getattr(minijax, old)() == want == getattr(jax, new)()
    assert minijax.Device is jax.Device
    assert all(isinstance(d, minijax.Device) for d in minijax.devices())


def test_reexported_types():
    assert minijax.NamedSharding is minijax.sharding.NamedSharding
    assert minijax.reshard is minijax.sharding.reshard
    x = minijax.device_put(X)
    assert all(isinstance(s, minijax.Shard) for s in x.addressable_shards)
    assert minijax.float0 == jax.dtypes.float0 == minijax.dtypes.float0
    for J in (jax, minijax):
        s = J.ds(2, 3)
        assert (s.start, s.size) == (2, 3)


def test_device_get_and_copy_to_host_async():
    def program(J):
        tree = {"a": J.numpy.arange(3.0) * 2, "b": (J.jit(lambda v: v + 1)(X), 7)}
        assert J.copy_to_host_async(tree) is tree
        got = J.device_get(tree)
        assert type(got["a"]) is np.ndarray and type(got["b"][0]) is np.ndarray
        assert got["b"][1] == 7
        return got
    _both(program)


def test_memory_space_as_a_device_put_target():
    def program(J):
        space = J.memory.Space
        a = J.device_put(X, space.Host)
        b = J.device_put({"k": a}, space.Device)["k"]
        kinds = (a.sharding.memory_kind, b.sharding.memory_kind)
        # under jit: the same values (minijax's avals record no memory space, so its result
        # comes back in device memory, where JAX's stays in host memory)
        return kinds, np.asarray(b), np.asarray(J.jit(lambda v: J.device_put(v * 2, space.Host))(X))
    got, want = program(minijax), program(jax)
    assert got[0] == want[0] == ("pinned_host", "device")
    _same(got[1:], want[1:])
    assert [s.name for s in minijax.memory.Space] == ["Device", "Host"]  # JAX's Any: Pallas's


def test_dlpack_in_and_out():
    def program(J):
        got = [J.dlpack.from_dlpack(np.arange(6.0).reshape(2, 3)),  # float64: canonicalized
               J.dlpack.from_dlpack(np.arange(4, dtype=np.int16)),
               J.dlpack.from_dlpack(jax.numpy.arange(3.0) * 2)]
        assert all(isinstance(g, J.Array) for g in got)
        flags = [J.dlpack.is_supported_dtype(d) for d in (np.float32, np.bool_, "int8",
                                                          J.numpy.bfloat16, np.complex128)]
        return got, flags
    got, want = program(minijax), program(jax)
    _same(got[0], want[0])
    assert got[1] == want[1]
    _raises_in_both(lambda J: J.dlpack.is_supported_dtype(None), TypeError)
    m = minijax.numpy.arange(4.0) * 2  # a minijax Array is a producer too
    for out in (np.from_dlpack(m), jax.dlpack.from_dlpack(m)):
        np.testing.assert_array_equal(np.asarray(out), np.arange(4.0) * 2)


def test_live_arrays_lists_an_array_until_it_dies():
    for J in (jax, minijax):
        x = J.device_put(np.full(5, 3.0, np.float32))
        assert any(a is x for a in J.live_arrays())
        ident = id(x)
        del x
        gc.collect()
        assert all(id(a) != ident for a in J.live_arrays())


def test_clear_caches_retraces():
    for J in (jax, minijax):
        traces = []

        @J.jit
        def f(v, traces=traces):
            traces.append(1)
            return v * 3
        f(X), f(X)
        assert len(traces) == 1
        J.clear_caches()
        np.testing.assert_allclose(np.asarray(f(X)), X * 3)
        assert len(traces) == 2


def test_make_array_from_single_device_arrays_and_process_local_data():
    def program(J):
        mesh = J.make_mesh((4, 2), ("a", "b"))
        s = J.NamedSharding(mesh, J.P("a"))
        x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
        idx = s.addressable_devices_indices_map(x.shape)
        blocks = [J.device_put(x[idx[d]], d) for d in s._device_assignment]
        y = J.make_array_from_single_device_arrays(x.shape, s, blocks)
        z = J.make_array_from_process_local_data(s, x)
        assert y.sharding == s and z.sharding == s
        return y, z, J.jit(lambda a, b: a + b * 2)(y, z)
    _both(program)


# ---------------------------------------------------------------------------------------------
# Differentiation helpers
# ---------------------------------------------------------------------------------------------

def test_custom_gradient():
    def program(J):
        jnp = J.numpy

        @J.custom_gradient
        def clip_grad(x, y):
            return x * y, lambda g: (jnp.clip(g * y, -1.0, 1.0), g * x * 2)

        f = lambda x, y: clip_grad(x, y).sum()
        x, y = np.linspace(-2, 2, 5, dtype=np.float32), np.full(5, 3.0, np.float32)
        return (clip_grad(x, y), J.grad(f, (0, 1))(x, y), J.jit(J.grad(f, (0, 1)))(x, y),
                J.vmap(J.grad(lambda a: clip_grad(a, 2.0)))(x))
    _both(program)


def test_custom_gradient_closing_over_a_nonlinear_value():
    def program(J):
        @J.custom_gradient
        def f(x):
            c = J.numpy.cos(x)
            return J.numpy.sin(x), lambda g: g * c * 10.0
        return J.grad(f)(0.3), J.jit(J.value_and_grad(lambda x: f(x) ** 2))(0.7)
    _both(program)


def test_linear_transpose():
    def program(J):
        t = J.linear_transpose(lambda x, y: (2 * x + y.sum(), x), 1.0,
                               np.ones(3, np.float32))
        m = np.arange(6.0, dtype=np.float32).reshape(2, 3)
        tm = J.linear_transpose(lambda v: m @ v, np.zeros(3, np.float32))
        return t((np.float32(1.0), np.float32(2.0))), tm(np.array([1.0, -1.0], np.float32))
    _both(program)


def test_linear_transpose_errors():
    _raises_in_both(lambda J: J.linear_transpose(J.numpy.sin, 1.0)(1.0), NotImplementedError)
    t = {J: J.linear_transpose(lambda x: (x, x), 1.0) for J in (jax, minijax)}
    _raises_in_both(lambda J: t[J](1.0), TypeError)
    _raises_in_both(lambda J: t[J]((np.int32(1), 2.0)), TypeError)


def test_closure_convert_hoists_traced_values():
    def program(J):
        def solve(f, x0):  # a custom_vjp that needs f's closed-over values as arguments
            g, consts = J.closure_convert(f, x0)
            return _solve(g, x0, *consts)

        @functools.partial(J.custom_vjp, nondiff_argnums=(0,))
        def _solve(g, x0, *consts):
            return g(x0, *consts)

        def fwd(g, x0, *consts):
            return g(x0, *consts), (x0, consts)

        def bwd(g, res, ct):
            x0, consts = res
            _, vjp = J.vjp(g, x0, *consts)
            return vjp(ct)
        _solve.defvjp(fwd, bwd)

        def outer(w):
            return solve(lambda x: J.numpy.sin(w * x) * w, np.float32(0.5))
        return outer(1.5), J.grad(outer)(1.5), J.jit(J.grad(outer))(2.0)
    _both(program)


def test_closure_convert_checks_the_structure():
    def program(J):
        g, consts = J.closure_convert(lambda a: a * 2, (1.0, 2.0))
        assert consts == []
        return g(1.0)
    _raises_in_both(program, TypeError)


def test_fwd_and_bwd():
    def program(J):
        f = lambda a, b: (J.numpy.sin(a) * b).sum()
        fwd, bwd = J.fwd_and_bwd(f, argnums=(0, 1))
        y, f_vjp = fwd(X, 2.0)
        fwd1, bwd1 = J.fwd_and_bwd(f, argnums=1, jitted=False)
        y1, vjp1 = fwd1(X, 2.0)
        return y, bwd(f_vjp, np.float32(1.0)), y1, bwd1(vjp1, np.float32(3.0))
    _both(program)


def test_ensure_compile_time_eval():
    def program(J):
        @J.jit
        def f(x):
            with J.ensure_compile_time_eval():
                k = J.numpy.sin(2.0) * 3
                n = int(J.numpy.argmax(J.numpy.array([1, 5, 2])))
            return x * float(k) + n
        jaxpr = J.make_jaxpr(f.__wrapped__ if hasattr(f, "__wrapped__") else f)(X)
        return f(X), len(jaxpr.eqns)
    got, want = program(minijax), program(jax)
    _same(got[0], want[0])

    def eqns(J, fold):
        def g(x):
            with J.ensure_compile_time_eval() if fold else contextlib.nullcontext():
                k = J.numpy.cos(1.0) + 1
            return x * k
        return {e.primitive.name for e in J.make_jaxpr(g)(X).jaxpr.eqns}
    for J in (jax, minijax):  # folded: neither cos nor add is recorded
        assert "mul" in eqns(J, True) and not {"cos", "add"} & eqns(J, True)
        assert {"cos", "add", "mul"} <= eqns(J, False)
    for J in (jax, minijax):  # and outside the block, tracing as usual
        with pytest.raises(J.errors.ConcretizationTypeError):
            J.jit(lambda x, J=J: float(J.numpy.sin(x)))(1.0)


def test_named_call_and_named_scope_keep_values_and_jaxprs():
    def program(J):
        f = J.named_call(lambda x: J.numpy.sin(x) * 2, name="scaled_sin")
        with J.named_scope("outer"):
            return f(X), str(J.make_jaxpr(f)(X))
    got, want = program(minijax), program(jax)
    _same(got[0], want[0])
    assert got[1] == want[1]
    _raises_in_both(lambda J: J.named_scope(3).__enter__(), TypeError)


# ---------------------------------------------------------------------------------------------
# Refs
# ---------------------------------------------------------------------------------------------

def test_refs_read_write_and_freeze_eagerly():
    def program(J):
        jnp = J.numpy
        r = J.new_ref(jnp.zeros(3))
        assert isinstance(r, J.Ref) and r.shape == (3,) and r.dtype == np.float32
        assert repr(r) == "Ref([0., 0., 0.], dtype=float32)"
        r[...] = r[...] + 1
        r[1] = 5.0
        r[0:2] += np.float32(2.0)
        seen = [r[...], r[2]]
        seen.append(J.ref.swap(r, (), jnp.arange(3.0)))
        J.ref.set(r, 2, 7.0)
        J.ref.addupdate(r, 0, 10.0)
        seen += [J.ref.get(r, ()), J.freeze(r)]
        e = J.new_ref(np.ones((2, 2), np.int32))
        e[1, 0] = 9
        seen.append(e[...])
        J.free_ref(e)
        return seen
    _both(program)


def test_refs_inside_jit_grad_and_vmap():
    def program(J):
        def g(x):
            ref = J.new_ref(x)
            ref[...] = ref[...] * 3
            ref[0] += 1.0
            acc = J.new_ref(np.float32(0.0))
            acc[...] += (J.freeze(ref) ** 2).sum()
            return J.freeze(acc)
        x = np.array([0.5, -1.0], np.float32)
        return (g(x), J.jit(g)(x), J.grad(g)(x), J.jit(J.grad(g))(x),
                J.vmap(g)(np.stack([x, 2 * x])))
    _both(program)

    def empty(J):  # its contents are undefined in JAX: only the type is compared
        def h():
            e = J.empty_ref(J.ShapeDtypeStruct((2, 3), np.int32))
            return J.freeze(e)
        out = J.jit(h)()
        return out.shape, out.dtype
    assert empty(minijax) == empty(jax)


def test_refs_used_after_freeze_or_written_under_another_trace():
    for J in (jax, minijax):
        r = J.new_ref(np.zeros(2, np.float32))
        J.freeze(r)
    with pytest.raises(ValueError, match="after freeze"):
        r[...]
    r = minijax.new_ref(np.zeros(2, np.float32))  # JAX threads it through jit; minijax says no
    with pytest.raises(ValueError, match="written only inside the function"):
        minijax.jit(lambda v: r.__setitem__(..., v))(np.ones(2, np.float32))
    np.testing.assert_array_equal(np.asarray(r[...]), np.zeros(2))


def test_vmapped_write_to_an_outer_ref_raises_jaxs_error():
    # the "101: state" page: every batch member writing one shared ref is JAX's plain
    # Exception, same message (a Ref of the same shape as each member's value)
    def run(J):
        r = J.new_ref(0.0)
        try:
            J.vmap(lambda x: r.__setitem__(..., x))(J.numpy.arange(3.0))
        except Exception as e:  # the family is what is compared
            return type(e).__name__, str(e)
    got, want = run(minijax), run(jax)
    assert got == want and want[0] == "Exception", (got, want)


# ---------------------------------------------------------------------------------------------
# custom_batching
# ---------------------------------------------------------------------------------------------

def _custom_vmap_program(J):
    jnp, calls = J.numpy, []
    f = J.custom_batching.custom_vmap(lambda a, b: jnp.sin(a) * b)

    @f.def_vmap
    def rule(axis_size, in_batched, a, b):  # not sin's batching: the rule's own values
        calls.append((axis_size, in_batched))
        return jnp.cos(a) * b + axis_size, in_batched[0] or in_batched[1]
    x = np.linspace(0, 1, 6, dtype=np.float32).reshape(3, 2)
    outs = (f(x[0], 2.0), J.vmap(f, (0, None))(x, 2.0), J.jit(J.vmap(f))(x, x[:, :1]),
            J.jvp(lambda a: f(a, 3.0), (x[0],), (np.ones(2, np.float32),)),
            J.jvp(lambda a: J.vmap(f, (0, None))(a, 3.0), (x,), (np.ones_like(x),)),
            # vmap of jvp: the jvp of the rule batches the derivative
            J.vmap(lambda a: J.jvp(lambda u: f(u, 2.0), (a,), (jnp.ones_like(a),)))(x),
            J.vmap(lambda a, t: J.jvp(lambda u: f(u, 2.0), (a,), (t,)), (0, None))(
                x, np.ones(2, np.float32)),
            J.grad(lambda u: J.vmap(lambda v: f(v, 2.0))(u).sum())(x))
    return outs, calls


def test_custom_vmap_uses_its_rule_under_vmap():
    (got, got_calls), (want, want_calls) = _custom_vmap_program(minijax), \
        _custom_vmap_program(jax)
    _same(got, want)
    # under vmap of jvp JAX's rule is called with `in_batched` all False, minijax's with the
    # flags of the batched arguments: the same values either way
    assert len(got_calls) == len(want_calls) == 6
    assert got_calls[:3] == want_calls[:3] == [(3, [True, False]), (3, [True, True]),
                                               (3, [True, False])]
    assert got_calls[5] == want_calls[5]


def test_custom_vmap_errors_and_sequential_vmap():
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)

    def program(J):
        g = J.custom_batching.sequential_vmap(lambda a, n: a.sum() * n)
        eqns = J.make_jaxpr(J.vmap(g, (0, None)))(x, 2.0).jaxpr.eqns
        return J.vmap(g, (0, None))(x, 2.0), eqns[0].primitive.name
    got, want = program(minijax), program(jax)
    _same(got[0], want[0])
    assert got[1] == want[1] == "scan"
    _raises_in_both(lambda J: J.vmap(J.custom_batching.custom_vmap(lambda a: a * 2))(x),
                    AttributeError)

    def bad_rule(J):
        f = J.custom_batching.custom_vmap(lambda a: (a, a))
        f.def_vmap(lambda n, in_batched, a: ((a, a), True))
        return J.vmap(f)(x)
    _raises_in_both(bad_rule, ValueError)


# ---------------------------------------------------------------------------------------------
# Options as context managers
# ---------------------------------------------------------------------------------------------

def test_make_user_context_keys_the_jit_caches():
    for J in (jax, minijax):
        traces = []

        @J.jit
        def f(v, traces=traces):
            traces.append(1)
            return v * 2
        ctx = J.make_user_context(default_value=None)
        f(1.0)
        with ctx(1):
            f(1.0), f(1.0)
            assert ctx.value == 1
        with ctx(2):
            f(1.0)
        f(1.0)
        assert len(traces) == 3 and ctx.value is None

def test_enable_x64_and_numpy_rank_promotion():
    def program(J):
        jnp = J.numpy
        with J.enable_x64():
            wide = (jnp.ones(3).dtype.name, jnp.arange(3).dtype.name)
        with J.enable_x64(False):
            narrow = jnp.ones(3).dtype.name
        with J.numpy_rank_promotion("raise"):
            try:
                jnp.ones(3) + jnp.ones((2, 3))
                raised = False
            except ValueError:
                raised = True
        return wide, narrow, raised, jnp.ones(3).dtype.name
    assert program(minijax) == program(jax) == (("float64", "int64"), "float32", True,
                                                "float32")


def test_debug_nans_and_infs_as_context_managers_and_decorators():
    for J in (jax, minijax):
        with J.debug_nans():
            with pytest.raises(FloatingPointError):
                J.numpy.log(-J.numpy.ones(2))
        J.numpy.log(-J.numpy.ones(2))  # quiet again outside

        @J.debug_infs(True)
        def inv(x):
            return 1.0 / x
        with pytest.raises(FloatingPointError):
            inv(J.numpy.zeros(2))
        assert not J.config.jax_debug_infs


@pytest.mark.filterwarnings("ignore:TRACING CACHE MISS")  # explain_cache_misses speaking
def test_options_need_a_value_where_jax_does():
    for name in ("default_prng_impl", "numpy_rank_promotion", "transfer_guard_device_to_host"):
        _raises_in_both(lambda J, name=name: getattr(J, name)(), TypeError)
    _raises_in_both(lambda J: J.numpy_rank_promotion("sometimes").__enter__(), ValueError)
    for J in (jax, minijax):
        with J.default_prng_impl("threefry2x32"), J.threefry_partitionable(True):
            key = J.random.key_data(J.random.PRNGKey(3))
        np.testing.assert_array_equal(np.asarray(key), np.asarray(jax.random.key_data(
            jax.random.PRNGKey(3))))
        with J.explain_cache_misses(), J.enable_checks(), J.checking_leaks():
            np.testing.assert_allclose(np.asarray(J.jit(lambda v: v * 2)(X)), X * 2)


def test_options_not_modelled_warn_once_and_are_restored():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with minijax.debug_key_reuse():
            assert minijax.config.jax_debug_key_reuse is True
        with minijax.debug_key_reuse(False):
            pass
    assert [str(w.message) for w in caught] == [
        "minijax does not model the JAX option jax_debug_key_reuse: its value is kept, but "
        "changes nothing"]
    with pytest.raises(AttributeError):  # unset again, as before the block
        minijax.config.jax_debug_key_reuse  # noqa: B018


# ---------------------------------------------------------------------------------------------
# Submodules: typing, version, monitoring; print_environment_info
# ---------------------------------------------------------------------------------------------

def test_typing_array_like_accepts_what_jax_accepts():
    import jax.typing

    import minijax.typing
    values = [1, 2.5, 1j, True, np.float32(1), np.ones(2), "a", [1.0], None, np.dtype("f4")]
    for v in values:
        assert isinstance(v, minijax.typing.ArrayLike) == isinstance(v, jax.typing.ArrayLike), v
    assert isinstance(minijax.numpy.ones(2), minijax.typing.ArrayLike)
    assert len(minijax.typing.DTypeLike.__args__) == len(jax.typing.DTypeLike.__args__)


def test_version_module():
    import minijax.version
    assert minijax.version.__version__ == minijax.__version__
    assert minijax.version.__version_info__ == tuple(int(p) for p in
                                                     minijax.__version__.split("."))


def test_monitoring_listeners_get_the_events():
    def program(J):
        seen = []
        on_event = lambda e, **kw: seen.append(("event", e, kw))
        on_dur = lambda e, d, **kw: seen.append(("duration", e, d, kw))
        on_scalar = lambda e, v, **kw: seen.append(("scalar", e, v, kw))
        J.monitoring.register_event_listener(on_event)
        J.monitoring.register_event_duration_secs_listener(on_dur)
        J.monitoring.register_scalar_listener(on_scalar)
        try:
            J.monitoring.record_event("/test/event", step=3)
            J.monitoring.record_event_duration_secs("/test/duration", 0.25, kind="x")
            J.monitoring.record_scalar("/test/scalar", 7)
            J.monitoring.unregister_event_listener(on_event)
            J.monitoring.record_event("/test/unheard")
        finally:
            J.monitoring.unregister_event_duration_listener(on_dur)
            J.monitoring.unregister_scalar_listener(on_scalar)
        return seen
    import jax.monitoring

    import minijax.monitoring
    assert program(minijax) == program(jax) == [
        ("event", "/test/event", {"step": 3}),
        ("duration", "/test/duration", 0.25, {"kind": "x"}),
        ("scalar", "/test/scalar", 7, {})]


def test_profiler_trace_writes_the_backends_trace(tmp_path):
    for J in (jax, minijax):
        log_dir = tmp_path / J.__name__
        with J.profiler.trace(log_dir):
            with J.profiler.TraceAnnotation("my_span"):
                J.jit(lambda v: v @ v.T)(X).block_until_ready()
            with J.profiler.StepTraceAnnotation("train", step_num=1):
                J.profiler.annotate_function(lambda: X.sum(), name="annotated")()
        files = list(log_dir.rglob("*.xplane.pb"))
        assert [f.relative_to(log_dir).parts[:2] for f in files] == [("plugins", "profile")]
        data = files[0].read_bytes()
        assert b"my_span" in data and b"annotated" in data
        with pytest.raises(RuntimeError, match="No profile started"):
            J.profiler.stop_trace()


def test_print_environment_info():
    info = minijax.print_environment_info(return_string=True)
    want = jax.print_environment_info(return_string=True)
    assert info.startswith(f"minijax: {minijax.__version__}\n")
    for line in want.splitlines()[:4] + [f"process_count: {jax.process_count()}"]:
        assert line in info.splitlines(), line
