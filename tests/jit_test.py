"""jit in depth, against real JAX: the stages (trace, lower, compile), ShapeDtypeStruct,
caching and retracing, cache-miss explanations, donation, async dispatch, committed arrays,
the persistent compilation cache, and the type-promotion table (x64 off and on).

Mirrors tests/api_test.py (jit parts) and tests/dtypes_test.py in JAX. Taught in
chapters/07-jit.md.
"""

import itertools
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import warnings

import jax
import ml_dtypes
import numpy as np
import pytest

import minijax
from minijax import compiler, pjit

MODULES = [jax, minijax]


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _elementwise(J):
    jnp = J.numpy

    def f(x, y):
        return jnp.sin(x) * y + 1.0, jnp.exp(x)
    return f


# ---------------------------------------------------------------------------------------------
# The stages: trace -> lower -> compile
# ---------------------------------------------------------------------------------------------

def test_trace_jaxpr_text_matches_jax():
    x, y = _f32(2, 3), _f32(2, 3, seed=1)
    texts = [str(J.jit(_elementwise(J)).trace(x, y).jaxpr) for J in MODULES]
    assert texts[0] == texts[1]


def test_trace_of_closed_over_array_prints_constvar_like_jax():
    c = np.arange(3.0, dtype=np.float32)
    texts = []
    for J in MODULES:
        cc = J.numpy.asarray(c)
        texts.append(str(J.jit(lambda a, cc=cc: a * cc).trace(c).jaxpr))
    assert texts[0] == texts[1]


def test_out_info_is_shape_dtype_structs_like_jax():
    def prog(J):
        jnp = J.numpy
        f = J.jit(lambda a: {"x": a, "y": (a.sum(), 1.0, a.astype(jnp.int32))})
        return f.trace(np.ones((3, 2), np.float32)).out_info
    got, want = prog(minijax), prog(jax)
    assert isinstance(got["x"], minijax.ShapeDtypeStruct)
    g_leaves, g_tree = minijax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert str(g_tree).replace("PyTreeDef", "") == str(w_tree).replace("PyTreeDef", "")
    assert [(g.shape, g.dtype, g.weak_type) for g in g_leaves] == \
        [(w.shape, w.dtype, w.weak_type) for w in w_leaves]
    assert [repr(g) for g in g_leaves] == [repr(w) for w in w_leaves]


def test_lower_as_text_is_stablehlo_with_public_main():
    x, y = _f32(2, 3), _f32(2, 3, seed=1)
    for J in MODULES:
        text = J.jit(_elementwise(J)).lower(x, y).as_text()
        assert re.search(r"func\.func public @main\(", text), (J.__name__, text)
        for op in ("stablehlo.sine", "stablehlo.multiply", "stablehlo.add",
                   "stablehlo.exponential"):
            assert op in text, (J.__name__, op, text)


def test_compile_as_text_is_optimized_hlo_and_runs_like_jax():
    x, y = _f32(2, 3), _f32(2, 3, seed=1)
    outs = []
    for J in MODULES:
        compiled = J.jit(_elementwise(J)).lower(x, y).compile()
        text = compiled.as_text()
        assert text.startswith("HloModule") and "ENTRY" in text, text[:200]
        outs.append([np.asarray(o) for o in compiled(x, y)])
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_cost_analysis_flops_of_matmul_is_2mnk_like_jax():
    m, k, n = 8, 16, 32
    flops = []
    for J in MODULES:
        c = J.jit(lambda a, b: a @ b).lower(_f32(m, k), _f32(k, n)).compile()
        flops.append(c.cost_analysis()["flops"])
    assert flops[1] == flops[0] == 2 * m * n * k


def test_memory_analysis_sizes_match_jax():
    stats = []
    for J in MODULES:
        c = J.jit(lambda a, b: (a @ b, a.sum())).lower(_f32(4, 5), _f32(5, 6)).compile()
        m = c.memory_analysis()
        stats.append((m.argument_size_in_bytes, m.output_size_in_bytes, m.alias_size_in_bytes))
    assert stats[1] == stats[0]
    assert stats[1][0] == 4 * (4 * 5 + 5 * 6)


def test_compiled_call_with_wrong_types_raises_type_error_naming_both():
    x = _f32(2, 3)
    for J in MODULES:
        c = J.jit(lambda a: a * 2).lower(x).compile()
        for bad in (np.ones((2, 4), np.float32), np.ones((2, 3), np.int32)):
            with pytest.raises(TypeError):
                c(bad)
    c = minijax.jit(lambda a: a * 2).lower(x).compile()
    with pytest.raises(TypeError, match=r"compiled for f32\[2,3\], called with f32\[2,4\]"):
        c(np.ones((2, 4), np.float32))
    with pytest.raises(TypeError, match=r"compiled for f32\[2,3\], called with i32\[2,3\]"):
        c(np.ones((2, 3), np.int32))
    with pytest.raises(TypeError, match="pytree structure"):
        c(x, x)


# ---------------------------------------------------------------------------------------------
# ShapeDtypeStruct
# ---------------------------------------------------------------------------------------------

