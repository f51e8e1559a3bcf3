"""shard_map: writing the per-device program yourself, in minijax and in JAX.

Every program runs through both modules (`def program(J)` with J = jax and J = minijax) on a
1-D mesh of the eight CPU devices (axis `i`). Inside `shard_map` a function sees its own block
of each input and talks to the other devices only through explicit collectives. The topic
shows:

* the per-device view (local shapes, the `{V:i}` "varies along i" mark in the types) and
  `axis_index`;
* the collectives `psum`, `pmax`, `all_gather`, `psum_scatter`, `ppermute`, `all_to_all`, each
  checked against NumPy on the whole array and against the other module;
* two collective matmuls that overlap a ring of `ppermute`s with local matmuls (the all-gather
  variant and the reduce-scatter variant), and an all-reduce built from `ppermute` alone;
* what `check_vma` does when an output declared replicated is not;
* `grad` through a `shard_map` (and the `pvary` <-> `psum` pairing it produces);
* three parallel training steps of an MLP (data parallel, FSDP, tensor parallel) whose losses
  equal the unsharded run, with the collectives XLA compiled and the step times of both;
* the difference between Explicit and Auto meshes at the `shard_map` boundary, in both
  modules (both carry shardings in their types on an Explicit mesh).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import minijax
from compare._jax201 import catch, count_collectives, fmt_counts, table
from compare._modules import MODULES
from compare._report import TopicResult, code, interleaved_ms, plot
from minijax import core as mcore

AX = "i"


def typeof(J, x) -> str:
    """The type of `x` as `jax.typeof` prints it (`float32[2,8]{V:i}`)."""
    return str(jax.typeof(x)) if J is jax else str(mcore.get_aval(x))


def _slice_rows(J, a, block, size):
    return J.lax.dynamic_slice_in_dim(a, block * size, size, axis=0)


def allgather_matmul(J, x_blk, w_blk):
    """Per device: x_blk = rows block j of x, w_blk = columns block j of w.

    Returns the column block j of x @ w. Instead of gathering all of x first, the row blocks
    travel round a ring: at step s device j holds rows block (j + s) mod n, multiplies it by its
    columns, and passes it on. The send of the next block can overlap with the current matmul.
    """
    jnp, lax = J.numpy, J.lax
    n = lax.axis_size(AX)
    j = lax.axis_index(AX)
    mb = x_blk.shape[0]
    left = [(k, (k - 1) % n) for k in range(n)]  # device k sends to k-1, so j receives j+1's
    out = jnp.zeros((mb * n, w_blk.shape[1]), x_blk.dtype)
    chunk = x_blk
    for s in range(n):
        part = chunk @ w_blk
        out = lax.dynamic_update_slice_in_dim(out, part, ((j + s) % n) * mb, axis=0)
        if s + 1 < n:
            chunk = lax.ppermute(chunk, AX, left)
    return out


def reducescatter_matmul(J, x_blk, w_blk):
    """Per device: x_blk = columns block j of x, w_blk = rows block j of w.

    Every device can form a partial product x_blk @ w_blk of the whole output; the answer is the
    sum over devices, and device j should end up with row block j of it. An accumulator moves
    round the ring; each device adds its partial for the row block that accumulator is collecting.
    """
    lax = J.lax
    n = lax.axis_size(AX)
    j = lax.axis_index(AX)
    mb = x_blk.shape[0] // n
    right = [(k, (k + 1) % n) for k in range(n)]
    acc = _slice_rows(J, x_blk, (j - 1) % n, mb) @ w_blk
    for s in range(1, n):
        acc = lax.ppermute(acc, AX, right) + _slice_rows(J, x_blk, (j - s - 1) % n, mb) @ w_blk
    return acc  # row block j of the full sum


def ring_allreduce(J, v):
    """Sum `v` over the ring with ppermute only: reduce-scatter round, then all-gather round."""
    jnp, lax = J.numpy, J.lax
    n = lax.axis_size(AX)
    j = lax.axis_index(AX)
    chunks = v.reshape(n, -1)
    right = [(k, (k + 1) % n) for k in range(n)]
    acc = _take(J, chunks, (j - 1) % n)
    for s in range(1, n):
        acc = lax.ppermute(acc, AX, right) + _take(J, chunks, (j - s - 1) % n)
    # acc is now the fully reduced chunk j; pass the finished chunks round once more.
    out = lax.dynamic_update_slice_in_dim(jnp.zeros_like(chunks), acc[None], j, axis=0)
    cur = acc
    for s in range(1, n):
        cur = lax.ppermute(cur, AX, right)
        out = lax.dynamic_update_slice_in_dim(out, cur[None], (j - s) % n, axis=0)
    return out.reshape(v.shape)


def _take(J, a, i):
    return J.lax.dynamic_index_in_dim(a, i, axis=0, keepdims=False)


# ---------------------------------------------------------------------------------------------
# Three parallel MLP training steps (per-device bodies written once, for both modules)
# ---------------------------------------------------------------------------------------------

def mlp_loss(J, params, x, y):
    """The unsharded loss: mean squared error of relu(x @ w1) @ w2."""
    jnp = J.numpy
    w1, w2 = params
    return jnp.mean((jnp.maximum(x @ w1, 0.0) @ w2 - y) ** 2)


def dp_loss(J, mesh, batch: int):
    """Data parallel: params replicated (P()), batch split; psum of the per-device sums."""
    jnp, lax = J.numpy, J.lax

    def body(w1, w2, xb, yb):
        err = jnp.maximum(xb @ w1, 0.0) @ w2 - yb
        return lax.psum(jnp.sum(err ** 2), AX) / (batch * yb.shape[1])
    f = J.shard_map(body, mesh=mesh, in_specs=(J.P(), J.P(), J.P(AX), J.P(AX)),
                    out_specs=J.P())
    return lambda params, x, y: f(*params, x, y)


def fsdp_loss(J, mesh, batch: int):
    """FSDP: every parameter split by rows over the devices, all-gathered just before use;
    batch split. grad's transpose of each all_gather is a psum_scatter: gradients come back
    split like the parameters."""
    jnp, lax = J.numpy, J.lax

    def body(w1s, w2s, xb, yb):
        w1 = lax.all_gather(w1s, AX, tiled=True)
        h = jnp.maximum(xb @ w1, 0.0)
        w2 = lax.all_gather(w2s, AX, tiled=True)
        err = h @ w2 - yb
        return lax.psum(jnp.sum(err ** 2), AX) / (batch * yb.shape[1])
    f = J.shard_map(body, mesh=mesh, in_specs=(J.P(AX), J.P(AX), J.P(AX), J.P(AX)),
                    out_specs=J.P())
    return lambda params, x, y: f(*params, x, y)


def tp_loss(J, mesh, batch: int):
    """Tensor parallel (Megatron): w1 split by columns, w2 by rows; x replicated. Each device
    computes a slice of the hidden layer and a partial output; one psum finishes it."""
    jnp, lax = J.numpy, J.lax

    def body(w1b, w2b, x, y):
        out = lax.psum(jnp.maximum(x @ w1b, 0.0) @ w2b, AX)
        return jnp.mean((out - y) ** 2)
    f = J.shard_map(body, mesh=mesh, in_specs=(J.P(None, AX), J.P(AX, None), J.P(), J.P()),
                    out_specs=J.P())
    return lambda params, x, y: f(*params, x, y)


STRATEGIES = {  # name: (loss builder, specs of w1, w2, x, y)
    "data parallel": (dp_loss, (P(), P(), P(AX), P(AX))),
    "FSDP": (fsdp_loss, (P(AX), P(AX), P(AX), P(AX))),
    "tensor parallel": (tp_loss, (P(None, AX), P(AX, None), P(), P())),
}


def sgd_step(J, loss):
    def step(params, x, y):
        val, grads = J.value_and_grad(loss)(params, x, y)
        return val, J.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return J.jit(step)


def _draw_collectives(fig, coll: dict) -> None:
    """Bars: how many of each collective the compiled step of each strategy holds, JAX's bar
    next to minijax's (they should be equal)."""
    kinds = sorted({k for pair in coll.values() for c in pair for k, n in c.items() if n})
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, 2 * len(kinds))
    for si, (cj, cm) in enumerate(coll.values()):
        for ki, kind in enumerate(kinds):
            for mi, (counts, hatch) in enumerate(((cj, ""), (cm, "//"))):
                x = si + (2 * ki + mi) * width - 0.4
                ax.bar(x, counts.get(kind, 0), width, color=f"C{ki}", hatch=hatch,
                       edgecolor="k", label=f"{kind} ({'JAX' if mi == 0 else 'minijax'})"
                       if si == 0 else None)
    ax.set_xticks(range(len(coll)), list(coll))
    ax.set_ylabel("collectives in the compiled step")
    ax.set_title("One MLP training step, three ways to split it over 8 devices")
    ax.legend(fontsize=7)


