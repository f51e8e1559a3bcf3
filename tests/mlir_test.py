"""Tests for minijax/interpreters/mlir.py: each primitive family lowers to the StableHLO JAX emits.

One program per family runs through `minijax.jit(f).lower(*args).as_text()` and
`jax.jit(f).lower(*args).as_text()`. What legitimately differs is normalized away: SSA names,
locations, attribute spelling and order, and JAX's module and result attributes
(`mhlo.num_partitions`, `jax.result_info`). What is compared: the sequence of op names
(stablehlo, chlo, func), the types of `main`'s arguments and results, and the value and type of
every constant. Lowering only; one test compiles, to check a constant's value on XLA.
Mirrors the intent of JAX's tests/mlir_test.py (lowering checked op by op).
"""

from __future__ import annotations

import re

import jax
import ml_dtypes
import numpy as np
import pytest

import minijax
from minijax import core
from minijax.interpreters import mlir

X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.0
I = np.arange(6, dtype=np.int32).reshape(2, 3)
B = np.array([[True, False, True], [False, True, False]])
IDX = np.array([[0], [1]], np.int32)
ONES = np.ones((2, 3), np.float32)


def _gather_dn(L):
    return L.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))


def _scatter_dn(L):
    return L.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))


# family -> program(L) giving (f, args); L is `jax.lax` or `minijax.lax`
PROGRAMS = {
    # elementwise
    "unary": lambda L: (lambda x: L.tanh(L.log(L.abs(x) + 1.0)), (X,)),
    "binary": lambda L: (lambda x: L.max(L.sub(x, 2.0), L.div(x, 3.0)), (X,)),
    "integer_pow": lambda L: (lambda x: L.integer_pow(x, 3), (X,)),
    "compare_select": lambda L: (lambda x: L.select(L.gt(x, 1.0), x, L.neg(x)), (X,)),
    "integer": lambda L: (lambda i: L.rem(L.mul(i, 3), 4), (I,)),
    "chlo": lambda L: (lambda x: L.atan2(L.erf(x), L.expm1(x) + 2.0), (X,)),
    "convert": lambda L: (lambda x: L.convert_element_type(x, np.int32), (X,)),
    # broadcasting and shapes
    "broadcast_in_dim": lambda L: (lambda x: L.broadcast_in_dim(x, (4, 2, 3), (1, 2)), (X,)),
    "reshape_transpose": lambda L: (lambda x: L.reshape(L.transpose(x, (1, 0)), (6,)), (X,)),
    "slice_pad_concatenate": lambda L: (
        lambda x: L.concatenate([L.slice(x, (0, 1), (2, 3)),
                                 L.pad(x, 0.0, ((0, 0, 0), (1, 0, 0)))], 1), (X,)),
    "rev_iota": lambda L: (
        lambda x: L.rev(x, (1,)) + L.convert_element_type(L.iota(np.int32, 3), np.float32),
        (X,)),
    "dynamic_slice": lambda L: (
        lambda x: L.dynamic_update_slice(x, L.dynamic_slice(x, (0, 1), (2, 2)), (0, 0)), (X,)),
    # reductions
    "reduce_sum": lambda L: (lambda x: L.reduce_sum(x, (1,)), (X,)),
    "reduce_max": lambda L: (lambda x: L.reduce_max(x, (0,)), (X,)),
    # dot_general
    "dot_general": lambda L: (lambda x: L.dot_general(x, x, (((1,), (1,)), ((), ()))), (X,)),
    "dot_general_batched": lambda L: (
        lambda x: L.dot_general(x[None], x[None], (((2,), (2,)), ((0,), (0,)))), (X,)),
    # control flow
    "cond": lambda L: (lambda x: L.cond(L.reduce_sum(x, (0, 1)) > 0, lambda a: a * 2.0,
                                        lambda a: -a, x), (X,)),
    "while": lambda L: (lambda x: L.while_loop(lambda c: c[0] < 3,
                                               lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1],
                        (X,)),
    # gather / scatter
    "gather": lambda L: (lambda x: L.gather(x, IDX, _gather_dn(L), (1, 3)), (X,)),
    "scatter": lambda L: (lambda x: L.scatter(x, IDX, ONES, _scatter_dn(L)), (X,)),
    "scatter_add": lambda L: (lambda x: L.scatter_add(x, IDX, ONES, _scatter_dn(L)), (X,)),
    "gather_fill": lambda L: (lambda x: L.gather(x, IDX, _gather_dn(L), (1, 3), mode="fill",
                                                 fill_value=0.0), (X,)),
    "scatter_add_fill": lambda L: (
        lambda x: L.scatter_add(x, IDX, ONES, _scatter_dn(L), mode="fill"), (X,)),
    # convolution
    "conv": lambda L: (lambda x: L.conv_general_dilated(
        x[None, None], np.ones((1, 1, 2, 2), np.float32), (1, 1), "VALID"), (X,)),
    "conv_padded_dilated": lambda L: (lambda x: L.conv_general_dilated(
        x[None, None], np.ones((2, 1, 2, 2), np.float32), (1, 1), ((1, 1), (0, 1)),
        rhs_dilation=(1, 2)), (X,)),
    # constants (splat and not; bool and bfloat16 buffers)
    "bool_constants": lambda L: (lambda x: L.select(B, x, L.select(np.ones((2, 3), bool), x,
                                                                    x * 2.0)), (X,)),
    "switch": lambda L: (lambda x: L.switch(1, [lambda a: a, lambda a: a * 2.0,
                                                 lambda a: -a], x), (X,)),
    "bf16_constants": lambda L: (
        lambda x: (L.convert_element_type(x, ml_dtypes.bfloat16)
                   * np.array([1, 2, 3.5], ml_dtypes.bfloat16)
                   * np.full((3,), 1.5, ml_dtypes.bfloat16)), (X,)),
}

