"""Tests for minijax/ad_checkpoint.py: checkpoint / remat and its policies, against real JAX.

Values and derivatives are compared with JAX's; the jaxprs are checked for *where* the work
happens: with the default policy the backward `remat2[differentiated=True]` equation recomputes
the primal (its body has `sin`), with `everything_saveable` it does not. Mirrors the remat tests
of JAX's tests/api_test.py.
"""

import collections

import jax
import jax.ad_checkpoint
import numpy as np
import pytest

import minijax
from minijax import core
from minijax.interpreters import partial_eval as pe
from minijax.test_util import check_grads

RNG = np.random.default_rng(1)
X3 = RNG.standard_normal(3).astype(np.float32)
W23 = RNG.standard_normal((2, 3)).astype(np.float32)


def assert_same(got, want, rtol=2e-5, atol=2e-6):
    g_leaves, _ = minijax.tree_util.tree_flatten(got)
    w_leaves, _ = jax.tree_util.tree_flatten(want)
    assert len(g_leaves) == len(w_leaves)
    for g, w in zip(g_leaves, w_leaves):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=rtol, atol=atol)


def check(program, *args):
    got = program(minijax)(*args)
    assert_same(got, program(jax)(*args))
    return got


def _sin2(J):
    return lambda x: J.numpy.sin(J.numpy.sin(x))


def _layer(J):
    """tanh(W @ sin(x)), summed: a dot_general between two elementwise ops."""
    jnp = J.numpy
    return lambda x, w: jnp.tanh(jnp.dot(w, jnp.sin(x))).sum()


POLICIES = {
    "default": lambda J: None,
    "nothing": lambda J: J.checkpoint_policies.nothing_saveable,
    "everything": lambda J: J.checkpoint_policies.everything_saveable,
    "dots": lambda J: J.checkpoint_policies.dots_saveable,
    "dots_no_batch": lambda J: J.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def _remat_eqns(jaxpr, differentiated):
    return [e for e in jaxpr.eqns if e.primitive.name == "remat2"
            and e.params["differentiated"] == differentiated]


def _prim_counts(jaxpr) -> collections.Counter:
    return collections.Counter(e.primitive.name for e in jaxpr.eqns)


# ---------------------------------------------------------------------------------------------
# Values and derivatives against JAX
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", POLICIES)
def test_grads_match_jax(policy):
    def program(J):
        f = J.checkpoint(_layer(J), policy=POLICIES[policy](J))
        return lambda x, w: (f(x, w), J.grad(f, (0, 1))(x, w))
    check(program, X3, W23)


@pytest.mark.parametrize("name,program", [
    ("jvp", lambda J: lambda x: J.jvp(J.checkpoint(_sin2(J)), (x,), (x,))),
    ("linearize", lambda J: lambda x: J.linearize(J.checkpoint(_sin2(J)), x)[1](x * 2)),
    ("vmap", lambda J: J.vmap(J.checkpoint(_sin2(J)))),
    ("vmap_of_grad", lambda J: J.vmap(J.grad(J.checkpoint(_sin2(J))))),
    ("grad_of_vmap", lambda J: J.grad(lambda x: J.vmap(J.checkpoint(_sin2(J)))(x).sum())),
    ("jit_of_grad", lambda J: J.jit(J.grad(lambda x: J.checkpoint(_sin2(J))(x).sum()))),
    ("grad_of_jit", lambda J: J.grad(lambda x: J.jit(J.checkpoint(_sin2(J)))(x).sum())),
    ("grad_of_grad", lambda J: J.vmap(J.grad(J.grad(J.checkpoint(_sin2(J)))))),
    ("nested", lambda J: J.grad(lambda x: J.checkpoint(
        lambda y: J.checkpoint(_sin2(J))(y) * 2.0)(x).sum())),
    ("remat_alias", lambda J: J.grad(lambda x: J.remat(_sin2(J))(x).sum())),
], ids=lambda v: v if isinstance(v, str) else "")
def test_compositions_match_jax(name, program):
    check(program, X3)


def test_pytrees_kwargs_and_static_argnums():
    def program(J):
        jnp = J.numpy

        def f(d, n, scale=1.0):
            return {"out": jnp.sin(d["a"]) ** n * d["b"] * scale}

        g = J.checkpoint(f, static_argnums=(1,))
        return lambda a, b: J.grad(lambda d: g(d, 3, scale=2.0)["out"].sum())(
            {"a": a, "b": b})
    check(program, X3, X3 + 1)


def test_check_grads_order_2():
    f = minijax.checkpoint(lambda x, w: minijax.numpy.tanh(w @ minijax.numpy.sin(x)))
    check_grads(f, (X3, W23), order=2)


# ---------------------------------------------------------------------------------------------
# The jaxprs: what is saved, what is recomputed
# ---------------------------------------------------------------------------------------------

def test_jaxpr_of_checkpoint_matches_jax():
    want = str(jax.make_jaxpr(jax.checkpoint(jax.numpy.sin))(1.0))
    got = str(minijax.make_jaxpr(minijax.checkpoint(minijax.numpy.sin))(1.0))
    assert got == want


@pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])
def test_grad_recomputes_in_the_backward_pass(J):
    jaxpr = J.make_jaxpr(J.grad(J.checkpoint(_sin2(J))))(1.0).jaxpr
    (bwd,) = _remat_eqns(jaxpr, differentiated=True)
    body = _prim_counts(bwd.params["jaxpr"])
    assert body["sin"] == 1 and body["cos"] == 2  # sin x recomputed; both cosines too
    assert _prim_counts(jaxpr)["sin"] == 2  # the forward pass, outside the remat2