@dataclasses.dataclass
class _Setup:
    """What the parts of the topic share: the result they record into, the device count, the
    one-axis meshes (Auto, per module; JAX's Explicit one), the random stream (each part draws
    from it in turn, in the order of `PARTS`) and the input x."""
    res: TopicResult
    quick: bool
    n: int
    meshes: dict
    mesh_e: Any
    rng: np.random.Generator
    cols: int
    x: np.ndarray

    @classmethod
    def make(cls, quick: bool) -> "_Setup":
        res = TopicResult("shard_map: per-device programs and collectives (minijax and JAX)",
                          runs="jax")  # the checks not naming minijax run JAX alone
        res.chapter = "chapters/13-shard-map.md"
        res.devices = n = jax.device_count()
        meshes = {J: J.make_mesh((n,), (AX,), axis_types=(J.sharding.AxisType.Auto,))
                  for _, J in MODULES}
        rng = np.random.default_rng(0)
        cols = 8 if quick else 64
        x = rng.standard_normal((n * 2, cols)).astype(np.float32)
        return cls(res, quick, n, meshes, jax.make_mesh((n,), (AX,)), rng, cols, x)

    @property
    def mesh(self):
        """JAX's Auto mesh."""
        return self.meshes[jax]

    @property
    def blocks(self) -> np.ndarray:
        """x as the devices hold it under P('i'): (device, rows, cols)."""
        return self.x.reshape(self.n, 2, self.cols)

    def smap(self, J, f, i, o, **kw):
        """`jit(shard_map(f))` of module J on its Auto mesh."""
        return J.jit(J.shard_map(f, mesh=self.meshes[J], in_specs=i, out_specs=o, **kw))

    def both(self, name, program, want=None, **tol):
        """Run `program(J)` in both modules; check minijax against JAX (and `want`)."""
        j, m = program(jax), program(minijax)
        self.res.check(f"{name}: minijax equals JAX", np.asarray(m) if not isinstance(m, tuple)
                       else m, j, **tol)
        if want is not None:
            self.res.check(f"{name}: JAX equals NumPy", j, want, **tol)
        return j, m


