"""Host callbacks and effects (minijax/callback.py, minijax/effects.py), each behaviour checked
against real JAX computed in the test: one program, two modules."""

import re

import jax
import jax.experimental
import numpy as np
import pytest

import minijax
import minijax.experimental
from minijax import core
from minijax.interpreters import partial_eval as pe

MODULES = [pytest.param(jax, id="jax"), pytest.param(minijax, id="minijax")]


def io_callback(J):
    return J.experimental.io_callback


def host_id(a):
    return np.asarray(a)


def host_sin(a):
    return np.sin(np.asarray(a)).astype(np.asarray(a).dtype)


def host_cos(a):
    return np.cos(np.asarray(a)).astype(np.asarray(a).dtype)


def sds(J, x):
    return J.ShapeDtypeStruct(np.shape(x), np.float32)


def everything(J):
    """A function using each kind of host call, as jaxprs show them."""
    jnp = J.numpy

    def f(x):
        J.debug.print("x={} {y}", x, y=x.sum())
        a = io_callback(J)(host_id, J.ShapeDtypeStruct((3,), jnp.float32), x, ordered=True)
        b = io_callback(J)(host_id, J.ShapeDtypeStruct((3,), jnp.float32), x)
        c = J.pure_callback(host_id, J.ShapeDtypeStruct((3,), jnp.float32), x,
                            vmap_method="sequential")
        J.debug.callback(host_id, x)
        return a + b + c
    return f


def effect_names(effs) -> set[str]:
    return {str(e) for e in effs}


def effects_lines(text: str) -> list[set[str]]:
    """Each `: { A, B }` of a jaxpr printed with print_effects, as a set (JAX's order is a
    set's order)."""
    return [set(m.split(", ")) if m else set() for m in re.findall(r" : \{ ?(.*?) ?\}", text)]


X3 = np.linspace(-1, 1, 3, dtype=np.float32)


# ------------------------------------------------------------------------------ effects in the IR

@pytest.mark.parametrize("jit", [False, True])
def test_jaxpr_text_and_effects_match_jax(jit):
    wrap = (lambda J, f: J.jit(f)) if jit else (lambda J, f: f)
    jj = jax.make_jaxpr(wrap(jax, everything(jax)))(X3)
    mj = minijax.make_jaxpr(wrap(minijax, everything(minijax)))(X3)
    assert str(mj) == str(jj)
    assert effect_names(mj.effects) == effect_names(jj.effects) == {"Debug", "IO", "OrderedIO"}
    assert ([effect_names(e.effects) for e in mj.eqns] ==
            [effect_names(e.effects) for e in jj.eqns])
    j_text, m_text = jj.pretty_print(print_effects=True), mj.pretty_print(print_effects=True)
    assert effects_lines(m_text) == effects_lines(j_text) and effects_lines(m_text)
    assert re.sub(r" : \{.*?\}", "", m_text) == re.sub(r" : \{.*?\}", "", j_text)


def higher_order(J, kind):
    lax = J.lax

    def effectful(x):
        J.debug.print("v={}", x)
        return io_callback(J)(host_id, sds(J, x), x, ordered=True) * 2.0

    if kind == "jit":
        return J.jit(effectful)
    if kind == "cond":
        return lambda x: lax.cond(x.sum() > 0, effectful, lambda x: x, x)
    if kind == "while":
        return lambda x: lax.while_loop(lambda c: c[0] < 2,
                                        lambda c: (c[0] + 1, effectful(c[1])), (0, x))[1]
    if kind == "scan":
        return lambda x: lax.scan(lambda c, r: (c, effectful(r)), 0.0, x[None])[1]
    if kind == "checkpoint":
        return J.checkpoint(effectful)
    if kind == "custom_jvp":
        f = J.custom_jvp(effectful)
        f.defjvp(lambda p, t: (effectful(p[0]), t[0]))
        return f
    f = J.custom_vjp(effectful)
    f.defvjp(lambda x: (effectful(x), None), lambda _, g: (g,))
    return f


