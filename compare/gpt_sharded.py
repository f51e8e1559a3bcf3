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
the MoE with one expert per device and tokens moved by `all_to_all`. Then pipeline parallelism
(`compare/_pipeline.py`): GPipe and 1F1B over 4 stages of a (2, 4) mesh ("data", "stage"),
written by hand with `ppermute`.

The model is `gpt.program` itself, not a copy: each strategy fills in the hooks of `gpt.Split`
(Megatron's `enter`/`reduce`, FSDP's `gather`, the partitioner's `constrain`) or the MLP slot
(the experts), and stores the fused QKV matrix as three matrices (`w_q`, `w_k`, `w_v`, columns
ordered (head, head_dim); `megatron_layout`): the same numbers, in the layout that lets "split
the heads over devices" be a split of a matrix dimension. Same initial weights
(`gpt.init_params`), batches (`gpt.batches`), AdamW and schedule (`gpt.program`'s).
"""

from __future__ import annotations

import functools
import math
import re
import sys
import time

import jax
import numpy as np

import minijax
from compare import _pipeline, gpt, moe
from compare._jax201 import count_collectives, fmt_counts, table
from compare._model_checks import finite_differences, phase_times
from compare._report import TopicResult, interleaved_times, ms_of, xla_log_lines

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

def fsdp_gather(J, specs: dict):
    """gpt.Split's gather(weights, layer): all_gather each parameter over "data" along its
    split dimension (layer: a block's index, or None for the embeddings and head)."""
    def gather(tree, layer):
        sp = specs if layer is None else specs["blocks"][layer]
        out = {}
        for k, v in tree.items():
            dim = next((i for i, s in enumerate(sp[k])
                        if s == DATA or (isinstance(s, tuple) and DATA in s)), None)
            out[k] = v if dim is None else J.lax.all_gather(v, DATA, axis=dim, tiled=True)
        return out
    return gather


def one_gpt(J, cfg: gpt.Config, split: gpt.Split, moe_mlp=None, aux_weight: float = 0.0):
    """compare/gpt.py's loss with `split`'s hooks (the dense MLP gets them too), or with
    `moe_mlp` in the MLP slot."""
    mlp = moe_mlp or functools.partial(gpt.dense_mlp, split=split)
    return gpt.program(J, cfg, mlp=mlp, aux_weight=aux_weight, split=split)["loss"]


def ep_mlp(J, mcfg: moe.MoEConfig, mesh=None):
    """The MoE of compare/moe.py with one expert per device. Manual (no mesh: inside the
    shard_map): this device's groups are routed, `all_to_all` sends slot block e of the
    [E, G, C, d] slots to device e (which then holds every group's slots for its expert), and
    back after the expert; the load-balancing means are finished with `pmean`. Auto (a mesh):
    the slots are constrained to be split by expert and the partitioner moves them."""
    if mesh is None:
        a2a = lambda split, concat: lambda v: J.lax.all_to_all(
            v, DATA, split_axis=split, concat_axis=concat, tiled=True)
        return moe.make_moe_mlp(mcfg, a2a(0, 1), a2a(1, 0), lambda v: J.lax.pmean(v, DATA))
    pin = lambda *spec: lambda v: J.lax.with_sharding_constraint(
        v, J.sharding.NamedSharding(mesh, J.P(*spec)))
    return moe.make_moe_mlp(mcfg, pin(DATA), pin(None, DATA))


def manual_loss(J, strategy: str, mesh, cfg: gpt.Config, specs: dict, n_data: int,
                mcfg: moe.MoEConfig | None = None):
    """The global mean loss as a shard_map over `mesh` (parameters in `specs`, batch split
    over "data"): each device computes its batch slice's mean, a psum over "data" averages."""
    tp = strategy in ("tp", "fsdp_tp")
    split = gpt.Split(enter=(lambda h: J.lax.pcast(h, MODEL, to="varying")) if tp else
                      gpt._identity,
                      reduce=(lambda y: J.lax.psum(y, MODEL)) if tp else gpt._identity,
                      gather=fsdp_gather(J, specs) if "fsdp" in strategy else None)
    ep = strategy == "ep"
    local = one_gpt(J, cfg, split, ep_mlp(J, mcfg) if ep else None,
                    mcfg.aux_weight if ep else 0.0)

    def body(params, x, y):
        return J.lax.psum(local(params, x, y), DATA) / n_data
    return J.shard_map(body, mesh=mesh, in_specs=(as_specs(J, specs), J.P(DATA), J.P(DATA)),
                       out_specs=J.P())


def auto_loss(J, strategy: str, mesh, cfg: gpt.Config, specs: dict,
              mcfg: moe.MoEConfig | None = None):
    """The plain loss: the partitioner splits it following the arguments' shardings, with the
    residual stream pinned to a batch split over "data" (replicated over "model")."""
    ns = lambda s: J.sharding.NamedSharding(mesh, s)
    pin = lambda x: J.lax.with_sharding_constraint(x, ns(J.P(DATA)))
    if strategy == "ep":
        return one_gpt(J, cfg, gpt.Split(constrain=pin), ep_mlp(J, mcfg, mesh),
                       mcfg.aux_weight)
    gather = None
    if "fsdp" in strategy:  # ask for each layer's weights whole ("data" removed from its spec)
        def gather(tree, layer):
            sp = specs if layer is None else specs["blocks"][layer]
            return {k: J.lax.with_sharding_constraint(v, ns(J.P(*without_data(sp[k]))))
                    for k, v in tree.items()}
    return one_gpt(J, cfg, gpt.Split(constrain=pin, gather=gather))


def without_data(spec: tuple) -> tuple:
    """The spec with the "data" axis taken out (what FSDP's all-gather leaves)."""
    def drop(s):
        if isinstance(s, tuple):
            rest = tuple(a for a in s if a != DATA)
            return rest[0] if len(rest) == 1 else (rest or None)
        return None if s == DATA else s
    return tuple(drop(s) for s in spec)


def shardings(J, mesh, specs: dict) -> tuple:
    """(parameters', optimizer state's, batch's) NamedShardings."""
    ns = lambda s: J.sharding.NamedSharding(mesh, s)
    psh = J.tree_util.tree_map(ns, as_specs(J, specs))
    return psh, {"m": psh, "v": psh, "step": ns(J.P())}, ns(J.P(DATA))


def sharded_step(J, loss, adamw, mesh, specs: dict):
    """jit of value_and_grad + AdamW, parameters and optimizer state kept in `specs`."""
    psh, osh, bsh = shardings(J, mesh, specs)

    def step(params, opt, x, y):
        value, grads = J.value_and_grad(loss)(params, x, y)
        params, opt, _ = adamw(params, grads, opt)
        return params, opt, value
    rep = J.sharding.NamedSharding(mesh, J.P())
    return J.jit(step, in_shardings=(psh, osh, bsh, bsh), out_shardings=(psh, osh, rep))


# ---------------------------------------------------------------------------------------------
# What the compiled program communicates
# ---------------------------------------------------------------------------------------------

_DTYPE_BYTES = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4, "bf16": 2,
                "f16": 2, "s16": 2, "u16": 2, "s8": 1, "u8": 1, "pred": 1}
_ARRAY = re.compile(r"\b(" + "|".join(_DTYPE_BYTES) + r")\[([\d,]*)\]")
_COLL = re.compile(r"\s(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)"
                   r"(?:-start)?\(")


def group_size(line: str, n_devices: int) -> int:
    """Devices per replica group of one collective (`{{0,1,2,3},{4,5,6,7}}`, `[2,4]<=[8]`, or
    `{}`: all of them)."""
    m = re.search(r"replica_groups=\{\{([\d,]*)\}", line)
    if m:
        return len(m.group(1).split(","))
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]", line)
    if m:
        return int(m.group(2))
    m = re.search(r"replica_groups=mesh\[([^\]]*)\] \{([^}]*)\}", line)  # named mesh axes
    if m:
        size = dict(re.findall(r"'(\w+)'=(\d+)", m.group(1)))
        return math.prod(int(size[a]) for a in re.findall(r"'(\w+)'", m.group(2)))
    return n_devices


def hlo_bytes(hlo_text: str, n_devices: int = 8) -> dict[str, float]:
    """Bytes each device sends per call, per collective kind, from the compiled HLO: ring
    all-reduce 2(n-1)/n of the buffer, all-gather (n-1)/n of its result, reduce-scatter (n-1)
    times its result, all-to-all (n-1)/n of the buffer, collective-permute the buffer."""
    out = {k: 0.0 for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                            "collective-permute")}
    for line in hlo_text.splitlines():
        _, eq, rhs = line.partition(" = ")
        m = _COLL.search(rhs) if eq else None
        if not m:
            continue
        kind = m.group(1)
        nbytes = sum(_DTYPE_BYTES[t] * math.prod(int(d) for d in dims.split(",") if d)
                     for t, dims in _ARRAY.findall(rhs[:m.start()]))
        n = group_size(line, n_devices)
        out[kind] += {"all-reduce": 2 * (n - 1) / n, "all-gather": (n - 1) / n,
                      "reduce-scatter": n - 1, "all-to-all": (n - 1) / n,
                      "collective-permute": 1}[kind] * nbytes
    return out