def test_shape_dtype_struct_attributes_match_jax():
    for shape, dtype, weak in [((2, 3), np.float32, False), ((), np.int32, True),
                               ((4,), ml_dtypes.bfloat16, False)]:
        s = minijax.ShapeDtypeStruct(shape, dtype, weak_type=weak)
        j = jax.ShapeDtypeStruct(shape, dtype, weak_type=weak)
        assert (s.shape, s.dtype, s.weak_type, s.ndim, s.size) == \
            (j.shape, j.dtype, j.weak_type, j.ndim, j.size)
        assert repr(s) == repr(j)
        assert s == minijax.ShapeDtypeStruct(shape, dtype, weak_type=weak)
        assert hash(s) == hash(minijax.ShapeDtypeStruct(shape, np.dtype(dtype), weak))
        assert s.aval == minijax.core.ShapedArray(shape, dtype, weak)
        assert minijax.core.get_aval(s) == s.aval


def test_shape_dtype_struct_args_to_trace_and_lower():
    def prog(J):
        S = J.ShapeDtypeStruct
        f = J.jit(_elementwise(J))
        args = (S((2, 3), np.float32), S((2, 3), np.float32))
        traced = f.trace(*args)
        compiled = f.lower(*args).compile()
        return str(traced.jaxpr), compiled(_f32(2, 3), _f32(2, 3, seed=1))
    (jt, jout), (mt, mout) = prog(jax), prog(minijax)
    assert mt == jt
    for g, w in zip(mout, jout):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_shape_dtype_struct_float64_is_canonicalized_like_jax():
    texts = []
    for J in MODULES:
        texts.append(str(J.jit(lambda a: a * 2).trace(
            J.ShapeDtypeStruct((2,), np.float64)).jaxpr))
    assert texts[0] == texts[1] and "f32[2]" in texts[1]


def test_calling_jit_with_a_shape_dtype_struct_raises_type_error():
    for J in MODULES:
        with pytest.raises(TypeError):
            J.jit(lambda a: a * 2)(J.ShapeDtypeStruct((2,), np.float32))


# ---------------------------------------------------------------------------------------------
# Caching and retracing
# ---------------------------------------------------------------------------------------------

def _retrace_counts(J):
    """Trace counts after each call of a sequence that changes one thing at a time."""
    jnp = J.numpy
    n = [0]

    def f(a, k):
        n[0] += 1
        return J.tree_util.tree_map(lambda t: t * k, a)
    g = J.jit(f, static_argnums=1)
    x3 = jnp.ones(3)
    calls = [
        ("first call", lambda: g(x3, 2)),
        ("same avals", lambda: g(jnp.zeros(3), 2)),
        ("numpy array of the same type", lambda: g(np.ones(3, np.float32), 2)),
        ("new shape", lambda: g(jnp.ones(4), 2)),
        ("new dtype", lambda: g(jnp.ones(4, jnp.int32), 2)),
        ("strong f32 scalar", lambda: g(jnp.float32(1.0), 2)),
        ("weak f32 scalar (Python float)", lambda: g(1.0, 2)),
        ("weak again", lambda: g(2.0, 2)),
        ("new pytree structure", lambda: g((x3, x3), 2)),
        ("new dict keys", lambda: g({"a": x3}, 2)),
        ("new static value", lambda: g(x3, 3)),
        ("old static value again", lambda: g(x3, 2)),
        ("equal static value of another type", lambda: g(x3, 2.0)),
    ]
    counts = []
    for what, call in calls:
        J.block_until_ready(call())
        counts.append((what, n[0]))
    return counts


def test_retracing_matches_jax():
    before = dict(pjit.cache_stats)
    got = _retrace_counts(minijax)
    traces = pjit.cache_stats["traces"] - before["traces"]
    compiles = pjit.cache_stats["compiles"] - before["compiles"]
    assert got == _retrace_counts(jax)
    assert traces == got[-1][1]  # the counter counts exactly the Python-level traces
    assert compiles == traces    # one executable per traced signature


def _skeleton(tree):
    """A pytree of builtin containers with each array replaced by its shape and dtype, dicts
    by their (key, value) pairs in order: equal for JAX's and minijax's results alike."""
    if type(tree) in (tuple, list):
        return type(tree)(map(_skeleton, tree))
    if type(tree) is dict:
        return ("dict", [(k, _skeleton(v)) for k, v in tree.items()])
    return None if tree is None else (np.shape(tree), np.asarray(tree).dtype)


