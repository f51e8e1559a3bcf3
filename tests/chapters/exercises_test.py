"""The graded exercises of chapters/exercises/: each test runs once on the skeleton a learner
fills in and once on the reference solution, against real JAX.

In the suite a skeleton must fail with NotImplementedError (a strict xfail, so the suite
proves the skeletons are still skeletons and that the tests reach the learner's code), and a
solution must pass. A learner runs `make exercise NAME=...`: it copies the skeleton to
chapters/exercises/mine/ (ignored by git) once and runs these tests with MINIJAX_EXERCISES=mine,
where the skeleton cases load that copy and are plain tests; the tracked skeletons stay
skeletons, so the suite stays green while the learner works. The modules are loaded from their files
(tests/chapters would shadow a top-level `chapters` package on sys.path).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from functools import partial
from pathlib import Path

import jax
import numpy as np
import pytest

import minijax
from minijax import core
from minijax.interpreters import ad, batching
from minijax.lax import lax as mlax

pytestmark = pytest.mark.slow  # every exercise's solution run against JAX; `make exercises`

EXERCISES = Path(__file__).resolve().parents[2] / "chapters" / "exercises"
LEARNER = os.environ.get("MINIJAX_EXERCISES") == "mine"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(
        f"minijax_exercises.{path.parent.name}.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def learner_file(name: str) -> Path:
    """The file a test loads as the skeleton: in the learner's mode, the learner's copy in
    chapters/exercises/mine/ (ignored by git; `make exercise NAME=...` makes it), if there is
    one; otherwise the tracked skeleton, which must stay unfilled."""
    mine = EXERCISES / "mine" / f"{name}.py"
    return mine if LEARNER and mine.exists() else EXERCISES / f"{name}.py"


def _versions(name: str):
    skeleton = pytest.param(learner_file(name), id=f"{name}-skeleton", marks=() if LEARNER else
                            pytest.mark.xfail(strict=True, raises=NotImplementedError,
                                              reason="a skeleton, to be filled in"))
    solution = pytest.param(EXERCISES / "solutions" / f"{name}.py", id=f"{name}-solution")
    return pytest.mark.parametrize("module", [skeleton, solution], indirect=True)


@pytest.fixture
def module(request):
    return _load(request.param)


def _install(monkeypatch, table: dict, rules: dict) -> None:
    """Put the exercise's rules in minijax's rule table for the duration of one test."""
    for name, rule in rules.items():
        monkeypatch.setitem(table, getattr(mlax, f"{name}_p"), rule)


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


rng = np.random.default_rng(0)
X = rng.uniform(0.5, 1.5, (4, 3)).astype(np.float32)
Y = rng.uniform(0.5, 1.5, (4, 3)).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# tiny_trace: a Trace that records primitive names
# ---------------------------------------------------------------------------------------------

def _program(J):
    return lambda x: J.numpy.sum(J.numpy.sin(x) * x + 2.0)


@_versions("tiny_trace")
def test_tiny_trace_records_what_jax_traces(module):
    out, tape = module.record_primitives(_program(minijax))(X)
    jaxpr = jax.make_jaxpr(_program(jax))(X)
    assert tape == [e.primitive.name for e in jaxpr.eqns]
    _close(out, _program(jax)(X))
    assert core.current_trace() is core.eval_trace


@_versions("tiny_trace")
def test_tiny_trace_composes_with_grad_vmap_jit(module):
    recorded = lambda x: module.record_primitives(_program(minijax))(x)[0]
    _close(minijax.grad(recorded)(X), jax.grad(_program(jax))(X))
    _close(minijax.vmap(recorded)(X), jax.vmap(_program(jax))(X))
    _close(minijax.jit(recorded)(X), _program(jax)(X))


@_versions("tiny_trace")
def test_tiny_trace_leaves_no_trace_behind_on_error(module):
    bad = lambda x: minijax.numpy.sin(x) @ x  # f32[4,3] @ f32[4,3]: shapes do not match
    with pytest.raises(TypeError):
        module.record_primitives(bad)(X)
    assert core.current_trace() is core.eval_trace


# ---------------------------------------------------------------------------------------------
# jvp_rules
# ---------------------------------------------------------------------------------------------

def _jvp_program(J):
    jn = J.numpy
    return lambda x, y: jn.sum(jn.sin(x) * jn.cos(y) + jn.exp(x) / y + jn.log(y) * x)


@_versions("jvp_rules")
def test_jvp_rules_match_jax(module, monkeypatch):
    _install(monkeypatch, ad.primitive_jvps, module.RULES)
    tx, ty = rng.standard_normal((2, 4, 3)).astype(np.float32)
    mine = minijax.jvp(_jvp_program(minijax), (X, Y), (tx, ty))
    ref = jax.jvp(_jvp_program(jax), (X, Y), (tx, ty))
    _close(mine[0], ref[0])
    _close(mine[1], ref[1], 1e-4)


@_versions("jvp_rules")
def test_jvp_rules_with_symbolic_zeros_and_twice(module, monkeypatch):
    _install(monkeypatch, ad.primitive_jvps, module.RULES)
    t = np.ones_like(X)
    only_x = lambda J: (lambda x: _jvp_program(J)(x, Y))  # y's tangent is a symbolic Zero
    _close(minijax.jvp(only_x(minijax), (X,), (t,))[1], jax.jvp(only_x(jax), (X,), (t,))[1], 1e-4)

    def second(J):
        return lambda x: J.jvp(only_x(J), (x,), (t,))[1]
    _close(minijax.jvp(second(minijax), (X,), (t,))[1], jax.jvp(second(jax), (X,), (t,))[1], 1e-4)


# ---------------------------------------------------------------------------------------------
# batching_rules
# ---------------------------------------------------------------------------------------------

def _batch_program(J):
    jn = J.numpy

    def fun(x):  # one example: f32[3,5]
        s = jn.sum(x, axis=1)                    # reduce_sum
        t = jn.transpose(x) * 2.0                # transpose
        b = jn.broadcast_to(s, (2, 3))           # broadcast_in_dim
        return jn.sum(t, axis=0) + jn.sum(b), t
    return fun


@_versions("batching_rules")
@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), (1, 1), (2, (0, 2))])
def test_batching_rules_match_jax(module, monkeypatch, in_axes, out_axes):
    _install(monkeypatch, batching.primitive_batchers, module.RULES)
    shape = [3, 5]
    shape.insert(in_axes, 4)
    xs = rng.standard_normal(shape).astype(np.float32)
    mine = minijax.vmap(_batch_program(minijax), in_axes, out_axes)(xs)
    ref = jax.vmap(_batch_program(jax), in_axes, out_axes)(xs)
    for m, r in zip(mine, ref):
        assert np.shape(m) == np.shape(r)
        _close(m, r)


# ---------------------------------------------------------------------------------------------
# transpose_rules
# ---------------------------------------------------------------------------------------------

def _loss(J):
    jn = J.numpy
    w = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)

    def fun(x):  # x: f32[3]
        b = jn.broadcast_to(x, (4, 3))            # broadcast_in_dim
        h = -(b * w)                              # mul, neg
        return jn.sum(jn.sum(h * h, axis=1) * 0.5)  # reduce_sum over one axis, then all
    return fun


@_versions("transpose_rules")
def test_transpose_rules_give_jax_gradients(module, monkeypatch):
    _install(monkeypatch, ad.primitive_transposes, module.RULES)
    x = np.array([0.3, -1.2, 2.0], np.float32)
    _close(minijax.grad(_loss(minijax))(x), jax.grad(_loss(jax))(x), 1e-4)
    ct = np.arange(12, dtype=np.float32).reshape(4, 3)
    f = lambda J: (lambda x: -(J.numpy.broadcast_to(x, (4, 3)) * 3.0))
    _, mine = minijax.vjp(f(minijax), x)
    _, ref = jax.vjp(f(jax), x)
    _close(mine(ct)[0], ref(ct)[0])


# ---------------------------------------------------------------------------------------------
# inverse: a jaxpr interpreter that rewrites
# ---------------------------------------------------------------------------------------------

W = np.array([1.0, 2.0, 4.0], np.float32)


def _invertible(J):
    jn = J.numpy
    return lambda x: 2.0 - jn.log(3.0 / (-jn.exp(x * 2.0 + 1.0) / W + 8.0))


@_versions("inverse")
def test_inverse_undoes_the_function(module):
    x = np.array([-0.7, 0.1, 0.4], np.float32)
    y = np.asarray(_invertible(jax)(x))
    _close(module.inverse(_invertible(minijax))(y), x, 1e-4)
    _close(minijax.jit(module.inverse(_invertible(minijax)))(y), x, 1e-4)
    names = [e.primitive.name for e in minijax.make_jaxpr(
        module.inverse(_invertible(minijax)))(y).eqns]
    assert "log" in names and "exp" in names and names.index("exp") < names.index("log")


@_versions("inverse")
def test_inverse_differentiates_by_the_inverse_function_theorem(module):
    h = lambda J: (lambda x: J.numpy.exp(x * 0.5) * 3.0 - 1.0)
    x = np.float32(0.8)
    y = np.float32(h(jax)(x))
    _close(minijax.grad(module.inverse(h(minijax)))(y), 1.0 / jax.grad(h(jax))(x), 1e-4)


# ---------------------------------------------------------------------------------------------
# scan_lowering: scan as a while loop over dynamic slices
# ---------------------------------------------------------------------------------------------

def _step(J):
    return lambda c, x: (c * 0.9 + x, J.numpy.sin(c) * x)


XS = rng.standard_normal((5, 3)).astype(np.float32)
C0 = np.ones(3, np.float32)


@_versions("scan_lowering")
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_via_while_matches_lax_scan(module, reverse):
    mine = module.scan_via_while(_step(minijax), C0, XS, reverse=reverse)
    ref = jax.lax.scan(_step(jax), C0, XS, reverse=reverse)
    for m, r in zip(mine, ref):
        _close(m, r)
    jitted = minijax.jit(lambda c, xs: module.scan_via_while(_step(minijax), c, xs, reverse))
    for m, r in zip(jitted(C0, XS), ref):
        _close(m, r)


@_versions("scan_lowering")
def test_scan_via_while_is_a_while_and_has_a_jvp(module):
    run = lambda J, scan: (lambda c: scan(_step(J), c, XS)[1].sum())
    jaxpr = minijax.make_jaxpr(run(minijax, module.scan_via_while))(C0)
    names = {e.primitive.name for e in jaxpr.eqns}
    assert "while" in names and "scan" not in names
    t = np.array([1.0, -1.0, 0.5], np.float32)
    mine = minijax.jvp(run(minijax, module.scan_via_while), (C0,), (t,))
    ref = jax.jvp(run(jax, jax.lax.scan), (C0,), (t,))
    _close(mine[1], ref[1], 1e-4)


# ---------------------------------------------------------------------------------------------
# lowering_rules: five primitives lowered to StableHLO, the program run on XLA (chapter 07)
# ---------------------------------------------------------------------------------------------

def _lowered_programs(J):
    jnp = J.numpy
    r = np.random.default_rng(3)
    args = lambda *shapes: [r.standard_normal(s).astype(np.float32) for s in shapes]
    return [(lambda x, w, b: jnp.sum(jnp.sin(x @ w) * b, axis=0), args((4, 3), (3, 5), (5,))),
            (lambda a, c, v: jnp.sum(J.lax.batch_matmul(a, c) * jnp.broadcast_to(
                v[:, None, None], (2, 3, 4))), args((2, 3, 6), (2, 6, 4), (2,)))]


def _stablehlo_ops(text: str) -> set[str]:
    return set(re.findall(r"(?<!#)stablehlo\.(\w+)", text)) - {"return"}


@_versions("lowering_rules")
@pytest.mark.parametrize("J", [minijax, jax], ids=["minijax_jaxpr", "jax_jaxpr"])
def test_lowering_rules_run_on_xla_as_jax_jit(module, J):
    for (program, args), (ref, _) in zip(_lowered_programs(J), _lowered_programs(jax)):
        closed = J.make_jaxpr(program)(*args)
        (got,) = module.run(closed, *args)
        want = jax.jit(ref)(*args)
        assert got.shape == want.shape and got.dtype == want.dtype
        _close(got, want)
        # the same StableHLO operations as JAX's own lowering of the program
        assert _stablehlo_ops(module.lower(closed)) == _stablehlo_ops(
            jax.jit(ref).lower(*args).as_text())
    with pytest.raises(NotImplementedError, match="'cos'"):
        module.lower(J.make_jaxpr(J.numpy.cos)(X))


# ---------------------------------------------------------------------------------------------
# roofline: intensity, the attainable FLOP/s and the bound, from cost_analysis (chapter 17)
# ---------------------------------------------------------------------------------------------

@_versions("roofline")
def test_roofline_from_cost_analysis(module):
    m, k, n = 64, 128, 32
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    for J in (minijax, jax):
        cost = J.jit(lambda x, y: x @ y).lower(a, b).compile().cost_analysis()
        intensity = 2 * m * k * n / (4 * (m * k + k * n + m * n))  # one read/write of each
        _close(module.arithmetic_intensity(cost), intensity)
        ew = J.jit(lambda x: x * 2.0 + 1.0).lower(a).compile().cost_analysis()
        assert module.arithmetic_intensity(ew) < 1.0
        peak, bw = 1e11, 1e10  # ridge point: 10 FLOP/byte
        assert module.attainable_flops(intensity, peak, bw) == min(peak, intensity * bw)
        assert module.attainable_flops(1e3, peak, bw) == peak
        assert module.bound(ew, peak, bw) == "memory" and module.bound(cost, 1e14, bw) == "memory"
        assert module.bound(cost, 1e9, bw) == "compute"
        assert module.best_time_s(cost, peak, bw) >= cost["flops"] / peak


# ---------------------------------------------------------------------------------------------
# bf16_passes: DEFAULT and HIGH on a bfloat16 matrix unit, emulated (chapter 22)
# ---------------------------------------------------------------------------------------------

def _jax_bf16_passes(a, b, passes):
    jnp = jax.numpy
    dot = lambda u, v: jnp.matmul(u, v, preferred_element_type=jnp.float32)
    a_hi, b_hi = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    a_lo = (a - a_hi.astype(jnp.float32)).astype(jnp.bfloat16)
    b_lo = (b - b_hi.astype(jnp.float32)).astype(jnp.bfloat16)
    out = dot(a_hi, b_hi)
    return out if passes == 1 else out + dot(a_hi, b_lo) + dot(a_lo, b_hi)


@_versions("bf16_passes")
def test_bf16_passes_errors_and_values_match_jax(module):
    rng = np.random.RandomState(0)
    a, b = rng.randn(64, 96).astype(np.float32), rng.randn(96, 32).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    err = lambda out: float(np.max(np.abs(np.asarray(out, np.float64) - exact)))
    outs = {p: minijax.jit(lambda x, y, p=p: module.matmul_bf16(x, y, p))(a, b) for p in (1, 3)}
    for p, out in outs.items():
        assert out.dtype == np.float32
        _close(out, jax.jit(lambda x, y, p=p: _jax_bf16_passes(x, y, p))(a, b), 1e-4)
    assert err(outs[1]) > 20 * err(outs[3]) and err(outs[3]) < 20 * err(a @ b)
    hi, lo = module.split_bf16(minijax.numpy.asarray(a))
    assert hi.dtype == lo.dtype == minijax.numpy.bfloat16
    assert np.max(np.abs(np.asarray(hi, np.float64) + np.asarray(lo, np.float64) - a)) < 1e-4


# ---------------------------------------------------------------------------------------------
# offload_policy: a checkpoint policy that offloads only big matmul results (chapter 24)
# ---------------------------------------------------------------------------------------------

def _two_dots(J, policy):
    jnp = J.numpy

    def layer(x, w_big, w_small):
        return jnp.tanh(jnp.sin(x @ w_big) @ w_small)

    def loss(w_big, w_small, x):
        return jnp.sum(J.checkpoint(layer, policy=policy)(x, w_big, w_small) ** 2)
    return loss


@_versions("offload_policy")
def test_offload_policy_offloads_only_big_dots(module):
    import contextlib
    import io

    import jax.ad_checkpoint

    import minijax.ad_checkpoint
    assert module.dot_output_shape((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))) == (2, 3, 5)
    rng = np.random.RandomState(0)
    wb, ws = (rng.randn(32, 32) * 0.1).astype(np.float32), rng.randn(32, 4).astype(np.float32)
    x = rng.randn(16, 32).astype(np.float32)
    ref = jax.grad(_two_dots(jax, None), argnums=(0, 1))(wb, ws, x)
    counts = {}
    for J, off in ((minijax, minijax.ad_checkpoint.Offloadable),
                   (jax, jax.ad_checkpoint.Offloadable)):
        loss = _two_dots(J, module.offload_big_dots(16 * 32, off))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            J.ad_checkpoint.print_saved_residuals(loss, wb, ws, x)
        lines = buf.getvalue().splitlines()
        counts[J.__name__] = (len(lines), sum("device_put" in ln for ln in lines))
        for g, r in zip(J.grad(loss, argnums=(0, 1))(wb, ws, x), ref):
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-3)
    assert counts["minijax"] == counts["jax"] and counts["jax"][1] == 1


# ---------------------------------------------------------------------------------------------
# callback_batching: pure_callback's vmap_method="expand_dims" (chapter 14)
# ---------------------------------------------------------------------------------------------

def _host_calls(J, wrap=lambda f: f):
    """Run a two-argument pure_callback under vmap (in_axes (1, None)); return the results
    and the shapes the host function saw."""
    seen = []

    def host(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return (np.asarray(a) * np.asarray(b)).astype(np.float32)

    def per_example(a, b):
        return J.pure_callback(host, J.ShapeDtypeStruct(a.shape, a.dtype), a, b,
                               vmap_method="expand_dims")

    out = wrap(J.vmap(per_example, in_axes=(1, None)))(X, Y[0, :1].repeat(4))
    if J is minijax:
        minijax.effects_barrier()
    return np.asarray(out), seen


@_versions("callback_batching")
@pytest.mark.parametrize("jit", [False, True])
def test_callback_batching_expand_dims_matches_jax(module, monkeypatch, jit):
    from minijax.callback import pure_callback_p
    monkeypatch.setitem(batching.primitive_batchers, pure_callback_p, module.expand_dims_rule)
    mine, mine_seen = _host_calls(minijax, minijax.jit if jit else (lambda f: f))
    ref, ref_seen = _host_calls(jax, jax.jit if jit else (lambda f: f))
    _close(mine, ref)
    assert mine_seen == ref_seen == [((3, 4), (1, 4))]
    assert core.current_trace() is core.eval_trace


# ---------------------------------------------------------------------------------------------
# flop_counter: (flops, transcendentals) from a jaxpr, as cost_analysis counts them (chapter 30)
# ---------------------------------------------------------------------------------------------

def _flop_programs(J):
    N, L = J.numpy, J.lax
    w = np.random.default_rng(3).normal(size=(16, 8)).astype(np.float32)
    return {
        "mlp": lambda x: N.tanh(x @ w + 1.0) @ w.T,
        "softmax": lambda x: J.nn.softmax(x, axis=-1),
        "gelu": lambda x: J.nn.gelu(x, approximate=True),
        "power": lambda x: N.sum(x ** 5 * 2.0, axis=0),
        "sigmoid_einsum": lambda x: J.nn.sigmoid(N.einsum("ij,kj->ik", x, x)),
        "jit_cond": lambda x: J.jit(lambda u: L.cond(u.sum() > 0, lambda v: v * 2.0,
                                                     lambda v: N.exp(v) + 1.0, u))(x),
        "scan": lambda x: L.scan(lambda h, _: (N.tanh(h @ w @ w.T), None), x, None,
                                 length=4)[0],
        "while": lambda x: L.while_loop(lambda c: c[0] < 5,
                                        lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1],
    }


@_versions("flop_counter")
def test_flop_counter_matches_cost_analysis(module):
    x = np.random.default_rng(4).normal(size=(8, 16)).astype(np.float32)
    for J in (minijax, jax):
        for name, f in _flop_programs(J).items():
            jaxpr = J.make_jaxpr(f)(x).jaxpr
            cost = J.jit(f).lower(x).compile().cost_analysis()
            want = (int(cost.get("flops", 0)), int(cost.get("transcendentals", 0)))
            assert module.count_flops(jaxpr, xla_loops=True) == want, (J.__name__, name)


@_versions("flop_counter")
def test_flop_counter_counts_the_work_of_loops_and_refuses_what_it_cannot(module):
    x = np.random.default_rng(5).normal(size=(8, 16)).astype(np.float32)
    assert [module.multiplies(n) for n in (1, 2, 3, 4, 5, 8, 15)] == [0, 1, 2, 2, 3, 3, 6]
    for J in (minijax, jax):
        programs = _flop_programs(J)
        scan = J.make_jaxpr(programs["scan"])(x).jaxpr
        body_f, body_t = module.count_flops(scan.eqns[0].params["jaxpr"].jaxpr)
        assert body_f == 2 * (2 * 8 * 16 * 8) and body_t == 8 * 16  # two matmuls, one tanh
        assert module.count_flops(scan) == (4 * (body_f + 2), 4 * body_t)
        with pytest.raises(ValueError, match="while"):
            module.count_flops(J.make_jaxpr(programs["while"])(x).jaxpr)
        with pytest.raises(ValueError, match="sort"):
            module.count_flops(J.make_jaxpr(partial(J.numpy.sort, axis=-1))(x).jaxpr)


# ---------------------------------------------------------------------------------------------
# nan_finder: the primitive jax_debug_nans names (chapter 15)
# ---------------------------------------------------------------------------------------------

def _nan_programs(J):
    jnp = J.numpy
    return [lambda x: jnp.log(jnp.sin(x) - 2.0) * 2.0,
            lambda x: jnp.sqrt(x - 5.0).sum(),
            lambda x: jnp.divide(jnp.multiply(x, 0.0), jnp.subtract(x, x)) + 1.0]


@_versions("nan_finder")
def test_nan_finder_names_what_jax_debug_nans_names(module):
    for mine, ref in zip(_nan_programs(minijax), _nan_programs(jax)):
        jax.config.update("jax_debug_nans", True)
        try:
            with pytest.raises(FloatingPointError) as info:
                ref(X)
        finally:
            jax.config.update("jax_debug_nans", False)
        name = module.first_nonfinite(mine)(X)
        assert str(info.value) == f"invalid value (nan) encountered in {name}"
    assert module.first_nonfinite(lambda x: x * 2.0)(X) is None


# ---------------------------------------------------------------------------------------------
# sharding_rules: transpose, cumsum and 2-D dot_general with sharding in types (chapter 12)
# ---------------------------------------------------------------------------------------------

def _sharded_pair(J, spec_a, spec_b):
    mesh = J.make_mesh((4, 2), ("x", "y"))  # Explicit axes (the default)
    NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
    a = J.device_put(np.ones((8, 4), np.float32), NS(mesh, P(*spec_a)))
    b = J.device_put(np.ones((4, 4), np.float32), NS(mesh, P(*spec_b)))
    return a, b


def _use_rule(monkeypatch, prim, rule):
    monkeypatch.setattr(prim, "abstract_eval", prim.abstract_eval)  # restored afterwards
    monkeypatch.setattr(prim, "sharding_rule", None, raising=False)
    if getattr(prim.abstract_eval, "__name__", "") == "abstract_eval":  # wrapped already
        monkeypatch.setattr(prim, "sharding_rule", rule)
    else:
        prim.def_sharding_rule(rule)


def _types_or_error(J, f, *args):
    """The types of the outputs of `f`'s jaxpr (`float32[4,8@x]`, ...), or its error."""
    try:
        return [str(a) for a in J.make_jaxpr(f)(*args).out_avals]
    except Exception as e:  # the error is what we compare
        return f"{type(e).__name__}: {e}"