def predicted_bytes(strategy: str, cfg: gpt.Config, params: dict,
                    mcfg: moe.MoEConfig | None = None) -> float:
    """Chapter 25's textbook bill: the bytes one device sends per training step (float32) under
    `strategy`'s layout, from the sizes alone, before anything is compiled. The same number
    for both styles: it is what the hand-written (manual) program sends, and what the
    partitioner would send if it chose the same plan (the chapter reads where it does not).

    P: the parameter bytes, P_dev: those one device holds, A: one activation slice
    [B/n_data, T, d], n the "data" axis size, m the "model" axis size, L the layers:
    dp 2(n-1)/n P (the gradient all-reduce); fsdp (n-1)/n P of forward all-gathers + (n-1)/n P
    of gradient reduce-scatters; tp 4L all-reduces of A over "model" (2 forward, 2 backward
    per block) + the data-parallel all-reduce of P_dev over "data"; fsdp_tp the tp
    activations + gathers and gradient reduce-scatters over "data" of each device's (1/m)
    column of the model; ep dp's all-reduce for everything but the experts + 4L all-to-alls of
    the [E, G, C, d] slots (two forward, two backward per MoE layer)."""
    nbytes = lambda tree: sum(4 * np.size(v) for v in jax.tree_util.tree_leaves(tree))
    (*_, m), axes = STRATEGIES[strategy]
    n = STRATEGIES[strategy][0][0]
    specs = spec_tree(strategy, params, n)
    P = nbytes(params)
    per_dev = sum(4 * np.size(v) / math.prod(
        {DATA: n, MODEL: m if len(axes) == 2 else 1}[a] for s in sp if s
        for a in (s if isinstance(s, tuple) else (s,)))
        for v, sp in zip(jax.tree_util.tree_leaves(params), _spec_leaves(specs)))
    L = cfg.n_layer
    A = 4 * cfg.batch // n * cfg.block * cfg.d_model
    if strategy == "dp":
        return 2 * (n - 1) / n * P
    if strategy == "fsdp":
        return 2 * (n - 1) / n * P
    if strategy == "ep":
        experts = sum(4 * np.size(b[k]) for b in params["blocks"] for k in EXPERT)
        E, C = mcfg.n_experts, mcfg.capacity(cfg.block)
        slots = 4 * E * (cfg.batch // n) * C * cfg.d_model
        return 2 * (n - 1) / n * (P - experts) + 4 * L * (n - 1) / n * slots
    acts = 4 * L * 2 * (m - 1) / m * A
    if strategy == "tp":
        return acts + 2 * (n - 1) / n * per_dev
    return acts + 2 * (n - 1) / n * per_dev * n  # fsdp_tp: the model column, over "data"


def spec_of(x) -> tuple:
    """x.sharding.spec as a tuple without trailing Nones (P('data', None) == P('data'))."""
    spec = list(x.sharding.spec)
    while spec and spec[-1] is None:
        spec.pop()
    return tuple(spec)


def _spec_leaves(specs: dict) -> list:
    """The specs in jax.tree_util's leaf order of the parameter tree (keys sorted)."""
    out = []
    for k in sorted(specs):
        if k == "blocks":
            for b in specs[k]:
                out += [b[j] for j in sorted(b)]
        else:
            out.append(specs[k])
    return out


# ---------------------------------------------------------------------------------------------
# One strategy in one module: train, then read the compiled program
# ---------------------------------------------------------------------------------------------

def train_sharded(J, strategy: str, style: str, cfg: gpt.Config, params0: dict, xs, ys,
                  mcfg: moe.MoEConfig | None = None) -> dict:
    """Train `len(xs)` steps of `strategy` written `style`-wise in module J; the losses, the
    shardings before and after, the compiled program's collectives, bytes and memory."""
    shape, names = STRATEGIES[strategy]
    mesh = J.make_mesh(shape, names, axis_types=(J.sharding.AxisType.Auto,) * len(shape))
    n_data = shape[0]
    specs = spec_tree(strategy, params0, n_data)
    prog = gpt.program(J, cfg)
    loss = (auto_loss(J, strategy, mesh, cfg, specs, mcfg) if style == "auto" else
            manual_loss(J, strategy, mesh, cfg, specs, n_data, mcfg))
    step = sharded_step(J, loss, prog["adamw"], mesh, specs)
    psh, osh, bsh = shardings(J, mesh, specs)
    place = lambda tree, sh: J.tree_util.tree_map(J.device_put, tree, sh)
    params = place(params0, psh)
    # AdamW's zeros made on the host: placing a one-device array on a mesh slices it on device
    opt = place(J.tree_util.tree_map(np.asarray, prog["init_opt"](params0)), osh)
    before = [spec_of(p) for p in J.tree_util.tree_leaves(params)]
    put = lambda a: J.device_put(a, bsh)
    compiled = step.lower(params, opt, put(xs[0]), put(ys[0])).compile()
    losses = []
    for x, y in zip(xs, ys):
        params, opt, value = compiled(params, opt, put(x), put(y))
        losses.append(value)
    losses = [float(v) for v in losses]
    hlo = compiled.as_text()
    batch_bytes = 2 * xs[0].nbytes // n_data
    return {"losses": losses, "collectives": count_collectives(hlo),
            "bytes": hlo_bytes(hlo), "bytes_per_step": sum(hlo_bytes(hlo).values()),
            "param_bytes_per_device": int(compiled.memory_analysis().argument_size_in_bytes
                                          - batch_bytes),
            "specs_before": before,
            "specs_after": [spec_of(p) for p in J.tree_util.tree_leaves(params)],
            "loss_spec": spec_of(value),
            "call": (compiled, (params, opt, put(xs[0]), put(ys[0]))), "specs": specs,
            "step": step}


def sharded_grads(J, strategy: str, style: str, cfg: gpt.Config, params0: dict, x, y):
    """The gradient of `strategy`'s loss written `style`-wise in module J, computed on its
    mesh from parameters laid out as in training (for the finite-difference check)."""
    shape, names = STRATEGIES[strategy]
    mesh = J.make_mesh(shape, names, axis_types=(J.sharding.AxisType.Auto,) * len(shape))
    specs = spec_tree(strategy, params0, shape[0])
    loss = (auto_loss(J, strategy, mesh, cfg, specs) if style == "auto" else
            manual_loss(J, strategy, mesh, cfg, specs, shape[0]))
    psh, _, bsh = shardings(J, mesh, specs)
    params = J.tree_util.tree_map(J.device_put, params0, psh)
    return J.jit(J.grad(loss), in_shardings=(psh, bsh, bsh))(
        params, J.device_put(x, bsh), J.device_put(y, bsh))


# ---------------------------------------------------------------------------------------------
# Sampling with the KV cache under the tp layout
# ---------------------------------------------------------------------------------------------

def tp_sampler(J, cfg: gpt.Config, mesh, specs: dict) -> dict:
    """gpt.generate's prefill and decode for the tp layout: weights split by heads and hidden
    units over "model", each layer's cache f32[B, T, H, dh] split by heads the same way."""
    jnp = J.numpy
    forward = gpt.program(J, cfg)["forward"]
    psh = shardings(J, mesh, specs)[0]
    heads = J.sharding.NamedSharding(mesh, J.P(None, None, MODEL))

    def prefill(params, prompt):
        zeros = jnp.zeros((prompt.shape[0], cfg.block, cfg.n_head, cfg.head_dim), np.float32)
        cache = J.lax.with_sharding_constraint(zeros, heads)
        logits, _, caches = forward(params, prompt, [(cache, cache)] * cfg.n_layer, 0)
        return jnp.argmax(logits[:, -1], axis=-1).astype(np.int32), caches

    def decode(params, caches, tok, pos):
        logits, _, caches = forward(params, tok[:, None], caches, pos)
        return logits[:, 0], jnp.argmax(logits[:, 0], axis=-1).astype(np.int32), caches
    return {"prefill": J.jit(prefill, in_shardings=(psh, None)),
            "decode": J.jit(decode, in_shardings=(psh, None, None, None)), "shardings": psh}


def kv_cache_check(res: TopicResult, cfg: gpt.Config, data: gpt.CharData,
                   trained: dict) -> bool:
    """Greedy tokens with the KV cache under tp (both modules) == one device's."""
    prompt = np.stack([data.encode("the "), data.train[:4]]).astype(np.int32)
    n_new = cfg.block - prompt.shape[1]
    want = gpt.generate(gpt.program(jax, cfg), trained, prompt, n_new, cfg.block)
    mega = megatron_layout(jax.tree_util.tree_map(np.asarray, trained))
    shape, axes = STRATEGIES["tp"]
    ok = True
    for name, J in MODULES:
        mesh = J.make_mesh(shape, axes, axis_types=(J.sharding.AxisType.Auto,) * 2)
        prog = tp_sampler(J, cfg, mesh, spec_tree("tp", mega, shape[0]))
        params = J.tree_util.tree_map(J.device_put, mega, prog["shardings"])
        got = gpt.generate(prog, params, prompt, n_new, cfg.block)
        _, caches = prog["prefill"](params, prompt)
        split = spec_of(caches[0][0]) == (None, None, MODEL)
        ok &= res.check_true(f"KV-cache sampling under tp ({name}) gives one device's "
                             f"{got.size} tokens; the cache is split by heads", bool(
                                 np.array_equal(got, want)) and split)
    return ok


# ---------------------------------------------------------------------------------------------
# The same model in Flax NNX, FSDP over real JAX
# ---------------------------------------------------------------------------------------------

def nnx_fsdp(cfg: gpt.Config, params0: dict, xs, ys) -> dict:
    """compare/_gpt_nnx.py's GPT with each nnx.Param annotated `out_sharding` (its first
    dimension divisible by 8 split over "data", NNX's own partitioning metadata), laid out
    by `nnx.get_named_sharding`, trained by its `nnx.jit` step on batches split over "data".
    Returns the losses and the kernels' specs before and after."""
    from flax import nnx

    from compare import _gpt_nnx as gpt_nnx
    mesh = jax.make_mesh((8,), (DATA,), axis_types=(jax.sharding.AxisType.Auto,))
    model = gpt_nnx.GPT(cfg, params0)
    for _, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Param):
            var.set_metadata(out_sharding=leaf_spec("fsdp", "", var.shape, 8), mesh=mesh)
    state = nnx.state(model)
    nnx.update(model, jax.device_put(state, nnx.get_named_sharding(state, mesh)))
    kernels = lambda: [spec_of(v) for v in jax.tree.leaves(nnx.state(model))]
    before = kernels()
    opt = gpt_nnx.make_optimizer(model, cfg)  # its moments follow the parameters' layout
    # its step counters are made on one device: replicate them over the mesh now, or the
    # second step (which gets them back from the mesh) would compile the step again
    rep = jax.sharding.NamedSharding(mesh, jax.P())
    counts = nnx.state(opt, nnx.optimizer.OptState)
    nnx.update(opt, jax.tree.map(lambda v: v if v.ndim else jax.device_put(v, rep), counts))
    batch = jax.sharding.NamedSharding(mesh, jax.P(DATA))
    losses = [float(gpt_nnx.train_step(model, opt, jax.device_put(x, batch),
                                       jax.device_put(y, batch))) for x, y in zip(xs, ys)]
    m_specs = [spec_of(v) for v in jax.tree.leaves(nnx.state(opt, nnx.optimizer.OptState))
               if np.ndim(v) >= 1]
    return {"losses": losses, "specs_before": before, "specs_after": kernels(),
            "opt_specs": m_specs}


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

