"""Solution: a ladder of Pallas kernels (chapters 16 and 28), each written once for both modules.

Every function takes `J` (the `jax` or `minijax` module) and `pl` (its `experimental.pallas`)
first, so the tests run the same code under `jax.experimental.pallas` and
`minijax.experimental.pallas`, both with `interpret=True`, and compare each with a NumPy
or `jax.numpy` reference. The rungs, in order:

1. `add_bias`: refs and grids. Each instance adds a bias row to its block of rows.
2. `mask_rows`: a mask over a 2-D grid. Each instance owns one tile of rows and columns
   and zeroes the columns past its rows' lengths: global indices from `pl.program_id` and
   an iota.
3. `row_sum_max`: a reduction along a grid axis. Grid axis 1 walks the columns; the two
   output blocks (row sums and row maxima) stay in place across it, initialised at its
   first step and updated at every step: the accumulator pattern of the matmul.
4. `matmul_bias_relu`: a tiled matmul over a 3-D grid, accumulating into a scratch buffer,
   with a fused bias + ReLU epilogue at the last contraction step.
5. `grouped_matmul`: the ragged matmul of a mixture-of-experts layer. The rows of `x` are
   sorted by expert, rows `offsets[g]:offsets[g+1]` belong to expert `g`, and each must be
   multiplied by that expert's weight `w[g]`. A grid of (row tiles, experts); an instance
   skips experts that own no row of its tile, and writes only the rows its expert owns.
6. `online_softmax`: a row softmax that reads its rows in column blocks: one pass keeps the
   running maximum and sum, a second writes the normalised blocks.
7. `flash_attention`: the forward pass of one attention head, one instance per query block,
   looping over key blocks with the online softmax, never forming the S x S scores.
8. `masked_attention`: the same with a block-sparse mask (an int32 (S/bq, S/bk) array: 0 means
   "this query block ignores this key block", skipped with a `cond`) and optionally a causal
   mask, whose loop stops before the key blocks in the query block's future.
9. `gmm`: the grouped matmul of chapter 28, driven by a visit list. Visit v multiplies row
   tile `m_tile_ids[v]` by the weight of group `group_ids[v]` (one visit per row tile and
   group that meet; a tile that straddles groups is visited once per group). The visit
   list reaches the index maps by scalar prefetch (`pltpu.PrefetchScalarGridSpec`), and a
   visit writes only its own group's rows.
10. `fused_mlp`: the fused expert MLP `silu(x_g @ w_up[g]) @ w_down[g]` over the same
    visits, walking the hidden width F in blocks so that the (M, F) hidden layer is never
    stored.
11. `tpu_matmul`: a tiled matmul written for a TPU (chapter 16, "Pallas on a TPU"): you
    choose blocks that obey Mosaic's (8, 128) rule, put the contraction last in the grid,
    keep the accumulator in VMEM and mark the grid axes with `dimension_semantics`; the
    tests lower it for a TPU, on a CPU, and run it in TPU interpret mode.

Two rules hold in every rung because JAX's interpret mode needs them: read `pl.program_id`
at the top of the kernel (JAX cannot lower it inside a `pl.when` branch or a loop body), and
keep every block shape dividing its array (the tests use small, even shapes).
"""

from __future__ import annotations

import importlib
import math

import numpy as np

F32 = np.float32


# ------------------------------------------------------------------ 1. refs and grids
def add_bias(J, pl, x, b, rows: int = 8):
    """`x + b[None, :]` for x: f32[R, C], b: f32[C]; each instance handles `rows` rows."""
    def kernel(x_ref, b_ref, o_ref):
        o_ref[...] = x_ref[...] + b_ref[...][None, :]

    r, c = x.shape
    return pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(r // rows,),
        in_specs=[pl.BlockSpec((rows, c), lambda i: (i, 0)), pl.BlockSpec((c,), lambda i: (0,))],
        out_specs=pl.BlockSpec((rows, c), lambda i: (i, 0)), interpret=True)(x, b)


# ------------------------------------------------------------------ 2. a mask over a 2-D grid
def mask_rows(J, pl, x, lengths, br: int = 8, bc: int = 8):
    """`x` with row r's columns from `lengths[r]` on set to 0, for x: f32[R, C] and
    lengths: i32[R]; the grid (R // br, C // bc) gives each instance one (br, bc) tile."""
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, len_ref, o_ref):
        j = pl.program_id(1)
        cols = j * bc + lax.broadcasted_iota(np.int32, (br, bc), 1)  # global column indices
        o_ref[...] = jnp.where(cols < len_ref[...][:, None], x_ref[...], 0.0)

    r, c = x.shape
    return pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(r // br, c // bc),
        in_specs=[pl.BlockSpec((br, bc), lambda i, j: (i, j)),
                  pl.BlockSpec((br,), lambda i, j: (i,))],
        out_specs=pl.BlockSpec((br, bc), lambda i, j: (i, j)), interpret=True)(x, lengths)


