"""The GPT of `compare/gpt.py` in Flax NNX + Optax, over real JAX (chapter 20).

The same model, written the way Flax users write it: `nnx.Module`s that hold their parameters
as `nnx.Param` attributes (`nnx.Linear`, `nnx.LayerNorm`, `nnx.Embed` for the layers whose
arithmetic matches the hand-written version), an `nnx.Optimizer` over
`optax.chain(optax.clip_by_global_norm, optax.adamw)` with `optax.warmup_cosine_decay_schedule`,
and a training step under `nnx.jit`. For sampling, `nnx.split` turns the model into a graph
definition plus a pytree of arrays, a plain `jax.jit` function takes the arrays, and
`nnx.merge` rebuilds the model inside it: the functional form that `compare/gpt.py` writes by
hand. The model starts from `gpt.init_params`, the raw version's numpy weights, so both runs
see the same numbers and their losses agree to float tolerance.
"""

from __future__ import annotations

import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from compare import gpt


def const(a):
    """An initializer that returns the given numpy array (shape and dtype checked by Flax)."""
    return lambda key, shape, dtype=jnp.float32: jnp.asarray(a, dtype).reshape(shape)


def layer_norm(d, g, b):
    return nnx.LayerNorm(d, epsilon=1e-5, use_fast_variance=False, scale_init=const(g),
                         bias_init=const(b), rngs=nnx.Rngs(0))


def linear(w, b=None):
    return nnx.Linear(*w.shape, use_bias=b is not None, kernel_init=const(w),
                      bias_init=const(b) if b is not None else nnx.initializers.zeros,
                      rngs=nnx.Rngs(0))


class Attention(nnx.Module):
    def __init__(self, cfg: gpt.Config, p: dict):
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.qkv = linear(p["w_qkv"], p["b_qkv"])
        self.out = linear(p["w_o"], p["b_o"])

    def __call__(self, h, mask, cache=None, pos=None):
        B, Tq, d = h.shape
        qkv = self.qkv(h).reshape(B, Tq, 3, self.n_head, self.head_dim)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if cache is not None:
            k = jax.lax.dynamic_update_slice(cache[0], k, (0, pos, 0, 0))
            v = jax.lax.dynamic_update_slice(cache[1], v, (0, pos, 0, 0))
            cache = (k, v)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * np.float32(1 / math.sqrt(self.head_dim))
        p = jax.nn.softmax(jnp.where(mask, s, np.float32(-1e30)), axis=-1)
        return self.out(jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, Tq, d)), cache


class Block(nnx.Module):
    def __init__(self, cfg: gpt.Config, p: dict):
        d = cfg.d_model
        self.ln1, self.ln2 = layer_norm(d, p["ln1_g"], p["ln1_b"]), layer_norm(d, p["ln2_g"],
                                                                               p["ln2_b"])
        self.attn = Attention(cfg, p)
        self.fc, self.proj = linear(p["w_fc"], p["b_fc"]), linear(p["w_proj"], p["b_proj"])

    def __call__(self, x, mask, cache=None, pos=None):
        a, cache = self.attn(self.ln1(x), mask, cache, pos)
        x = x + a
        return x + self.proj(jax.nn.gelu(self.fc(self.ln2(x)))), cache


class GPT(nnx.Module):
    def __init__(self, cfg: gpt.Config, p: dict):
        self.block = cfg.block
        self.wte = nnx.Embed(cfg.vocab, cfg.d_model, embedding_init=const(p["wte"]),
                             rngs=nnx.Rngs(0))
        self.wpe = nnx.Param(jnp.asarray(p["wpe"]))
        self.blocks = nnx.List([Block(cfg, b) for b in p["blocks"]])
        self.lnf = layer_norm(cfg.d_model, p["lnf_g"], p["lnf_b"])
        self.head = linear(p["w_head"])

    def __call__(self, idx, caches=None, pos=0):
        """idx int32[B,T] -> (logits f32[B,T,V], caches), as gpt.program's forward."""
        B, T = idx.shape
        x = self.wte(idx)
        if caches is None:
            x, mask = x + self.wpe[:T], jnp.tril(jnp.ones((T, T), bool))
        else:
            x = x + jax.lax.dynamic_slice_in_dim(self.wpe[...], pos, T, axis=0)
            mask = jnp.arange(self.block)[None, :] <= jnp.arange(T)[:, None] + pos
        new = []
        for i, blk in enumerate(self.blocks):
            x, c = blk(x, mask, None if caches is None else caches[i], pos)
            new.append(c)
        return self.head(self.lnf(x)), new


