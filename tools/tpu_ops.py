"""Operations on the chip: each one under `minijax.jit`, `jax.jit` and eager minijax, compared.

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/tpu_ops.py --out chapters/data/tpu-ops.json

One process runs every operation of `OPS` (over a hundred, every primitive family: elementwise,
reductions, indexing, gather/scatter, control flow, linalg, fft, random, conv, dot at each
precision, ragged_dot, callbacks and `debug.print`, sort, cumulative...) on the same float32
inputs: jitted under JAX (the reference), jitted under minijax (the lowering that issue 43 made
per platform), and eagerly under minijax (NumPy on the host: what a `jnp` call outside `jit`
does there). Matrix products run under `default_matmul_precision("highest")` in both modules
unless the operation's name says `default` (then both use the chip's bf16 passes). It writes
`{"device_kind", "platform", "jax", "date", "ops": [{"name", "minijax", "jax", "max_diff",
"eager", "eager_max_diff"}]}`, where "minijax"/"jax"/"eager" are "ok" or the error (its type
and first line) and the diffs are the largest difference from JAX's jitted result, over every
output element, of `|got - jax| / max(1, |jax|)` (absolute below 1, relative above).

It runs on any machine given an `--out` of its own: on a CPU it checks the script
(tests/tpu_ops_test.py runs a few `--only` names); the figure that counts comes from a TPU
(`device_kind` says which), and only a TPU writes the default `--out`, committed
as `chapters/data/tpu-ops.json` and summarised by `docs/conformance.md` through `summary()`.
On a TPU v5e it takes about a minute (two compiles per operation).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "chapters" / "data" / "tpu-ops.json"

_rng = np.random.default_rng(0)
X = _rng.standard_normal((8, 16)).astype(np.float32)
Y = _rng.standard_normal((8, 16)).astype(np.float32)
P = (np.abs(X) + 0.5).astype(np.float32)                      # positive
U = _rng.uniform(-0.9, 0.9, (8, 16)).astype(np.float32)       # in (-1, 1)
_m = _rng.standard_normal((16, 16)).astype(np.float32)
A = (_m @ _m.T / 16 + np.eye(16, dtype=np.float32)).astype(np.float32)  # SPD, well conditioned
M = _rng.standard_normal((16, 16)).astype(np.float32) + 4 * np.eye(16, dtype=np.float32)
V = _rng.standard_normal((16,)).astype(np.float32)
I = _rng.integers(-50, 50, (8, 16)).astype(np.int32)
IDX = np.array([3, 0, 7, 7, 1], np.int32)
IMG = _rng.standard_normal((2, 3, 10, 10)).astype(np.float32)  # NCHW
KER = _rng.standard_normal((4, 3, 3, 3)).astype(np.float32)    # OIHW
RL = _rng.standard_normal((24, 16)).astype(np.float32)         # ragged lhs [m, k]
RR = _rng.standard_normal((3, 16, 8)).astype(np.float32)       # ragged rhs [g, k, n]
GS = np.array([5, 11, 8], np.int32)


def _host_sin(a):
    return np.sin(a).astype(np.float32)


def _ops() -> dict:
    """name -> (program(J) -> function, args). `J` is `jax` or `minijax`."""
    unary = ["sin", "cos", "tan", "tanh", "exp", "expm1", "log1p", "abs", "negative", "sign",
             "floor", "ceil", "round", "square", "sinh", "cosh", "arctan", "reciprocal",
             "exp2", "cbrt", "rint", "trunc"]
    ops = {f"jnp.{n}": (lambda J, n=n: getattr(J.numpy, n), (X,)) for n in unary}
    ops.update({f"jnp.{n}": (lambda J, n=n: getattr(J.numpy, n), (P,))
                for n in ["log", "sqrt", "log2", "log10"]})
    ops.update({f"jnp.{n}": (lambda J, n=n: getattr(J.numpy, n), (U,))
                for n in ["arcsin", "arccos", "arctanh"]})
    ops.update({
        "lax.rsqrt": (lambda J: J.lax.rsqrt, (P,)),
        "lax.logistic": (lambda J: J.lax.logistic, (X,)),
        "lax.erf": (lambda J: J.lax.erf, (X,)),
        "lax.erf_inv": (lambda J: J.lax.erf_inv, (U,)),
        "lax.lgamma": (lambda J: J.lax.lgamma, (P,)),
        "lax.digamma": (lambda J: J.lax.digamma, (P,)),
        "lax.integer_pow": (lambda J: lambda x: J.lax.integer_pow(x, 3), (X,)),
        "lax.is_finite": (lambda J: J.lax.is_finite, (X,)),
        "jnp.isnan": (lambda J: lambda x: J.numpy.isnan(J.numpy.log(x)), (X,)),
        # binary and integer
        "jnp.add": (lambda J: J.numpy.add, (X, Y)),
        "jnp.subtract": (lambda J: J.numpy.subtract, (X, Y)),
        "jnp.multiply": (lambda J: J.numpy.multiply, (X, Y)),
        "jnp.divide": (lambda J: J.numpy.divide, (X, P)),
        "jnp.power": (lambda J: J.numpy.power, (P, Y)),
        "jnp.maximum": (lambda J: J.numpy.maximum, (X, Y)),
        "jnp.minimum": (lambda J: J.numpy.minimum, (X, Y)),
        "jnp.arctan2": (lambda J: J.numpy.arctan2, (X, Y)),
        "jnp.hypot": (lambda J: J.numpy.hypot, (X, Y)),
        "jnp.mod": (lambda J: J.numpy.mod, (X, P)),
        "jnp.floor_divide_int": (lambda J: lambda i: J.numpy.floor_divide(i, 7), (I,)),
        "jnp.remainder_int": (lambda J: lambda i: J.numpy.remainder(i, 7), (I,)),
        "jnp.bitwise_and": (lambda J: lambda i: J.numpy.bitwise_and(i, 12), (I,)),
        "jnp.left_shift": (lambda J: lambda i: J.numpy.left_shift(i, 2), (I,)),
        "jnp.where": (lambda J: lambda x, y: J.numpy.where(x > y, x, y * 2), (X, Y)),
        "jnp.clip": (lambda J: lambda x: J.numpy.clip(x, -0.5, 0.5), (X,)),
        "jnp.logaddexp": (lambda J: J.numpy.logaddexp, (X, Y)),
        "lax.nextafter": (lambda J: J.lax.nextafter, (X, Y)),
        "astype_int32": (lambda J: lambda x: (x * 10).astype(J.numpy.int32), (X,)),
        "astype_bf16": (lambda J: lambda x: x.astype(J.numpy.bfloat16).astype(J.numpy.float32),
                        (X,)),
        "bitcast_convert": (lambda J: lambda x: J.lax.bitcast_convert_type(x, J.numpy.int32),
                            (X,)),
        # reductions
        "jnp.sum": (lambda J: lambda x: J.numpy.sum(x, axis=1), (X,)),
        "jnp.prod": (lambda J: lambda x: J.numpy.prod(x / 2 + 1, axis=0), (X,)),
        "jnp.max": (lambda J: lambda x: J.numpy.max(x, axis=0), (X,)),
        "jnp.min": (lambda J: J.numpy.min, (X,)),
        "jnp.mean": (lambda J: J.numpy.mean, (X,)),
        "jnp.var": (lambda J: lambda x: J.numpy.var(x, axis=1), (X,)),
        "jnp.argmax": (lambda J: lambda x: J.numpy.argmax(x, axis=1), (X,)),
        "jnp.argmin": (lambda J: lambda x: J.numpy.argmin(x, axis=0), (X,)),
        "jnp.any": (lambda J: lambda x: J.numpy.any(x > 2.0, axis=1), (X,)),
        "jnp.all": (lambda J: lambda x: J.numpy.all(x > -3.0), (X,)),
        "logsumexp": (lambda J: lambda x: J.nn.logsumexp(x, axis=1), (X,)),
        "jnp.linalg.norm": (lambda J: J.numpy.linalg.norm, (X,)),
        "lax.reduce_precision": (lambda J: lambda x: J.lax.reduce_precision(x, 5, 10), (X,)),
        # cumulative and windowed
        "jnp.cumsum": (lambda J: lambda x: J.numpy.cumsum(x, axis=1), (X,)),
        "jnp.cumprod": (lambda J: lambda x: J.numpy.cumprod(x / 4 + 1, axis=0), (X,)),
        "lax.cummax": (lambda J: lambda x: J.lax.cummax(x, axis=1), (X,)),
        "lax.cumlogsumexp": (lambda J: lambda x: J.lax.cumlogsumexp(x, axis=1), (X,)),
        "lax.reduce_window_max": (lambda J: lambda x: J.lax.reduce_window(
            x, -np.inf, J.lax.max, (2, 2), (2, 2), "VALID"), (X,)),
        "avg_pool": (lambda J: lambda x: J.lax.reduce_window(
            x, 0.0, J.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "SAME") / 4, (IMG,)),
        # shapes and indexing
        "reshape_transpose": (lambda J: lambda x: J.numpy.transpose(x.reshape(4, 32)), (X,)),
        "broadcast_to": (lambda J: lambda v: J.numpy.broadcast_to(v, (3, 16)), (V,)),
        "concatenate": (lambda J: lambda x, y: J.numpy.concatenate([x, y], axis=0), (X, Y)),
        "stack": (lambda J: lambda x, y: J.numpy.stack([x, y], axis=1), (X, Y)),
        "pad": (lambda J: lambda x: J.numpy.pad(x, ((1, 2), (0, 3))), (X,)),
        "lax.pad_interior": (lambda J: lambda x: J.lax.pad(x, 0.0, ((1, 0, 1), (0, -2, 0))),
                             (X,)),
        "flip_roll": (lambda J: lambda x: J.numpy.roll(J.numpy.flip(x, 1), 3, axis=0), (X,)),
        "slice_step": (lambda J: lambda x: x[1:7:2, ::3], (X,)),
        "dynamic_slice": (lambda J: lambda x, i: J.lax.dynamic_slice(x, (i[0, 0] % 4, 2),
                                                                     (3, 5)), (X, I)),
        "dynamic_update_slice": (lambda J: lambda x, y: J.lax.dynamic_update_slice(
            x, y[:2, :3], (5, 9)), (X, Y)),
        "gather_take": (lambda J: lambda x, i: J.numpy.take(x, i, axis=1), (X, IDX)),
        "gather_fancy": (lambda J: lambda x, i: x[i % 8, i], (X, IDX)),
        "take_along_axis": (lambda J: lambda x: J.numpy.take_along_axis(
            x, J.numpy.argsort(x, axis=1), axis=1), (X,)),
        "scatter_set": (lambda J: lambda x, i: J.numpy.asarray(x).at[i].set(0.5), (V, IDX)),
        "scatter_add": (lambda J: lambda x, i: J.numpy.asarray(x).at[i].add(1.0), (V, IDX)),
        "scatter_max": (lambda J: lambda x, i, y: J.numpy.asarray(x).at[:, i].max(y[:, :5]),
                        (X, IDX, Y)),
        "segment_sum": (lambda J: lambda x, i: J.ops.segment_sum(x[:5], i, num_segments=8),
                        (X, IDX)),
        "jnp.tril_triu": (lambda J: lambda a: J.numpy.tril(a) - J.numpy.triu(a, 1), (M,)),
        "jnp.diagonal_trace": (lambda J: lambda a: J.numpy.trace(a) + J.numpy.diagonal(a),
                               (M,)),
        "one_hot": (lambda J: lambda i: J.nn.one_hot(i, 8), (IDX,)),
        "iota_eye": (lambda J: lambda x: J.numpy.eye(8, 16) * x, (X,)),
        # sorting
        "jnp.sort": (lambda J: lambda x: J.numpy.sort(x, axis=1), (X,)),
        "jnp.argsort": (lambda J: lambda x: J.numpy.argsort(x, axis=0), (X,)),
        "lax.top_k": (lambda J: lambda x: J.lax.top_k(x, 3), (X,)),
        "lax.sort_multi": (lambda J: lambda x, y: J.lax.sort((x, y), dimension=1, num_keys=1),
                           (X, Y)),
        "jnp.searchsorted": (lambda J: lambda v, x: J.numpy.searchsorted(J.numpy.sort(v), x),
                             (V, X)),
        # control flow
        "cond": (lambda J: lambda x: J.lax.cond(x.sum() > 0, J.numpy.sin, J.numpy.cos, x),
                 (X,)),
        "switch": (lambda J: lambda x, i: J.lax.switch(i[0, 0] % 3, [J.numpy.sin, J.numpy.cos,
                                                                      J.numpy.tanh], x), (X, I)),
        "while_loop": (lambda J: lambda x: J.lax.while_loop(
            lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 0.9 + 0.1), (0, x))[1], (X,)),
        "fori_loop": (lambda J: lambda x: J.lax.fori_loop(0, 4, lambda i, c: c + i * x, x),
                      (X,)),
        "scan": (lambda J: lambda x: J.lax.scan(lambda c, r: (c + r, c * r), x[0], x)[1],
                 (X,)),
        "associative_scan": (lambda J: lambda x: J.lax.associative_scan(J.numpy.add, x,
                                                                        axis=1), (X,)),
        "map": (lambda J: lambda x: J.lax.map(lambda r: r @ r, x), (X,)),
        "select_n": (lambda J: lambda x, y, i: J.lax.select_n(i % 2 == 0, x, y), (X, Y, I)),
        # autodiff and vmap
        "grad_tanh_sum": (lambda J: J.grad(lambda x: J.numpy.tanh(x).sum()), (X,)),
        "grad_matmul": (lambda J: J.grad(lambda a, b: (a @ b).sum(), argnums=1), (M, A)),
        "vmap_dot": (lambda J: J.vmap(lambda r: J.numpy.dot(r, r)), (X,)),
        "jacfwd_sin": (lambda J: J.jacfwd(J.numpy.sin), (V,)),
        "checkpoint": (lambda J: J.grad(lambda x: J.checkpoint(
            lambda y: J.numpy.sin(y) ** 2)(x).sum()), (X,)),
        # matrix products and convolution, at the chip's default and at highest
        "jnp.matmul": (lambda J: J.numpy.matmul, (M, A)),
        "jnp.matmul_default": (lambda J: J.numpy.matmul, (M, A)),
        "jnp.einsum": (lambda J: lambda x, y: J.numpy.einsum("ij,kj->ik", x, y), (X, Y)),
        "dot_general_batched": (lambda J: lambda a: J.lax.dot_general(
            a[None], a[None], (((2,), (1,)), ((0,), (0,)))), (M,)),
        "dot_precision_highest_default": (lambda J: lambda a, b: J.lax.dot(
            a, b, precision=J.lax.Precision.HIGHEST), (M, A)),
        "dot_precision_high_default": (lambda J: lambda a, b: J.lax.dot(
            a, b, precision=J.lax.Precision.HIGH), (M, A)),
        "dot_bf16_f32_default": (lambda J: lambda a, b: J.lax.dot(
            a.astype(J.numpy.bfloat16), b.astype(J.numpy.bfloat16),
            preferred_element_type=J.numpy.float32), (M, A)),
        "dot_algorithm_bf16_x3_default": (lambda J: lambda a, b: J.lax.dot(
            a, b, precision=J.lax.DotAlgorithmPreset.BF16_BF16_F32_X3), (M, A)),
        "conv": (lambda J: lambda x, k: J.lax.conv_general_dilated(x, k, (1, 1), "SAME"),
                 (IMG, KER)),
        "conv_default": (lambda J: lambda x, k: J.lax.conv_general_dilated(x, k, (1, 1),
                                                                           "SAME"), (IMG, KER)),
        "conv_precision_highest_default": (lambda J: lambda x, k: J.lax.conv_general_dilated(
            x, k, (1, 1), "SAME", precision=J.lax.Precision.HIGHEST), (IMG, KER)),
        "conv_strided_dilated": (lambda J: lambda x, k: J.lax.conv_general_dilated(
            x, k, (2, 2), ((1, 1), (0, 2)), rhs_dilation=(1, 2)), (IMG, KER)),
        "conv_closed_over_default": (lambda J: lambda x: J.lax.conv_general_dilated(
            x, J.numpy.asarray(KER), (1, 1), "VALID"), (IMG,)),
        "conv_grad": (lambda J: J.grad(lambda k, x: J.lax.conv_general_dilated(
            x, k, (1, 1), "SAME").sum()), (KER, IMG)),
        "ragged_dot": (lambda J: J.lax.ragged_dot, (RL, RR, GS)),
        "ragged_dot_default": (lambda J: J.lax.ragged_dot, (RL, RR, GS)),
        # linalg
        "cholesky": (lambda J: J.numpy.linalg.cholesky, (A,)),
        "qr": (lambda J: J.numpy.linalg.qr, (M,)),
        "eigh": (lambda J: lambda a: J.numpy.linalg.eigh(a)[0], (A,)),
        "svd": (lambda J: lambda a: J.numpy.linalg.svd(a, compute_uv=False), (M,)),
        "lu": (lambda J: lambda a: J.lax.linalg.lu(a)[0], (M,)),
        "triangular_solve": (lambda J: lambda a, b: J.lax.linalg.triangular_solve(
            a, b, left_side=True, lower=True), (A, M)),
        "solve": (lambda J: J.numpy.linalg.solve, (M, A)),
        "inv": (lambda J: J.numpy.linalg.inv, (M,)),
        "det": (lambda J: J.numpy.linalg.det, (A,)),
        "slogdet": (lambda J: lambda a: J.numpy.linalg.slogdet(a)[1], (M,)),
        # fft
        "fft": (lambda J: lambda x: J.numpy.abs(J.numpy.fft.fft(x)), (X,)),
        "rfft": (lambda J: lambda x: J.numpy.abs(J.numpy.fft.rfft(x)), (X,)),
        "irfft": (lambda J: lambda x: J.numpy.fft.irfft(J.numpy.fft.rfft(x)), (X,)),
        "fft2": (lambda J: lambda x: J.numpy.real(J.numpy.fft.fft2(x)), (X,)),
        # random (threefry: the same bits in both modules)
        "random.normal": (lambda J: lambda x: J.random.normal(J.random.PRNGKey(0), x.shape)
                          + x, (X,)),
        "random.uniform": (lambda J: lambda x: J.random.uniform(J.random.PRNGKey(1), x.shape),
                           (X,)),
        "random.bits": (lambda J: lambda x: J.random.bits(J.random.PRNGKey(2), (4, 8)), (X,)),
        "random.split": (lambda J: lambda x: J.random.key_data(J.random.split(
            J.random.key(3), 4)), (X,)),
        "random.categorical": (lambda J: lambda x: J.random.categorical(
            J.random.PRNGKey(4), x, axis=1), (X,)),
        "random.permutation": (lambda J: lambda v: J.random.permutation(J.random.PRNGKey(5),
                                                                        v), (V,)),
        # nn
        "nn.relu_gelu": (lambda J: lambda x: J.nn.gelu(J.nn.relu(x) - 0.5), (X,)),
        "nn.softmax": (lambda J: lambda x: J.nn.softmax(x, axis=1), (X,)),
        "nn.silu": (lambda J: J.nn.silu, (X,)),
        "nn.dot_product_attention": (lambda J: lambda q: J.nn.dot_product_attention(
            q.reshape(1, 8, 2, 8), q.reshape(1, 8, 2, 8), q.reshape(1, 8, 2, 8)), (X,)),
        # callbacks (host round trips from the device)
        "pure_callback": (lambda J: lambda x: J.pure_callback(
            _host_sin, J.ShapeDtypeStruct(x.shape, x.dtype), x), (X,)),
        "pure_callback_vmap": (lambda J: J.vmap(lambda r: J.pure_callback(
            _host_sin, J.ShapeDtypeStruct(r.shape, r.dtype), r, vmap_method="sequential")),
            (X,)),
        "io_callback_ordered": (lambda J: lambda x: J.experimental.io_callback(
            _host_sin, J.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True), (X,)),
        "debug.print": (lambda J: lambda x: (J.debug.print("tpu_ops debug.print {}", x[0, 0]),
                                             x * 2)[1], (X,)),
        "debug.callback": (lambda J: lambda x: (J.debug.callback(lambda v: None, x),
                                                x + 1)[1], (X,)),
    })
    return ops


OPS = _ops()


def _leaves(J, out) -> list[np.ndarray]:
    return [np.asarray(v) for v in J.tree_util.tree_leaves(out)]


def _max_diff(got: list, want: list) -> float:
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return float("inf")
        g, w = g.astype(np.float64), w.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        d = np.where(both_nan, 0.0, np.abs(g - w) / np.maximum(1.0, np.abs(w)))
        worst = max(worst, float(np.max(d, initial=0.0)))
    return worst if np.isfinite(worst) else float("inf")


def _error(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:300]


def _run(J, name: str, jitted: bool):
    program, args = OPS[name]
    f = program(J)
    precision = "default" if name.endswith("default") else "highest"
    with J.default_matmul_precision(precision):
        out = (J.jit(f) if jitted else f)(*args)
        return _leaves(J, J.block_until_ready(out))


def run_op(name: str, jax, minijax) -> dict:
    """One operation's entry: each of the three runs "ok" or its error, and the differences
    from JAX's jitted result."""
    entry = {"name": name}
    results = {}
    for key, J, jitted in (("jax", jax, True), ("minijax", minijax, True),
                           ("eager", minijax, False)):
        try:
            results[key] = _run(J, name, jitted)
            entry[key] = "ok"
        except Exception as e:  # any failure is data: the entry records it
            entry[key] = _error(e)
    want = results.get("jax")
    entry["max_diff"] = (_max_diff(results["minijax"], want)
                         if want is not None and "minijax" in results else None)
    entry["eager_max_diff"] = (_max_diff(results["eager"], want)
                               if want is not None and "eager" in results else None)
    return entry


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="the JSON file to write")
    parser.add_argument("--only", default="", help="comma-separated operation names")
    parser.add_argument("--list", action="store_true", help="print the names and stop")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"put summary() of {DEFAULT_OUT.name} in docs/conformance.md, stop")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(OPS))
        return {}
    if args.write_docs:
        DOCS.write_text(docs_with_summary(DOCS.read_text(), summary()))
        print(f"wrote {DOCS.relative_to(ROOT)}")
        return {}
    names = [n for n in args.only.split(",") if n] or list(OPS)
    unknown = [n for n in names if n not in OPS]
    if unknown:
        parser.error(f"unknown operations: {', '.join(unknown)} (see --list)")
    from tools._chip import no_accelerator
    if no_accelerator(f"{DEFAULT_OUT.name} is the chip's record, not written (--out elsewhere "
                      "runs here)", allow=Path(args.out).resolve() != DEFAULT_OUT):
        return {}
    import jax  # the reference, and the device

    import minijax
    start = time.perf_counter()
    ops = []
    for name in names:
        ops.append(run_op(name, jax, minijax))
        e = ops[-1]
        diff = "-" if e["max_diff"] is None else f"{e['max_diff']:.2g}"
        print(f"{name:34s} jax {e['jax'][:20]:20s} minijax {e['minijax'][:40]:40s} "
              f"diff {diff}", flush=True)
    device = jax.devices()[0]
    data = {"device_kind": device.device_kind, "platform": device.platform,
            "jax": jax.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "seconds": round(time.perf_counter() - start, 1), "ops": ops}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(summary(data))
    print(f"wrote {out}")
    return data