def sizes(quick: bool, vocab: int) -> tuple[gpt.Config, moe.MoEConfig]:
    """A small GPT (4 heads so that "model" = 4 splits them; batch a multiple of 8)."""
    if quick:
        cfg = gpt.Config(vocab=vocab, n_layer=1, d_model=32, n_head=4, block=16, batch=16,
                         steps=3, warmup=1)
    else:
        cfg = gpt.Config(vocab=vocab, n_layer=2, d_model=64, n_head=4, block=32, batch=16,
                         steps=6, warmup=2)
    return cfg, moe.MoEConfig(n_experts=8, top_k=2, d_expert=2 * cfg.d_model)


def run(quick: bool = False, text: str | None = None) -> TopicResult:
    res = TopicResult("The sharded transformer: dp, fsdp, tp, fsdp_tp, ep, pipelines on 8 "
                      "devices")
    res.chapter = "chapters/25-sharded-transformer.md"
    res.devices = jax.device_count()
    t_start = time.perf_counter()
    raw, source = gpt.load_text(text)
    data = gpt.CharData.from_text(raw[:200_000] if quick else raw)
    cfg, mcfg = sizes(quick, len(data.chars))
    xs, ys = gpt.batches(data.train, cfg.steps, cfg.batch, cfg.block, 1)
    dense0, moe0 = gpt.init_params(cfg), moe.init_params(cfg, mcfg)

    names = [f"{s}_{st}" for s in STRATEGIES for st in ("auto", "manual")]
    single = _single_device(res, dense0, moe0, mcfg, names, cfg, xs, ys, quick)
    entries, calls, rows, remat, formulas = _strategies(res, names, moe0, dense0, single, cfg, xs,
                                                        ys, mcfg)

    checked = _gradient_and_phases(res, names, dense0, cfg, xs, ys, entries, quick)

    ratios, min_ratios = _step_times(res, calls, quick, names, entries)

    pipeline_section = _nnx_pipeline_record(res, cfg, data, single, dense0, xs, ys, quick, entries,
                                            formulas, ratios, min_ratios)
    _describe(res, t_start, dense0, source, cfg, mcfg, checked, ratios, min_ratios, rows, remat,
              pipeline_section)
    return res


