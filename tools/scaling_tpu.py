"""Chapter 27's isoFLOP sweep at accelerator scale: byte-level GPTs from 0.05M to 25M
non-embedding parameters trained on Python source, in one process on one TPU v5e chip.

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PYTHONPATH timeout 580 python3 tools/scaling_tpu.py \
        --budget-s 530 --out $OUT/27-scaling-laws-tpu.json                      # on the chip
    .venv/bin/python tools/scaling_tpu.py --refit chapters/data/27-scaling-laws-tpu.json
    .venv/bin/python tools/scaling_tpu.py --smoke --out /tmp/smoke.json   # a CPU, a minute

`--budget-s` counts from the start of the sweep (after `import jax`): reading the text,
opening the chip, compiling and training; `--refit` (minutes, on any CPU) fills "fits" and
"coverage" in place, then `tools/update_chapter_outputs.py chapters/27-scaling-laws.md`.

Plain JAX (no flax or optax): the model, a hand-written AdamW and the schedule are below.
Every matmul takes bf16 operands with f32 accumulation; parameters, optimizer moments, layer
norms, the softmax and the loss stay in f32.

- **Data.** Bytes (vocabulary 256) of the `.py` files under the interpreter's standard library
  (`sysconfig`'s stdlib path, tests included) and its site-packages, deduplicated by content;
  one file in 50 (by a hash of its path) is held out for validation. Baselines on the same
  validation text: unigram, bigram and trigram byte models with add-k smoothing (k chosen on
  a slice of the training text), counted by a forked process while the chip trains.
- **Models.** Pre-LN GPTs (`SIZES`: depth, width; heads of 64 dims, 32 below width 128),
  learned positions, untied embedding and head, no biases, GELU MLP of width 4d; layers
  stacked and run by `lax.scan`, so a compile costs one layer whatever the depth. `params`
  counts the non-embedding parameters (Kaplan et al. 2020), `params_all` all of them
  (Hoffmann et al. 2022), `params_mult` the non-embedding ones plus the head: what a token is
  multiplied by, the N of the budget C = 6 N D.
- **Runs.** Budget i trains the five consecutive rungs of `SIZES` that `WINDOWS` names, each
  for D = C / (6 N) tokens in batches of 128 x 128 bytes, AdamW (0.9, 0.95, weight decay 0.1
  on matrices, gradient clipping at 1), peak learning rate 0.4 / width, linear warmup over
  5% of the steps and a cosine to a tenth of the peak at the run's own last step. The step
  takes the step index and the run's length as traced arguments, so one compiled step per
  size serves every budget and seed; batches are drawn on the chip from the seed and the
  step. Validation loss at ten points along each run (on 4 fixed batches, the curve) and at
  its end (on 16).
- **Order and the time budget.** Every size is compiled first (in threads) and timed for a
  few steps; then the runs go in priority order (`ORDER`, `plan`): seed 0 of the budgets
  3e13 to 1e15, seed 1 of 3e13 to 3e14, the 3e15 budget (one seed), then seed 1 of 1e15,
  each budget from its middle size outwards. The whole plan (2.9e16 FLOPs of 6ND) needs
  31% of the chip's bf16 peak in 6ND FLOPs alone over 480 s of training (attention and the
  evaluations come on top); a run whose predicted time (from the
  timed steps) would overrun `--budget-s` is skipped and listed under "skipped", and the
  JSON is written after every run.

The file: {"device_kind", "jax", "date", "corpus", "settings", "runs": [{"budget", "params",
"params_all", "params_mult", "seed", "tokens", "steps", "val_loss", "curve": [[tokens, val
loss on the curve batches], ...], "train_s", "mfu"}], "skipped", "baselines", "sizes", "fits",
"coverage", "moe"}. "fits" and "coverage" are filled by `--refit` (compare/_scaling_fits.py),
on a CPU, from the runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import glob
import hashlib
import json
import math
import multiprocessing
import os
import queue
import site
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

# (n_layer, d_model): about 2x apart in non-embedding parameters, 0.22M to 25M; wide and
# shallow (width / depth 48 to 128), since a wide matrix keeps the chip's matrix units busier.
# The last two, 98k and 49k, are smaller than the first: added after the first sweeps found
# the two smallest budgets' best loss at the ladder's bottom rung (appended, so that the
# saved runs keep their rung numbers).
SIZES = ((2, 96), (2, 128), (2, 192), (2, 256), (3, 320), (4, 384), (4, 512), (5, 640),
         (2, 64), (1, 64))
# budget (C = 6 N D, N = params_mult) -> the rungs of SIZES it trains (five each).
BUDGETS = (3e13, 1e14, 3e14, 1e15, 3e15)
WINDOWS = ((0, 5), (1, 6), (1, 6), (2, 7), (3, 8))
# (budget index, seed) in priority order: seed 0 of the four smaller budgets, seed 1 of the
# three smallest, the largest budget, and last seed 1 of the second largest.
ORDER = ((0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1), (2, 1), (4, 0), (3, 1))
BATCH, BLOCK = 128, 128
SMOKE = dict(sizes=((1, 16), (1, 32), (1, 48)), budgets=(1e9, 3e9),
             windows=((0, 3), (0, 3)), order=((0, 0), (1, 0), (0, 1), (1, 1)), batch=8, block=32,
             corpus_bytes=400_000, hold=5,
             order2=((0, (1, 0), 0, 8), (1, (0, 1, 2), 0, 8), (1, (2,), 2, 0)))
PEAK_FLOPS = {"TPU v5 lite": 197e12, "TPU v5e": 197e12}
N_CURVE, VAL_CURVE, VAL_FINAL = 10, 4, 16
# The MoE: experts of width 2d, TOP_K of them per token, Switch's balancing loss at this weight.
EXPERTS, TOP_K, AUX_WEIGHT = 8, 2, 0.01
# The second sweep (`--resume`): (budget index, rungs, seed, experts) in priority order:
# the MoE at two budgets, the largest budget's missing sizes, a second seed of 1e15, then
# a second seed of the largest budget; last, below the two smallest budgets' best sizes,
# rungs 0 and 8 at 1e14 and the smaller rungs 8 and 9 at 3e13, two seeds each.
ORDER2 = ((2, (3, 2, 4), 0, EXPERTS), (3, (4, 3, 5), 0, EXPERTS), (4, (6, 4), 0, 0),
          (3, (4, 3, 5, 2), 1, 0), (4, (3,), 0, 0), (4, (5, 4, 3, 6, 7), 1, 0),
          (1, (0, 8), 0, 0), (0, (8, 9), 0, 0), (1, (0, 8), 1, 0), (0, (8, 9), 1, 0))


# ---------------------------------------------------------------------------------------------
# Data and baselines
# ---------------------------------------------------------------------------------------------

def corpus(max_bytes: int | None = None, hold: int = 50) -> tuple[np.ndarray, np.ndarray, dict]:
    """(train u8[n], val u8[m], description): the `.py` files of the standard library and of
    site-packages, sorted by path, deduplicated by content, one in `hold` held out by a hash
    of its path."""
    paths = sysconfig.get_paths()
    site_dirs = [paths["purelib"], paths["platlib"], *getattr(site, "getsitepackages", list)()]
    roots = [paths["stdlib"]] + sorted({d for d in site_dirs if os.path.isdir(d)})
    seen, train, val, files = set(), [], [], {"stdlib": 0, "site-packages": 0}
    total = 0
    for k, root in enumerate(roots):
        name = "site-packages" if k else "stdlib"
        paths = sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))
        if not k:
            paths = [p for p in paths if "-packages" not in p]
        for p in paths:
            try:
                b = Path(p).read_bytes()
            except OSError:
                continue
            h = hashlib.sha1(b).digest()
            if h in seen or not b:
                continue
            seen.add(h)
            rel = os.path.relpath(p, root)
            held = int(hashlib.sha1(rel.encode()).hexdigest(), 16) % hold == 0
            (val if held else train).append(b)
            files[name] += 1
            total += len(b)
            if max_bytes and total >= max_bytes:
                break
        if max_bytes and total >= max_bytes:
            break
    tr = np.frombuffer(b"".join(train), np.uint8)
    va = np.frombuffer(b"".join(val), np.uint8)
    desc = {"source": f"the .py files of the standard library (Lib/**/*.py, tests included) "
                      f"and of site-packages, deduplicated; one file in {hold} held out",
            "roots": roots, "files": files, "train_bytes": int(tr.size),
            "val_bytes": int(va.size),
            "sha256": hashlib.sha256(tr.tobytes() + va.tobytes()).hexdigest()[:16]}
    return tr, va, desc


def _baselines_child(queue, train, val) -> None:
    t0 = time.perf_counter()
    out = ngram_baselines(train, val)
    queue.put({name: {**v, "seconds": time.perf_counter() - t0} for name, v in out.items()})


def ngram_baselines(train: np.ndarray, val: np.ndarray) -> dict:
    """Unigram, bigram and trigram byte models with add-k smoothing, nats per byte on `val`;
    counts from the first 64 MB of `train` at most, k from (1e-3, 1e-2, 0.1, 1) by the loss
    on the last 2% of those (counted from the rest), then the counts of all of them."""
    train = train[:64 << 20]
    cut = int(0.98 * train.size)

    def counts(x, n):
        idx = np.zeros(x.size - n + 1, np.int64)
        for i in range(n):
            idx = idx * 256 + x[i:x.size - n + 1 + i]
        return np.bincount(idx, minlength=256 ** n).reshape((256 ** (n - 1), 256))

    def loss(c, x, n, k):
        ctx = np.zeros(x.size - n + 1, np.int64)
        for i in range(n - 1):
            ctx = ctx * 256 + x[i:x.size - n + 1 + i]
        nxt = x[n - 1:]
        p = (c[ctx, nxt] + k) / (c.sum(1)[ctx] + 256 * k)
        return float(-np.mean(np.log(p)))

    out = {}
    for n, name in ((1, "unigram"), (2, "bigram"), (3, "trigram")):
        c_fit = counts(train[:cut], n)
        k = min((1e-3, 1e-2, 0.1, 1.0), key=lambda k: loss(c_fit, train[cut:], n, k))
        out[name] = {"loss": loss(counts(train, n), val, n, k), "k": k}
    return out


# ---------------------------------------------------------------------------------------------
# The model, AdamW, the step
# ---------------------------------------------------------------------------------------------

def n_head(d: int) -> int:
    return d // 64 if d % 64 == 0 and d >= 128 else max(1, d // 32)


def init(key, n_layer: int, d: int, block: int, experts: int = 0) -> dict:
    """Dense (`experts` 0): a 4d MLP per layer. MoE: `experts` experts of width 2d and a
    router, `TOP_K` = 2 of them per token, so a token meets as many MLP weights (8d^2) as in
    the dense model of the same depth and width."""
    import jax
    import jax.numpy as jnp
    ks = jax.random.split(key, 8)
    s, sr = 0.02, 0.02 / math.sqrt(2 * n_layer)   # GPT-2's scaled residual projections

    def nrm(k, shape, std):
        return std * jax.random.normal(k, shape, jnp.float32)
    L = n_layer
    mlp = ({"w1": nrm(ks[4], (L, d, 4 * d), s), "w2": nrm(ks[5], (L, 4 * d, d), sr)}
           if not experts else
           {"router": nrm(ks[7], (L, d, experts), s),
            "w1": nrm(ks[4], (L, experts, d, 2 * d), s),
            "w2": nrm(ks[5], (L, experts, 2 * d, d), sr)})
    return {"wte": nrm(ks[0], (256, d), s), "wpe": nrm(ks[1], (block, d), s),
            "layers": {"ln1": jnp.ones((L, d)), "ln2": jnp.ones((L, d)),
                       "wqkv": nrm(ks[2], (L, d, 3 * d), s),
                       "wo": nrm(ks[3], (L, d, d), sr), **mlp},
            "lnf": jnp.ones((d,)), "head": nrm(ks[6], (d, 256), s)}


def count(n_layer: int, d: int, block: int, experts: int = 0) -> dict:
    """Parameter counts; for an MoE `params` and `params_mult` count the active ones (the
    router and TOP_K experts) and `params_total` every expert."""
    attn = 2 * d + 3 * d * d + d * d
    params = n_layer * (attn + 8 * d * d + experts * d) + d
    total = params + n_layer * (experts - TOP_K) * 4 * d * d if experts else params
    return {"params": params, "params_all": params + 256 * d + block * d + d * 256,
            "params_mult": params + d * 256, "params_total": total, "experts": experts}


def moe_mlp(a, p):
    """(f32[B, T, d] outputs, f32[] load-balancing loss) of the top-2 mixture of experts:
    the token copies sorted by expert, each expert's rows one group of `lax.ragged_dot`
    (no capacity, no dropped tokens), then put back in order and weighted by the router's
    renormalised top-2 probabilities. The loss is Switch's E * sum_e f_e P_e."""
    import jax
    import jax.numpy as jnp
    bf = jnp.bfloat16
    B, T, d = a.shape
    E = p["router"].shape[-1]
    x = a.reshape(B * T, d)
    probs = jax.nn.softmax(x @ p["router"], axis=-1)
    gate, idx = jax.lax.top_k(probs, TOP_K)
    gate = gate / gate.sum(-1, keepdims=True)
    e = idx.reshape(-1)
    order = jnp.argsort(e)
    sizes = jnp.bincount(e, length=E).astype(jnp.int32)
    xs = jnp.repeat(x, TOP_K, axis=0)[order].astype(bf)
    u = jax.lax.ragged_dot(xs, p["w1"].astype(bf), sizes, preferred_element_type=jnp.float32)
    y = jax.lax.ragged_dot(jax.nn.gelu(u).astype(bf), p["w2"].astype(bf), sizes,
                           preferred_element_type=jnp.float32)
    y = jnp.zeros_like(y).at[order].set(y).reshape(B * T, TOP_K, d)
    out = jnp.einsum("nkd,nk->nd", y, gate).reshape(B, T, d)
    frac = sizes.astype(jnp.float32) / e.size
    return out, E * jnp.sum(frac * probs.mean(0))


