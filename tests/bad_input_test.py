"""Bad inputs to every public entry point raise the exception JAX raises, and leave no trace.

Each case is `program(J)`, run with `J=jax` and `J=minijax`: both must raise, minijax's
exception must be of JAX's kind (the same `jax.errors` class name where JAX raises one of its own,
else the same builtin class: TypeError, ValueError, IndexError...), no internal KeyError or
IndexError may escape where JAX raises something else, and afterwards the trace state is clean
and a normal call works. Issue 18 ("No internal KeyError/IndexError may reach a user").
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import minijax
from minijax import core

X = np.arange(6, dtype=np.float32).reshape(2, 3)
V = np.arange(3, dtype=np.float32)
W = np.arange(4, dtype=np.float32)
IDX = np.array([[0], [1]], np.int32)


def _gen(x):
    yield x


# entry point -> {case name: program(J)}
CASES = {
    "jit": {
        "not_callable": lambda J: J.jit(3),
        "string_argument": lambda J: J.jit(lambda x: x)("abc"),
        "object_array_argument": lambda J: J.jit(lambda x: x)(np.array([object()])),
        "returns_a_string": lambda J: J.jit(lambda x: "abc")(V),
        "unhashable_static_argument": lambda J: J.jit(lambda x, n: x, static_argnums=1)(V, [1]),
        "shape_mismatch_inside": lambda J: J.jit(lambda x, y: x + y)(V, W),
        "too_many_arguments": lambda J: J.jit(lambda x: x)(V, V),
        "non_native_byte_order": lambda J: J.jit(lambda x: x * 2.0)(V.astype(">f4")),
    },
    "grad": {
        "not_callable": lambda J: J.grad(3)(V),
        "integer_input": lambda J: J.grad(lambda x: x * 2)(3),
        "vector_output": lambda J: J.grad(lambda x: x * 2.0)(V),
        "integer_output": lambda J: J.grad(lambda x: J.numpy.int32(1))(1.0),
        "argnums_out_of_range": lambda J: J.grad(lambda x: x.sum(), argnums=2)(V),
        "string_argument": lambda J: J.grad(lambda x: x)("abc"),
        "has_aux_not_a_pair": lambda J: J.grad(lambda x: x.sum(), has_aux=True)(V),
        "non_native_byte_order": lambda J: J.grad(lambda x: (x * x).sum())(V.astype(">f4")),
        "bool_of_traced_value": lambda J: J.grad(lambda x: x if x.sum() > 0 else -x)(V),
    },
    "vmap": {
        "in_axes_out_of_range": lambda J: J.vmap(lambda x: x, in_axes=2)(V),
        "mismatched_sizes": lambda J: J.vmap(lambda x, y: x + y)(V, W),
        "in_axes_wrong_length": lambda J: J.vmap(lambda x, y: x, in_axes=(0, 0, 0))(V, V),
        "in_axes_not_int": lambda J: J.vmap(lambda x: x, in_axes=1.5)(V),
        "scalar_argument_mapped": lambda J: J.vmap(lambda x: x)(1.0),
        "no_arguments": lambda J: J.vmap(lambda: 1.0)(),
        "out_axes_out_of_range": lambda J: J.vmap(lambda x: x, out_axes=3)(V),
        "all_in_axes_none": lambda J: J.vmap(lambda x: x, in_axes=None)(V),
    },
    "jvp": {
        "tangent_dtype_mismatch": lambda J: J.jvp(lambda x: x, (V,), (V.astype(np.int32),)),
        "tangent_shape_mismatch": lambda J: J.jvp(lambda x: x, (V,), (W,)),
        "primals_not_a_tuple": lambda J: J.jvp(lambda x: x, V, V),
        "tree_mismatch": lambda J: J.jvp(lambda x, y: x, (V, V), (V,)),
    },
    "vjp": {
        "cotangent_shape_mismatch": lambda J: J.vjp(lambda x: x * 2.0, V)[1](W),
        "cotangent_tree_mismatch": lambda J: J.vjp(lambda x: x * 2.0, V)[1]((V, V)),
        "string_argument": lambda J: J.vjp(lambda x: x, "abc"),
    },
    "make_jaxpr": {
        "not_callable": lambda J: J.make_jaxpr(3)(V),
        "string_argument": lambda J: J.make_jaxpr(lambda x: x)("abc"),
        "bool_of_traced_value": lambda J: J.make_jaxpr(lambda x: 1.0 if x > 0 else 0.0)(1.0),
        "index_with_traced_float": lambda J: J.make_jaxpr(lambda x: [1, 2][x])(1.0),
        "int_of_traced_vector": lambda J: J.make_jaxpr(lambda x: int(x))(V),
        "bool_of_traced_vector": lambda J: J.make_jaxpr(lambda x: bool(x))(V),
        "item_of_traced_value": lambda J: J.jit(lambda x: x.item())(V[0]),
        "tolist_of_traced_value": lambda J: J.jit(lambda x: x.tolist())(V),
    },
    "lax": {
        "add_shape_mismatch": lambda J: J.lax.add(V, W),
        "add_rank_mismatch": lambda J: J.lax.add(V, X),
        "dot_general_contracting_mismatch": lambda J: J.lax.dot_general(
            X, X, (((1,), (1,)), ((0,), (1,)))),
        "reduce_sum_axis_out_of_range": lambda J: J.lax.reduce_sum(X, (2,)),
        "broadcast_in_dim_bad_dims": lambda J: J.lax.broadcast_in_dim(V, (2, 4), (1,)),
        "broadcast_in_dim_wrong_rank": lambda J: J.lax.broadcast_in_dim(X, (2, 3), (0,)),
        "transpose_bad_permutation": lambda J: J.lax.transpose(X, (0, 0)),
        "transpose_wrong_rank": lambda J: J.lax.transpose(X, (0,)),
        "concatenate_mismatch": lambda J: J.lax.concatenate([X, V], 0),
        "slice_out_of_bounds": lambda J: J.lax.slice(X, (0, 0), (3, 3)),
        # traced: JAX's eager path fails inside its own helpers here (a ValueError of safe_map)
        "slice_wrong_rank": lambda J: J.make_jaxpr(lambda x: J.lax.slice(x, (0,), (1,)))(X),
        "dynamic_slice_wrong_index_count": lambda J: J.lax.dynamic_slice(X, (0,), (1, 1)),
        "dynamic_slice_size_too_big": lambda J: J.lax.dynamic_slice(X, (0, 0), (3, 3)),
        "pad_wrong_config_length": lambda J: J.lax.pad(X, 0.0, ((0, 0, 0),)),
        "conv_wrong_rank": lambda J: J.lax.conv_general_dilated(
            X, np.ones((1, 1, 2, 2), np.float32), (1, 1), "VALID"),
        "gather_bad_dimension_numbers": lambda J: J.lax.gather(
            X, IDX, J.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(5,),
                                                 start_index_map=(0,)), (1, 3)),
        "select_shape_mismatch": lambda J: J.lax.select(V > 0, V, W),
        "rev_dimension_out_of_range": lambda J: J.lax.rev(X, (2,)),
        "cond_branch_types_differ": lambda J: J.lax.cond(True, lambda: V, lambda: W),
        "scan_length_mismatch": lambda J: J.lax.scan(lambda c, x: (c, x), 0.0, V, length=5),
        "while_cond_not_bool": lambda J: J.lax.while_loop(lambda c: c, lambda c: c, 1.0),
        "fori_loop_bounds_types": lambda J: J.lax.fori_loop(0, np.float32(3.0),
                                                            lambda i, c: c, 0.0),
        "conv_strides_length": lambda J: J.lax.conv_general_dilated(
            X[None, None], np.ones((1, 1, 2, 2), np.float32), (1,), "VALID"),
        "conv_feature_mismatch": lambda J: J.lax.conv_general_dilated(
            X[None, None], np.ones((1, 2, 2, 2), np.float32), (1, 1), "VALID"),
        "expand_dims_out_of_range": lambda J: J.lax.expand_dims(X, (5,)),
        "squeeze_out_of_range": lambda J: J.lax.squeeze(X[None], (4,)),
        "cumsum_axis_out_of_range": lambda J: J.lax.cumsum(X, 4),
        "sort_dimension_out_of_range": lambda J: J.lax.sort(X, dimension=3),
        "top_k_axis_out_of_range": lambda J: J.lax.top_k(X, 1, axis=3),
        "argmax_axis_out_of_range": lambda J: J.lax.argmax(X, 3, np.int32),
        "convert_to_string_dtype": lambda J: J.lax.convert_element_type(X, np.str_),
        "iota_float_size": lambda J: J.lax.iota(np.int32, 2.5),
        "sort_num_keys_too_many": lambda J: J.lax.sort((V, V), num_keys=3),
        "sort_num_keys_zero": lambda J: J.lax.sort((V, V), num_keys=0),
        "sort_num_keys_a_float": lambda J: J.lax.sort((V, V), num_keys=1.5),
    },
    "numpy": {
        "sum_axis_out_of_range": lambda J: J.numpy.sum(X, axis=5),
        "reshape_wrong_size": lambda J: J.numpy.reshape(J.numpy.asarray(X), (4, 2)),
        "reshape_two_unknown_sizes": lambda J: J.numpy.reshape(J.numpy.asarray(X), (-1, -1)),
        "transpose_bad_axes": lambda J: J.numpy.transpose(X, (0, 2)),
        "concatenate_mismatch": lambda J: J.numpy.concatenate([X, V]),
        "matmul_mismatch": lambda J: J.numpy.matmul(X, X),
        "squeeze_non_unit_axis": lambda J: J.numpy.squeeze(X, axis=0),
        "expand_dims_axis_out_of_range": lambda J: J.numpy.expand_dims(X, 5),
        "moveaxis_out_of_range": lambda J: J.numpy.moveaxis(X, 3, 0),
        "stack_mismatch": lambda J: J.numpy.stack([V, W]),
        "split_uneven": lambda J: J.numpy.split(V, 2),
        "argmax_axis_out_of_range": lambda J: J.numpy.argmax(X, axis=4),
        "too_many_indices": lambda J: J.numpy.asarray(X)[0, 0, 0],
        "broadcast_to_incompatible": lambda J: J.numpy.broadcast_to(V, (4,)),
        "negative_dimension": lambda J: J.numpy.zeros((-1, 2)),
        "einsum_bad_subscripts": lambda J: J.numpy.einsum("ij,jk->ik", X, X),
        "where_shape_mismatch": lambda J: J.numpy.where(V > 0, V, W),
        "string_argument": lambda J: J.numpy.sin("abc"),
        "non_native_byte_order": lambda J: J.numpy.asarray(V.astype(">f4")),
        "non_native_dtype_argument": lambda J: J.numpy.zeros(3, ">f4"),
        "astype_unknown_dtype": lambda J: J.numpy.asarray(V).astype("not_a_dtype"),
        "astype_to_an_array": lambda J: J.numpy.astype(J.numpy.asarray(V), J.numpy.ones(3)),
        "zeros_dtype_an_array": lambda J: J.numpy.zeros(3, J.numpy.ones(3, np.int32)),
        "matvec_one_dim_matrix": lambda J: J.numpy.matvec(V, V),
        "matvec_scalar_vector": lambda J: J.numpy.matvec(X, np.float32(1.0)),
        "vecmat_one_dim_matrix": lambda J: J.numpy.vecmat(V, V),
    },
    # a size that is not an integer is refused, never truncated (core.canonicalize_shape)
    "shapes": {
        "zeros_float_size": lambda J: J.numpy.zeros((2.7,)),
        "zeros_float_scalar": lambda J: J.numpy.zeros(2.0),
        "zeros_numpy_float": lambda J: J.numpy.zeros((np.float32(2.0), 3)),
        "zeros_string_size": lambda J: J.numpy.zeros(("3",)),
        "ones_float_size": lambda J: J.numpy.ones((2.7,)),
        "full_float_size": lambda J: J.numpy.full((2.7,), 1.0),
        "empty_float_size": lambda J: J.numpy.empty((2.7,)),
        "zeros_like_float_shape": lambda J: J.numpy.zeros_like(V, shape=(2.5,)),
        "reshape_float_size": lambda J: J.numpy.reshape(J.numpy.asarray(X), (3.0, 2)),
        "reshape_method_float": lambda J: J.numpy.asarray(X).reshape(3.0, 2),
        "broadcast_to_float": lambda J: J.numpy.broadcast_to(1.0, (2.5,)),
        "tile_float_reps": lambda J: J.numpy.tile(V, (2.0,)),
        "resize_float_size": lambda J: J.numpy.resize(V, (2.5,)),
        "indices_float_size": lambda J: J.numpy.indices((2.5,)),
        "split_float_indices": lambda J: J.numpy.split(V, [1.5]),
        "eye_float_size": lambda J: J.numpy.eye(2.5),
        "lax_full_float": lambda J: J.lax.full((2.5,), 1.0),
        "lax_reshape_float": lambda J: J.lax.reshape(V, (3.0,)),
        "lax_broadcast_in_dim_float": lambda J: J.lax.broadcast_in_dim(V, (2.0, 3), (1,)),
        "random_normal_float": lambda J: J.random.normal(J.random.key(0), (2.5,)),
        "random_split_float": lambda J: J.random.split(J.random.key(0), 2.5),
        "traced_size": lambda J: J.jit(lambda n: J.numpy.zeros((n,)))(3),
    },
    "random": {
        "choice_of_a_tuple": lambda J: J.random.choice(J.random.key(0), (3,)),
        "rayleigh_without_scale": lambda J: J.random.rayleigh(J.random.key(0)),
        "normal_dtype_an_array": lambda J: J.random.normal(J.random.key(0), (2,),
                                                           J.numpy.ones(2)),
    },
}

_PARAMS = [(entry, name) for entry, cases in CASES.items() for name in cases]


def _jax_error_class(e: BaseException) -> type | None:
    """The `jax.errors` class `e` is an instance of (the most specific), if any."""
    for cls in type(e).__mro__:
        if cls.__name__ in dir(jax.errors) and cls.__name__ not in ("JAXTypeError",
                                                                     "JAXIndexError"):
            return cls
    return None


def _same_kind(ours: BaseException, theirs: BaseException) -> bool:
    """A JAX error class: minijax's exception has a class of that name in its MRO. Otherwise:
    it is an instance of the builtin class JAX's is (TypeError, ValueError, IndexError...)."""
    jax_cls = _jax_error_class(theirs)
    if jax_cls is not None:
        return jax_cls.__name__ in [c.__name__ for c in type(ours).__mro__]
    builtin = next(c for c in type(theirs).__mro__ if c.__module__ == "builtins")
    return isinstance(ours, builtin)


