"""gpt_sharded: the GPT of `compare/gpt.py` (and the MoE of `compare/moe.py`) trained on a mesh
of 8 CPU devices, every way a practitioner would, in minijax and in JAX (chapter 25).

Strategies, each written twice:

* **auto**: the plain training step under `jit` with `in_shardings`/`out_shardings` built from
  `NamedSharding`s; the partitioner (Shardy, then XLA's SPMD partitioner) decides the
  collectives;
* **manual**: the loss is a `shard_map` whose body calls the collectives itself (`all_gather`
  of FSDP shards, `psum` after row-parallel matmuls, `all_to_all` for experts); `grad` of it
  produces the backward collectives by transposition (`all_gather` -> `psum_scatter`,
  `pvary` -> `psum`).

`dp` data parallel over 8; `fsdp` parameters and AdamW state split over the data axis (ZeRO-3);
`tp` Megatron tensor parallel on a (2, 4) mesh ("data", "model"); `fsdp_tp` the 2-D mix; `ep`
the MoE with one expert per device and tokens moved by `all_to_all`.

The model is the GPT of `compare/gpt.py` with the fused QKV matrix stored as three matrices
(`w_q`, `w_k`, `w_v`, columns ordered (head, head_dim)): the same numbers, in the layout that
lets "split the heads over devices" be a split of a matrix dimension. Same initial weights
(`gpt.init_params`), batches (`gpt.batches`), AdamW and schedule (`gpt.program`'s).
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import sys
import time

import jax
import numpy as np

import minijax
from compare import gpt, moe
from compare._jax201 import count_collectives, fmt_counts, table
from compare._report import TopicResult

MODULES = gpt.MODULES
DATA, MODEL = "data", "model"


# ---------------------------------------------------------------------------------------------
# The model in the Megatron layout, written once for both modules and every strategy
# ---------------------------------------------------------------------------------------------

def megatron_layout(params: dict) -> dict:
    """gpt.init_params' tree with each block's w_qkv f32[d,3d] / b_qkv f32[3d] split into
    w_q, w_k, w_v f32[d,d] and b_q, b_k, b_v f32[d] (the same numbers)."""
    out = {k: v for k, v in params.items() if k != "blocks"}
    out["blocks"] = []
    for blk in params["blocks"]:
        nb = {k: v for k, v in blk.items() if k not in ("w_qkv", "b_qkv")}
        if "w_qkv" in blk:
            for i, name in enumerate("qkv"):
                nb[f"w_{name}"] = np.ascontiguousarray(np.split(blk["w_qkv"], 3, axis=1)[i])
                nb[f"b_{name}"] = np.split(blk["b_qkv"], 3)[i].copy()
        out["blocks"].append(nb)
    return out


def model(J, cfg: gpt.Config, *, enter=None, reduce=None, gather=None, specs=None, mlp=None,
          constrain=None):
    """(forward, loss) of the GPT for module J, on full or per-device parameters.

    The attention and MLP read their widths from the weights, so inside a `shard_map` they run
    on this device's heads and hidden units. Megatron's two operators are hooks: `enter(h)`
    starts a column-parallel matmul (the identity, or `pcast(h, "model", to="varying")`, whose
    transpose is the backward pass's all-reduce) and `reduce(y)` finishes a row-parallel one
    (the identity, or `psum` over "model"). `gather(tree, specs)` turns a parameter subtree
    into full weights just before its layer (the identity, or FSDP's `all_gather`s); `mlp`
    replaces the dense MLP (the expert-parallel MoE); `constrain(x)` pins the layout of the
    residual stream (for the partitioner)."""
    jnp, lax = J.numpy, J.lax
    dh, Tmax = cfg.head_dim, cfg.block
    ident = lambda y: y  # noqa: E731
    enter, reduce, constrain = enter or ident, reduce or ident, constrain or ident
    use = (lambda tree, key: tree) if gather is None else (
        lambda tree, key: gather(tree, key(specs)))

    def layer_norm(x, g, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        var = jnp.mean(xc * xc, axis=-1, keepdims=True)
        return xc * lax.rsqrt(var + 1e-5) * g + b

    def attention(blk, h, mask, cache, pos):
        B, Tq, _ = h.shape
        H = blk["w_q"].shape[1] // dh  # heads on this device
        h = enter(h)
        q, k, v = ((h @ blk[f"w_{n}"] + blk[f"b_{n}"]).reshape(B, Tq, H, dh) for n in "qkv")
        if cache is not None:
            k = lax.dynamic_update_slice(cache[0], k, (0, pos, 0, 0))
            v = lax.dynamic_update_slice(cache[1], v, (0, pos, 0, 0))
            cache = (k, v)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * np.float32(1 / math.sqrt(dh))
        p = J.nn.softmax(jnp.where(mask, s, np.float32(-1e30)), axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, Tq, H * dh)
        return reduce(o @ blk["w_o"]) + blk["b_o"], cache

    def dense(J, blk, h):
        hid = J.nn.gelu(enter(h) @ blk["w_fc"] + blk["b_fc"])
        return reduce(hid @ blk["w_proj"]) + blk["b_proj"], 0.0

    def forward(params, idx, caches=None, pos=0):
        B, T = idx.shape
        top = use({k: v for k, v in params.items() if k != "blocks"},
                  lambda s: {k: v for k, v in s.items() if k != "blocks"})
        x = jnp.take(top["wte"], idx, axis=0)
        if caches is None:
            x = x + top["wpe"][:T]
            mask = jnp.tril(jnp.ones((T, T), bool))
        else:
            x = x + lax.dynamic_slice_in_dim(top["wpe"], pos, T, axis=0)
            mask = jnp.arange(Tmax)[None, :] <= jnp.arange(T)[:, None] + pos
        x = constrain(x)
        aux, new_caches = 0.0, []
        for i, blk in enumerate(params["blocks"]):
            blk = use(blk, lambda s, i=i: s["blocks"][i])
            a, c = attention(blk, layer_norm(x, blk["ln1_g"], blk["ln1_b"]), mask,
                             None if caches is None else caches[i], pos)
            x = x + a
            m, aux_i = (mlp or dense)(J, blk, layer_norm(x, blk["ln2_g"], blk["ln2_b"]))
            x = constrain(x + m)
            aux = aux + (aux_i["lb"] if isinstance(aux_i, dict) else aux_i)
            new_caches.append(c)
        logits = layer_norm(x, top["lnf_g"], top["lnf_b"]) @ top["w_head"]
        return logits, aux, new_caches

    def loss(params, x, y, aux_weight=0.0):
        """Mean cross-entropy (+ aux_weight times the MoE's load-balancing losses)."""
        logits, aux, _ = forward(params, x)
        logp = J.nn.log_softmax(logits, axis=-1)
        ce = -jnp.mean(jnp.sum(J.nn.one_hot(y, cfg.vocab) * logp, axis=-1))
        return ce + aux_weight * aux if aux_weight else ce

    return forward, loss


# ---------------------------------------------------------------------------------------------
# Which array is split how: one PartitionSpec (as a tuple) per parameter
# ---------------------------------------------------------------------------------------------

COLUMN = ("w_q", "w_k", "w_v", "w_fc")   # split their output columns over "model"
COLUMN_BIAS = ("b_q", "b_k", "b_v", "b_fc")
ROW = ("w_o", "w_proj")                  # split their input rows over "model"
EXPERT = ("w1", "b1", "w2", "b2")        # leading dimension: the expert


def _first_divisible(shape, n: int, taken=()) -> int | None:
    return next((i for i, s in enumerate(shape) if s % n == 0 and i not in taken), None)


def leaf_spec(strategy: str, name: str, shape: tuple, n_data: int) -> tuple:
    """The spec of one parameter under `strategy`, as a tuple with one entry per dimension."""
    spec = [None] * len(shape)
    if strategy == "ep":
        if name in EXPERT:
            spec[0] = DATA
        return tuple(spec)
    if strategy in ("tp", "fsdp_tp"):
        if name in COLUMN:
            spec[1] = MODEL
        elif name in COLUMN_BIAS:
            spec[0] = MODEL
        elif name in ROW:
            spec[0] = MODEL
    if strategy in ("fsdp", "fsdp_tp"):
        if name in COLUMN_BIAS and strategy == "fsdp_tp":
            spec[0] = (MODEL, DATA)  # data-minor: gathering over data leaves the model split
        else:
            dim = _first_divisible(shape, n_data, {i for i, s in enumerate(spec) if s})
            if dim is not None:
                spec[dim] = DATA
    return tuple(spec)


def spec_tree(strategy: str, params: dict, n_data: int) -> dict:
    def flat(d):
        return {k: leaf_spec(strategy, k, np.shape(v), n_data) for k, v in d.items()
                if k != "blocks"}
    out = flat(params)
    if "blocks" in params:
        out["blocks"] = [flat(b) for b in params["blocks"]]
    return out


def as_specs(J, tree):
    """Tuples -> J.P (a PartitionSpec is a leaf of the pytree, a tuple is not)."""
    if isinstance(tree, dict):
        return {k: as_specs(J, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [as_specs(J, v) for v in tree]
    return J.P(*tree)


STRATEGIES = {  # name: (mesh shape, axis names)
    "dp": ((8,), (DATA,)),
    "fsdp": ((8,), (DATA,)),
    "tp": ((2, 4), (DATA, MODEL)),
    "fsdp_tp": ((2, 4), (DATA, MODEL)),
    "ep": ((8,), (DATA,)),
}


# ---------------------------------------------------------------------------------------------
# The manual versions: the loss as a shard_map with the collectives written out
# ---------------------------------------------------------------------------------------------

def fsdp_gather(J):
    """gather(tree, specs): all_gather each parameter over "data" along its split dimension."""
    def gather(tree, specs):
        out = {}
        for k, v in tree.items():
            dim = next((i for i, s in enumerate(specs[k])
                        if s == DATA or (isinstance(s, tuple) and DATA in s)), None)
            out[k] = v if dim is None else J.lax.all_gather(v, DATA, axis=dim, tiled=True)
        return out
    return gather


def ep_mlp(J, mcfg: moe.MoEConfig):
    """The MoE of compare/moe.py with one expert per device: route and build the dispatch
    tensors on this device's groups, all_to_all the [E, G, C, d] slots so that device e holds
    every group's slots for expert e, run the expert, all_to_all back, combine."""
    jnp = J.numpy

    def mlp(J, blk, h):
        G, S, _ = h.shape
        E = mcfg.n_experts
        probs, gates, experts = moe.routing(J, mcfg, blk, h)
        combine, dispatch, _ = moe.dispatch_tensors(J, mcfg, gates, experts, mcfg.capacity(S))
        x = jnp.einsum("gsec,gsd->egcd", dispatch, h)                     # [E, G_loc, C, d]
        x = J.lax.all_to_all(x, DATA, split_axis=0, concat_axis=1, tiled=True)  # [1, G, C, d]
        y = expert_out = moe.expert_mlp(J, blk, x)
        y = J.lax.all_to_all(expert_out, DATA, split_axis=1, concat_axis=0, tiled=True)
        out = jnp.einsum("gsec,egcd->gsd", combine, y)
        frac = jnp.mean(J.nn.one_hot(experts[..., 0], E), axis=(0, 1))
        lb = E * jnp.sum(J.lax.pmean(frac, DATA) * J.lax.pmean(jnp.mean(probs, axis=(0, 1)),
                                                                DATA))
        return out, {"lb": lb}
    return mlp


def manual_loss(J, strategy: str, mesh, cfg: gpt.Config, specs: dict, n_data: int,
                mcfg: moe.MoEConfig | None = None):
    """The global mean loss as a shard_map over `mesh` (parameters in `specs`, batch split
    over "data"): each device computes its batch slice's mean, a psum over "data" averages."""
    tp = strategy in ("tp", "fsdp_tp")
    _, local = model(J, cfg, reduce=(lambda y: J.lax.psum(y, MODEL)) if tp else None,
                     enter=(lambda h: J.lax.pcast(h, MODEL, to="varying")) if tp else None,
                     gather=fsdp_gather(J) if "fsdp" in strategy else None, specs=specs,
                     mlp=ep_mlp(J, mcfg) if strategy == "ep" else None)
    aux_weight = mcfg.aux_weight if strategy == "ep" else 0.0

    def body(params, x, y):
        return J.lax.psum(local(params, x, y, aux_weight), DATA) / n_data
    return J.shard_map(body, mesh=mesh, in_specs=(as_specs(J, specs), J.P(DATA), J.P(DATA)),
                       out_specs=J.P())


def auto_loss(J, strategy: str, mesh, cfg: gpt.Config, specs: dict,
              mcfg: moe.MoEConfig | None = None):
    """The plain loss: the partitioner splits it following the arguments' shardings, with the
    residual stream pinned to a batch split over "data" (replicated over "model")."""
    ns = lambda s: J.sharding.NamedSharding(mesh, s)  # noqa: E731
    pin = lambda x: J.lax.with_sharding_constraint(x, ns(J.P(DATA)))  # noqa: E731
    if strategy == "ep":
        _, loss = model(J, cfg, mlp=moe.make_moe_mlp(mcfg), constrain=pin)
        return lambda p, x, y: loss(p, x, y, mcfg.aux_weight)
    gather = None
    if "fsdp" in strategy:  # ask for each layer's weights whole ("data" removed from its spec)
        def gather(tree, specs):
            return {k: J.lax.with_sharding_constraint(v, ns(J.P(*without_data(specs[k]))))
                    for k, v in tree.items()}
    return model(J, cfg, constrain=pin, gather=gather, specs=specs)[1]


def without_data(spec: tuple) -> tuple:
    """The spec with the "data" axis taken out (what FSDP's all-gather leaves)."""
    def drop(s):
        if isinstance(s, tuple):
            rest = tuple(a for a in s if a != DATA)
            return rest[0] if len(rest) == 1 else (rest or None)
        return None if s == DATA else s
    return tuple(drop(s) for s in spec)


def sharded_step(J, loss, adamw, mesh, specs: dict):
    """jit of value_and_grad + AdamW, parameters and optimizer state kept in `specs`."""
    ns = lambda s: J.sharding.NamedSharding(mesh, s)  # noqa: E731
    psh = J.tree_util.tree_map(ns, as_specs(J, specs))
    osh = {"m": psh, "v": psh, "step": ns(J.P())}
    bsh = ns(J.P(DATA))

    def step(params, opt, x, y):
        value, grads = J.value_and_grad(loss)(params, x, y)
        params, opt, _ = adamw(params, grads, opt)
        return params, opt, value
    return J.jit(step, in_shardings=(psh, osh, bsh, bsh), out_shardings=(psh, osh, ns(J.P())))