def _nested_calls(J):
    """(what, output skeleton, output leaves, traces so far) for each call of a jitted function
    of nested tuples, lists and dicts: again with the same structure, then with each kind of
    change to it (the cached call checks the structure before it reuses a program)."""
    n = [0]

    def f(state, x):
        n[0] += 1
        params, extra = state
        new = [(w * 2.0, b - 1.0) for w, b in params]
        return {"params": new, "extra": extra, "sum": x.sum()}, (x + 1.0, None)
    g = J.jit(f)
    put = lambda a: J.device_put(np.asarray(a, np.float32))
    w = [(put(_f32(2, 2, seed=i)), put(_f32(2, seed=i + 9))) for i in range(3)]
    x, x4 = put(_f32(3, seed=20)), put(_f32(4, seed=21))
    calls = [
        ("first call", ((w, {"a": x}), x)),
        ("cached", ((w, {"a": x}), x)),
        ("other arrays of the same types", ((w[::-1], {"a": x4[:3]}), x4[1:])),
        ("list one shorter", ((w[:2], {"a": x}), x)),
        ("dict key renamed", ((w, {"b": x}), x)),
        ("dict key added", ((w, {"a": x, "b": x}), x)),
        ("same keys in another order", ((w, {"b": x, "a": x}), x)),
        ("tuple for list", ((tuple(w), {"a": x}), x)),
        ("None for a leaf", ((w, {"a": None}), x)),
        ("a NumPy array for a leaf", ((w, {"a": np.ones(3, np.float32)}), x)),
        ("a tuple for a leaf", ((w, {"a": (x, x)}), x)),
        ("back to the first", ((w, {"a": x}), x)),
        ("new shape", ((w, {"a": x}), x4)),
        ("a string for a leaf", ((w, {"a": "oops"}), x)),
        ("after the error", ((w, {"a": x}), x4)),
    ]
    got = []
    for what, args in calls:
        try:
            out = g(*args)
        except TypeError:
            got.append((what, "TypeError", [], n[0]))
            continue
        leaves = [np.asarray(v) for v in J.tree_util.tree_leaves(out)]
        got.append((what, _skeleton(out), leaves, n[0]))
    return got


def test_cached_call_with_nested_containers_matches_jax(monkeypatch):
    got, want = _nested_calls(minijax), _nested_calls(jax)
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace  # no trace state left
    assert [(w, s, n) for w, s, _, n in got] == [(w, s, n) for w, s, _, n in want]
    for (what, _, leaves, _), (_, _, expected, _) in zip(got, want):
        for a, b in zip(leaves, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=what)
    # a call of the previous call's structure flattens its arguments without tree_flatten
    g = minijax.jit(lambda t: {"y": [t[0] + 1.0, None], "z": t[1]["k"]})
    args = ((minijax.numpy.ones(2), {"k": minijax.numpy.zeros(2)}),)
    g(*args), g(*args)
    monkeypatch.setattr(pjit, "tree_flatten", None)
    assert _skeleton(g(*args)) == ("dict", [("y", [((2,), np.float32), None]),
                                            ("z", ((2,), np.float32))])


def test_trace_and_lower_share_the_call_cache():
    n = [0]

    def f(a):
        n[0] += 1
        return a + 1
    g = minijax.jit(f)
    x = np.ones(3, np.float32)
    g.trace(x)
    g.lower(x)
    g(x)
    g.trace(minijax.ShapeDtypeStruct((3,), np.float32))
    assert n[0] == 1


class _ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _explain_messages(J, calls):
    """The cache-miss explanations each call in `calls` produces, one string per call."""
    out = []
    if J is jax:
        logger = logging.getLogger("jax._src.interpreters.partial_eval")
        handler = _ListHandler()
        logger.addHandler(handler)
        try:
            with jax.explain_cache_misses(True):
                for call in calls:
                    handler.messages.clear()
                    call()
                    out.append("\n".join(handler.messages))
        finally:
            logger.removeHandler(handler)
        return out
    with minijax.config.override("jax_explain_cache_misses", True):
        for call in calls:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                call()
            out.append("\n".join(str(m.message) for m in w if "CACHE MISS" in str(m.message)))
    return out


def test_explain_cache_misses_names_what_changed_like_jax():
    def calls(J):
        jnp = J.numpy

        def f(a, k):
            return a * k
        g = J.jit(f, static_argnums=1)
        h = J.jit(lambda a: a * 2)
        return [lambda: g(jnp.ones(3), 2),   # first call
                lambda: g(jnp.ones(3), 2),   # hit: no message
                lambda: g(jnp.ones(4), 2),   # shape
                lambda: g(jnp.ones(4, jnp.int32), 2),  # dtype
                lambda: g(jnp.ones(4, jnp.int32), 7),  # static value
                lambda: h(jnp.float32(1.0)),
                lambda: h(1.0),               # weak type
                lambda: h((jnp.ones(2),))]    # pytree structure
    want, got = _explain_messages(jax, calls(jax)), _explain_messages(minijax, calls(minijax))
    for i, (w, g) in enumerate(zip(want, got)):
        assert ("TRACING CACHE MISS" in w) == ("TRACING CACHE MISS" in g), (i, w, g)
    assert want[1] == got[1] == ""
    # each explanation names the same change in both modules
    for i, needles in [(2, ["f32[4]", "f32[3]"]), (3, ["i32[4]", "f32[3]"]),
                       (4, ["static", "7", "2"]), (6, ["weak_type"]), (7, ["pytree"])]:
        for s in needles:
            assert s in want[i].lower() or s in want[i], (i, s, want[i])
            assert s in got[i].lower() or s in got[i], (i, s, got[i])


def test_unhashable_static_argument_raises_like_jax():
    errors = []
    for J in MODULES:
        g = J.jit(lambda a, n: a * n[0], static_argnums=1)
        with pytest.raises(Exception) as info:
            g(np.ones(2, np.float32), [2])
        errors.append(info.value)
        h = J.jit(lambda a, n: a * n[0], static_argnames="n")
        with pytest.raises(type(errors[0])):
            h(np.ones(2, np.float32), n=[2])
    assert type(errors[1]) is type(errors[0]) is ValueError
    head = "Non-hashable static arguments are not supported"
    assert str(errors[0]).startswith(head) and str(errors[1]).startswith(head)
    assert "unhashable type: 'list'" in str(errors[1])