def _the_per_device_view(c: _Setup) -> None:
    """The part of the topic on the per-device view."""
    res, n, smap, both, x, blocks = c.res, c.n, c.smap, c.both, c.x, c.blocks
    seen = {}

    def peek_program(J):
        lax = J.lax

        def peek(a, r):
            seen[J, "local block"] = typeof(J, a)
            seen[J, "replicated input"] = typeof(J, r)
            seen[J, "axis_index"] = typeof(J, lax.axis_index(AX))
            seen[J, "psum(local)"] = typeof(J, lax.psum(a, AX))
            return a + r + lax.axis_index(AX).astype(a.dtype)
        return smap(J, peek, (J.P(AX), J.P()), J.P(AX))(x, x[:2])

    want = blocks + x[:2][None] + np.arange(n, dtype=np.float32)[:, None, None]
    both("per-device block + replicated + axis_index", peek_program, want.reshape(x.shape))
    keys = ["local block", "replicated input", "axis_index", "psum(local)"]
    res.check_true("the per-device types minijax prints equal JAX's",
                   all(seen[jax, k] == seen[minijax, k] for k in keys))
    res.sections.append(
        "### What one device sees\n\n"
        f"`shard_map(f, mesh, in_specs=(P('i'), P()), out_specs=P('i'))` on x of shape "
        f"{x.shape}: the body runs once per device (traced once), with the types it sees:\n\n"
        + table(["value", "type inside the body (JAX)", "minijax"],
                [[k, f"`{seen[jax, k]}`", f"`{seen[minijax, k]}`"] for k in keys])
        + "\n\nThe block is 1/8 of the rows, and `{V:i}` marks a value that *varies* along mesh "
        "axis `i` (each device has different data). The replicated input and `psum` results "
        "carry no mark: they are the same on every device. This bookkeeping is what "
        "`check_vma` uses further down."
    )


