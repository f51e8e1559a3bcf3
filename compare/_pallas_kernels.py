"""Pallas kernels written once, against whichever `jax` and `pl` modules are passed in.

`build(jax, pl, plgpu, pltpu=None)` returns a namespace of kernels and their `pallas_call`
wrappers; pass `jax` and its `experimental.pallas` / `.triton` / `.tpu`, or minijax's. Kernels
run in interpret mode unless `build(..., interpret=False)` (there is no Pallas compiler for CPU;
on a GPU, tools/accelerator_numbers.py compiles them with Triton; on a TPU, with `pltpu`, Mosaic
compiles the TPU-first kernels). Used by compare/pallas.py, tests/pallas_test.py and
tools/accelerator_numbers.py; taught in chapters/16-pallas.md.
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np


def build(jax, pl, plgpu, *, pltpu=None, interpret=True,
          compiler_params=None) -> types.SimpleNamespace:
    """The kernels of this module, bound to `jax` (jax or minijax), `pl` (its
    experimental.pallas), `plgpu` (its experimental.pallas.triton, for masked load/store) and
    `pltpu` (its experimental.pallas.tpu, or None).

    Every `pallas_call` gets `interpret` and `compiler_params`: `interpret=True` (the default,
    and the only mode on a CPU) runs the kernels as XLA loops, and
    `interpret=pltpu.InterpretParams()` as the TPU's pipeline would; `interpret=False` with
    `compiler_params=plgpu.CompilerParams(...)` compiles them with JAX's Triton backend on a GPU
    (tools/accelerator_numbers.py does), and with `pltpu` given (and no `compiler_params`)
    compiles them with Mosaic on a TPU, under JAX and under minijax alike (minijax's
    `interpret=False` compiles for a TPU; on another backend its compile raises ValueError).

    With `pltpu`, FlashAttention and the matmul are the TPU-first kernels (`flash_fwd_kernel`,
    `flash_dkdv_kernel`, `flash_dq_kernel`: the key/value walk is a grid axis, the running
    state lives in VMEM scratch); without it, the GPU-style kernels (`fa_fwd_kernel`...: one
    program loops over the whole key/value sequence), which Triton compiles."""
    jnp, lax = jax.numpy, jax.lax
    backend = dict(interpret=interpret, compiler_params=compiler_params)

    def _tpu_backend(*semantics):
        """`backend`, with Mosaic's dimension semantics per grid axis when compiling for a TPU:
        "parallel" axes may be split across cores, "arbitrary" ones run in order (a reduction
        carried in scratch from one step to the next)."""
        if pltpu is None or compiler_params is not None:
            return backend
        return dict(interpret=interpret,
                    compiler_params=pltpu.CompilerParams(dimension_semantics=semantics))
    F32 = np.float32
    SDS = jax.ShapeDtypeStruct

    # ------------------------------------------------------------------ vector add
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    def vector_add(x, y, block=128):
        (n,) = x.shape
        spec = pl.BlockSpec((block,), lambda i: (i,))
        # cdiv: when block does not divide n the last block runs past the end; its reads see
        # padding and its writes there are dropped.
        return pl.pallas_call(add_kernel, out_shape=SDS(x.shape, x.dtype),
                              grid=(pl.cdiv(n, block),), in_specs=[spec, spec],
                              out_specs=spec, **backend)(x, y)

    # ------------------------------------------------------------------ masked add
    def masked_add_kernel(x_ref, y_ref, o_ref, *, n, block):
        # pl.load/pl.store with a mask: positions past `n` are neither read nor written.
        idx = pl.program_id(0) * block + lax.broadcasted_iota(np.int32, (block,), 0)
        mask = idx < n
        x = plgpu.load(x_ref, mask=mask, other=0.0)
        y = plgpu.load(y_ref, mask=mask, other=0.0)
        plgpu.store(o_ref, x + y, mask=mask)

    def masked_add(x, y, block=8):
        (n,) = x.shape
        spec = pl.BlockSpec((block,), lambda i: (i,))
        kernel = functools.partial(masked_add_kernel, n=n, block=block)
        return pl.pallas_call(kernel, out_shape=SDS(x.shape, x.dtype),
                              grid=(pl.cdiv(n, block),), in_specs=[spec, spec],
                              out_specs=spec, **backend)(x, y)

    # ------------------------------------------------------------------ block transpose (2-D grid)
    def transpose_kernel(x_ref, o_ref):
        # the grid position is added in, so a block written to the wrong place shows
        i, j = pl.program_id(0), pl.program_id(1)
        o_ref[...] = x_ref[...].T + (100 * i + j).astype(o_ref.dtype)

    def block_transpose(x, bm=8, bn=4):
        # instance (i, j) reads block (i, j) and writes it, transposed, to block (j, i)
        m, n = x.shape
        return pl.pallas_call(transpose_kernel, out_shape=SDS((n, m), x.dtype),
                              grid=(m // bm, n // bn),
                              in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
                              out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),
                              interpret=True)(x)

    def block_transpose_ref(x, bm=8, bn=4):
        m, n = x.shape
        i = jnp.arange(m)[None, :] // bm  # row block of x, a column block of the output
        j = jnp.arange(n)[:, None] // bn
        return x.T + (100 * i + j).astype(x.dtype)

    # ------------------------------------------------------------------ in place (aliases)
    def axpy_kernel(x_ref, acc_ref, o_ref, *, alpha):
        # o_ref *is* acc's buffer (aliased), so its block starts with acc's contents; without
        # the alias it would start uninitialized (NaN in interpret mode). acc_ref is unused.
        o_ref[...] = o_ref[...] + alpha * x_ref[...]

    def axpy_inplace(x, acc, *, alpha=2.0, block=4):
        """acc + alpha * x, written into acc's buffer (input 1 aliases output 0)."""
        (n,) = x.shape
        spec = pl.BlockSpec((block,), lambda i: (i,))
        return pl.pallas_call(functools.partial(axpy_kernel, alpha=alpha),
                              out_shape=SDS(acc.shape, acc.dtype), grid=(pl.cdiv(n, block),),
                              in_specs=[spec, spec], out_specs=spec,
                              input_output_aliases={1: 0}, interpret=True)(x, acc)

    # ------------------------------------------------------------------ tiled matmul + epilogue
    def matmul_kernel(x_ref, y_ref, b_ref, o_ref, acc_ref, *, activation):
        # Grid axis 2 walks the contraction; a scratch accumulator keeps the partial sums, and
        # the last step adds the bias and applies the activation (the fused epilogue). The
        # products take the operands' dtype (bf16 on the MXU) and accumulate in float32.
        kk = pl.program_id(2)

        @pl.when(kk == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)

        @pl.when(kk == pl.num_programs(2) - 1)
        def _():
            out = acc_ref[...] + b_ref[...].astype(F32)  # bias: a (1, bn) row
            if activation == "relu":
                out = jnp.maximum(out, 0.0)
            elif activation == "gelu":  # tanh approximation
                out = 0.5 * out * (1 + jnp.tanh(0.7978845608 * (out + 0.044715 * out ** 3)))
            o_ref[...] = out.astype(o_ref.dtype)

    def matmul(x, y, bias, *, bm=32, bn=32, bk=32, activation="relu", out_dtype=None):
        """activation(x @ y + bias) for x: [m, k], y: [k, n], bias: [n]; blocks (bm, bk),
        (bk, bn) and an output block (bm, bn) revisited over the innermost (contraction) grid
        axis, its visits consecutive. On a TPU bm a multiple of 8 (or m), bk and bn multiples of
        128 (or k, n). Output dtype `out_dtype` (default: x's)."""
        m, k = x.shape
        _, n = y.shape
        kernel = functools.partial(matmul_kernel, activation=activation)
        # the accumulator: VMEM scratch on a TPU (Mosaic loads and stores only VMEM/SMEM)
        scratch = pltpu.VMEM((bm, bn), F32) if pltpu is not None else pl.ANY((bm, bn), F32)
        return pl.pallas_call(
            kernel,
            out_shape=SDS((m, n), out_dtype or x.dtype),
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
                      pl.BlockSpec((1, bn), lambda i, j, kk: (0, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            scratch_shapes=[scratch],
            **_tpu_backend("parallel", "parallel", "arbitrary"),
        )(x, y, bias.reshape(1, n))

    # ------------------------------------------------------------------ row softmax
    # Whole rows per block: a TPU block of (rows_per_block, c) is legal when rows_per_block is a
    # multiple of 8 and c is the whole row; gamma and beta go in as (1, c) rows.
    def softmax_kernel(x_ref, o_ref):
        x = x_ref[...].astype(F32)
        e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
        o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)

    def row_softmax(x, rows_per_block=8):
        r, c = x.shape
        spec = pl.BlockSpec((rows_per_block, c), lambda i: (i, 0))
        return pl.pallas_call(softmax_kernel, out_shape=SDS(x.shape, x.dtype),
                              grid=(r // rows_per_block,), in_specs=[spec], out_specs=spec,
                              **_tpu_backend("parallel"))(x)

    # ------------------------------------------------------------------ layer norm
    def layer_norm_kernel(x_ref, g_ref, b_ref, o_ref, *, eps):
        x = x_ref[...].astype(F32)
        mean = jnp.mean(x, axis=1, keepdims=True)
        xc = x - mean
        var = jnp.mean(xc * xc, axis=1, keepdims=True)
        y = xc * lax.rsqrt(var + eps) * g_ref[...].astype(F32) + b_ref[...].astype(F32)
        o_ref[...] = y.astype(o_ref.dtype)

    def layer_norm(x, gamma, beta, *, rows_per_block=8, eps=1e-5):
        r, c = x.shape
        row = pl.BlockSpec((rows_per_block, c), lambda i: (i, 0))
        vec = pl.BlockSpec((1, c), lambda i: (0, 0))
        kernel = functools.partial(layer_norm_kernel, eps=eps)
        return pl.pallas_call(kernel, out_shape=SDS(x.shape, x.dtype),
                              grid=(r // rows_per_block,), in_specs=[row, vec, vec],
                              out_specs=row, **_tpu_backend("parallel"))(
                                  x, gamma.reshape(1, c), beta.reshape(1, c))

    # ------------------------------------------------------------------ FlashAttention forward
    def _causal_mask(s, q_start, k_start):
        bq, bk = s.shape
        q_pos = q_start + lax.broadcasted_iota(np.int32, (bq, bk), 0)
        k_pos = k_start + lax.broadcasted_iota(np.int32, (bq, bk), 1)
        return jnp.where(q_pos >= k_pos, s, -jnp.inf)

    def fa_fwd_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, *, bk, scale, causal):
        """One query block against the key blocks, keeping a running max m, sum l and
        un-normalised output acc (the online softmax)."""
        bq, d = q_ref.shape
        seq = k_ref.shape[0]
        qi = pl.program_id(1)
        q = q_ref[...].astype(F32) * scale

        def body(j, carry):
            m, l, acc = carry
            k = k_ref[pl.ds(j * bk, bk), :].astype(F32)
            v = v_ref[pl.ds(j * bk, bk), :].astype(F32)
            s = jnp.dot(q, k.T)
            if causal:
                s = _causal_mask(s, qi * bq, j * bk)
            m_new = jnp.maximum(m, jnp.max(s, axis=1))
            p = jnp.exp(s - m_new[:, None])
            rescale = jnp.exp(m - m_new)  # earlier blocks were normalised by a smaller max
            l_new = l * rescale + jnp.sum(p, axis=1)
            acc_new = acc * rescale[:, None] + jnp.dot(p, v)
            return m_new, l_new, acc_new

        # With a causal mask, key blocks entirely in this query block's future are skipped.
        n_k = (jnp.minimum(seq, (qi + 1) * bq) + bk - 1) // bk if causal else seq // bk
        init = (jnp.full((bq,), -jnp.inf, F32), jnp.zeros((bq,), F32),
                jnp.zeros((bq, d), F32))
        m, l, acc = lax.fori_loop(0, n_k, body, init)
        o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)
        lse_ref[...] = m + jnp.log(l)

    def gpu_flash_forward(q, k, v, *, bq=16, bk=16, causal=False):
        bh, seq, d = q.shape
        kernel = functools.partial(fa_fwd_kernel, bk=bk, scale=1.0 / math.sqrt(d),
                                   causal=causal)
        qblock = pl.BlockSpec((None, bq, d), lambda b, i: (b, i, 0))
        whole = pl.BlockSpec((None, seq, d), lambda b, i: (b, 0, 0))
        vblock = pl.BlockSpec((None, bq), lambda b, i: (b, i))
        return pl.pallas_call(
            kernel,
            out_shape=(SDS(q.shape, q.dtype), SDS((bh, seq), F32)),
            grid=(bh, seq // bq),
            in_specs=[qblock, whole, whole],
            out_specs=(qblock, vblock),
            **backend,
        )(q, k, v)

    # ------------------------------------------------------------------ FlashAttention backward
    def fa_bwd_dkdv_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, *,
                           bq, scale, causal):
        """One key block against the query blocks: accumulate dK and dV for this block."""
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
            s = jnp.dot(q, k.T) * scale
            if causal:
                s = _causal_mask(s, i * bq, kj * bk)
            p = jnp.exp(s - lse_ref[rows][:, None])  # probabilities, recomputed from the lse
            dv = dv + jnp.dot(p.T, do)
            dp = jnp.dot(do, v.T)
            ds = p * (dp - delta_ref[rows][:, None])
            dk = dk + jnp.dot(ds.T, q) * scale
            return dk, dv

        start = (kj * bk) // bq if causal else 0  # earlier query blocks cannot see this block
        zeros = jnp.zeros((bk, d), F32)
        dk, dv = lax.fori_loop(start, seq // bq, body, (zeros, zeros))
        dk_ref[...] = dk.astype(dk_ref.dtype)
        dv_ref[...] = dv.astype(dv_ref.dtype)

    def fa_bwd_dq_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, *,
                         bk, scale, causal):
        """One query block against the key blocks: accumulate dQ for this block."""
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
            s = jnp.dot(q, k.T) * scale
            if causal:
                s = _causal_mask(s, qi * bq, j * bk)
            p = jnp.exp(s - lse[:, None])
            dp = jnp.dot(do, v.T)
            ds = p * (dp - delta[:, None])
            return dq + jnp.dot(ds, k) * scale

        n_k = (jnp.minimum(seq, (qi + 1) * bq) + bk - 1) // bk if causal else seq // bk
        dq = lax.fori_loop(0, n_k, body, jnp.zeros((bq, d), F32))
        dq_ref[...] = dq.astype(dq_ref.dtype)

    def gpu_flash_backward(q, k, v, o, lse, do, *, bq=16, bk=16, causal=False):
        bh, seq, d = q.shape
        scale = 1.0 / math.sqrt(d)
        delta = jnp.sum(do.astype(F32) * o.astype(F32), axis=-1)  # rowsum(dO * O)
        whole = pl.BlockSpec((None, seq, d), lambda b, i: (b, 0, 0))
        vwhole = pl.BlockSpec((None, seq), lambda b, i: (b, 0))
        kblock = pl.BlockSpec((None, bk, d), lambda b, i: (b, i, 0))
        dk, dv = pl.pallas_call(
            functools.partial(fa_bwd_dkdv_kernel, bq=bq, scale=scale, causal=causal),
            out_shape=(SDS(k.shape, k.dtype), SDS(v.shape, v.dtype)),
            grid=(bh, seq // bk),
            in_specs=[whole, kblock, kblock, whole, vwhole, vwhole],
            out_specs=(kblock, kblock),
            **backend,
        )(q, k, v, do, lse, delta)
        qblock = pl.BlockSpec((None, bq, d), lambda b, i: (b, i, 0))
        vblock = pl.BlockSpec((None, bq), lambda b, i: (b, i))
        dq = pl.pallas_call(
            functools.partial(fa_bwd_dq_kernel, bk=bk, scale=scale, causal=causal),
            out_shape=SDS(q.shape, q.dtype),
            grid=(bh, seq // bq),
            in_specs=[qblock, whole, whole, qblock, vblock, vblock],
            out_specs=qblock,
            **backend,
        )(q, k, v, do, lse, delta)
        return dq, dk, dv

    # ------------------------------------------------------------------ FlashAttention, TPU-first
    # The grid is (batch*heads, query blocks, key blocks), the key axis innermost and
    # "arbitrary": each step DMAs one (bk, d) block of K and V into VMEM while the previous one
    # is computed on, and the online-softmax state (m, l, acc) stays in VMEM scratch across the
    # key steps of one query block; the output block's visits are those consecutive steps.
    # Per-row values (m, l, the lse, delta) are kept lane-broadcast, (rows, 128): a (bq, 1)
    # column would pad to a full (8, 128) tile per 8 rows anyway, and the broadcast form
    # subtracts from a (bq, bk) tile with a lane tile instead of a relayout. They cross HBM as
    # (bh, seq, 128) (block (bq, 128): legal) or, where a kernel wants them along lanes, as a
    # (bh, 1, seq) row (block (1, bq): 1 is the whole dimension, bq a multiple of 128).
    LANES = 128
    NT = (((1,), (1,)), ((), ()))  # a @ b.T without a transpose: contract both last dims

    def _lanes(x, n):
        """A lane-broadcast (rows, 128) array as (rows, n)."""
        if n % LANES == 0:
            return jnp.tile(x, (1, n // LANES))
        return jnp.broadcast_to(x[:, :1], (x.shape[0], n))

    def _mask(s, row_start, col_start, rows_axis):
        """-inf where a key is in a query's future; queries along `rows_axis` of s."""
        rows = row_start + lax.broadcasted_iota(np.int32, s.shape, rows_axis)
        cols = col_start + lax.broadcasted_iota(np.int32, s.shape, 1 - rows_axis)
        return jnp.where(rows >= cols, s, -jnp.inf)

    def _last_key_block(i, bq, bk):
        """The last key block that query block i sees under a causal mask. lax.div truncates:
        the indices are non-negative, so it is `//` without floor division's sign fix-up
        (whose Mosaic lowering also asks which TPU it runs on, so it cannot lower on a CPU)."""
        return lax.div((i + 1) * bq - 1, np.int32(bk))

    def _first_query_block(j, bq, bk):
        """The first query block that sees key block j under a causal mask."""
        return lax.div(j * bk, np.int32(bq))

    def _causal_steps(causal, row_start, row_end, col_start, col_end, step):
        """Run step(masked) for a block of scores: not at all when every key is in every
        query's future (wholly above the diagonal), unmasked when none is (wholly below)."""
        if not causal:
            step(False)
            return
        below = col_end - 1 <= row_start
        pl.when(below)(lambda: step(False))
        pl.when(jnp.logical_and(jnp.logical_not(below), col_start <= row_end - 1))(
            lambda: step(True))

    def flash_fwd_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, qs_ref, m_ref, l_ref, acc_ref, *,
                         scale, causal):
        bq, d = q_ref.shape
        bk = k_ref.shape[0]
        i, j = pl.program_id(1), pl.program_id(2)

        @pl.when(j == 0)
        def _():
            qs_ref[...] = (q_ref[...].astype(F32) * scale).astype(qs_ref.dtype)  # once per block
            m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
            l_ref[...] = jnp.zeros_like(l_ref)
            acc_ref[...] = jnp.zeros_like(acc_ref)

        def step(masked):
            v = v_ref[...]
            s = lax.dot_general(qs_ref[...], k_ref[...], NT, preferred_element_type=F32)
            if masked:
                s = _mask(s, i * bq, j * bk, 0)
            m_prev = m_ref[...]
            m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))  # (bq, 128)
            p = jnp.exp(s - _lanes(m_next, bk))
            alpha = jnp.exp(m_prev - m_next)  # earlier blocks were scaled by a smaller max
            l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
            m_ref[...] = m_next
            acc_ref[...] = acc_ref[...] * _lanes(alpha, d) + jnp.dot(
                p.astype(v.dtype), v, preferred_element_type=F32)

        _causal_steps(causal, i * bq, (i + 1) * bq, j * bk, (j + 1) * bk, step)

        @pl.when(j == pl.num_programs(2) - 1)
        def _():
            l = l_ref[...]
            o_ref[...] = (acc_ref[...] / _lanes(l, d)).astype(o_ref.dtype)
            lse_ref[...] = m_ref[...] + jnp.log(l)

    def tpu_flash_forward(q, k, v, *, bq, bk, causal):
        """(o, lse) with lse lane-broadcast: f32[bh, seq, 128]."""
        bh, seq, d = q.shape

        def kv_map(b, i, j):
            if causal:  # blocks past the diagonal re-point at the last useful one: no new DMA
                j = jnp.minimum(j, _last_key_block(i, bq, bk))
            return b, j, 0

        q_spec = pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0))
        kv_spec = pl.BlockSpec((None, bk, d), kv_map)
        row_spec = pl.BlockSpec((None, bq, LANES), lambda b, i, j: (b, i, 0))
        kernel = functools.partial(flash_fwd_kernel, scale=1.0 / math.sqrt(d), causal=causal)
        return pl.pallas_call(
            kernel,
            out_shape=(SDS(q.shape, q.dtype), SDS((bh, seq, LANES), F32)),
            grid=(bh, seq // bq, seq // bk),
            in_specs=[q_spec, kv_spec, kv_spec],
            out_specs=(q_spec, row_spec),
            scratch_shapes=[pltpu.VMEM((bq, d), q.dtype), pltpu.VMEM((bq, LANES), F32),
                            pltpu.VMEM((bq, LANES), F32), pltpu.VMEM((bq, d), F32)],
            **_tpu_backend("parallel", "parallel", "arbitrary"),
        )(q, k, v)

    def flash_dkdv_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref,
                          ks_ref, dk_acc, dv_acc, *, scale, causal):
        """One key block (grid axis 1) against the query blocks (axis 2, innermost). Scores
        are computed transposed, s.T = k q.T (bk, bq), so the per-query lse and delta are rows
        (1, bq) that broadcast down the sublanes, and dV = p.T dO, dK = ds.T q are plain
        matmuls: no transpose in the loop."""
        bk = k_ref.shape[0]
        bq = q_ref.shape[0]
        j, i = pl.program_id(1), pl.program_id(2)

        @pl.when(i == 0)
        def _():
            ks_ref[...] = (k_ref[...].astype(F32) * scale).astype(ks_ref.dtype)
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        def step(masked):
            q, do = q_ref[...], do_ref[...]
            st = lax.dot_general(ks_ref[...], q, NT, preferred_element_type=F32)  # (bk, bq)
            if masked:
                st = _mask(st, i * bq, j * bk, 1)
            pt = jnp.exp(st - lse_ref[...])  # probabilities, recomputed from the lse
            dv_acc[...] += jnp.dot(pt.astype(do.dtype), do, preferred_element_type=F32)
            dpt = lax.dot_general(v_ref[...], do, NT, preferred_element_type=F32)
            dst = pt * (dpt - delta_ref[...])
            dk_acc[...] += jnp.dot(dst.astype(q.dtype), q, preferred_element_type=F32)

        _causal_steps(causal, i * bq, (i + 1) * bq, j * bk, (j + 1) * bk, step)

        @pl.when(i == pl.num_programs(2) - 1)
        def _():
            dk_ref[...] = (dk_acc[...] * scale).astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    def flash_dq_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, qs_ref,
                        dq_acc, *, scale, causal):
        """One query block (grid axis 1) against the key blocks (axis 2, innermost)."""
        bq = q_ref.shape[0]
        bk = k_ref.shape[0]
        i, j = pl.program_id(1), pl.program_id(2)

        @pl.when(j == 0)
        def _():
            qs_ref[...] = (q_ref[...].astype(F32) * scale).astype(qs_ref.dtype)
            dq_acc[...] = jnp.zeros_like(dq_acc)

        def step(masked):
            k = k_ref[...]
            s = lax.dot_general(qs_ref[...], k, NT, preferred_element_type=F32)
            if masked:
                s = _mask(s, i * bq, j * bk, 0)
            p = jnp.exp(s - _lanes(lse_ref[...], bk))
            dp = lax.dot_general(do_ref[...], v_ref[...], NT, preferred_element_type=F32)
            ds = p * (dp - _lanes(delta_ref[...], bk))
            dq_acc[...] += jnp.dot(ds.astype(k.dtype), k, preferred_element_type=F32)

        _causal_steps(causal, i * bq, (i + 1) * bq, j * bk, (j + 1) * bk, step)

        @pl.when(j == pl.num_programs(2) - 1)
        def _():
            dq_ref[...] = (dq_acc[...] * scale).astype(dq_ref.dtype)

    def tpu_flash_backward(q, k, v, o, lse, do, *, bq, bk, causal):
        """dq, dk, dv from the forward's lane-broadcast lse f32[bh, seq, 128]."""
        bh, seq, d = q.shape
        scale = 1.0 / math.sqrt(d)
        delta = jnp.sum(do.astype(F32) * o.astype(F32), axis=-1)  # rowsum(dO * O): [bh, seq]
        lse_row, delta_row = lse[:, None, :, 0], delta[:, None, :]  # [bh, 1, seq]
        delta_cols = jnp.broadcast_to(delta[:, :, None], (bh, seq, LANES))

        def q_map(b, j, i):  # dK/dV grid: query blocks wholly above the diagonal re-point
            if causal:       # at the first useful one
                i = jnp.maximum(i, _first_query_block(j, bq, bk))
            return b, i, 0

        q_spec = pl.BlockSpec((None, bq, d), q_map)
        row_spec = pl.BlockSpec((None, 1, bq), lambda b, j, i: (b, 0, q_map(b, j, i)[1]))
        k_spec = pl.BlockSpec((None, bk, d), lambda b, j, i: (b, j, 0))
        dk, dv = pl.pallas_call(
            functools.partial(flash_dkdv_kernel, scale=scale, causal=causal),
            out_shape=(SDS(k.shape, k.dtype), SDS(v.shape, v.dtype)),
            grid=(bh, seq // bk, seq // bq),
            in_specs=[q_spec, k_spec, k_spec, q_spec, row_spec, row_spec],
            out_specs=(k_spec, k_spec),
            scratch_shapes=[pltpu.VMEM((bk, d), k.dtype), pltpu.VMEM((bk, d), F32),
                            pltpu.VMEM((bk, d), F32)],
            **_tpu_backend("parallel", "parallel", "arbitrary"),
        )(q, k, v, do, lse_row, delta_row)

        def kv_map(b, i, j):
            if causal:
                j = jnp.minimum(j, _last_key_block(i, bq, bk))
            return b, j, 0

        q_spec = pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0))
        cols_spec = pl.BlockSpec((None, bq, LANES), lambda b, i, j: (b, i, 0))
        kv_spec = pl.BlockSpec((None, bk, d), kv_map)
        dq = pl.pallas_call(
            functools.partial(flash_dq_kernel, scale=scale, causal=causal),
            out_shape=SDS(q.shape, q.dtype),
            grid=(bh, seq // bq, seq // bk),
            in_specs=[q_spec, kv_spec, kv_spec, q_spec, cols_spec, cols_spec],
            out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM((bq, d), q.dtype), pltpu.VMEM((bq, d), F32)],
            **_tpu_backend("parallel", "parallel", "arbitrary"),
        )(q, k, v, do, lse, delta_cols)
        return dq, dk, dv

    # ------------------------------------------------------------------ FlashAttention, public
    def flash_forward(q, k, v, *, bq=16, bk=16, causal=False):
        """(o, lse): attention of q, k, v [bh, seq, d] and its log-sum-exp f32[bh, seq]. With
        `pltpu` the TPU kernel: on a TPU bq and bk multiples of 128 dividing seq, d = 128 (or
        a multiple of 128)."""
        if pltpu is None:
            return gpu_flash_forward(q, k, v, bq=bq, bk=bk, causal=causal)
        o, lse = tpu_flash_forward(q, k, v, bq=bq, bk=bk, causal=causal)
        return o, lse[..., 0]

    def _flash(q, k, v, bq, bk, causal):
        return _fa_fwd(q, k, v, bq, bk, causal)[0]

    flash_attention = jax.custom_vjp(_flash, nondiff_argnums=(3, 4, 5))

    def _fa_fwd(q, k, v, bq, bk, causal):
        forward = gpu_flash_forward if pltpu is None else tpu_flash_forward
        o, lse = forward(q, k, v, bq=bq, bk=bk, causal=causal)
        return o, (q, k, v, o, lse)

    def _fa_bwd(bq, bk, causal, saved, do):
        backward = gpu_flash_backward if pltpu is None else tpu_flash_backward
        return backward(*saved, do, bq=bq, bk=bk, causal=causal)

    flash_attention.defvjp(_fa_fwd, _fa_bwd)

    # ------------------------------------------------------------------ jnp references
    def attention_ref(q, k, v, causal=False):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
        if causal:
            seq = q.shape[1]
            s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -jnp.inf)
        s = s - jnp.max(s, axis=-1, keepdims=True)
        p = jnp.exp(s)
        return jnp.einsum("bqk,bkd->bqd", p / jnp.sum(p, axis=-1, keepdims=True), v)

    def lse_ref(q, k, causal=False):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
        if causal:
            seq = q.shape[1]
            s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -jnp.inf)
        m = jnp.max(s, axis=-1)
        return m + jnp.log(jnp.sum(jnp.exp(s - m[..., None]), axis=-1))

    def matmul_ref(x, y, bias, activation="relu"):
        out = jnp.dot(x, y) + bias[None, :]
        if activation == "relu":
            return jnp.maximum(out, 0.0)
        if activation == "gelu":
            return 0.5 * out * (1 + jnp.tanh(0.7978845608 * (out + 0.044715 * out ** 3)))
        return out

    def softmax_ref(x):
        e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
        return e / jnp.sum(e, axis=1, keepdims=True)

    def layer_norm_ref(x, gamma, beta, eps=1e-5):
        mean = jnp.mean(x, axis=1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, axis=1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + eps) * gamma + beta

    return types.SimpleNamespace(**{k: v for k, v in locals().items()
                                    if callable(v) and not k.startswith("_")
                                    and k not in ("SDS", "jax", "pl", "plgpu")})
