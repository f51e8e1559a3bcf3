"""Lowering per platform (minijax/interpreters/mlir.py: register_lowering(platform=),
lower_per_platform): `jit(f).trace(*args).lower(lowering_platforms=...)` against JAX's.

CI has no TPU, so the TPU rules are checked here, on a CPU, against the text JAX itself emits
for `lowering_platforms=("tpu",)`, compared after `normalized` (the one normaliser: SSA names,
locations, module and result attributes dropped, JAX's private functions inlined at their
calls, which minijax inlines already). Several platforms: one module with a leading
`_platform_index` argument and a `stablehlo.case` on it where the rules differ, as JAX emits.
Mirrors the intent of JAX's tests/export_harnesses_multi_platform_test.py.
"""

from __future__ import annotations

import re

import jax
import jax.export
import mlir_test
import numpy as np
import pytest

import minijax
import minijax.export  # a submodule, as jax.export
from minijax.interpreters import mlir

A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
WIDE = np.arange(6, dtype=np.float32).reshape(2, 3) + 1.0
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.0

_SSA = re.compile(r"%[\w.]+(?::\d+)?(?:#\d+)?")
_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_FUNC = re.compile(r"^\s*func\.func (?:public|private) @([\w.]+)\(")
_CALL = re.compile(r"^\s*(?:%[\w:#]+ = )?(?:func\.)?call @([\w.]+)\(")


def normalized(text: str) -> list[str]:
    """The ops of `main`, one string per line, for comparing two lowerings: each SSA name
    becomes `%`, locations and `jax.result_info` go, a call to a private function is replaced
    by that function's ops (its `return` dropped), indentation is dropped. The module line and
    `main`'s signature line are kept apart: `main`'s argument types and attributes count."""
    text = _LOC.sub("", text)
    bodies: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name = m.group(1)
            bodies[name] = [line]
        elif name is not None and line.startswith("  }"):
            name = None
        elif name is not None:
            bodies[name].append(line)

    def ops(fn: str, top: bool) -> list[str]:
        out = []
        for line in bodies[fn][1:]:
            call = _CALL.match(line)
            if call and call.group(1) in bodies:
                out += ops(call.group(1), top=False)
            elif top or not line.strip().startswith("return "):
                out.append(_SSA.sub("%", line).strip())
        return out

    signature = re.sub(r" \{jax\.result_info = \"[^\"]*\"\}", "", bodies["main"][0])
    signature = re.sub(r"-> \((tensor<[^>]*>)\)", r"-> \1", _SSA.sub("%", signature.strip()))
    return [signature, *ops("main", top=True)]


def _lowered(J, f, args, platforms) -> str:
    return J.jit(f).trace(*args).lower(lowering_platforms=platforms).as_text()


def _assert_same(f_of, args, platforms=("tpu",)):
    ours = _lowered(minijax, f_of(minijax), args, platforms)
    theirs = _lowered(jax, f_of(jax), args, platforms)
    assert normalized(ours) == normalized(theirs), f"minijax:\n{ours}\nJAX:\n{theirs}"
    return ours


# ---------------------------------------------------------------------------------------------
# The machinery: rule tables per platform, lowering_platforms, several platforms
# ---------------------------------------------------------------------------------------------

def test_normalized_ignores_names_locations_and_outlining():
    outlined = """module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %0 = call @g(%arg0) : (tensor<3xf32>) -> tensor<3xf32> loc(#loc3)
    return %0 : tensor<3xf32>
  }
  func.func private @g(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %cst = stablehlo.sine %arg0 : tensor<3xf32>
    return %cst : tensor<3xf32>
  }
}"""
    inlined = """module @jit_f {
  func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
    %7 = stablehlo.sine %x : tensor<3xf32> loc("jit(f)/sin")
    return %7 : tensor<3xf32>
  }
}"""
    assert normalized(outlined) == normalized(inlined)
    assert normalized(inlined) != normalized(inlined.replace("sine", "cosine"))