def _single_device(res, dense0, moe0, mcfg, names, cfg, xs, ys, quick):
    """The one-device runs the strategies are checked against: compare/gpt.py's program (and
    compare/moe.py's for ep), unchanged; at full size also the Megatron layout on one device."""
    # The single-device runs: compare/gpt.py's (and compare/moe.py's) program, unchanged.
    single = {}
    kinds = (("dense", dense0, {}),
             ("moe", moe0, dict(mlp=moe.make_moe_mlp(mcfg), aux_weight=mcfg.aux_weight)))
    for kind, p0, kw in kinds[:2 if any(n.startswith("ep") for n in names) else 1]:
        prog = gpt.program(jax, cfg, **kw)
        params, opt, losses = jax.device_put(p0), None, []
        opt = prog["init_opt"](params)
        for x, y in zip(xs, ys):
            params, opt, value = prog["step"](params, opt, x, y)
            losses.append(float(value))
        single[kind] = {"losses": losses, "params": params}
    if not quick:  # (the chapter runs this check at the quick sizes)
        res.check("the Megatron layout is the same model (one device, minijax, dense)",
                  one_device_losses(minijax, cfg, megatron_layout(dense0), xs, ys),
                  single["dense"]["losses"], rtol=1e-5, atol=0)
    return single