# The tolerance under which a jitted result counts as JAX's on the same chip (float32 programs;
# transcendental functions and reductions may round differently by a few ulps).
TOLERANCE = 1e-4


def summary(data: dict | None = None, path: Path = DEFAULT_OUT) -> str:
    """One paragraph for docs/conformance.md: how many operations ran under both modules on
    which device, how many agree with JAX, and which do not; says so when there is no data
    or when the data comes from a CPU."""
    if data is None:
        if not path.exists():
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            return (f"No chip data: `{shown}` has not been written yet "
                    "(run tools/tpu_ops.py on a TPU machine and commit the file).")
        data = json.loads(path.read_text())
    ops = data["ops"]
    both = [o for o in ops if o["jax"] == "ok" and o["minijax"] == "ok"]
    close = [o for o in both if o["max_diff"] is not None and o["max_diff"] <= TOLERANCE]
    failing = [o["name"] for o in ops if o["jax"] == "ok" and o["minijax"] != "ok"]
    far = [f"{o['name']} ({o['max_diff']:.2g})" for o in both if o not in close]
    eager = [o for o in ops if o.get("eager") == "ok"]
    where = data["device_kind"] + (" — a CPU, not the chip" if data.get("platform") == "cpu"
                                   else "")
    text = (f"On {where} (JAX {data['jax']}, {data['date']}): {len(ops)} operations; "
            f"{len(both)} run jitted under both modules and {len(close)} of them agree with "
            f"JAX within {TOLERANCE:g}; {len(eager)} also run eagerly under minijax.")
    if failing:
        text += f" Fail under minijax only: {', '.join(failing)}."
    if far:
        text += f" Differ from JAX: {', '.join(far)}."
    return text


DOCS = ROOT / "docs" / "conformance.md"
_MARKS = ("<!-- tpu-ops: written by tools/tpu_ops.py --write-docs -->", "<!-- /tpu-ops -->")


def docs_with_summary(text: str, line: str) -> str:
    """`text` (docs/conformance.md) with the paragraph between its tpu-ops marks replaced."""
    start, end = text.index(_MARKS[0]) + len(_MARKS[0]), text.index(_MARKS[1])
    return f"{text[:start]}\n{line}\n{text[end:]}"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a file: `tools._chip`
    main(sys.argv[1:])