# Programs whose lowering differs from JAX's today, and why (strict: a fix must remove them).
DIFFERENT = {
    "scan": ("JAX outlines the loop body into private functions (func.call); minijax inlines",
             lambda L: (lambda x: L.scan(lambda c, r: (c + r, c * r),
                                         np.zeros(3, np.float32), x), (X,))),
    "argmax": ("another variadic-reduce comparator than JAX's",
               lambda L: (lambda x: L.argmax(x, 1, np.int32), (X,))),
    "clamp": ("JAX broadcasts scalar bounds before stablehlo.clamp",
              lambda L: (lambda x: L.clamp(0.5, x, 3.0), (X,))),
}


def _ops(text: str) -> list[str]:
    return re.findall(r"\b(?:stablehlo|chlo|func)\.([a-z_]+)", text)


def _signature(text: str) -> tuple[list[str], list[str]]:
    line = next(ln for ln in text.splitlines() if "func.func public @main" in ln)
    args, results = line.split(") -> ", 1)
    types = lambda s: re.findall(r"tensor<[^>]*>", s)
    return types(args), types(results)


def _constants(text: str) -> list[tuple[str, str]]:
    return re.findall(r"stablehlo\.constant dense<(.*?)> : (tensor<[^>]*>)", text)


def _lowered(J, program) -> str:
    f, args = program(J.lax)
    return J.jit(f).lower(*args).as_text()


def _normalized(text: str):
    return _ops(text), _signature(text), _constants(text)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_lowering_matches_jax(name):
    ours, theirs = (_lowered(J, PROGRAMS[name]) for J in (minijax, jax))
    assert _ops(ours), "nothing was lowered"
    assert _normalized(ours) == _normalized(theirs), f"minijax:\n{ours}\nJAX:\n{theirs}"


@pytest.mark.parametrize("name", list(DIFFERENT))
def test_known_lowering_differences(name):
    reason, program = DIFFERENT[name]
    ours, theirs = (_lowered(J, program) for J in (minijax, jax))
    # same function signature, other op sequence
    assert _signature(ours) == _signature(theirs)
    if _ops(ours) == _ops(theirs):
        pytest.fail(f"{name} now lowers as JAX does ({reason}): move it to PROGRAMS")


def test_non_splat_bool_constant_runs_with_its_values():
    # a non-splat bool constant embedded in the module (JAX passes the bool buffer as is)
    f = lambda x: minijax.lax.select(B, x, x * 2.0)
    compiled = minijax.jit(f).lower(ONES).compile()
    np.testing.assert_array_equal(np.asarray(compiled(ONES)), np.where(B, ONES, 2 * ONES))
    np.testing.assert_array_equal(np.asarray(compiled(ONES)),
                                  np.asarray(jax.jit(lambda x: jax.lax.select(B, x, x * 2.0))
                                             (ONES)))


@pytest.mark.parametrize("val", [np.array([True, False, True, False, True, False, True, False,
                                           True]),
                                 np.zeros((0, 3), bool),
                                 np.array([[1.0, 2.5], [3.0, -1.0]], ml_dtypes.bfloat16),
                                 np.full((2, 2), 7, np.int32),
                                 np.float32(np.nan)],
                         ids=["bool9", "bool_empty", "bf16", "i32_splat", "nan_scalar"])
def test_ir_constant_text_matches_jax(val):
    ours = _constants(_lowered(minijax, lambda L: (lambda: val, ())))
    theirs = _constants(_lowered(jax, lambda L: (lambda: val, ())))
    assert ours == theirs


def test_donated_argument_aliases_its_output_as_in_jax():
    texts = [J.jit(lambda x: x * 2.0, donate_argnums=0).lower(X).as_text()
             for J in (minijax, jax)]
    for t in texts:
        assert "tf.aliasing_output = 0 : i32" in next(
            ln for ln in t.splitlines() if "@main" in ln)


def test_missing_lowering_rule_names_the_primitive():
    nolower_p = core.Primitive("nolower")
    nolower_p.def_impl(lambda x: x)
    nolower_p.def_abstract_eval(lambda x: x)
    with pytest.raises(NotImplementedError, match="'nolower'.*chapters/07-jit.md"):
        minijax.jit(nolower_p.bind).lower(X)
    # the failed lowering leaves nothing behind: the next lowering works
    assert "stablehlo.sine" in minijax.jit(minijax.lax.sin).lower(X).as_text()


def test_unregistered_dtype_is_a_type_error():
    mlir._load()
    with mlir.make_ir_context(), mlir.ir.Location.unknown():
        with pytest.raises(TypeError, match="no MLIR type"):
            mlir.dtype_to_ir_type(np.dtype("U3"))
