"""Grouped-matmul Pallas kernels written once, against whichever `jax`, `pl` and `pltpu` are
passed in: `gmm` (the forward of `lax.ragged_dot`), `tgmm` (its weight gradient), both
behind a `custom_vjp`, and the fused expert MLP `act(x_g @ W_up[g]) @ W_down[g]` with its
backward kernels.

`build(jax, pl, pltpu)` returns a namespace of them; pass `jax` with its
`experimental.pallas` and `experimental.pallas.tpu`, or minijax's. Every kernel runs with
`interpret=True`. The rows of `x` are sorted by group: group g owns rows
`offsets[g] <= r < offsets[g+1]` (offsets the running sum of `group_sizes`), rows past the
last group are zero in every result. Used by compare/ragged.py and tests/ragged_kernels_test.py;
taught in chapters/28-ragged-dot-gmm.md.

The grid walks *visits*: one per (row tile, group) pair that meets, found from the group
sizes ahead of time (`group_metadata`) and handed to the kernels by scalar prefetch, so each
index map can pick the row tile and the group's weight block of its visit. A tile that
straddles two groups is visited twice, and each visit writes only its own group's rows.
"""

from __future__ import annotations

import functools
import types

import numpy as np

F32 = np.float32


def build(jax, pl, pltpu) -> types.SimpleNamespace:
    """The kernels of this module bound to `jax` (jax or minijax), `pl` and `pltpu`."""
    jnp, lax = jax.numpy, jax.lax
    SDS = jax.ShapeDtypeStruct

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

    def _row_mask(offs_ref, g, tile, bm):
        rows = tile * bm + lax.broadcasted_iota(np.int32, (bm, 1), 0)
        return (rows >= offs_ref[g]) & (rows < offs_ref[g + 1])

    # ------------------------------------------------------------------ gmm
    def _visit_of_group(gid_ref, nv_ref, axis: int):
        """For a kernel whose grid axis `axis` walks the visits (the weight-gradient kernels):
        this visit's group and row tile, whether it is the first and the last visit of its
        group (zero the accumulator there; write it out there), and whether it is live."""
        v = pl.program_id(axis)
        last_v = pl.num_programs(axis) - 1
        g = gid_ref[v]
        new_group = (v == 0) | (g != gid_ref[jnp.maximum(v - 1, 0)])
        ends_group = (v == last_v) | (g != gid_ref[jnp.minimum(v + 1, last_v)])
        return g, new_group, ends_group, v < nv_ref[0]

    def gmm_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, w_ref, o_ref, acc_ref, *, bm):
        v, kk = pl.program_id(0), pl.program_id(2)
        last_k = pl.num_programs(2) - 1
        g, tile = gid_ref[v], tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])
        live = v < nv_ref[0]

        @pl.when(kk == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...].astype(F32), w_ref[...].astype(F32))

        @pl.when(live & (kk == last_k))
        def _():
            mask = _row_mask(offs_ref, g, tile, bm)
            # the first visit of a row tile starts from zeros (rows of no group stay zero);
            # later visits keep the rows other groups wrote
            base = jnp.where(first_visit, jnp.zeros_like(acc_ref), o_ref[...].astype(F32))
            o_ref[...] = jnp.where(mask, acc_ref[...], base).astype(o_ref.dtype)

    def gmm(lhs, rhs, group_sizes, tiling=(8, 8, 8)):
        """`lax.ragged_dot(lhs, rhs, group_sizes)` as a kernel: lhs [M,K], rhs [G,K,N],
        group_sizes i32[G] -> [M,N]; tiling (bm, bk, bn) divides (M, K, N)."""
        bm, bk, bn = tiling
        (m, k), (_, _, n) = lhs.shape, rhs.shape
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        n_visits = meta[1].shape[0]
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(n_visits, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda v, j, kk, offs, gid, tid, nv: (tid[v], kk)),
                      pl.BlockSpec((None, bk, bn),
                                   lambda v, j, kk, offs, gid, tid, nv: (gid[v], kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda v, j, kk, offs, gid, tid, nv: (tid[v], j)),
            scratch_shapes=[pl.ANY((bm, bn), F32)])
        return pl.pallas_call(functools.partial(gmm_kernel, bm=bm), grid_spec=spec,
                              out_shape=SDS((m, n), lhs.dtype), interpret=True)(
            *meta, lhs, rhs)

    # ------------------------------------------------------------------ tgmm
    def tgmm_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, dy_ref, o_ref, acc_ref, *, bm):
        g, new_group, ends_group, live = _visit_of_group(gid_ref, nv_ref, 2)
        tile = tid_ref[pl.program_id(2)]

        @pl.when(new_group)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        @pl.when(live)
        def _():
            mask = _row_mask(offs_ref, g, tile, bm)
            x = jnp.where(mask, x_ref[...].astype(F32), 0.0)
            acc_ref[...] += jnp.dot(x.T, dy_ref[...].astype(F32))

        @pl.when(ends_group)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    def tgmm(lhs, dy, group_sizes, tiling=(8, 8, 8)):
        """The weight gradient of `gmm`: out[g] = lhs[rows of g].T @ dy[rows of g].
        lhs [M,K], dy [M,N], group_sizes i32[G] -> [G,K,N] (zero for empty groups)."""
        bm, bk, bn = tiling
        (m, k), n = lhs.shape, dy.shape[1]
        g = group_sizes.shape[0]
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=True)
        n_visits = meta[1].shape[0]
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(k // bk, n // bn, n_visits),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, v, offs, gid, tid, nv: (tid[v], i)),
                      pl.BlockSpec((bm, bn), lambda i, j, v, offs, gid, tid, nv: (tid[v], j))],
            out_specs=pl.BlockSpec((None, bk, bn),
                                   lambda i, j, v, offs, gid, tid, nv: (gid[v], i, j)),
            scratch_shapes=[pl.ANY((bk, bn), F32)])
        return pl.pallas_call(functools.partial(tgmm_kernel, bm=bm), grid_spec=spec,
                              out_shape=SDS((g, k, n), lhs.dtype), interpret=True)(
            *meta, lhs, dy)

    # ------------------------------------------------------------------ gmm with a custom_vjp
    @functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
    def grouped_matmul(lhs, rhs, group_sizes, tiling=(8, 8, 8)):
        """`gmm` whose gradient is `gmm` (for lhs) and `tgmm` (for rhs): grad of this equals
        grad of `lax.ragged_dot`."""
        return gmm(lhs, rhs, group_sizes, tiling)

    def _gmm_fwd(lhs, rhs, group_sizes, tiling):
        return gmm(lhs, rhs, group_sizes, tiling), (lhs, rhs, group_sizes)

    def _gmm_bwd(tiling, res, dy):
        lhs, rhs, group_sizes = res
        bm, bk, bn = tiling
        d_lhs = gmm(dy, jnp.swapaxes(rhs, 1, 2), group_sizes, (bm, bn, bk))
        d_rhs = tgmm(lhs, dy, group_sizes, tiling)
        return d_lhs, d_rhs, None

    grouped_matmul.defvjp(_gmm_fwd, _gmm_bwd)

    # ------------------------------------------------------------------ fused expert MLP
    def _silu(h):
        return h * jax.nn.sigmoid(h)

    def _silu_grad(h):
        s = jax.nn.sigmoid(h)
        return s * (1.0 + h * (1.0 - s))

    def mlp_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, o_ref, acc_ref,
                   *, bm):
        # grid (visit, F block): each F block's slice of the hidden layer lives only here,
        # (bm, bf) at a time; it is never written out
        v, f = pl.program_id(0), pl.program_id(1)
        last_f = pl.num_programs(1) - 1
        g, tile = gid_ref[v], tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])
        live = v < nv_ref[0]

        @pl.when(f == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        h = jnp.dot(x_ref[...].astype(F32), up_ref[...].astype(F32))
        acc_ref[...] += jnp.dot(_silu(h), down_ref[...].astype(F32))

        @pl.when(live & (f == last_f))
        def _():
            mask = _row_mask(offs_ref, g, tile, bm)
            base = jnp.where(first_visit, jnp.zeros_like(acc_ref), o_ref[...].astype(F32))
            o_ref[...] = jnp.where(mask, acc_ref[...], base).astype(o_ref.dtype)

    def _mlp_specs(bm, bf, d):
        return [pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
                pl.BlockSpec((None, d, bf), lambda v, f, offs, gid, tid, nv: (gid[v], 0, f)),
                pl.BlockSpec((None, bf, d), lambda v, f, offs, gid, tid, nv: (gid[v], f, 0))]

    def fused_mlp_fwd(x, w_up, w_down, group_sizes, tiling=(8, 8)):
        """`silu(x_g @ w_up[g]) @ w_down[g]` per group in one kernel: x [M,D], w_up
        [G,D,F], w_down [G,F,D], group_sizes i32[G] -> [M,D]; tiling (bm, bf) divides (M, F).
        """
        bm, bf = tiling
        (m, d), f = x.shape, w_up.shape[2]
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(meta[1].shape[0], f // bf),
            in_specs=_mlp_specs(bm, bf, d),
            out_specs=pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
            scratch_shapes=[pl.ANY((bm, d), F32)])
        return pl.pallas_call(functools.partial(mlp_kernel, bm=bm), grid_spec=spec,
                              out_shape=SDS((m, d), x.dtype), interpret=True)(
            *meta, x, w_up, w_down)

    def mlp_dx_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, dy_ref,
                      o_ref, acc_ref, *, bm):
        # dx = ((dy @ w_down.T) * silu'(x @ w_up)) @ w_up.T, the hidden layer recomputed one
        # F block at a time
        v, f = pl.program_id(0), pl.program_id(1)
        last_f = pl.num_programs(1) - 1
        g, tile = gid_ref[v], tid_ref[v]
        first_visit = (v == 0) | (tile != tid_ref[jnp.maximum(v - 1, 0)])
        live = v < nv_ref[0]

        @pl.when(f == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        up = up_ref[...].astype(F32)
        h = jnp.dot(x_ref[...].astype(F32), up)
        dh = jnp.dot(dy_ref[...].astype(F32), down_ref[...].astype(F32).T) * _silu_grad(h)
        acc_ref[...] += jnp.dot(dh, up.T)

        @pl.when(live & (f == last_f))
        def _():
            mask = _row_mask(offs_ref, g, tile, bm)
            base = jnp.where(first_visit, jnp.zeros_like(acc_ref), o_ref[...].astype(F32))
            o_ref[...] = jnp.where(mask, acc_ref[...], base).astype(o_ref.dtype)

    def mlp_dw_kernel(offs_ref, gid_ref, tid_ref, nv_ref, x_ref, up_ref, down_ref, dy_ref,
                      dup_ref, ddown_ref, acc_up, acc_down, *, bm):
        # grid (F block, visit): the visits of one group accumulate
        # d w_up[g][:, f] = x_g.T @ dh_g and d w_down[g][f, :] = silu(h_g).T @ dy_g
        g, new_group, ends_group, live = _visit_of_group(gid_ref, nv_ref, 1)
        tile = tid_ref[pl.program_id(1)]

        @pl.when(new_group)
        def _():
            acc_up[...] = jnp.zeros_like(acc_up)
            acc_down[...] = jnp.zeros_like(acc_down)

        @pl.when(live)
        def _():
            mask = _row_mask(offs_ref, g, tile, bm)
            x = jnp.where(mask, x_ref[...].astype(F32), 0.0)
            dy = jnp.where(mask, dy_ref[...].astype(F32), 0.0)
            h = jnp.dot(x, up_ref[...].astype(F32))
            dh = jnp.dot(dy, down_ref[...].astype(F32).T) * _silu_grad(h)
            acc_up[...] += jnp.dot(x.T, dh)
            acc_down[...] += jnp.dot(_silu(h).T, dy)

        @pl.when(ends_group)
        def _():
            dup_ref[...] = acc_up[...].astype(dup_ref.dtype)
            ddown_ref[...] = acc_down[...].astype(ddown_ref.dtype)

    def fused_mlp_bwd(x, w_up, w_down, group_sizes, dy, tiling=(8, 8)):
        """The cotangents (dx, d w_up, d w_down) of `fused_mlp_fwd` for output cotangent dy
        [M,D], from two kernels that recompute the hidden layer instead of storing it."""
        bm, bf = tiling
        (m, d), (g, _, f) = x.shape, w_up.shape
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=False)
        dy_spec = pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0))
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(meta[1].shape[0], f // bf),
            in_specs=_mlp_specs(bm, bf, d) + [dy_spec],
            out_specs=pl.BlockSpec((bm, d), lambda v, f, offs, gid, tid, nv: (tid[v], 0)),
            scratch_shapes=[pl.ANY((bm, d), F32)])
        dx = pl.pallas_call(functools.partial(mlp_dx_kernel, bm=bm), grid_spec=spec,
                            out_shape=SDS((m, d), x.dtype), interpret=True)(
            *meta, x, w_up, w_down, dy)
        meta = group_metadata(group_sizes, m, bm, visit_empty_groups=True)
        swap = lambda s: pl.BlockSpec(s.block_shape, lambda f, v, *pre: s.index_map(v, f, *pre))
        spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(f // bf, meta[1].shape[0]),
            in_specs=[swap(s) for s in _mlp_specs(bm, bf, d) + [dy_spec]],
            out_specs=[pl.BlockSpec((None, d, bf), lambda f, v, offs, gid, tid, nv:
                                    (gid[v], 0, f)),
                       pl.BlockSpec((None, bf, d), lambda f, v, offs, gid, tid, nv:
                                    (gid[v], f, 0))],
            scratch_shapes=[pl.ANY((d, bf), F32), pl.ANY((bf, d), F32)])
        d_up, d_down = pl.pallas_call(
            functools.partial(mlp_dw_kernel, bm=bm), grid_spec=spec,
            out_shape=[SDS((g, d, f), w_up.dtype), SDS((g, f, d), w_down.dtype)],
            interpret=True)(*meta, x, w_up, w_down, dy)
        return dx, d_up, d_down

    @functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
    def fused_mlp(x, w_up, w_down, group_sizes, tiling=(8, 8)):
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


