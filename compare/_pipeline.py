"""Pipeline parallelism for the gpt_sharded topic (chapter 25): the GPT of `compare/gpt.py`
cut into 4 stages of one block each, GPipe and 1F1B schedules, on a (2, 4) mesh of the 8 CPU
devices ("data", "stage"), written once for minijax and JAX as a `shard_map` whose stages
pass activations forward and cotangents back with `ppermute`.

A schedule is a table int32[ticks, p, 2]: at each tick, each stage's action (0 idle, 1 the
forward of a microbatch, 2 its backward) and the microbatch. One tick is one forward or one
backward of one block on one microbatch (the textbook's unit: a backward costs about two
forwards, and both schedules are usually drawn with equal slots). The tables come from a
small simulation of the dependencies (a stage's forward of microbatch i needs the previous
stage's, its backward the next stage's backward) under each schedule's rule:

* **GPipe** (Huang et al. 2019): every forward, then every backward;
* **1F1B** (PipeDream-Flush, Narayanan et al. 2021): stage s runs at most p - s microbatches
  ahead of their backward, then alternates one forward and one backward.

Both take 2(m + p - 1) ticks for m microbatches on p stages, so each stage idles 2(p - 1) of
them: the bubble fraction (p - 1)/(m + p - 1). 1F1B's gain is memory: a stage keeps the inputs
of at most p - s microbatches for their backward instead of all m.

The program runs the table under `lax.scan`: each tick a stage reads its action, `lax.switch`
runs nothing, the block's forward or its backward (`vjp` of the block, recomputed from the
stored input, as activation checkpointing does), and two `ppermute`s move the results one
stage on (activations) and one stage back (cotangents), with their microbatch index. The first
stage embeds its microbatch's tokens, the last computes the loss; both read the shared
embedding and head weights, whose gradients are summed over the stages with `psum`. (One
program serves every stage: each computes the embedding and the loss, and a `where` on its
stage index keeps what is its own; at this size that costs little, a real pipeline would
branch instead.) The weights are passed whole and stacked per step, each stage reading its
block's slice; a real pipeline keeps each stage's weights and optimizer state on its devices."""

from __future__ import annotations

import numpy as np

from compare import gpt

DATA, STAGE = "data", "stage"
IDLE, FWD, BWD = 0, 1, 2


def schedule(kind: str, p: int, m: int) -> np.ndarray:
    """The table int32[ticks, p, 2] of `kind` ("gpipe" or "1f1b") for p stages and m
    microbatches (see the module docstring). Raises ValueError for another kind."""
    if kind not in ("gpipe", "1f1b"):
        raise ValueError(f"schedule: kind must be 'gpipe' or '1f1b', got {kind!r}")
    f_done = np.full((p, m), -1)  # the tick at whose end each forward / backward finished
    b_done = np.full((p, m), -1)
    nf, nb, rows, t = [0] * p, [0] * p, [], 0
    while min(nb) < m:
        row = []
        for s in range(p):
            i, j = nf[s], nb[s]
            f_ready = i < m and (s == 0 or 0 <= f_done[s - 1, i] < t)
            b_ready = j < i and 0 <= f_done[s, j] < t and (s == p - 1 or 0 <= b_done[s + 1, j] < t)
            if kind == "gpipe":
                act = FWD if f_ready else BWD if i == m and b_ready else IDLE
            else:
                act = FWD if f_ready and i - j < p - s else BWD if b_ready else IDLE
            row.append((act, i if act == FWD else j if act == BWD else 0))
        for s, (act, i) in enumerate(row):
            if act == FWD:
                f_done[s, i], nf[s] = t, nf[s] + 1
            elif act == BWD:
                b_done[s, i], nb[s] = t, nb[s] + 1
        rows.append(row)
        t += 1
    return np.array(rows, np.int32)


def peak_in_flight(table: np.ndarray) -> list[int]:
    """Per stage, the most microbatches whose forward ran and whose backward has not: the
    stored inputs a stage must keep."""
    act = table[..., 0]
    held = np.cumsum(act == FWD, axis=0) - np.cumsum(act == BWD, axis=0)
    return [int(v) for v in held.max(axis=0)]


def stack_blocks(J, params: dict) -> tuple[dict, dict]:
    """(the blocks' weights stacked on a leading stage dimension, the other weights)."""
    blocks = params["blocks"]
    stack = {k: J.numpy.stack([b[k] for b in blocks]) for k in blocks[0]}
    return stack, {k: v for k, v in params.items() if k != "blocks"}