def forward(params, x):
    """(f32[B, T, 256] logits of u8[B, T] bytes, f32[] the MoE's load-balancing loss summed
    over layers: 0 for a dense model)."""
    import jax
    import jax.numpy as jnp
    bf = jnp.bfloat16
    B, T = x.shape
    d = params["wte"].shape[1]
    H = n_head(d)

    def mm(a, w):
        return jnp.einsum("btd,df->btf", a.astype(bf), w.astype(bf),
                          preferred_element_type=jnp.float32)

    def ln(a, g):
        a = a - a.mean(-1, keepdims=True)
        return a * jax.lax.rsqrt((a * a).mean(-1, keepdims=True) + 1e-5) * g

    mask = jnp.tril(jnp.ones((T, T), bool))

    def layer(h, p):
        q, k, v = jnp.split(mm(ln(h, p["ln1"]), p["wqkv"]).astype(bf), 3, axis=-1)
        q, k, v = (t.reshape(B, T, H, d // H) for t in (q, k, v))
        s = jnp.einsum("bqhe,bkhe->bhqk", q, k, preferred_element_type=jnp.float32)
        s = jnp.where(mask, s / math.sqrt(d // H), -1e30)
        a = jax.nn.softmax(s, axis=-1).astype(bf)
        o = jnp.einsum("bhqk,bkhe->bqhe", a, v, preferred_element_type=jnp.float32)
        h = h + mm(o.reshape(B, T, d), p["wo"])
        if "router" in p:
            y, aux = moe_mlp(ln(h, p["ln2"]), p)
            return h + y, aux
        u = jax.nn.gelu(mm(ln(h, p["ln2"]), p["w1"]))
        return h + mm(u, p["w2"]), jnp.zeros((), jnp.float32)

    h = params["wte"][x] + params["wpe"][:T]
    h, aux = jax.lax.scan(layer, h, params["layers"])
    return mm(ln(h, params["lnf"]), params["head"]), aux.sum()


def loss_fn(params, xy, aux_weight: float = 0.0):
    """Mean cross-entropy (nats per byte) of the next byte; in training an MoE adds
    `aux_weight` times its load-balancing loss (the evaluations report cross-entropy only)."""
    import jax
    import jax.numpy as jnp
    logits, aux = forward(params, xy[:, :-1])
    lp = jax.nn.log_softmax(logits, axis=-1)
    ce = -jnp.mean(jnp.take_along_axis(lp, xy[:, 1:, None].astype(jnp.int32), -1))
    return ce + aux_weight * aux


# weight decay on the matrices a token is multiplied by, not on embeddings or layer norms
DECAY = {"wte": False, "wpe": False, "lnf": False, "head": True,
         "layers": {"ln1": False, "ln2": False, "wqkv": True, "wo": True, "w1": True,
                    "w2": True, "router": True}}


def make_step(batch: int, block: int, peak_lr: float):
    """step(params, opt, data u8[n], key, i, steps) -> (params, opt, loss): one AdamW step on
    a batch drawn from the key and the step; i and steps are traced, so the warmup + cosine
    schedule of any run length uses one compiled step."""
    import jax
    import jax.numpy as jnp

    def schedule(i, steps):
        i, steps = i.astype(jnp.float32), steps.astype(jnp.float32)
        warm = jnp.maximum(1.0, jnp.round(0.05 * steps))
        frac = jnp.clip((i - warm) / jnp.maximum(1.0, steps - 1 - warm), 0.0, 1.0)
        cos = 0.1 + 0.9 * 0.5 * (1 + jnp.cos(jnp.pi * frac))
        return peak_lr * jnp.where(i < warm, (i + 1) / warm, cos)

    def step(params, opt, data, key, i, steps):
        k = jax.random.fold_in(key, i)
        start = jax.random.randint(k, (batch,), 0, data.shape[0] - block - 1)
        xy = data[start[:, None] + jnp.arange(block + 1)]
        loss, g = jax.value_and_grad(loss_fn)(params, xy, AUX_WEIGHT)
        gn = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(g)))
        g = jax.tree_util.tree_map(lambda x: x * jnp.minimum(1.0, 1.0 / (gn + 1e-6)), g)
        t = opt["t"] + 1
        lr = schedule(i, steps)
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], g)
        v = jax.tree_util.tree_map(lambda v, g: 0.95 * v + 0.05 * g * g, opt["v"], g)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.95 ** t

        def update(p, m, v, decay):
            return p - lr * (m / c1 / (jnp.sqrt(v / c2) + 1e-8) + (0.1 * p if decay else 0.0))

        decay = {**DECAY, "layers": {k: DECAY["layers"][k] for k in params["layers"]}}
        params = jax.tree_util.tree_map(update, params, m, v, decay)
        return params, {"m": m, "v": v, "t": t}, loss

    return step