@pytest.mark.parametrize("J", [jax, minijax], ids=["jax", "minijax"])
def test_everything_saveable_saves_the_residuals(J):
    f = J.checkpoint(_sin2(J), policy=J.checkpoint_policies.everything_saveable)
    jaxpr = J.make_jaxpr(J.grad(f))(1.0).jaxpr
    (bwd,) = _remat_eqns(jaxpr, differentiated=True)
    body = _prim_counts(bwd.params["jaxpr"])
    assert body["sin"] == 0 and body["cos"] == 0 and body["mul"] == 2
    assert len(bwd.invars) == 3  # two saved cosines and the output cotangent


@pytest.mark.parametrize("policy", ["default", "everything", "dots"])
def test_backward_body_counts_match_jax(policy):
    def counts(J):
        f = J.checkpoint(_layer(J), policy=POLICIES[policy](J))
        jaxpr = J.make_jaxpr(J.grad(f, (0, 1)))(X3, W23).jaxpr
        (bwd,) = _remat_eqns(jaxpr, differentiated=True)
        c = _prim_counts(bwd.params["jaxpr"])
        return {p: c[p] for p in ("sin", "cos", "tanh", "dot_general")}
    assert counts(minijax) == counts(jax)


def _inner_jit_program(J, policy, outer):
    """An inner `jit` (jnp.where's `_where`, a jitted dot) and a sort inside a checkpoint."""
    jnp = J.numpy

    def body(x):
        y = J.jit(lambda v: v @ v.T)(jnp.sin(x))
        z = jnp.where(y > 0, y, 0.0) ** 2 + J.lax.sort(y, dimension=0)
        return jnp.log1p(z * z).sum()
    f = J.checkpoint(body, policy=POLICIES[policy](J))
    return J.grad(f) if outer == "grad" else J.vmap(J.grad(f))


@pytest.mark.parametrize("outer", ["grad", "vmap_grad"])
@pytest.mark.parametrize("policy", POLICIES)
def test_inner_jit_is_split_by_the_policy_as_jax(policy, outer):
    # the policy decides inside the inner jit what its known call returns for the backward
    # pass (JAX's partial_eval_jaxpr_custom rule for jit): the same jaxpr as JAX's, same values
    x = RNG.standard_normal((2, 2, 3) if outer == "vmap_grad" else (2, 3)).astype(np.float32)
    got = minijax.make_jaxpr(_inner_jit_program(minijax, policy, outer))(x)
    assert str(got) == str(jax.make_jaxpr(_inner_jit_program(jax, policy, outer))(x))
    core.check_jaxpr(got.jaxpr)
    check(lambda J: _inner_jit_program(J, policy, outer), x)