def pipeline_loss_and_grads(J, cfg: gpt.Config, mesh, table: np.ndarray, m: int):
    """f(stack, top, x, y) -> (loss, stack grads, top grads, busy ticks int32[8]): the mean
    cross-entropy over the batch and its gradients, by the schedule `table` over the mesh's
    "stage" axis (one block per stage: cfg.n_layer stages) with the batch int32[B, T] split
    over "data" and each device's share cut into m microbatches."""
    jnp, lax = J.numpy, J.lax
    p, n_data = mesh.shape[STAGE], mesh.shape[DATA]
    if cfg.n_layer != p or cfg.batch % (n_data * m):
        raise ValueError(f"pipeline: {cfg.n_layer} layers on {p} stages, batch {cfg.batch} "
                         f"over {n_data} x {m} microbatches: expected one layer per stage "
                         "and a batch divisible by both")
    prog = gpt.program(J, cfg)
    T, mb = cfg.block, cfg.batch // (n_data * m)
    mask = jnp.tril(jnp.ones((T, T), bool))
    scale = np.float32(1 / (m * n_data))

    def stage_fn(blk, top, h_in, idx, tgt, first):
        """This stage's block on one microbatch: (activation out, loss if it is the last)."""
        h = jnp.where(first, prog["embed"](top, idx), h_in)
        out, _, _ = prog["block"](blk, h, mask)
        return out, prog["cross_entropy"](prog["head"](top, out), tgt)

    def body(stack, top, x, y):
        s = lax.axis_index(STAGE)
        first, last = s == 0, s == p - 1
        blk = J.tree_util.tree_map(lambda a: a[0], stack)
        xs, ys = x.reshape(m, mb, T), y.reshape(m, mb, T)
        zeros = lambda t: J.tree_util.tree_map(jnp.zeros_like, t)
        act0 = jnp.zeros((mb, T, cfg.d_model), np.float32)

        def idle(i, h_in, dy):
            return act0, act0, zeros(blk), zeros(top), np.float32(0)

        def forward(i, h_in, dy):
            out, loss = stage_fn(blk, top, h_in, xs[i], ys[i], first)
            return out, act0, zeros(blk), zeros(top), jnp.where(last, loss, 0.0)

        def backward(i, h_in, dy):
            _, vjp = J.vjp(lambda b, t, h: stage_fn(b, t, h, xs[i], ys[i], first),
                           blk, top, h_in)
            d_blk, d_top, d_h = vjp((jnp.where(last, 0.0, dy), jnp.where(last, scale, 0.0)))
            return act0, d_h, d_blk, d_top, np.float32(0)

        def tick(carry, row):
            xbuf, gbuf, g_blk, g_top, loss, busy = carry
            action, i = row[s, 0], row[s, 1]
            out, d_h, d_blk, d_top, l_add = lax.switch(action, (idle, forward, backward),
                                                       i, xbuf[i], gbuf[i])
            up = [(k, k + 1) for k in range(p - 1)]
            a_in, ia, va = lax.ppermute((out, i, (action == FWD).astype(np.int32)), STAGE, up)
            g_in, ig, vg = lax.ppermute((d_h, i, (action == BWD).astype(np.int32)), STAGE,
                                        [(b, a) for a, b in up])
            xbuf = jnp.where(va > 0, lax.dynamic_update_index_in_dim(xbuf, a_in, ia, 0), xbuf)
            gbuf = jnp.where(vg > 0, lax.dynamic_update_index_in_dim(gbuf, g_in, ig, 0), gbuf)
            add = J.tree_util.tree_map(jnp.add, (g_blk, g_top), (d_blk, d_top))
            return (xbuf, gbuf, *add, loss + l_add,
                    busy + (action != IDLE).astype(np.int32)), None

        buf = jnp.zeros((m, mb, T, cfg.d_model), np.float32)
        init = (buf, buf, zeros(blk), zeros(top), np.float32(0), np.int32(0))
        (_, _, g_blk, g_top, loss, busy), _ = lax.scan(tick, init, jnp.asarray(table))
        loss = lax.psum(loss, (DATA, STAGE)) * scale
        g_blk = J.tree_util.tree_map(lambda g: lax.psum(g, DATA)[None], g_blk)
        return loss, g_blk, lax.psum(g_top, (DATA, STAGE)), busy[None]

    P = J.P
    return J.shard_map(body, mesh=mesh, in_specs=(P(STAGE), P(), P(DATA), P(DATA)),
                       out_specs=(P(), P(STAGE), P(), P((DATA, STAGE))), check_vma=False)


def pipeline_step(J, cfg: gpt.Config, mesh, table: np.ndarray, m: int):
    """jit of (params, opt, x, y) -> (params, opt, loss, busy): the pipeline's gradients in
    gpt.init_params' layout, then gpt.program's AdamW (the same update as one device's)."""
    grads_of = pipeline_loss_and_grads(J, cfg, mesh, table, m)
    adamw = gpt.program(J, cfg)["adamw"]

    def step(params, opt, x, y):
        stack, top = stack_blocks(J, params)
        loss, g_stack, g_top, busy = grads_of(stack, top, x, y)
        grads = dict(g_top, blocks=[{k: g[i] for k, g in g_stack.items()}
                                    for i in range(cfg.n_layer)])
        params, opt, _ = adamw(params, grads, opt)
        return params, opt, loss, busy
    return J.jit(step)