@_versions("sharding_rules")
def test_sharding_rules_type_programs_as_jax(module, monkeypatch):
    from minijax.lax.control_flow import loops
    _use_rule(monkeypatch, mlax.transpose_p, module.transpose_sharding_rule)
    _use_rule(monkeypatch, loops.cumsum_p, module.cumsum_sharding_rule)
    _use_rule(monkeypatch, mlax.dot_general_p, module.matmul_sharding_rule)
    cases = [(("x",), ("y",), lambda J: lambda a, b: (a.T, J.numpy.cumsum(a.T, 0))),
             (("x", "y"), ("y",), lambda J: lambda a, b: a.T),
             (("x", "y"), (None, "y"), lambda J: lambda a, b: J.numpy.cumsum(a, 1)),
             (("x",), (None, "y"), lambda J: lambda a, b: a @ b),
             (("x", "y"), ("y",), lambda J: lambda a, b: a @ b)]
    for spec_a, spec_b, program in cases:
        want = _types_or_error(jax, program(jax), *_sharded_pair(jax, spec_a, spec_b))
        got = _types_or_error(minijax, program(minijax),
                              *_sharded_pair(minijax, spec_a, spec_b))
        if "NotImplementedError" in got:
            raise NotImplementedError(got)
        assert got == want, (got, want)


