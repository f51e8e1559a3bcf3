"""Pallas: writing kernels, run in interpret mode on CPU.

Real JAX only. Pallas lets you write the body of a GPU/TPU kernel in JAX-flavoured Python: the
kernel reads and writes *refs* (windows onto its inputs and outputs), a *grid* says how many
kernel instances run, and *BlockSpecs* say which block of each array an instance sees. There is
no Pallas compiler for CPU, so here every kernel runs with `interpret=True`. The program builds:

* a vector add over a 1-D grid;
* a tiled matmul with a 3-D grid whose last axis walks the contraction, accumulating into
  the output block;
* a fused row softmax (one pass over a block of whole rows);
* FlashAttention: a forward kernel using the online-softmax recurrence (never materialising
  the S x S score matrix) that also returns the log-sum-exp, and two backward kernels (dK/dV
  and dQ) that recompute scores blockwise, wired together with `jax.custom_vjp`.

Each result is compared with a plain `jax.numpy` reference (the gradients with `jax.grad` of
the reference attention).
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from compare._jax201 import catch, hlo_opcodes, table, time_into
from compare._report import TopicResult, code

F32 = jnp.float32


# ---------------------------------------------------------------------------- vector add
def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def vector_add(x, y, block=128):
    (n,) = x.shape
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(n // block,), in_specs=[spec, spec], out_specs=spec,
                          interpret=True)(x, y)


# ---------------------------------------------------------------------------- tiled matmul
def matmul_kernel(x_ref, y_ref, o_ref):
    # Grid axis 2 walks the contraction dimension; the output block stays the same along it,
    # so it works as the accumulator. Zero it on the first step.
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)


def matmul(x, y, bm=32, bn=32, bk=32):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), F32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        interpret=True,
    )(x, y)


# ---------------------------------------------------------------------------- row softmax
def softmax_kernel(x_ref, o_ref):
    x = x_ref[...].astype(F32)
    e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
    o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)


def row_softmax(x, rows_per_block=8):
    r, c = x.shape
    spec = pl.BlockSpec((rows_per_block, c), lambda i: (i, 0))
    return pl.pallas_call(softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(r // rows_per_block,), in_specs=[spec], out_specs=spec,
                          interpret=True)(x)


# ---------------------------------------------------------------------------- FlashAttention
def _causal_mask(s, q_start, k_start):
    bq, bk = s.shape
    q_pos = q_start + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
    k_pos = k_start + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
    return jnp.where(q_pos >= k_pos, s, -jnp.inf)


def fa_fwd_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, *, bk, scale, causal):
    """One query block against all key blocks, keeping a running max m, sum l and output acc."""
    bq, d = q_ref.shape
    seq = k_ref.shape[0]
    qi = pl.program_id(1)
    q = q_ref[...].astype(F32) * scale

    def body(j, carry):
        m, l, acc = carry
        k = k_ref[pl.ds(j * bk, bk), :].astype(F32)
        v = v_ref[pl.ds(j * bk, bk), :].astype(F32)
        s = jnp.dot(q, k.T, preferred_element_type=F32)
        if causal:
            s = _causal_mask(s, qi * bq, j * bk)
        m_new = jnp.maximum(m, jnp.max(s, axis=1))
        p = jnp.exp(s - m_new[:, None])
        rescale = jnp.exp(m - m_new)  # earlier blocks were normalised by a smaller max
        l_new = l * rescale + jnp.sum(p, axis=1)
        acc_new = acc * rescale[:, None] + jnp.dot(p, v, preferred_element_type=F32)
        return m_new, l_new, acc_new

    # With a causal mask, key blocks entirely in this query block's future are skipped.
    n_k = (jnp.minimum(seq, (qi + 1) * bq) + bk - 1) // bk if causal else seq // bk
    init = (jnp.full((bq,), -jnp.inf, F32), jnp.zeros((bq,), F32), jnp.zeros((bq, d), F32))
    m, l, acc = jax.lax.fori_loop(0, n_k, body, init)
    o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)
    lse_ref[...] = m + jnp.log(l)


def fa_bwd_dkdv_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, *,
                       bq, scale, causal):
    """One key block against all query blocks: accumulate dK and dV for this block."""
    bk, d = k_ref.shape
    seq = q_ref.shape[0]
    kj = pl.program_id(1)
    k = k_ref[...].astype(F32)
    v = v_ref[...].astype(F32)

    def body(i, carry):
        dk, dv = carry
        rows = pl.ds(i * bq, bq)
        q = q_ref[rows, :].astype(F32)
        do = do_ref[rows, :].astype(F32)
        s = jnp.dot(q, k.T, preferred_element_type=F32) * scale
        if causal:
            s = _causal_mask(s, i * bq, kj * bk)
        p = jnp.exp(s - lse_ref[rows][:, None])  # softmax probabilities, recomputed
        dv = dv + jnp.dot(p.T, do, preferred_element_type=F32)
        dp = jnp.dot(do, v.T, preferred_element_type=F32)
        ds = p * (dp - delta_ref[rows][:, None])
        dk = dk + jnp.dot(ds.T, q, preferred_element_type=F32) * scale
        return dk, dv

    start = (kj * bk) // bq if causal else 0  # earlier query blocks cannot see this key block
    zeros = jnp.zeros((bk, d), F32)
    dk, dv = jax.lax.fori_loop(start, seq // bq, body, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def fa_bwd_dq_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, *,
                     bk, scale, causal):
    """One query block against all key blocks: accumulate dQ for this block."""
    bq, d = q_ref.shape
    seq = k_ref.shape[0]
    qi = pl.program_id(1)
    q = q_ref[...].astype(F32)
    do = do_ref[...].astype(F32)
    lse = lse_ref[...]
    delta = delta_ref[...]

    def body(j, dq):
        cols = pl.ds(j * bk, bk)
        k = k_ref[cols, :].astype(F32)
        v = v_ref[cols, :].astype(F32)
        s = jnp.dot(q, k.T, preferred_element_type=F32) * scale
        if causal:
            s = _causal_mask(s, qi * bq, j * bk)
        p = jnp.exp(s - lse[:, None])
        dp = jnp.dot(do, v.T, preferred_element_type=F32)
        ds = p * (dp - delta[:, None])
        return dq + jnp.dot(ds, k, preferred_element_type=F32) * scale

    n_k = (jnp.minimum(seq, (qi + 1) * bq) + bk - 1) // bk if causal else seq // bk
    dq = jax.lax.fori_loop(0, n_k, body, jnp.zeros((bq, d), F32))
    dq_ref[...] = dq.astype(dq_ref.dtype)


def _specs(bh_block, seq, d, blk):
    """BlockSpecs over (batch*heads, seq, d): a `blk`-row block, or the whole sequence."""
    del bh_block
    block = pl.BlockSpec((None, blk, d), lambda b, i: (b, i, 0))
    whole = pl.BlockSpec((None, seq, d), lambda b, i: (b, 0, 0))
    vec_block = pl.BlockSpec((None, blk), lambda b, i: (b, i))
    vec_whole = pl.BlockSpec((None, seq), lambda b, i: (b, 0))
    return block, whole, vec_block, vec_whole


def flash_forward(q, k, v, *, bq, bk, causal):
    bh, seq, d = q.shape
    scale = 1.0 / np.sqrt(d)
    qblock, whole, vblock, _ = _specs(bh, seq, d, bq)
    kernel = functools.partial(fa_fwd_kernel, bk=bk, scale=scale, causal=causal)
    return pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((bh, seq), F32)),
        grid=(bh, seq // bq),
        in_specs=[qblock, whole, whole],
        out_specs=(qblock, vblock),
        interpret=True,
    )(q, k, v)


def flash_backward(q, k, v, o, lse, do, *, bq, bk, causal):
    bh, seq, d = q.shape
    scale = 1.0 / np.sqrt(d)
    delta = jnp.sum(do.astype(F32) * o.astype(F32), axis=-1)  # rowsum(dO * O), per query
    kblock, whole, _, vwhole = _specs(bh, seq, d, bk)
    dkdv = functools.partial(fa_bwd_dkdv_kernel, bq=bq, scale=scale, causal=causal)
    dk, dv = pl.pallas_call(
        dkdv,
        out_shape=(jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)),
        grid=(bh, seq // bk),
        in_specs=[whole, kblock, kblock, whole, vwhole, vwhole],
        out_specs=(kblock, kblock),
        interpret=True,
    )(q, k, v, do, lse, delta)
    qblock, whole, vblock, _ = _specs(bh, seq, d, bq)
    dq_kernel = functools.partial(fa_bwd_dq_kernel, bk=bk, scale=scale, causal=causal)
    dq = pl.pallas_call(
        dq_kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(bh, seq // bq),
        in_specs=[qblock, whole, whole, qblock, vblock, vblock],
        out_specs=qblock,
        interpret=True,
    )(q, k, v, do, lse, delta)
    return dq, dk, dv


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def flash_attention(q, k, v, bq=16, bk=16, causal=False):
    return flash_forward(q, k, v, bq=bq, bk=bk, causal=causal)[0]


def _fa_fwd(q, k, v, bq, bk, causal):
    o, lse = flash_forward(q, k, v, bq=bq, bk=bk, causal=causal)
    return o, (q, k, v, o, lse)


def _fa_bwd(bq, bk, causal, saved, do):
    q, k, v, o, lse = saved
    return flash_backward(q, k, v, o, lse, do, bq=bq, bk=bk, causal=causal)


flash_attention.defvjp(_fa_fwd, _fa_bwd)


def attention_ref(q, k, v, causal=False):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -jnp.inf)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def lse_ref(q, k, causal=False):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -jnp.inf)
    return jax.nn.logsumexp(s, axis=-1)


def _stablehlo_ops(text: str) -> dict[str, int]:
    """Counts of a few StableHLO ops in a lowered (not yet optimized) module."""
    ops = re.findall(r"stablehlo\.([a-z_]+)", text)
    keep = ("while", "dynamic_slice", "dynamic_update_slice", "dot_general")
    return {o: ops.count(o) for o in keep}


def _hlo_ops(hlo: str) -> dict[str, int]:
    """Counts of a few opcodes in optimized HLO text."""
    ops = hlo_opcodes(hlo)
    keep = ("while", "dynamic-slice", "dynamic-update-slice", "fusion")
    return {o: ops.count(o) for o in keep}


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Pallas kernels in interpret mode")
    res.chapter = "chapters/16-pallas.md"
    res.devices = 1
    rng = np.random.default_rng(0)

    # ---------------------------------------------------------------- vector add
    n = 1024 if quick else 8192
    x = jnp.asarray(rng.standard_normal(n), F32)
    y = jnp.asarray(rng.standard_normal(n), F32)
    add_p, add_j = jax.jit(vector_add), jax.jit(jnp.add)
    res.check("vector add", add_p(x, y), np.asarray(x) + np.asarray(y))
    slower = []  # (kernel ms, jnp ms) pairs, to describe the timings honestly
    slower.append((time_into(res, f"vector add n={n}: pallas (interpret)",
                             lambda: add_p(x, y), quick),
                   time_into(res, f"vector add n={n}: jnp", lambda: add_j(x, y), quick)))
    no_interp, no_interp_msg = catch(lambda: pl.pallas_call(
        add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y))
    res.check_true("without interpret=True the CPU backend refuses", no_interp is not None)

    # ---------------------------------------------------------------- tiled matmul
    m, kk, nn = (64, 96, 64) if quick else (256, 256, 256)
    a = jnp.asarray(rng.standard_normal((m, kk)), F32)
    b = jnp.asarray(rng.standard_normal((kk, nn)), F32)
    mm, mm_j = jax.jit(matmul), jax.jit(jnp.matmul)
    res.check("tiled matmul (grid + BlockSpecs)", mm(a, b),
              np.asarray(a, np.float64) @ np.asarray(b, np.float64), rtol=1e-4, atol=1e-4)
    slower.append((time_into(res, f"matmul {m}x{kk}x{nn}: pallas (interpret)",
                             lambda: mm(a, b), quick),
                   time_into(res, f"matmul {m}x{kk}x{nn}: jnp", lambda: mm_j(a, b), quick)))
    lowered = mm.lower(a, b)
    low_ops = _stablehlo_ops(lowered.as_text())
    mm_ops = _hlo_ops(lowered.compile().as_text())
    res.check_true("interpret mode emits a while loop over the grid", low_ops["while"] >= 1)

    # ---------------------------------------------------------------- row softmax
    rows, cols = (32, 64) if quick else (256, 512)
    s = jnp.asarray(rng.standard_normal((rows, cols)) * 3, F32)
    sm, sm_j = jax.jit(row_softmax), jax.jit(lambda t: jax.nn.softmax(t, axis=1))
    res.check("fused row softmax", sm(s), sm_j(s), rtol=1e-5, atol=1e-6)
    slower.append((time_into(res, f"softmax {rows}x{cols}: pallas (interpret)",
                             lambda: sm(s), quick),
                   time_into(res, f"softmax {rows}x{cols}: jax.nn.softmax",
                             lambda: sm_j(s), quick)))
    res.sections.append(
        "### Three small kernels\n\n"
        + code("def matmul_kernel(x_ref, y_ref, o_ref):\n"
               "    @pl.when(pl.program_id(2) == 0)\n"
               "    def _():\n"
               "        o_ref[...] = jnp.zeros_like(o_ref)\n"
               "    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)\n\n"
               "pl.pallas_call(matmul_kernel, grid=(m // bm, n // bn, k // bk),\n"
               "    in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),\n"
               "              pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],\n"
               "    out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)), ...)",
               "python")
        + "\n\nA `BlockSpec(block_shape, index_map)` maps a grid position to a *block index* "
        "(not an element offset): instance (i, j, kk) sees rows block i of x and columns "
        "block j of y. Because the output's index map ignores `kk`, all instances along the "
        "last grid axis write the same block, which is how the kernel accumulates over the "
        "contraction: zero it at `kk == 0`, add a partial product each step. On real "
        "hardware the order of the grid matters for exactly this reason (the reduction axis "
        "goes last). The vector add uses a 1-D grid of 128-element blocks, and the softmax "
        "gives each instance 8 whole rows, so max, exp, sum and divide happen in one pass "
        "over data already in fast memory instead of four round trips to main memory."
    )

    # ---------------------------------------------------------------- FlashAttention
    bh, seq, d = (2, 64, 16) if quick else (4, 256, 32)
    blk = 16 if quick else 32
    q = jnp.asarray(rng.standard_normal((bh, seq, d)), F32)
    k = jnp.asarray(rng.standard_normal((bh, seq, d)), F32)
    v = jnp.asarray(rng.standard_normal((bh, seq, d)), F32)
    ct = jnp.asarray(rng.standard_normal((bh, seq, d)), F32)  # an arbitrary output cotangent
    fa_rows = []
    for causal in (False, True):
        tag = "causal" if causal else "full"
        fwd = jax.jit(functools.partial(flash_forward, bq=blk, bk=blk, causal=causal))
        o, lse = fwd(q, k, v)
        ref_o = attention_ref(q, k, v, causal)
        res.check(f"flash attention forward ({tag})", o, ref_o, rtol=1e-4, atol=1e-5)
        res.check(f"flash attention log-sum-exp ({tag})", lse, lse_ref(q, k, causal),
                  rtol=1e-5, atol=1e-5)
        kern_grad = jax.jit(jax.grad(
            lambda q_, k_, v_, c=causal: jnp.sum(flash_attention(q_, k_, v_, blk, blk, c) * ct),
            argnums=(0, 1, 2)))
        ref_grad = jax.jit(jax.grad(
            lambda q_, k_, v_, c=causal: jnp.sum(attention_ref(q_, k_, v_, c) * ct),
            argnums=(0, 1, 2)))
        gk, gr = kern_grad(q, k, v), ref_grad(q, k, v)
        for name, g1, g2 in zip(("dq", "dk", "dv"), gk, gr):
            res.check(f"flash attention backward {name} ({tag})", g1, g2, rtol=1e-4, atol=1e-4)
        t_k = time_into(res, f"attention fwd+bwd ({tag}): pallas kernels (interpret)",
                        lambda f=kern_grad: f(q, k, v), quick)
        t_r = time_into(res, f"attention fwd+bwd ({tag}): jnp reference",
                        lambda f=ref_grad: f(q, k, v), quick)
        fa_rows.append([tag, f"{t_k:.3g}", f"{t_r:.3g}"])
        slower.append((t_k, t_r))
    res.sections.append(
        "### FlashAttention forward and backward\n\n"
        f"q, k, v of shape (batch*heads, seq, d) = {(bh, seq, d)}, blocks of {blk} queries by "
        f"{blk} keys, grid = (batch*heads, seq/{blk}). The forward kernel visits key blocks in "
        "turn and keeps, per query row, the running maximum `m`, the running sum `l` of "
        "`exp(s - m)` and the un-normalised output `acc`. When a new block raises the "
        "maximum, the old `l` and `acc` are multiplied by `exp(m_old - m_new)` so that "
        "everything stays expressed relative to the current maximum; at the end "
        "`acc / l` is the softmax-weighted sum, and `m + log(l)` (the log-sum-exp) is saved "
        "for the backward pass. Only a block x block tile of scores ever exists.\n\n"
        "The backward pass recomputes the probabilities from the saved log-sum-exp "
        "(`p = exp(s - lse)`) instead of storing them. With `delta = rowsum(dO * O)`: "
        "`dV = p^T dO`, `dS = p * (dO V^T - delta)`, `dK = dS^T Q / sqrt(d)`, "
        "`dQ = dS K / sqrt(d)`. One kernel owns a key block and loops over query blocks (dK, "
        "dV), another owns a query block and loops over key blocks (dQ), so no two instances "
        "write the same output block. `jax.custom_vjp` connects forward and backward, and "
        "`jax.grad` through it matches `jax.grad` of the plain softmax attention for dq, dk "
        "and dv, with and without a causal mask (where fully masked blocks are skipped).\n\n"
        + table(["mask", "fwd+bwd, kernels (ms)", "fwd+bwd, jnp reference (ms)"], fa_rows)
    )

    # ---------------------------------------------------------------- what interpret means
    n_slow = sum(tk > tr for tk, tr in slower)
    res.sections.append(
        "### What interpret mode is, and what it is not\n\n"
        "`pallas_call(..., interpret=True)` does not compile a kernel. JAX turns the kernel "
        "body into ordinary JAX operations, replaces reads and writes of refs by "
        "`dynamic_slice` / `dynamic_update_slice` on whole arrays, and wraps the body in a "
        "loop over every grid point; the result is then compiled by XLA:CPU like any other "
        "program. The lowered (pre-optimization) module of the tiled matmul contains "
        f"{low_ops['while']} `while`, {low_ops['dynamic_slice']} `dynamic_slice`, "
        f"{low_ops['dynamic_update_slice']} `dynamic_update_slice` and "
        f"{low_ops['dot_general']} `dot_general`: one loop over the "
        f"{m // 32 * (nn // 32) * (kk // 32)} grid points, slicing the blocks out of the "
        "operands and writing the output block back. After XLA's optimizations "
        f"{mm_ops['while']} `while` loop(s) remain"
        + (" (a short, fixed trip count can be fully unrolled)" if mm_ops["while"] == 0 else "")
        + ". That makes interpret mode a faithful check of the *semantics* (indexing, "
        "BlockSpecs, masking, accumulation order) but not of speed: the grid runs one point "
        f"at a time. In the timings, the kernel was slower than the `jnp` version in {n_slow} "
        f"of {len(slower)} comparisons"
        + ("" if n_slow == len(slower) else
           "; where it was not, the arrays are so small that fixed per-call costs dominate")
        + ".\n\nWithout `interpret=True` this machine refuses the call:"
        "\n\n" + code(f"{no_interp}: {no_interp_msg}")
        + "\n\n"
        "On real accelerators the same kernel source goes through a backend compiler instead."
        " On NVIDIA GPUs the default path is Triton: each grid point becomes a thread block, "
        "blocks are loaded with masked pointer arithmetic and the dots map onto tensor cores."
        " The Mosaic GPU backend targets Hopper-class features (TMA copies, warpgroup "
        "matmuls) more directly. On TPUs Mosaic compiles the kernel for one TensorCore, runs "
        "the grid as a sequential loop, and pipelines the BlockSpec copies between HBM and "
        "on-chip VMEM so the next block loads while the current one is computed. Block shapes"
        " then have hardware constraints (e.g. multiples of (8, 128) for f32 on TPU) that "
        "interpret mode does not enforce."
    )
    return res
