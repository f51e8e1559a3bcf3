"""scaling_book: every exercise of the Scaling Book, answered by code and checked on our compiler.

"How to Scale Your Model" (github.com/jax-ml/scaling-book) answers its exercises in prose. This
topic

* answers every exercise of every chapter with the models of `compare/_scaling_models.py`
  (`compare/_scaling_exercises.py`: ours vs the book's published number, agreement within the
  book's rounding, every disagreement explained);
* writes the JAX chapter's programming problems (per-shard reductions, a routed mixture of
  experts, collective matmuls that overlap a ring of `ppermute`s with compute, one-way and
  bidirectional) with `shard_map`, runs each under minijax and JAX on 8 CPU devices and checks
  it equals the unsharded result;
* answers the profile-reading question from our own compiled program;
* cross-checks the formulas against programs minijax compiles: FLOPs and bytes from
  `cost_analysis()`, collective kinds and bytes from the compiled HLO, KV-cache bytes of the
  chapter-19 GPT.

`--json PATH` writes `topics.scaling_book.exercises` and `topics.scaling_book.cross_checks`.
Chapter 29 (`chapters/29-scaling-book.md`) explains the models.
"""

from __future__ import annotations

import re
from collections import defaultdict

import jax
import numpy as np

import minijax
from compare import shard_map as sm
from compare._jax201 import collective_bytes, count_collectives, table
from compare._modules import MODULES
from compare._report import TopicResult, interleaved_ms, median_ms, plot
from compare._scaling_exercises import Answer, all_answers
from compare._scaling_models import (
    CHIPS,
    Transformer,
    collective_time,
    expert_parallel_bytes,
    matmul_cost,
)


def mesh_of(J, shape, names):
    return J.make_mesh(shape, names, axis_types=(J.sharding.AxisType.Auto,) * len(shape))


def smap(J, f, mesh, in_specs, out_specs):
    return J.jit(J.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs))


def compiled(J, f, *args):
    return f.lower(*args).compile()


# ---------------------------------------------------------------------------------------------
# jax-stuff.md, worked problems: written once against a module alias J
# ---------------------------------------------------------------------------------------------

def shard_mean(J, mesh):
    """Problem 1.1: A f32[S_X, D_Y] -> f32[X, D_Y], row i = mean over shard i (no comms)."""
    return smap(J, lambda a: a.mean(axis=0, keepdims=True), mesh, J.P("x", "y"), J.P("x", "y"))


def shard_roll(J, mesh, shift: int):
    """Problem 1.2: roll(A, shift) - A within each X shard."""
    jnp = J.numpy
    return smap(J, lambda a: jnp.roll(a, shift, axis=0) - a, mesh, J.P("x", "y"),
                J.P("x", "y"))


def moe_local(J, w, a, route):
    """Problem 2.1/2.4: out[i] = mean_j W[route[i, j]] @ a[i], never forming [S, D, F].

    Tokens are sorted into a per-expert buffer [E, S, D] (zero where a token is not routed to
    that expert: any expert may receive all S tokens, hence the second dimension S)."""
    jnp = J.numpy
    E, k = w.shape[0], route.shape[1]
    mask = (route[None, :, :] == jnp.arange(E)[:, None, None]).astype(a.dtype).sum(-1)  # [E, S]
    buf = mask[:, :, None] * a[None]                                                # [E, S, D]
    return jnp.einsum("esd,edf->sf", buf, w) / k


def moe_sharded(J, mesh):
    """Problem 2.3a: W[E_X, D, F_Y], A[S_X, D], routes [S_X, k]. Gather the tokens over X,
    apply this device's experts to the tokens routed to them, and reduce-scatter the partial
    outputs back over X: Out[S_X, F_Y]."""
    lax = J.lax

    def body(w, a, route):
        a_all = lax.all_gather(a, "x", tiled=True)
        r_all = lax.all_gather(route, "x", tiled=True)
        e0 = lax.axis_index("x") * w.shape[0]
        part = moe_local(J, w, a_all, r_all - e0)  # routes outside this block match no expert
        return lax.psum_scatter(part, "x", scatter_dimension=0, tiled=True)
    return smap(J, body, mesh, (J.P("x", None, "y"), J.P("x"), J.P("x")), J.P("x", "y"))


def moe_all_to_all(J, mesh):
    """Problem 2.3b, with a fixed capacity instead of a ragged while_loop: one expert per
    device (W[E_i, D, F], A[S_i, D], routes [S_i, k]). Each device packs its token copies into
    one slot row per destination device ([n, C, D], C = S_i k so nothing is dropped), an
    all_to_all delivers each row to its expert, the expert runs, and a second all_to_all
    brings the results home; no device ever holds all S tokens."""
    jnp, lax = J.numpy, J.lax

    def body(w, a, route):
        n = lax.axis_size(sm.AX)
        s, k = route.shape
        C = s * k
        dest = route.reshape(-1)                                   # [s k] expert = device
        onehot = (dest[:, None] == jnp.arange(n)[None]).astype(np.int32)       # [s k, n]
        slot = ((jnp.cumsum(onehot, axis=0) - onehot) * onehot).sum(1)         # [s k]
        disp = (onehot.T[:, None, :] * (slot[None, None, :] == jnp.arange(C)[None, :, None])
                ).astype(a.dtype)                                  # [n, C, s k]
        copies = jnp.repeat(a, k, axis=0)                          # [s k, D]
        send = jnp.einsum("dcj,jm->dcm", disp, copies)
        recv = lax.all_to_all(send, sm.AX, 0, 0, tiled=True)       # rows from every source
        back = lax.all_to_all(recv @ w[0], sm.AX, 0, 0, tiled=True)
        out = jnp.einsum("dcj,dcf->jf", disp, back)
        return out.reshape(s, k, -1).mean(1)
    return smap(J, body, mesh, (J.P(sm.AX), J.P(sm.AX), J.P(sm.AX)), J.P(sm.AX))