def _collectives(c: _Setup) -> None:
    """The part of the topic on collectives."""
    (res, n, smap, both, rng, cols, x, blocks) = (
        c.res, c.n, c.smap, c.both, c.rng, c.cols, c.x, c.blocks)
    sq = rng.standard_normal((n, n)).astype(np.float32)
    shift = [(k, (k + 1) % n) for k in range(n)]
    tiled_x = np.tile(x, (n, 1))
    cases = [
        ("psum(a)", lambda J: smap(J, lambda a: J.lax.psum(a, AX), J.P(AX), J.P())(x),
         blocks.sum(0), "P('i') -> P()", "sum of the 8 blocks, on every device"),
        ("pmax(a)", lambda J: smap(J, lambda a: J.lax.pmax(a, AX), J.P(AX), J.P())(x),
         blocks.max(0), "P('i') -> P()", "elementwise max over devices"),
        ("all_gather(a, tiled=True)", lambda J: smap(
            J, lambda a: J.lax.all_gather(a, AX, tiled=True), J.P(AX), J.P(AX))(x),
         np.tile(x, (n, 1)), "P('i') -> P('i')",
         "every device gets the whole array (still typed as varying)"),
        ("all_gather(a, tiled=True, to='invarying')", lambda J: smap(
            J, lambda a: J.lax.all_gather(a, AX, tiled=True, to="invarying"), J.P(AX),
            J.P())(x), x, "P('i') -> P()", "the whole array, typed as the same everywhere"),
        ("all_gather(a)", lambda J: smap(J, lambda a: J.lax.all_gather(a, AX), J.P(AX),
                                         J.P(AX))(x),
         np.broadcast_to(blocks, (n, n, 2, cols)).reshape(n * n, 2, cols), "P('i') -> P('i')",
         "new leading axis of size 8"),
        ("psum_scatter(a, tiled=True)", lambda J: smap(
            J, lambda a: J.lax.psum_scatter(a, AX, scatter_dimension=0, tiled=True), J.P(AX),
            J.P(AX))(tiled_x), x * n, "P('i') -> P('i')",
         "sum over devices, device j keeps row block j"),
        ("ppermute(a, [(k, k+1)])", lambda J: smap(
            J, lambda a: J.lax.ppermute(a, AX, shift), J.P(AX), J.P(AX))(x),
         np.roll(blocks, 1, axis=0).reshape(x.shape), "P('i') -> P('i')",
         "block k moves to device k+1"),
        # Device j gets column block j of every row block, stacked: the block grid transposed
        ("all_to_all(a, split 1, concat 0)", lambda J: smap(
            J, lambda a: J.lax.all_to_all(a, AX, split_axis=1, concat_axis=0, tiled=True),
            J.P(AX), J.P(AX))(sq),
         sq.reshape(n, 1, n, 1).transpose(2, 0, 1, 3).reshape(n * n, 1), "P('i') -> P('i')",
         "device j collects piece j from every device"),
        ("axis_index('i')", lambda J: smap(
            J, lambda a: J.numpy.full_like(a, J.lax.axis_index(AX)), J.P(AX), J.P(AX))(x),
         np.repeat(np.arange(n, dtype=np.float32), 2)[:, None] * np.ones_like(x), "-",
         "this device's position along i"),
    ]
    rows = []
    for name, program, want, specs, what in cases:
        both(name, program, want, rtol=1e-5, atol=1e-5)
        rows.append([f"`{name}`", specs, what])
    res.sections.append(
        "### The collectives, each against NumPy and between the two modules\n\n"
        + table(["call inside the body", "in -> out specs", "what it computes"], rows)
        + "\n\n`all_gather`'s result is still typed as varying by default (its transpose is a "
        "reduce-scatter, which needs a varying cotangent); `to='invarying'` gives a result "
        "typed as replicated, which an `out_specs=P()` needs (its transpose slices out this "
        "device's block). Each row ran through `jax.shard_map` and `minijax.shard_map` under "
        "`jit`."
    )