# ---------------------------------------------------------------------------------------------
# collectives: all_gather from ppermute; the transpose of psum_scatter (chapter 13)
# ---------------------------------------------------------------------------------------------

def _mesh(J):
    return J.make_mesh((8,), ("i",), axis_types=(J.sharding.AxisType.Auto,))


@_versions("collectives")
def test_all_gather_from_ppermute_equals_all_gather(module):
    x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    want = jax.shard_map(lambda a: jax.lax.all_gather(a, "i", tiled=True), mesh=_mesh(jax),
                         in_specs=jax.P("i"), out_specs=jax.P("i"))(x)
    got = minijax.jit(minijax.shard_map(lambda a: module.all_gather_from_ppermute(a, "i"),
                                        mesh=_mesh(minijax), in_specs=minijax.P("i"),
                                        out_specs=minijax.P("i")))(x)
    _close(got, want)


@_versions("collectives")
def test_psum_scatter_transpose_gives_jax_gradients(module, monkeypatch):
    from minijax.lax import parallel
    monkeypatch.setitem(ad.primitive_transposes, parallel.reduce_scatter_p,
                        module.psum_scatter_transpose)
    x = rng.standard_normal((16, 3)).astype(np.float32)

    def loss(J):
        f = J.shard_map(lambda a: J.lax.psum_scatter(J.numpy.sin(a), "i", tiled=True) ** 2,
                        mesh=_mesh(J), in_specs=J.P("i"), out_specs=J.P("i"))
        return lambda a: J.numpy.sum(f(J.numpy.tile(a, (8, 1))) * J.numpy.arange(16.0)[:, None])
    _close(minijax.grad(loss(minijax))(x), jax.grad(loss(jax))(x), 1e-4)