def test_register_lowering_keeps_one_table_per_platform():
    prim = minijax.extend.core.Primitive("platform_probe")
    prim.def_abstract_eval(lambda x: x)
    mlir.register_lowering(prim, lambda ctx, x: mlir.hlo.sine(x))
    mlir.register_lowering(prim, lambda ctx, x: mlir.hlo.cosine(x), platform="tpu")
    mlir.register_lowering(prim, lambda ctx, x: mlir.hlo.tanh(x), platform="gpu")
    f, x = (lambda v: prim.bind(v)), np.ones(3, np.float32)
    text = {p: _lowered(minijax, f, (x,), (p,)) for p in ("cpu", "tpu", "cuda", "rocm")}
    assert "stablehlo.sine" in text["cpu"] and "stablehlo.cosine" in text["tpu"]
    assert "stablehlo.tanh" in text["cuda"] and "stablehlo.tanh" in text["rocm"]
    with pytest.raises(NotImplementedError, match="unknown platform xpu"):
        mlir.register_lowering(prim, lambda ctx, x: x, platform="xpu")


def test_a_rule_for_one_platform_only_names_the_platform_it_lacks():
    prim = minijax.extend.core.Primitive("tpu_only_probe")
    prim.def_abstract_eval(lambda x: x)
    mlir.register_lowering(prim, lambda ctx, x: x, platform="tpu")
    f, x = (lambda v: prim.bind(v)), np.ones(3, np.float32)
    assert "tensor<3xf32>" in _lowered(minijax, f, (x,), ("tpu",))
    with pytest.raises(NotImplementedError, match="'tpu_only_probe'.*platform cpu"):
        _lowered(minijax, f, (x,), ("cpu",))


def test_the_rule_context_knows_its_platforms():
    seen = []
    prim = minijax.extend.core.Primitive("platforms_probe")
    prim.def_abstract_eval(lambda x: x)

    def rule(ctx, x):
        seen.append((ctx.platforms, ctx.module_context.platforms))
        return x
    mlir.register_lowering(prim, rule)
    _lowered(minijax, lambda v: prim.bind(v), (np.ones(3, np.float32),), ("cpu", "tpu"))
    assert seen == [(("cpu", "tpu"), ("cpu", "tpu"))]


def test_default_platform_is_the_default_devices():
    assert mlir.default_platform() == minijax.devices()[0].platform == "cpu"
    traced = minijax.jit(lambda v: v * 2.0).trace(X)
    assert traced.lower().as_text() == traced.lower(lowering_platforms=("cpu",)).as_text()


def test_the_platform_is_the_one_of_the_devices_the_computation_names():
    # a computation on a mesh of CPU devices lowers for 'cpu' on a TPU machine (whose default
    # device is a TPU); one that names no device, for the default device's platform
    from minijax import stages
    from minijax.sharding_impls import SingleDeviceSharding

    class Chip:
        platform = "tpu"
    assert stages._platform_of([None, SingleDeviceSharding(Chip())]) == "tpu"
    mesh = minijax.make_mesh((1,), ("x",))
    named = minijax.sharding.NamedSharding(mesh, minijax.sharding.PartitionSpec())
    assert stages._platform_of([named, SingleDeviceSharding(Chip())]) == "cpu"
    assert stages._platform_of([None]) == mlir.default_platform() == "cpu"


def test_a_module_for_another_platform_prints_but_does_not_compile():
    lowered = minijax.jit(minijax.numpy.sin).trace(X).lower(lowering_platforms=("tpu",))
    assert "stablehlo.sine" in lowered.as_text()
    with pytest.raises(ValueError, match=r"lowered for platforms \('tpu',\).*compiles for 'cpu'"):
        lowered.compile()


def test_same_rules_everywhere_lower_as_jax_with_a_platform_index():
    text = _assert_same(lambda J: (lambda x: J.numpy.sin(x) * 2.0), (X,), ("cpu", "tpu"))
    assert '{jax.global_constant = "_platform_index"}' in text
    assert "stablehlo.case" not in text


def _branches(lines: list[str]) -> list[list[str]]:
    """`lines` cut at the branch separators of the (unnested) case ops in them."""
    out = [[]]
    for line in lines:
        if line == "}, {" or line.startswith('% = "stablehlo.case"'):
            out.append([])
        out[-1].append(line)
    return out