@pytest.mark.parametrize("kind", ["jit", "cond", "while", "scan", "checkpoint", "custom_jvp",
                                  "custom_vjp"])
def test_effects_propagate_through_higher_order_primitives(kind):
    jj = jax.make_jaxpr(higher_order(jax, kind))(X3)
    mj = minijax.make_jaxpr(higher_order(minijax, kind))(X3)
    assert effect_names(mj.effects) == effect_names(jj.effects) == {"Debug", "OrderedIO"}
    outer = [effect_names(e.effects) for e in mj.eqns if e.effects]
    assert outer == [effect_names(e.effects) for e in jj.eqns if e.effects]


def test_dce_keeps_effectful_equations_and_drops_pure_callbacks():
    def f(J):
        def g(x):
            J.pure_callback(host_id, sds(J, x), x)                 # result unused: dropped
            io_callback(J)(host_id, sds(J, x), x)                  # unused, but an effect
            J.debug.print("{}", x)
            return x + 1.0
        return g

    mj = minijax.make_jaxpr(f(minijax))(X3).jaxpr
    kept, _ = pe.dce_jaxpr(mj)
    assert [e.primitive.name for e in kept.eqns] == ["io_callback", "debug_print", "add"]
    assert effect_names(kept.effects) == {"IO", "Debug"}
    # ... and at run time, with the same counts as JAX
    assert unused_callback_calls(minijax) == unused_callback_calls(jax) == (0, 1)


def unused_callback_calls(J) -> tuple[int, int]:
    """Host calls made by a jitted unused pure_callback, and by an unused io_callback."""
    calls = []

    def counted(a):
        calls.append(1)
        return np.asarray(a)

    g = J.jit(lambda x: (J.pure_callback(counted, sds(J, x), x), x + 1.0)[1])
    h = J.jit(lambda x: (io_callback(J)(counted, sds(J, x), x), x + 1.0)[1])
    g(X3).block_until_ready()
    pure_calls = len(calls)
    h(X3).block_until_ready()
    J.effects_barrier()
    return pure_calls, len(calls) - pure_calls


# ------------------------------------------------------------------------------ pure_callback