class Model:
    """One size: its compiled step and evaluation, shared by every budget and seed."""

    def __init__(self, rung: int, n_layer: int, d: int, batch: int, block: int, data, val,
                 experts: int = 0):
        import jax
        import jax.numpy as jnp
        self.rung, self.n_layer, self.d, self.batch, self.block = rung, n_layer, d, batch, block
        self.experts = experts
        self.count = count(n_layer, d, block, experts)
        self.peak_lr = min(3e-3, 0.4 / d)
        shapes = jax.eval_shape(lambda k: init(k, n_layer, d, block, experts),
                                jax.random.key(0))
        opt = {"m": shapes, "v": shapes, "t": jax.ShapeDtypeStruct((), jnp.float32)}
        i32 = jax.ShapeDtypeStruct((), jnp.int32)
        t0 = time.perf_counter()
        self.step = jax.jit(make_step(batch, block, peak_lr=self.peak_lr),
                            donate_argnums=(0, 1)).lower(
            shapes, opt, data, jax.eval_shape(lambda: jax.random.key(0)), i32, i32).compile()
        self.eval = jax.jit(loss_fn).lower(shapes, val[0]).compile()
        self.init = jax.jit(lambda k: init(k, n_layer, d, block, experts)).lower(
            jax.eval_shape(lambda: jax.random.key(0))).compile()
        self.compile_s = time.perf_counter() - t0
        self.step_s = None

    def fresh(self, seed: int):
        import jax
        import jax.numpy as jnp
        k_init, k_data = jax.random.split(jax.random.key(seed))
        p = self.init(k_init)
        z = jax.tree_util.tree_map(jnp.zeros_like, p)
        return p, {"m": z, "v": jax.tree_util.tree_map(jnp.zeros_like, p),
                   "t": jnp.zeros((), jnp.float32)}, k_data

    def time_steps(self, data, n: int = 6) -> float:
        import jax
        import jax.numpy as jnp
        p, o, k = self.fresh(99)
        p, o, loss = self.step(p, o, data, k, jnp.int32(0), jnp.int32(100))
        jax.block_until_ready(loss)
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            p, o, loss = self.step(p, o, data, k, jnp.int32(i), jnp.int32(100))
        jax.block_until_ready(loss)
        self.step_s = (time.perf_counter() - t0) / n
        return self.step_s

    def evaluate(self, params, val, n: int) -> float:
        return float(np.mean([float(self.eval(params, val[j])) for j in range(n)]))