@pytest.mark.parametrize("policy", POLICIES)
def test_nested_checkpoint_is_split_by_the_outer_policy_as_jax(policy):
    def program(J):
        jnp = J.numpy
        inner = J.checkpoint(lambda y: jnp.sin(jnp.sin(y)) * y)
        outer = J.checkpoint(lambda y: jnp.cos(inner(y) * 2.0), policy=POLICIES[policy](J))
        return J.grad(lambda x: outer(x).sum())
    got = minijax.make_jaxpr(program(minijax))(X3)
    assert str(got) == str(jax.make_jaxpr(program(jax))(X3))
    check(program, X3)


@pytest.mark.parametrize("policy", ["default", "everything"])
def test_debug_callback_runs_again_in_the_recomputation_as_jax(policy):
    def calls(J):
        seen = []

        def inner(z):
            J.debug.callback(lambda v: seen.append(1), z)
            return J.numpy.sin(z) * z
        f = J.checkpoint(lambda x: (J.jit(inner)(x) ** 2).sum(), policy=POLICIES[policy](J))
        out = J.grad(f)(X3)
        return np.asarray(out), len(seen), str(J.make_jaxpr(J.grad(f))(X3))
    (got, got_n, got_text), (want, want_n, want_text) = calls(minijax), calls(jax)
    np.testing.assert_allclose(got, want, rtol=2e-6)
    assert (got_n, got_text) == (want_n, want_text)


def test_check_jaxpr_after_transformations():
    f = minijax.checkpoint(_layer(minijax))
    xs = np.stack([X3, 2 * X3])
    for fun, args in [(f, (X3, W23)), (minijax.grad(f, (0, 1)), (X3, W23)),
                      (minijax.vmap(f, (0, None)), (xs, W23)),
                      (minijax.vmap(minijax.grad(f), (0, None)), (xs, W23)),
                      (lambda x, w: minijax.jvp(f, (x, w), (x, w)), (X3, W23))]:
        core.check_jaxpr(minijax.make_jaxpr(fun)(*args).jaxpr)


def test_dce_drops_unused_outputs_and_inputs():
    jnp = minijax.numpy
    f = minijax.checkpoint(lambda x, y: (jnp.sin(x), jnp.cos(y)))
    closed = minijax.make_jaxpr(f)(X3, X3)
    jaxpr, used_inputs = pe.dce_jaxpr(closed.jaxpr, [True, False])
    (eqn,) = jaxpr.eqns
    assert used_inputs == [True, False] and len(eqn.invars) == 1 and len(eqn.outvars) == 1
    assert _prim_counts(eqn.params["jaxpr"]) == {"sin": 1}


def test_errors_match_jax():
    for J in (jax, minijax):
        with pytest.raises(TypeError):
            J.checkpoint(jax.numpy.sin, prevent_cse=3)
        with pytest.raises(ValueError):
            J.checkpoint(lambda x, n: x * n, static_argnums=(2,))(1.0, 2)


# ---------------------------------------------------------------------------------------------
# Named values: checkpoint_name, the name-based policies, saved_residuals
# ---------------------------------------------------------------------------------------------

def _named(J):
    jnp, adc = J.numpy, J.ad_checkpoint

    def f(x, w):
        y = adc.checkpoint_name(jnp.sin(x), "y")
        z = adc.checkpoint_name(jnp.dot(w, y), "z")
        return jnp.tanh(z).sum()
    return f


NAME_POLICIES = {
    "only_y": lambda P: P.save_only_these_names("y"),
    "only_y_z": lambda P: P.save_only_these_names("y", "z"),
    "only_none": lambda P: P.save_only_these_names(),
    "all_but_y": lambda P: P.save_any_names_but_these("y"),
    "all_but_none": lambda P: P.save_any_names_but_these(),
    # JAX 0.10.2's body ignores the names: it saves everything, "y" too
    "anything_except_y": lambda P: P.save_anything_except_these_names("y"),
    "both": lambda P: P.save_from_both_policies(P.save_only_these_names("y"), P.dots_saveable),
}


