"""`lax.ragged_dot` and `lax.ragged_dot_general` against JAX: values (eager and jit) for random
group sizes (empty groups, sizes summing to less than M), jaxprs, grads, vmap, the CPU lowering
and the error messages. Mirrors the ragged_dot tests of JAX's tests/lax_test.py."""

from __future__ import annotations

import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minijax
from minijax import core
from minijax.public_test_util import check_grads

# Slow (CI runs it, `make test-fast` does not): ragged_dot with its gradients, against JAX.
pytestmark = pytest.mark.slow


def group_sizes(rng, g: int, m: int) -> np.ndarray:
    """Random sizes of g groups: some empty, and a total of at most m (often less)."""
    cuts = np.sort(rng.randint(0, m + 1, size=g))
    sizes = np.diff(np.concatenate([[0], cuts]))
    sizes[rng.rand(g) < 0.25] = 0
    return sizes.astype(np.int32)


def operands(rng, m=7, k=3, n=4, g=3, dtype=np.float32):
    return (rng.randn(m, k).astype(dtype), rng.randn(g, k, n).astype(dtype),
            group_sizes(rng, g, m))


def reference(x, w, gs) -> np.ndarray:
    """The definition: rows of group j meet w[j]; rows past sum(gs) are zero."""
    out = np.zeros((x.shape[0], w.shape[2]), np.float64)
    start = 0
    for j, size in enumerate(gs):
        out[start:start + size] = x[start:start + size].astype(np.float64) @ w[j]
        start += size
    return out


