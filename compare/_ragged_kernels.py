"""Grouped-matmul Pallas kernels written once, against whichever `jax`, `pl` and `pltpu` are
passed in: `gmm` (the forward of `lax.ragged_dot`), `tgmm` (its weight gradient), both
behind a `custom_vjp`, and the fused expert MLP `act(x_g @ W_up[g]) @ W_down[g]` with its
backward kernels.

`build(jax, pl, pltpu, interpret=...)` returns a namespace of them; pass `jax` with its
`experimental.pallas` and `experimental.pallas.tpu`, or minijax's. `interpret` is Pallas'
own: True (plain interpret mode), `pltpu.InterpretParams()` (interpret mode with the TPU's
pipeline semantics) or False (compile with Mosaic, on a TPU). The rows of `x` are sorted by
group: group g owns rows `offsets[g] <= r < offsets[g+1]` (offsets the running sum of
`group_sizes`), rows past the last group are zero in every result. Used by compare/ragged.py
and tests/ragged_kernels_test.py; taught in chapters/28-ragged-dot-gmm.md.

The grid walks *visits*: one per (row tile, group) pair that meets, found from the group
sizes ahead of time (`group_metadata`) and handed to the kernels by scalar prefetch, so each
index map can pick the row tile and the group's weight block of its visit. A tile that
straddles two groups is visited twice, and each visit writes only its own group's rows
(the only place a row mask is computed: a tile wholly inside one group is stored as is).

TPU-first (chapter 16, "Pallas on a TPU"): blocks obey the (8, 128) rule, scratch lives in
VMEM, operands enter the MXU in their own dtype (bf16) with float32 accumulation, and every
grid is ordered so that **each output block's visits are consecutive**. A TPU keeps an output
block in VMEM while the grid stays on it, copies it back to HBM when its block index changes,
and never reads it back: a grid that leaves an output block and returns to it later (as a
grid (visit, column tile, k) does between the two visits of a straddling row tile) starts
the second stay from garbage and overwrites the first one's rows. So `gmm` walks column
tiles outermost, `(N/bn, visit, K/bk)`, and the fused MLP keeps F innermost, `(visit, F/bf)`;
its backward, one kernel for dx and both weight gradients, walks `(F/bf, visit)` (the visits
of a row tile and of a group are both consecutive) and sums per-F-block partials of dx when
there are several.

Tilings (all divide their dimension; a block dimension is a multiple of its (8, 128) tile,
or the whole dimension; bf16 rows prefer multiples of 16):
  gmm (bm, bk, bn): blocks x (bm, bk), w (bk, bn), out (bm, bn);
  tgmm (bm, bk, bn): blocks x (bm, bk), dy (bm, bn), out (bk, bn); x is contracted over
    its rows (transposed on chip), so multiples of 128 for bm are the safe choice;
  fused MLP (bm, bf[, bc[, bs]]): blocks x (bm, D), w_up (D, bf), w_down (bf, D), out
    (bm, D): D is whole, bf a multiple of 128; inside a step a static loop over F chunks of
    bc columns, and a straddling tile computed in sub-tiles of bs rows (only those that meet
    the group). Checked by Mosaic's lowering in tests/ragged_kernels_test.py at
    (512, 1024, 512), (256, 512, 256) and (512, 512), (256, 1024), (256, 4096), (128, 2048).

The fused expert MLP on a TPU v5e (bf16, M 8192, G 8 uneven with an empty group; measured
with tools/mlp_tune.py, two `lax.ragged_dot`s + SiLU as the anchor, forward+backward timed as
`jax.vjp`'s cotangents, where XLA drops both forwards):

    D     F     forward ms (anchor)    speedup   fwd+bwd ms (anchor)    speedup
    512   4096  1.203  (1.325)         1.10x     2.050  (2.947)         1.44x
    1024  2048  1.144  (1.250)         1.09x     2.121  (2.550)         1.20x
    1024  4096  1.596  (1.891)         1.18x     3.187  (4.506)         1.41x
    2048  4096  2.554  (2.792)         1.09x     5.935  (7.539)         1.27x
    2048  8192  4.467  (11.999)        2.69x     10.603 (21.152)        1.99x

Forward+backward meets issue 41's 1.15x everywhere; the forward's 1.3x holds only where
`ragged_dot` itself collapses (D 2048, F 8192). Why not elsewhere: the forward is compute
bound, not memory bound. With the whole F resident (bf = F) each group's weights cross HBM
once, so the kernel moves x, out and the weights, 160 MiB at D 1024, F 4096: 0.2 ms at
819 GB/s against 1.6 ms measured; its 4*M*D*F FLOPs (plus the straddling tiles' extra
sub-tiles, about 5%) run at 86 TFLOP/s counted, 44% of the 197 TFLOP/s peak, where
this chip's best Pallas tiled matmul reaches 104 TFLOP/s (53%) and `ragged_dot` 72. A 1.3x
forward would need 94 TFLOP/s counted (about 99 executed), i.e. the fused pair of matmuls
with SiLU between running at the single tiled matmul's ceiling; the SiLU between them is on
the critical path (changing its formula moves the time by 3%), and 512-row tiles, which
would halve the MXU's weight pushes per row, spill (2.24 ms). The backward wins more
because the unfused pair's backward does 8*M*D*F FLOPs in four ragged_dots with two passes
over the stored (M, F) hidden layer, while the fused one does 10*M*D*F in one kernel that
never leaves VMEM.
"""