# ---------------------------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------------------------

def steps_for(budget: float, n_mult: int, batch: int, block: int) -> int:
    return max(8, round(budget / (6 * n_mult * batch * block)))


def plan(sizes, budgets, windows, order, batch, block) -> list[dict]:
    """Every run in priority order: `order` lists (budget index, seed) groups, each trained
    from its middle size outwards, so that what a cut drops first is the far end of a
    valley."""
    runs = []
    for i, seed in order:
        lo, hi = windows[i]
        mid = (lo + hi - 1) / 2
        for r in sorted(range(lo, hi), key=lambda r: abs(r - mid)):
            runs.append(spec_for(sizes, budgets[i], r, seed, 0, batch, block))
    return runs


def spec_for(sizes, budget: float, rung: int, seed: int, experts: int, batch: int,
             block: int) -> dict:
    c = count(*sizes[rung], block, experts)
    return {"budget": budget, "rung": rung, "seed": seed, "experts": experts,
            "steps": steps_for(budget, c["params_mult"], batch, block)}


def plan2(sizes, budgets, order2, batch, block, done) -> list[dict]:
    """The second sweep's runs (`ORDER2`), less those in `done` (the first sweep's file)."""
    have = {(r["budget"], r["rung"], r["seed"], r.get("experts", 0)) for r in done}
    runs = []
    for i, rungs, seed, experts in order2:
        for r in rungs:
            if (budgets[i], r, seed, experts) not in have:
                runs.append(spec_for(sizes, budgets[i], r, seed, experts, batch, block))
    return runs