def _strategies(res, names, moe0, dense0, single, cfg, xs, ys, mcfg):
    """Every strategy in both styles and both modules: losses against one device's and each
    other's, shardings, collectives and their bytes against the textbook formula."""
    entries, calls, rows, remat, formulas = {}, {}, [], {}, {}
    for name in names:
        strategy, style = name.rsplit("_", 1)
        p0 = megatron_layout(moe0 if strategy == "ep" else dense0)
        ref = single["moe" if strategy == "ep" else "dense"]["losses"]
        with xla_log_lines(_REMAT_LOG) as lines:  # XLA's partitioner, for both modules
            out = {m: train_sharded(J, strategy, style, cfg, p0, xs, ys, mcfg)
                   for m, J in MODULES}
        if lines:
            remat[name] = len(lines)
        for m in ("minijax", "jax"):
            r = np.abs(np.subtract(out[m]["losses"], ref)) / np.abs(ref)
            first = next((i for i, v in enumerate(r) if v > 1e-4), None)
            res.check(f"{name} ({m}): losses equal one device's (1e-4 relative; first step "
                      f"over: {first}, largest {r.max():.2g})", out[m]["losses"], ref,
                      rtol=1e-4, atol=0)
        mj, jx = out["minijax"], out["jax"]
        res.check(f"{name}: minijax's losses equal JAX's", mj["losses"], jx["losses"],
                  rtol=1e-5, atol=0)
        res.check_true(f"{name}: parameter shardings equal JAX's, before and after a step",
                       mj["specs_before"] == jx["specs_before"] and
                       mj["specs_after"] == jx["specs_after"] == jx["specs_before"] and
                       mj["loss_spec"] == jx["loss_spec"])
        res.check_true(f"{name}: compiled collectives equal JAX's "
                       f"({fmt_counts(jx['collectives'])})",
                       mj["collectives"] == jx["collectives"])
        want = formulas[name] = predicted_bytes(strategy, cfg, p0, mcfg)
        res.check(f"{name}: minijax's HLO bytes per collective kind equal JAX's",
                  [mj["bytes"][k] for k in sorted(jx["bytes"])],
                  [jx["bytes"][k] for k in sorted(jx["bytes"])], rtol=0, atol=0)
        for m in ("minijax", "jax") if style == "manual" else ():
            got = out[m]["bytes_per_step"]
            res.check_true(f"{name} ({m}): HLO bytes per step {got:,.0f} match the textbook "
                           f"formula {want:,.0f} (within 2% + 1 KiB of scalars)",
                           abs(got - want) <= 0.02 * want + 1024)
        calls[f"{name}, minijax"] = _blocking(minijax, *mj["call"])
        calls[f"{name}, jax"] = _blocking(jax, *jx["call"])
        entries[name] = out
        rows.append([name, fmt_counts(jx["collectives"]), f"{jx['bytes_per_step']:,.0f}",
                     f"{want:,.0f}",
                     f"{jx['param_bytes_per_device']:,}"])
    return entries, calls, rows, remat, formulas