from __future__ import annotations

import functools
import types

import numpy as np

F32 = np.float32
_MIB = 1 << 20
# sigmoid(h) as (1 + tanh(h/2)) / 2 in the MLP kernels (one transcendental instead of an exp
# and a division): measured on a v5e it is 3% *slower* (1.665 vs 1.608 ms forward, 3.36 vs
# 3.28 ms backward at M 8192, D 1024, F 4096), so off; read when a kernel is traced.
SIGMOID_VIA_TANH = False


def _vmem_limit(block_bytes: int, scratch_bytes: int) -> int:
    """A VMEM budget for Mosaic: every in/out block double-buffered by the pipeline, the
    scratch, and room for the kernel's temporaries (v5e: 128 MiB of VMEM, 16 MiB scoped by
    default, too little for 512-row tiles of a wide model)."""
    need = 2 * block_bytes + scratch_bytes
    return int(min(max(2 * need, 32 * _MIB), 100 * _MIB))


def build(jax, pl, pltpu, *, interpret=True) -> types.SimpleNamespace:
    """The kernels of this module bound to `jax` (jax or minijax), `pl` and `pltpu`, run with
    Pallas' `interpret` (True, `pltpu.InterpretParams()`, or False: compiled by Mosaic)."""
    jnp, lax = jax.numpy, jax.lax
    SDS = jax.ShapeDtypeStruct

    def call(kernel, *, grid_spec, out_shape, semantics, block_bytes, scratch_bytes=0):
        params = pltpu.CompilerParams(dimension_semantics=semantics,
                                      vmem_limit_bytes=_vmem_limit(block_bytes, scratch_bytes))
        return pl.pallas_call(kernel, grid_spec=grid_spec, out_shape=out_shape,
                              compiler_params=params, interpret=interpret)

    # ------------------------------------------------------------------ group metadata
    def group_metadata(group_sizes, m: int, bm: int, visit_empty_groups: bool,
                       cover_tail: bool = False):
        """The visits of a grid over `m` rows in tiles of `bm`, as int32 arrays:
        `offsets` [G+1], per visit `group_ids` [W] and `m_tile_ids` [W], and `num_visits`
        [1]; W = tiles + G - 1 is the most visits there can be, the rest repeat the last
        visit and are skipped. Row tiles that no group reaches get one visit (so `gmm` writes
        their zeros); with `visit_empty_groups` each empty group gets one visit instead (so
        `tgmm` writes its zero gradient); with both flags set, both (the fused MLP's backward
        writes zero rows and zero gradients)."""
        g = group_sizes.shape[0]
        tiles = m // bm
        sizes = group_sizes.astype(np.int32)
        ends = jnp.cumsum(sizes)
        offsets = jnp.concatenate([jnp.zeros((1,), np.int32), ends])
        first = offsets[:-1] // bm
        last = (ends - 1) // bm
        if visit_empty_groups:
            tile0 = jnp.minimum(first, tiles - 1)
            count = jnp.where(sizes > 0, last - first + 1, 1)
        else:
            tile0, count = first, jnp.where(sizes > 0, last - first + 1, 0)
        gid = jnp.arange(g, dtype=np.int32)
        if cover_tail or not visit_empty_groups:
            # a last pseudo-group: the tiles after the last row of any group (empty mask)
            covered = (ends[-1] + bm - 1) // bm
            tile0 = jnp.concatenate([tile0, covered[None]])
            count = jnp.concatenate([count, (tiles - covered)[None]])
            gid = jnp.concatenate([gid, jnp.full((1,), g - 1, np.int32)])
        n_visits = tiles + g - 1
        cum = jnp.cumsum(count)
        w = jnp.arange(n_visits, dtype=np.int32)
        which = jnp.minimum(jnp.sum(w[:, None] >= cum[None, :], axis=1), count.shape[0] - 1)
        local = w - (jnp.take(cum, which) - jnp.take(count, which))
        total = cum[-1]
        # past the last visit: repeat it (the kernels skip visits w >= num_visits)
        last_w = jnp.maximum(total - 1, 0)
        which_last = jnp.minimum(jnp.sum(last_w >= cum), count.shape[0] - 1)
        local_last = last_w - (cum[which_last] - count[which_last])
        valid = w < total
        tile = jnp.where(valid, jnp.take(tile0, which) + local, tile0[which_last] + local_last)
        group = jnp.where(valid, jnp.take(gid, which), gid[which_last])
        tile = jnp.clip(tile, 0, tiles - 1).astype(np.int32)
        return (offsets.astype(np.int32), group.astype(np.int32), tile,
                total.astype(np.int32)[None])

    # ------------------------------------------------------------------ kernel helpers
    def _rows_of(offs_ref, g, start, shape):
        """Which rows of a block of `shape` whose first row is `start` belong to group g."""
        rows = start + lax.broadcasted_iota(np.int32, shape, 0)
        return (rows >= offs_ref[g]) & (rows < offs_ref[g + 1])

    def _row_mask(offs_ref, g, tile, shape):
        """Which rows of a (bm, n) tile belong to group g (broadcast to the tile's shape)."""
        return _rows_of(offs_ref, g, tile * shape[0], shape)

    def _whole(offs_ref, g, tile, bm):
        """Whether row tile `tile` lies wholly inside group g: then nothing is masked."""
        return (offs_ref[g] <= tile * bm) & ((tile + 1) * bm <= offs_ref[g + 1])

    def _dot(a, b, contract=(1, 0)):
        """a @ b on the MXU: operands in their own dtype, float32 accumulation; `contract`
        names the dimension of a and of b that is summed ((1, 1): b transposed)."""
        return lax.dot_general(a, b, (((contract[0],), (contract[1],)), ((), ())),
                               preferred_element_type=F32)

    def _dot_t(a, b):
        """a.T @ b, the weight gradients' product over rows: a is transposed on chip in
        float32 (as JAX's megablox and flash-attention kernels do), then enters the MXU in
        its own dtype."""
        return _dot(a.astype(F32).T.astype(a.dtype), b)

    def _masked(x, mask):
        """x with the rows outside the mask zeroed (the select in float32: a v5e's vector
        unit has no bf16)."""
        return jnp.where(mask, x.astype(F32), 0.0).astype(x.dtype)

    def _store_rows(o_ref, out, offs_ref, g, tile, first_visit):
        """Write this visit's rows of `out` into the resident output tile: all of them when
        the tile is inside group g; else through the mask, on zeros at the tile's first
        visit and on what the earlier visits of the tile wrote at its later ones."""
        whole = _whole(offs_ref, g, tile, out.shape[0])

        @pl.when(whole)
        def _():
            o_ref[...] = out.astype(o_ref.dtype)

        @pl.when(~whole & first_visit)
        def _():
            o_ref[...] = jnp.where(_row_mask(offs_ref, g, tile, out.shape), out,
                                   0.0).astype(o_ref.dtype)

        @pl.when(~whole & ~first_visit)
        def _():
            o_ref[...] = jnp.where(_row_mask(offs_ref, g, tile, out.shape), out,
                                   o_ref[...].astype(F32)).astype(o_ref.dtype)

    def _visit(gid_ref, tid_ref, nv_ref, axis: int):
        """For a kernel whose grid axis `axis` walks the visits in row-tile order: this
        visit's group and row tile, whether it is its tile's first visit, and whether it is
        live (the visits past `num_visits` repeat the last one and do nothing)."""
        v = pl.program_id(axis)
        tile = tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])
        return gid_ref[v], tile, first_visit, v < nv_ref[0]

    def _visit_of_group(gid_ref, nv_ref, axis: int):
        """For a kernel whose grid axis `axis` walks the visits in group order (the
        weight-gradient kernels): this visit's group, whether it is the first and the last
        visit of its group (zero the accumulator there; write it out there), and whether it
        is live."""
        v = pl.program_id(axis)
        last_v = pl.num_programs(axis) - 1
        g = gid_ref[v]
        new_group = (v == 0) | (g != gid_ref[jnp.maximum(v - 1, 0)])
        ends_group = (v == last_v) | (g != gid_ref[jnp.minimum(v + 1, last_v)])
        return g, new_group, ends_group, v < nv_ref[0]

    def _itemsize(*arrays):
        return max(np.dtype(a.dtype).itemsize for a in arrays)

    # ------------------------------------------------------------------ gmm
    def gmm_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, w_ref, o_ref, *acc, nk,
                   transpose_rhs):
        # grid (column tile j, visit v, k tile): the output block (tile of v, j) stays
        # resident while k runs and while consecutive visits share the tile
        g, tile, first_visit, live = _visit(gid_ref, tid_ref, nv_ref, 1)
        kk = pl.program_id(2)

        def product():
            return _dot(x_ref[...], w_ref[...], (1, 1) if transpose_rhs else (1, 0))

        if nk == 1:  # no k loop: the product goes straight to the output tile
            @pl.when(live)
            def _():
                _store_rows(o_ref, product(), offs_ref, g, tile, first_visit)
            return
        acc_ref, = acc

        @pl.when(live & (kk == 0))
        def _():
            acc_ref[...] = product()

        @pl.when(live & (kk > 0))
        def _():
            acc_ref[...] += product()

        @pl.when(live & (kk == nk - 1))
        def _():
            _store_rows(o_ref, acc_ref[...], offs_ref, g, tile, first_visit)

    def gmm(lhs, rhs, group_sizes, tiling=None, transpose_rhs=False):
        """`lax.ragged_dot(lhs, rhs, group_sizes)` as a kernel: lhs [M,K], rhs [G,K,N]
        ([G,N,K] with `transpose_rhs`), group_sizes i32[G] -> [M,N] in lhs's dtype; tiling
        (bm, bk, bn) divides (M, K, N) (default: `default_tiling`)."""
        m, k = lhs.shape
        n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
        bm, bk, bn = tiling or default_tiling(m, k, n)
        nk = k // bk
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        if transpose_rhs:
            w_spec = pl.BlockSpec((None, bn, bk), lambda j, v, kk, offs, gid, tid, nv:
                                  (gid[v], j, kk))
        else:
            w_spec = pl.BlockSpec((None, bk, bn), lambda j, v, kk, offs, gid, tid, nv:
                                  (gid[v], kk, j))
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(n // bn, meta[1].shape[0], nk),
            in_specs=[pl.BlockSpec((bm, bk), lambda j, v, kk, offs, gid, tid, nv:
                                   (tid[v], kk)), w_spec],
            out_specs=pl.BlockSpec((bm, bn), lambda j, v, kk, offs, gid, tid, nv: (tid[v], j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), F32)] if nk > 1 else [])
        s = _itemsize(lhs, rhs)
        return call(functools.partial(gmm_kernel, nk=nk, transpose_rhs=transpose_rhs),
                    grid_spec=spec, out_shape=SDS((m, n), lhs.dtype),
                    semantics=("parallel", "arbitrary", "arbitrary"),
                    block_bytes=s * (bm * bk + bk * bn + bm * bn),
                    scratch_bytes=4 * bm * bn * (nk > 1))(*meta, lhs, rhs)

    # ------------------------------------------------------------------ tgmm
    def tgmm_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, dy_ref, o_ref, acc_ref):
        # grid (k tile, n tile, visit): the visits of one group are consecutive, so its
        # output block (g, i, j) stays resident while they accumulate into it
        g, new_group, ends_group, live = _visit_of_group(gid_ref, nv_ref, 2)
        tile = tid_ref[pl.program_id(2)]
        whole = _whole(offs_ref, g, tile, x_ref.shape[0])

        @pl.when(new_group)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        @pl.when(live & whole)
        def _():
            acc_ref[...] += _dot_t(x_ref[...], dy_ref[...])

        @pl.when(live & ~whole)
        def _():
            x = x_ref[...]
            acc_ref[...] += _dot_t(_masked(x, _row_mask(offs_ref, g, tile, x.shape)),
                                   dy_ref[...])

        @pl.when(ends_group)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    def tgmm(lhs, dy, group_sizes, tiling=None):
        """The weight gradient of `gmm`: out[g] = lhs[rows of g].T @ dy[rows of g].
        lhs [M,K], dy [M,N], group_sizes i32[G] -> [G,K,N] (zero for empty groups)."""
        (m, k), n = lhs.shape, dy.shape[1]
        bm, bk, bn = tiling or default_tiling(m, k, n)
        g = group_sizes.shape[0]
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=True)
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(k // bk, n // bn, meta[1].shape[0]),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, v, offs, gid, tid, nv: (tid[v], i)),
                      pl.BlockSpec((bm, bn), lambda i, j, v, offs, gid, tid, nv: (tid[v], j))],
            out_specs=pl.BlockSpec((None, bk, bn),
                                   lambda i, j, v, offs, gid, tid, nv: (gid[v], i, j)),
            scratch_shapes=[pltpu.VMEM((bk, bn), F32)])
        s = _itemsize(lhs, dy)
        return call(tgmm_kernel, grid_spec=spec, out_shape=SDS((g, k, n), lhs.dtype),
                    semantics=("parallel", "parallel", "arbitrary"),
                    block_bytes=s * (bm * bk + bm * bn + bk * bn),
                    scratch_bytes=4 * bk * bn)(*meta, lhs, dy)

    # ------------------------------------------------------------------ gmm with a custom_vjp
    @functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
    def grouped_matmul(lhs, rhs, group_sizes, tiling=None):
        """`gmm` whose gradient is `gmm` (for lhs) and `tgmm` (for rhs): grad of this equals
        grad of `lax.ragged_dot`."""
        return gmm(lhs, rhs, group_sizes, tiling)

    def _gmm_fwd(lhs, rhs, group_sizes, tiling):
        return gmm(lhs, rhs, group_sizes, tiling), (lhs, rhs, group_sizes)

    def _gmm_bwd(tiling, res, dy):
        lhs, rhs, group_sizes = res
        (m, k), n = lhs.shape, rhs.shape[2]
        bm, bk, bn = tiling or default_tiling(m, k, n)
        d_lhs = gmm(dy, rhs, group_sizes, (bm, bn, bk), transpose_rhs=True)
        d_rhs = tgmm(lhs, dy, group_sizes, (bm, bk, bn))
        return d_lhs, d_rhs, None

    grouped_matmul.defvjp(_gmm_fwd, _gmm_bwd)

    # ------------------------------------------------------------------ fused expert MLP
    def _sigmoid(h):
        # one tanh on the TPU's transcendental unit, not an exp and a division
        return 0.5 * jnp.tanh(0.5 * h) + 0.5 if SIGMOID_VIA_TANH else jax.nn.sigmoid(h)

    def _silu(h):
        return h * _sigmoid(h)

    def _silu_grad(h):
        s = _sigmoid(h)
        return s * (1.0 + h * (1.0 - s))

    def _chunks(n: int, bc: int):
        """Static slices of `bc` columns covering n (the F chunks one grid step loops over)."""
        return [slice(c, c + bc) for c in range(0, n, bc)]

    def _sub_tiles(offs_ref, g, tile, bm: int, bs: int):
        """For a row tile that straddles groups: the static `bs`-row slices of the tile and
        whether each meets group g. Only those are computed, so a straddling tile costs the
        rows of g rounded out to `bs`, not a whole second tile (bs == bm: the tile itself)."""
        out = []
        for lo in range(0, bm, bs):
            start = tile * bm + lo
            out.append((slice(lo, lo + bs),
                        (start < offs_ref[g + 1]) & (start + bs > offs_ref[g])))
        return out

    def mlp_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, o_ref, acc_ref,
                   *, bc, bs):
        # grid (visit, F block): F is the reduction, innermost, so the output row tile stays
        # resident over it (and over the next visit of the same tile). With one F block
        # (bf = F) the weight blocks' index is the group's alone: consecutive visits of one
        # group keep its weights in VMEM (the pipeline skips a copy whose block index did not
        # change), so each weight is read from HBM once. Inside a step a static loop walks
        # F in chunks of bc: (rows, bc) of the hidden layer at a time, never written out.
        g, tile, first_visit, live = _visit(gid_ref, tid_ref, nv_ref, 0)
        f = pl.program_id(1)
        bm = x_ref.shape[0]
        whole = _whole(offs_ref, g, tile, bm)

        def accumulate(rows):
            x = x_ref[rows, :]
            out = None
            for cols in _chunks(up_ref.shape[1], bc):
                h = _dot(x, up_ref[:, cols])
                p = _dot(_silu(h).astype(x.dtype), down_ref[cols, :])
                out = p if out is None else out + p

            @pl.when(f == 0)
            def _():
                acc_ref[rows, :] = out

            @pl.when(f > 0)
            def _():
                acc_ref[rows, :] += out

        @pl.when(live & whole)
        def _():
            accumulate(slice(None))

        for rows, meets in _sub_tiles(offs_ref, g, tile, bm, bs):
            pl.when(live & ~whole & meets)(functools.partial(accumulate, rows))

        @pl.when(live & (f == pl.num_programs(1) - 1))
        def _():
            _store_rows(o_ref, acc_ref[...], offs_ref, g, tile, first_visit)

    def _mlp_specs(bm, bf, d):
        return [pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
                pl.BlockSpec((None, d, bf), lambda v, f, offs, gid, tid, nv: (gid[v], 0, f)),
                pl.BlockSpec((None, bf, d), lambda v, f, offs, gid, tid, nv: (gid[v], f, 0))]

    def _mlp_tiling(x, w_up, tiling, backward=False):
        """(bm, bf, bc, bs): row tile, F block of a grid step, F chunk of the loop inside a
        step, row sub-tile of a straddling tile. Default: 256 rows, the whole F when a
        group's weights fit in VMEM (else the largest block that does), chunks of 512."""
        (m, d), f = x.shape, w_up.shape[2]
        tiling = tuple(tiling or ())
        bm = tiling[0] if tiling else _fit(m, 128 if backward else 256, 16)
        if len(tiling) > 1:
            bf = tiling[1]
        else:  # the weight blocks (and in the backward their gradients) double-buffered
            per_col = d * (2 * 2 * 2 if not backward else 3 * 2 * 2 * 2)
            bf = _fit(f, max(128, (48 * _MIB // per_col) // 128 * 128), 128)
        bc = tiling[2] if len(tiling) > 2 else _fit(bf, 512, 128)
        bs = tiling[3] if len(tiling) > 3 else (128 if bm % 128 == 0 else bm)
        return bm, bf, bc, bs

    def fused_mlp_fwd(x, w_up, w_down, group_sizes, tiling=None):
        """`silu(x_g @ w_up[g]) @ w_down[g]` per group in one kernel: x [M,D], w_up
        [G,D,F], w_down [G,F,D], group_sizes i32[G] -> [M,D]; tiling (bm, bf[, bc[, bs]])
        divides (M, F) (see `_mlp_tiling`)."""
        bm, bf, bc, bs = _mlp_tiling(x, w_up, tiling)
        (m, d), f = x.shape, w_up.shape[2]
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(meta[1].shape[0], f // bf),
            in_specs=_mlp_specs(bm, bf, d),
            out_specs=pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
            scratch_shapes=[pltpu.VMEM((bm, d), F32)])
        s = _itemsize(x, w_up, w_down)
        return call(functools.partial(mlp_kernel, bc=bc, bs=bs), grid_spec=spec,
                    out_shape=SDS((m, d), x.dtype), semantics=("arbitrary", "arbitrary"),
                    block_bytes=s * (2 * bm * d + 2 * d * bf),
                    scratch_bytes=4 * (2 * bm * d + 3 * bm * bc))(*meta, x, w_up, w_down)

    def mlp_bwd_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, dy_ref,
                       dx_ref, dup_ref, ddown_ref, dx_acc, acc_up, acc_down, *, bc, bs):
        # One kernel for all three cotangents, so the hidden layer h = x @ w_up and its
        # gradient dh = (dy @ w_down.T) * silu'(h) are computed once per row and F chunk
        # and used three times:
        #   dx += dh @ w_up.T,  d w_up[g] += x.T @ dh,  d w_down[g] += silu(h).T @ dy.
        # Grid (F block, visit): visits walk row tiles in order, which is group order, so
        # both the dx tile (while its visits last) and the group's weight-gradient blocks
        # (while the group's visits last) stay resident; the weight blocks too. dx is a
        # partial sum per F block (summed outside when there are several).
        g, new_group, ends_group, live = _visit_of_group(gid_ref, nv_ref, 1)
        v = pl.program_id(1)
        tile = tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])
        bm = x_ref.shape[0]
        whole = _whole(offs_ref, g, tile, bm)

        @pl.when(new_group)
        def _():
            acc_up[...] = jnp.zeros_like(acc_up)
            acc_down[...] = jnp.zeros_like(acc_down)

        def accumulate(rows, masked):
            x, dy = x_ref[rows, :], dy_ref[rows, :]
            if masked:  # rows of other groups zeroed in x zero their h, silu(h), x.T @ dh
                x = _masked(x, _rows_of(offs_ref, g, tile * bm + rows.start, x.shape))
            out = None
            for cols in _chunks(up_ref.shape[1], bc):
                up = up_ref[:, cols]
                h = _dot(x, up)
                dh = (_dot(dy, down_ref[cols, :], (1, 1)) * _silu_grad(h)).astype(x.dtype)
                p = _dot(dh, up, (1, 1))
                out = p if out is None else out + p
                acc_up[:, cols] += _dot_t(x, dh)
                acc_down[cols, :] += _dot_t(_silu(h).astype(x.dtype), dy)
            dx_acc[rows, :] = out

        @pl.when(live & whole)
        def _():
            accumulate(slice(0, bm), False)

        for rows, meets in _sub_tiles(offs_ref, g, tile, bm, bs):
            pl.when(live & ~whole & meets)(functools.partial(accumulate, rows, True))

        @pl.when(live)
        def _():
            _store_rows(dx_ref, dx_acc[...], offs_ref, g, tile, first_visit)

        @pl.when(ends_group)
        def _():
            dup_ref[...] = acc_up[...].astype(dup_ref.dtype)
            ddown_ref[...] = acc_down[...].astype(ddown_ref.dtype)

    def fused_mlp_bwd(x, w_up, w_down, group_sizes, dy, tiling=None):
        """The cotangents (dx, d w_up, d w_down) of `fused_mlp_fwd` for output cotangent dy
        [M,D], from one kernel that recomputes the hidden layer instead of storing it:
        10*M*D*F FLOPs (h, dh, and the three products), against 8*M*D*F for the unfused
        pair's backward, which reads the stored h instead."""
        bm, bf, bc, bs = _mlp_tiling(x, w_up, tiling, backward=True)
        (m, d), (g, _, f) = x.shape, w_up.shape
        # the backward holds twice the forward's blocks (weights, their gradients, the f32
        # accumulators): an F block that fits the forward may not fit here, so shrink it
        bf = min(bf, _mlp_tiling(x, w_up, None, backward=True)[1])
        bc = min(bc, bf)
        nf = f // bf
        s = _itemsize(x, w_up, w_down, dy)
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=True, cover_tail=True)
        rows = lambda f, v, offs, gid, tid, nv: (tid[v], 0)
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(nf, meta[1].shape[0]),
            in_specs=[pl.BlockSpec((bm, d), rows),
                      pl.BlockSpec((None, d, bf), lambda f, v, offs, gid, tid, nv:
                                   (gid[v], 0, f)),
                      pl.BlockSpec((None, bf, d), lambda f, v, offs, gid, tid, nv:
                                   (gid[v], f, 0)),
                      pl.BlockSpec((bm, d), rows)],
            out_specs=[pl.BlockSpec((None, bm, d), lambda f, v, offs, gid, tid, nv:
                                    (f, tid[v], 0)),
                       pl.BlockSpec((None, d, bf), lambda f, v, offs, gid, tid, nv:
                                    (gid[v], 0, f)),
                       pl.BlockSpec((None, bf, d), lambda f, v, offs, gid, tid, nv:
                                    (gid[v], f, 0))],
            scratch_shapes=[pltpu.VMEM((bm, d), F32), pltpu.VMEM((d, bf), F32),
                            pltpu.VMEM((bf, d), F32)])
        dx_dtype = x.dtype if nf == 1 else F32
        dx, d_up, d_down = call(
            functools.partial(mlp_bwd_kernel, bc=bc, bs=bs), grid_spec=spec,
            out_shape=[SDS((nf, m, d), dx_dtype), SDS((g, d, f), w_up.dtype),
                       SDS((g, f, d), w_down.dtype)],
            semantics=("parallel", "arbitrary"),
            block_bytes=s * (2 * bm * d + 4 * d * bf) + 4 * bm * d,
            scratch_bytes=4 * (bm * d + 2 * d * bf + 6 * bm * bc))(*meta, x, w_up, w_down, dy)
        dx = dx[0] if nf == 1 else jnp.sum(dx, axis=0).astype(x.dtype)
        return dx, d_up, d_down

    @functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
    def fused_mlp(x, w_up, w_down, group_sizes, tiling=None):
        """The fused expert MLP with its fused backward: grad equals grad of
        `ragged_mlp` (the unfused `ragged_dot` version)."""
        return fused_mlp_fwd(x, w_up, w_down, group_sizes, tiling)

    def _mlp_fwd(x, w_up, w_down, group_sizes, tiling):
        return fused_mlp_fwd(x, w_up, w_down, group_sizes, tiling), (x, w_up, w_down,
                                                                      group_sizes)

    def _mlp_bwd(tiling, res, dy):
        return (*fused_mlp_bwd(*res, dy, tiling), None)

    fused_mlp.defvjp(_mlp_fwd, _mlp_bwd)

    def ragged_mlp(x, w_up, w_down, group_sizes):
        """The unfused reference: two `lax.ragged_dot`s with the (M, F) hidden layer between."""
        h = lax.ragged_dot(x, w_up, group_sizes)
        return lax.ragged_dot(h * jax.nn.sigmoid(h), w_down, group_sizes)

    return types.SimpleNamespace(
        group_metadata=group_metadata, gmm=gmm, tgmm=tgmm, grouped_matmul=grouped_matmul,
        fused_mlp_fwd=fused_mlp_fwd, fused_mlp_bwd=fused_mlp_bwd, fused_mlp=fused_mlp,
        ragged_mlp=ragged_mlp)