def _collective_matmuls(c: _Setup) -> None:
    """The part of the topic on collective matmuls."""
    res, quick, smap, rng = c.res, c.quick, c.smap, c.rng
    m = k = nn = 64 if quick else 512
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, nn)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = dict(rtol=1e-4, atol=1e-3)
    versions = {
        "all-gather ring (ppermute)": lambda J: smap(
            J, lambda xb, wb: allgather_matmul(J, xb, wb), (J.P(AX, None), J.P(None, AX)),
            J.P(None, AX)),
        "all_gather then matmul": lambda J: smap(
            J, lambda xb, wb: J.lax.all_gather(xb, AX, tiled=True) @ wb,
            (J.P(AX, None), J.P(None, AX)), J.P(None, AX)),
        "reduce-scatter ring (ppermute)": lambda J: smap(
            J, lambda xb, wb: reducescatter_matmul(J, xb, wb), (J.P(None, AX), J.P(AX, None)),
            J.P(AX, None)),
        "matmul then psum_scatter": lambda J: smap(
            J, lambda xb, wb: J.lax.psum_scatter(xb @ wb, AX, tiled=True),
            (J.P(None, AX), J.P(AX, None)), J.P(AX, None)),
    }
    mm_rows = []
    for name, build in versions.items():
        fj, fm = build(jax), build(minijax)
        # ref is float64 NumPy: the results must be float32 and agree with it in value.
        res.check(f"collective matmul, {name}: JAX", fj(a, b), ref, dtype=np.float32, **tol)
        res.check(f"collective matmul, {name}: minijax", np.asarray(fm(a, b)), ref,
                  dtype=np.float32, **tol)
        cj = count_collectives(fj.lower(a, b).compile().as_text())
        cm = count_collectives(fm.lower(a, b).compile().as_text())
        res.check_true(f"collective matmul, {name}: minijax compiles JAX's collectives",
                       cj == cm)
        ja = jax.device_put(a)
        jb = jax.device_put(b)
        ma, mb = minijax.device_put(a), minijax.device_put(b)
        t_j, t_m = interleaved_ms(
            {"jax": lambda f=fj, u=ja, v=jb: jax.block_until_ready(f(u, v)),
             "minijax": lambda f=fm, u=ma, v=mb: minijax.block_until_ready(f(u, v))},
            repeat=9 if quick else 45, warmup=1).values()
        res.timings_ms[f"matmul {m}x{k}x{nn}: {name}, JAX"] = t_j
        res.timings_ms[f"matmul {m}x{k}x{nn}: {name}, minijax"] = t_m
        mm_rows.append([name, fmt_counts(cj), fmt_counts(cm), f"{t_j:.3g}", f"{t_m:.3g}"])
    res.sections.append(
        "### Collective matmuls\n\n"
        f"`x @ w` for {m}x{k} by {k}x{nn}. The all-gather variant starts with x split by rows "
        "and w by columns and must produce column blocks of the result; the reduce-scatter "
        "variant starts with both split along the contracted dimension and must produce row "
        "blocks. The ring versions send one block at a time with `ppermute`, so on hardware "
        "with asynchronous links the transfer of the next block hides behind the current "
        "block's matmul. Compiled collectives and median times:\n\n"
        + table(["version", "JAX collectives", "minijax collectives", "JAX ms", "minijax ms"],
                mm_rows)
        + "\n\nOn eight fake CPU devices that share two cores there is nothing to overlap "
        "with, so the ring versions are not faster here; the point is that they compute the "
        "same thing using only neighbour-to-neighbour sends (one collective-permute per ring "
        "step)."
    )


def _ring_all_reduce(c: _Setup) -> None:
    """The part of the topic on ring all-reduce."""
    res, quick, n, smap, rng = c.res, c.quick, c.n, c.smap, c.rng
    vec = rng.standard_normal((n, n * (4 if quick else 4096))).astype(np.float32)
    total = vec.astype(np.float64).sum(0)
    ring = {J: smap(J, lambda v, J=J: ring_allreduce(J, v[0])[None], J.P(AX), J.P(AX))
            for _, J in MODULES}
    builtin = {J: smap(J, lambda v, J=J: J.lax.psum(v, AX), J.P(AX), J.P()) for _, J in MODULES}
    for _, J in MODULES:
        res.check(f"ring all-reduce ({J.__name__}): every device holds the sum",
                  np.asarray(ring[J](vec)), np.broadcast_to(total, vec.shape),
                  rtol=1e-5, atol=1e-4, dtype=np.float32)  # total: a float64 NumPy sum
        res.check(f"psum ({J.__name__}) agrees", np.asarray(builtin[J](vec)), total[None],
                  rtol=1e-5, atol=1e-4, dtype=np.float32)
    rc = {J: count_collectives(ring[J].lower(vec).compile().as_text()) for _, J in MODULES}
    res.check_true("ring all-reduce: minijax compiles JAX's collectives", rc[jax] == rc[minijax])
    res.sections.append(
        "### An all-reduce made of ppermutes\n\n"
        "Split each device's vector into 8 chunks. Round one (7 steps): a running sum travels "
        "right and each device adds its own copy of the chunk being collected, so device j "
        "ends with the finished chunk j (a reduce-scatter). Round two (7 more steps): the "
        "finished chunks travel round so everyone gets all of them (an all-gather). Each "
        "device sends 2 x 7/8 of its data in total, independent of the device count, which is "
        f"why rings are the textbook bandwidth-optimal all-reduce. Compiled: "
        f"{fmt_counts(rc[jax])} (JAX), {fmt_counts(rc[minijax])} (minijax). The output spec is "
        "`P('i')` (one full copy per device, stacked) because the result of a `ppermute` is "
        "typed as varying; the check confirms every copy equals the sum."
    )


