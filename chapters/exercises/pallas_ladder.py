"""Exercise: a ladder of Pallas kernels (chapters 16 and 28), each written once for both modules.

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

Rungs 1 to 4 give you the `pallas_call` and ask for the kernel; from rung 5 on you also
choose the grid and the BlockSpecs. Run one rung with
`MINIJAX_EXERCISES=mine pytest tests/chapters/pallas_exercises_test.py -k NAME -p no:xdist`
(NAME: add_bias, mask_rows, row_sum_max, matmul, grouped, online_softmax, flash,
masked_attention, gmm, fused, tpu).
"""

from __future__ import annotations

import importlib
import math  # noqa: F401 (for your code)

import numpy as np

F32 = np.float32


# ------------------------------------------------------------------ 1. refs and grids
def add_bias(J, pl, x, b, rows: int = 8):
    """`x + b[None, :]` for x: f32[R, C], b: f32[C]; each instance handles `rows` rows."""
    def kernel(x_ref, b_ref, o_ref):
        # read the refs with `ref[...]`, write the output block with `o_ref[...] = ...`
        raise NotImplementedError("add_bias: the kernel")

    r, c = x.shape
    return pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), grid=(r // rows,),
        in_specs=[pl.BlockSpec((rows, c), lambda i: (i, 0)), pl.BlockSpec((c,), lambda i: (0,))],
        out_specs=pl.BlockSpec((rows, c), lambda i: (i, 0)), interpret=True)(x, b)


