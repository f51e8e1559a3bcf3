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
tiles outermost, `(N/bn, visit, K/bk)`, and the fused MLP keeps F innermost, `(visit, F/bf)`.

Tilings (all divide their dimension; a block dimension is a multiple of its (8, 128) tile,
or the whole dimension; bf16 rows prefer multiples of 16):
  gmm (bm, bk, bn): blocks x (bm, bk), w (bk, bn), out (bm, bn);
  tgmm (bm, bk, bn): blocks x (bm, bk), dy (bm, bn), out (bk, bn); x is contracted over
    its rows (transposed on chip), so multiples of 128 for bm are the safe choice;
  fused MLP (bm, bf): blocks x (bm, D), w_up (D, bf), w_down (bf, D), out (bm, D): D is
    whole, bf a multiple of 128. Checked by Mosaic's lowering in tests/ragged_kernels_test.py
    at (512, 1024, 512), (256, 512, 256) and (512, 512), (256, 1024).
"""

from __future__ import annotations

import functools
import types

import numpy as np

F32 = np.float32
_MIB = 1 << 20


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
    def group_metadata(group_sizes, m: int, bm: int, visit_empty_groups: bool):
        """The visits of a grid over `m` rows in tiles of `bm`, as int32 arrays:
        `offsets` [G+1], per visit `group_ids` [W] and `m_tile_ids` [W], and `num_visits`
        [1]; W = tiles + G - 1 is the most visits there can be, the rest repeat the last
        visit and are skipped. Row tiles that no group reaches get one visit (so `gmm` writes
        their zeros); with `visit_empty_groups` each empty group gets one visit instead (so
        `tgmm` writes its zero gradient)."""
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
            gid = jnp.arange(g, dtype=np.int32)
        else:  # a last pseudo-group: the tiles after the last row of any group (empty mask)
            covered = (ends[-1] + bm - 1) // bm
            tile0 = jnp.concatenate([first, covered[None]])
            count = jnp.concatenate([jnp.where(sizes > 0, last - first + 1, 0),
                                     (tiles - covered)[None]])
            gid = jnp.concatenate([jnp.arange(g, dtype=np.int32),
                                   jnp.full((1,), g - 1, np.int32)])
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
    def _row_mask(offs_ref, g, tile, shape):
        """Which rows of a (bm, n) tile belong to group g (broadcast to the tile's shape)."""
        rows = tile * shape[0] + lax.broadcasted_iota(np.int32, shape, 0)
        return (rows >= offs_ref[g]) & (rows < offs_ref[g + 1])

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
    def _silu(h):
        return h * jax.nn.sigmoid(h)

    def _silu_grad(h):
        s = jax.nn.sigmoid(h)
        return s * (1.0 + h * (1.0 - s))

    def mlp_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, o_ref, acc_ref):
        # grid (visit, F block): F is the reduction, innermost, so the output row tile stays
        # resident over it (and over the next visit of the same tile); each F block's slice
        # of the hidden layer lives only here, (bm, bf) at a time, and is never written out
        g, tile, first_visit, live = _visit(gid_ref, tid_ref, nv_ref, 0)
        f = pl.program_id(1)
        x = x_ref[...]

        def product():
            h = _dot(x, up_ref[...])
            return _dot(_silu(h).astype(x.dtype), down_ref[...])

        @pl.when(live & (f == 0))
        def _():
            acc_ref[...] = product()

        @pl.when(live & (f > 0))
        def _():
            acc_ref[...] += product()

        @pl.when(live & (f == pl.num_programs(1) - 1))
        def _():
            _store_rows(o_ref, acc_ref[...], offs_ref, g, tile, first_visit)

    def _mlp_specs(bm, bf, d):
        return [pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
                pl.BlockSpec((None, d, bf), lambda v, f, offs, gid, tid, nv: (gid[v], 0, f)),
                pl.BlockSpec((None, bf, d), lambda v, f, offs, gid, tid, nv: (gid[v], f, 0))]

    def _mlp_tiling(x, w_up, tiling):
        m, f = x.shape[0], w_up.shape[2]
        return tiling or (_fit(m, 512, 16), _fit(f, 512, 128))

    def fused_mlp_fwd(x, w_up, w_down, group_sizes, tiling=None):
        """`silu(x_g @ w_up[g]) @ w_down[g]` per group in one kernel: x [M,D], w_up
        [G,D,F], w_down [G,F,D], group_sizes i32[G] -> [M,D]; tiling (bm, bf) divides (M, F).
        """
        bm, bf = _mlp_tiling(x, w_up, tiling)
        (m, d), f = x.shape, w_up.shape[2]
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(meta[1].shape[0], f // bf),
            in_specs=_mlp_specs(bm, bf, d),
            out_specs=pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
            scratch_shapes=[pltpu.VMEM((bm, d), F32)])
        s = _itemsize(x, w_up, w_down)
        return call(mlp_kernel, grid_spec=spec, out_shape=SDS((m, d), x.dtype),
                    semantics=("arbitrary", "arbitrary"),
                    block_bytes=s * (2 * bm * d + 2 * d * bf),
                    scratch_bytes=4 * (bm * d + 2 * bm * bf))(*meta, x, w_up, w_down)

    def mlp_dx_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, dy_ref,
                      o_ref, acc_ref):
        # dx = ((dy @ w_down.T) * silu'(x @ w_up)) @ w_up.T, the hidden layer recomputed one
        # F block at a time; the grid is the forward's, (visit, F block)
        g, tile, first_visit, live = _visit(gid_ref, tid_ref, nv_ref, 0)
        f = pl.program_id(1)
        x = x_ref[...]

        def product():
            up = up_ref[...]
            h = _dot(x, up)
            dh = _dot(dy_ref[...], down_ref[...], (1, 1)) * _silu_grad(h)
            return _dot(dh.astype(x.dtype), up, (1, 1))

        @pl.when(live & (f == 0))
        def _():
            acc_ref[...] = product()

        @pl.when(live & (f > 0))
        def _():
            acc_ref[...] += product()

        @pl.when(live & (f == pl.num_programs(1) - 1))
        def _():
            _store_rows(o_ref, acc_ref[...], offs_ref, g, tile, first_visit)

    def mlp_dw_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, dy_ref,
                      dup_ref, ddown_ref, acc_up, acc_down):
        # grid (F block, visit): the visits of one group are consecutive and accumulate
        # d w_up[g][:, f] = x_g.T @ dh_g and d w_down[g][f, :] = silu(h_g).T @ dy_g
        g, new_group, ends_group, live = _visit_of_group(gid_ref, nv_ref, 1)
        tile = tid_ref[pl.program_id(1)]
        whole = _whole(offs_ref, g, tile, x_ref.shape[0])

        @pl.when(new_group)
        def _():
            acc_up[...] = jnp.zeros_like(acc_up)
            acc_down[...] = jnp.zeros_like(acc_down)

        def accumulate(x):
            # rows of other groups zeroed in x zero their h, silu(h) and both products
            dy = dy_ref[...]
            h = _dot(x, up_ref[...])
            dh = _dot(dy, down_ref[...], (1, 1)) * _silu_grad(h)
            acc_up[...] += _dot_t(x, dh.astype(x.dtype))
            acc_down[...] += _dot_t(_silu(h).astype(x.dtype), dy)

        @pl.when(live & whole)
        def _():
            accumulate(x_ref[...])

        @pl.when(live & ~whole)
        def _():
            x = x_ref[...]
            accumulate(_masked(x, _row_mask(offs_ref, g, tile, x.shape)))

        @pl.when(ends_group)
        def _():
            dup_ref[...] = acc_up[...].astype(dup_ref.dtype)
            ddown_ref[...] = acc_down[...].astype(ddown_ref.dtype)

    def fused_mlp_bwd(x, w_up, w_down, group_sizes, dy, tiling=None):
        """The cotangents (dx, d w_up, d w_down) of `fused_mlp_fwd` for output cotangent dy
        [M,D], from two kernels that recompute the hidden layer instead of storing it."""
        bm, bf = _mlp_tiling(x, w_up, tiling)
        (m, d), (g, _, f) = x.shape, w_up.shape
        s = _itemsize(x, w_up, w_down, dy)
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        dy_spec = pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0))
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(meta[1].shape[0], f // bf),
            in_specs=_mlp_specs(bm, bf, d) + [dy_spec],
            out_specs=pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
            scratch_shapes=[pltpu.VMEM((bm, d), F32)])
        dx = call(mlp_dx_kernel, grid_spec=spec, out_shape=SDS((m, d), x.dtype),
                  semantics=("arbitrary", "arbitrary"),
                  block_bytes=s * (3 * bm * d + 2 * d * bf),
                  scratch_bytes=4 * (bm * d + 3 * bm * bf))(*meta, x, w_up, w_down, dy)
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=True)
        swap = lambda s: pl.BlockSpec(s.block_shape, lambda f, v, *pre: s.index_map(v, f, *pre))
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(f // bf, meta[1].shape[0]),
            in_specs=[swap(s) for s in _mlp_specs(bm, bf, d) + [dy_spec]],
            out_specs=[pl.BlockSpec((None, d, bf), lambda f, v, offs, gid, tid, nv:
                                    (gid[v], 0, f)),
                       pl.BlockSpec((None, bf, d), lambda f, v, offs, gid, tid, nv:
                                    (gid[v], f, 0))],
            scratch_shapes=[pltpu.VMEM((d, bf), F32), pltpu.VMEM((bf, d), F32)])
        d_up, d_down = call(
            mlp_dw_kernel, grid_spec=spec,
            out_shape=[SDS((g, d, f), w_up.dtype), SDS((g, f, d), w_down.dtype)],
            semantics=("parallel", "arbitrary"), block_bytes=s * (2 * bm * d + 4 * d * bf),
            scratch_bytes=4 * (2 * d * bf + 3 * bm * bf))(*meta, x, w_up, w_down, dy)
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
        return lax.ragged_dot(_silu(h), w_down, group_sizes)

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
    (bm > d). The fused kernel's intensity is capped near 2*bm/itemsize (bm for bf16)."""
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