def allreduce_matmul(J, chunks: int):
    """Problem 3.1: A[B, D_Y] . W[D_Y, F] -> Out[B, F]; the output is tiled over F and each
    tile's partial sum is all-reduced on its own, so the next tile's matmul can overlap it."""
    jnp, lax = J.numpy, J.lax

    def body(a, w):
        tiles = jnp.split(w, chunks, axis=1)
        return jnp.concatenate([lax.psum(a @ t, sm.AX) for t in tiles], axis=1)
    return body


def reducescatter_cols(J, x_blk, w, *, bidirectional: bool = False):
    """Problem 3.2/4: Tmp[B, F_Y] . W2[F_Y, D] -> Out[B, D_Y]. An accumulator for one column
    block travels round the ring, each device adding its partial; bidirectional: the block is
    split in two halves that travel in opposite directions (half the bytes on each link)."""
    jnp, lax = J.numpy, J.lax
    n, j = lax.axis_size(sm.AX), lax.axis_index(sm.AX)
    cb = w.shape[1] // n

    def cols(block, lo=0, width=cb):
        return lax.dynamic_slice_in_dim(w, block * cb + lo, width, axis=1)

    def ring(direction, lo, width):
        perm = [(k, (k + direction) % n) for k in range(n)]
        acc = x_blk @ cols((j - direction) % n, lo, width)
        for s in range(1, n):
            acc = lax.ppermute(acc, sm.AX, perm) + x_blk @ cols((j - direction * (s + 1)) % n,
                                                                lo, width)
        return acc
    if not bidirectional:
        return ring(1, 0, cb)
    return jnp.concatenate([ring(1, 0, cb // 2), ring(-1, cb // 2, cb - cb // 2)], axis=1)


def allgather_contract(J, a_blk, w_blk, *, bidirectional: bool = False):
    """Problem 3.3 (first half): In[B, D_Y] . W_in[D, F_Y] -> Tmp[B, F_Y]. The column blocks of
    In travel round the ring; each device multiplies the block it holds by the matching rows
    of its W_in columns and accumulates (bidirectional: two rings, each covering half)."""
    lax = J.lax
    n, j = lax.axis_size(sm.AX), lax.axis_index(sm.AX)
    db = a_blk.shape[1]

    def rows(block):
        return lax.dynamic_slice_in_dim(w_blk, block * db, db, axis=0)
    if not bidirectional:
        left = [(k, (k - 1) % n) for k in range(n)]
        acc, chunk = a_blk @ rows(j), a_blk
        for s in range(1, n):
            chunk = lax.ppermute(chunk, sm.AX, left)
            acc = acc + chunk @ rows((j + s) % n)
        return acc
    left = [(k, (k - 1) % n) for k in range(n)]
    right = [(k, (k + 1) % n) for k in range(n)]
    acc, fwd, bwd = a_blk @ rows(j), a_blk, a_blk
    for s in range(1, n // 2 + 1):
        fwd = lax.ppermute(fwd, sm.AX, left)
        acc = acc + fwd @ rows((j + s) % n)
        if s < n - s:  # the block exactly opposite arrives once, from the forward ring
            bwd = lax.ppermute(bwd, sm.AX, right)
            acc = acc + bwd @ rows((j - s) % n)
    return acc


def allgather_cols(J, blk, *, bidirectional: bool = False):
    """[B, C] blocks -> [B, n C] on every device, by a ring of ppermutes (bidirectional: half
    the steps, one block going each way round)."""
    jnp, lax = J.numpy, J.lax
    n, j = lax.axis_size(sm.AX), lax.axis_index(sm.AX)
    c = blk.shape[1]
    out = lax.dynamic_update_slice_in_dim(jnp.zeros((blk.shape[0], n * c), blk.dtype), blk,
                                          j * c, axis=1)
    left = [(k, (k - 1) % n) for k in range(n)]
    right = [(k, (k + 1) % n) for k in range(n)]
    fwd = bwd = blk
    for s in range(1, (n // 2 + 1) if bidirectional else n):
        fwd = lax.ppermute(fwd, sm.AX, left)  # now holds block j + s
        out = lax.dynamic_update_slice_in_dim(out, fwd, ((j + s) % n) * c, axis=1)
        if bidirectional and s < n - s:
            bwd = lax.ppermute(bwd, sm.AX, right)  # block j - s
            out = lax.dynamic_update_slice_in_dim(out, bwd, ((j - s) % n) * c, axis=1)
    return out


def allreduce_matmul_ring(J, *, bidirectional: bool = False):
    """Problem 4 (AllReduce variant): A[B, D_Y] . W[D_Y, F] -> Out[B, F] with ppermutes
    only: a reduce-scatter collective matmul, then a ring all-gather of the finished column
    blocks, each one-way or bidirectional."""
    def body(a, w):  # the result of a ppermute is typed as varying: return one copy each
        done = reducescatter_cols(J, a, w, bidirectional=bidirectional)
        return allgather_cols(J, done, bidirectional=bidirectional)[None]
    return body


def transformer_block(J, *, bidirectional: bool = False):
    """Problem 3.3: In[B, D_Y] . W_in[D, F_Y] . W_out[F_Y, D] -> Out[B, D_Y], both matmuls as
    overlapped collective matmuls (a ReLU in between, so the weights cannot be merged)."""
    jnp = J.numpy

    def body(x, w_in, w_out):
        tmp = jnp.maximum(allgather_contract(J, x, w_in, bidirectional=bidirectional), 0.0)
        return reducescatter_cols(J, tmp, w_out, bidirectional=bidirectional)
    return body


def _jax_chapter(res: TopicResult, rows: list, quick: bool) -> None:
    rng = np.random.default_rng(0)
    n = jax.device_count()
    m2 = {J: mesh_of(J, (4, 2), ("x", "y")) for _, J in MODULES}
    m1 = {J: mesh_of(J, (n,), (sm.AX,)) for _, J in MODULES}
    S, D, F, E, k = (32, 16, 8, 8, 2) if quick else (256, 128, 64, 8, 2)
    a = rng.standard_normal((S, D)).astype(np.float32)
    c = "jax-stuff"

    def both(pid, question, build, args, want, tol=1e-4):
        outs = {J: np.asarray(build(J)(*args)) for _, J in MODULES}
        ok = all(np.allclose(o, want, rtol=tol, atol=tol) for o in outs.values())
        res.check_true(f"{pid}: minijax and JAX equal the unsharded result", ok)
        rows.append(Answer(c, pid, question, ok, True))
        return outs

    both("P1.1", "mean over each X shard, shard_map on a 4x2 mesh",
         lambda J: shard_mean(J, m2[J]), (a,), a.reshape(4, S // 4, D).mean(1))
    hlo = compiled(minijax, shard_mean(minijax, m2[minijax]), a).as_text()
    none = not any(count_collectives(hlo).values())
    res.check_true("P1.1: no communication in the compiled program", none)
    rows.append(Answer(c, "P1.1.comms", "communication added by the compiler", not none, False))
    both("P1.2", "roll(x, 3) - x within each X shard", lambda J: shard_roll(J, m2[J], 3), (a,),
         np.concatenate([np.roll(b, 3, 0) - b for b in a.reshape(4, S // 4, D)]))

    w = rng.standard_normal((E, D, F)).astype(np.float32)
    route = rng.integers(0, E, (S, k)).astype(np.int32)
    want = np.stack([sum(w[e] .T @ a[i] for e in route[i]) / k for i in range(S)])
    both("P2.1/2.4", "local MoE, top-2 routing, via an [E, S, D] buffer",
         lambda J: J.jit(lambda w_, a_, r_: moe_local(J, w_, a_, r_)), (w, a, route), want)
    both("P2.3a", "MoE with W[E_X, D, F_Y]: all_gather tokens, local experts, psum_scatter",
         lambda J: moe_sharded(J, m2[J]), (w, a, route), want)
    hlo = compiled(minijax, moe_sharded(minijax, m2[minijax]), w, a, route).as_text()
    rows.append(Answer(c, "P2.3a.comms", "collectives in the compiled shard_map MoE",
                       ", ".join(f"{kk} x{v}" for kk, v in count_collectives(hlo).items() if v),
                       None, note="the book publishes no answer"))
    both("P2.3b", "MoE with all_to_all dispatch (one expert per device, fixed capacity)",
         lambda J: moe_all_to_all(J, m1[J]), (w, a, route), want)
    ns = minijax.sharding.NamedSharding
    mm = m2[minijax]
    args = (minijax.device_put(w, ns(mm, minijax.P("x", None, "y"))),
            minijax.device_put(a, ns(mm, minijax.P("x"))),
            minijax.device_put(route, ns(mm, minijax.P("x"))))
    jitted = minijax.jit(lambda w_, a_, r_: moe_local(minijax, w_, a_, r_),
                         out_shardings=ns(mm, minijax.P("x", "y")))
    res.check("P2.2: jit of the local MoE on sharded inputs (minijax)",
              np.asarray(jitted(*args)), want, rtol=1e-4, atol=1e-4)
    hlo = jitted.lower(*args).compile().as_text()
    rows.append(Answer(c, "P2.2", "what jit of the local MoE on sharded W, A communicates",
                       ", ".join(f"{kk} x{v}" for kk, v in count_collectives(hlo).items() if v)
                       or "none", None, note="the book publishes no answer; the partitioner's "
                       "choice on 8 CPU devices (P2.3b's ragged while_loop is replaced by a fixed "
                       "capacity, so no token is dropped)"))

    B, Dm, Fm = (8, 64, 128) if quick else (64, 512, 1024)
    x = rng.standard_normal((B, Dm)).astype(np.float32)
    w_in = (rng.standard_normal((Dm, Fm)) / np.sqrt(Dm)).astype(np.float32)
    w_out = (rng.standard_normal((Fm, Dm)) / np.sqrt(Fm)).astype(np.float32)
    tmp = np.maximum(x @ w_in, 0)
    P = None
    progs = {
        "P3.1": ("AllReduce collective matmul A[B, D_Y].W[D_Y, F], 4 output tiles",
                 lambda J: smap(J, allreduce_matmul(J, 4), m1[J], (J.P(P, sm.AX), J.P(sm.AX)),
                                J.P()), (x, w_in), x @ w_in),
        "P3.2": ("ReduceScatter collective matmul Tmp[B, F_Y].W2[F_Y, D] -> [B, D_Y]",
                 lambda J: smap(J, lambda t, w2: reducescatter_cols(J, t, w2), m1[J],
                                (J.P(P, sm.AX), J.P(sm.AX)), J.P(P, sm.AX)),
                 (tmp, w_out), tmp @ w_out),
        "P3.3": ("whole block In[B, D_Y].W_in[D, F_Y].W_out[F_Y, D], overlapped",
                 lambda J: smap(J, transformer_block(J), m1[J],
                                (J.P(P, sm.AX), J.P(P, sm.AX), J.P(sm.AX)), J.P(P, sm.AX)),
                 (x, w_in, w_out), tmp @ w_out),
        "P4.allreduce": ("AllReduce collective matmul with bidirectional rings",
                         lambda J: smap(J, allreduce_matmul_ring(J, bidirectional=True), m1[J],
                                        (J.P(P, sm.AX), J.P(sm.AX)), J.P(sm.AX)),
                         (x, w_in), np.broadcast_to(x @ w_in, (n, *(x @ w_in).shape))),
        "P4": ("the block with bidirectional rings (both matmuls)",
               lambda J: smap(J, transformer_block(J, bidirectional=True), m1[J],
                              (J.P(P, sm.AX), J.P(P, sm.AX), J.P(sm.AX)), J.P(P, sm.AX)),
               (x, w_in, w_out), tmp @ w_out),
    }
    permutes = {}
    for pid, (question, build, args, want) in progs.items():
        both(pid, question, build, args, want, tol=1e-3)
        hlo = compiled(minijax, build(minijax), *args).as_text()
        permutes[pid] = collective_bytes(hlo, n)["collective-permute"]
    naive = {J: smap(J, lambda xx, wi, wo, J=J: J.lax.psum_scatter(
        J.numpy.maximum(J.lax.all_gather(xx, sm.AX, axis=1, tiled=True) @ wi, 0) @ wo, sm.AX,
        scatter_dimension=1, tiled=True), m1[J], (J.P(P, sm.AX), J.P(P, sm.AX), J.P(sm.AX)),
        J.P(P, sm.AX)) for _, J in MODULES}
    res.check("P3.3: the plain all_gather / psum_scatter block agrees (minijax)",
              np.asarray(naive[minijax](x, w_in, w_out)), tmp @ w_out, rtol=1e-3, atol=1e-3)
    # Bytes per link: one ring sends (n-1) blocks one way; two rings send half each way
    one_way = permutes["P3.3"]
    rows.append(Answer(c, "P4.bytes", "bidirectional / one-way bytes sent per device (the "
                       "same bytes, split over both links)", permutes["P4"] / one_way, 1.0,
                       note="on real links each direction carries half, so the ring time "
                       "halves; 8 CPU devices have no links, so we check the byte split"))
    fns = {J: progs["P3.3"][1](J) for _, J in MODULES}
    fbi = {J: progs["P4"][1](J) for _, J in MODULES}
    t_one, t_bi = interleaved_ms(
        {"one-way": lambda: minijax.block_until_ready(fns[minijax](x, w_in, w_out)),
         "bidirectional": lambda: minijax.block_until_ready(fbi[minijax](x, w_in, w_out))},
        repeat=9 if quick else 30, warmup=1).values()
    t_naive = median_ms(lambda: minijax.block_until_ready(naive[minijax](x, w_in, w_out)),
                        repeat=3 if quick else 10, warmup=1)
    res.timings_ms["block, ring one-way: minijax"] = t_one
    res.timings_ms["block, ring bidirectional: minijax"] = t_bi
    res.timings_ms["block, all_gather + psum_scatter: minijax"] = t_naive
    rows.append(Answer(c, "P3.3.speed", "how much faster than the jit / naive version",
                       f"{t_naive / t_one:.2f}x (CPU devices)", None,
                       note="the book publishes no answer; 8 CPU devices share the host's cores "
                       "and have no links to overlap with, so this ratio says nothing about "
                       "TPUs"))


# ---------------------------------------------------------------------------------------------
# profiling.md Q1 and sharding.md Q8, answered on our own programs
# ---------------------------------------------------------------------------------------------

def replica_group_size(line: str) -> int:
    """Devices in one replica group of a collective's HLO line (any of XLA's three spellings:
    `{{0,1,..},..}`, `[groups,size]<=[..]`, or `mesh['a'=1,'b'=8] {'b'}`)."""
    m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", line)
    if m:
        sizes = dict(re.findall(r"'(\w+)'=(\d+)", m.group(1)))
        return int(np.prod([int(sizes[a]) for a in re.findall(r"'(\w+)'", m.group(2))]))
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", line)
    if m:
        return int(m.group(2))
    m = re.search(r"replica_groups=\{\{([\d,]+)\}", line)
    if m:
        return len(m.group(1).split(","))
    raise ValueError(f"replica_group_size: no replica_groups in {line[:120]!r}")


def _profile_q1(res: TopicResult, rows: list, quick: bool) -> None:
    """The book's profile shows einsum('wf,bf->bw', w2, einsum('fw,bw->bf', w1, x)) with
    8-way model parallelism. We compile the same program (smaller) and recover the true shapes
    from the per-shard shapes in the HLO and the all-reduce's group size, as the book does."""
    Jm = minijax
    n = jax.device_count()
    b, W, F = 8, 256, 1024
    mesh = mesh_of(Jm, (n,), ("m",))
    ns = Jm.sharding.NamedSharding
    rng = np.random.default_rng(1)
    w1 = Jm.device_put(rng.standard_normal((F, W)).astype(np.float32), ns(mesh, Jm.P("m")))
    w2 = Jm.device_put(rng.standard_normal((W, F)).astype(np.float32), ns(mesh, Jm.P(None, "m")))
    x = Jm.device_put(rng.standard_normal((b, W)).astype(np.float32), ns(mesh, Jm.P()))
    jnp = Jm.numpy
    f = Jm.jit(lambda w1, w2, x: jnp.einsum("wf,bf->bw", w2, jnp.einsum("fw,bw->bf", w1, x)),
               out_shardings=ns(mesh, Jm.P()))
    hlo = f.lower(w1, w2, x).compile().as_text()
    dots = [tuple(int(d) for d in m.split(",")) for m in
            re.findall(r"= f32\[([\d,]+)\][^ ]* dot\(", hlo)]
    group = replica_group_size(next(ln for ln in hlo.splitlines() if " all-reduce(" in ln))
    shard_f = min(d for shp in dots for d in shp if d not in (b, W))
    recovered = (b, shard_f * group) if group else None
    ok = recovered == (b, F)
    res.check_true("profiling Q1: true shapes recovered from our compiled HLO", ok)
    rows.append(Answer("profiling", "Q1", "from the HLO alone: per-shard F x all-reduce group "
                       f"size = true F (our program: x[{b},{W}], w1[{F},{W}])",
                       f"x[{b},{W}] . w1[{recovered[1] if recovered else '?'},{W}], "
                       f"{group}-way model parallel", f"x[{b},{W}] . w1[{F},{W}], 8-way model "
                       "parallel", note="" if ok else "could not read the HLO"))
    rows.append(Answer("profiling", "Q1.book", "the book's deduction: per-shard 4096 x 8 "
                       "devices", 4096 * 8, 32768))


def _collective_benchmark(res: TopicResult, rows: list, quick: bool) -> None:
    """sharding.md Q8: the four collectives under shard_map, checked and timed (CPU)."""
    n = jax.device_count()
    rng = np.random.default_rng(2)
    a = rng.standard_normal((n * n * (1 if quick else 32), 256)).astype(np.float32)
    mesh = mesh_of(minijax, (n,), (sm.AX,))
    lax, P = minijax.lax, minijax.P
    ops = {
        "all-gather": (lambda v: lax.all_gather(v, sm.AX, tiled=True), P(sm.AX),
                       np.tile(a, (n, 1))),
        "all-reduce": (lambda v: lax.psum(v, sm.AX), P(), a.reshape(n, -1, 256).sum(0)),
        "reduce-scatter": (lambda v: lax.psum_scatter(v, sm.AX, tiled=True), P(sm.AX),
                           a.reshape(n, -1, 256).sum(0)),
        "all-to-all": (lambda v: lax.all_to_all(v, sm.AX, 0, 0, tiled=True), P(sm.AX),
                       a.reshape(n, n, -1, 256).transpose(1, 0, 2, 3).reshape(a.shape)),
    }
    ok_all = True
    for kind, (body, out, want) in ops.items():
        f = smap(minijax, body, mesh, P(sm.AX), out)
        got = np.asarray(f(a))
        ok = np.allclose(got, want, rtol=1e-4, atol=1e-4)
        ok_all &= ok
        res.check_true(f"sharding Q8: {kind} semantics", ok)
        res.timings_ms[f"Q8 {kind} of {a.nbytes // 1024} KiB: minijax"] = median_ms(
            lambda f=f: minijax.block_until_ready(f(a)), repeat=3 if quick else 10, warmup=1)
    rows.append(Answer("sharding", "Q8", "the four collectives under minijax shard_map give "
                       "NumPy's results (times in the report)", ok_all, True))


# ---------------------------------------------------------------------------------------------
# Cross-checks: the formulas against programs minijax compiles
# ---------------------------------------------------------------------------------------------

def _xcheck(out: list, what: str, predicted: float, measured: float, rtol: float = 0.0):
    ok = bool(np.isclose(measured, predicted, rtol=rtol, atol=0))
    out.append({"what": what, "predicted": float(predicted), "measured": float(measured),
                "ok": ok, "rtol": rtol})


def _cost(f, *args) -> dict:
    return minijax.jit(f).lower(*args).compile().cost_analysis()


def cross_checks(quick: bool) -> list[dict]:
    out: list[dict] = []
    Jm, jnp, lax = minijax, minijax.numpy, minijax.lax
    n = jax.device_count()
    rng = np.random.default_rng(3)
    f32 = np.float32
    B, D, F = 64, 256, 512

    # roofline.md: FLOPs and bytes of one matmul
    a, w = np.ones((B, D), f32), np.ones((D, F), f32)
    cost = _cost(lambda a, w: a @ w, a, w)
    flops, nbytes = matmul_cost(B, D, F, 4, 4, 4)
    _xcheck(out, "matmul [64,256]@[256,512]: FLOPs = 2BDF", flops, cost["flops"])
    _xcheck(out, "same: bytes accessed = 4(BD + DF + BF)", nbytes, cost["bytes accessed"])
    # roofline.md Q4: a different matrix per row
    wb = np.ones((8, D, F), f32)
    cost = _cost(lambda a, w: jnp.einsum("bd,bdf->bf", a, w), a[:8], wb)
    flops, nbytes = matmul_cost(8, D, F, 4, 4, 4, batched_weights=True)
    _xcheck(out, "per-row matrices [8,256].[8,256,512]: FLOPs = 2BDF", flops, cost["flops"])
    _xcheck(out, "same: bytes = 4(BD + BDF + BF), intensity ~ 1/2 per f32 byte", nbytes,
            cost["bytes accessed"])
    # transformers.md Q3: an einsum with two contracting dimensions
    dims = dict(i=2, j=3, k=4, l=5, m=6, n=7, o=8)
    A = np.ones((2, 3, 4, 5), f32)
    Bm = np.ones((2, 3, 6, 7, 8), f32)
    cost = _cost(lambda x, y: jnp.einsum("ijkl,ijmno->klmno", x, y), A, Bm)
    _xcheck(out, "einsum ijkl,ijmno->klmno: FLOPs = 2 I J K L M N O", 2 * np.prod(
        list(dims.values())), cost["flops"])

    # transformers.md Q2: per-device FLOPs of A[B_X, D_Y] . W[D_Y, F] on {X:2, Y:2, Z:2}
    mesh3 = mesh_of(Jm, (2, 2, 2), ("X", "Y", "Z"))
    ns = Jm.sharding.NamedSharding
    Bq, Dq, Fq = 64, 1024, 512
    aa = Jm.device_put(rng.standard_normal((Bq, Dq)).astype(f32), ns(mesh3, Jm.P("X", "Y")))
    ww = Jm.device_put(rng.standard_normal((Dq, Fq)).astype(f32), ns(mesh3, Jm.P("Y", None)))
    comp = Jm.jit(lambda a, w: a @ w, out_shardings=ns(mesh3, Jm.P("X"))).lower(aa, ww).compile()
    _xcheck(out, "A[B_X,D_Y].W[D_Y,F] on 2x2x2: FLOPs per device = 2BDF/(XY) (+ the "
            "all-reduce's adds)", 2 * Bq * Dq * Fq / 4, comp.cost_analysis()["flops"], 0.01)
    hlo = comp.as_text()
    got = collective_bytes(hlo, 2)["all-reduce"]
    _xcheck(out, "same: contracting dim sharded on both (case 3) -> all-reduce over Y of "
            "C[B_X, F], 2 (n-1)/n x bytes", 2 * (2 - 1) / 2 * Bq / 2 * Fq * 4, got)

    mesh = mesh_of(Jm, (n,), ("x",))
    # sharding.md case 1: no contracting dimension sharded -> no communication
    a1 = Jm.device_put(rng.standard_normal((Bq, Dq)).astype(f32), ns(mesh, Jm.P("x")))
    w1 = Jm.device_put(rng.standard_normal((Dq, Fq)).astype(f32), ns(mesh, Jm.P()))
    comp = Jm.jit(lambda a, w: a @ w, out_shardings=ns(mesh, Jm.P("x"))).lower(a1, w1).compile()
    _xcheck(out, "case 1, A[B_X, D].W[D, F]: collectives in the compiled program", 0,
            sum(count_collectives(comp.as_text()).values()))
    # sharding.md case 2 / Q4: one operand sharded on the contracting dimension
    a2 = Jm.device_put(rng.standard_normal((Bq, Dq)).astype(f32), ns(mesh, Jm.P()))
    w2 = Jm.device_put(rng.standard_normal((Dq, Fq)).astype(f32), ns(mesh, Jm.P("x")))
    comp = Jm.jit(lambda a, w: a @ w, out_shardings=ns(mesh, Jm.P())).lower(a2, w2).compile()
    bytes2 = collective_bytes(comp.as_text(), n)
    strategy1 = (n - 1) / n * Dq * Fq * 4  # all-gather W
    strategy2 = 2 * (n - 1) / n * Bq * Fq * 4  # local matmul of A's slice, all-reduce C
    picked = "all-reduce" if bytes2["all-reduce"] else "all-gather"
    _xcheck(out, f"case 2, A[B, D].W[D_X, F]: XLA picks the cheaper strategy of sharding Q4 "
            f"({picked}); bytes", min(strategy1, strategy2), sum(bytes2.values()))

    # the four collectives in shard_map: bytes each device receives
    V = 4 * 64 * 128
    x = rng.standard_normal((n * 8, 128)).astype(f32)
    P = Jm.P
    for kind, body, o, pred in (
            ("all-gather", lambda v: lax.all_gather(v, "x", tiled=True), P("x"),
             (n - 1) / n * x.nbytes),
            ("reduce-scatter", lambda v: lax.psum_scatter(v, "x", tiled=True), P("x"),
             (n - 1) / n * x.nbytes / n),
            ("all-reduce", lambda v: lax.psum(v, "x"), P(), 2 * (n - 1) / n * x.nbytes / n),
            ("all-to-all", lambda v: lax.all_to_all(v, "x", 0, 0, tiled=True), P("x"),
             (n - 1) / n * x.nbytes / n)):
        f = smap(Jm, body, mesh, P("x"), o)
        hlo = f.lower(x).compile().as_text()
        _xcheck(out, f"shard_map {kind} of f32[{n * 8},128] over {n}: bytes received per device "
                f"(and {kind} is what XLA emitted)", pred,
                collective_bytes(hlo, n)[kind] if count_collectives(hlo)[kind] else -1)
    del V

    # training.md: one SGD step of each strategy (compare/shard_map's MLP), bytes per device
    m1 = {J: mesh_of(J, (n,), (sm.AX,)) for J in (Jm,)}
    Db, Hb, Ob, Bb = 32, 64, 16, 64
    params = (rng.standard_normal((Db, Hb)).astype(f32), rng.standard_normal((Hb, Ob)).astype(f32))
    xb, yb = rng.standard_normal((Bb, Db)).astype(f32), rng.standard_normal((Bb, Ob)).astype(f32)
    P_bytes = 4 * (Db * Hb + Hb * Ob)
    ring = (n - 1) / n
    predicted = {"data parallel": 2 * ring * (P_bytes + 4),
                 "FSDP": 2 * ring * P_bytes + 2 * ring * 4,
                 "tensor parallel": 2 * ring * Bb * Ob * 4}
    for name, (build, _) in sm.STRATEGIES.items():
        step = sm.sgd_step(Jm, build(Jm, m1[Jm], Bb))
        hlo = step.lower(params, xb, yb).compile().as_text()
        _xcheck(out, f"{name} SGD step of a {Db}-{Hb}-{Ob} MLP: bytes received per device",
                predicted[name], sum(collective_bytes(hlo, n).values()), 0.0)

    # a ring collective matmul (compare/shard_map's): n - 1 permutes of one block each
    am = rng.standard_normal((64, 64)).astype(f32)
    f = smap(Jm, lambda xb_, wb_: sm.allgather_matmul(Jm, xb_, wb_), m1[Jm],
             (P(sm.AX, None), P(None, sm.AX)), P(None, sm.AX))
    hlo = f.lower(am, am).compile().as_text()
    _xcheck(out, "all-gather ring matmul: bytes permuted per device = (n-1) row blocks",
            (n - 1) * am.nbytes / n, collective_bytes(hlo, n)["collective-permute"])
    _xcheck(out, "same: ring time on v5e for these bytes equals the book's all-gather time "
            "(n-1)/n V / W_oneway", collective_time("all-gather", am.nbytes, CHIPS["v5e"], n=n,
                                                    wraparound=False),
            collective_bytes(hlo, n)["collective-permute"] / CHIPS["v5e"].link_bw, 1e-9)

    # transformers.md: FLOPs of a Transformer layer, forward and training step
    Bt, T, Dt, Nh = 2, 128, 256, 4
    Ft, Hh = 4 * Dt, Dt // Nh
    rngw = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(f32)
    wts = (rngw(Dt, 3 * Dt), rngw(Dt, Dt), rngw(Dt, Ft), rngw(Ft, Dt))
    xt = rng.standard_normal((Bt, T, Dt)).astype(f32)

    def layer(wts, x):
        wqkv, wo, wi, wout = wts
        q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
        q, k, v = (t.reshape(Bt, T, Nh, Hh) for t in (q, k, v))
        s = jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(Hh)
        o = jnp.einsum("bnts,bsnh->btnh", Jm.nn.softmax(s, axis=-1), v).reshape(Bt, T, Dt)
        h = x + o @ wo
        return h + Jm.nn.relu(h @ wi) @ wout

    model = Transformer(L=1, D=Dt, F=Ft, N=Nh, K=Nh, H=Hh, V=0, ffw_mats=2)
    fwd = model.forward_flops(Bt * T, context=T)
    _xcheck(out, "Transformer layer forward (B=2, T=128, D=256): FLOPs = 2 x params x tokens + "
            "4 B T^2 N H (elementwise ops within 3%)", fwd, _cost(layer, wts, xt)["flops"], 0.03)
    loss = lambda wts, x: jnp.sum(layer(wts, x) ** 2)
    _xcheck(out, "same layer, gradient (weights and input): FLOPs = 3 x forward (the 6 N T "
            "rule)", 3 * fwd,
            _cost(Jm.grad(loss, argnums=(0, 1)), wts, xt)["flops"], 0.03)

    # expert parallelism (jax-stuff P2.3b): two all-to-alls of the capacity-sized buffers
    S, Dm, Fm, k = 32, 16, 8, 2
    wm = rng.standard_normal((n, Dm, Fm)).astype(f32)
    am = rng.standard_normal((S, Dm)).astype(f32)
    rm = rng.integers(0, n, (S, k)).astype(np.int32)
    hlo = moe_all_to_all(Jm, m1[Jm]).lower(wm, am, rm).compile().as_text()
    _xcheck(out, "expert-parallel MoE (one expert per device, top-2): bytes of its two "
            "all-to-alls per device", expert_parallel_bytes(S // n, k, Dm, Fm, n, 4),
            collective_bytes(hlo, n)["all-to-all"])

    # chapter 19's GPT: bytes of the KV cache prefill returns
    from compare import gpt
    cfg = gpt.Config(vocab=65, n_layer=2, d_model=64, n_head=4, block=32, batch=4)
    prog = gpt.program(Jm, cfg)
    p0 = gpt.init_params(cfg, 0)
    _, caches = prog["prefill"](p0, np.zeros((4, 8), np.int32))
    got = sum(np.asarray(c).nbytes for kv in caches for c in kv)
    g_model = Transformer(L=cfg.n_layer, D=cfg.d_model, F=4 * cfg.d_model, N=cfg.n_head,
                          K=cfg.n_head, H=cfg.head_dim, V=cfg.vocab)
    _xcheck(out, "chapter 19 GPT (L=2, K=4, H=16, f32): KV cache bytes for 4 sequences of 32 = "
            "B T 2 L K H x 4", 4 * cfg.block * g_model.kv_bytes_per_token(4), got)
    return out


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

def _fmt(v) -> str:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return "-" if v is None else str(v)
    return f"{v:.4g}"


def _draw_roofline(fig) -> None:
    """roofline.md Q3: attainable FLOP/s of bf16[B, D] x int8[D, F] on a TPU v5e vs B."""
    v5e = CHIPS["v5e"]
    ax = fig.add_subplot(1, 1, 1)
    bs = np.unique(np.logspace(0, 4, 200).astype(int))
    for D, F in ((1024, 1024), (4096, 4096), (8192, 32768)):
        att = [min(v5e.peak(), np.divide(*matmul_cost(b, D, F, 2, 1, 2)) * v5e.hbm_bw)
               for b in bs]
        ax.loglog(bs, att, label=f"D={D}, F={F}")
    ax.axhline(v5e.peak(), color="k", ls=":", label="bf16 peak")
    ax.set_xlabel("batch B")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title("bf16 activations x int8 weights on a TPU v5e")
    ax.legend(fontsize=8)


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("scaling_book: the Scaling Book's exercises, answered and cross-checked")
    res.chapter = "chapters/29-scaling-book.md"
    res.devices = jax.device_count()
    rows = all_answers()
    _jax_chapter(res, rows, quick)
    _profile_q1(res, rows, quick)
    _collective_benchmark(res, rows, quick)
    xc = cross_checks(quick)

    for a in rows:
        res.check_true(f"{a.chapter} {a.id}: agrees or the disagreement is explained",
                       a.explained)
    for x in xc:
        res.check_true(f"cross-check: {x['what']}", x["ok"])
    res.check_true("at least 10 cross-checks against compiled minijax programs", len(xc) >= 10)
    res.extra["exercises"] = [a.to_json() for a in rows]
    res.extra["cross_checks"] = xc

    by_chapter = defaultdict(list)
    for a in rows:
        by_chapter[a.chapter].append(a)
    agree = sum(a.ok for a in rows if a.book is not None)
    published = sum(a.book is not None for a in rows)
    res.sections.append(
        "### Summary\n\n"
        f"{len(rows)} answers over {len(by_chapter)} chapters; {published} have a published "
        f"number, and ours agrees with {agree} of them within the book's rounding. The other "
        f"{published - agree} are explained in the last column (slips in the book's arithmetic "
        "or rounded inputs). Rows without a book number are questions the book leaves "
        f"unanswered. {sum(x['ok'] for x in xc)}/{len(xc)} cross-checks against programs "
        "minijax compiled on 8 CPU devices hold.")
    for chapter, answers in by_chapter.items():
        res.sections.append(
            f"### {chapter}.md\n\n" + table(
                ["question", "ours", "book", "agrees", "note"],
                [[f"{a.id}: {a.question}", _fmt(a.ours), _fmt(a.book),
                  "yes" if a.ok and a.book is not None else ("-" if a.book is None else "no"),
                  a.note] for a in answers]))
    if not quick:
        res.sections.append("### roofline.md Q3: the roofline plot\n\n"
                            + plot("scaling_book_roofline", _draw_roofline))
    res.sections.append(
        "### Cross-checks on programs minijax compiles\n\n" + table(
            ["what", "predicted", "measured", "ok"],
            [[x["what"], _fmt(x["predicted"]), _fmt(x["measured"]), "yes" if x["ok"] else "NO"]
             for x in xc]))
    return res
