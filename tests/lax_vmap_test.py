"""Batching rules of every minijax.lax primitive: `vmap` against a per-example Python loop (the
stacked results) over several `in_axes`, and against `jax.vmap`; nested vmap; vmap of grad; and
`check_jaxpr` on the jaxprs of batched programs.

Mirrors tests/lax_vmap_test.py in JAX. The op table is in tests/lax_test_util.py.
"""

import zlib

import jax
import numpy as np
import pytest
from lax_test_util import ALL_CASES, F32, Case, assert_close, rand

import minijax
from minijax import core, lax as mlax

B = 7  # the batch size: no argument of the table has a dimension of 7


def _rng(name: str) -> np.random.RandomState:
    return np.random.RandomState(zlib.crc32(name.encode()) + 2)


def _axes_patterns(case: Case):
    """in_axes to try: all leading, all trailing, and one batched argument with the rest
    unbatched (each in turn), or a mix of positions."""
    n = len(case.specs)
    pats = [(0,) * n, (-1,) * n]
    if n >= 2:
        pats += [tuple(0 if j == i else None for j in range(n)) for i in range(n)]
        pats.append(tuple(None if j == 0 else (1 if len(case.specs[j][0]) else 0)
                          for j in range(n)))
    elif len(case.specs[0][0]) >= 1:
        pats.append((1,))
    return pats


def _batched_args(case: Case, in_axes, rng):
    examples = [case.args(rng) for _ in range(B)]
    out = []
    for i, ax in enumerate(in_axes):
        if ax is None:
            out.append(examples[0][i])
        else:
            out.append(np.stack([ex[i] for ex in examples], axis=ax))
    return out


def _example(args, in_axes, b):
    return [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]


def _loop(f, args, in_axes, out_axis=0):
    outs = [np.asarray(f(*_example(args, in_axes, b))) for b in range(B)]
    return np.stack(outs, axis=out_axis)


BATCH_CASES = [c for c in ALL_CASES if c.specs]
PATTERN_PARAMS = [(c, ax) for c in BATCH_CASES for ax in _axes_patterns(c)]


@pytest.mark.parametrize("case,in_axes", PATTERN_PARAMS,
                         ids=[f"{c.name}-{ax}" for c, ax in PATTERN_PARAMS])
def test_vmap_matches_loop(case, in_axes):
    args = _batched_args(case, in_axes, _rng(case.name + str(in_axes)))
    f = lambda *a: case(minijax, *a)
    got = minijax.vmap(f, in_axes=in_axes)(*args)
    assert_close(got, _loop(f, args, in_axes), f"{case.name} {in_axes}", case.tol)


@pytest.mark.parametrize("case", BATCH_CASES, ids=repr)
def test_vmap_matches_jax_vmap(case):
    in_axes = _axes_patterns(case)[-1]  # the most mixed pattern
    args = _batched_args(case, in_axes, _rng(case.name))
    got = minijax.vmap(lambda *a: case(minijax, *a), in_axes=in_axes, out_axes=-1)(*args)
    want = jax.vmap(lambda *a: case(jax, *a), in_axes=in_axes, out_axes=-1)(*args)
    assert_close(got, want, case.name, case.tol)


@pytest.mark.parametrize("case", BATCH_CASES, ids=repr)
def test_vmap_jaxpr_type_checks(case):
    in_axes = _axes_patterns(case)[-1]
    args = _batched_args(case, in_axes, _rng(case.name))
    closed = minijax.make_jaxpr(minijax.vmap(lambda *a: case(minijax, *a), in_axes))(*args)
    core.check_jaxpr(closed.jaxpr)
    assert closed.out_avals[0].shape[0] == B


# ---------------------------------------------------------------------------------------------
# Nested vmap, vmap of grad, vmap of jit
# ---------------------------------------------------------------------------------------------

NESTED = [c for c in BATCH_CASES if c.name in (
    "sin_f32[2, 3]", "add_f32[1, 3][2, 1]", "pow_f32[][2, 3]", "select_n_bool",
    "dot_general_batch", "pad_negative", "concatenate_1", "reduce_max[0, 2]", "argmin_axis1",
    "slice_strided", "broadcast_in_dim_size1", "transpose", "rev[0]", "integer_pow_f32_-2",
    "convert_f32_i32", "squeeze", "reshape_dimensions", "reduce_sum[0, 2]")]


@pytest.mark.parametrize("case", NESTED, ids=repr)
def test_nested_vmap(case):
    rng = _rng(case.name + "nested")
    n = len(case.specs)
    # outer axis: leading on every argument; inner axis: trailing on the first, else unbatched
    inner_axes = tuple(-1 if i == 0 else None for i in range(n))
    examples = [_batched_args(case, inner_axes, rng) for _ in range(3)]
    args = [np.stack([ex[i] for ex in examples]) for i in range(n)]
    f = lambda *a: case(minijax, *a)
    got = minijax.vmap(minijax.vmap(f, in_axes=inner_axes), in_axes=0)(*args)
    want_loop = np.stack([_loop(f, ex, inner_axes) for ex in examples])
    assert_close(got, want_loop, case.name, case.tol)
    want = jax.jit(jax.vmap(jax.vmap(lambda *a: case(jax, *a), in_axes=inner_axes)))(*args)
    assert_close(got, want, case.name, case.tol)
    closed = minijax.make_jaxpr(minijax.vmap(minijax.vmap(f, in_axes=inner_axes)))(*args)
    core.check_jaxpr(closed.jaxpr)


