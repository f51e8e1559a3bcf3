"""Indexing functions (minijax/numpy/indexing.py: take and its modes) against jax.numpy.

One program, two modules: each case is `program(J)` run with `J=jax` and `J=minijax`; values,
shapes, dtypes and weak types must agree (tests/lax_numpy_test_util.py `check`).
"""

import jax
import numpy as np
import pytest
from lax_numpy_test_util import (
    A3,
    A,
    B,
    I,
    assert_same,
    check,
    check_grad,
    check_jit_and_vmap,
    check_raises,
    jnp,
)

import minijax

# Slow (CI runs it, `make test-fast` does not): indexing under every transformation.
pytestmark = pytest.mark.slow

CASES = {
    "take": lambda J: jnp(J).take(A, np.array([2, 0, -1, 7])),
    "take_axis": lambda J: jnp(J).take(A3, np.array([[0, 3], [1, 1]]), axis=2),
    "take_clip": lambda J: jnp(J).take(A, np.array([5, -7]), axis=0, mode="clip"),
    "take_wrap": lambda J: jnp(J).take(A, np.array([5, -7]), axis=1, mode="wrap"),
    "take_fill_int": lambda J: jnp(J).take(I, np.array([1, 20]), axis=1),
    "take_fill_value": lambda J: jnp(J).take(I, np.array([1, 20]), axis=1, fill_value=-1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name):
    check(CASES[name], rtol=2e-5, atol=2e-6)


GRADS = {
    "take": (lambda J, x: (jnp(J).take(x, np.array([1, 1, 4]), axis=1) ** 2).sum(), A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_against_jax(name):
    check_grad(*GRADS[name])


# under minijax.jit (traced input) and minijax.vmap (over a leading batch axis)
JIT_VMAP = {
 "take": lambda J, x: jnp(J).take(x, np.array([0, 2, 9]), axis=1),
}


@pytest.mark.parametrize("name", sorted(JIT_VMAP))
def test_jit_and_vmap(name):
    check_jit_and_vmap(JIT_VMAP[name])


# ---------------------------------------------------------------------------------------------
# Out-of-bounds indices: updates are dropped, reads clamp (or fill), each mode as JAX documents
# ---------------------------------------------------------------------------------------------

X5 = np.arange(5, dtype=np.float32)
IDX_OOB = np.array([1, 7, -9, -2, 5])
TAL_IDX = np.array([[0, 9, -1], [2, -5, 1], [3, 3, 4]])

OOB = {
    f"{op}_{name}": (lambda J, op=op, i=i: getattr(J.numpy.asarray(A).at[i], op)(2.5))
    for op in ("set", "add", "multiply", "min", "max")
    for name, i in (("row", 3), ("row_neg", -4), ("elem", (1, 4)), ("elem_neg", (-1, -5)),
                    ("array", (IDX_OOB[:3] % 3, np.array([0, 9, -2]))),
                    ("slice", (7, slice(1, 3))))
}
OOB.update({
    "set_mode_clip": lambda J: J.numpy.asarray(X5).at[IDX_OOB].set(-1.0, mode="clip"),
    "set_mode_drop": lambda J: J.numpy.asarray(X5).at[IDX_OOB].set(-1.0, mode="drop"),
    "set_mode_fill": lambda J: J.numpy.asarray(X5).at[9].set(-1.0, mode="fill"),
    "add_mode_clip_scalar": lambda J: J.numpy.asarray(X5).at[-9].add(10.0, mode="clip"),
    "set_promise_in_bounds": lambda J: J.numpy.asarray(X5).at[3].set(
        7.0, mode="promise_in_bounds"),
    "add_repeated_oob": lambda J: J.numpy.asarray(X5).at[np.array([1, 1, 8, 8])].add(1.0),
    "set_int_oob": lambda J: J.numpy.asarray(I).at[5, 1].set(100),
    "read_int_oob": lambda J: J.numpy.asarray(A)[7],
    "read_int_oob_neg": lambda J: J.numpy.asarray(A)[-9, 1],
    "read_array_oob": lambda J: J.numpy.asarray(X5)[IDX_OOB],
    "get_fill": lambda J: J.numpy.asarray(X5).at[IDX_OOB].get(mode="fill", fill_value=-3.0),
    "get_fill_default_nan": lambda J: J.numpy.asarray(X5).at[8].get(mode="fill"),
    "get_fill_int": lambda J: J.numpy.asarray(I).at[1, 6].get(mode="fill"),
    "get_clip": lambda J: J.numpy.asarray(X5).at[IDX_OOB].get(mode="clip"),
    "take_along_axis_oob": lambda J: J.numpy.take_along_axis(A[:, :3], TAL_IDX, axis=1),
    "take_along_axis_fill": lambda J: J.numpy.take_along_axis(A[:, :3], TAL_IDX, axis=0,
                                                              mode="fill", fill_value=7.0),
    "take_along_axis_clip": lambda J: J.numpy.take_along_axis(A[:, :3], TAL_IDX, axis=1,
                                                              mode="clip"),
    "take_along_axis_int": lambda J: J.numpy.take_along_axis(I[:, :3], TAL_IDX, axis=1),
    "take_along_axis_bool": lambda J: J.numpy.take_along_axis(B[:, :3], TAL_IDX, axis=1),
    "take_along_axis_none": lambda J: J.numpy.take_along_axis(A, np.array([0, 11, 12, -1]),
                                                              axis=None),
    "take_along_axis_broadcast": lambda J: J.numpy.take_along_axis(A[:1], TAL_IDX, axis=1),
    "take_fill_default_nan": lambda J: J.numpy.take(A, np.array([0, 12, -13])),
    "take_mode_fill_value": lambda J: J.numpy.take(I, np.array([1, 9]), axis=1, mode="fill",
                                                   fill_value=-7),
})


@pytest.mark.parametrize("name", sorted(OOB))
def test_out_of_bounds(name):
    check(OOB[name])


def test_out_of_bounds_traced_indices():
    def program(J):
        x = J.numpy.asarray(X5)
        upd = J.jit(lambda i: (x.at[i].set(9.0), x.at[i].add(1.0), x[i],
                               x.at[i].get(mode="fill", fill_value=-1.0)))
        return [upd(i) for i in (np.int32(2), np.int32(7), np.int32(-2), np.int32(-8))]
    assert_same(program(minijax), program(jax))


def test_out_of_bounds_vmap_and_grad():
    def program(J):
        x = J.numpy.asarray(X5)
        batched = J.vmap(lambda i: x.at[i].set(9.0))(np.array([1, 7, -1, -8]))
        g = J.grad(lambda v: (x.at[np.array([1, 9, -7])].set(v) ** 2).sum())(np.float32(3.0))
        g_tal = J.grad(lambda a: J.numpy.take_along_axis(a, TAL_IDX, axis=1,
                                                         mode="fill", fill_value=0.0).sum())(
            A[:, :3])
        return batched, g, g_tal
    assert_same(program(minijax), program(jax))


def test_index_mode_errors():
    check_raises(lambda J: J.numpy.take_along_axis(A, np.array([0.5, 1.0]), axis=None))
    check_raises(lambda J: J.numpy.take_along_axis(A, np.array([0, 1]), axis=1))
    check_raises(lambda J: J.numpy.take_along_axis(A, np.array([[0]]), axis=1, mode="wrong"))


# boolean masks: a shape that does not match the axes it covers is JAX's IndexError (same
# message); a matching mask, or one of size 0 along an axis, selects as in JAX
X234 = np.arange(24.0).reshape(2, 3, 4)
MASKS = {
    "leading_too_long": (np.array([True, False, True]),),
    "second_axis": (slice(None), np.array([True, False])),
    "after_ellipsis": (Ellipsis, np.array([True, False, True])),
    "after_ellipsis_ok": (Ellipsis, np.array([True, False, True, True])),
    "after_newaxis_2d": (None, np.ones((2, 2), bool)),
    "2d_ok": (np.ones((2, 3), bool),),
    "after_int_2d_ok": (0, np.ones((3, 4), bool)),
    "after_int_and_ellipsis": (0, Ellipsis, np.ones((4, 4), bool)),
    "empty_ok": (np.zeros((0,), bool),),
    "list_after_int": (1, [True, False, True, False]),
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_boolean_mask_shapes_as_jax(name):
    index = MASKS[name]
    try:
        want = jax.numpy.asarray(X234)[index]
    except IndexError as e:
        with pytest.raises(IndexError) as got:
            minijax.numpy.asarray(X234)[index]
        assert str(got.value) == str(e)
        with pytest.raises(IndexError):
            minijax.numpy.asarray(X234).at[index].set(0.0)
    else:
        assert_same(minijax.numpy.asarray(X234)[index], want)


# jax.ops: the segment reductions (ids out of range and negative ids dropped, empty segments
# hold the identity, bucket_size, num_segments inferred from concrete ids), under jit and grad
SEG_DATA = np.arange(12, dtype=np.float32).reshape(6, 2) - 3.5
SEG_IDS = np.array([0, 0, 2, 1, -1, 7])


@pytest.mark.parametrize("name", ["segment_sum", "segment_prod", "segment_max", "segment_min"])
@pytest.mark.parametrize("kw", [{"num_segments": 4}, {"num_segments": 3},
                                {"num_segments": 4, "bucket_size": 2},
                                {"num_segments": 4, "indices_are_sorted": True}])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_segment_reductions_as_jax(name, kw, dtype):
    ids = np.sort(SEG_IDS) if kw.get("indices_are_sorted") else SEG_IDS
    check(lambda J: getattr(J.ops, name)(SEG_DATA.astype(dtype), ids, **kw))
    check(lambda J: J.jit(lambda d, i: getattr(J.ops, name)(d, i, **kw))(
        SEG_DATA.astype(dtype), ids))


def test_segment_reductions_infer_num_segments_and_differentiate_as_jax():
    ids = np.array([0, 0, 2, 1, 1, 3])
    inferred = lambda J: [getattr(J.ops, n)(SEG_DATA, ids) for n in
                          ("segment_sum", "segment_prod", "segment_max", "segment_min")]
    assert_same(inferred(minijax), inferred(jax))  # eagerly: the ids must be concrete
    check(lambda J: J.grad(lambda d: (J.ops.segment_sum(d, ids, 4) ** 2).sum())(SEG_DATA))
    for J in (jax, minijax):
        with pytest.raises(ValueError, match="num_segments must be non-negative"):
            J.ops.segment_sum(SEG_DATA, ids, -1)


@pytest.mark.parametrize("op", ["segment_max", "segment_min"])
def test_segment_max_and_min_differentiate_as_jax(op):
    # scatter-max/-min's JVP (JAX's rule): ties share the tangent, the operand's initial
    # value (the identity) included; ids out of range dropped; jvp, grad, under jit and vmap
    data = np.array([2.0, 2.0, 1.0, 5.0, -1.0, 7.0, 3.0], np.float32)
    ids = np.array([0, 0, 1, 1, 2, 2, 9])
    tangent = np.arange(1.0, 8.0, dtype=np.float32)
    seg = lambda J, d: getattr(J.ops, op)(d, ids, 4)
    check(lambda J: J.jvp(lambda d: seg(J, d), (data,), (tangent,)))
    check(lambda J: J.grad(lambda d: (seg(J, d)[:3] ** 2).sum())(data))
    check(lambda J: J.jit(J.vmap(J.grad(lambda d: seg(J, d)[:3].sum())))(
        np.stack([data, -data])))
    check(lambda J: J.grad(lambda z, u: z.at[ids % 3].max(u).sum() * 2
                           + z.at[ids % 3].min(u).sum(), (0, 1))(
        np.array([2.0, 0.0, 9.0], np.float32), data))


def test_traced_boolean_mask_raises_jaxs_non_concrete_error():
    for J in (jax, minijax):
        with pytest.raises(J.errors.NonConcreteBooleanIndexError) as e:
            J.jit(lambda x: x[x < 0])(np.arange(-2.0, 2.0))
        assert isinstance(e.value, IndexError)