# ---------------------------------------------------------------------------------------------
# The cost model: FLOPs and HBM bytes of the expert MLP, fused and unfused
# ---------------------------------------------------------------------------------------------

def mlp_cost(g: int, m: int, d: int, f: int, itemsize: int = 2) -> dict:
    """FLOPs and HBM bytes of `silu(x_g @ W_up[g]) @ W_down[g]` over m rows sorted into g
    groups. Both versions do the same 4*m*d*f multiply-add FLOPs (plus m*f for the
    activation). The unfused one (two ragged_dots, the activation fused into the first's
    epilogue) writes the (m, f) hidden layer and reads it back; the fused kernel does not:

        bytes_unfused = itemsize * (2*m*d + 2*g*d*f + 2*m*f)
        bytes_fused   = itemsize * (2*m*d + 2*g*d*f)
    """
    flops = 4 * m * d * f + m * f
    fused = itemsize * (2 * m * d + 2 * g * d * f)
    unfused = fused + itemsize * 2 * m * f
    return {"G": g, "M": m, "D": d, "F": f, "flops": flops, "bytes_fused": fused,
            "bytes_unfused": unfused}


def roofline_time(cost: dict, peak_flops: float, hbm_bandwidth: float, fused: bool) -> float:
    """The roofline's lower bound on the time: the larger of compute time and memory time."""
    nbytes = cost["bytes_fused" if fused else "bytes_unfused"]
    return max(cost["flops"] / peak_flops, nbytes / hbm_bandwidth)