# ---------------------------------------------------------------------------------------------
# threefry: Threefry-2x32 and the keys and bits built on it, in NumPy (chapter 10)
# ---------------------------------------------------------------------------------------------

SEEDS = (0, 42, -1, 2 ** 31 - 1)
SHAPES = ((), (7,), (3, 4), (2, 3, 5))


@_versions("threefry")
def test_threefry_hash_matches_jax(module):
    import jax.extend.random
    key = np.array([0x13198A2E, 0x03707344], np.uint32)
    x0, x1 = rng.integers(0, 2 ** 32, (2, 3, 4), dtype=np.uint32)
    y0, y1 = module.threefry2x32(key, x0, x1)
    # JAX's hash takes the counter pairs as one array, first words then second words
    want = np.asarray(jax.extend.random.threefry_2x32(key, np.concatenate([x0.ravel(),
                                                                           x1.ravel()])))
    assert y0.dtype == y1.dtype == np.uint32 and y0.shape == y1.shape == (3, 4)
    np.testing.assert_array_equal(np.concatenate([y0.ravel(), y1.ravel()]), want)
    x = np.array([0x80000001, 7, 0xFFFF0000], np.uint32)
    want = [((int(v) << 13) | (int(v) >> 19)) & 0xFFFFFFFF for v in x]  # Python's big ints
    np.testing.assert_array_equal(module.rotate_left(x, 13), want)