def _check_vma(c: _Setup) -> None:
    """The part of the topic on check_vma."""
    res, smap, x, blocks = c.res, c.smap, c.x, c.blocks
    lying = lambda a: a * 2.0
    errors = {J: catch(lambda J=J: smap(J, lying, J.P(AX), J.P())(x)) for _, J in MODULES}
    res.check_true("check_vma: non-replicated output declared P() raises, in both",
                   all(kind == "ValueError" for kind, _ in errors.values()))
    for _, J in MODULES:
        unchecked = smap(J, lying, J.P(AX), J.P(), check_vma=False)(x)
        res.check(f"check_vma=False returns device 0's block only ({J.__name__})",
                  np.asarray(unchecked), blocks[0] * 2.0)
        fixed = smap(J, lambda a, J=J: J.lax.psum(a, AX) * 2.0, J.P(AX), J.P())(x)
        res.check(f"with psum the P() output is truly replicated ({J.__name__})",
                  np.asarray(fixed), blocks.sum(0) * 2.0, rtol=1e-5, atol=1e-5)
    res.sections.append(
        "### check_vma: claiming replication you do not have\n\n"
        "`out_specs=P()` promises that every device holds the same value, so only one copy "
        "is returned. With `check_vma=True` (the default) the types inside the body track "
        "which values vary along which axes, and `a * 2` of a varying block cannot be returned "
        "as replicated. JAX:\n\n" + code("{}: {}".format(*errors[jax]))
        + "\n\nminijax:\n\n" + code("{}: {}".format(*errors[minijax]))
        + "\n\nWith `check_vma=False` the promise is trusted: the call returns device 0's "
        "block (times 2) and silently drops the other seven, in both modules. Reducing with "
        "`psum` first makes the output genuinely replicated and the check passes."
    )


def _grad_through_shard_map(c: _Setup) -> None:
    """The part of the topic on grad through shard_map."""
    res, meshes, rng, cols, x = c.res, c.meshes, c.rng, c.cols, c.x
    w = (rng.standard_normal((cols, 3)) / np.sqrt(cols)).astype(np.float32)

    def loss_sm(J):
        jnp = J.numpy
        body = lambda wb, xb: J.lax.psum(jnp.sum(jnp.tanh(xb @ wb) ** 2), AX)
        return J.shard_map(body, mesh=meshes[J], in_specs=(J.P(), J.P(AX)), out_specs=J.P())

    g_ref = jax.grad(lambda w, x: jax.numpy.sum(jax.numpy.tanh(x @ w) ** 2))(w, x)
    for _, J in MODULES:
        res.check(f"grad through shard_map equals the one-device gradient ({J.__name__})",
                  np.asarray(J.jit(J.grad(loss_sm(J)))(w, x)), g_ref, rtol=1e-4, atol=1e-5)
    jaxprs = {J: str(J.make_jaxpr(J.grad(loss_sm(J)))(w, x)) for _, J in MODULES}
    pairs = {J: (t.count("pvary["), t.count("psum_invariant[")) for J, t in jaxprs.items()}
    res.check_true("grad jaxpr pairs pvary (forward) with a psum (backward), in both",
                   all(nv >= 1 and ns >= 2 for nv, ns in pairs.values()))
    res.sections.append(
        "### Differentiating through shard_map\n\n"
        "A loss computed per device and `psum`-reduced, with the weights passed in replicated "
        "(`P()`). `grad` of it matches the gradient of the plain one-device loss in both "
        f"modules. In the gradient's jaxpr there are {pairs[jax][0]} `pvary` and "
        f"{pairs[jax][1]} `psum_invariant` equations in JAX's, {pairs[minijax][0]} and "
        f"{pairs[minijax][1]} in minijax's: when a replicated input is used with varying "
        "data, `pvary` (\"treat as varying\") is inserted, and the transpose of `pvary` is a "
        "`psum`, so the weight gradient is summed over the devices automatically, exactly the "
        "all-reduce data parallelism needs. minijax's gradient jaxpr:\n\n"
        + code(jaxprs[minijax])
    )