def _raised(program, J) -> BaseException:
    try:
        program(J)
    except Exception as e:  # the test is about which exception
        return e
    raise AssertionError(f"{J.__name__} raised nothing")


def _normal_call_works():
    out = minijax.jit(lambda x: minijax.numpy.sin(x) * 2.0)(V)
    np.testing.assert_allclose(np.asarray(out), np.sin(V) * 2.0, rtol=1e-6)
    g = minijax.grad(lambda x: (x * x).sum())(V)
    np.testing.assert_allclose(np.asarray(g), 2 * V, rtol=1e-6)


@pytest.mark.parametrize("entry,name", _PARAMS, ids=[f"{e}-{n}" for e, n in _PARAMS])
def test_bad_input_raises_as_jax(entry, name):
    program = CASES[entry][name]
    theirs = _raised(program, jax)
    # JAX's eager primitive cache keys on params, where (2.0, 3) == (2, 3): a refused float
    # shape would otherwise be served to the next caller of that shape in this process
    jax.clear_caches()
    ours = _raised(program, minijax)
    assert core.current_trace() is core.eval_trace, "a failed call left a trace current"
    assert _same_kind(ours, theirs), (f"minijax raised {type(ours).__name__}: {ours}\n"
                                      f"JAX raised {type(theirs).__name__}: {theirs}")
    if type(ours) in (KeyError, IndexError) and not isinstance(theirs, type(ours)):
        pytest.fail(f"an internal {type(ours).__name__} reached the user: {ours}")
    assert str(ours), "the error says nothing"
    _normal_call_works()


def test_kind_comparison():
    # a JAX error class is compared by name, a builtin by class (subclasses count)
    assert _same_kind(minijax.errors.TracerBoolConversionError("x"),
                      jax.errors.TracerBoolConversionError.__new__(
                          jax.errors.TracerBoolConversionError))
    assert not _same_kind(minijax.errors.ConcretizationTypeError("x"),
                          jax.errors.TracerBoolConversionError.__new__(
                              jax.errors.TracerBoolConversionError))
    assert _same_kind(np.exceptions.AxisError("x"), IndexError("y"))
    assert not _same_kind(TypeError("x"), ValueError("y"))