@pytest.mark.parametrize("J", MODULES)
def test_pure_callback_under_jit_runs_at_execution_time(J):
    calls = []

    def counted_sin(a):
        calls.append(np.shape(a))
        return host_sin(a)

    f = J.jit(lambda a: J.pure_callback(counted_sin, sds(J, a), a) * 2.0)
    np.testing.assert_allclose(f(X3), np.sin(X3) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(f(X3 + 1), np.sin(X3 + 1) * 2.0, rtol=1e-6)
    assert calls == [(3,), (3,)]
    # eagerly, with a pytree of arguments and results
    out = J.pure_callback(lambda d: {"s": host_sin(d["a"]), "c": host_cos(d["a"])},
                          {"s": sds(J, X3), "c": sds(J, X3)}, {"a": X3})
    np.testing.assert_allclose(out["c"], np.cos(X3), rtol=1e-6)


def seen_by_vmap_method(J, method):
    seen = []

    def two_args(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return (np.asarray(a) * np.asarray(b)).astype(np.float32)

    xs = np.arange(8, dtype=np.float32).reshape(4, 2)

    def per_example(a):
        b = J.numpy.arange(2, dtype=J.numpy.float32)  # not batched
        return J.pure_callback(two_args, sds(J, a), a, b, vmap_method=method)

    out = J.jit(J.vmap(per_example))(xs)
    return np.asarray(out), seen


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_vmap_methods_match_jax(method):
    j_out, j_seen = seen_by_vmap_method(jax, method)
    m_out, m_seen = seen_by_vmap_method(minijax, method)
    np.testing.assert_allclose(m_out, j_out)
    assert m_seen == j_seen


def catch(fn, J):
    try:
        fn(J)
    except Exception as e:  # the fact of raising, its type and message are compared
        return type(e), str(e)
    return None, None


def test_pure_callback_errors_match_jax():
    def missing_method(J):
        return J.vmap(lambda a: J.pure_callback(host_sin, sds(J, a), a))(np.ones((2, 3)))

    def bad_method(J):
        return J.pure_callback(host_sin, sds(J, X3), X3, vmap_method="bad")

    def jvp(J):
        return J.grad(lambda a: J.pure_callback(host_sin, sds(J, a), a))(np.float32(1.0))

    for case in (missing_method, bad_method, jvp):
        jt, jmsg = catch(case, jax)
        mt, mmsg = catch(case, minijax)
        assert jt is not None and mt is jt and mmsg == jmsg, case.__name__
        assert core.trace_ctx.trace is core.eval_trace


def callback_sin(J):
    @J.custom_jvp
    def f(x):
        return J.pure_callback(host_sin, sds(J, x), x, vmap_method="expand_dims")

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), J.pure_callback(host_cos, sds(J, x), x, vmap_method="expand_dims") * t
    return f


def callback_sin_vjp(J):
    @J.custom_vjp
    def f(x):
        return J.pure_callback(host_sin, sds(J, x), x, vmap_method="expand_dims")

    f.defvjp(lambda x: (f(x), x),
             lambda x, g: (J.pure_callback(host_cos, sds(J, x), x,
                                           vmap_method="expand_dims") * g,))
    return f


@pytest.mark.parametrize("make", [callback_sin, callback_sin_vjp])
def test_callback_differentiable_through_custom_rules(make):
    def program(J):
        f = make(J)
        g = J.jit(J.grad(lambda a: f(a).sum()))(X3)
        gv = J.vmap(J.grad(lambda a: f(a)))(X3)
        return np.asarray(g), np.asarray(gv)

    for m, j in zip(program(minijax), program(jax)):
        np.testing.assert_allclose(m, j, rtol=1e-6)
    np.testing.assert_allclose(program(minijax)[0], np.cos(X3), rtol=1e-6)


# ------------------------------------------------------------------------------ io_callback

def ordered_log(J):
    log = []

    def record(v):
        log.append(np.array(v))
        return np.asarray(v).sum().astype(np.float32)

    def body(c, row):
        s = io_callback(J)(record, J.ShapeDtypeStruct((), np.float32), row, ordered=True)
        return c + s, s

    scanned = J.jit(lambda seq: J.lax.scan(body, np.float32(0), seq))
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    total, rows = scanned(xs)
    # two jitted programs called alternately: the host sees program order across calls
    tag = J.jit(lambda v: io_callback(J)(record, J.ShapeDtypeStruct((), np.float32), v,
                                         ordered=True))
    for v in (100.0, 200.0):
        tag(np.float32(v))
        scanned(xs[:1] + v)
    J.effects_barrier()
    return float(total), np.asarray(rows), [np.asarray(v).tolist() for v in log]


def test_ordered_io_callback_in_scan_and_across_calls_matches_jax():
    m, j = ordered_log(minijax), ordered_log(jax)
    assert m[0] == j[0]
    np.testing.assert_allclose(m[1], j[1])
    assert m[2] == j[2] and len(m[2]) == 8


def test_io_callback_vmap_and_grad_match_jax():
    def ordered_vmap(J):
        return J.vmap(lambda a: io_callback(J)(host_id, sds(J, a), a, ordered=True))(
            np.ones((2, 3), np.float32))

    def io_grad(J):
        return J.grad(lambda a: io_callback(J)(host_id, sds(J, a), a))(np.float32(1.0))

    for case in (ordered_vmap, io_grad):
        jt, jmsg = catch(case, jax)
        mt, mmsg = catch(case, minijax)
        assert jt is not None and mt is jt and mmsg == jmsg, case.__name__
        assert core.trace_ctx.trace is core.eval_trace
    (m_out, m_calls), (j_out, j_calls) = unordered_vmap(minijax), unordered_vmap(jax)
    np.testing.assert_allclose(m_out, j_out)
    assert m_calls == j_calls == [(3,), (3,)]


def unordered_vmap(J):
    """An unordered io_callback under vmap: the results and the shapes each host call saw."""
    calls = []

    def doubled(v):
        calls.append(np.shape(v))
        return np.asarray(v) * 2

    out = J.vmap(lambda a: io_callback(J)(doubled, sds(J, a), a))(np.ones((2, 3), np.float32))
    J.effects_barrier()
    return np.asarray(out), calls


# ------------------------------------------------------------------------------ bad callbacks

def raising(a):
    raise ValueError("boom in the host function")


def calling_raising(J, kind):
    if kind == "pure_callback":
        return lambda a: J.pure_callback(raising, sds(J, a), a)
    if kind == "io_callback":
        return lambda a: io_callback(J)(raising, sds(J, a), a)
    return lambda a: (J.debug.callback(raising, a), a)[1]


@pytest.mark.parametrize("kind", ["pure_callback", "io_callback", "debug.callback"])
@pytest.mark.parametrize("jit", [False, True])
def test_exception_in_callback_surfaces_with_its_traceback(jit, kind):
    for J in (jax, minijax):
        f = J.jit(calling_raising(J, kind)) if jit else calling_raising(J, kind)
        with pytest.raises(Exception) as info:
            J.block_until_ready(f(X3))
            J.effects_barrier()
        text = "".join(__import__("traceback").format_exception(info.value))
        assert "boom in the host function" in text and "raising" in text, J.__name__
        assert core.trace_ctx.trace is core.eval_trace


@pytest.mark.parametrize("jit", [False, True])
def test_wrong_result_shape_or_dtype_names_the_callback(jit):
    def wrong_shape(a):
        return np.ones(2, np.float32)

    def wrong_dtype(a):
        return np.ones(3, np.int32)

    for cb in (wrong_shape, wrong_dtype):
        for J in (jax, minijax):
            f = lambda a, J=J, cb=cb: J.pure_callback(cb, sds(J, a), a)
            f = J.jit(f) if jit else f
            with pytest.raises(Exception) as info:
                J.block_until_ready(f(X3))
            if J is minijax:
                msg = str(info.value)
                got = "f32[2]" if cb is wrong_shape else "i32[3]"
                assert cb.__name__ in msg and got in msg and "declares f32[3]" in msg, msg
        assert core.trace_ctx.trace is core.eval_trace
    # a float64 result for a declared float32 is narrowed, as in JAX (x64 off)
    for J in (jax, minijax):
        out = J.jit(lambda a, J=J: J.pure_callback(lambda v: np.asarray(v, np.float64),
                                                   sds(J, a), a))(X3)
        assert out.dtype == np.float32


def lowered_host_calls(J) -> list[str]:
    """`main` of a jitted function with an unordered debug.print, two ordered io_callbacks
    and a pure_callback between them, without the sharding annotations JAX adds (its
    callbacks carry a one-device `sdy.sharding` even in a one-device program)."""
    def f(x):
        J.debug.print("x={}", x)
        a = io_callback(J)(host_id, sds(J, x), x, ordered=True)
        b = J.pure_callback(host_id, sds(J, x), a)
        return b + io_callback(J)(host_id, sds(J, x), b, ordered=True)
    text = J.jit(f).lower(X3).as_text()
    text = re.sub(r", sdy\.sharding = #sdy\.sharding_per_value<\[.*?\]>\}", "}", text)
    text = text.replace(' {jax.result_info = "result"}', "")
    return text[text.index("func.func"):].splitlines()


def test_lowered_callbacks_and_tokens_match_jax():
    """Each callback is a custom_call to the CPU Python-callback target naming its callable by
    index; the ordered ones take and give a token, which main takes and returns."""
    got, want = lowered_host_calls(minijax), lowered_host_calls(jax)
    assert got == want, "\n".join(got) + "\n--- JAX:\n" + "\n".join(want)
    assert sum("@xla_ffi_python_cpu_callback" in ln for ln in want) == 4
    assert want[0].count("!stablehlo.token {jax.token = true}") == 2


def ordered_in_cond(J):
    """Ordered io_callbacks in both branches of a jitted cond, and in a second jitted
    program called between: the order the host saw them."""
    log = []

    def record(tag):
        def fn(v):
            log.append((tag, float(v)))
            return np.asarray(v)
        return fn

    sd = J.ShapeDtypeStruct((), np.float32)
    branchy = J.jit(lambda p, v: J.lax.cond(
        p, lambda u: io_callback(J)(record("then"), sd, u, ordered=True),
        lambda u: io_callback(J)(record("else"), sd, -u, ordered=True), v))
    between = J.jit(lambda v: io_callback(J)(record("between"), sd, v, ordered=True))
    for i in range(3):
        branchy(i % 2 == 0, np.float32(i))
        between(np.float32(10 * i))
    J.effects_barrier()
    return log


def test_ordered_io_callback_in_cond_runs_in_program_order_as_jax():
    got, want = ordered_in_cond(minijax), ordered_in_cond(jax)
    assert got == want and [t for t, _ in want][:3] == ["then", "between", "else"], (got, want)


def _placed_program(J, ordered):
    log = []

    def record(v):
        log.append(np.asarray(v).tolist())
        return np.asarray(v)

    host = J.sharding.SingleDeviceSharding(J.devices()[0], memory_kind="pinned_host")
    sd = J.ShapeDtypeStruct((2,), np.float32)
    placed = J.jit(lambda v: io_callback(J)(record, sd, v, ordered=ordered) * 2,
                   out_shardings=host)
    plain = J.jit(lambda v: io_callback(J)(record, sd, v + 10, ordered=ordered))
    outs = [placed(np.float32([1, 2])), plain(np.float32([3, 4])), placed(np.float32([5, 6]))]
    J.effects_barrier()
    return log, [np.asarray(o).tolist() for o in outs], outs[2].sharding.memory_kind


def test_callbacks_with_outputs_in_host_memory():
    """A program whose output lives in pinned host memory (minijax/compiler.py:
    ExecutePlaced) runs its callbacks, and with ordered=True takes and hands on the tokens."""
    got, want = _placed_program(minijax, False), _placed_program(jax, False)
    assert got[1:] == want[1:] and sorted(got[0]) == sorted(want[0]), (got, want)
    log, outs, kind = _placed_program(minijax, True)
    # JAX 0.10.2 cannot compile ordered effects with memory-kind outputs (an internal
    # safe_zip error); the reference is program order and the values JAX gave unordered
    assert log == [[1, 2], [13, 14], [5, 6]] and outs == want[1] and kind == "pinned_host"
    with pytest.raises(ValueError, match="safe_zip"):
        _placed_program(jax, True)


def ordered_in_while_cond(J, capsys):
    """Ordered io_callback and debug.print in a while_loop's cond_fun and body, under jit."""
    log = []

    def record(tag):
        def fn(v):
            log.append((tag, int(v)))
            return np.asarray(v)
        return fn

    sd = J.ShapeDtypeStruct((), np.int32)

    def cond(v):
        J.debug.print("cond sees {}", v, ordered=True)
        return io_callback(J)(record("cond"), sd, v, ordered=True) < 3

    def body(v):
        io_callback(J)(record("body"), sd, v, ordered=True)
        return v + 1

    f = J.jit(lambda v: J.lax.while_loop(cond, body, v))
    capsys.readouterr()
    out = [int(f(np.int32(0))), int(f(np.int32(2)))]
    J.effects_barrier()
    return log, out, capsys.readouterr().out


def test_ordered_effects_in_while_cond_run_in_program_order_as_jax(capsys):
    got, want = ordered_in_while_cond(minijax, capsys), ordered_in_while_cond(jax, capsys)
    assert got == want, (got, want)
    assert [t for t, _ in want[0]][:3] == ["cond", "body", "cond"] and len(want[0]) == 10


# result_shape_dtypes with a 64-bit dtype while x64 is off: JAX's ValueError, eagerly and
# under jit, for pure_callback and io_callback; with x64 on it is accepted
@pytest.mark.parametrize("api", ["pure", "io"])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64, np.complex128])
@pytest.mark.parametrize("staged", [False, True])
def test_64_bit_result_shape_dtypes_raise_as_jax(api, dtype, staged):
    def run(J):
        call = J.pure_callback if api == "pure" else J.experimental.io_callback
        f = lambda x: call(lambda v: v.astype(dtype), J.ShapeDtypeStruct((3,), dtype), x)
        return (J.jit(f) if staged else f)(np.ones(3, np.float32))
    with pytest.raises(ValueError) as want:
        run(jax)
    with pytest.raises(ValueError) as got:
        run(minijax)
    assert str(got.value) == str(want.value)