def _gradient_and_phases(res, names, dense0, cfg, xs, ys, entries, quick):
    """The gradient of the first dense strategy against float64 central differences of the one-
    device model, and where its step's time goes."""
    # the gradient of the first dense strategy against float64 central differences of the
    # one-device model, and where its step's time goes
    name = next(n for n in names if not n.startswith("ep"))
    strategy, style = name.rsplit("_", 1)
    p0 = megatron_layout(dense0)
    with xla_log_lines(_REMAT_LOG):  # compiled again: the same messages, once
        checked = [finite_differences(
            res, f"{name} loss", gpt.program(jax, cfg)["loss"], p0, (xs[0], ys[0]),
            {m: sharded_grads(J, strategy, style, cfg, p0, xs[0], ys[0]) for m, J in MODULES}),
            phase_times(res, f"{name} step", {m: (entries[name][m]["step"],
                                                   entries[name][m]["call"][1])
                                              for m, _ in MODULES}, repeat=1 if quick else 3)]
    return checked


def _step_times(res, calls, quick, names, entries):
    """The steps of every strategy timed interleaved (a strategy's two steps back to back in
    each round, so the ratio of one round sees one load), and FSDP's memory against DP's."""
    # a strategy's two steps run back to back in each round (in either order), so the ratio
    # of the two times of one round sees one load: its median over the rounds is reported
    times = interleaved_times(calls, repeat=3 if quick else 60, warmup=1)
    ratios, min_ratios = {}, {}
    for name in names:
        raw_m, raw_j = times[f"{name}, minijax"], times[f"{name}, jax"]
        tm, tj = ms_of(raw_m), ms_of(raw_j)
        res.timings_ms[f"{name} step: minijax"] = tm
        res.timings_ms[f"{name} step: jax"] = tj
        ratios[name] = float(np.median(np.divide(raw_m, raw_j)))
        min_ratios[name] = min(raw_m) / min(raw_j)  # shown beside it, not checked
        for m, t in (("minijax", tm), ("jax", tj)):
            entries[name][m]["step_ms"] = float(t)
    if not quick:
        for name, r in ratios.items():
            res.check_target(f"{name}: step time minijax/JAX {r:.3f} <= 1.05", r <= 1.05)
    mem = {n: entries[n]["jax"]["param_bytes_per_device"] for n in entries}
    if "dp_manual" in mem and "fsdp_manual" in mem:
        res.check_true(f"FSDP holds about 1/8 of DP's parameter + optimizer bytes per device "
                       f"({mem['fsdp_manual'] / mem['dp_manual']:.3f})",
                       abs(mem["fsdp_manual"] / mem["dp_manual"] - 1 / 8) < 0.02)
    return ratios, min_ratios