def _fit(n: int, most: int, unit: int) -> int:
    """The largest multiple of `unit` that divides n and is at most `most`; n itself (a whole
    dimension is always a legal block) when there is none."""
    for b in range(min(most, n) // unit * unit, 0, -unit):
        if n % b == 0:
            return b
    return n


def default_tiling(m: int, k: int, n: int) -> tuple[int, int, int]:
    """A TPU-legal (bm, bk, bn) for `gmm`/`tgmm`: rows up to 512 in multiples of 128 (legal
    as tgmm's lane dimension too), k and n up to 1024/512 in multiples of 128, or whole."""
    return _fit(m, 512, 128), _fit(k, 1024, 128), _fit(n, 512, 128)


# ---------------------------------------------------------------------------------------------
# The cost model: FLOPs and HBM bytes of the expert MLP, fused and unfused
# ---------------------------------------------------------------------------------------------

def mlp_cost(g: int, m: int, d: int, f: int, itemsize: int = 2, bm: int = 512) -> dict:
    """FLOPs and HBM bytes of `silu(x_g @ W_up[g]) @ W_down[g]` over m rows spread evenly
    over g groups. Both versions do the same 4*m*d*f multiply-add FLOPs (plus m*f for the
    activation). The unfused pair (two ragged_dots, the activation fused into the first's
    epilogue) reads each weight once, and writes the (m, f) hidden layer and reads it back.
    The fused kernel never stores the hidden layer, but its grid is (visit, F block) with the
    output row tile resident over F, so it streams *all* of a group's weights through VMEM
    once per row tile it visits: with `row_tiles = g * ceil(m / (g * bm))` visits (each
    group's m/g rows in tiles of bm; groups that straddle tiles add up to g - 1 more),

        bytes_unfused = itemsize * (2*m*d + 2*g*d*f + 2*m*f)
        bytes_fused   = itemsize * (2*m*d + 2*d*f * row_tiles)

    With many rows per group, row_tiles ~ m / bm, and the intensities (FLOPs per byte) tend
    to 2 / (itemsize * (1/f + 1/bm)) fused and 2 / (itemsize * (1/d + 1/f)) unfused: fusing
    trades the hidden layer's traffic (the 1/d term) for the weights' re-reads (the 1/bm
    term), and moves fewer bytes only when the row tile is taller than the model is wide
    (bm > d). The fused kernel's intensity is capped near 2*bm/itemsize (bm for bf16).

    This is the kernel with an F block smaller than F (bf < F). With bf = F (the default when
    a group's weights fit in VMEM, e.g. D 1024, F 4096 in bf16: 16 MiB, 32 double-buffered)
    the weight blocks' index is the group's alone, consecutive visits of one group skip the
    copy, and each weight is read once: `row_tiles` is then G, the fused kernel moves fewer
    bytes than the unfused pair at every shape, and it is compute bound (see the module's
    docstring for the measured numbers)."""
    row_tiles = g * -(-m // (g * bm))
    flops = 4 * m * d * f + m * f
    fused = itemsize * (2 * m * d + 2 * d * f * row_tiles)
    unfused = itemsize * (2 * m * d + 2 * g * d * f + 2 * m * f)
    return {"G": g, "M": m, "D": d, "F": f, "bm": bm, "row_tiles": row_tiles, "flops": flops,
            "bytes_fused": fused, "bytes_unfused": unfused}


def roofline_time(cost: dict, peak_flops: float, hbm_bandwidth: float, fused: bool) -> float:
    """The roofline's lower bound on the time: the larger of compute time and memory time."""
    nbytes = cost["bytes_fused" if fused else "bytes_unfused"]
    return max(cost["flops"] / peak_flops, nbytes / hbm_bandwidth)
