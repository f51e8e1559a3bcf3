"""Pallas kernels written for the TPU, once, against a module alias `J` (jax or minijax), and
the check that runs them compiled on a TPU under both modules.

`KERNELS[name] = (make, args)`: `make(J)` is a function of arrays that calls `pallas_call`
with `interpret=False` (blocks of (8, 128) tiles, scratch in VMEM or SMEM); `args` are its
inputs. On a CPU, tests/pallas_mosaic_test.py compares the Mosaic module minijax builds for
each with JAX's. On a TPU, `run_on_tpu()` runs each under `jax.jit` and `minijax.jit` on the
same inputs and reports bits and times (the rows of `chapters/data/accelerator-tpu.json`):

    PYTHONPATH=$PWD python -c "from compare import _mosaic_kernels as m; m.show(m.run_on_tpu())"

Taught in chapters/16-pallas.md.
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import re
import statistics
import time

import ml_dtypes  # numpy's bfloat16, the dtype both modules use
import numpy as np

from compare import _pallas_kernels
from minijax.experimental.pallas.mosaic.pallas_call_registration import mosaic_ir_context

# ---------------------------------------------------------------------------------------------
# Decoding a tpu_custom_call: the Mosaic module it carries, printed for comparison
# ---------------------------------------------------------------------------------------------

def custom_call_configs(stablehlo_text: str) -> list[dict]:
    """The JSON backend_config of each tpu_custom_call in a StableHLO module's text."""
    found = re.findall(r'stablehlo.custom_call @tpu_custom_call\(.*?backend_config = "(.*?)"',
                       stablehlo_text)
    return [json.loads(re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), f))
            for f in found]


def custom_call_config(stablehlo_text: str) -> dict:
    (config,) = custom_call_configs(stablehlo_text)
    return config


def _drop_unused_constants(op) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                _drop_unused_constants(inner.operation)
                if inner.operation.name == "arith.constant" and not list(
                        inner.operation.results[0].uses):
                    inner.operation.erase()