@partial(jax.jit, static_argnums=1)
def _jax_draws(key_data, shape):
    """jax.random's bits of 8, 16 and 32 bits and uniform floats: one compilation a shape."""
    key = jax.random.wrap_key_data(key_data)
    return [*(jax.random.bits(key, shape, np.dtype(f"uint{w}")) for w in (8, 16, 32)),
            jax.random.uniform(key, shape)]


@_versions("threefry")
def test_threefry_keys_and_bits_match_jax_random(module):
    for seed in SEEDS:
        want_key = jax.random.key_data(jax.random.key(seed))
        data = module.threefry_seed(seed)
        assert data.dtype == np.uint32
        np.testing.assert_array_equal(data, want_key)
        for shape in SHAPES:
            *bits, floats = _jax_draws(want_key, shape)
            for width, want in zip((8, 16, 32), bits):
                got = module.random_bits(data, shape, width)
                assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
                np.testing.assert_array_equal(got, want)
            got = module.uniform(data, shape)
            assert got.dtype == np.float32 and got.shape == shape
            np.testing.assert_array_equal(got, floats)


@_versions("threefry")
def test_threefry_split_and_fold_in_match_jax_random(module):
    for seed in SEEDS:
        key, data = jax.random.key(seed), module.threefry_seed(seed)
        for shape in (3, (2, 2)):
            np.testing.assert_array_equal(module.split(data, shape),
                                          jax.random.key_data(jax.random.split(key, shape)))
        for d in (0, 11, 2 ** 32 - 1):
            np.testing.assert_array_equal(module.fold_in(data, d),
                                          jax.random.key_data(jax.random.fold_in(key, d)))
    # a chain: uniform floats from a key split from a folded key
    key = jax.random.split(jax.random.fold_in(jax.random.key(3), 5))[1]
    data = module.split(module.fold_in(module.threefry_seed(3), 5))[1]
    np.testing.assert_array_equal(module.uniform(data, (4, 3)), jax.random.uniform(key, (4, 3)))


