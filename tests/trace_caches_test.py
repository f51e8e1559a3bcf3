"""What tracing keeps between traces: a primitive's jvp split under `jit`, traced once and
replayed (interpreters/ad.py: `_linearizations`), and its abstract evaluation per signature
(interpreters/partial_eval.py: `abstract_eval`). The replay must give the jaxpr the split gives
when traced afresh, the gradients JAX gives, and stay out of the way where a split on avals
could differ; a bad signature must raise every time."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import minijax
import minijax.numpy as mnp
from minijax.interpreters import ad, partial_eval as pe


def _mlp_loss(J):
    jnp = J.numpy

    def loss(w1, w2, x):
        h = jnp.tanh(jnp.dot(x, w1)) * 0.5 + 1.0
        z = jnp.dot(h, w2)
        z = z - jnp.max(z, axis=-1, keepdims=True)
        return -jnp.mean(z - jnp.log(jnp.sum(jnp.exp(z), axis=-1, keepdims=True)))
    return loss


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((6, 5)).astype(np.float32),
            rng.standard_normal((5, 3)).astype(np.float32),
            rng.standard_normal((4, 6)).astype(np.float32))


def test_replayed_split_gives_the_jaxpr_of_a_fresh_one(monkeypatch):
    f = minijax.jit(minijax.grad(_mlp_loss(minijax), argnums=(0, 1)))
    ad._linearizations.clear()
    cached = str(f.trace(*_args()).jaxpr)
    assert ad._linearizations, "no split was cached under jit"
    replayed = str(minijax.jit(minijax.grad(_mlp_loss(minijax), argnums=(0, 1)))
                   .trace(*_args()).jaxpr)
    monkeypatch.setattr(ad, "_linearization_key", lambda *a: None)
    fresh = str(minijax.jit(minijax.grad(_mlp_loss(minijax), argnums=(0, 1)))
                .trace(*_args()).jaxpr)
    assert cached == replayed == fresh


def test_replayed_split_gives_jax_gradients():
    ad._linearizations.clear()
    for seed in range(3):  # the first traces the splits, the others replay them
        args = _args(seed)
        got = minijax.jit(minijax.grad(_mlp_loss(minijax), argnums=(0, 1)))(*args)
        want = jax.jit(jax.grad(_mlp_loss(jax), argnums=(0, 1)))(*args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_a_split_is_keyed_on_avals_and_params():
    ad._linearizations.clear()
    for shape in ((3,), (4,), (3,)):
        minijax.jit(minijax.grad(lambda x: mnp.sum(mnp.sin(x) * x)))(np.ones(shape, np.float32))
    muls = [k for k in ad._linearizations if k[0].name == "mul"]
    assert sorted(k[3][0].shape for k in muls) == [(3,), (4,)]


def test_no_split_is_cached_outside_jit_or_for_a_param_that_is_not_a_value():
    ad._linearizations.clear()
    minijax.grad(lambda x: mnp.sum(x * x))(np.ones(3, np.float32))  # eager: nothing cached
    assert not ad._linearizations
    assert pe.is_plain((1, ("a", None), np.dtype("float32"), 2.5))
    assert not pe.is_plain((1, lambda: 0)) and not pe.is_plain(np.ones(2))


@pytest.mark.parametrize("x", [np.float32(0.3), np.float32(-1.2)])
def test_replayed_split_of_a_custom_jvp_function(x):
    ad._linearizations.clear()
    f = lambda v: minijax.nn.gelu(v) * minijax.nn.relu(v + 1.0)
    g = lambda v: jax.nn.gelu(v) * jax.nn.relu(v + 1.0)
    for _ in range(2):
        got = minijax.jit(minijax.grad(f))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.jit(jax.grad(g))(x)), rtol=1e-5)


def test_a_scalar_literal_operand_is_keyed_by_its_bits():
    # the split holds the literal: -0.0 and 0.0 compare equal, yet give gradients of
    # different sign, as JAX's do
    ad._linearizations.clear()
    x = np.float32(2.0)
    for c in (0.0, -0.0, 0.0):
        got = minijax.jit(minijax.grad(lambda v, c=c: v * c))(x)
        want = jax.jit(jax.grad(lambda v, c=c: v * c))(x)
        assert np.signbit(np.asarray(got)) == np.signbit(np.asarray(want))
    keys = [k for k in ad._linearizations if k[0].name == "mul"]
    assert len(keys) == 2


def test_abstract_eval_is_looked_up_per_signature_and_errors_are_not_kept():
    pe._abstract_evals.clear()
    x = np.ones((2, 3), np.float32)
    minijax.make_jaxpr(lambda a: a * a + a)(x)
    keys = [k for k in pe._abstract_evals if k[0].name in ("mul", "add")]
    assert sorted(k[0].name for k in keys) == ["add", "mul"]
    for _ in range(2):  # a bad signature raises every time: nothing was kept for it
        with pytest.raises(TypeError, match="add"):
            minijax.make_jaxpr(lambda a, b: minijax.lax.add(a, b))(x, np.ones(3, np.int32))


def test_a_users_primitive_is_asked_every_time():
    from minijax.extend.core import Primitive
    calls = []
    p = Primitive("my_double")
    p.def_impl(lambda x: 2 * x)

    def rule(x):
        calls.append(x)
        return x
    p.def_abstract_eval(rule)
    for _ in range(3):
        minijax.make_jaxpr(p.bind)(np.ones(3, np.float32))
    assert len(calls) == 3


def test_a_rule_swapped_for_another_is_used():
    # the rules are part of the keys: a jvp rule set anew takes effect (sin's linearize rule
    # is set aside, so that its jvp rule is split and cached)
    from minijax.lax import lax as lax_internal
    prim, x = lax_internal.sin_p, np.linspace(0.1, 1.0, 3, dtype=np.float32)
    grad = lambda: minijax.jit(minijax.grad(lambda v: mnp.sum(mnp.sin(v))))(x)
    old_lin, old_jvp = ad.primitive_linearizations.pop(prim), ad.primitive_jvps[prim]
    try:
        ad._linearizations.clear()
        np.testing.assert_allclose(np.asarray(grad()), np.cos(x), rtol=1e-6)
        assert any(k[0] is prim for k in ad._linearizations)
        ad.primitive_jvps[prim] = lambda ps, ts: (minijax.lax.sin(ps[0]), 2.0 * ts[0])
        np.testing.assert_array_equal(np.asarray(grad()), np.full(3, 2.0, np.float32))
    finally:
        ad.primitive_jvps[prim] = old_jvp
        ad.primitive_linearizations[prim] = old_lin
    pe._abstract_evals.clear()
    np.testing.assert_allclose(np.asarray(grad()), np.cos(x), rtol=1e-6)


def test_an_equations_effects_come_with_its_looked_up_abstract_eval():
    # plain params hold no jaxpr, so a primitive without an effectful rule has no effects;
    # an effectful one still gets its own, traced afresh or looked up
    def f(J):
        def fn(x):
            y = J.numpy.sin(x) * 2.0
            J.debug.print("y={}", y)
            return y
        return fn
    x = np.ones(3, np.float32)
    want = sorted(map(str, jax.make_jaxpr(f(jax))(x).effects))
    for _ in range(2):  # the second trace looks every signature up
        jaxpr = minijax.make_jaxpr(f(minijax))(x)
        effects = {e.primitive.name: sorted(map(str, e.effects)) for e in jaxpr.eqns}
        assert effects["sin"] == effects["mul"] == []
        assert sorted(map(str, jaxpr.effects)) == want != []


def test_a_jaxpr_dce_made_is_not_dced_again():
    jaxpr = minijax.make_jaxpr(lambda a, b: (a * 2.0, mnp.sin(b)))(np.ones(3), np.ones(3))
    once, used = pe.dce_closed_jaxpr(jaxpr, used_outputs=[True, False])
    assert used == [True, False] and len(once.jaxpr.eqns) == 1
    again, used_again = pe.dce_closed_jaxpr(once, instantiate=True)
    assert again is once and used_again == [True]
    # asked for fewer outputs, it is DCE'd as any other
    assert not pe.dce_closed_jaxpr(once, used_outputs=[False])[0].jaxpr.eqns


def test_lowerings_share_an_mlir_context_up_to_a_limit(monkeypatch):
    from minijax.interpreters import mlir
    monkeypatch.setattr(mlir, "_shared_context", [None, 0, {}])
    f = minijax.jit(lambda x: mnp.sin(x) * 2.0 + 1.0)
    lowered = [f.lower(np.ones(n, np.float32)) for n in range(1, mlir.CONTEXT_USES + 2)]
    contexts = [lo.compiler_ir().context for lo in lowered]
    assert all(c is contexts[0] for c in contexts[:-1]) and contexts[-1] is not contexts[0]
    # what a context already holds does not change a module's text: the third lowering's,
    # in a context used twice before, is the one a fresh context gives
    monkeypatch.setattr(mlir, "_shared_context", [None, 0, {}])
    fresh = f.lower(np.ones(3, np.float32))
    assert fresh.compiler_ir().context is not contexts[0]
    assert fresh.as_text(debug_info=True) == lowered[2].as_text(debug_info=True)


def test_a_lowering_that_embeds_a_large_constant_gets_the_last_use_of_its_context(
        monkeypatch):
    from minijax.interpreters import mlir
    monkeypatch.setattr(mlir, "_shared_context", [None, 0, {}])
    big = np.arange(1 << 19, dtype=np.float32)  # 2 MiB, held by the context once embedded
    first = mlir.make_ir_context()
    module = minijax.jit(lambda x: x + big).lower(np.ones(big.shape, np.float32)).compiler_ir()
    assert module.context is first  # (2 MiB of constants in it: it is handed out no more)
    assert mlir.make_ir_context() is not first
