"""shard_map: writing the per-device program yourself.

Real JAX only, on a 1-D mesh of the eight CPU devices (axis `i`). Inside `jax.shard_map` a
function sees its own block of each input and talks to the other devices only through explicit
collectives. The program shows:

* the per-device view (local shapes, the `{V:i}` "varies along i" mark in the types) and
  `axis_index`;
* the collectives `psum`, `all_gather`, `psum_scatter`, `ppermute`, `all_to_all`, each checked
  against the same result computed in NumPy on the whole array;
* two collective matmuls that overlap a ring of `ppermute`s with local matmuls (the all-gather
  variant and the reduce-scatter variant), and an all-reduce built from `ppermute` alone;
* what `check_vma` does when an output declared replicated is not;
* `jax.grad` through a `shard_map` (and the `pvary` <-> `psum` pairing it produces);
* the difference between Explicit and Auto meshes at the `shard_map` boundary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from compare._jax201 import catch, count_collectives, fmt_counts, table, time_into
from compare._report import TopicResult, code

AX = "i"


def _slice_rows(a, block, size):
    return jax.lax.dynamic_slice_in_dim(a, block * size, size, axis=0)


def allgather_matmul(x_blk, w_blk):
    """Per device: x_blk = rows block j of x, w_blk = columns block j of w.

    Returns the column block j of x @ w. Instead of gathering all of x first, the row blocks
    travel round a ring: at step s device j holds rows block (j + s) mod n, multiplies it by its
    columns, and passes it on. The send of the next block can overlap with the current matmul.
    """
    n = jax.lax.axis_size(AX)
    j = jax.lax.axis_index(AX)
    mb = x_blk.shape[0]
    left = [(k, (k - 1) % n) for k in range(n)]  # device k sends to k-1, so j receives j+1's
    out = jnp.zeros((mb * n, w_blk.shape[1]), x_blk.dtype)
    chunk = x_blk
    for s in range(n):
        part = chunk @ w_blk
        out = jax.lax.dynamic_update_slice_in_dim(out, part, ((j + s) % n) * mb, axis=0)
        if s + 1 < n:
            chunk = jax.lax.ppermute(chunk, AX, left)
    return out


def reducescatter_matmul(x_blk, w_blk):
    """Per device: x_blk = columns block j of x, w_blk = rows block j of w.

    Every device can form a partial product x_blk @ w_blk of the whole output; the answer is the
    sum over devices, and device j should end up with row block j of it. An accumulator moves
    round the ring; each device adds its partial for the row block that accumulator is collecting.
    """
    n = jax.lax.axis_size(AX)
    j = jax.lax.axis_index(AX)
    mb = x_blk.shape[0] // n
    right = [(k, (k + 1) % n) for k in range(n)]
    acc = _slice_rows(x_blk, (j - 1) % n, mb) @ w_blk
    for s in range(1, n):
        acc = jax.lax.ppermute(acc, AX, right) + _slice_rows(x_blk, (j - s - 1) % n, mb) @ w_blk
    return acc  # row block j of the full sum


def ring_allreduce(v):
    """Sum `v` over the ring with ppermute only: reduce-scatter round, then all-gather round."""
    n = jax.lax.axis_size(AX)
    j = jax.lax.axis_index(AX)
    chunks = v.reshape(n, -1)
    right = [(k, (k + 1) % n) for k in range(n)]
    acc = chunks[(j - 1) % n]
    for s in range(1, n):
        acc = jax.lax.ppermute(acc, AX, right) + chunks[(j - s - 1) % n]
    # acc is now the fully reduced chunk j; pass the finished chunks round once more.
    out = jnp.zeros_like(chunks).at[j].set(acc)
    cur = acc
    for s in range(1, n):
        cur = jax.lax.ppermute(cur, AX, right)
        out = out.at[(j - s) % n].set(cur)
    return out.reshape(v.shape)


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("shard_map: per-device programs and collectives")
    res.chapter = "chapters/13-shard-map.md"
    res.devices = jax.device_count()
    n = jax.device_count()
    mesh = jax.make_mesh((n,), (AX,), axis_types=(AxisType.Auto,))
    mesh_e = jax.make_mesh((n,), (AX,))
    smap = lambda f, i, o, **kw: jax.jit(jax.shard_map(f, mesh=mesh, in_specs=i, out_specs=o,
                                                       **kw))
    rng = np.random.default_rng(0)
    cols = 8 if quick else 64
    x = rng.standard_normal((n * 2, cols)).astype(np.float32)
    blocks = x.reshape(n, 2, cols)

    # ---------------------------------------------------------------- the per-device view
    seen = {}

    def peek(a, r):
        seen["local block"] = str(jax.typeof(a))
        seen["replicated input"] = str(jax.typeof(r))
        seen["axis_index"] = str(jax.typeof(jax.lax.axis_index(AX)))
        seen["psum(local)"] = str(jax.typeof(jax.lax.psum(a, AX)))
        return a + r + jax.lax.axis_index(AX).astype(a.dtype)

    out = smap(peek, (P(AX), P()), P(AX))(x, x[:2])
    want = blocks + x[:2][None] + np.arange(n, dtype=np.float32)[:, None, None]
    res.check("per-device block + replicated + axis_index", out, want.reshape(x.shape))
    res.sections.append(
        "### What one device sees\n\n"
        f"`shard_map(f, mesh, in_specs=(P('i'), P()), out_specs=P('i'))` on x of shape "
        f"{x.shape}: the body runs once per device (traced once), with the types it sees:\n\n"
        + table(["value", "type inside the body"], [[k, f"`{v}`"] for k, v in seen.items()])
        + "\n\nThe block is 1/8 of the rows, and `{V:i}` marks a value that *varies* along mesh "
        "axis `i` (each device has different data). The replicated input and `psum` results "
        "carry no mark: they are the same on every device. This bookkeeping is what "
        "`check_vma` uses further down."
    )

    # ---------------------------------------------------------------- collectives
    sq = rng.standard_normal((n, n)).astype(np.float32)
    cases = []
    got = smap(lambda a: jax.lax.psum(a, AX), P(AX), P())(x)
    res.check("psum", got, blocks.sum(0), rtol=1e-5, atol=1e-5)
    cases.append(["psum(a)", "P('i') -> P()", "sum of the 8 blocks, on every device"])
    got = smap(lambda a: jax.lax.pmax(a, AX), P(AX), P())(x)
    res.check("pmax", got, blocks.max(0))
    cases.append(["pmax(a)", "P('i') -> P()", "elementwise max over devices"])
    got = smap(lambda a: jax.lax.all_gather(a, AX, tiled=True, to="invarying"), P(AX), P())(x)
    res.check("all_gather(tiled)", got, x)
    cases.append(["all_gather(a, tiled=True, to='invarying')", "P('i') -> P()",
                  "every device gets the whole array"])
    got = smap(lambda a: jax.lax.all_gather(a, AX), P(AX), P(AX))(x)
    res.check("all_gather(stacked), kept per device", got,
              np.broadcast_to(blocks, (n, n, 2, cols)).reshape(n * n, 2, cols))
    cases.append(["all_gather(a)", "P('i') -> P('i')",
                  "new leading axis of size 8; the result still counts as varying"])
    got = smap(lambda a: jax.lax.psum_scatter(a, AX, scatter_dimension=0, tiled=True),
               P(AX), P(AX))(np.tile(x, (n, 1)))
    res.check("psum_scatter", got, x * n, rtol=1e-5, atol=1e-5)
    cases.append(["psum_scatter(a, tiled=True)", "P('i') -> P('i')",
                  "sum over devices, device j keeps row block j"])
    shift = [(k, (k + 1) % n) for k in range(n)]
    got = smap(lambda a: jax.lax.ppermute(a, AX, shift), P(AX), P(AX))(x)
    res.check("ppermute (shift by one)", got, np.roll(blocks, 1, axis=0).reshape(x.shape))
    cases.append(["ppermute(a, [(k, k+1)])", "P('i') -> P('i')", "block k moves to device k+1"])
    got = smap(lambda a: jax.lax.all_to_all(a, AX, split_axis=1, concat_axis=0, tiled=True),
               P(AX), P(AX))(sq)
    # Device j gets column block j of every row block, stacked: the transpose of the block grid.
    res.check("all_to_all", got, sq.reshape(n, 1, n, 1).transpose(2, 0, 1, 3).reshape(n * n, 1))
    cases.append(["all_to_all(a, split 1, concat 0)", "P('i') -> P('i')",
                  "device j collects piece j from every device"])
    got = smap(lambda a: jnp.full_like(a, jax.lax.axis_index(AX)), P(AX), P(AX))(x)
    res.check("axis_index", got, np.repeat(np.arange(n, dtype=np.float32), 2)[:, None]
              * np.ones_like(x))
    cases.append(["axis_index('i')", "-", "this device's position along i"])
    res.sections.append(
        "### The collectives, each against a NumPy reference\n\n"
        + table(["call inside the body", "in -> out specs", "what it computes"], cases)
        + "\n\n`all_gather` defaults to a result that is still typed as varying (the "
        "transpose rule then is a reduce-scatter); `to='invarying'` gives a result the type "
        "system knows is identical everywhere, which is what an `out_specs=P()` needs."
    )

    # ---------------------------------------------------------------- collective matmuls
    m = k = nn = 64 if quick else 512
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, nn)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = dict(rtol=1e-4, atol=1e-3)
    ag_ring = smap(allgather_matmul, (P(AX, None), P(None, AX)), P(None, AX))
    ag_naive = smap(lambda xb, wb: jax.lax.all_gather(xb, AX, tiled=True) @ wb,
                    (P(AX, None), P(None, AX)), P(None, AX))
    rs_ring = smap(reducescatter_matmul, (P(None, AX), P(AX, None)), P(AX, None))
    rs_naive = smap(lambda xb, wb: jax.lax.psum_scatter(xb @ wb, AX, tiled=True),
                    (P(None, AX), P(AX, None)), P(AX, None))
    plain = jax.jit(jnp.matmul)
    mm_rows = []
    for name, fn in (("all-gather ring (ppermute)", ag_ring), ("all_gather then matmul", ag_naive),
                     ("reduce-scatter ring (ppermute)", rs_ring),
                     ("matmul then psum_scatter", rs_naive), ("plain jit matmul, 1 device", plain)):
        res.check(f"collective matmul: {name}", fn(a, b), ref, **tol)
        counts = count_collectives(fn.lower(a, b).compile().as_text())
        ms = time_into(res, f"matmul {m}x{k}x{nn}: {name}", lambda fn=fn: fn(a, b), quick)
        mm_rows.append([name, fmt_counts(counts), f"{ms:.3g}"])
    res.sections.append(
        "### Collective matmuls\n\n"
        f"`x @ w` for {m}x{k} by {k}x{nn}. The all-gather variant starts with x split by rows "
        "and w by columns and must produce column blocks of the result; the reduce-scatter "
        "variant starts with both split along the contracted dimension and must produce row "
        "blocks. The ring versions send one block at a time with `ppermute`, so on hardware "
        "with asynchronous links the transfer of the next block hides behind the current "
        "block's matmul. Compiled collectives and times:\n\n"
        + table(["version", "collectives in compiled HLO", "median ms"], mm_rows)
        + "\n\nOn eight fake CPU devices that share two cores there is nothing to overlap with, "
        "so the ring versions are not faster here; the point is that they compute the same "
        "thing using only neighbour-to-neighbour sends (one collective-permute per ring step)."
    )

    # ---------------------------------------------------------------- ring all-reduce
    vec = rng.standard_normal((n, n * (4 if quick else 4096))).astype(np.float32)
    ring = smap(lambda v: ring_allreduce(v[0])[None], P(AX), P(AX))
    builtin = smap(lambda v: jax.lax.psum(v, AX), P(AX), P())
    total = vec.astype(np.float64).sum(0)
    res.check("ring all-reduce: every device holds the sum", ring(vec),
              np.broadcast_to(total, vec.shape), rtol=1e-5, atol=1e-4)
    res.check("psum agrees", builtin(vec), total[None], rtol=1e-5, atol=1e-4)
    rc = count_collectives(ring.lower(vec).compile().as_text())
    time_into(res, "all-reduce: ring of ppermutes", lambda: ring(vec), quick)
    time_into(res, "all-reduce: psum", lambda: builtin(vec), quick)
    res.sections.append(
        "### An all-reduce made of ppermutes\n\n"
        "Split each device's vector into 8 chunks. Round one (7 steps): a running sum travels "
        "right and each device adds its own copy of the chunk being collected, so device j "
        "ends with the finished chunk j (a reduce-scatter). Round two (7 more steps): the "
        "finished chunks travel round so everyone gets all of them (an all-gather). Each "
        "device sends 2 x 7/8 of its data in total, independent of the device count, which is "
        f"why rings are the textbook bandwidth-optimal all-reduce. Compiled: {fmt_counts(rc)}. "
        "The output spec is `P('i')` (one full copy per device, stacked) because the result "
        "of a `ppermute` is typed as varying; the check confirms every copy equals the sum."
    )

    # ---------------------------------------------------------------- check_vma
    lying = lambda a: a * 2.0
    kind, msg = catch(lambda: smap(lying, P(AX), P())(x))
    res.check_true("check_vma: non-replicated output declared P() raises", kind is not None)
    unchecked = smap(lying, P(AX), P(), check_vma=False)(x)
    res.check("check_vma=False returns device 0's block only", unchecked, blocks[0] * 2.0)
    res.check_true("... which is not what the other devices computed",
                   not np.allclose(np.asarray(unchecked), blocks[1] * 2.0))
    fixed = smap(lambda a: jax.lax.psum(a, AX) * 2.0, P(AX), P())(x)
    res.check("with psum the P() output is truly replicated", fixed, blocks.sum(0) * 2.0,
              rtol=1e-5, atol=1e-5)
    res.sections.append(
        "### check_vma: claiming replication you do not have\n\n"
        "`out_specs=P()` promises that every device holds the same value, so JAX returns just "
        "one copy. With `check_vma=True` (the default) the types inside the body track which "
        "values vary along which axes, and `a * 2` of a varying block cannot be returned as "
        "replicated:\n\n" + code(f"{kind}: {msg}")
        + "\n\nWith `check_vma=False` the promise is trusted: the call returns device 0's block "
        "(times 2) and silently drops the other seven, which the checks confirm. Reducing with "
        "`psum` first makes the output genuinely replicated and the check passes."
    )

    # ---------------------------------------------------------------- grad through shard_map
    w = (rng.standard_normal((cols, 3)) / np.sqrt(cols)).astype(np.float32)

    def loss_ref(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    def loss_sm(w, x):
        body = lambda wb, xb: jax.lax.psum(jnp.sum(jnp.tanh(xb @ wb) ** 2), AX)
        return jax.shard_map(body, mesh=mesh, in_specs=(P(), P(AX)), out_specs=P())(w, x)

    g_sm = jax.jit(jax.grad(loss_sm))(w, x)
    g_ref = jax.grad(loss_ref)(w, x)
    res.check("loss through shard_map", jax.jit(loss_sm)(w, x), loss_ref(w, x), rtol=1e-5)
    res.check("grad through shard_map", g_sm, g_ref, rtol=1e-4, atol=1e-5)
    jaxpr = str(jax.make_jaxpr(jax.grad(loss_sm))(w, x))
    n_pvary, n_psum = jaxpr.count("pvary["), jaxpr.count("psum")
    res.check_true("grad jaxpr pairs pvary (forward) with a psum (backward)",
                   n_pvary >= 1 and n_psum >= 2)
    res.sections.append(
        "### Differentiating through shard_map\n\n"
        "A loss computed per device and `psum`-reduced, with the weights passed in replicated "
        "(`P()`). `jax.grad` of it matches the gradient of the plain one-device loss. In the "
        f"gradient's jaxpr there are {n_pvary} `pvary` and {n_psum} `psum` occurrences: when a "
        "replicated input is used with varying data, JAX inserts `pvary` (\"treat as varying\"), "
        "and the transpose of `pvary` is a `psum`, so the weight gradient is summed over the "
        "devices automatically, exactly the all-reduce data parallelism needs."
    )

    # ---------------------------------------------------------------- Explicit vs Auto
    rows = []
    xe = jax.device_put(x, NamedSharding(mesh_e, P(AX)))
    inferred = jax.shard_map(lambda t: jax.lax.psum(t, AX), mesh=mesh_e, out_specs=P())(xe)
    res.check("Explicit mesh: in_specs inferred from the argument types", inferred,
              blocks.sum(0), rtol=1e-5, atol=1e-5)
    rows.append(["Explicit", "committed P('i') array, in_specs omitted", "ok (inferred P('i'))"])
    kind, msg = catch(lambda: jax.shard_map(lambda t: t, mesh=mesh_e, in_specs=P(AX),
                                            out_specs=P(AX))(jnp.asarray(x)))
    res.check_true("Explicit mesh: in_specs that disagree with the input's type raise",
                   kind is not None)
    rows.append(["Explicit", "uncommitted array, in_specs=P('i')", f"`{kind}`"])
    explicit_msg = msg
    other = jax.device_put(x, NamedSharding(mesh, P(None, AX)))
    got = smap(lambda t: jax.lax.psum(t, AX), P(AX), P())(other)
    res.check("Auto mesh: input in another layout is resharded to in_specs", got,
              blocks.sum(0), rtol=1e-5, atol=1e-5)
    rows.append(["Auto", "committed P(None,'i') array, in_specs=P('i')", "ok (resharded)"])
    res.sections.append(
        "### Explicit versus Auto meshes at the shard_map boundary\n\n"
        + table(["mesh", "input", "result"], rows)
        + "\n\nWith Explicit axes the argument's type already says how it is split, so "
        "`in_specs` may be left out, and a spec that disagrees is a type error rather than a "
        "hidden reshard (the message suggests `jax.reshard`):\n\n" + code(explicit_msg)
        + "\n\nWith Auto axes `shard_map` moves the input to `in_specs` itself, possibly "
        "adding communication you did not write."
    )
    return res