def _nnx_pipeline_record(res, cfg, data, single, dense0, xs, ys, quick, entries, formulas, ratios,
                         min_ratios):
    """The KV-cache check, the nnx FSDP run, the pipelines, and the numbers kept in the result's
    extras."""
    kv_equal = kv_cache_check(res, cfg, data, single["dense"]["params"])
    nnx_run = nnx_fsdp(cfg, dense0, xs, ys)
    res.check("nnx (FSDP annotations, nnx.jit): losses equal one device's (1e-4 relative)",
              nnx_run["losses"], single["dense"]["losses"], rtol=1e-4, atol=0)
    res.check_true("nnx: every parameter and AdamW moment stays split over 'data'", all(
        DATA in s for s in nnx_run["specs_before"] + nnx_run["specs_after"] +
        nnx_run["opt_specs"]) and nnx_run["specs_before"] == nnx_run["specs_after"])
    pipeline, pipeline_section = _pipeline.run(res, data, quick)
    keys = ("losses", "step_ms", "collectives", "bytes", "bytes_per_step",
            "param_bytes_per_device")
    res.extra = {"single_device": {"losses": single["dense"]["losses"]},
                 "single_device_moe": {"losses": single.get("moe", {}).get("losses")},
                 "strategies": {n: {m: {k: e[m][k] for k in keys} for m in ("minijax", "jax")}
                                for n, e in entries.items()},
                 "formulas": formulas, "pipeline": pipeline,
                 "nnx": {"losses": nnx_run["losses"]}, "kv_cache_equal": kv_equal,
                 "step_time_ratios_minijax_over_jax": ratios,
                 "step_time_min_ratios_minijax_over_jax": min_ratios}
    return pipeline_section