GRAD_CASES = [c for c in NESTED if c.diff and c.prim not in ("argmin", "convert_element_type")]


@pytest.mark.parametrize("case", GRAD_CASES, ids=repr)
def test_vmap_of_grad(case):
    rng = _rng(case.name + "grad")
    in_axes = tuple(0 if i in case.diff else None for i in range(len(case.specs)))
    args = _batched_args(case, in_axes, rng)

    def loss(J, *a):
        out = case(J, *a)
        return J.lax.reduce_sum(out, tuple(range(np.ndim(out))))
    g_mini = minijax.grad(lambda *a: loss(minijax, *a), case.diff)
    got = minijax.vmap(g_mini, in_axes=in_axes)(*args)
    want = jax.jit(jax.vmap(jax.grad(lambda *a: loss(jax, *a), case.diff), in_axes=in_axes))(
        *args)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, case.name, case.tol or 1e-4)
        loop = _loop(lambda *a, k=k: g_mini(*a)[k], args, in_axes)
        assert_close(g, loop, case.name, case.tol or 1e-4)
    closed = minijax.make_jaxpr(minijax.vmap(g_mini, in_axes=in_axes))(*args)
    core.check_jaxpr(closed.jaxpr)
    # and grad of vmap
    closed = minijax.make_jaxpr(minijax.grad(
        lambda *a: mlax.reduce_sum(minijax.vmap(lambda *b: loss(minijax, *b), in_axes)(*a),
                                   (0,)), case.diff))(*args)
    core.check_jaxpr(closed.jaxpr)


def test_vmap_of_jit_and_jit_of_vmap():
    cases = [c for c in NESTED if c.name in ("sin_f32[2, 3]", "dot_general_batch",
                                             "pad_negative", "argmin_axis1")]
    for case in cases:
        in_axes = _axes_patterns(case)[-1]
        args = _batched_args(case, in_axes, _rng(case.name + "jit"))
        f = lambda *a, c=case: c(minijax, *a)
        want = _loop(f, args, in_axes)
        assert_close(minijax.vmap(minijax.jit(f), in_axes)(*args), want, case.name, case.tol)
        assert_close(minijax.jit(minijax.vmap(f, in_axes))(*args), want, case.name, case.tol)


# ---------------------------------------------------------------------------------------------
# Cases the table does not reach
# ---------------------------------------------------------------------------------------------

def test_iota_inside_vmap_is_unbatched():
    x = rand(np.random.RandomState(0), (B, 5), F32)

    def f(J, a):
        return J.lax.add(a, J.lax.convert_element_type(J.lax.iota(np.int32, 5), np.float32))
    got = minijax.vmap(lambda a: f(minijax, a))(x)
    assert_close(got, jax.vmap(lambda a: f(jax, a))(x))
    jaxpr = minijax.make_jaxpr(minijax.vmap(lambda a: f(minijax, a)))(x).jaxpr
    core.check_jaxpr(jaxpr)
    iota_eqn = next(e for e in jaxpr.eqns if e.primitive.name == "iota")
    assert iota_eqn.outvars[0].aval.shape == (5,)


def test_pad_with_batched_padding_value():
    rng = np.random.RandomState(1)
    x, pv = rand(rng, (3, 4), F32), rand(rng, (B,), F32)
    cfg = ((1, -1, 1), (0, 2, 0))
    f = lambda J, a, p: J.lax.pad(a, p, cfg)
    for in_axes, xs in [((None, 0), x), ((0, 0), np.stack([x] * B))]:
        got = minijax.vmap(lambda a, p: f(minijax, a, p), in_axes)(xs, pv)
        assert_close(got, jax.vmap(lambda a, p: f(jax, a, p), in_axes)(xs, pv))
        assert_close(got, _loop(lambda a, p: f(minijax, a, p), [xs, pv], in_axes))


def test_select_n_batched_scalar_predicate():
    rng = np.random.RandomState(2)
    which = rng.rand(B) < 0.5
    a, b = rand(rng, (2, 3), F32), rand(rng, (B, 2, 3), F32)
    f = lambda J, w, x, y: J.lax.select_n(w, x, y)
    for in_axes in [(0, None, 0), (0, None, None), (0, None, 1)]:
        bb = b if in_axes[2] != 1 else np.moveaxis(b, 0, 1)
        bb = bb if in_axes[2] is not None else b[0]
        got = minijax.vmap(lambda *z: f(minijax, *z), in_axes)(which, a, bb)
        assert_close(got, jax.vmap(lambda *z: f(jax, *z), in_axes)(which, a, bb))


def test_dot_general_batched_only_rhs_and_out_axes():
    rng = np.random.RandomState(3)
    x, y = rand(rng, (2, 3, 4), F32), rand(rng, (2, B, 4, 5), F32)
    dn = (((2,), (1,)), ((0,), (0,)))
    f = lambda J, a, b: J.lax.dot_general(a, b, dn)
    for out_axes in [0, 1, -1]:
        got = minijax.vmap(lambda a, b: f(minijax, a, b), (None, 1), out_axes)(x, y)
        want = jax.vmap(lambda a, b: f(jax, a, b), (None, 1), out_axes)(x, y)
        assert_close(got, want, tol=1e-4)