def normalise(config: dict) -> str:
    """The Mosaic module of a custom call config, printed for comparison: decoded from
    Mosaic's stable form, without locations, and without unused `arith.constant` ops — the
    one documented difference: JAX's transform functions carry an `arith.constant 0 : i32`
    that nothing reads (`lower_jaxpr_to_transform_func` builds `[ir_constant(0)] * n`, the
    block indices of extended dtypes, even when n is 0); minijax emits none."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager
    body = base64.b64decode(config["custom_call_config"]["body"])
    with mosaic_ir_context() as ctx:
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(body)
        PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
        _drop_unused_constants(module.operation)
        return module.operation.get_asm(enable_debug_info=False)


def _pl(J):
    return (importlib.import_module(J.__name__ + ".experimental.pallas"),
            importlib.import_module(J.__name__ + ".experimental.pallas.tpu"))


# The whole program: what surrounds the custom call, op for op
_IDENTITY_OPS = {"stablehlo.convert", "stablehlo.broadcast_in_dim", "stablehlo.reshape"}


def program_ops(stablehlo_text: str) -> list[str]:
    """A jitted program's StableHLO module (`trace(...).lower(lowering_platforms=("tpu",))
    .as_text()`) as one line per op of `main`, for comparing minijax's with JAX's op for op:
    name, operands, attributes (sorted), result types; each `tpu_custom_call`'s config with its
    Mosaic module decoded by `normalise`; then main's signature with its argument and result
    attributes (donation, aliasing). Operands are numbered by the op that made them, so the
    dataflow is compared too. What legitimately differs is normalised away, the same for both:
    - SSA names and locations; the module's attributes (JAX's `mhlo.num_partitions`/
      `num_replicas`: minijax gives XLA the same counts as compile options) and
      `jax.result_info`;
    - `func.call`s are inlined: JAX wraps jnp functions (`floor_divide`, `_where`, `_take`,
      `clip`, `cumsum`) in their own jit, each a private function XLA inlines; minijax traces
      them inline;
    - a `stablehlo.constant` is written at its uses, not as an op: minijax hoists the
      constants a jaxpr closes over to the top of `main`, JAX emits them where they are used;
    - a convert, broadcast_in_dim or reshape whose result type is its operand's is its
      operand: JAX's jnp functions convert an i32 to i32 (weak type) and broadcast a scalar to
      a scalar, ops XLA removes first thing."""
    from minijax.interpreters import mlir as mmlir
    ctx = mmlir.make_ir_context()  # loads the bindings: `mmlir.ir` is set from here on
    ir = mmlir.ir
    lines: list[str] = []
    with ctx:
        module = ir.Module.parse(stablehlo_text)
        funcs = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module.body.operations if op.operation.name == "func.func"}
        count = [0]

        def attribute(op, name):
            attr = op.attributes[name]
            if name == "backend_config" and op.name == "stablehlo.custom_call" and \
                    "custom_call_config" in str(attr):
                config = json.loads(ir.StringAttr(attr).value)
                normalise_body = normalise(config)
                rest = {k: v for k, v in config["custom_call_config"].items() if k != "body"}
                config = {**config, "custom_call_config": rest}
                return f"{name}={json.dumps(config, sort_keys=True)}\n{normalise_body}"
            return f"{name}={attr}"

        def emit(block, env, depth):
            for i, a in enumerate(block.arguments):
                env.setdefault(a, f"%arg{depth}.{i}")
            for op in block.operations:
                op = op.operation
                ins = [env[v] for v in op.operands]
                if op.name == "stablehlo.constant":
                    env[op.results[0]] = f"constant({op.attributes['value']})"
                elif op.name in _IDENTITY_OPS and len(ins) == 1 and \
                        op.operands[0].type == op.results[0].type:
                    env[op.results[0]] = ins[0]
                elif op.name == "func.call":
                    body = funcs[ir.FlatSymbolRefAttr(op.attributes["callee"]).value]
                    body = body.regions[0].blocks[0]
                    outs = emit(body, dict(zip(body.arguments, ins)), depth)
                    env.update(zip(op.results, outs))
                elif op.name == "func.return":
                    return ins
                else:
                    names = []
                    for r in op.results:
                        count[0] += 1
                        env[r] = names.append(f"%{count[0]}") or names[-1]
                    attrs = sorted(attribute(op, a.name if hasattr(a, "name") else a)
                                   for a in op.attributes)
                    lines.append("  " * depth + f"{', '.join(names)} = {op.name}"
                                 f"({', '.join(ins)}) {attrs} -> "
                                 f"{[str(r.type) for r in op.results]}")
                    for region in op.regions:
                        for b in region.blocks:
                            emit(b, env, depth + 1)
            return []

        main = funcs["main"]
        outs = emit(main.regions[0].blocks[0], {}, 0)
        def attrs(key):  # per argument or result; none at all when every one is empty
            out = [re.sub(r'jax.result_info = "[^"]*",? ?', "", str(a))
                   for a in (main.attributes[key] if key in main.attributes else [])]
            return [] if all(a == "{}" for a in out) else out
        args, results = attrs("arg_attrs"), attrs("res_attrs")
        lines.append(f"main {main.attributes['function_type']} args {args} "
                     f"results {results} returns {outs}")
    return lines


# ---------------------------------------------------------------------------------------------
# Kernels written for the TPU: blocks of (8, 128) tiles, scratch in VMEM
# ---------------------------------------------------------------------------------------------

F32 = np.float32
X16 = np.arange(16 * 256, dtype=F32).reshape(16, 256) / 100


def copy_kernel(J, index_map=lambda i, j: (i, j)):
    pl, _ = _pl(J)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(2, 2), in_specs=[pl.BlockSpec((8, 128), index_map)],
                              out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
                              interpret=False)(x)
    return f


def matmul_kernel(J):
    pl, pltpu = _pl(J)
    jnp = J.numpy

    def kernel(a_ref, b_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    def f(a, b):
        return pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((256, 256), jnp.float32), grid=(2, 2, 2),
            in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                      pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")),
            interpret=False)(a, b)
    return f


def matmul_transposed_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(a_ref, b_ref, o_ref):  # a @ b.T, contracting both minor dimensions
        o_ref[...] = lax.dot_general(a_ref[...], b_ref[...], (((1,), (1,)), ((), ())),
                                     preferred_element_type=jnp.float32)

    def f(a, b):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((128, 128), jnp.float32),
                              interpret=False)(a, b)
    return f


def softmax_kernel(J):
    pl, _ = _pl(J)
    jnp = J.numpy

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                              interpret=False)(x)
    return f


def fori_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, o_ref):
        def body(i, acc):
            return acc + x_ref[pl.ds(i * 8, 8), :]
        o_ref[...] = lax.fori_loop(0, 2, body, jnp.zeros((8, 256), jnp.float32))

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8, 256), x.dtype),
                              interpret=False)(x)
    return f


def elementwise_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        row = lax.broadcasted_iota(jnp.int32, x.shape, 0) + pl.program_id(0) * 8
        col = lax.broadcasted_iota(jnp.int32, x.shape, 1)
        y = jnp.tanh(x) * lax.rsqrt(x + 1.0) - jnp.log(x + 2.0) + J.nn.sigmoid(x)
        y = jnp.minimum(jnp.maximum(y, -1.0), 1.0) / 3.0
        y = jnp.where(row >= col, y, -x).astype(jnp.bfloat16)
        o_ref[...] = y.astype(jnp.float32)

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                              interpret=False)(x)
    return f


def squeezed_kernel(J):
    pl, pltpu = _pl(J)

    def kernel(x_ref, o_ref, s_ref):
        s_ref[0] = pl.program_id(0)
        o_ref[...] = x_ref[...] * 2.0

    def f(x):  # x: f32[2, 8, 256]; each instance sees one f32[8, 256] slab
        return pl.pallas_call(
            kernel, out_shape=J.ShapeDtypeStruct((16, 256), x.dtype), grid=(2,),
            in_specs=[pl.BlockSpec((None, 8, 256), lambda i: (i, 0, 0))],
            out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
            scratch_shapes=[pltpu.SMEM((1,), J.numpy.int32)], interpret=False)(x)
    return f


def prefetch_kernel(J):
    pl, pltpu = _pl(J)

    def kernel(order_ref, x_ref, o_ref):  # block i of the output is block order[i] of x, doubled
        o_ref[...] = x_ref[...] * 2.0 + order_ref[pl.program_id(0)].astype(J.numpy.float32)

    def f(order, x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((16, 256), x.dtype),
                              grid_spec=pltpu.PrefetchScalarGridSpec(
                                  num_scalar_prefetch=1, grid=(2,),
                                  in_specs=[pl.BlockSpec((None, 8, 256),
                                                         lambda i, order: (order[i], 0, 0))],
                                  out_specs=pl.BlockSpec((8, 256), lambda i, order: (i, 0))),
                              interpret=False)(order, x)
    return f


def slices_kernel(J):
    pl, _ = _pl(J)

    def kernel(x_ref, o_ref):  # swap the two row halves, doubling one: pl.ds loads and stores
        o_ref[pl.ds(0, 8), :] = x_ref[pl.ds(8, 8), :]
        o_ref[pl.ds(8, 8), :] = x_ref[pl.ds(0, 8), :] * 2.0

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=False)(x)
    return f


def bf16_matmul_kernel(J):
    pl, _ = _pl(J)
    jnp = J.numpy

    def kernel(a_ref, b_ref, o_ref):  # bf16 operands, f32 accumulation, bf16 result
        acc = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = acc.astype(jnp.bfloat16)

    def f(a, b):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((128, 128), jnp.bfloat16),
                              interpret=False)(a, b)
    return f


def math_kernel(J):
    pl, _ = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, i_ref, o_ref, p_ref):
        x, i = x_ref[...], i_ref[...]
        o_ref[...] = (x ** 2 + jnp.abs(x) - jnp.sqrt(jnp.abs(x)) - jnp.floor(x) * jnp.floor(-x)
                      + jnp.sin(x) * jnp.cos(x) + lax.log1p(jnp.abs(x)) + (-x) + jnp.square(x)
                      + lax.rem(x, 3.0))
        p_ref[...] = (i * 3 - (-i) + jnp.maximum(i, 2) + jnp.where(i > 3, i, 0) + (i & 5)
                      + (i | 2) + lax.rem(i, 7) + jnp.where((i > 4) != (i > 9), 1, 0))

    def f(x, i):
        return pl.pallas_call(kernel, out_shape=(J.ShapeDtypeStruct(x.shape, x.dtype),
                                                 J.ShapeDtypeStruct(i.shape, i.dtype)),
                              interpret=False)(x, i)
    return f


def aliased_kernel(J):
    pl, pltpu = _pl(J)

    def kernel(x_ref, o_ref):  # in place: o_ref is x's buffer
        o_ref[...] = o_ref[...] + 1.0

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                              input_output_aliases={0: 0},
                              compiler_params=pltpu.CompilerParams(
                                  dimension_semantics=("parallel",), vmem_limit_bytes=1 << 25),
                              interpret=False)(x)
    return f


def dynamic_fori_kernel(J):
    pl, pltpu = _pl(J)
    jnp, lax = J.numpy, J.lax

    def kernel(n_ref, x_ref, o_ref):  # a trip count read from SMEM: a while loop
        def body(i, acc):
            return acc + x_ref[pl.ds(i * 8, 8), :]
        o_ref[...] = lax.fori_loop(0, n_ref[0], body, jnp.zeros((8, 256), jnp.float32))

    def f(n, x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8, 256), x.dtype),
                              in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec()],
                              interpret=False)(n, x)
    return f


def nn_kernel(J):
    pl, _ = _pl(J)
    jnp = J.numpy

    @J.custom_jvp
    def clipped(x):  # a custom_jvp inside a kernel: only its primal computation is lowered
        return jnp.minimum(jnp.maximum(x, -2.0), 2.0)
    clipped.defjvp(lambda primals, tangents: (clipped(primals[0]), tangents[0]))

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = J.nn.gelu(x) + J.nn.silu(x) + clipped(x)

    def f(x):
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=False)(x)
    return f


def scalar_reduce_kernel(J):
    pl, pltpu = _pl(J)
    jnp = J.numpy

    def kernel(x_ref, o_ref, total_ref):  # reductions to scalars; a scalar output in SMEM
        x = x_ref[...]
        o_ref[...] = x - jnp.max(x)
        total_ref[0] = jnp.sum(x)

    def f(x):
        return pl.pallas_call(kernel, out_shape=(J.ShapeDtypeStruct(x.shape, x.dtype),
                                                 J.ShapeDtypeStruct((1,), x.dtype)),
                              out_specs=(pl.BlockSpec(), pl.BlockSpec(memory_space=pltpu.SMEM)),
                              interpret=False)(x)
    return f


def switch_kernel(J):
    pl, _ = _pl(J)
    lax = J.lax

    def kernel(x_ref, o_ref):  # lax.switch on the grid index: nested scf.if; slice, transpose
        branches = [lambda v: v * 2.0, lambda v: v + 1.0, lambda v: -v]
        y = lax.switch(pl.program_id(0), branches, x_ref[...][:, :128].T[:8, :])
        o_ref[...] = lax.clamp(-1.0, y, 1.0)

    def f(x):  # the whole array at every step: a trivial window, single-buffered
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8, 128), x.dtype),
                              grid=(3,), in_specs=[pl.BlockSpec((128, 256), lambda i: (0, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                              interpret=False)(x)
    return f


def lambda_kernel(J):
    pl, _ = _pl(J)

    def f(x):  # an anonymous kernel: its name, `<lambda>`, becomes the symbol `_lambda_`
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1.0),
                              out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), interpret=False)(x)
    return f


def vmapped_softmax_kernel(J):
    return J.vmap(softmax_kernel(J))


# The kernels of compare/_pallas_kernels.py (chapter 16) at TPU-legal blocks. JAX cannot
# lower its rank-1 blocks without a TPU (it asks the chip for its tiling), so the kernels
# with rank-1 operands (vector add, the matmul's bias, layer norm's scales) are left out.
def chapter16(name, **kw):
    def make(J):
        pl, _ = _pl(J)
        plgpu = importlib.import_module(J.__name__ + ".experimental.pallas.triton")
        K = _pallas_kernels.build(J, pl, plgpu, interpret=False)
        if name == "flash_attention_grad":
            def loss(q, k, v):
                return J.numpy.sum(K.flash_attention(q, k, v, 128, 128, kw["causal"]))
            return J.grad(loss, argnums=(0, 1, 2))
        return functools.partial(getattr(K, name), **kw)
    return make


Q = np.random.default_rng(0).standard_normal((1, 256, 128)).astype(F32)

KERNELS = {
    "ch16_row_softmax": (chapter16("row_softmax"), [X16]),
    "ch16_flash_forward": (chapter16("flash_forward", bq=128, bk=128), [Q, Q, Q]),
    # grad through custom_vjp: the forward kernel, then the dK/dV and dQ kernels
    "ch16_flash_attention_grad": (chapter16("flash_attention_grad", causal=False), [Q, Q, Q]),
    "vmap_softmax": (vmapped_softmax_kernel, [np.stack([X16, X16 + 1])]),
    "slices": (slices_kernel, [X16]),
    "nn_and_custom_jvp": (nn_kernel, [X16]),
    "scalar_reduce": (scalar_reduce_kernel, [X16]),
    "switch": (switch_kernel, [np.ones((128, 256), F32)]),
    "lambda": (lambda_kernel, [X16]),
    "bf16_matmul": (bf16_matmul_kernel, [(np.arange(128 * 128).reshape(128, 128) % 7 / 7)
                                         .astype(ml_dtypes.bfloat16)] * 2),
    "math": (math_kernel, [X16, (np.arange(16 * 256).reshape(16, 256) % 50).astype(np.int32)]),
    "aliased": (aliased_kernel, [X16]),
    "dynamic_fori_loop": (dynamic_fori_kernel, [np.array([2], np.int32), X16]),
    "copy": (copy_kernel, [X16]),
    "matmul": (matmul_kernel, [np.ones((256, 256), F32)] * 2),
    "matmul_transposed": (matmul_transposed_kernel, [np.ones((128, 256), F32)] * 2),
    "softmax": (softmax_kernel, [X16]),
    "fori_loop": (fori_kernel, [X16]),
    "elementwise": (elementwise_kernel, [X16]),
    "squeezed": (squeezed_kernel, [X16.reshape(2, 8, 256)]),
    "scalar_prefetch": (prefetch_kernel, [np.array([1, 0], np.int32), X16.reshape(2, 8, 256)]),
}


# Kernels JAX cannot lower for a TPU without one (its rules ask the chip: the tiling of rank-1
# blocks, the generation for `sign`), so they are compared on the chip only.
X1 = np.arange(2048, dtype=F32) / 100
TPU_ONLY = {
    "ch16_vector_add": (chapter16("vector_add", block=1024), [X1, X1 + 1]),
    "ch16_layer_norm": (chapter16("layer_norm"), [X16[:, :128], X16[0, :128], X16[1, :128]]),
    "ch16_flash_forward_causal": (chapter16("flash_forward", bq=128, bk=128, causal=True),
                                  [Q, Q, Q]),
    "ch16_flash_attention_grad_causal": (chapter16("flash_attention_grad", causal=True),
                                         [Q, Q, Q]),
}


# ---------------------------------------------------------------------------------------------
# On a TPU: minijax's compiled kernels against JAX's, same inputs, same chip
# ---------------------------------------------------------------------------------------------

def _median_ms(J, fn, args, reps: int) -> float:
    # inputs already on the device, as tools/accelerator_tpu.py times the large kernels: a
    # NumPy argument is copied on every call, by JAX's C++ dispatch but by minijax's Python
    # (on a CPU about 15 us more an argument), most of a small kernel's difference
    args = [J.device_put(a) for a in args]
    J.block_until_ready(fn(*args))  # compile and warm up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        J.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run_on_tpu(names=None, reps: int = 50, kernels: dict | None = None) -> list[dict]:
    """Each kernel (of `kernels`, default `KERNELS` and `TPU_ONLY`; `names` picks some)
    compiled by JAX's Pallas and by minijax's (both through Mosaic), run on the default device
    (a TPU) on the same inputs. Returns rows {"kernel", "impl": "minijax_pallas", "ref":
    "jax_pallas", "ms", "ref_ms", "bits_equal"}; on another backend the compile raises."""
    import jax

    import minijax
    kernels = {**KERNELS, **TPU_ONLY} if kernels is None else kernels
    rows = []
    for name in names or sorted(kernels):
        make, args = kernels[name]
        f_jax, f_mini = jax.jit(make(jax)), minijax.jit(make(minijax))
        want = jax.tree_util.tree_leaves(f_jax(*args))
        got = minijax.tree_util.tree_leaves(f_mini(*args))
        bits = len(got) == len(want) and all(
            np.array_equal(np.asarray(g), np.asarray(w), equal_nan=True)
            for g, w in zip(got, want))
        rows.append({"kernel": name, "impl": "minijax_pallas", "ref": "jax_pallas",
                     "ms": _median_ms(minijax, f_mini, args, reps),
                     "ref_ms": _median_ms(jax, f_jax, args, reps), "bits_equal": bool(bits)})
    return rows


def show(rows: list[dict]) -> None:
    print(f"{'kernel':28} {'minijax ms':>11} {'jax ms':>9} {'ratio':>6}  bits")
    for r in rows:
        print(f"{r['kernel']:28} {r['ms']:11.4f} {r['ref_ms']:9.4f} "
              f"{r['ms'] / r['ref_ms']:6.3f}  {'equal' if r['bits_equal'] else 'DIFFER'}")
