"""TPU numbers for chapters 16 and 28: the Pallas kernels compiled by Mosaic, timed against
their anchors on the chip, saved as data, read back by the chapters and the compare report.

    python tools/accelerator_tpu.py [--out chapters/data/accelerator-tpu.json] [--quick]

Where `jax.devices()[0].platform == "tpu"` it measures, in one process, each kernel of
`compare/_pallas_kernels.py` and `compare/_ragged_kernels.py` compiled by Mosaic
(`interpret=False`) against the anchor that kernel claims to beat, timed in the same process:

| rows named        | kernel                               | ref (the anchor)                |
| ----------------- | ------------------------------------ | ------------------------------- |
| `flash_fwd*`      | FlashAttention forward               | `jax_flash_attention`, and at   |
|                   |                                      | seq 8192 also `xla_attention`   |
| `flash_fwdbwd*`   | forward + backward (`jax.vjp`)       | `jax_flash_attention`           |
| `matmul*`         | tiled matmul, bias + ReLU epilogue   | `xla_dot` (XLA's dot+bias+ReLU) |
| `gmm*`, `tgmm*`   | grouped matmul and its weight grad   | `ragged_dot` (and its vjp)      |
| `fused_mlp_fwd*`, | the fused expert MLP, and with its   | `two_ragged_dots` (two          |
| `fused_mlp_fwdbwd*` | backward                           | `lax.ragged_dot`s + SiLU)       |

Block sizes are searched, not guessed: each kernel runs at every candidate tiling of
`CANDIDATES` that is legal for the shape (a few timed calls each), and the best is timed
again (median of `--reps` calls after a warm-up); the whole search is kept under "autotune".
The anchors get the same treatment where they have block sizes (JAX's flash attention).
Times are wall clock of compiled calls with `block_until_ready`; TFLOP/s count the matmul
FLOPs (`attention_flops`, `2*M*N*K`, `4*M*D*F` for the MLP), the same count for a kernel and
its anchor, so their ratio is a ratio of times. Errors (`max_err`) are the largest absolute
difference from a float32 reference computed on the chip at `precision="highest"`, divided
by the reference's largest magnitude.

Without a TPU it measures nothing and writes nothing (`--smoke` runs every measurement at
tiny sizes in interpret mode, for tests/accelerator_tpu_test.py). How to run it on the TPU
machine (JAX 0.10.2 with libtpu; the project is not installed there), from the repository root:

    PYTHONPATH=$PWD:$PYTHONPATH python3 tools/accelerator_tpu.py --out $OUT/accelerator-tpu.json

It takes a few minutes (a Mosaic compile per kernel and tiling); commit the file as
`chapters/data/accelerator-tpu.json`, then refresh the chapters' shown outputs with
`tools/update_chapter_outputs.py chapters/16-pallas.md` (and 28).

The file: `{"device_kind", "jax", "date", "peak_tflops", "hbm_gbs", "rows": [{"name", "shape",
"dtype", "ms", "tflops", "ref", "ref_ms", "max_err", ...}], "autotune": {...}}`.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PATH = ROOT / "chapters" / "data" / "accelerator-tpu.json"

# bf16 peak (TFLOP/s) and HBM bandwidth (GB/s) per chip, from Google Cloud's TPU pages
# (v5e: 197 / 819; v5p: 459 / 2765; v4: 275 / 1200; v6e: 918 / 1640). `device_kind` of a
# v5e is "TPU v5 lite".
CHIPS = (("TPU v5 lite", 197.0, 819.0), ("TPU v5e", 197.0, 819.0), ("TPU v5p", 459.0, 2765.0),
         ("TPU v5", 459.0, 2765.0), ("TPU v4", 275.0, 1200.0), ("TPU v6", 918.0, 1640.0))

# The tilings searched per kernel family; those that do not divide the shape are skipped.
CANDIDATES = {
    "flash": [(256, 512), (512, 512), (512, 1024), (1024, 512), (1024, 1024)],
    "jax_flash": [256, 512, 1024],
    "matmul": [(512, 512, 512), (512, 1024, 512), (1024, 1024, 512), (512, 512, 1024),
               (1024, 512, 1024), (256, 1024, 1024)],
    "gmm": [(256, 512, 512), (512, 512, 512), (512, 1024, 512), (512, 512, 1024),
            (256, 1024, 1024), (512, 1024, 1024)],
    # (bm, bf): bf = F keeps a group's weights resident across its row tiles (the forward's
    # best, 1.596 ms at D 1024, F 4096); the backward shrinks bf to fit its VMEM and runs best
    # at 128 rows (3.19 ms at (128, 2048)); 512-row tiles spill (2.2 ms forward)
    "mlp": [(256, 4096), (128, 4096), (256, 8192), (256, 2048), (128, 2048), (128, 1024),
            (256, 1024)],
}


def chip(device_kind: str) -> tuple[float | None, float | None]:
    """(bf16 peak TFLOP/s, HBM GB/s) of `device_kind`, or (None, None) if not in CHIPS."""
    for name, peak, hbm in CHIPS:
        if name.lower() in device_kind.lower():
            return peak, hbm
    return None, None


def attention_flops(batch_heads: int, seq: int, d: int, *, causal: bool,
                    backward: bool) -> float:
    """Matmul FLOPs of attention: QK^T and PV, 2 matmuls of 2*seq*seq*d per head; the backward
    adds 5 more (S recomputed, dV, dP, dQ, dK), so forward+backward is 3.5x the forward; a
    causal mask halves both."""
    fwd = 4.0 * batch_heads * seq * seq * d * (0.5 if causal else 1.0)
    return fwd * 3.5 if backward else fwd


def mlp_flops(m: int, d: int, f: int, *, backward: bool) -> float:
    """The expert MLP's matmul FLOPs: up (2*m*d*f) and down (2*m*d*f); the backward adds four
    more of the same size (dH, dX, dW_up, dW_down) and recomputes the up projection where it
    does not store it; counted as 3x the forward for every implementation."""
    fwd = 4.0 * m * d * f
    return 3 * fwd if backward else fwd


def median_seconds(fn, *args, reps: int) -> float:
    """Median wall time of `fn(*args)` over `reps` calls after one warm-up call."""
    import jax
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def pipelined_seconds(fn, *args, reps: int) -> float:
    """Wall time per call of `reps` calls dispatched back to back and waited for once: the
    device's time when the host keeps ahead of it (a training loop), where `median_seconds`
    adds each call's dispatch to its device time."""
    import jax
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    outs = [fn(*args) for _ in range(reps)]
    jax.block_until_ready(outs)
    return (time.perf_counter() - t0) / reps