def train_pipeline(J, kind: str, cfg: gpt.Config, params0: dict, xs, ys, m: int) -> dict:
    """`len(xs)` AdamW steps of the pipelined GPT in module J under schedule `kind`: the
    losses, the table, each device's busy ticks and the measured bubble fraction (the share
    of a stage's ticks it idled, averaged over the stages)."""
    mesh = J.make_mesh((2, cfg.n_layer), (DATA, STAGE),
                       axis_types=(J.sharding.AxisType.Auto,) * 2)
    table = schedule(kind, cfg.n_layer, m)
    params = J.device_put(params0)
    opt = gpt.program(J, cfg)["init_opt"](params)
    step = pipeline_step(J, cfg, mesh, table, m).lower(params, opt, xs[0], ys[0]).compile()
    losses = []
    for x, y in zip(xs, ys):
        params, opt, loss, busy = step(params, opt, x, y)
        losses.append(float(loss))
    busy = np.asarray(busy)
    return {"losses": losses, "table": table, "busy": busy.tolist(),
            "bubble": float(1 - busy.mean() / len(table)), "hlo": step.as_text()}


def sizes(vocab: int) -> gpt.Config:
    """The pipelined GPT: 4 blocks (one per stage) at the topic's quick width."""
    return gpt.Config(vocab=vocab, n_layer=4, d_model=32, n_head=4, block=16, batch=16,
                      steps=3, warmup=1)


def run(res, data: gpt.CharData, quick: bool) -> tuple[dict, str]:
    """GPipe and 1F1B in both modules, checked against one device; (record, report section).
    m = 4 microbatches per data shard (and 8 in the full run)."""
    import jax

    from compare._modules import MODULES
    cfg = sizes(len(data.chars))
    p = cfg.n_layer
    xs, ys = gpt.batches(data.train, cfg.steps, cfg.batch, cfg.block, 1)
    params0 = gpt.init_params(cfg)
    prog = gpt.program(jax, cfg)
    params, ref = jax.device_put(params0), []
    opt = prog["init_opt"](params)
    for x, y in zip(xs, ys):
        params, opt, value = prog["step"](params, opt, x, y)
        ref.append(float(value))
    record, rows = {"single_device": ref}, []
    for m in (4,) if quick else (4, 8):
        for kind in ("gpipe", "1f1b"):
            want = (p - 1) / (m + p - 1)
            table = schedule(kind, p, m)
            peak = peak_in_flight(table)
            expect = [m] * p if kind == "gpipe" else [min(m, p - s) for s in range(p)]
            res.check_true(f"pipeline {kind}, m={m}: {len(table)} ticks = 2(m+p-1); a stage "
                           f"keeps at most {peak} microbatches' inputs", len(table) ==
                           2 * (m + p - 1) and peak == expect)
            permutes = {}
            for name, J in MODULES:
                r = train_pipeline(J, kind, cfg, params0, xs, ys, m)
                permutes[name] = r["hlo"].count(" collective-permute(") + r["hlo"].count(
                    " collective-permute-start(")
                res.check(f"pipeline {kind}, m={m} ({name}): losses equal one device's "
                          "(1e-4 relative)", r["losses"], ref, rtol=1e-4, atol=0)
                res.check_true(f"pipeline {kind}, m={m} ({name}): measured bubble "
                               f"{r['bubble']:.4f} (idle ticks of each device) = "
                               f"(p-1)/(m+p-1) = {want:.4f}; the stages send with "
                               f"collective-permute ({permutes[name]} in the HLO)",
                               abs(r["bubble"] - want) < 1e-6 and permutes[name] >= 2)
                record[f"{kind}_m{m}_{name}"] = {"losses": r["losses"], "busy": r["busy"],
                                                 "bubble": r["bubble"], "formula": want,
                                                 "peak_in_flight": peak}
            res.check_true(f"pipeline {kind}, m={m}: minijax's step compiles to JAX's number "
                           f"of collective-permutes ({permutes['jax']})",
                           permutes["minijax"] == permutes["jax"])
            rows.append(f"| {kind} | {m} | {len(table)} | {r['bubble']:.3f} | {want:.3f} | "
                        f"{peak} |")
    section = (
        "### Pipeline parallelism\n\n"
        f"The GPT at {p} layers (one per stage), mesh (2, {p}) (\"data\", \"stage\"), batch "
        f"{cfg.batch}: each data shard cut into m microbatches. Losses of {cfg.steps} AdamW "
        "steps equal one device's in both modules (checked above). The bubble is measured "
        "from the devices' own count of ticks they worked.\n\n"
        "| schedule | m | ticks | bubble measured | (p-1)/(m+p-1) | inputs kept per stage |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows))
    return record, section