# ------------------------------------------------------------------ 2. a mask over a 2-D grid
def mask_rows(J, pl, x, lengths, br: int = 8, bc: int = 8):
    """`x` with row r's columns from `lengths[r]` on set to 0, for x: f32[R, C] and
    lengths: i32[R]; the grid (R // br, C // bc) gives each instance one (br, bc) tile."""
    def kernel(x_ref, len_ref, o_ref):
        # the tile's global column indices: pl.program_id(1) * bc plus
        # J.lax.broadcasted_iota(np.int32, (br, bc), 1); keep x where a column is before its
        # row's length (len_ref holds the tile's br lengths), J.numpy.where 0.0 elsewhere
        raise NotImplementedError("mask_rows: the kernel")

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
    def kernel(x_ref, sum_ref, max_ref):
        # the output blocks stay put while grid axis 1 walks the columns: at its first step
        # (pl.when(pl.program_id(1) == 0)) start them at 0 and -inf, then at every step add
        # the tile's row sums into sum_ref and keep the larger of max_ref and the tile's row
        # maxima. Read pl.program_id(1) here, outside the `when`.
        raise NotImplementedError("row_sum_max: the kernel")

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
    def kernel(x_ref, y_ref, b_ref, o_ref, acc_ref):
        # grid axis 2 walks the contraction: zero acc_ref at its first step (pl.when),
        # accumulate x_block @ y_block, and at its last step (pl.num_programs(2) - 1)
        # write relu(acc + bias) to o_ref. Read pl.program_id(2) here, outside the `when`s.
        raise NotImplementedError("matmul_bias_relu: the kernel")

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
    with offsets[0] = 0 and offsets[E] = M (groups may be empty).

    Hint: a grid (M // bm, E); pass `offsets` as an input whose BlockSpec is the whole array,
    give `w` the block shape (None, K, N) indexed by the expert axis, and let every expert of
    a row tile write the same output block: zero it at g == 0, and where expert g owns rows of
    the tile, replace those rows (a `jnp.where` on the row indices) by x_block @ w_block."""
    raise NotImplementedError("grouped_matmul")


# ------------------------------------------------------------------ 6. online softmax
def online_softmax(J, pl, x, rows: int = 4, bc: int = 8):
    """`softmax(x, axis=1)` for x: f32[R, C], reading each block of rows `bc` columns at a
    time: a first loop keeps the running max and sum, a second writes the output.

    Hint: one instance per `rows` rows (block (rows, C)); `lax.fori_loop` over the column
    blocks `x_ref[:, pl.ds(j * bc, bc)]`; when the max grows from m to m', the sum so far is
    multiplied by exp(m - m')."""
    raise NotImplementedError("online_softmax")


# ------------------------------------------------------------------ 7. FlashAttention
def flash_attention(J, pl, q, k, v, bq: int = 8, bk: int = 8):
    """`softmax(q k^T / sqrt(d)) v` for one head, q, k, v: f32[S, d], one instance per query
    block of `bq` rows, looping over key blocks of `bk` rows.

    Hint: q's BlockSpec is (bq, d) by query block, k's and v's the whole (S, d); carry the
    running max m (bq,), sum l (bq,) and un-normalised output acc (bq, d) through a
    `fori_loop` over key blocks, rescaling l and acc by exp(m - m_new); write acc / l."""
    raise NotImplementedError("flash_attention")


# ------------------------------------------------------------------ 8. causal and block-sparse
def masked_attention(J, pl, q, k, v, block_mask, bq: int = 8, bk: int = 8,
                     causal: bool = False):
    """Attention where query block i ignores key block j when block_mask[i, j] == 0 (those
    blocks are skipped, not computed and masked), and, if `causal`, query t ignores keys
    after t (the loop stops before key blocks entirely in the future). block_mask:
    i32[S/bq, S/bk]; every query row must keep at least one key.

    Hint: rung 7 with `block_mask` as one more input (whole-array BlockSpec), a `lax.cond` on
    `mask_ref[qi, j] != 0` around the online-softmax step, and for `causal` a trip count
    computed from qi = pl.program_id(0) plus an element mask (query position >= key
    position, from `lax.broadcasted_iota`) on the scores of the blocks it visits."""
    raise NotImplementedError("masked_attention")


def _tpu(J):
    """`J.experimental.pallas.tpu` (for PrefetchScalarGridSpec), imported by name."""
    return importlib.import_module(f"{J.__name__}.experimental.pallas.tpu")


# ------------------------------------------------------------------ 9. gmm with scalar prefetch
def gmm(J, pl, x, w, offsets, group_ids, m_tile_ids, bm: int = 8, bk: int = 8):
    """`lax.ragged_dot(x, w, sizes)` for groups `offsets[g] <= r < offsets[g+1]` (rows past
    offsets[-1] are zero). x: f32[M, K], w: f32[G, K, N], offsets: i32[G+1]; the visits
    group_ids, m_tile_ids: i32[V], ordered by row tile, every row tile visited at least
    once.

    Hint: `_tpu(J).PrefetchScalarGridSpec(num_scalar_prefetch=3, grid=(V, K // bk), ...)`
    with offsets, group_ids, m_tile_ids as the three prefetched operands: every index map
    is then called as `index_map(v, kk, offs, gid, tid)`, and the kernel gets their refs
    first. x's block (bm, bk) sits at (tid[v], kk), w's (None, bk, N) at (gid[v], kk, 0),
    the output's (bm, N) at (tid[v], 0). Accumulate over kk in a scratch buffer; at the
    last kk store it where the tile's rows belong to group gid[v] — and on the first visit
    of a tile (v == 0 or tid[v] != tid[v - 1]) put zeros in the other rows."""
    raise NotImplementedError("gmm")


# ------------------------------------------------------------------ 10. the fused expert MLP
def fused_mlp(J, pl, x, w_up, w_down, offsets, group_ids, m_tile_ids, bm: int = 8,
              bf: int = 8):
    """`silu(x_g @ w_up[g]) @ w_down[g]` per group, rows past offsets[-1] zero, without the
    (M, F) hidden layer. x: f32[M, D], w_up: f32[G, D, F], w_down: f32[G, F, D]; offsets and
    visits as in `gmm`.

    Hint: rung 9 with the grid (V, F // bf): blocks (bm, D) of x at (tid[v], 0),
    (None, D, bf) of w_up at (gid[v], 0, f), (None, bf, D) of w_down at (gid[v], f, 0). Each
    step computes h = x_block @ up_block, a (bm, bf) slice of the hidden layer, and adds
    silu(h) @ down_block (silu(h) = h * sigmoid(h)) into a (bm, D) accumulator."""
    raise NotImplementedError("fused_mlp")


# ------------------------------------------------------------------ 11. a kernel for the TPU
def tpu_matmul(J, pl, x, y, interpret=True):
    """`x @ y` for x: f32[M, K], y: f32[K, N], as a tiled matmul that Mosaic TPU compiles. The
    tests lower it for a TPU (JAX's Pallas, `interpret=False`: Mosaic's checks run on a CPU)
    and run it in TPU interpret mode (`interpret=_tpu(J).InterpretParams()`, whose JAX
    version refuses a grid that comes back to an output block it left). Pass `interpret` on.

    This time you choose the blocks, and write the whole `pallas_call` (chapter 16, "Pallas
    on a TPU"):
    - the last two dimensions of every block multiples of (8, 128), or the array's whole
      dimension; the tests use M = 32, K = 512, N = 256 and want at least two grid steps
      along each of M, N and K (so no whole-array blocks);
    - the grid (M // bm, N // bn, K // bk): the contraction last, so that each output
      block's visits are consecutive steps;
    - an f32 accumulator as VMEM scratch (`_tpu(J).VMEM((bm, bn), F32)`), zeroed at the
      first contraction step and stored into the output block at the last;
    - `compiler_params=_tpu(J).CompilerParams(dimension_semantics=...)`: "parallel" for the
      two axes that pick the output block, "arbitrary" for the contraction."""
    raise NotImplementedError("tpu_matmul")