@_versions("dropout")
def test_dropout_with_explicit_keys_matches_jax(module):
    x = np.random.RandomState(0).standard_normal((4, 6)).astype(np.float32) + 2.0
    rate = 0.25
    want_keep = np.asarray(jax.random.bernoulli(jax.random.key(3), 1 - rate, x.shape))
    want = np.where(want_keep, x / (1 - rate), 0.0)
    for J in (jax, minijax):
        key = J.random.key(3)
        _close(module.dropout(J, key, x, rate, True), want)
        _close(J.jit(lambda k, x, J=J: module.dropout(J, k, x, rate, True))(key, x), want)
        _close(module.dropout(J, key, x, rate, False), x)
        _close(module.dropout(J, key, x, 0.0, True), x)
        # d/dx sum(dropout(x)) is the kept mask scaled by 1 / (1 - rate)
        grad = J.grad(lambda x, J=J, key=key: module.dropout(J, key, x, rate, True).sum())(x)
        _close(grad, want_keep / (1 - rate))


@_versions("dropout")
def test_dropout_keys_are_split_per_step_and_layer(module):
    for J in (jax, minijax):
        nxt, layers = module.keys_for_step(J, J.random.key(0), 2)
        want = jax.random.split(jax.random.key(0), 3)
        assert len(layers) == 2
        for got, w in zip([nxt, *layers], want):
            np.testing.assert_array_equal(np.asarray(J.random.key_data(got)),
                                          np.asarray(jax.random.key_data(w)))
        masks = [np.asarray(module.dropout(J, k, np.ones((64,), np.float32), 0.5, True))
                 for k in layers]
        assert not np.array_equal(masks[0], masks[1])  # fresh randomness per layer


# ---------------------------------------------------------------------------------------------
# sampling: temperature and top-k (chapter 19)
# ---------------------------------------------------------------------------------------------

LOGITS = np.log(np.array([[0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4]], np.float32))


@_versions("sampling")
def test_sampling_top1_is_argmax_and_tokens_stay_in_top_k(module):
    for J in (minijax, jax):
        got = module.sample(J, J.random.key(0), LOGITS, 1.0, top_k=1)
        np.testing.assert_array_equal(np.asarray(got), LOGITS.argmax(-1))
    draws = np.stack([np.asarray(module.sample(minijax, minijax.random.key(i), LOGITS, 2.0, 2))
                      for i in range(50)])
    assert set(draws[:, 0]) <= {0, 1} and set(draws[:, 1]) <= {2, 3}


@_versions("sampling")
def test_sampling_matches_jax_and_the_softmax(module):
    draws = {J: np.stack([np.asarray(module.sample(J, J.random.key(i), LOGITS, 0.7, 3))
                          for i in range(30)]) for J in (minijax, jax)}
    np.testing.assert_array_equal(draws[minijax], draws[jax])  # same keys, same tokens
    n, T = 4000, 0.7  # n independent rows of the same logits, drawn in one call
    tokens = np.asarray(module.sample(minijax, minijax.random.key(1), np.tile(LOGITS[:1], (n, 1)),
                                      T, 3))
    top3 = LOGITS[0, :3] / T
    want = np.exp(top3) / np.exp(top3).sum()
    freq = np.bincount(tokens, minlength=4) / n
    assert freq[3] == 0, freq
    # within four binomial standard deviations of the renormalized softmax at temperature T
    assert np.all(np.abs(freq[:3] - want) <= 4 * np.sqrt(want * (1 - want) / n)), (freq, want)


# ---------------------------------------------------------------------------------------------
# moe_dispatch: top-k routing with a capacity, as dispatch and combine tensors (chapter 21)
# ---------------------------------------------------------------------------------------------