def test_64_bit_result_shape_dtypes_accepted_with_x64():
    with minijax.config.override("jax_enable_x64", True):
        out = minijax.pure_callback(lambda v: v * 2, minijax.ShapeDtypeStruct((2,), np.float64),
                                    np.ones(2))
    assert out.dtype == np.float64 and out.tolist() == [2.0, 2.0]


def _boom(x):
    raise ValueError("boom in the callback")


# an exception raised inside a callback called eagerly surfaces as JAX's does: XLA's runtime
# error (a RuntimeError), its message holding the callback's traceback
@pytest.mark.parametrize("api", ["pure", "io"])
@pytest.mark.parametrize("staged", [False, True])
def test_exception_inside_a_callback_surfaces_as_jax(api, staged):
    def run(J):
        call = J.pure_callback if api == "pure" else J.experimental.io_callback
        f = lambda x: call(_boom, J.ShapeDtypeStruct((3,), np.float32), x)
        return (J.jit(f) if staged else f)(np.ones(3, np.float32))
    with pytest.raises(Exception) as want:
        run(jax)
    with pytest.raises(Exception) as got:
        run(minijax)
    assert type(got.value) is type(want.value) is jax.errors.JaxRuntimeError
    for e in (got.value, want.value):
        text = str(e)
        assert text.startswith("INTERNAL: CpuCallback error calling callback: Traceback"), text
        assert text.rstrip().endswith("ValueError: boom in the callback"), text