def _three_parallel_mlps(c: _Setup) -> None:
    """The part of the topic on three parallel MLPs."""
    res, quick, meshes, rng = c.res, c.quick, c.meshes, c.rng
    bsz, d_in, hid, d_out = (16, 16, 32, 8) if quick else (256, 512, 1024, 256)
    xs = rng.standard_normal((bsz, d_in)).astype(np.float32)
    ys = rng.standard_normal((bsz, d_out)).astype(np.float32)
    params = ((rng.standard_normal((d_in, hid)) / np.sqrt(d_in)).astype(np.float32),
              (rng.standard_normal((hid, d_out)) / np.sqrt(hid)).astype(np.float32))
    steps = 3
    plain = sgd_step(jax, lambda p, a, t: mlp_loss(jax, p, a, t))
    ref_losses, p_ref = [], params
    for _ in range(steps):
        loss, p_ref = plain(p_ref, xs, ys)
        ref_losses.append(float(loss))
    mlp_rows, ratios, coll = [], {}, {}  # coll: strategy -> (JAX counts, minijax counts)
    for name, (build, specs) in STRATEGIES.items():
        losses, timing, counts = {}, {}, {}
        for _, J in MODULES:
            step = sgd_step(J, build(J, meshes[J], bsz))
            put = [J.device_put(v, J.sharding.NamedSharding(meshes[J], J.P(*s)))
                   for v, s in zip((*params, xs, ys), specs)]
            p, xa, ya = tuple(put[:2]), put[2], put[3]
            ls = []
            for _ in range(steps):
                loss, p = step(p, xa, ya)
                ls.append(float(loss))
            losses[J] = ls
            counts[J] = count_collectives(step.lower(p, xa, ya).compile().as_text())
            timing[J] = (step, p, xa, ya)
        for _, J in MODULES:
            res.check(f"{name}: {J.__name__} losses equal the unsharded run", losses[J],
                      ref_losses, rtol=1e-4, atol=1e-6)
        res.check_true(f"{name}: minijax compiles JAX's collectives",
                       counts[jax] == counts[minijax])
        t_j, t_m = interleaved_ms(
            {"jax": lambda a=timing[jax]: jax.block_until_ready(a[0](*a[1:])),
             "minijax": lambda a=timing[minijax]: minijax.block_until_ready(a[0](*a[1:]))},
            repeat=15 if quick else 90, warmup=1).values()
        res.timings_ms[f"{name} SGD step, JAX (8 devices)"] = t_j
        res.timings_ms[f"{name} SGD step, minijax (8 devices)"] = t_m
        ratios[name] = t_m / t_j
        coll[name] = (counts[jax], counts[minijax])
        mlp_rows.append([name, " ".join(f"`{s}`" for s in specs),
                         " ".join(f"{v:.5f}" for v in losses[minijax]),
                         fmt_counts(counts[jax]), fmt_counts(counts[minijax]),
                         f"{t_j:.3f}", f"{t_m:.3f}", f"{t_m / t_j:.2f}"])
    res.extra["step_time_ratios_minijax_over_jax"] = ratios
    if not quick:
        res.sections.append("### Collectives per strategy\n\n" + plot(
            "shard_map-collectives", lambda fig: _draw_collectives(fig, coll)))
    res.sections.append(
        "### Three parallel training steps of one MLP\n\n"
        f"`relu(x @ w1) @ w2` with x f32[{bsz},{d_in}], w1 f32[{d_in},{hid}], w2 "
        f"f32[{hid},{d_out}]; one jitted step is `value_and_grad` of the MSE through a "
        "`shard_map` plus an SGD update. Unsharded losses (JAX, one device): "
        + ", ".join(f"{v:.5f}" for v in ref_losses) + ".\n\n"
        + table(["strategy", "specs of w1 w2 x y", "minijax losses", "JAX collectives",
                 "minijax collectives", "JAX ms", "minijax ms", "minijax / JAX"], mlp_rows)
        + "\n\nData parallel: the only communication is the psum of the loss and, from the "
        "transpose of the `pvary`s on the replicated weights, the all-reduce of each weight "
        "gradient. FSDP: each weight is all-gathered just before its layer; the transpose of "
        "`all_gather` is `psum_scatter`, so the gradients come back as reduce-scatters, split "
        "like the weights. Tensor parallel: the hidden layer is split, and one psum per "
        "forward pass (and one for the gradient of x, here unused and removed) joins the "
        "partial outputs. XLA may merge or simplify collectives, which is why the counts are "
        "read from the compiled programs. Times are medians over alternating rounds with "
        "inputs already on device; eight CPU devices share this machine's cores, so they are "
        "noisy."
    )