def _routes(k: int, G: int = 2, S: int = 16, E: int = 4, seed: int = 0):
    """gates f32[G,S,k] (positive, summing to 1) and k distinct experts int32[G,S,k]."""
    r = np.random.default_rng(seed)
    experts = np.argsort(r.standard_normal((G, S, E)), axis=-1)[..., :k].astype(np.int32)
    gates = r.uniform(0.1, 1.0, (G, S, k)).astype(np.float32)
    return gates / gates.sum(-1, keepdims=True), experts


@_versions("moe_dispatch")
def test_moe_dispatch_tensors_match_the_chapter(module):
    from compare import moe
    for k, factor in ((2, 0.5), (2, 1.25), (1, 1.0)):
        gates, experts = _routes(k)
        cfg = moe.MoEConfig(n_experts=4, top_k=k, capacity_factor=factor)
        C = cfg.capacity(16)
        # minijax eagerly, JAX under jit (one compilation, not one per operation)
        got = {minijax: module.dispatch_tensors(minijax, gates, experts, 4, C),
               jax: jax.jit(partial(module.dispatch_tensors, jax), static_argnums=(2, 3))(
                   gates, experts, 4, C)}
        want = jax.jit(partial(moe.dispatch_tensors, jax, cfg), static_argnums=2)(
            gates, experts, C)
        dropped = int((~moe.keep_mask_loop(experts, 4, C)).sum())
        assert dropped > 0 or factor > 1.0  # the small capacities do drop
        for J in (minijax, jax):
            for g, w in zip(got[J], want):
                assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
                _close(g, w)
            assert int(got[J][2]) == dropped, (k, factor, int(got[J][2]), dropped)


@_versions("moe_dispatch")
def test_moe_layer_from_dispatch_and_combine_equals_a_loop(module):
    from compare import moe
    gates, experts = _routes(2, seed=1)
    h = rng.standard_normal((2, 16, 3)).astype(np.float32)
    scale = np.arange(1.0, 5.0, dtype=np.float32)  # expert e multiplies by e + 1, then tanh
    C = moe.MoEConfig(n_experts=4, top_k=2, capacity_factor=1.0).capacity(16)
    keep = moe.keep_mask_loop(experts, 4, C)

    def layer(J, gates, h):
        combine, dispatch, _ = module.dispatch_tensors(J, gates, experts, 4, C)
        x = module.to_expert_slots(J, dispatch, h)
        return module.from_expert_slots(J, combine, J.numpy.tanh(x * scale[:, None, None, None]))

    def loop(gates, h):  # every expert on every token, weighted where it was chosen and kept
        jnp = jax.numpy
        return sum(jnp.sum(jnp.where((experts == e) & keep, gates, 0.0), -1)[..., None]
                   * jnp.tanh(h * scale[e]) for e in range(4))

    def loss(J, fun):
        def f(g, x):
            y = fun(J, g, x)
            return J.numpy.sum(y ** 2), y
        return J.jit(J.value_and_grad(f, (0, 1), has_aux=True))
    got = {J: loss(J, layer)(gates, h) for J in (minijax, jax)}
    (want, want_y), want_grads = loss(jax, lambda J, g, x: loop(g, x))(gates, h)
    for (value, y), grads in got.values():
        _close(y, want_y)
        _close(value, want, 1e-4)
        for g, w in zip(grads, want_grads):
            _close(g, w, 1e-4)


# ---------------------------------------------------------------------------------------------
# sharded_mlp: Megatron's MLP with shard_map; FSDP's collectives and bytes (chapter 25)
# ---------------------------------------------------------------------------------------------

@_versions("sharded_mlp")
def test_tp_mlp_equals_the_unsharded_mlp(module):
    r = np.random.RandomState(0)
    h, w_fc, b_fc = r.randn(4, 8), r.randn(8, 32) / 3, r.randn(32)
    w_proj, b_proj = r.randn(32, 8) / 6, r.randn(8)
    args = [a.astype(np.float32) for a in (h, w_fc, b_fc, w_proj, b_proj)]

    def loss(J, mlp):
        return lambda *a: J.numpy.sum(J.numpy.tanh(mlp(*a)))
    want = jax.value_and_grad(loss(jax, lambda h, w1, b1, w2, b2: jax.nn.gelu(h @ w1 + b1) @ w2
                                   + b2), argnums=(0, 1, 3))(*args)
    for J in (jax, minijax):
        f = J.shard_map(lambda *a, J=J: module.tp_mlp(J, *a, "i"), mesh=_mesh(J),
                        in_specs=(J.P(), J.P(None, "i"), J.P("i"), J.P("i"), J.P()),
                        out_specs=J.P())
        got = J.jit(J.value_and_grad(loss(J, f), argnums=(0, 1, 3)))(*args)
        _close(got[0], want[0], 1e-4)
        for g, w in zip(got[1], want[1]):
            _close(g, w, 1e-4)
        hlo = J.jit(f).lower(*args).compile().as_text()
        assert hlo.count(" all-reduce(") == 1, "one collective in the forward pass"


@_versions("sharded_mlp")
def test_fsdp_prediction_matches_the_compiled_step(module):
    from compare import gpt_sharded
    from compare.shard_map import fsdp_loss, sgd_step
    params = (np.ones((16, 32), np.float32), np.ones((32, 8), np.float32))
    x, y = np.ones((16, 16), np.float32), np.ones((16, 8), np.float32)
    mesh = _mesh(minijax)
    put = lambda a: minijax.device_put(a, minijax.sharding.NamedSharding(mesh, minijax.P("i")))
    step = sgd_step(minijax, fsdp_loss(minijax, mesh, 16))
    hlo = step.lower(tuple(map(put, params)), put(x), put(y)).compile().as_text()
    counts, sent = module.fsdp_prediction(sum(p.nbytes for p in params), len(params), 8)
    got = gpt_sharded.count_collectives(hlo)
    assert {k: got[k] for k in counts} == counts
    moved = gpt_sharded.hlo_bytes(hlo)
    assert moved["all-gather"] + moved["reduce-scatter"] == pytest.approx(sent)