def _traces_of_two_wrappers(J):
    """jit applied twice to one function: JAX keys the trace cache on the function and jit's
    options, not on the wrapper object."""
    traced = []

    def f(x):
        traced.append(1)
        return x * 2
    a, b = J.jit(f)(4.0), J.jit(f)(5.0)
    c = J.jit(f, static_argnums=0)(6.0)  # other options: traced again
    return len(traced), float(a), float(b), float(c)


def test_jit_cache_is_keyed_on_the_function_and_options_like_jax():
    assert _traces_of_two_wrappers(minijax) == _traces_of_two_wrappers(jax) == (2, 8, 10, 12)


def test_jit_caches_die_with_their_function():
    import gc
    import weakref

    def make(i):
        return minijax.jit(lambda x: x + i)
    gc.collect()  # functions earlier tests dropped
    baseline = len(pjit._jit_caches), len(pjit._executor.cache)
    fns = [make(i) for i in range(5)]
    outs = [float(f(1.0)) for f in fns]
    assert outs == [float(jax.jit(lambda x, i=i: x + i)(1.0)) for i in range(5)]
    assert len(pjit._jit_caches) == baseline[0] + 5
    probe = weakref.ref(fns[0].fun)
    del fns, make
    gc.collect()
    assert probe() is None
    assert (len(pjit._jit_caches), len(pjit._executor.cache)) == baseline


_MEMORY_SCRIPT = textwrap.dedent("""
    import gc, json, sys
    J = __import__(sys.argv[1])
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20
    def run(n):
        for i in range(n):
            J.jit(lambda x, i=i: x * 2.0 + i)(1.0).block_until_ready()
        gc.collect()
    run(10)  # warm-up: first compiles, allocator pools
    before = rss()
    run(int(sys.argv[2]))
    print(json.dumps({"growth_mib": rss() - before}))
""")


@pytest.mark.slow
def test_memory_of_fresh_jitted_lambdas_is_released_like_jax():
    # Each lambda is jitted, called once and dropped. A cache that kept its executable would
    # grow the process by ~0.2 MiB per lambda (1,500 lambdas once cost 276 MiB).
    def growth(module):
        proc = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, module, "60"],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, JAX_PLATFORMS="cpu"))
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])["growth_mib"]
    mine, theirs = growth("minijax"), growth("jax")
    assert mine < max(6.0, 2 * theirs), (mine, theirs)  # a leak: ~11 MiB for 60 lambdas


def _static_by_position_and_name(J):
    def f(x, n):
        return x * n if n > 1 else x  # Python control flow on n: n must be static
    by_name = J.jit(f, static_argnames="n")
    by_num = J.jit(f, static_argnums=1)
    return [float(by_name(1.5, 3)), float(by_name(1.5, n=3)), float(by_num(1.5, n=3)),
            float(by_num(1.5, 3))]


def test_static_argnames_given_positionally_and_argnums_by_keyword_like_jax():
    assert _static_by_position_and_name(minijax) == _static_by_position_and_name(jax)


def _jitted_methods(J):
    import functools

    class Scale:
        def __init__(self, k):
            self.k = k

        def __hash__(self):
            return hash(self.k)

        def __eq__(self, other):
            return isinstance(other, Scale) and self.k == other.k

        @functools.partial(J.jit, static_argnums=0)
        def apply(self, x):
            return x * self.k

        @J.jit
        def double(x):  # no self: called on the class
            return x * 2
    s = Scale(3.0)
    return [float(s.apply(2.0)), float(Scale(4.0).apply(2.0)), float(Scale.double(5.0)),
            float(Scale.apply(s, 1.0))]


def test_jitted_method_binds_to_its_instance_like_jax():
    assert _jitted_methods(minijax) == _jitted_methods(jax) == [6.0, 8.0, 10.0, 3.0]


def _bad_function_errors(J):
    def gen(x):
        yield x
    out = []
    for bad in (gen, 3):
        try:
            J.jit(bad)
            out.append(None)
        except TypeError as e:
            # the generator function's address differs between the two calls
            out.append(re.sub(r" at 0x[0-9a-f]+", "", str(e)).replace(
                J.__name__ if J is minijax else "JAX", "<J>"))
    try:
        J.jit(lambda x: "a string")(1.0)
        out.append(None)
    except TypeError as e:
        out.append(str(e))
    return out


def test_jit_of_generator_function_and_string_output_raise_type_error_like_jax():
    got, want = _bad_function_errors(minijax), _bad_function_errors(jax)
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace  # no trace state left
    assert None not in got and None not in want
    assert got[:2] == want[:2]  # "Expected a function, got a generator function: ..."
    assert "traced for jit returned a value of type <class 'str'>" in want[2]
    assert "traced for jit returned a value of type <class 'str'>" in got[2]


def _byte_order_error(J):
    try:
        J.jit(lambda x, y: x + y)(1.0, np.ones(3, ">f4"))
    except TypeError as e:
        return str(e)
    return None