def _describe(res, t_start, dense0, source, cfg, mcfg, checked, ratios, min_ratios, rows, remat,
              pipeline_section):
    """The setup section with the strategies' table, and the partitioner's rematerialization
    note where XLA logged one."""
    wall = time.perf_counter() - t_start
    n_params = sum(np.size(v) for v in jax.tree_util.tree_leaves(dense0))
    res.sections.append(
        "### Setup\n\n"
        f"Data: {source}. The GPT of the `gpt` topic at {cfg.n_layer} layers, d={cfg.d_model}, "
        f"{cfg.n_head} heads, T={cfg.block}, vocabulary {cfg.vocab} ({n_params:,} parameters), "
        f"batch {cfg.batch}, {cfg.steps} AdamW steps; the MoE (for `ep`) with "
        f"{mcfg.n_experts} experts of width {mcfg.d_expert}, top-{mcfg.top_k}. Whole topic: "
        f"{wall:.0f} s.\n\n"
        + table(["strategy", "JAX collectives (minijax: equal where checked)",
                 "HLO bytes/step/device", "textbook formula", "param+opt bytes/device",
                 "minijax / JAX step time (of minimums)"],
                [r + [f"{ratios[r[0]]:.3f} ({min_ratios[r[0]]:.3f})"] for r in rows])
        + "\n\nTimes are interleaved: each round runs every strategy's minijax step and "
        "its JAX step back to back (every other round JAX first), and the ratio is the median "
        "over the rounds of the two steps' ratio within a round (so both saw the same load); "
        "in parentheses, the ratio of the two steps' fastest rounds (for information: the "
        "check reads the median). Eight CPU devices share this machine's "
        "cores: the times are noisy, and nothing here overlaps communication with compute."
        "\n\nThe formula is the textbook bill of each layout (`predicted_bytes`, from the sizes "
        "alone), the same for both styles; it is checked against the hand-written programs. "
        "The partitioner's programs send more where it picks another plan: fsdp_auto and "
        "fsdp_tp_auto return the gradients by an all-reduce and a slice instead of a "
        "reduce-scatter, tp_auto and fsdp_tp_auto reduce the q, k and v cotangents one by one, "
        "ep_auto also gathers routing tensors and expert weights (chapter 25).")
    if remat:
        where = ", ".join(f"{n} ({k})" for n, k in remat.items())
        print(f"   XLA logged '{_REMAT_LOG}' while compiling {where}: expected, see the "
              "report's setup section", flush=True)
        res.sections[-1] += (
            f"\n\nWhile compiling {where} (counts for both modules together), XLA's SPMD "
            f"partitioner logged `{_REMAT_LOG}` (collected here instead of on the console). "
            "An intermediate of the step is laid out split over its trailing dimensions and "
            "is needed split over its leading (batch) dimension; the partitioner finds no direct "
            "resharding between the two layouts, so it gathers the whole array on every "
            "device and slices it again. The values are right and the program is the same "
            "for JAX and minijax; it costs one intermediate's worth of memory and an "
            "all-gather per occurrence.")
    res.sections += checked + [pipeline_section]


_REMAT_LOG = "[SPMD] Involuntary full rematerialization"


def one_device_losses(J, cfg, params0, xs, ys) -> list[float]:
    """gpt.program's training step on one device, from `params0` (either q, k, v layout)."""
    prog = gpt.program(J, cfg)
    params = J.device_put(params0)
    opt, out = prog["init_opt"](params), []
    for x, y in zip(xs, ys):
        params, opt, value = prog["step"](params, opt, x, y)
        out.append(value)
    return [float(v) for v in out]


def _blocking(J, compiled, args):
    return lambda: J.block_until_ready(compiled(*args))


def main(argv=None) -> int:
    import argparse

    from compare._report import write_json, write_report
    p = argparse.ArgumentParser(prog="python -m compare.gpt_sharded")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    res = run(quick=args.quick)
    print(f"report: {write_report({'gpt_sharded': res})}")
    if args.json:
        write_json({"gpt_sharded": res}, args.json)
    bad = [c.name for c in res.checks if not c.ok]
    print(f"{len(res.checks) - len(bad)}/{len(res.checks)} checks passed", *bad, sep="\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