def compiled_ops(jitted, args) -> list[str]:
    """The opcodes of the optimized HLO XLA compiled for `jitted(*args)`, in order: two
    programs with equal lists differ at most in names, metadata and constants."""
    text = jitted.trace(*args).lower().compile().as_text()
    return re.findall(r"^\s*(?:ROOT )?%?[\w.-]+ = [^ ]+ ([a-z][\w-]*)\(", text, re.M)


def compare_compiled(ours: list[str], theirs: list[str]) -> dict:
    """Whether two compiled programs have the same ops; if not, the first lines of the diff."""
    if ours == theirs:
        return {"compiled_ops_equal": True}
    diff = difflib.unified_diff(theirs, ours, "jax", "minijax", lineterm="", n=1)
    return {"compiled_ops_equal": False, "compiled_ops_diff": list(diff)[:30]}


def rel_err(got, want) -> float:
    """max |got - want| / max |want| over one array or a tuple of them, in float32."""
    def leaves(x):
        return [y for e in x for y in leaves(e)] if isinstance(x, (tuple, list)) else [x]
    got, want = leaves(got), leaves(want)
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
        worst = max(worst, float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30)))
    return worst


def _error(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}" if str(e).strip() \
        else type(e).__name__


class Bench:
    """The measuring state of one run: the modules, sizes, repetitions, and the results."""

    def __init__(self, *, interpret, reps: int, search_reps: int, smoke: bool) -> None:
        import jax
        from jax.experimental import pallas as jpl
        from jax.experimental.pallas import tpu as jpltpu, triton as jplgpu

        from compare import _pallas_kernels, _ragged_kernels
        self.jax, self.jnp = jax, jax.numpy
        self.K = _pallas_kernels.build(jax, jpl, jplgpu, pltpu=jpltpu, interpret=interpret)
        self.R = _ragged_kernels.build(jax, jpl, jpltpu, interpret=interpret)
        self.reps, self.search_reps, self.smoke = reps, search_reps, smoke
        self.rows: list[dict] = []
        self.autotune: dict[str, list] = {}
        self.rng = np.random.default_rng(0)
        self.small_kernels: list[dict] = []
        self.small = True  # also time compare/_mosaic_kernels.py's small kernels
        self.prior: list[dict] = []  # rows of an earlier run: tilings when a family is skipped
        self.save = lambda: None  # called after each row: a run cut short keeps its rows

    def normal(self, shape, dtype=None, scale=1.0):
        dtype = dtype or self.jnp.bfloat16
        x = (scale * self.rng.standard_normal(shape)).astype(np.float32)
        return self.jax.device_put(x).astype(dtype)

    def search(self, key: str, make, candidates, *args):
        """Time `make(c)` (a jitted function of `args`) for each candidate tiling `c`; keep
        the table under `key`; return (best candidate, its function) or (None, error)."""
        table, best = [], (math.inf, None, None)
        for c in candidates:
            try:
                f = make(c)
                s = median_seconds(f, *args, reps=self.search_reps)
                table.append({"tiling": list(c) if isinstance(c, tuple) else c, "ms": 1e3 * s})
                if s < best[0]:
                    best = (s, c, f)
            except Exception as e:  # a tiling Mosaic refuses (VMEM, layout)
                table.append({"tiling": list(c) if isinstance(c, tuple) else c,
                              "error": _error(e)})
        self.autotune[key] = table
        if best[2] is None:
            return None, (table[-1]["error"] if table else "no legal tiling")
        return best[1], best[2]

    def row(self, name, shape, dtype, *, ms, flops, ref, ref_ms, max_err, nbytes=None,
            **extra):
        """One kernel against its anchor; `nbytes`: the compulsory HBM traffic (every input
        read once, every output written once), for the roofline's intensity."""
        r = {"name": name, "shape": list(shape), "dtype": dtype, "ms": ms, "flops": flops,
             "bytes": nbytes,
             "tflops": None if ms is None else flops / (ms * 1e-3) / 1e12, "ref": ref,
             "ref_ms": ref_ms,
             "ref_tflops": None if ref_ms is None else flops / (ref_ms * 1e-3) / 1e12,
             "speedup": None if ms is None or ref_ms is None else ref_ms / ms,
             "max_err": max_err, **extra}
        self.rows.append(r)
        print(_row_text(r), flush=True)
        self.save()
        return r


# ------------------------------------------------------------------ FlashAttention
def fwd_bwd(J, f):
    """`(*args, ct) -> (f(*args), vjp(ct))`, jitted: forward and backward both timed (a
    backward alone would let XLA drop the forward's unused outputs, and with them a forward
    kernel whose custom_vjp saves only its inputs)."""
    def both(*args):
        out, f_vjp = J.vjp(f, *args[:-1])
        return out, f_vjp(args[-1])
    return J.jit(both)