@pytest.mark.parametrize("seed", range(8))
def test_values_match_jax_and_the_definition(seed):
    rng = np.random.RandomState(seed)
    x, w, gs = operands(rng, m=int(rng.randint(1, 12)), g=int(rng.randint(1, 5)))
    want = np.asarray(jax.lax.ragged_dot(x, w, gs))
    np.testing.assert_allclose(want, reference(x, w, gs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(minijax.lax.ragged_dot(x, w, gs), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(minijax.jit(minijax.lax.ragged_dot)(x, w, gs), want,
                               rtol=1e-6, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 9), st.integers(1, 4), st.integers(1, 4),
       st.lists(st.integers(0, 4), min_size=1, max_size=4), st.integers(0, 2**16))
def test_hypothesis_shapes_and_group_sizes(m, k, n, sizes, seed):
    # sizes are cut so that they sum to at most m (the rest of the rows are in no group)
    gs = np.minimum(np.cumsum(sizes), m)
    gs = np.diff(np.concatenate([[0], gs])).astype(np.int32)
    rng = np.random.RandomState(seed)
    x, w = rng.randn(m, k).astype(np.float32), rng.randn(len(gs), k, n).astype(np.float32)
    np.testing.assert_allclose(minijax.lax.ragged_dot(x, w, gs), jax.lax.ragged_dot(x, w, gs),
                               rtol=1e-5, atol=1e-5)


def test_jaxprs_of_every_transformation_type_check():
    x, w, gs = operands(np.random.RandomState(9))
    f = lambda x, w: minijax.lax.ragged_dot(x, w, gs)
    for g in (f, minijax.grad(lambda x, w: f(x, w).sum(), (0, 1)),
              lambda x, w: minijax.jvp(f, (x, w), (x, w)),
              lambda x, w: minijax.vmap(f, (0, None))(x[None], w)):
        core.check_jaxpr(minijax.make_jaxpr(g)(x, w).jaxpr)


def test_empty_groups_and_short_totals_give_zero_rows():
    x, w = np.ones((6, 2), np.float32), np.ones((3, 2, 2), np.float32)
    gs = np.array([0, 2, 1], np.int32)  # rows 3..5 are in no group
    for f in (minijax.lax.ragged_dot, minijax.jit(minijax.lax.ragged_dot)):
        out = np.asarray(f(x, w, gs))
        np.testing.assert_array_equal(out, np.asarray(jax.lax.ragged_dot(x, w, gs)))
        assert (out[3:] == 0).all() and (out[:3] == 2).all()


@pytest.mark.parametrize("dtype,pet", [(np.float32, None), (jjnp.bfloat16, np.float32),
                                       (np.int8, np.int32), (np.float16, np.float32)])
def test_preferred_element_type(dtype, pet):
    rng = np.random.RandomState(1)
    x, w, gs = operands(rng, m=9, g=3)
    x, w = (rng.randint(-4, 4, v.shape).astype(dtype) for v in (x, w))
    want = jax.lax.ragged_dot(x, w, gs, preferred_element_type=pet)
    for f in (minijax.lax.ragged_dot, minijax.jit(minijax.lax.ragged_dot,
                                                  static_argnames="preferred_element_type")):
        got = f(x, w, gs, preferred_element_type=pet)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_grads_with_preferred_element_type_match_jax():
    # the transposes meet an f32 cotangent with bf16 operands: mixed operand dtypes, as JAX
    rng = np.random.RandomState(12)
    x, w, gs = operands(rng, m=8, g=3)
    x, w = x.astype(jjnp.bfloat16), w.astype(jjnp.bfloat16)
    loss = lambda J: lambda x, w: J.lax.ragged_dot(
        x, w, gs, preferred_element_type=np.float32).sum()
    want = jax.grad(loss(jax), (0, 1))(x, w)
    for f in (minijax.grad(loss(minijax), (0, 1)), minijax.jit(minijax.grad(loss(minijax),
                                                                            (0, 1)))):
        for a, b in zip(f(x, w), want):
            assert a.dtype == b.dtype == jjnp.bfloat16
            np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                       rtol=1e-2, atol=1e-2)
    mine, theirs = _jaxprs(lambda J: J.grad(loss(J), (0, 1)), x, w)
    assert mine == theirs


def _jaxprs(f, *args):
    return str(minijax.make_jaxpr(f(minijax))(*args)), str(jax.make_jaxpr(f(jax))(*args))


def test_jaxprs_equal_jax():
    x, w, gs = operands(np.random.RandomState(0))
    programs = [
        lambda J: J.lax.ragged_dot,
        lambda J: lambda x, w, gs: J.lax.ragged_dot(x, w, gs, preferred_element_type=np.float32),
        lambda J: lambda x, w, gs: J.grad(lambda x, w: J.lax.ragged_dot(x, w, gs).sum(),
                                          (0, 1))(x, w),
        lambda J: lambda x, w, gs: J.vjp(lambda x, w: J.lax.ragged_dot(x, w, gs), x, w)[1](
            J.numpy.ones((x.shape[0], w.shape[2]), np.float32)),
    ]
    for f in programs:
        mine, theirs = _jaxprs(f, x, w, gs)
        assert mine == theirs


def test_vmap_jaxpr_equals_jax_when_everything_is_mapped_at_zero():
    rng = np.random.RandomState(2)
    xs = rng.randn(2, 5, 3).astype(np.float32)
    ws = rng.randn(2, 3, 3, 4).astype(np.float32)
    gss = np.stack([group_sizes(rng, 3, 5) for _ in range(2)])
    mine, theirs = _jaxprs(lambda J: J.vmap(J.lax.ragged_dot), xs, ws, gss)
    # JAX's batching rule leaves np.int64 dimension numbers, which print as such
    assert mine == re.sub(r"np\.int64\((\d+)\)", r"\1", theirs)
    np.testing.assert_allclose(minijax.vmap(minijax.lax.ragged_dot)(xs, ws, gss),
                               jax.vmap(jax.lax.ragged_dot)(xs, ws, gss), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("in_axes", [(0, 0, 0), (1, None, None), (None, 3, 1), (0, 1, None)])
def test_vmap_matches_a_loop(in_axes):
    # JAX maps only all-at-0; minijax moves axes and broadcasts unmapped operands
    rng = np.random.RandomState(3)
    x, w, gs = operands(rng, m=6, g=3)
    b = 3
    args = []
    for v, ax, gen in zip((x, w, gs), in_axes,
                          (lambda: rng.randn(*x.shape).astype(np.float32),
                           lambda: rng.randn(*w.shape).astype(np.float32),
                           lambda: group_sizes(rng, 3, 6))):
        args.append(v if ax is None else np.stack([gen() for _ in range(b)], ax))
    got = minijax.vmap(minijax.lax.ragged_dot, in_axes=in_axes)(*args)
    for i in range(b):
        one = [a if ax is None else np.take(a, i, ax) for a, ax in zip(args, in_axes)]
        np.testing.assert_allclose(got[i], jax.lax.ragged_dot(*one), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_grads_match_jax(seed):
    rng = np.random.RandomState(seed)
    x, w, gs = operands(rng, m=8, g=4)
    ct = rng.randn(8, 4).astype(np.float32)
    loss = lambda J: lambda x, w: (J.lax.ragged_dot(x, w, gs) * ct).sum()
    mine = minijax.grad(loss(minijax), (0, 1))(x, w)
    theirs = jax.grad(loss(jax), (0, 1))(x, w)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    jitted = minijax.jit(minijax.grad(loss(minijax), (0, 1)))(x, w)
    for a, b in zip(jitted, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_check_grads():
    rng = np.random.RandomState(4)
    x, w, gs = operands(rng, m=6, g=3, dtype=np.float64)
    with minijax.config.override("jax_enable_x64", True):
        f = lambda x, w: minijax.lax.ragged_dot(x, w, gs)
        check_grads(f, (x, w), order=1, modes=("fwd", "rev"))
        check_grads(f, (x, w), order=2, modes=("fwd",))


RDN = minijax.lax.RaggedDotDimensionNumbers
JRDN = jax.lax.RaggedDotDimensionNumbers


@pytest.mark.parametrize("case", ["batched_noncontracting", "contracting", "batch",
                                  "gs_per_batch"])
def test_ragged_dot_general_modes_match_jax(case):
    rng = np.random.RandomState(5)
    b, m, k, n, g = 2, 6, 5, 3, 3
    if case == "batched_noncontracting":  # [b,m,k] x [g,b,k,n] -> [b,m,n]
        x, w, gs = rng.randn(b, m, k), rng.randn(g, b, k, n), group_sizes(rng, g, m)
        dims = dict(dot_dimension_numbers=(([2], [2]), ([0], [1])), lhs_ragged_dimensions=[1],
                    rhs_group_dimensions=[0])
    elif case == "gs_per_batch":  # group sizes [b, g]
        x, w = rng.randn(b, m, k), rng.randn(g, b, k, n)
        gs = np.stack([group_sizes(rng, g, m) for _ in range(b)])
        dims = dict(dot_dimension_numbers=(([2], [2]), ([0], [1])), lhs_ragged_dimensions=[1],
                    rhs_group_dimensions=[0])
    elif case == "contracting":  # [m,k] x [k,n] -> [g,m,n] (the weight gradient's shape)
        x, w, gs = rng.randn(m, k), rng.randn(k, n), group_sizes(rng, g, k)
        dims = dict(dot_dimension_numbers=(([1], [0]), ([], [])), lhs_ragged_dimensions=[1],
                    rhs_group_dimensions=[])
    else:  # ragged batch: [b,m,k] x [b,k,n] -> [b,m,n]
        x, w, gs = rng.randn(b, m, k), rng.randn(b, k, n), group_sizes(rng, g, b)
        dims = dict(dot_dimension_numbers=(([2], [1]), ([0], [0])), lhs_ragged_dimensions=[0],
                    rhs_group_dimensions=[])
    x, w = x.astype(np.float32), w.astype(np.float32)
    want = jax.lax.ragged_dot_general(x, w, gs, JRDN(**dims))
    got = minijax.lax.ragged_dot_general(x, w, gs, RDN(**dims))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got_jit = minijax.jit(lambda *a: minijax.lax.ragged_dot_general(*a, RDN(**dims)))(x, w, gs)
    np.testing.assert_allclose(got_jit, want, rtol=1e-5, atol=1e-5)
    mine, theirs = _jaxprs(lambda J: lambda *a: J.lax.ragged_dot_general(
        *a, (RDN if J is minijax else JRDN)(**dims)), x, w, gs)
    assert mine == theirs
    if case in ("batched_noncontracting", "gs_per_batch"):
        loss = lambda J, R: lambda x, w: (J.lax.ragged_dot_general(x, w, gs, R(**dims)) ** 2).sum()
        for a, b_ in zip(minijax.grad(loss(minijax, RDN), (0, 1))(x, w),
                         jax.grad(loss(jax, JRDN), (0, 1))(x, w)):
            np.testing.assert_allclose(a, b_, rtol=1e-4, atol=1e-4)


def _op_names(text: str) -> list[str]:
    return [name for name in re.findall(r"(?:\"?)(stablehlo\.\w+)", text)
            if name != "stablehlo.return"]


def test_lowering_emits_the_ops_jax_emits_on_cpu():
    x, w, gs = operands(np.random.RandomState(6))
    mine = _op_names(minijax.jit(minijax.lax.ragged_dot).lower(x, w, gs).as_text())
    theirs = jax.jit(jax.lax.ragged_dot).lower(x, w, gs).as_text()
    # JAX outlines the cumsum of the group sizes as `call @cumsum`; minijax emits it inline
    main, cumsum = theirs.split("func.func private @cumsum")
    assert "call @cumsum" in main and "stablehlo.reduce_window" in cumsum
    k = mine.index("stablehlo.reduce_window")
    assert _op_names(cumsum) == ["stablehlo.constant", "stablehlo.broadcast_in_dim",
                                 "stablehlo.reduce_window", "stablehlo.add"]
    assert mine[k - 2:k + 2] == _op_names(cumsum)
    assert mine[:k - 2] + mine[k + 2:] == _op_names(main)


ERRORS = [
    # (lhs shape, rhs shape, gs shape, gs dtype, dims or None for ragged_dot, JAX's words)
    ((6, 3), (2, 4, 5), (2,), np.int32, None, "dimension"),
    ((6, 3), (2, 3, 5), (3,), np.int32, None, "expected rhs group dimension size to be 3, got 2"),
    ((6, 3), (2, 3, 5), (2,), np.float32, None, "group_sizes.dtype is subtype of np.integer"),
    ((6, 3), (2, 3, 5), (), np.int32, None, "expected rank of group_sizes to be >=1"),
    ((6, 3), (2, 3, 5), (2,), np.int32,
     dict(dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[0],
          rhs_group_dimensions=[]),
     "requires exactly one rhs group dimension when lhs ragged dimension is noncontracting"),
    ((6, 3), (3, 5), (2,), np.int32,
     dict(dot_dimension_numbers=(([1], [0]), ([], [])), lhs_ragged_dimensions=[1],
          rhs_group_dimensions=[0]),
     "requires zero group dimensions in the rhs when lhs ragged dimension is contracting"),
    ((6, 3), (2, 3, 5), (2,), np.int32,
     dict(dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[2],
          rhs_group_dimensions=[0]),
     "requires lhs ragged dimension numbers to be nonnegative and less than the number of axes"),
    ((2, 6, 3), (2, 2, 3, 5), (3, 2), np.int32,
     dict(dot_dimension_numbers=(([2], [2]), ([0], [1])), lhs_ragged_dimensions=[1],
          rhs_group_dimensions=[0]),
     "expected group_sizes to have shape (2, 2), got (3, 2)"),
]


@pytest.mark.parametrize("ls,rs,gshape,gdtype,dims,words", ERRORS)
def test_errors_match_jax_and_leave_no_trace_state(ls, rs, gshape, gdtype, dims, words):
    x, w = np.ones(ls, np.float32), np.ones(rs, np.float32)
    gs = np.ones(gshape, gdtype)
    call = lambda J, R: (lambda: J.lax.ragged_dot(x, w, gs)) if dims is None else (
        lambda: J.lax.ragged_dot_general(x, w, gs, R(**dims)))
    with pytest.raises(TypeError) as theirs:
        call(jax, JRDN)()
    assert words in str(theirs.value)
    for f in (call(minijax, RDN), lambda: minijax.jit(call(minijax, RDN))()):
        with pytest.raises(TypeError) as mine:
            f()
        assert words in str(mine.value) and "ragged_dot_general" in str(mine.value)
        assert core.trace_ctx.trace is core.eval_trace


def test_default_matmul_precision_reaches_ragged_dot_as_in_jax():
    # found on a TPU: under default_matmul_precision("highest") JAX's ragged_dot binds
    # HIGHEST (its TPU lowering carries it in precision_config), so it must here too
    x, w = np.ones((8, 4), np.float32), np.ones((2, 4, 3), np.float32)
    g = np.array([3, 5], np.int32)
    texts = []
    for J in (jax, minijax):
        with J.default_matmul_precision("highest"):
            text = J.jit(J.lax.ragged_dot).trace(x, w, g).lower(
                lowering_platforms=("tpu",)).as_text()
        texts.append([line.split("<{")[1] for line in text.splitlines()
                      if '"chlo.ragged_dot"' in line])
    assert texts[0] == texts[1] and "HIGHEST" in texts[0][0]