@pytest.mark.parametrize("platforms", [("cpu", "tpu"), ("tpu", "cpu")])
def test_rules_that_differ_lower_to_a_case_on_the_platform_index_as_jax(platforms):
    # the rule index is picked per platform, and the rules come in JAX's order (the platforms'
    # own rules, then the default): for ("tpu", "cpu"), branch 0 is the CPU's
    def f(J):
        return lambda a: J.lax.linalg.cholesky(a, symmetrize_input=False)
    ours, theirs = (normalized(_lowered(J, f(J), (A,), platforms)) for J in (minijax, jax))
    ours, theirs = _branches(ours), _branches(theirs)
    assert len(ours) == len(theirs) == 5  # before; two case ops of two branches each
    cpu = 3  # the CPU's LAPACK call (minijax's CPU rule has fewer ops than JAX's: not here)
    assert "lapack_spotrf_ffi" in ours[cpu][1] and "lapack_spotrf_ffi" in theirs[cpu][1]
    assert [b for i, b in enumerate(ours) if i != cpu] == \
        [b for i, b in enumerate(theirs) if i != cpu]


@pytest.mark.parametrize("platform", ["tpu", "cpu"])
@pytest.mark.parametrize("name", list(mlir_test.PROGRAMS))
def test_every_family_of_mlir_test_lowers_as_jax_op_for_op(name, platform):
    # tests/mlir_test.py compares op names; here every attribute and type of every op counts
    program = mlir_test.PROGRAMS[name]
    _assert_same(lambda J: program(J.lax)[0], program(jax.lax)[1], (platform,))


# ---------------------------------------------------------------------------------------------
# The TPU rules: linalg through XLA's own expansions
# ---------------------------------------------------------------------------------------------

LINALG = {
    "cholesky": (lambda J: lambda a: J.lax.linalg.cholesky(a, symmetrize_input=False), (A,)),
    "eigh": (lambda J: lambda a: J.lax.linalg.eigh(a, symmetrize_input=False), (A,)),
    "eigh_upper_unsorted": (lambda J: lambda a: J.lax.linalg.eigh(
        a, lower=False, symmetrize_input=False, sort_eigenvalues=False), (A,)),
    "qr": (lambda J: lambda a: J.lax.linalg.qr(a), (A,)),
    "qr_wide": (lambda J: lambda a: J.lax.linalg.qr(a), (WIDE,)),
    "qr_tall_reduced": (lambda J: lambda a: J.lax.linalg.qr(a.T, full_matrices=False),
                        (WIDE,)),
    "lu": (lambda J: lambda a: J.lax.linalg.lu(a), (A,)),
    "triangular_solve": (lambda J: lambda a: J.lax.linalg.triangular_solve(
        a, a, left_side=True, lower=True), (A,)),
    "triangular_solve_transposed": (lambda J: lambda a: J.lax.linalg.triangular_solve(
        a, WIDE, transpose_a=True, unit_diagonal=True), (A,)),
    "triangular_solve_conjugate_real": (lambda J: lambda a: J.lax.linalg.triangular_solve(
        a, a, left_side=True, lower=True, conjugate_a=True), (A,)),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg_lowers_for_tpu_as_jax(name):
    text = _assert_same(*LINALG[name])
    assert "lapack" not in text


@pytest.mark.parametrize("name", ["cholesky", "eigh", "qr", "lu", "triangular_solve"])
def test_linalg_still_lowers_for_cpu_to_lapack(name):
    f_of, args = LINALG[name]
    text = _lowered(minijax, f_of(minijax), args, ("cpu",))
    assert "lapack_" in text and "lapack_" in _lowered(jax, f_of(jax), args, ("cpu",))
    np.testing.assert_allclose(np.concatenate([np.ravel(v) for v in minijax.tree_util.tree_leaves(
        minijax.jit(f_of(minijax))(*args))]), np.concatenate([np.ravel(v) for v in
        jax.tree_util.tree_leaves(jax.jit(f_of(jax))(*args))]), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Precision: conv (minijax used to drop it) and dot_general, for the CPU and the TPU
# ---------------------------------------------------------------------------------------------

K = np.ones((1, 1, 2, 2), np.float32)


def _conv(J, **kw):
    return lambda x: J.lax.conv_general_dilated(x[None, None], K, (1, 1), "VALID", **kw)


def _dot(J, **kw):
    return lambda x: J.lax.dot_general(x, x, (((1,), (1,)), ((), ())), **kw)


PRECISION = {
    "conv_default": lambda J: _conv(J),
    "conv_highest": lambda J: _conv(J, precision=J.lax.Precision.HIGHEST),
    "conv_highest_f32": lambda J: _conv(J, precision="highest",
                                        preferred_element_type=np.float32),
    "conv_pair": lambda J: _conv(J, precision=("high", "default")),
    "dot_highest": lambda J: _dot(J, precision=J.lax.Precision.HIGHEST),
    "dot_pair_f32": lambda J: _dot(J, precision=(J.lax.Precision.HIGH, J.lax.Precision.DEFAULT),
                                   preferred_element_type=np.float32),
    "dot_bf16_x3": lambda J: _dot(J, precision=J.lax.DotAlgorithmPreset.BF16_BF16_F32_X3),
    "dot_tf32_tpu": lambda J: _dot(J, precision="TF32_TF32_F32"),
}


@pytest.mark.parametrize("platform", ["cpu", "tpu"])
@pytest.mark.parametrize("name", list(PRECISION))
def test_precision_lowers_as_jax(name, platform):
    if name.endswith("_tpu") and platform == "cpu":  # JAX and minijax refuse it on a CPU
        for J in (minijax, jax):
            with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
                _lowered(J, PRECISION[name](J), (X,), (platform,))
        return
    text = _assert_same(PRECISION[name], (X,), (platform,))
    if "highest" in name:
        assert "HIGHEST" in text


def test_conv_highest_under_the_default_matmul_precision_config():
    for J in (minijax, jax):
        with J.default_matmul_precision("highest"):
            text = _lowered(J, _conv(J), (X,), ("tpu",))
        assert "precision_config = [#stablehlo<precision HIGHEST>" in text, J.__name__


def test_conv_preferred_element_type_runs_eagerly_and_jitted_as_jax():
    import ml_dtypes
    x = X.astype(ml_dtypes.bfloat16)
    k = K.astype(ml_dtypes.bfloat16)
    want = jax.lax.conv_general_dilated(x[None, None], k, (1, 1), "VALID",
                                        preferred_element_type=np.float32)
    f = lambda v: minijax.lax.conv_general_dilated(v[None, None], k, (1, 1), "VALID",
                                                   preferred_element_type=np.float32)
    for got in (f(x), minijax.jit(f)(x)):
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), np.asarray(want))