# ------------------------------------------------------------------ 3. a reduction over a grid axis
def row_sum_max(J, pl, x, br: int = 8, bc: int = 8):
    """`(x.sum(axis=1), x.max(axis=1))` for x: f32[R, C], reading (br, bc) tiles: grid axis
    1 walks the columns, and every step of it adds into the same two output blocks."""
    jnp = J.numpy

    def kernel(x_ref, sum_ref, max_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            sum_ref[...] = jnp.zeros_like(sum_ref)
            max_ref[...] = jnp.full_like(max_ref, -jnp.inf)

        tile = x_ref[...]
        sum_ref[...] += jnp.sum(tile, axis=1)
        max_ref[...] = jnp.maximum(max_ref[...], jnp.max(tile, axis=1))

    r, c = x.shape
    row = J.ShapeDtypeStruct((r,), x.dtype)
    return pl.pallas_call(
        kernel, out_shape=(row, row), grid=(r // br, c // bc),
        in_specs=[pl.BlockSpec((br, bc), lambda i, j: (i, j))],
        out_specs=(pl.BlockSpec((br,), lambda i, j: (i,)), pl.BlockSpec((br,), lambda i, j: (i,))),
        interpret=True)(x)


# ------------------------------------------------------------------ 4. tiled matmul and fusion
def matmul_bias_relu(J, pl, x, y, bias, bm: int = 8, bn: int = 8, bk: int = 8):
    """`relu(x @ y + bias)` for x: f32[M, K], y: f32[K, N], bias: f32[N], in tiles."""
    jnp = J.numpy

    def kernel(x_ref, y_ref, b_ref, o_ref, acc_ref):
        kk = pl.program_id(2)
        last = pl.num_programs(2) - 1

        @pl.when(kk == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...])

        @pl.when(kk == last)
        def _():
            o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...][None, :], 0.0)

    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct((m, n), F32), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
                  pl.BlockSpec((bn,), lambda i, j, kk: (j,))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pl.ANY((bm, bn), F32)], interpret=True)(x, y, bias)