def train(model: Model, data, val, spec: dict, deadline: float) -> dict | None:
    """One run; None if the clock passes `deadline` (the run is dropped, not saved)."""
    import jax
    import jax.numpy as jnp
    steps = spec["steps"]
    tok = model.batch * model.block
    marks = sorted({max(1, round(steps * 2 ** (-k / 2))) for k in range(N_CURVE)})
    p, o, key = model.fresh(spec["seed"])
    n = jnp.int32(steps)
    curve, losses = [], []
    t0 = time.perf_counter()
    for i in range(steps):
        p, o, loss = model.step(p, o, data, key, jnp.int32(i), n)
        if i >= steps - max(1, steps // 50):
            losses.append(loss)
        if i + 1 in marks:
            curve.append([(i + 1) * tok, [model.eval(p, val[j]) for j in range(VAL_CURVE)]])
        if i % 200 == 199:
            jax.block_until_ready(loss)
            if time.perf_counter() > deadline:
                return None
    val_loss = model.evaluate(p, val, VAL_FINAL)
    train_s = time.perf_counter() - t0
    curve = [[t, float(np.mean([float(v) for v in vs]))] for t, vs in curve]
    c = model.count
    tokens = steps * tok
    train_loss = np.asarray(jax.device_get(losses), np.float64)
    return {"budget": spec["budget"], "rung": spec["rung"], "n_layer": model.n_layer,
            "d_model": model.d, **c, "seed": spec["seed"], "steps": steps, "tokens": tokens,
            "flops_6nd": 6 * c["params_mult"] * tokens, "val_loss": val_loss, "curve": curve,
            "train_loss_end": float(train_loss.mean()),
            "peak_lr": model.peak_lr, "train_s": train_s, "step_s": train_s / steps}


def save(doc: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out)


def sweep(args) -> dict:
    """The first sweep (dense, `ORDER`), or with `args.resume` the second (`ORDER2`: the
    MoE and what the first left out), appended to the first's file."""
    import jax
    import jax.numpy as jnp
    t_start = time.perf_counter()
    deadline = t_start + args.budget_s
    cfg = dict(sizes=SIZES, budgets=BUDGETS, windows=WINDOWS, order=ORDER, batch=BATCH,
               block=BLOCK, corpus_bytes=None, hold=50, order2=ORDER2)
    if args.smoke:
        cfg = dict(SMOKE)
    prior = json.loads(Path(args.resume).read_text()) if args.resume else None
    tr, va, desc = corpus(cfg["corpus_bytes"], cfg["hold"])
    if prior and prior["corpus"]["sha256"] != desc["sha256"]:
        raise SystemExit(f"the text differs from the first sweep's ({desc['sha256']} vs "
                         f"{prior['corpus']['sha256']}): its runs cannot be continued here")
    # the n-gram counts take a minute of one core: a forked process does them while the
    # chip trains (forked before JAX starts its runtime; the arrays are shared, not copied)
    ctx = multiprocessing.get_context("fork")
    counts = ctx.Queue()
    child = None
    if not (prior and prior["baselines"]):
        child = ctx.Process(target=_baselines_child, args=(counts, tr, va), daemon=True)
        child.start()
    print(f"corpus: {desc['train_bytes']:,} + {desc['val_bytes']:,} bytes in "
          f"{time.perf_counter() - t_start:.1f} s" +
          ("; n-gram baselines counting in the background" if child else ""))
    dev = jax.devices()[0]
    B, T = cfg["batch"], cfg["block"]
    # fixed validation batches: windows evenly spaced through the held-out text
    starts = np.linspace(0, va.size - T - 2, VAL_FINAL * B).astype(np.int64)
    val_np = va[starts[:, None] + np.arange(T + 1)].reshape(VAL_FINAL, B, T + 1)
    data, val = jnp.asarray(tr), jnp.asarray(val_np)
    peak = PEAK_FLOPS.get(dev.device_kind)
    if prior:
        doc = prior
        runs_plan = plan2(cfg["sizes"], cfg["budgets"], cfg["order2"], B, T,
                          doc["runs"] + doc["moe"])
        doc.pop("moe_note", None)
        doc["settings"].update(order2=[[i, list(r), s, e] for i, r, s, e in cfg["order2"]],
                               budget2_s=args.budget_s, experts=EXPERTS, top_k=TOP_K,
                               aux_weight=AUX_WEIGHT, date2=datetime.date.today().isoformat())
    else:
        runs_plan = plan(cfg["sizes"], cfg["budgets"], cfg["windows"], cfg["order"], B, T)
        doc = {"device_kind": dev.device_kind, "platform": dev.platform,
               "jax": jax.__version__, "date": datetime.date.today().isoformat(),
               "corpus": desc,
               "settings": {"batch": B, "block": T, "budgets": list(cfg["budgets"]),
                            "windows": [list(w) for w in cfg["windows"]],
                            "order": [list(o) for o in cfg["order"]],
                            "budget_s": args.budget_s, "peak_flops": peak,
                            "smoke": bool(args.smoke), "curve_batches": VAL_CURVE,
                            "val_batches": VAL_FINAL},
               "sizes": [], "runs": [], "skipped": [], "baselines": {}, "fits": {},
               "coverage": None, "moe": [], "errors": []}
        for r in runs_plan:
            r["epochs"] = r["steps"] * B * T / tr.size
        desc["max_epochs"] = max(r["epochs"] for r in runs_plan)
    kinds = sorted({(r["rung"], r["experts"]) for r in runs_plan})
    t0 = time.perf_counter()

    def build(key):
        r, e = key
        try:
            return Model(r, *cfg["sizes"][r], B, T, data, val, experts=e)
        except Exception as exc:  # one size that does not compile must not end the sweep
            doc["errors"].append({"rung": r, "experts": e, "compile": repr(exc)[:500]})
            return None
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as ex:
        models = dict(zip(kinds, ex.map(build, kinds)))
    compile_wall = time.perf_counter() - t0
    print(f"compiled {len(kinds)} models in {compile_wall:.1f} s; errors: {doc['errors']}")
    for key in kinds:
        m = models[key]
        if m is None:
            continue
        try:
            m.time_steps(data)
        except Exception as exc:
            doc["errors"].append({"rung": key[0], "experts": key[1], "timing": repr(exc)[:500]})
            models[key] = None
            continue
        fl = 6 * m.count["params_mult"] * B * T
        doc["sizes"].append({"rung": key[0], "n_layer": m.n_layer, "d_model": m.d, **m.count,
                             "compile_s": m.compile_s, "step_s": m.step_s,
                             "mfu_6nd": fl / m.step_s / peak if peak else None})
        print(f"rung {key[0]}{' MoE' if key[1] else ''}: L={m.n_layer} d={m.d} "
              f"N={m.count['params']:,} step {1e3 * m.step_s:.2f} ms" +
              (f", MFU(6ND) {fl / m.step_s / peak:.1%}" if peak else ""))
    doc["settings"]["compile_wall" + ("2" if prior else "") + "_s"] = compile_wall
    runs_plan = [r for r in runs_plan if models[(r["rung"], r["experts"])] is not None]
    predicted = sum(r["steps"] * models[(r["rung"], r["experts"])].step_s for r in runs_plan)
    print(f"{len(runs_plan)} runs planned, predicted {predicted:.0f} s of training; "
          f"setup took {time.perf_counter() - t_start:.0f} s")
    for spec in runs_plan:
        m = models[(spec["rung"], spec["experts"])]
        left = deadline - time.perf_counter()
        # the evaluations cost about 20 steps (forward passes over 56 batches)
        need = 1.1 * (spec["steps"] + 20) * m.step_s + 1.0
        tag = (f"C={spec['budget']:.0e} N={m.count['params']:,}"
               f"{' MoE' if spec['experts'] else ''} seed {spec['seed']}")
        if need > left:
            doc["skipped"].append({**spec, "predicted_s": need, "left_s": left})
            print(f"skip {tag}: needs {need:.0f} s, {left:.0f} s left")
            continue
        try:
            run = train(m, data, val, spec, deadline)
        except Exception as exc:  # e.g. out of memory: record it, go on with the rest
            doc["errors"].append({**spec, "run": repr(exc)[:500]})
            print(f"failed {tag}: {exc!r}"[:300])
            continue
        if run is None:
            doc["skipped"].append({**spec, "predicted_s": need, "left_s": left,
                                   "stopped": True})
            print(f"stopped {tag} at the deadline")
            continue
        if child is not None and not doc["baselines"]:
            try:
                doc["baselines"] = counts.get_nowait()
            except queue.Empty:
                pass
        run["mfu"] = run["flops_6nd"] / run["train_s"] / peak if peak else None
        run["epochs"] = run["tokens"] / tr.size
        doc["moe" if spec["experts"] else "runs"].append(run)
        doc["settings"]["wall" + ("2" if prior else "") + "_s"] = time.perf_counter() - t_start
        save(doc, Path(args.out))
        print(f"{tag}: {spec['steps']} steps, val {run['val_loss']:.4f} in "
              f"{run['train_s']:.1f} s" + (f" (MFU {run['mfu']:.1%})" if peak else ""))
    if child is not None:
        if not doc["baselines"]:
            try:
                doc["baselines"] = counts.get(timeout=120)
            except queue.Empty:
                doc["baselines_note"] = "the n-gram counts did not finish in time"
        child.join(timeout=5)
    print("baselines: " + ", ".join(f"{k} {v['loss']:.3f}" for k, v in doc["baselines"].items()))
    return doc


def refit(path: Path, n_boot: int, n_sim: int) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file: `compare`
    # here, not above: the sweep on the chip needs no minijax
    from compare import _scaling_fits as scaling_fits
    doc = json.loads(path.read_text())
    doc.update(scaling_fits.fit_all(doc, n_boot=n_boot, n_sim=n_sim))
    save(doc, path)
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="chapters/data/27-scaling-laws-tpu.json")
    p.add_argument("--budget-s", type=float, default=540.0,
                   help="wall-clock seconds for the whole sweep, compiles included")
    p.add_argument("--smoke", action="store_true", help="tiny models on a slice of the text")
    p.add_argument("--fit", action="store_true", help="fit at the end (else use --refit)")
    p.add_argument("--refit", metavar="JSON", help="refit the runs of a saved sweep, in place")
    p.add_argument("--resume", metavar="JSON",
                   help="the second sweep (ORDER2: MoE, the rest), added to the first's file")
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--n-sim", type=int, default=300)
    args = p.parse_args(argv)
    if args.refit:
        doc = refit(Path(args.refit), args.n_boot, args.n_sim)
        for name, by in doc["fits"].items():
            for conv, f in by.items():
                print(f"{name} {conv}: a = {f['a']:.3f} [{f['ci'][0]:.3f}, {f['ci'][1]:.3f}]")
        print(f"coverage of approach 2's 95% interval (simulated): {doc['coverage']:.1%}")
        return 0
    from tools._chip import no_accelerator
    if no_accelerator(f"the sweep is sized for a TPU, nothing measured, {args.out} not written "
                      "(--smoke runs it small here)", allow=args.smoke):
        return 0
    doc = sweep(args)
    save(doc, Path(args.out))
    if args.fit:
        refit(Path(args.out), args.n_boot, args.n_sim)
    print(f"{len(doc['runs'])} runs, {len(doc['skipped'])} skipped; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file: `tools._chip`
    sys.exit(main())