# ---------------------------------------------------------------------------------------------
# ragged_dot: XLA's chlo.ragged_dot on a TPU, the dense expansion on a CPU
# ---------------------------------------------------------------------------------------------

RAGGED_LHS = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
RAGGED_RHS = np.arange(40, dtype=np.float32).reshape(2, 4, 5) / 10
GROUPS = np.array([2, 4], np.int32)

RAGGED = {
    "ragged_dot": lambda J: lambda a, b, g: J.lax.ragged_dot(a, b, g),
    "ragged_dot_highest": lambda J: lambda a, b, g: J.lax.ragged_dot(
        a, b, g, precision=J.lax.Precision.HIGHEST),
    "ragged_dot_bf16_f32": lambda J: lambda a, b, g: J.lax.ragged_dot(
        a.astype(J.numpy.bfloat16), b.astype(J.numpy.bfloat16), g,
        preferred_element_type=np.float32),
}


@pytest.mark.parametrize("name", list(RAGGED))
def test_ragged_dot_lowers_for_tpu_as_jax(name):
    text = _assert_same(RAGGED[name], (RAGGED_LHS, RAGGED_RHS, GROUPS))
    assert "chlo.ragged_dot" in text


@pytest.mark.parametrize("platform", ["tpu", "cpu"])
def test_top_k_gradient_is_a_gather_transposed_as_jax(platform):
    # the MoE router's top-k: JAX's jvp gathers the tangents at the chosen indices, so the
    # gradient is one scatter-add. A one-hot mask and a sum gives the same values in another
    # module, one of the differences of the MoE step whose losses on a TPU parted from JAX's
    def f(J):
        return J.grad(lambda x: (J.lax.top_k(x, 2)[0] * np.float32(3.0)).sum())
    x = np.random.RandomState(0).standard_normal((4, 3, 5)).astype(np.float32)
    text = _assert_same(f, (x,), (platform,))
    assert "stablehlo.scatter" in text and "stablehlo.select" not in text


@pytest.mark.parametrize("platform", ["tpu", "cpu"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int8, np.float32])
def test_sign_lowers_as_jax_unsigned_as_a_select(platform, dtype):
    # XLA:TPU refuses stablehlo.sign on unsigned integers (the numpy topic's `sign-uint8`
    # cases raised there under minijax alone), so JAX lowers them as a compare and a select
    x = np.array([0, 1, 7, 200], np.uint8).astype(dtype)
    text = _assert_same(lambda J: J.lax.sign, (x,), (platform,))
    unsigned = np.dtype(dtype).kind == "u"
    assert ("stablehlo.sign" in text) is not unsigned
    np.testing.assert_array_equal(minijax.jit(minijax.lax.sign)(x), jax.jit(jax.lax.sign)(x))
    np.testing.assert_array_equal(minijax.lax.sign(x), jax.lax.sign(x))