# ------------------------------------------------------------------ 5. grouped (ragged) matmul
def grouped_matmul(J, pl, x, w, offsets, bm: int = 8):
    """Row r of the result is `x[r] @ w[g]` for the expert g with offsets[g] <= r <
    offsets[g+1]. x: f32[M, K] (rows sorted by expert), w: f32[E, K, N], offsets: i32[E+1]
    with offsets[0] = 0 and offsets[E] = M (groups may be empty)."""
    jnp, lax = J.numpy, J.lax

    def kernel(off_ref, x_ref, w_ref, o_ref):
        i, g = pl.program_id(0), pl.program_id(1)
        lo, hi = off_ref[g], off_ref[g + 1]
        rows = i * bm + lax.broadcasted_iota(np.int32, (bm, 1), 0)

        @pl.when(g == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when((lo < (i + 1) * bm) & (hi > i * bm))  # expert g owns a row of this tile
        def _():
            prod = jnp.dot(x_ref[...], w_ref[...])
            o_ref[...] = jnp.where((rows >= lo) & (rows < hi), prod, o_ref[...])

    m, k = x.shape
    e, _, n = w.shape
    return pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct((m, n), F32), grid=(m // bm, e),
        in_specs=[pl.BlockSpec((e + 1,), lambda i, g: (0,)),
                  pl.BlockSpec((bm, k), lambda i, g: (i, 0)),
                  pl.BlockSpec((None, k, n), lambda i, g: (g, 0, 0))],
        out_specs=pl.BlockSpec((bm, n), lambda i, g: (i, 0)), interpret=True)(offsets, x, w)


# ------------------------------------------------------------------ 6. online softmax
def online_softmax(J, pl, x, rows: int = 4, bc: int = 8):
    """`softmax(x, axis=1)` for x: f32[R, C], reading each block of rows `bc` columns at a
    time: a first loop keeps the running max and sum, a second writes the output."""
    jnp, lax = J.numpy, J.lax

    def kernel(x_ref, o_ref):
        n_blocks = x_ref.shape[1] // bc

        def stats(j, carry):
            m, l = carry
            blk = x_ref[:, pl.ds(j * bc, bc)]
            m_new = jnp.maximum(m, jnp.max(blk, axis=1))
            l_new = l * jnp.exp(m - m_new) + jnp.sum(jnp.exp(blk - m_new[:, None]), axis=1)
            return m_new, l_new

        init = (jnp.full((rows,), -jnp.inf, F32), jnp.zeros((rows,), F32))
        m, l = lax.fori_loop(0, n_blocks, stats, init)

        def write(j, carry):
            cols = pl.ds(j * bc, bc)
            o_ref[:, cols] = jnp.exp(x_ref[:, cols] - m[:, None]) / l[:, None]
            return carry

        lax.fori_loop(0, n_blocks, write, 0)

    r, c = x.shape
    spec = pl.BlockSpec((rows, c), lambda i: (i, 0))
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(x.shape, F32), grid=(r // rows,),
                          in_specs=[spec], out_specs=spec, interpret=True)(x)


# ------------------------------------------------------------------ 7. FlashAttention
def _attention_call(J, pl, kernel, q, k, v, extra=(), extra_specs=(), bq=8):
    s, d = q.shape
    qspec = pl.BlockSpec((bq, d), lambda i: (i, 0))
    whole = pl.BlockSpec((s, d), lambda i: (0, 0))
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(q.shape, F32), grid=(s // bq,),
                          in_specs=[qspec, whole, whole, *extra_specs], out_specs=qspec,
                          interpret=True)(q, k, v, *extra)


def _online_step(J, q, k, v, carry, mask=None):
    """One key block of the online softmax: q f32[bq, d] (already scaled), k, v f32[bk, d]."""
    jnp = J.numpy
    m, l, acc = carry
    s = jnp.dot(q, k.T)
    if mask is not None:
        s = jnp.where(mask, s, -jnp.inf)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    rescale = jnp.exp(m - m_new)
    return m_new, l * rescale + jnp.sum(p, axis=1), acc * rescale[:, None] + jnp.dot(p, v)


def flash_attention(J, pl, q, k, v, bq: int = 8, bk: int = 8):
    """`softmax(q k^T / sqrt(d)) v` for one head, q, k, v: f32[S, d], one instance per query
    block of `bq` rows, looping over key blocks of `bk` rows."""
    jnp, lax = J.numpy, J.lax
    s, d = q.shape

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_blk = q_ref[...] * (1.0 / math.sqrt(d))

        def body(j, carry):
            rows = pl.ds(j * bk, bk)
            return _online_step(J, q_blk, k_ref[rows, :], v_ref[rows, :], carry)

        init = (jnp.full((bq,), -jnp.inf, F32), jnp.zeros((bq,), F32), jnp.zeros((bq, d), F32))
        _, l, acc = lax.fori_loop(0, s // bk, body, init)
        o_ref[...] = acc / l[:, None]

    return _attention_call(J, pl, kernel, q, k, v, bq=bq)


# ------------------------------------------------------------------ 8. causal and block-sparse
def masked_attention(J, pl, q, k, v, block_mask, bq: int = 8, bk: int = 8,
                     causal: bool = False):
    """Attention where query block i ignores key block j when block_mask[i, j] == 0 (those
    blocks are skipped, not computed and masked), and, if `causal`, query t ignores keys
    after t (the loop stops before key blocks entirely in the future). block_mask:
    i32[S/bq, S/bk]; every query row must keep at least one key."""
    jnp, lax = J.numpy, J.lax
    s, d = q.shape

    def kernel(q_ref, k_ref, v_ref, mask_ref, o_ref):
        qi = pl.program_id(0)
        q_blk = q_ref[...] * (1.0 / math.sqrt(d))

        def body(j, carry):
            rows = pl.ds(j * bk, bk)

            def visit(carry):
                mask = None
                if causal:
                    q_pos = qi * bq + lax.broadcasted_iota(np.int32, (bq, bk), 0)
                    k_pos = j * bk + lax.broadcasted_iota(np.int32, (bq, bk), 1)
                    mask = q_pos >= k_pos
                return _online_step(J, q_blk, k_ref[rows, :], v_ref[rows, :], carry, mask)

            return lax.cond(mask_ref[qi, j] != 0, visit, lambda c: c, carry)

        n_k = ((qi + 1) * bq + bk - 1) // bk if causal else s // bk
        init = (jnp.full((bq,), -jnp.inf, F32), jnp.zeros((bq,), F32), jnp.zeros((bq, d), F32))
        _, l, acc = lax.fori_loop(0, n_k, body, init)
        o_ref[...] = acc / l[:, None]

    nq, nk = block_mask.shape
    mask_spec = pl.BlockSpec((nq, nk), lambda i: (0, 0))
    return _attention_call(J, pl, kernel, q, k, v, extra=(block_mask,),
                           extra_specs=(mask_spec,), bq=bq)


def _tpu(J):
    """`J.experimental.pallas.tpu` (for PrefetchScalarGridSpec), imported by name."""
    return importlib.import_module(f"{J.__name__}.experimental.pallas.tpu")


# ------------------------------------------------------------------ 9. gmm with scalar prefetch
def gmm(J, pl, x, w, offsets, group_ids, m_tile_ids, bm: int = 8, bk: int = 8):
    """`lax.ragged_dot(x, w, sizes)` for groups `offsets[g] <= r < offsets[g+1]` (rows past
    offsets[-1] are zero). x: f32[M, K], w: f32[G, K, N], offsets: i32[G+1]; the visits
    group_ids, m_tile_ids: i32[V], ordered by row tile, every row tile visited at least
    once."""
    jnp, lax = J.numpy, J.lax
    pltpu = _tpu(J)

    def kernel(offs_ref, gid_ref, tid_ref, x_ref, w_ref, o_ref, acc_ref):
        v, kk = pl.program_id(0), pl.program_id(1)
        last = pl.num_programs(1) - 1
        g, tile = gid_ref[v], tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])

        @pl.when(kk == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], w_ref[...])

        @pl.when(kk == last)
        def _():
            rows = tile * bm + lax.broadcasted_iota(np.int32, (bm, 1), 0)
            mine = (rows >= offs_ref[g]) & (rows < offs_ref[g + 1])
            base = jnp.where(first_visit, 0.0, o_ref[...])
            o_ref[...] = jnp.where(mine, acc_ref[...], base)

    (m, k), n = x.shape, w.shape[2]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3, grid=(len(group_ids), k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda v, kk, offs, gid, tid: (tid[v], kk)),
                  pl.BlockSpec((None, bk, n), lambda v, kk, offs, gid, tid: (gid[v], kk, 0))],
        out_specs=pl.BlockSpec((bm, n), lambda v, kk, offs, gid, tid: (tid[v], 0)),
        scratch_shapes=[pl.ANY((bm, n), F32)])
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((m, n), F32), grid_spec=spec,
                          interpret=True)(offsets, group_ids, m_tile_ids, x, w)