def cross_entropy(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def make_optimizer(model: GPT, cfg: gpt.Config) -> nnx.Optimizer:
    schedule = optax.warmup_cosine_decay_schedule(0.0, cfg.peak_lr, cfg.warmup, cfg.steps,
                                                  cfg.end_lr)
    decay_mask = lambda params: jax.tree.map(lambda p: p.ndim >= 2, params)
    tx = optax.chain(optax.clip_by_global_norm(cfg.clip),
                     optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps,
                                 weight_decay=cfg.weight_decay, mask=decay_mask))
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


@nnx.jit
def train_step(model: GPT, optimizer: nnx.Optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: cross_entropy(m(x)[0], y))(model)
    optimizer.update(model, grads)  # mutates model and optimizer in place
    return loss


@nnx.jit
def eval_loss(model: GPT, x, y):
    return cross_entropy(model(x)[0], y)


def runner(cfg: gpt.Config, params0):
    """(jax, prog, state) for gpt.train: the state is (model, optimizer), updated in place."""
    model = GPT(cfg, params0)
    state = (model, make_optimizer(model, cfg))

    def run_step(state, x, y):
        return state, train_step(*state, x, y)
    return jax, {"run_step": run_step, "params": lambda st: st[0], "eval_loss": eval_loss}, state


def sampler(model: GPT) -> tuple[dict, nnx.State]:
    """The gpt.generate functions over the split model: (prog, params)."""
    graphdef, params = nnx.split(model)
    Tmax = model.block

    def prefill(params, prompt):
        caches = [(jnp.zeros((prompt.shape[0], Tmax, blk.attn.n_head, blk.attn.head_dim)),) * 2
                  for blk in model.blocks]
        logits, caches = nnx.merge(graphdef, params)(prompt, caches, 0)
        return jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32), caches

    def decode(params, caches, tok, pos):
        logits, caches = nnx.merge(graphdef, params)(tok[:, None], caches, pos)
        return logits[:, 0], jnp.argmax(logits[:, 0], axis=-1).astype(jnp.int32), caches

    def greedy_uncached(params, buf, pos):
        logits, _ = nnx.merge(graphdef, params)(buf)
        row = jax.lax.dynamic_index_in_dim(logits, pos, axis=1, keepdims=False)
        return jnp.argmax(row, axis=-1).astype(jnp.int32)
    prog = {"prefill": jax.jit(prefill), "decode": jax.jit(decode),
            "greedy_uncached": jax.jit(greedy_uncached)}
    return prog, params


def kv_cache_equal(state, prompt, n_new: int) -> tuple[bool, np.ndarray]:
    """(greedy tokens with the KV cache == without, the cached tokens)."""
    model = state[0]
    prog, params = sampler(model)
    a = gpt.generate(prog, params, prompt, n_new, model.block, cache=True)
    b = gpt.generate(prog, params, prompt, n_new, model.block, cache=False)
    return bool(np.array_equal(a, b)), a


def step_ms(cfg: gpt.Config, params0, x, y, *, reps: int, warmup: int = 5) -> float:
    """Median ms of the nnx.jit step on a fresh model, inputs on the device, blocked."""
    model = GPT(cfg, params0)
    opt = make_optimizer(model, cfg)
    x, y = jax.device_put(x), jax.device_put(y)
    times = []
    for i in range(warmup + reps):
        t0 = time.perf_counter()
        jax.block_until_ready(train_step(model, opt, x, y))
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