def _references(b: Bench, f, args):
    """`f(*args[:-1])` and `(f(...), cotangents at args[-1])`, from float32 copies of the
    inputs at `precision="highest"`: what a bf16 kernel is compared with."""
    with b.jax.default_matmul_precision("highest"):
        f32 = [a.astype(b.jnp.float32) for a in args]
        return b.jax.jit(f)(*f32[:-1]), fwd_bwd(b.jax, f)(*f32)


def _flash_anchor(causal: bool, d: int, blk: int):
    """JAX's own TPU flash attention at blocks of `blk`, on [BH, S, D] (as one batch)."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    sizes = fa.BlockSizes(
        block_q=blk, block_k_major=blk, block_k=blk, block_b=1, block_q_major_dkv=blk,
        block_k_major_dkv=blk, block_k_dkv=blk, block_q_dkv=blk, block_k_major_dq=blk,
        block_k_dq=blk, block_q_dq=blk)
    return lambda q, k, v: fa.flash_attention(
        q[None], k[None], v[None], causal=causal, sm_scale=1.0 / math.sqrt(d),
        block_sizes=sizes)[0]


def measure_flash(b: Bench, shapes) -> None:
    """Forward and forward+backward of `K.flash_attention` against JAX's TPU flash attention
    (`jax.experimental.pallas.ops.tpu.flash_attention`, its best block size of
    CANDIDATES["jax_flash"]), and the forward against XLA's attention (scores materialised)."""
    for bh, seq, d, causal in shapes:
        _flash_shape(b, bh, seq, d, causal)


def _flash_shape(b: Bench, bh: int, seq: int, d: int, causal: bool) -> None:
    jax, K = b.jax, b.K
    q, k, v, do = (b.normal((bh, seq, d)) for _ in range(4))
    tag = f"s{seq}{'_causal' if causal else ''}"
    shape = (bh, seq, d)
    ref_o, ref_g = _references(b, lambda q, k, v: K.attention_ref(q, k, v, causal),
                               (q, k, v, do))
    cands = [c for c in CANDIDATES["flash"] if seq % c[0] == 0 and seq % c[1] == 0]
    jcands = [c for c in CANDIDATES["jax_flash"] if seq % c == 0]
    if b.smoke:
        cands, jcands = [(128, 128)], [128]
    cases = (("fwd", jax.jit, (q, k, v), ref_o, False),
             ("fwdbwd", lambda f: fwd_bwd(jax, f), (q, k, v, do), ref_g, True))
    for what, wrap, args, ref_out, backward in cases:
        name = f"flash_{what}_{tag}"
        flops = attention_flops(bh, seq, d, causal=causal, backward=backward)
        c, f = b.search(name, lambda c, wrap=wrap: wrap(
            lambda q, k, v: K.flash_attention(q, k, v, c[0], c[1], causal)), cands, *args)
        jc, jf = (None, "skipped") if b.smoke else b.search(
            f"jax_flash_attention_{what}_{tag}",
            lambda c, wrap=wrap: wrap(_flash_anchor(causal, d, c)), jcands, *args)
        ms = None if c is None else 1e3 * median_seconds(f, *args, reps=b.reps)
        ref_ms = None if jc is None else 1e3 * median_seconds(jf, *args, reps=b.reps)
        err = None if c is None else rel_err(f(*args), ref_out)
        b.row(name, shape, "bfloat16", ms=ms, flops=flops, ref="jax_flash_attention",
              nbytes=2 * bh * seq * d * (4 if what == "fwd" else 9),
              ref_ms=ref_ms, max_err=err, causal=causal, tiling=c, ref_tiling=jc,
              error=None if c is not None else f,
              ref_error=None if jc is not None else jf)
        if what == "fwd" and (seq >= 8192 or b.smoke):
            _flash_vs_xla(b, name, shape, q, k, v, causal, ms=ms, flops=flops, err=err, c=c)