def _residual_lines(J, f, *args):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        J.ad_checkpoint.print_saved_residuals(f, *args)
    # the source locations (" from file:line:column (f)") are compared on their own, in
    # test_print_saved_residuals_names_sources_as_jax
    return [line.split(" from /")[0] for line in buf.getvalue().splitlines()]


@pytest.mark.parametrize("policy", NAME_POLICIES)
def test_name_policies_match_jax(policy):
    def program(J):
        f = J.checkpoint(_named(J), policy=NAME_POLICIES[policy](J.checkpoint_policies))
        return lambda x, w: (f(x, w), J.grad(f, (0, 1))(x, w), J.jit(J.grad(f))(x, w))
    check(program, X3, W23)

    def saved(J):
        f = J.checkpoint(_named(J), policy=NAME_POLICIES[policy](J.checkpoint_policies))
        jaxpr = J.make_jaxpr(J.grad(f, (0, 1)))(X3, W23).jaxpr
        (bwd,) = _remat_eqns(jaxpr, differentiated=True)
        c = _prim_counts(bwd.params["jaxpr"])
        return ({p: c[p] for p in ("sin", "dot_general", "tanh")}, len(bwd.invars),
                _residual_lines(J, f, X3, W23))
    assert saved(minijax) == saved(jax)


def test_checkpoint_name_in_jaxprs_and_transformations():
    def program(J):
        f = _named(J)
        return lambda x, w: (J.vmap(f, (0, None))(np.stack([x, x + 1]), w), J.jvp(
            lambda x: f(x, w), (x,), (x,)), J.ad_checkpoint.checkpoint_name({"a": x}, "n"))
    check(program, X3, W23)
    def sines(J):
        return lambda x: J.numpy.sin(J.ad_checkpoint.checkpoint_name(J.numpy.sin(x), "y")).sum()
    for fun in (sines, lambda J: J.grad(sines(J))):
        want = str(jax.make_jaxpr(fun(jax))(X3))
        got = str(minijax.make_jaxpr(fun(minijax))(X3))
        assert got == want


def test_print_saved_residuals_names_arguments():
    def f(params, x):
        return minijax.numpy.sum(minijax.numpy.sin(params["w"] * x))

    def g(params, x):
        return jax.numpy.sum(jax.numpy.sin(params["w"] * x))
    args = ({"w": X3}, X3)
    assert _residual_lines(minijax, f, *args) == _residual_lines(jax, g, *args)


_SOURCES = """
def g(W, x):
  y = jnp.dot(W, x)
  return jnp.sin(y)

def f(W1, W2, x):
  return g(W2, g(W1, x))

def f2(W1, W2, x):
  return J.checkpoint(g)(W2, J.checkpoint(g)(W1, x))

def f4(W1, W2, x):
  x = J.ad_checkpoint.checkpoint_name(g(W1, x), name='a')
  return J.ad_checkpoint.checkpoint_name(g(W2, x), name='b')

def chain(funs):
  return lambda x: funs[1](funs[0](x))
"""


def test_print_saved_residuals_names_sources_as_jax():
    # each residual computed by the user's code names where: file:line:column (function)
    def program(J):
        import contextlib
        import io
        ns = dict(J=J, jnp=J.numpy)
        exec(compile(_SOURCES, "<cell>", "exec"), ns)
        P = J.checkpoint_policies
        args = J.numpy.ones((5, 4)), J.numpy.ones((6, 5)), J.numpy.ones(4)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            for fun in (ns["f"], ns["f2"], J.checkpoint(ns["f"], policy=P.dots_saveable),
                        J.checkpoint(ns["f4"], policy=P.save_only_these_names("a"))):
                J.ad_checkpoint.print_saved_residuals(fun, *args)
            J.ad_checkpoint.print_saved_residuals(ns["chain"]([J.numpy.sin] * 2), 3.0)
        return buf.getvalue()
    want = program(jax)
    assert "from <cell>:3:6 (g)" in want and "from <cell>:13:6 (f4)" in want
    assert "(chain.<locals>.<lambda>)" in want
    assert program(minijax) == want