# ------------------------------------------------------------------ 10. the fused expert MLP
def fused_mlp(J, pl, x, w_up, w_down, offsets, group_ids, m_tile_ids, bm: int = 8,
              bf: int = 8):
    """`silu(x_g @ w_up[g]) @ w_down[g]` per group, rows past offsets[-1] zero, without the
    (M, F) hidden layer. x: f32[M, D], w_up: f32[G, D, F], w_down: f32[G, F, D]; offsets and
    visits as in `gmm`."""
    jnp, lax = J.numpy, J.lax
    pltpu = _tpu(J)

    def kernel(offs_ref, gid_ref, tid_ref, x_ref, up_ref, down_ref, o_ref, acc_ref):
        v, f = pl.program_id(0), pl.program_id(1)
        last = pl.num_programs(1) - 1
        g, tile = gid_ref[v], tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])

        @pl.when(f == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        h = jnp.dot(x_ref[...], up_ref[...])                    # (bm, bf): on chip only
        acc_ref[...] += jnp.dot(h * J.nn.sigmoid(h), down_ref[...])

        @pl.when(f == last)
        def _():
            rows = tile * bm + lax.broadcasted_iota(np.int32, (bm, 1), 0)
            mine = (rows >= offs_ref[g]) & (rows < offs_ref[g + 1])
            base = jnp.where(first_visit, 0.0, o_ref[...])
            o_ref[...] = jnp.where(mine, acc_ref[...], base)

    (m, d), f = x.shape, w_up.shape[2]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3, grid=(len(group_ids), f // bf),
        in_specs=[pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid: (tid[v], 0)),
                  pl.BlockSpec((None, d, bf), lambda v, f, offs, gid, tid: (gid[v], 0, f)),
                  pl.BlockSpec((None, bf, d), lambda v, f, offs, gid, tid: (gid[v], f, 0))],
        out_specs=pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid: (tid[v], 0)),
        scratch_shapes=[pl.ANY((bm, d), F32)])
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((m, d), F32), grid_spec=spec,
                          interpret=True)(offsets, group_ids, m_tile_ids, x, w_up, w_down)


__all__ = ["add_bias", "matmul_bias_relu", "grouped_matmul", "online_softmax",
           "flash_attention", "masked_attention", "gmm", "fused_mlp"]


# ------------------------------------------------------------------ 11. a kernel for the TPU
def tpu_matmul(J, pl, x, y, interpret=True):
    """`x @ y` for x: f32[M, K], y: f32[K, N], tiled so that Mosaic TPU compiles it: (8, 128)
    tiles, the contraction innermost, an accumulator in VMEM, `dimension_semantics`."""
    jnp = J.numpy
    pltpu = _tpu(J)
    bm, bk, bn = 8, 128, 128  # (8, 128) tiles: x's block (8, 128), y's (128, 128)

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        kk = pl.program_id(2)

        @pl.when(kk == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)

        @pl.when(kk == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...]

    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct((m, n), F32), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), F32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=interpret)(x, y)