@pytest.mark.parametrize("name", ["tril", "triu", "tri"])
@pytest.mark.parametrize("shape", [(4, 5), (2, 4, 5)])
def test_triangles_lower_as_jax_op_for_op(name, shape):
    # the GPT's causal mask: JAX builds it as `row + k >= col` (jax/_src/lax/lax.py: _tri),
    # and triu as the complement of tril's mask one diagonal down
    def f(J):
        if name == "tri":
            return lambda x: J.numpy.tri(4, 5, -1) * x
        return lambda x: getattr(J.numpy, name)(x, 1)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    _assert_same(f, (x,), ("cpu",))
    np.testing.assert_array_equal(minijax.jit(f(minijax))(x), jax.jit(f(jax))(x))


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
@pytest.mark.parametrize("platform", ["cpu", "tpu"])
def test_cumulative_reductions_lower_as_jax_op_for_op(name, platform):
    # sum, max and min go through JAX's reduce_window_{sum,max,min}, whose init is broadcast
    # to its own scalar shape; cumprod and cumlogsumexp through the generic reduce_window
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    _assert_same(lambda J: lambda x: getattr(J.lax, name)(x, axis=1, reverse=True), (x,),
                 (platform,))


def test_a_weak_type_change_lowers_to_a_convert_as_jax():
    # a weak float32 argument promoted against a float32 array: the same dtype, and JAX
    # still emits the convert (as inside jnp.clip with Python-scalar bounds)
    text = _assert_same(lambda J: lambda a, m: J.numpy.maximum(m, a),
                        (np.ones(3, np.float32), 0.0), ("cpu",))
    assert "stablehlo.convert %arg1 : tensor<f32>" in text


@pytest.mark.parametrize("topic", ["mlp", "gpt", "moe", "addition", "ragged"])
def test_model_train_steps_lower_for_tpu_as_jax_op_for_op(topic):
    # what tools/accelerator_compare.py times on a TPU: with the same module, op for op, the
    # two compile times are XLA's on one program, and the step times the same kernels'
    from tools import accelerator_compare as A
    entries, batches, _ = getattr(A, "build_" + topic)(True, 2, (("jax", jax),
                                                                  ("minijax", minijax)))
    texts = {name: J.jit(call).trace(state, *batches[0]).lower(
        lowering_platforms=("tpu",)).as_text() for name, (J, call, state) in entries.items()}
    assert normalized(texts["minijax"]) == normalized(texts["jax"])


# the SGD step of tools/accelerator_compare.py's `ragged` topic (whose first loss was NaN under
# minijax on a TPU, JAX's finite): value_and_grad through ragged_dot, so the weight gradient is
# the ragged-contracting ragged_dot (mode 2, no rhs group dimension); empty groups, and rows
# past sum(group_sizes) that no group covers, as there
RAGGED_SGD_GROUPS = np.array([5, 0, 3, 6, 0, 2, 0, 0], np.int32)  # 16 of 24 rows


def _ragged_sgd(J):
    from tools.accelerator_compare import ragged_sgd
    return ragged_sgd(J)


def test_ragged_dot_value_and_grad_lowers_for_tpu_as_jax():
    rng = np.random.RandomState(0)
    w = rng.standard_normal((8, 16, 8)).astype(np.float32)
    x = rng.standard_normal((24, 16)).astype(np.float32)
    t = rng.standard_normal((24, 8)).astype(np.float32)
    text = _assert_same(_ragged_sgd, (w, x, t, RAGGED_SGD_GROUPS))
    forward, weight_grad = re.findall(r'"chlo\.ragged_dot".*', text)
    assert "lhs_contracting_dimensions = [1]" in forward and "rhs_group_dimensions = [0]" in forward
    assert "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0], " \
        "lhs_ragged_dimensions = [0]>" in weight_grad  # mode 2: no rhs group dimension
    assert "-> tensor<8x16x8xf32>" in weight_grad