def _explicit_vs_auto(c: _Setup) -> None:
    """The part of the topic on Explicit vs Auto."""
    (res, n, meshes, mesh, mesh_e, smap, x, blocks) = (
        c.res, c.n, c.meshes, c.mesh, c.mesh_e, c.smap, c.x, c.blocks)
    rows = []
    xe = jax.device_put(x, NamedSharding(mesh_e, P(AX)))
    inferred = jax.shard_map(lambda t: jax.lax.psum(t, AX), mesh=mesh_e, out_specs=P())(xe)
    res.check("Explicit mesh: in_specs inferred from the argument types", inferred,
              blocks.sum(0), rtol=1e-5, atol=1e-5)
    rows.append(["Explicit", "committed P('i') array, in_specs omitted", "ok (inferred P('i'))"])
    raised = {}
    for _, J in MODULES:
        mesh_j = J.make_mesh((n,), (AX,))  # Explicit axes: make_mesh's default
        raised[J] = catch(lambda J=J, m=mesh_j: J.shard_map(
            lambda t: t, mesh=m, in_specs=J.P(AX), out_specs=J.P(AX))(J.numpy.asarray(x)))
        res.check_true(f"Explicit mesh, {J.__name__}: in_specs that disagree with the input's "
                       "type raise ValueError", raised[J][0] == "ValueError")
    res.check_true("Explicit mesh: minijax's error is JAX's (type and message)",
                   raised[minijax] == raised[jax])
    kind, explicit_msg = raised[jax]
    rows.append(["Explicit", "uncommitted array, in_specs=P('i')", f"`{kind}` (both)"])
    other = jax.device_put(x, NamedSharding(mesh, P(None, AX)))
    got = smap(jax, lambda t: jax.lax.psum(t, AX), P(AX), P())(other)
    res.check("Auto mesh: input in another layout is resharded to in_specs", got,
              blocks.sum(0), rtol=1e-5, atol=1e-5)
    rows.append(["Auto", "committed P(None,'i') array, in_specs=P('i')", "ok (resharded)"])
    mmesh = meshes[minijax]
    m_other = minijax.device_put(x, minijax.sharding.NamedSharding(mmesh, minijax.P(None, AX)))
    m_got = smap(minijax, lambda t: minijax.lax.psum(t, AX), minijax.P(AX), minijax.P())(m_other)
    res.check("Auto mesh, minijax: input in another layout is resharded to in_specs",
              np.asarray(m_got), np.asarray(got), rtol=1e-5, atol=1e-5)
    m_in = minijax.device_put(x, minijax.sharding.NamedSharding(mmesh, minijax.P(AX)))
    m_inf = minijax.shard_map(lambda t: minijax.lax.psum(t, AX), mesh=mmesh,
                              out_specs=minijax.P())(m_in)
    res.check("minijax: in_specs left out are read from the arguments' shardings",
              np.asarray(m_inf), np.asarray(inferred), rtol=1e-5, atol=1e-5)
    res.sections.append(
        "### Explicit versus Auto meshes at the shard_map boundary\n\n"
        + table(["mesh", "input", "result"], rows)
        + "\n\nWith Explicit axes the argument's type already says how it is split, so "
        "`in_specs` may be left out, and a spec that disagrees is a type error rather than a "
        "hidden reshard (the message suggests `jax.reshard`):\n\n" + code(explicit_msg)
        + "\n\nWith Auto axes `shard_map` moves the input to `in_specs` itself, possibly "
        "adding communication you did not write. Every row runs in minijax too (checked): "
        "on an Explicit mesh minijax's types carry the layout as JAX's do, and the type "
        "error is the same, word for word."
    )


PARTS = (_the_per_device_view, _collectives, _collective_matmuls, _ring_all_reduce,
         _check_vma, _grad_through_shard_map, _three_parallel_mlps, _explicit_vs_auto)


def run(quick: bool = False) -> TopicResult:
    """The parts in order, each recording its checks, timings and section into one result."""
    setup = _Setup.make(quick)
    for part in PARTS:
        part(setup)
    return setup.res