def test_non_native_byte_order_input_raises_type_error_naming_the_argument_like_jax():
    got, want = _byte_order_error(minijax), _byte_order_error(jax)
    assert minijax.core.trace_ctx.trace is minijax.core.eval_trace
    for msg in (got, want):
        assert msg is not None and "passed to the function at path y" in msg, msg
    assert "byte order" in got


# ---------------------------------------------------------------------------------------------
# Donation
# ---------------------------------------------------------------------------------------------

def _donation(J):
    jnp = J.numpy
    g = J.jit(lambda a: a + 1, donate_argnums=0)
    x = jnp.arange(4.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = g(x)
    result = {"out": np.asarray(out), "donated_deleted": x.is_deleted(),
              "warned_when_usable": any("donated" in str(m.message) for m in w)}
    try:
        np.asarray(x)
        result["read_error"] = None
    except Exception as e:  # comparing which error each module raises
        result["read_error"] = (type(e), "deleted" in str(e))
    h = J.jit(lambda a: a.sum(), donate_argnums=0)
    z = jnp.arange(4.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        h(z)
    result["unusable_warning"] = any("Some donated buffers were not usable" in str(m.message)
                                     for m in w)
    result["unusable_deleted"] = z.is_deleted()
    compiled = g.lower(np.ones(4, np.float32)).compile()  # the AOT path donates too
    v = jnp.arange(4.0)
    compiled(v)
    result["aot_donated_deleted"] = v.is_deleted()
    return result


def test_donation_matches_jax():
    got, want = _donation(minijax), _donation(jax)
    np.testing.assert_array_equal(got.pop("out"), want.pop("out"))
    assert got == want
    assert got["read_error"] == (RuntimeError, True)


def test_donated_argument_cannot_be_passed_again():
    g = minijax.jit(lambda a: a * 2, donate_argnums=0)
    x = minijax.numpy.ones(3)
    g(x)
    g(minijax.numpy.ones(3))  # now the fast path is cached
    with pytest.raises(RuntimeError, match="deleted"):
        g(x)


# ---------------------------------------------------------------------------------------------
# Async dispatch, block_until_ready, no host round-trips
# ---------------------------------------------------------------------------------------------

def test_jitted_call_returns_device_array_and_block_until_ready():
    x = _f32(64, 64)
    f = minijax.jit(lambda a: (a @ a).sum(0))
    out = f(x)
    assert type(out) is minijax.Array
    assert out._npy is None and out._buf is not None  # still on the device
    assert out.block_until_ready() is out
    tree = {"a": out, "b": [f(x)]}
    assert minijax.block_until_ready(tree) is tree
    assert out._npy is None  # waiting does not fetch the value
    want = jax.jit(lambda a: (a @ a).sum(0))(x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5)


def test_chained_jitted_calls_keep_values_on_device():
    x = _f32(8, 8)
    f = minijax.jit(lambda a: minijax.numpy.tanh(a @ a))
    y = f(x)
    z = f(y)  # slow path: traced for y's aval
    w = f(z)  # fast path
    for a in (y, z, w):
        assert type(a) is minijax.Array and a._npy is None
    jf = jax.jit(lambda a: jax.numpy.tanh(a @ a))
    np.testing.assert_allclose(np.asarray(w), np.asarray(jf(jf(jf(x)))), rtol=1e-5)


def test_jit_with_x64_keeps_64_bit_values_like_jax():
    x = np.arange(3, dtype=np.float64) + 0.1
    i = np.arange(3, dtype=np.int64) + 2**40  # needs 64 bits
    outs = []
    for J, x64 in ((jax, jax.enable_x64(True)),
                   (minijax, minijax.config.override("jax_enable_x64", True))):
        with x64:
            f = J.jit(lambda a, b: (a * 2, b + 1))
            once = f(x, i)
            outs.append([np.asarray(o) for o in f(*once)])  # fast path, device inputs
    for got, want in zip(outs[1], outs[0]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# Devices and committed arrays
# ---------------------------------------------------------------------------------------------

def _placement(J):
    jnp = J.numpy
    dev = J.devices()[0]
    u = jnp.ones(3)
    c = J.device_put(np.ones(3, np.float32), dev)
    f = J.jit(lambda a: a * 2)
    add = J.jit(lambda a, b: a + b)
    return {
        "jnp.ones": u.committed,
        "device_put(np)": J.device_put(np.ones(3, np.float32)).committed,
        "device_put(np, dev)": c.committed,
        "device_put(uncommitted) is itself": J.device_put(u) is u,
        "device_put(committed) is itself": J.device_put(c) is c,
        "device_put(uncommitted, dev)": J.device_put(u, dev).committed,
        "device_put(uncommitted, dev) is new": J.device_put(u, dev) is not u,
        "device_put(2.0) weak": J.device_put(2.0).weak_type,
        "jit(uncommitted)": f(u).committed,
        "jit(committed)": f(c).committed,
        "jit(numpy)": f(np.ones(3, np.float32)).committed,
        "jit(committed, uncommitted)": add(c, u).committed,
        "jit(closure over committed)": J.jit(lambda a: a + c)(u).committed,
        "eager committed * 2": (c * 2).committed,
        "eager sin(committed)": jnp.sin(c).committed,
        "eager uncommitted * 2": (u * 2).committed,
        "devices of c": [d.id for d in c.devices()],
    }


def test_committed_placement_matches_jax():
    assert _placement(minijax) == _placement(jax)


def test_devices_and_device_put_to_the_default_device():
    # other devices: tests/sharding_checks.py (8 devices), check_device_put_to_any_device_...
    devs = minijax.devices()
    assert devs == jax.devices() and minijax.device_count() == jax.device_count()
    x, want = minijax.device_put(np.ones(2), devs[0]), jax.device_put(np.ones(2), devs[0])
    assert (x.committed, repr(x.sharding)) == (want.committed, repr(want.sharding))


# ---------------------------------------------------------------------------------------------
# The persistent compilation cache
# ---------------------------------------------------------------------------------------------

_CACHE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import minijax
    from minijax import compiler
    minijax.config.update("jax_compilation_cache_dir", sys.argv[1])
    minijax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    f = minijax.jit(lambda x: minijax.numpy.sin(x) * 2.0)
    out = np.asarray(f(np.arange(4.0, dtype=np.float32)))
    print(json.dumps({"stats": compiler.persistent_cache_stats, "out": out.tolist()}))
""")


@pytest.mark.slow
def test_persistent_compilation_cache_hits_in_a_second_process(tmp_path):
    def run():
        proc = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT, str(tmp_path / "cache")],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, JAX_PLATFORMS="cpu"))
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])
    first, second = run(), run()
    assert first["stats"] == {"hits": 0, "misses": 1}
    assert second["stats"] == {"hits": 1, "misses": 0}
    want = np.asarray(jax.numpy.sin(np.arange(4.0, dtype=np.float32)) * 2.0)
    np.testing.assert_allclose(second["out"], want, rtol=1e-6)
    np.testing.assert_allclose(first["out"], want, rtol=1e-6)


_CORRUPT_SCRIPT = textwrap.dedent("""
    import json, os, sys, warnings
    import numpy as np
    J = __import__(sys.argv[1])
    cache = sys.argv[2]
    J.config.update("jax_compilation_cache_dir", cache)
    # cache every compile, however small and fast
    J.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    J.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

    def make():  # the same code each time: the same module, the same cache key
        return J.jit(lambda x: J.numpy.sin(x) * 2.0)

    def step():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = np.asarray(make()(np.arange(4.0, dtype=np.float32)))
        return out.tolist(), any("Error reading persistent compilation cache entry"
                                 in str(m.message) for m in w)

    first = step()
    for root, _, files in os.walk(cache):  # truncate every cache entry to half
        for name in files:
            path = os.path.join(root, name)
            data = open(path, "rb").read()
            open(path, "wb").write(data[: len(data) // 2])
    second = step()  # warns, compiles again, overwrites the bad entry
    third = step()   # reads the rewritten entry: no warning
    print(json.dumps({"first": first, "second": second, "third": third}))
""")


def test_corrupt_persistent_cache_entry_warns_and_recompiles_like_jax(tmp_path):
    def run(module):
        proc = subprocess.run([sys.executable, "-c", _CORRUPT_SCRIPT, module,
                               str(tmp_path / module)], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])
    got, want = run("minijax"), run("jax")
    assert [got[k][1] for k in ("first", "second")] == \
        [want[k][1] for k in ("first", "second")] == [False, True]
    # minijax also overwrites the bad entry, so the third call reads it without a warning
    # (JAX 0.10.2 leaves it in place and warns on every later read)
    assert got["third"][1] is False
    np.testing.assert_allclose(got["second"][0], want["second"][0], rtol=1e-6)
    np.testing.assert_allclose(got["third"][0], want["first"][0], rtol=1e-6)


def test_persistent_cache_key_covers_compile_options_and_devices():
    import jax.extend.backend as jeb
    from jaxlib._jax import DeviceList
    text = str(minijax.jit(lambda x: x + 1.0).lower(np.ones(2, np.float32)).compiler_ir())
    one, two = (jeb.get_compile_options(num_replicas=1, num_partitions=n) for n in (1, 2))
    dev0 = DeviceList((jax.devices()[0],))
    key = compiler._cache_key(text, one, dev0, 1)
    assert key == compiler._cache_key(text, one, dev0, 1)
    assert key != compiler._cache_key(text, two, dev0, 1)     # compile options
    assert key != compiler._cache_key(text, one, dev0, 2)     # number of partitions
    assert key != compiler._cache_key(text + " ", one, dev0, 1)
    if len(jax.devices()) > 1:                                 # device assignment
        assert key != compiler._cache_key(text, one, DeviceList((jax.devices()[1],)), 1)


def test_no_persistent_cache_by_default():
    before = dict(compiler.persistent_cache_stats)
    minijax.jit(lambda x: x * 3.0 - 1.0)(np.ones(2, np.float32))
    assert compiler.persistent_cache_stats == before


# ---------------------------------------------------------------------------------------------
# Type promotion: every pair, x64 off and on
# ---------------------------------------------------------------------------------------------

_PROMO_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "bfloat16", "float32", "float64", "weak_int", "weak_float"]
_PY_TYPES = {"weak_int": int, "weak_float": float}


def _dtype(name):
    return _PY_TYPES.get(name) or np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


def _value(J, name):
    if name in _PY_TYPES:
        return _PY_TYPES[name](1)
    return J.numpy.zeros((), _dtype(name))


def _promotion_table(J):
    """{(a, b): (dtype and weak_type of add(a, b), promote_types, result_type of the dtypes
    and of the values)}."""
    table = {}
    for a, b in itertools.product(_PROMO_NAMES, _PROMO_NAMES):
        x, y = _value(J, a), _value(J, b)
        op = J.numpy.logical_or if a == b == "bool" else J.numpy.add
        # JAX would compile each eager add; eval_shape gives the same type without compiling
        r = jax.eval_shape(op, x, y) if J is jax else op(x, y)
        table[a, b] = (np.dtype(r.dtype).name, bool(r.weak_type),
                       np.dtype(J.numpy.promote_types(_dtype(a), _dtype(b))).name,
                       np.dtype(J.numpy.result_type(_dtype(a), _dtype(b))).name,
                       np.dtype(J.numpy.result_type(x, y)).name)
    return table


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_type_promotion_table_matches_jax(x64):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Explicitly requested dtype float64..." with x64 off
        with jax.enable_x64(x64):
            want = _promotion_table(jax)
        with minijax.config.override("jax_enable_x64", x64):
            got = _promotion_table(minijax)
    bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not bad, bad


def test_jit_retraces_when_x64_or_dtype_promotion_changes_like_jax():
    """The trace cache is keyed on the options that change tracing (JAX's trace_context)."""
    i = np.ones(3, np.int32)
    f32, i32 = np.float32(1.5), np.ones(3, np.int32)
    results = {}
    for J, x64, strict in ((jax, lambda: jax.enable_x64(True),
                            lambda: jax.numpy_dtype_promotion("strict")),
                           (minijax, lambda: minijax.config.override("jax_enable_x64", True),
                            lambda: minijax.numpy_dtype_promotion("strict"))):
        count = []

        def arange_plus(x, J=J, count=count):
            count.append(1)
            return J.numpy.arange(3) + x

        jf = J.jit(arange_plus)
        dtypes_seen = [jf(i).dtype]
        with x64():
            dtypes_seen.append(jf(i).dtype)
        dtypes_seen.append(jf(i).dtype)
        add = J.jit(lambda x, y: x + y)
        add(f32, i32)
        with strict():
            try:
                add(f32, i32)
                raised = None
            except Exception as e:  # the kind is what is compared
                raised = type(e).__name__
        results[J.__name__] = (tuple(str(d) for d in dtypes_seen), len(count), raised)
    assert results["minijax"] == results["jax"], results
    assert results["jax"][0] == ("int32", "int64", "int32")


_CACHE_DIR_SCRIPT = textwrap.dedent("""
    import json, os, sys, warnings
    J = __import__(sys.argv[1])
    J.config.update("jax_compilation_cache_dir", os.path.join(sys.argv[2], "file", "sub"))
    open(os.path.join(sys.argv[2], "file"), "w").close()  # a file where a folder must go
    if sys.argv[3] == "raise":
        J.config.update("jax_raise_persistent_cache_errors", True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            outs = [float(J.jit(lambda x, k=k: x * k)(2.0)) for k in range(3)]
        except OSError as e:
            outs = type(e).__name__
    print(json.dumps({"outs": outs, "warnings": [str(m.message).split(": ", 1)[1]
                                                 for m in w]}))
""")

_THRESHOLD_SCRIPT = textwrap.dedent("""
    import json, os, sys
    J = __import__(sys.argv[1])
    J.config.update("jax_compilation_cache_dir", sys.argv[2])
    J.config.update("jax_persistent_cache_min_compile_time_secs", float(sys.argv[3]))
    J.config.update("jax_persistent_cache_min_entry_size_bytes", int(sys.argv[4]))
    J.jit(lambda x: x * 3.0)(2.0)
    names = [n for n in os.listdir(sys.argv[2]) if not n.endswith("-atime")] \\
        if os.path.isdir(sys.argv[2]) else []
    print(json.dumps(len(names)))
""")


def _run_script(script, *args):
    proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["warn", "raise"])
def test_unusable_cache_directory_warns_once_and_compiles_like_jax(tmp_path, mode):
    (tmp_path / "m").mkdir()
    (tmp_path / "j").mkdir()
    got = _run_script(_CACHE_DIR_SCRIPT, "minijax", tmp_path / "m", mode)
    want = _run_script(_CACHE_DIR_SCRIPT, "jax", tmp_path / "j", mode)
    assert want["outs"] == ([0.0, 2.0, 4.0] if mode == "warn" else "NotADirectoryError")
    assert got["outs"] == want["outs"]
    # one warning, naming the error and the directory (minus the module name before it)
    assert [m.replace(str(tmp_path / "m"), "D") for m in got["warnings"]] == \
        [m.replace(str(tmp_path / "j"), "D") for m in want["warnings"]]


def test_persistent_cache_thresholds_like_jax(tmp_path):
    # JAX's defaults (1 s of compile time, 0 bytes) write nothing for a tiny program; zero
    # time and no size floor write it; an entry size floor above its size writes nothing
    for i, (secs, size) in enumerate([(1.0, 0), (0, -1), (0, 10**9)]):
        counts = [_run_script(_THRESHOLD_SCRIPT, m, tmp_path / f"{m}{i}", secs, size)
                  for m in ("minijax", "jax")]
        assert counts[0] == counts[1] == (1 if size == -1 else 0), (secs, size, counts)


def test_lowered_args_info_and_jit_inline_as_jax():
    import jax

    def info(J):
        lowered = J.jit(lambda x, y, z=1: x, donate_argnums=0).lower(
            np.ones(2, np.float32), 1.0, z=np.ones(1, np.int32))
        return J.tree_util.tree_map(lambda a: (a.shape, str(a.dtype), a.donated,
                                               a._aval.weak_type), lowered.args_info)
    assert info(minijax) == info(jax)

    # inline=True: the function's equations in the caller's jaxpr, no nested jit
    def inlined(J):
        f = J.jit(lambda y: J.numpy.sin(y) + 1, inline=True)
        return str(J.make_jaxpr(lambda x: f(x) * 2)(1.0)), float(J.jit(lambda x: f(x) * 2)(1.0))
    assert inlined(minijax) == inlined(jax)


def _main_params(text: str) -> int:
    """How many parameters the lowered module's `main` takes."""
    return len(re.findall(r"%arg\d+:", text.split("@main(")[1].split(") ->")[0]))


@pytest.mark.parametrize("keep", [False, True])
def test_keep_unused_prunes_the_module_as_jax(keep):
    import jax
    # JAX's default (keep_unused=False) drops the arguments nothing reads from the module;
    # args_info and the compiled program still take (and type-check) every argument; an
    # unread donated argument is then not donated (not deleted, no warning)

    def run(J):
        f = J.jit(lambda d, s, x: d["a"] * x, static_argnums=1, keep_unused=keep)
        args = ({"a": J.numpy.ones(2), "b": (np.arange(3, dtype=np.float32), 2.0)}, 1, 3.0)
        lowered = f.lower(*args)
        info = [(a.shape, a.donated) for a in J.tree_util.tree_leaves(lowered.args_info)]
        compiled = lowered.compile()
        bad = ({"a": J.numpy.ones(2), "b": (np.ones(4, np.float32), 2.0)}, 3.0)
        try:
            compiled(*bad)
        except TypeError:
            refused = True
        else:
            refused = False
        out = [np.asarray(g).tolist() for g in (compiled(args[0], 3.0), f(*args), f(*args))]

        g = J.jit(lambda x, y, z: x * 2 + z, donate_argnums=(0, 1), keep_unused=keep)
        x, y, z = J.numpy.ones(2), J.numpy.ones(3), J.numpy.full(2, 5.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            donated = _main_params(g.lower(x, y, z).as_text())
            res = np.asarray(g(x, y, z)).tolist()
        deleted = (x.is_deleted(), y.is_deleted(), z.is_deleted())
        warned = any("donated buffers were not usable" in str(w.message) for w in caught)
        return _main_params(lowered.as_text()), info, refused, out, donated, res, deleted, warned

    got, want = run(minijax), run(jax)
    assert got == want
    assert want[0] == (4 if keep else 2) and want[4] == (3 if keep else 2)


def test_cached_calls_with_dict_keys_of_other_types_match_jax():
    # keys that sort by insertion order (frozensets), keys equal across types (1 and True),
    # deep nesting and custom nodes with array aux data: each as JAX gives it
    import jax

    import minijax
    A, B = frozenset([1]), frozenset([2])
    for J in (minijax, jax):
        jnp = J.numpy
        g = J.jit(lambda d: d[A] - d[B])
        x2, y2, x3, y3 = (jnp.full(n, v) for n, v in ((2, 10.0), (2, 1.0), (3, 10.0), (3, 1.0)))
        outs = [g({A: x2, B: y2}), g({A: x2, B: y2}), g({B: y3, A: x3}), g({B: y3, A: x3}),
                g({A: x3, B: y3})]
        assert [float(o[0]) for o in outs] == [9.0] * 5, J.__name__
        f1, f2 = J.jit(lambda x: {1: x}), J.jit(lambda x: {True: x})
        f1(x2)
        assert [type(k) for k in f2(x2)] == [bool], J.__name__
        t = x2
        for _ in range(40):
            t = {"k": t}
        f = J.jit(lambda t: t)
        f(t), f(t)  # fast: no walk exponential in the depth


def test_cached_call_output_with_array_aux_data():
    import jax

    import minijax

    class Box:
        def __init__(self, x, meta):
            self.x, self.meta = x, meta
    for J in (minijax, jax):
        J.tree_util.register_pytree_node(Box, lambda b: ((b.x,), b.meta),
                                         lambda meta, xs: Box(xs[0], meta))
        f = J.jit(lambda x: Box(x * 2, np.array([1.0, 2.0])))
        for n in (2, 3, 3):
            out = f(J.numpy.ones(n))
            assert out.x.shape == (n,) and list(out.meta) == [1.0, 2.0]