# ---------------------------------------------------------------------------------------------
# addition_scratchpad: carries written out, and the longest carry chain (chapter 26)
# ---------------------------------------------------------------------------------------------

def _sums(n: int, count: int, seed: int):
    rng = np.random.RandomState(seed)
    return rng.randint(0, 10 ** n, count).astype(np.int64), rng.randint(0, 10 ** n, count)


@_versions("addition_scratchpad")
def test_addition_scratchpad_spells_the_sum_and_its_carries(module):
    from compare import addition
    n = 3
    a, b = _sums(n, 300, 0)
    x, y = module.encode_scratchpad(a, b, n)
    assert x.shape == y.shape == (300, 4 * n + 3) and x.dtype == np.int32
    row = "".join(addition.CHARS[t] for t in x[0]) + addition.CHARS[y[0, -1]]
    assert row.startswith(f"{a[0]:03d}+{b[0]:03d}=")
    answer = np.concatenate([x[:, 2 * n + 2:], y[:, -1:]], axis=1)  # the 2(n+1) answer tokens
    np.testing.assert_array_equal(module.read_answer(answer, n), a + b)
    for av, bv, toks in zip(a.tolist(), b.tolist(), answer):
        carry = 0
        for j in range(n + 1):   # the schoolbook carry into column j, then its digit
            assert toks[2 * j] == carry
            col = (av // 10 ** j % 10) + (bv // 10 ** j % 10) + carry
            assert toks[2 * j + 1] == col % 10
            carry = int(col >= 10)
    keep = y != addition.IGNORE
    assert keep.sum(1).tolist() == [2 * (n + 1)] * 300 and not keep[:, :2 * n + 1].any()
    np.testing.assert_array_equal(y[:, :-1][keep[:, :-1]], x[:, 1:][keep[:, :-1]])


@_versions("addition_scratchpad")
def test_addition_longest_carry_chain_against_a_loop(module):
    for n in (1, 3, 5):
        a, b = _sums(n, 400, n)
        got = module.longest_carry_chain(a, b, n)
        for av, bv, g in zip(a.tolist(), b.tolist(), got):
            carry = run = best = 0
            for j in range(n):
                carry = int((av // 10 ** j % 10) + (bv // 10 ** j % 10) + carry >= 10)
                run = run + 1 if carry else 0
                best = max(best, run)
            assert g == best, (av, bv)
    assert module.longest_carry_chain(np.array([999]), np.array([1]), 3).tolist() == [3]


# ---------------------------------------------------------------------------------------------
# scaling_fits: isoFLOP parabolas, power laws and approach 3's frontier (chapter 27)
# ---------------------------------------------------------------------------------------------

# Chinchilla's published approach-3 fit (Hoffmann et al. 2022, eq. 10): its frontier is known
# in closed form, N_opt ∝ C^(β/(α+β)).
CHINCHILLA_FIT = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def _chinchilla_loss(n, d):
    f = CHINCHILLA_FIT
    return f["E"] + f["A"] / n ** f["alpha"] + f["B"] / d ** f["beta"]


@_versions("scaling_fits")
def test_scaling_fits_optimal_allocation_against_a_scan(module):
    from compare import scaling_laws
    for budget in (1e18, 1e21, 1e24):
        n, d = module.optimal_allocation(budget, **CHINCHILLA_FIT)
        assert 6 * n * d == pytest.approx(budget, rel=1e-9)
        ns = np.geomspace(n / 3, n * 3, 20001)           # the isoFLOP line, finely
        best = ns[np.argmin(_chinchilla_loss(ns, budget / (6 * ns)))]
        assert n == pytest.approx(best, rel=1e-3)
        assert n == pytest.approx(scaling_laws.n_opt_approach3(CHINCHILLA_FIT, budget),
                                  rel=1e-9)


@_versions("scaling_fits")
def test_scaling_fits_recover_the_exponent_from_isoflop_valleys(module):
    f = CHINCHILLA_FIT
    budgets = np.geomspace(1e18, 1e22, 5)
    n_opt = []
    for c in budgets:
        centre = module.optimal_allocation(c, **f)[0]
        ns = centre * np.geomspace(0.5, 2.0, 7)          # a valley around the optimum
        n, loss = module.isoflop_minimum(ns, _chinchilla_loss(ns, c / (6 * ns)))
        assert n == pytest.approx(centre, rel=0.02)
        assert loss == pytest.approx(_chinchilla_loss(centre, c / (6 * centre)), abs=1e-3)
        n_opt.append(n)
    a, k = module.power_law(budgets, np.array(n_opt))
    assert a == pytest.approx(f["beta"] / (f["alpha"] + f["beta"]), abs=0.005)
    assert module.power_law(budgets, 3.0 * budgets ** 0.7) == pytest.approx((0.7, 3.0))
    with pytest.raises(ValueError, match="isoflop_minimum"):
        module.isoflop_minimum(np.array([1e3, 1e4, 1e5]), np.array([1.0, 2.0, 1.5]))


def test_the_suite_tests_the_tracked_skeleton_not_the_learners_copy(tmp_path, monkeypatch):
    """A filled copy in mine/ is what the learner's mode tests; the suite's mode keeps testing
    the tracked skeleton, so a learner's work never turns the suite red."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tiny_trace.py").write_text("# filled in\n")
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "EXERCISES", tmp_path)
    monkeypatch.setattr(here, "LEARNER", False)
    assert learner_file("tiny_trace") == tmp_path / "tiny_trace.py"
    monkeypatch.setattr(here, "LEARNER", True)
    assert learner_file("tiny_trace") == tmp_path / "mine" / "tiny_trace.py"
    assert learner_file("inverse") == tmp_path / "inverse.py"  # no copy yet: the skeleton