# A script that ends right after a jitted pure_callback on a sharded array, without reading the
# result: the interpreter must wait for the pending program at exit (JAX's wait_for_tokens), not
# abort ("terminate called without an active exception") when XLA calls into a dead Python.
_EXIT_SCRIPT = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np
J = __import__(sys.argv[1])
mesh = J.make_mesh((8,), ("x",))
P, S = J.sharding.PartitionSpec, J.sharding.NamedSharding
x = J.device_put(J.numpy.arange(16.0), S(mesh, P("x")))
cb = lambda a: np.asarray(a) * 2
f = J.jit(lambda v: J.pure_callback(cb, J.ShapeDtypeStruct(v.shape, v.dtype), v))
y = f(x) if sys.argv[2] == "sharded" else f(np.arange(4.0, dtype=np.float32))
"""


@pytest.mark.parametrize("case", ["sharded", "one_device"])
def test_exit_right_after_a_jitted_callback_is_clean_as_jax(case):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    codes = {}
    for name in ("jax", "minijax"):
        runs = [subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, name, case], cwd=root,
                               capture_output=True, text=True, timeout=300) for _ in range(3)]
        codes[name] = [(r.returncode, r.stderr[-300:]) for r in runs if r.returncode]
    assert codes == {"jax": [], "minijax": []}