def test_ragged_dot_keeps_the_dense_expansion_on_cpu():
    text = _lowered(minijax, RAGGED["ragged_dot"](minijax), (RAGGED_LHS, RAGGED_RHS, GROUPS),
                    ("cpu",))
    assert "ragged_dot" not in text and "stablehlo.dot_general" in text



# ---------------------------------------------------------------------------------------------
# A whole train step: the module XLA compiles for the TPU (compile time follows its size)
# ---------------------------------------------------------------------------------------------

def _cnn_bn_step(J):
    from compare import cnn_bn
    return cnn_bn.program(J, 0.1)["step"]


def test_cnn_bn_train_step_lowers_for_tpu_as_jax_op_for_op():
    # conv, batch norm, relu, max pooling and their gradients, the logits' gather and its
    # scatter-add (tools/accelerator_compare.py times this step's first call on a TPU)
    from compare import cnn_bn
    params, stats = cnn_bn.init_params((1, 8, 8), channels=(4, 8))
    x = np.random.RandomState(0).standard_normal((4, 1, 8, 8)).astype(np.float32)
    y = np.array([3, 0, 9, 1], np.int32)
    text = _assert_same(_cnn_bn_step, (params, stats, x, y))
    ops = "\n".join(normalized(text))
    # max pooling's gradient keeps its padding on the TPU (no pad, no crop), the single feature
    # group's conv transposes slice nothing, the gather's indices reach XLA unclamped
    assert ops.count("select_and_scatter") == 2 and "stablehlo.pad" not in ops
    assert "stablehlo.slice" not in ops and "stablehlo.minimum" not in ops
    cpu = "\n".join(normalized(_lowered(minijax, _cnn_bn_step(minijax), (params, stats, x, y),
                                        ("cpu",))))
    assert cpu.count("stablehlo.pad") == 2  # the CPU's workaround, as JAX's

# ---------------------------------------------------------------------------------------------
# Host callbacks on a TPU: sends and receives, not the CPU's custom call. JAX cannot lower them
# for a TPU on a CPU machine (it asks the TPU client for the callback object while lowering),
# so the text is checked against what jax/_src/callback.py: _emit_tpu_python_callback emits.
# ---------------------------------------------------------------------------------------------