def _flash_vs_xla(b: Bench, name, shape, q, k, v, causal, *, ms, flops, err, c) -> None:
    """XLA's attention, `jax.nn.dot_product_attention(implementation="xla")`, heads as its
    [B, S, N, H] layout wants (the transposes are outside the timing)."""
    jax, jnp = b.jax, b.jnp
    xla = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(
        q, k, v, is_causal=causal, implementation="xla"))
    q4, k4, v4 = (jnp.transpose(x, (1, 0, 2))[None] for x in (q, k, v))
    try:
        x_ms, xerr = 1e3 * median_seconds(xla, q4, k4, v4, reps=max(3, b.reps // 4)), None
    except Exception as e:  # out of memory at long sequences
        x_ms, xerr = None, _error(e)
    bh, seq, d = shape
    b.row(f"{name}_vs_xla", shape, "bfloat16", ms=ms, flops=flops, nbytes=2 * bh * seq * d * 4,
          ref="xla_attention", ref_ms=x_ms, max_err=err, causal=causal, tiling=c,
          ref_error=xerr)


# ------------------------------------------------------------------ matmul
def measure_matmul(b: Bench, sizes) -> None:
    """`K.matmul` (bias + ReLU fused into the last K step) against XLA's `dot` + bias + ReLU
    jitted together (XLA fuses the epilogue into the dot's output where it can), bf16 in,
    bf16 out, float32 accumulation in both."""
    for n in sizes:
        _matmul_size(b, n)


def _matmul_size(b: Bench, n: int) -> None:
    jax, jnp, K = b.jax, b.jnp, b.K
    x, w = b.normal((n, n)), b.normal((n, n), scale=1 / math.sqrt(n))
    bias = b.normal((n,))
    with jax.default_matmul_precision("highest"):
        ref = jax.jit(lambda x, w, bias: K.matmul_ref(
            x.astype(jnp.float32), w.astype(jnp.float32), bias.astype(jnp.float32)))(
                x, w, bias)

    def xla(x, w, bias):
        y = jnp.dot(x, w, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
        return jnp.maximum(y, 0.0).astype(x.dtype)

    def ours(c):
        return jax.jit(lambda x, w, bias: K.matmul(
            x, w, bias, bm=c[0], bn=c[1], bk=c[2], activation="relu").astype(x.dtype))

    cands = [c for c in CANDIDATES["matmul"] if all(n % t == 0 for t in c)]
    if b.smoke:
        cands = [(n // 2, n // 2, n // 2)]
    name = f"matmul_{n}"
    c, f = b.search(name, ours, cands, x, w, bias)
    ms = None if c is None else 1e3 * median_seconds(f, x, w, bias, reps=b.reps)
    ref_ms = 1e3 * median_seconds(jax.jit(xla), x, w, bias, reps=b.reps)
    b.row(name, (n, n, n), "bfloat16", ms=ms, flops=2.0 * n ** 3, ref="xla_dot",
          nbytes=2 * (3 * n * n + n),
          ref_ms=ref_ms, max_err=None if c is None else rel_err(f(x, w, bias), ref),
          tiling=c, error=None if c is not None else f)


# ------------------------------------------------------------------ gmm, tgmm
def uneven_groups(rng, m: int, g: int) -> np.ndarray:
    """`g` group sizes summing to `m`, uneven (Dirichlet-drawn), the second one empty."""
    p = rng.dirichlet(np.full(g, 0.7))
    sizes = np.floor(p * m).astype(np.int32)
    if g > 1:
        sizes[1] = 0
    sizes[0] += m - sizes.sum()
    return sizes


def measure_gmm(b: Bench, shapes) -> None:
    """`R.gmm` against `lax.ragged_dot`, and `R.tgmm` against ragged_dot's weight gradient
    (its vjp with respect to the weights), over uneven groups with an empty one."""
    for m, k, n, g in shapes:
        _gmm_shape(b, m, k, n, g)


def _gmm_shape(b: Bench, m: int, k: int, n: int, g: int) -> None:
    jax, jnp, R = b.jax, b.jnp, b.R
    gs = jax.device_put(uneven_groups(b.rng, m, g))
    lhs, rhs = b.normal((m, k)), b.normal((g, k, n), scale=1 / math.sqrt(k))
    dy = b.normal((m, n))

    def weight_grad(l, dy, gs, rhs=rhs):
        return jax.vjp(lambda r: jax.lax.ragged_dot(l, r, gs), rhs)[1](dy)[0]

    with jax.default_matmul_precision("highest"):
        f32 = [a.astype(jnp.float32) for a in (lhs, rhs, dy)]
        ref = jax.jit(jax.lax.ragged_dot)(f32[0], f32[1], gs)
        ref_t = jax.jit(lambda l, dy, gs: weight_grad(l, dy, gs, f32[1]))(f32[0], f32[2], gs)
    cands = [c for c in CANDIDATES["gmm"] if m % c[0] == 0 and k % c[1] == 0 and
             n % c[2] == 0]
    if b.smoke:
        cands = [(m // 4, k, n)]
    cases = ((f"gmm_m{m}_g{g}", R.gmm, (lhs, rhs, gs), jax.jit(jax.lax.ragged_dot), ref),
             (f"tgmm_m{m}_g{g}", R.tgmm, (lhs, dy, gs), jax.jit(weight_grad), ref_t))
    for name, kernel, args, ref_f, want in cases:
        c, f = b.search(name, lambda c, kernel=kernel: jax.jit(
            lambda x, y, gs: kernel(x, y, gs, tiling=c)), cands, *args)
        ms = None if c is None else 1e3 * median_seconds(f, *args, reps=b.reps)
        ref_ms = 1e3 * median_seconds(ref_f, *args, reps=b.reps)
        b.row(name, (m, k, n, g), "bfloat16", ms=ms, flops=2.0 * m * k * n, ref="ragged_dot",
              nbytes=2 * (m * k + g * k * n + m * n),
              ref_ms=ref_ms, max_err=None if c is None else rel_err(f(*args), want),
              tiling=c, group_sizes=[int(s) for s in np.asarray(gs)],
              error=None if c is not None else f)


# ------------------------------------------------------------------ fused expert MLP
def measure_fused_mlp(b: Bench, shapes) -> None:
    """`R.fused_mlp` (forward, and forward+backward through its custom_vjp) against
    `R.ragged_mlp`, two `lax.ragged_dot`s with SiLU between (and its autodiff backward)."""
    for m, d, f_dim, g in shapes:
        _mlp_shape(b, m, d, f_dim, g)


def _mlp_shape(b: Bench, m: int, d: int, f_dim: int, g: int) -> None:
    jax, R = b.jax, b.R
    gs = jax.device_put(uneven_groups(b.rng, m, g))
    x = b.normal((m, d))
    up = b.normal((g, d, f_dim), scale=1 / math.sqrt(d))
    down = b.normal((g, f_dim, d), scale=1 / math.sqrt(f_dim))
    dy = b.normal((m, d))
    unfused = lambda x, u, w: R.ragged_mlp(x, u, w, gs)
    ref, ref_g = _references(b, unfused, (x, up, down, dy))
    cands = [c for c in CANDIDATES["mlp"] if m % c[0] == 0 and f_dim % c[1] == 0]
    if b.smoke:
        cands = [(m // 4, f_dim // 2)]

    def fused_fwd(c):
        return jax.jit(lambda x, u, w: R.fused_mlp_fwd(x, u, w, gs, tiling=c))

    def fused_both(c):
        return fwd_bwd(jax, lambda x, u, w: R.fused_mlp(x, u, w, gs, c))

    cases = ((f"fused_mlp_fwd_d{d}_f{f_dim}", fused_fwd, (x, up, down), jax.jit(unfused), ref,
              False, 2 * (2 * m * d + 2 * g * d * f_dim)),
             (f"fused_mlp_fwdbwd_d{d}_f{f_dim}", fused_both, (x, up, down, dy),
              fwd_bwd(jax, unfused), ref_g, True, 2 * (3 * m * d + 4 * g * d * f_dim)))
    for name, make, args, ref_f, want, backward, nbytes in cases:
        c, f = b.search(name, make, cands, *args)
        ms = None if c is None else 1e3 * median_seconds(f, *args, reps=b.reps)
        ref_ms = 1e3 * median_seconds(ref_f, *args, reps=b.reps)
        b.row(name, (m, d, f_dim, g), "bfloat16", ms=ms,
              flops=mlp_flops(m, d, f_dim, backward=backward), nbytes=nbytes,
              ref="two_ragged_dots", ref_ms=ref_ms,
              max_err=None if c is None else rel_err(f(*args), want), tiling=c,
              error=None if c is not None else f)


# ------------------------------------------------------------------ minijax's Mosaic compiler
def _best_tiling(b: Bench, name: str, default):
    """The tiling the search of this run (or else of `--tilings-from`'s run) chose."""
    for r in b.rows + b.prior:
        if r["name"] == name and "impl" not in r and r.get("tiling") is not None:
            return tuple(r["tiling"])
    return default


def measure_minijax(b: Bench, shapes) -> None:
    """The same kernel sources built against minijax (`minijax.experimental.pallas`,
    `interpret=False`: minijax's own lowering to Mosaic) and against JAX, at the tiling the
    search above chose, on the same inputs: rows `"impl": "minijax_pallas"` with `ref`
    `"jax_pallas"` (JAX's Pallas compiling the same source) and whether the bits are equal.
    The small kernels of compare/_mosaic_kernels.py go under "minijax_small_kernels"."""
    import minijax
    from compare import _mosaic_kernels, _pallas_kernels, _ragged_kernels
    from minijax.experimental import pallas as mpl
    from minijax.experimental.pallas import tpu as mpltpu, triton as mplgpu
    jax = b.jax
    M = _pallas_kernels.build(minijax, mpl, mplgpu, pltpu=mpltpu, interpret=b.smoke)
    MR = _ragged_kernels.build(minijax, mpl, mpltpu, interpret=b.smoke)
    (bh, seq, d), n, (m, k, nn, g), (mm, dd, ff, gg) = (
        shapes["flash"], shapes["matmul"], shapes["gmm"], shapes["mlp"])
    q, kk, v, do = (b.normal((bh, seq, d)) for _ in range(4))
    x, w, bias = b.normal((n, n)), b.normal((n, n), scale=1 / math.sqrt(n)), b.normal((n,))
    gs = jax.device_put(uneven_groups(b.rng, m, g))
    lhs, rhs = b.normal((m, k)), b.normal((g, k, nn), scale=1 / math.sqrt(k))
    gs2 = jax.device_put(uneven_groups(b.rng, mm, gg))
    xm, up = b.normal((mm, dd)), b.normal((gg, dd, ff), scale=1 / math.sqrt(dd))
    down, dym = b.normal((gg, ff, dd), scale=1 / math.sqrt(ff)), b.normal((mm, dd))
    fc = _best_tiling(b, f"flash_fwd_s{seq}", (128, 128) if b.smoke else (512, 512))
    fbc = _best_tiling(b, f"flash_fwdbwd_s{seq}", fc)
    mc = _best_tiling(b, f"matmul_{n}", (n // 2,) * 3 if b.smoke else (512, 512, 512))
    gc = _best_tiling(b, f"gmm_m{m}_g{g}", (m // 4, k, nn) if b.smoke else (512, 1024, 512))
    pc = _best_tiling(b, f"fused_mlp_fwd_d{dd}_f{ff}", (mm // 4, ff // 2) if b.smoke
                      else (512, 512))
    pbc = _best_tiling(b, f"fused_mlp_fwdbwd_d{dd}_f{ff}", pc)

    def both(J, K, R):
        def vjp(f, *args):  # the forward's output too, as fwd_bwd
            out, f_vjp = J.vjp(f, *args[:-1])
            return out, f_vjp(args[-1])

        return {
            f"flash_fwd_s{seq}": (lambda q, k, v: K.flash_attention(q, k, v, *fc, False),
                                  (q, kk, v), attention_flops(bh, seq, d, causal=False,
                                                              backward=False)),
            f"flash_fwdbwd_s{seq}": (lambda q, k, v, do: vjp(
                lambda q, k, v: K.flash_attention(q, k, v, *fbc, False), q, k, v, do),
                (q, kk, v, do), attention_flops(bh, seq, d, causal=False, backward=True)),
            f"matmul_{n}": (lambda x, w, bias: K.matmul(x, w, bias, bm=mc[0], bn=mc[1],
                                                        bk=mc[2], activation="relu"),
                            (x, w, bias), 2.0 * n ** 3),
            f"gmm_m{m}_g{g}": (lambda l, r, gs: R.gmm(l, r, gs, tiling=gc), (lhs, rhs, gs),
                               2.0 * m * k * nn),
            f"fused_mlp_fwd_d{dd}_f{ff}": (
                lambda x, u, w, gs: R.fused_mlp_fwd(x, u, w, gs, tiling=pc),
                (xm, up, down, gs2), mlp_flops(mm, dd, ff, backward=False)),
            f"fused_mlp_fwdbwd_d{dd}_f{ff}": (
                lambda x, u, w, gs, dy: vjp(lambda x, u, w: R.fused_mlp(x, u, w, gs, pbc),
                                            x, u, w, dy),
                (xm, up, down, gs2, dym), mlp_flops(mm, dd, ff, backward=True)),
        }

    ours, theirs = both(minijax, M, MR), both(jax, b.K, b.R)
    for name, (f, args, flops) in ours.items():
        jf = jax.jit(theirs[name][0])
        try:
            margs = [minijax.device_put(np.asarray(a)) for a in args]
            mf = minijax.jit(f)
            got = minijax.tree_util.tree_leaves(mf(*margs))
            want = jax.tree_util.tree_leaves(jf(*args))
            bits = len(got) == len(want) and all(
                np.array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32),
                               equal_nan=True) for x, y in zip(got, want))
            err = rel_err(got, want)
            ms = 1e3 * median_seconds(mf, *margs, reps=b.reps)
            extra = {"pipelined_ms": 1e3 * pipelined_seconds(mf, *margs, reps=b.reps),
                     "ref_pipelined_ms": 1e3 * pipelined_seconds(jf, *args, reps=b.reps),
                     **compare_compiled(compiled_ops(mf, margs), compiled_ops(jf, args))}
            error = None
        except Exception as e:  # a primitive minijax cannot lower yet
            ms, bits, err, error, extra = None, False, None, _error(e), {}
        ref_ms = 1e3 * median_seconds(jf, *args, reps=b.reps)
        b.row(name, [a.shape for a in args][0], "bfloat16", ms=ms, flops=flops,
              ref="jax_pallas", ref_ms=ref_ms, max_err=err, impl="minijax_pallas",
              bits_equal=bool(bits), error=error, **extra)
    if not b.smoke and b.small:
        small = []
        for kernel in sorted({**_mosaic_kernels.KERNELS, **_mosaic_kernels.TPU_ONLY}):
            try:
                small += _mosaic_kernels.run_on_tpu(names=[kernel], reps=b.reps)
            except Exception as e:  # keep the others
                small.append({"kernel": kernel, "impl": "minijax_pallas", "ref": "jax_pallas",
                              "error": _error(e)})
        b.small_kernels = small


# ------------------------------------------------------------------ the run
def plan(quick: bool, smoke: bool) -> dict:
    """The shapes of each measurement: full (about 5-8 minutes on a v5e), --quick, --smoke."""
    if smoke:
        return {"flash": [(2, 256, 128, False), (2, 256, 128, True)], "matmul": [256],
                "gmm": [(512, 128, 256, 4)], "mlp": [(512, 128, 256, 4)],
                "minijax": {"flash": (2, 256, 128), "matmul": 256, "gmm": (512, 128, 256, 4),
                            "mlp": (512, 128, 256, 4)}}
    if quick:
        return {"flash": [(16, 2048, 128, False), (16, 8192, 128, True)], "matmul": [4096],
                "gmm": [(8192, 1024, 4096, 8)], "mlp": [(8192, 1024, 4096, 8)],
                "minijax": {"flash": (16, 2048, 128), "matmul": 4096,
                            "gmm": (8192, 1024, 4096, 8), "mlp": (8192, 1024, 4096, 8)}}
    return {"flash": [(32, 2048, 128, False), (32, 2048, 128, True), (16, 8192, 128, False),
                      (16, 8192, 128, True)],
            "matmul": [2048, 4096, 8192],
            "gmm": [(4096, 1024, 4096, 4), (16384, 1024, 4096, 16), (8192, 1024, 4096, 64)],
            # D 512-2048, F/D 2-8: where fusing pays and where it does not (the crossover)
            "mlp": [(8192, 512, 2048, 8), (8192, 512, 4096, 8), (8192, 1024, 2048, 8),
                    (8192, 1024, 4096, 8), (8192, 1024, 8192, 8), (8192, 2048, 4096, 8),
                    (8192, 2048, 8192, 8)],
            "minijax": {"flash": (32, 2048, 128), "matmul": 4096, "gmm": (8192, 1024, 4096, 8),
                        "mlp": (8192, 1024, 4096, 8)}}


def run(out: Path, *, quick: bool = False, smoke: bool = False, reps: int = 20,
        only: tuple[str, ...] = (), small: bool = True, prior: Path | None = None) -> dict:
    """Measure every family in order, saving `out` after each (a run cut short keeps what it
    measured; a family that raised is saved as its error). Returns the results."""
    import jax
    dev = jax.devices()[0]
    peak, hbm = chip(dev.device_kind)
    bench = Bench(interpret=smoke, reps=1 if smoke else reps, search_reps=1 if smoke else 3,
                  smoke=smoke)
    bench.small = small
    if prior is not None:
        bench.prior = [r for r in json.loads(Path(prior).read_text())["rows"] if "impl" not in r]
    results = {"device_kind": dev.device_kind, "platform": dev.platform, "jax": jax.__version__,
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
               "peak_tflops": peak, "hbm_gbs": hbm, "rows": bench.rows,
               "autotune": bench.autotune, "errors": {}, "seconds": {}}
    shapes = plan(quick, smoke)
    families = (("flash", measure_flash), ("matmul", measure_matmul), ("gmm", measure_gmm),
                ("mlp", measure_fused_mlp), ("minijax", measure_minijax))
    out.parent.mkdir(parents=True, exist_ok=True)
    bench.save = lambda: out.write_text(json.dumps(results, indent=1, default=_json_default)
                                        + "\n")
    for name, measure in families:
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            measure(bench, shapes[name])
        except Exception as e:  # keep the other families
            results["errors"][name] = _error(e)
            print(f"{name}: {_error(e)}", flush=True)
        results["seconds"][name] = round(time.perf_counter() - t0, 1)
        if getattr(bench, "small_kernels", None):
            results["minijax_small_kernels"] = bench.small_kernels
        print(f"{name}: {results['seconds'][name]:.0f} s", flush=True)
        out.write_text(json.dumps(results, indent=1, default=_json_default) + "\n")
    return results


def _json_default(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, tuple):
        return list(x)
    return str(x)


# ------------------------------------------------------------------ the chapters read it back
def load(path: Path = PATH) -> dict | None:
    """The saved TPU run, or None when there is none."""
    return json.loads(Path(path).read_text()) if Path(path).exists() else None


def _fmt(x, spec: str, width: int) -> str:
    return f"{x:{width}{spec}}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def _row_text(r: dict) -> str:
    text = (f"{r['name']:34s}{_fmt(r['ms'], '.3f', 9)}{_fmt(r['tflops'], '.1f', 8)}"
            f"  {r['ref']:20s}{_fmt(r['ref_ms'], '.3f', 9)}{_fmt(r.get('ref_tflops'), '.1f', 8)}"
            f"{_fmt(r.get('speedup'), '.2f', 8)}x{_fmt(r['max_err'], '.1e', 9)}")
    if "bits_equal" in r:
        text += "  same bits" if r["bits_equal"] else "  bits differ"
    for key in ("error", "ref_error"):
        if r.get(key):
            text += f"\n    {key}: {r[key][:100]}"
    if r.get("note") and r.get("impl") is None:
        text += f"\n    ({r['note'][:96]})"
    return text


def show(prefixes: tuple[str, ...] = (), path: Path = PATH, *, impl: str | None = "jax") -> None:
    """Print the rows whose names start with one of `prefixes` (all rows if empty) as a table:
    the kernel's time and TFLOP/s, its anchor's, the speedup (anchor time / kernel time) and
    the error; or say plainly that no TPU run was saved. `impl="jax"`: the kernels under
    JAX's Pallas against their anchors; `"minijax_pallas"`: the same kernels compiled by
    minijax against JAX's Pallas (with whether the bits agree); None: every row."""
    saved = load(path)
    if saved is None:
        where = Path(path).resolve()
        where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
        print(f"No accelerator was used: there is no saved TPU run ({where}),\nso nothing "
              "here was measured on a TPU.")
        return
    print(f"{saved['device_kind']}, JAX {saved['jax']}, measured {saved['date']}; "
          f"bf16 peak {saved['peak_tflops']} TFLOP/s")
    print(f"{'kernel':34s}{'ms':>9}{'TFLOP/s':>8}  {'anchor':20s}{'ms':>9}{'TFLOP/s':>8}"
          f"{'speedup':>9}{'error':>9}")
    for r in saved["rows"]:
        if impl is not None and r.get("impl", "jax") != impl:
            continue
        if not prefixes or r["name"].startswith(prefixes):
            print(_row_text(r))


def show_pipelined(path: Path = PATH) -> None:
    """Print minijax's compiled kernels against JAX's twice: one call at a time (the host's
    dispatch included) and back to back (`pipelined_ms`: 20 calls queued, then one wait, so
    the chip never idles), as minijax / JAX time ratios, and whether the compiled HLO has
    JAX's ops in JAX's order; or say that no TPU run is saved."""
    saved = load(path)
    rows = [r for r in (saved or {}).get("rows", []) if r.get("impl") == "minijax_pallas"
            and r.get("pipelined_ms")]
    if not rows:
        print("No accelerator was used: no pipelined timing of minijax's kernels is saved.")
        return
    print(f"{'kernel':30s}{'one call: minijax/JAX':>23s}{'back to back: minijax/JAX':>27s}"
          f"  compiled HLO ops")
    for r in rows:
        one = f"{r['ms']:.3f}/{r['ref_ms']:.3f} = {r['ms'] / r['ref_ms']:.3f}"
        piped = (f"{r['pipelined_ms']:.3f}/{r['ref_pipelined_ms']:.3f} = "
                 f"{r['pipelined_ms'] / r['ref_pipelined_ms']:.3f}")
        same = "JAX's" if r.get("compiled_ops_equal") else \
            f"{sum(1 for x in r.get('compiled_ops_diff', []) if x[:1] in '+-') - 2} lines differ"
        print(f"{r['name']:30s}{one:>23s}{piped:>27s}  {same}")


def report_section(prefixes: tuple[str, ...], path: Path = PATH) -> str:
    """A markdown section for the compare report: the saved TPU rows of `prefixes` (and the
    same kernels compiled by minijax), with the device named, or a plain statement that no
    TPU run is saved."""
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        show(prefixes, path)
        if load(path) is not None:
            print("\nThe same kernel sources compiled by minijax's Mosaic lowering, against "
                  "JAX's Pallas:")
            show(prefixes, path, impl="minijax_pallas")
    where = "chapters/data/accelerator-tpu.json, written by tools/accelerator_tpu.py on the chip"
    return ("### On a TPU (saved measurements)\n\nNot measured by this run: read from "
            f"{where}.\n\n```\n{buf.getvalue().rstrip()}\n```")


def show_autotune(name: str, path: Path = PATH) -> None:
    """Print the block-size search of kernel row `name` (e.g. "matmul_4096"): each tiling
    tried, its time and TFLOP/s, or why Mosaic refused it; or say that no TPU run is saved."""
    saved = load(path)
    if saved is None:
        print("No accelerator was used: no TPU run is saved, so no block size was measured.")
        return
    flops = next(r["flops"] for r in saved["rows"] if r["name"] == name and "flops" in r)
    print(f"{name} on {saved['device_kind']}: {'tiling':>20} {'ms':>8} {'TFLOP/s':>8}")
    for t in saved["autotune"][name]:
        tiling = str(tuple(t["tiling"]) if isinstance(t["tiling"], list) else t["tiling"])
        if "ms" in t:
            print(f"{'':{len(name) + 18}}{tiling:>20} {t['ms']:8.3f} "
                  f"{flops / (t['ms'] * 1e-3) / 1e12:8.1f}")
        else:
            print(f"{'':{len(name) + 18}}{tiling:>20} refused: {t['error'][:60]}")


def roofline_plot(png: Path, prefixes: tuple[str, ...] = (), path: Path = PATH) -> None:
    """Draw the chip's roofline (bf16 peak, HBM bandwidth) with each kernel of `prefixes` at
    its intensity (FLOPs over compulsory HBM bytes) and measured TFLOP/s, its anchor beside it
    at the same intensity, into `png`; say so when there is no saved TPU run."""
    saved = load(path)
    if saved is None:
        print("No accelerator was used: no TPU run is saved, so there is no roofline to draw.")
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    peak, hbm = saved["peak_tflops"], saved["hbm_gbs"]
    rows = [r for r in saved["rows"] if r.get("impl", "jax") == "jax" and r.get("bytes")
            and r["tflops"] and (not prefixes or r["name"].startswith(prefixes))
            and not r["name"].endswith("_vs_xla")]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = np.logspace(0, 4, 200)
    ax.plot(xs, np.minimum(peak, hbm * xs / 1e3), "k-", lw=1)
    ax.text(xs[-1], peak * 1.05, f"bf16 peak {peak:.0f} TFLOP/s", ha="right", fontsize=8)
    families = (("flash", "FlashAttention"), ("matmul", "matmul"), ("gmm", "gmm"),
                ("tgmm", "tgmm"), ("fused_mlp", "fused expert MLP"))
    for color, (prefix, label) in enumerate(families):
        mine = [r for r in rows if r["name"].startswith(prefix)]
        if not mine:
            continue
        i = [r["flops"] / r["bytes"] for r in mine]
        ax.plot(i, [r["tflops"] for r in mine], "o", color=f"C{color}", label=label)
        ax.plot(i, [r.get("ref_tflops") or np.nan for r in mine], "x", color=f"C{color}")
    ax.plot([], [], "x", color="gray", label="x: its anchor, same intensity")
    ax.set(xscale="log", yscale="log", xlabel="FLOPs per byte of HBM traffic",
           ylabel="TFLOP/s", title=f"Measured on {saved['device_kind']}")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    print(f"{len(rows)} kernels on the roofline of {saved['device_kind']}: ridge point "
          f"{peak * 1e3 / hbm:.0f} FLOP/byte")


def crossover_plot(png: Path, path: Path = PATH) -> None:
    """The fused expert MLP's speedup over two ragged_dots + SiLU against F/D, one line per D,
    forward (solid) and forward+backward (dashed), into `png`; print the table it draws."""
    saved = load(path)
    if saved is None:
        print("No accelerator was used: no TPU run is saved, so there is no crossover to draw.")
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in saved["rows"]:
        m = re.fullmatch(r"fused_mlp_(fwd|fwdbwd)_d(\d+)_f(\d+)", r["name"])
        if m and r.get("impl") is None and r.get("speedup"):
            d, f = int(m.group(2)), int(m.group(3))
            pts.setdefault((m.group(1), d), []).append((f / d, r["speedup"]))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    print(f"{'pass':8s}{'D':>6s}   speedup at F/D = ...")
    for (kind, d), xy in sorted(pts.items()):
        xy.sort()
        color = f"C{sorted({k[1] for k in pts}).index(d)}"
        ax.plot(*zip(*xy), "o-" if kind == "fwd" else "s--", color=color,
                label=f"D={d} {'forward' if kind == 'fwd' else 'fwd+bwd'}")
        print(f"{kind:8s}{d:6d}   " + "  ".join(f"{x:g}: {y:.2f}x" for x, y in xy))
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(xscale="log", xlabel="F / D", ylabel="time of two ragged_dots / fused",
           title=f"Fused expert MLP on {saved['device_kind']}")
    ax.set_xticks([2, 4, 8], ["2", "4", "8"])
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PATH)
    parser.add_argument("--quick", action="store_true", help="one shape per family")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes in interpret mode, on any device (for the tests)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--no-small", action="store_true",
                        help="skip compare/_mosaic_kernels.py's small kernels under minijax")
    parser.add_argument("--only", default="", help="comma-separated: flash,matmul,gmm,mlp,minijax")
    parser.add_argument("--tilings-from", type=Path, default=None,
                        help="an earlier run's JSON: its chosen tilings for families not run now")
    args = parser.parse_args(argv)
    from tools._chip import no_accelerator
    if no_accelerator(f"nothing measured, {args.out} not written", allow=args.smoke):
        return 0
    only = tuple(s for s in args.only.split(",") if s)
    run(args.out, quick=args.quick, smoke=args.smoke, reps=args.reps, only=only,
        small=not args.no_small, prior=args.tilings_from)
    show(path=args.out)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a file: `compare` and this checkout's minijax
    sys.exit(main())