def _sin_callback(x):
    return minijax.pure_callback(np.sin, minijax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _tpu_text(f, *args):
    lowered = minijax.jit(f).trace(*args).lower(lowering_platforms=("tpu",))
    return lowered.as_text(), lowered._host_callbacks


def _transfers(text):
    return re.findall(r'"stablehlo\.(send|recv)".*?handle = (\d+), type = (\d)>.*?'
                      r'_xla_host_transfer_handler_name = "pjrt_rendezvous", '
                      r'_xla_host_transfer_rendezvous = "(\d+)"', text)


def test_pure_callback_on_tpu_sends_each_operand_and_receives_each_result():
    text, callbacks = _tpu_text(lambda x, y: minijax.pure_callback(
        lambda a, b: (a + b, a * b), (minijax.ShapeDtypeStruct((2, 3), np.float32),) * 2,
        x, y), X, X)
    assert "custom_call" not in text and "stablehlo.create_token" in text
    # channel ids count up from 1; type 2 = device to host, 3 = host to device
    assert _transfers(text) == [("send", "1", "2", "1"), ("send", "2", "2", "2"),
                                ("recv", "3", "3", "3"), ("recv", "4", "3", "4")]
    (cb,) = callbacks
    assert (cb.send_channels, cb.recv_channels) == ((1, 2), (3, 4))
    np.testing.assert_allclose(cb.callback(X, X)[1], X * X)


def test_debug_print_on_tpu_waits_for_a_dummy_answer():
    text, (cb,) = _tpu_text(lambda x: (minijax.debug.print("{}", x), x + 1.0)[1], X)
    assert [t[0] for t in _transfers(text)] == ["send", "recv"]
    assert "-> (tensor<f32>, !stablehlo.token)" in text  # the dummy f32[] received
    assert cb.result_avals == (minijax.core.ShapedArray((), np.float32),)


def test_ordered_io_callback_on_tpu_threads_the_effect_token():
    from minijax.experimental import io_callback
    text, _ = _tpu_text(lambda x: io_callback(np.sin, minijax.ShapeDtypeStruct(X.shape, X.dtype),
                                              x, ordered=True), X)
    assert "stablehlo.create_token" not in text  # the token comes in as main's argument
    assert text.count("!stablehlo.token {jax.token = true}") == 2


def test_callback_without_operands_or_with_empty_results_on_tpu():
    f = lambda: minijax.pure_callback(
        lambda: (np.zeros((0, 3), np.float32), np.ones(2, np.float32)),
        (minijax.ShapeDtypeStruct((0, 3), np.float32), minijax.ShapeDtypeStruct((2,), np.float32)))
    text, (cb,) = _tpu_text(f)
    assert [t[0] for t in _transfers(text)] == ["send", "recv"]  # a dummy f32[1] is sent
    assert "tensor<0x3xf32>" in text and "(tensor<1xf32>, !stablehlo.token)" in text
    (one,) = cb.callback(np.zeros(1, np.float32))  # the TPU gets the non-empty results only
    np.testing.assert_array_equal(one, np.ones(2, np.float32))


def test_a_tpu_callback_becomes_xlas_callback_object_when_compiled():
    # the CPU backend makes the callback object, then refuses the sends (it has no such ops)
    from minijax import compiler
    text, callbacks = _tpu_text(_sin_callback, X)
    with pytest.raises(minijax.errors.JaxRuntimeError, match="`send` is not supported"):
        compiler.compile(text, None, callbacks)


def test_callbacks_for_several_platforms_are_refused_as_in_jax():
    with pytest.raises(NotImplementedError, match="multi-platform lowering for python_callback"):
        minijax.jit(_sin_callback).trace(X).lower(lowering_platforms=("cpu", "tpu"))


# ---------------------------------------------------------------------------------------------
# export: each platform's rules in one artifact, picked by the platform index when called
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cholesky", "qr", "eigh"])
def test_export_for_cpu_and_tpu_holds_both_rules_and_runs_on_cpu(name):
    f_of, args = LINALG[name]
    spec = [minijax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    exp = minijax.export.export(minijax.jit(f_of(minijax)), platforms=("cpu", "tpu"))(*spec)
    text = exp.mlir_module()
    assert "stablehlo.case" in text and "lapack_" in text
    assert "lapack_" not in minijax.export.export(minijax.jit(f_of(minijax)),
                                                  platforms=("tpu",))(*spec).mlir_module()
    want = jax.tree_util.tree_leaves(jax.jit(f_of(jax))(*args))
    for J in (minijax, jax):  # called in minijax, and in JAX from the serialized artifact
        back = J.export.deserialize(exp.serialize())
        got = J.tree_util.tree_leaves(J.jit(back.call)(*args))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# platform_dependent: every branch traced, the platform picked when lowering
# ---------------------------------------------------------------------------------------------

def _by_platform(J):
    return lambda x: J.lax.platform_dependent(x, cpu=J.numpy.sin, tpu=J.numpy.cos)


def test_platform_dependent_stages_every_branch_and_picks_when_lowering():
    jaxpr = str(minijax.make_jaxpr(_by_platform(minijax))(X))
    assert "platform_index[" in jaxpr and "sin" in jaxpr and "cos" in jaxpr
    for J in (minijax, jax):
        np.testing.assert_allclose(np.asarray(J.jit(_by_platform(J))(X)), np.sin(X), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(_by_platform(J)(X)), np.sin(X), rtol=1e-6)
    for platforms in [("tpu",), ("cpu",)]:
        text = _lowered(minijax, _by_platform(minijax), (X,), platforms)
        assert "_platform_index" not in text  # one platform: the index is a constant
    text = _lowered(minijax, _by_platform(minijax), (X,), ("cpu", "tpu"))
    assert '{jax.global_constant = "_platform_index"}' in text
    assert "stablehlo.sine" in text and "stablehlo.cosine" in text


def test_platform_dependent_exported_for_two_platforms_runs_the_cpu_branch():
    spec = minijax.ShapeDtypeStruct(X.shape, X.dtype)
    exp = minijax.export.export(minijax.jit(_by_platform(minijax)),
                                platforms=("tpu", "cpu"))(spec)
    for J in (minijax, jax):
        back = J.export.deserialize(exp.serialize())
        np.testing.assert_allclose(np.asarray(J.jit(back.call)(X)), np.sin(X), rtol=1e-6)


def test_platform_dependent_errors_as_jax():
    for J in (minijax, jax):
        with pytest.raises(ValueError, match="Use 'cuda' or 'rocm'"):
            J.lax.platform_dependent(X, gpu=J.numpy.sin)
        with pytest.raises(TypeError, match="the 'cpu' branch must be a callable"):
            J.lax.platform_dependent(X, cpu=1.0)
        with pytest.raises(NotImplementedError, match="platform_index.*platform cpu"):
            J.jit(lambda x, J=J: J.lax.platform_dependent(x, tpu=J.numpy.cos)).trace(X).lower(
                lowering_platforms=("cpu",))


@pytest.mark.parametrize("platform", ["tpu", "cpu"])
def test_ffi_call_lowers_to_its_target_on_every_platform_as_jax(platform):
    # the target is looked up when compiling, in the registry of the platform compiled for
    # (`minijax.ffi.register_ffi_target(name, fn, platform="tpu")`), as in JAX
    f = lambda J: lambda x: J.ffi.ffi_call("my_target", J.ShapeDtypeStruct(x.shape, x.dtype))(
        x, alpha=np.float32(2.0))
    assert "stablehlo.custom_call @my_target" in _assert_same(f, (X,), (platform,))


# ---------------------------------------------------------------------------------------------
# svd on a TPU: QDWH polar decomposition + Jacobi eigh (minijax/tpu/linalg/), as JAX
# ---------------------------------------------------------------------------------------------

_RNG = np.random.default_rng(1)
SVD_INPUTS = {"square": _RNG.standard_normal((12, 12)).astype(np.float32),
              "tall": _RNG.standard_normal((20, 8)).astype(np.float32),
              "wide": _RNG.standard_normal((6, 10)).astype(np.float32),
              "batched": _RNG.standard_normal((2, 9, 7)).astype(np.float32)}


def _anatomy(text: str) -> tuple:
    """What an SVD lowering is made of: XLA's custom calls, loops, factorizations."""
    return (sorted(re.findall(r"custom_call @(\w+)", text)), text.count("stablehlo.while"),
            text.count("stablehlo.cholesky"), text.count('"stablehlo.triangular_solve"'))


@pytest.mark.parametrize("full_matrices,compute_uv", [(False, True), (True, True),
                                                      (False, False)])
@pytest.mark.parametrize("name", list(SVD_INPUTS))
def test_svd_lowers_for_tpu_through_qdwh_as_jax(name, full_matrices, compute_uv):
    # not op for op (JAX outlines and orders some helpers otherwise), but the same algorithm:
    # the same QR, Householder and Jacobi calls, loops, Cholesky steps and solves
    texts = [_lowered(J, lambda x, J=J: J.lax.linalg.svd(x, full_matrices=full_matrices,
                                                         compute_uv=compute_uv),
                      (SVD_INPUTS[name],), ("tpu",)) for J in (minijax, jax)]
    assert "lapack" not in texts[0] and "@Eigh" in texts[0]
    assert _anatomy(texts[0]) == _anatomy(texts[1])


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("name", list(SVD_INPUTS))
def test_the_tpu_svd_algorithm_runs_on_cpu_as_numpy(name, full_matrices):
    # the same program, its QR/Cholesky/eigh lowered with the CPU's rules here
    from minijax.tpu.linalg import svd as tpu_svd
    a = SVD_INPUTS[name]
    run = minijax.jit(lambda x: tpu_svd._svd_tpu(x, full_matrices=full_matrices,
                                                 compute_uv=True, subset_by_index=None))
    s, u, vh = map(np.asarray, run(a))
    k = min(a.shape[-2:])
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5, atol=1e-5)
    back = np.einsum("...ik,...k,...kj->...ij", u[..., :k], s, vh[..., :k, :])
    np.testing.assert_allclose(back, a, atol=2e-5)
    eye = np.eye(u.shape[-1], dtype=np.float32)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(eye, u.shape[:-2]
                                                                            + eye.shape),
                               atol=2e-5)
    (s_only,) = map(np.asarray, minijax.jit(lambda x: tpu_svd._svd_tpu(
        x, full_matrices=False, compute_uv=False, subset_by_index=None))(a))
    np.testing.assert_allclose(s_only, s, rtol=1e-5, atol=1e-5)


def test_svd_for_cpu_and_tpu_holds_lapack_and_qdwh():
    text = _lowered(minijax, lambda x: minijax.lax.linalg.svd(x), (SVD_INPUTS["square"],),
                    ("cpu", "tpu"))
    assert "lapack_sgesdd_ffi" in text and "@Eigh" in text and "stablehlo.case" in text
