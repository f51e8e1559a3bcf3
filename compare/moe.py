"""moe: a mixture-of-experts layer in the MLP slot of the character GPT (chapter 21), trained
step for step through minijax and real JAX, next to the dense GPT.

The layer, written once against a module alias `J` (GShard/Switch style):

- a **router** `h @ w_router` and its softmax give each token a distribution over E experts;
- **top-k gating**: each token goes to its k most probable experts, with those probabilities
  (renormalized over the k) as gates;
- a **capacity** of C = ceil(capacity_factor * k * S / E) tokens per expert and group (a group
  is one sequence of S tokens); positions are given in order, all first choices before any
  second choice; a token past an expert's capacity is **dropped** there (the residual
  connection carries it on), and the layer counts the drops;
- **dispatch and combine as einsums** over one-hot tensors: `dispatch[g,s,e,c]` is 1 where
  token s of group g sits in slot c of expert e, `combine` the same with the gate as value;
  experts run batched over `[E, G, C, d]`;
- the **load-balancing loss** of Switch Transformers, E * sum_e f_e * P_e (f_e the fraction
  of tokens whose first choice is e, P_e the mean router probability of e), minimal when the
  router spreads tokens evenly.

Beside it, `make_ragged_moe_mlp` is the same layer without capacity: (token, choice)
assignments sorted by expert and each expert matmul one `lax.ragged_dot` (chapter 28); it
equals the einsum layer wherever that drops nothing.

It is checked against a plain loop over experts (each expert on every token, masked by a
keep-mask that a loop over tokens in numpy computes) for values and gradients, and the dropped
count against that numpy loop. The MoE GPT should reach a validation loss within 5% of the
dense one trained alongside it on the same batches.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from compare import gpt
from compare._modules import MODULES
from compare._report import OUT_DIR, TopicResult


@dataclasses.dataclass(frozen=True)
class MoEConfig:
    n_experts: int = 4
    top_k: int = 2
    capacity_factor: float = 1.25
    d_expert: int = 256      # each expert's hidden width (top-2 of 2d = the dense 4d's FLOPs)
    aux_weight: float = 0.01

    def capacity(self, group: int) -> int:
        return int(math.ceil(self.capacity_factor * self.top_k * group / self.n_experts))


def init_params(cfg: gpt.Config, mcfg: MoEConfig, seed: int = 0) -> dict:
    """The GPT's parameters with each block's MLP replaced by a router and E experts."""
    params = gpt.init_params(cfg, seed)
    rng = np.random.RandomState(seed + 100)
    d, E, f = cfg.d_model, mcfg.n_experts, mcfg.d_expert
    normal = lambda *s, std=0.02: (rng.standard_normal(s) * std).astype(np.float32)
    for blk in params["blocks"]:
        for k in ("w_fc", "b_fc", "w_proj", "b_proj"):
            del blk[k]
        blk.update(w_router=normal(d, E), w1=normal(E, d, f), b1=np.zeros((E, f), np.float32),
                   w2=normal(E, f, d, std=0.02 / math.sqrt(2 * cfg.n_layer)),
                   b2=np.zeros((E, d), np.float32))
    return params


def routing(J, mcfg: MoEConfig, blk, h):
    """h f32[G,S,d] -> (probs f32[G,S,E], gates f32[G,S,k], experts int32[G,S,k])."""
    jnp = J.numpy
    probs = J.nn.softmax(h @ blk["w_router"], axis=-1)
    gates, experts = J.lax.top_k(probs, mcfg.top_k)
    return probs, gates / jnp.sum(gates, axis=-1, keepdims=True), experts


def dispatch_tensors(J, mcfg: MoEConfig, gates, experts, C: int):
    """(combine f32[G,S,E,C], dispatch f32[G,S,E,C], dropped int32[]): slot positions by a
    cumulative sum over the group, choice 0 of every token before choice 1."""
    jnp = J.numpy
    E = mcfg.n_experts
    combine, dropped = 0.0, 0
    filled = jnp.zeros(experts.shape[:1] + (1, E), np.int32)  # [G,1,E] slots used so far
    for j in range(mcfg.top_k):
        mask = J.nn.one_hot(experts[..., j], E, dtype=np.int32)          # [G,S,E]
        pos = (jnp.cumsum(mask, axis=1) - 1 + filled) * mask             # slot of each token
        keep = mask * (pos < C)
        dropped = dropped + jnp.sum(mask - keep)
        filled = filled + jnp.sum(mask, axis=1, keepdims=True)
        slot = J.nn.one_hot(pos, C) * keep[..., None]                    # [G,S,E,C]
        combine = combine + gates[..., j, None, None] * slot
    return combine, (combine > 0).astype(np.float32), dropped


def expert_mlp(J, blk, x):
    """x f32[E,...,d] -> f32[E,...,d]: expert e's MLP on x[e]."""
    jnp = J.numpy
    hid = J.nn.gelu(jnp.einsum("egcd,edf->egcf", x, blk["w1"]) + blk["b1"][:, None, None])
    return jnp.einsum("egcf,efd->egcd", hid, blk["w2"]) + blk["b2"][:, None, None]


def make_moe_mlp(mcfg: MoEConfig, to_experts=None, from_experts=None, group_mean=None):
    """The `mlp` hook of gpt.program: (y, {"lb", "dropped"}).

    The three hooks (identities by default) place the layer on a mesh (compare/gpt_sharded.py):
    `to_experts(x)` / `from_experts(y)` move the [E,G,C,d] expert slots to the devices that
    hold their experts and back, `group_mean(v)` finishes a mean over groups of which a device
    sees only its share."""
    to_experts, from_experts, group_mean = (f or (lambda v: v) for f in
                                            (to_experts, from_experts, group_mean))

    def moe_mlp(J, blk, h):
        jnp = J.numpy
        G, S, d = h.shape
        E = mcfg.n_experts
        probs, gates, experts = routing(J, mcfg, blk, h)
        combine, dispatch, dropped = dispatch_tensors(J, mcfg, gates, experts,
                                                      mcfg.capacity(S))
        x = to_experts(jnp.einsum("gsec,gsd->egcd", dispatch, h))        # [E,G,C,d]
        y = jnp.einsum("gsec,egcd->gsd", combine, from_experts(expert_mlp(J, blk, x)))
        frac = jnp.mean(J.nn.one_hot(experts[..., 0], E), axis=(0, 1))   # f_e (no gradient)
        lb = E * jnp.sum(group_mean(frac) * group_mean(jnp.mean(probs, axis=(0, 1))))
        return y, {"lb": lb, "dropped": dropped}
    return moe_mlp


def make_ragged_moe_mlp(mcfg: MoEConfig):
    """The same layer without capacity: every (token, choice) assignment is kept. The
    assignments are sorted by expert, so expert e's tokens are one run of rows, and each
    expert matmul is one `lax.ragged_dot` over the runs (chapter 28); the results are put
    back in token order and summed with the gates. Equal to `make_moe_mlp`'s output when
    nothing is dropped there."""

    def ragged_moe_mlp(J, blk, h):
        jnp, lax = J.numpy, J.lax
        G, S, d = h.shape
        E, k = mcfg.n_experts, mcfg.top_k
        probs, gates, experts = routing(J, mcfg, blk, h)
        flat = experts.reshape(-1)                               # [N*k], token-major
        order = jnp.argsort(flat, stable=True)                   # assignments by expert
        sizes = jnp.sum(J.nn.one_hot(flat, E, dtype=np.int32), axis=0)
        e_sorted = flat[order]
        x = h.reshape(G * S, d)[order // k]                      # [N*k, d], runs per expert
        hid = J.nn.gelu(lax.ragged_dot(x, blk["w1"], sizes) + blk["b1"][e_sorted])
        out = lax.ragged_dot(hid, blk["w2"], sizes) + blk["b2"][e_sorted]
        out = out[jnp.argsort(order)].reshape(G, S, k, d)        # back to (token, choice)
        y = jnp.sum(gates[..., None] * out, axis=2)
        frac = jnp.mean(J.nn.one_hot(experts[..., 0], E), axis=(0, 1))
        lb = E * jnp.sum(frac * jnp.mean(probs, axis=(0, 1)))
        return y, {"lb": lb, "dropped": jnp.zeros((), np.int32)}
    return ragged_moe_mlp


def ragged_checks(res: TopicResult, mcfg: MoEConfig, d: int = 16, G: int = 2, S: int = 16):
    """The ragged_dot path against the einsum path with a capacity that drops nothing."""
    rng = np.random.RandomState(11)
    cfg = gpt.Config(vocab=5, n_layer=1, d_model=d, n_head=2, block=S)
    m = dataclasses.replace(mcfg, d_expert=2 * d,
                            capacity_factor=mcfg.n_experts / mcfg.top_k)  # C = S: no drops
    blk = init_params(cfg, m, seed=6)["blocks"][0]
    blk = {k: v * 25 if k == "w_router" else v * 10 for k, v in blk.items()}
    h = rng.standard_normal((G, S, d)).astype(np.float32)
    einsum, ragged = make_moe_mlp(m), make_ragged_moe_mlp(m)
    for name, J in MODULES:
        y, aux = J.jit(lambda b, x, J=J: einsum(J, b, x))(blk, h)  # jitted, as layer_checks
        res.check_true(f"{name}: the einsum path drops nothing at capacity C = S",
                       int(aux["dropped"]) == 0)
        res.check(f"{name}: ragged_dot path == einsum path (values)",
                  J.jit(lambda b, x, J=J: ragged(J, b, x)[0])(blk, h), y,
                  rtol=1e-4, atol=1e-5)
        loss = lambda mlp, J=J: lambda b, h: J.numpy.sum(J.numpy.tanh(mlp(J, b, h)[0]))
        res.check(f"{name}: ragged_dot path == einsum path (gradients)",
                  J.jit(J.grad(loss(ragged), (0, 1)))(blk, h),
                  J.jit(J.grad(loss(einsum), (0, 1)))(blk, h),
                  rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# The reference: a loop over experts, the capacity by a loop over tokens
# ---------------------------------------------------------------------------------------------

def keep_mask_loop(experts: np.ndarray, E: int, C: int) -> np.ndarray:
    """bool[G,S,k]: does choice j of token s get a slot? A plain loop: choice 0 of every
    token, in order, then choice 1, ..., each expert taking at most C tokens per group."""
    G, S, k = experts.shape
    keep = np.zeros((G, S, k), bool)
    for g in range(G):
        used = [0] * E
        for j in range(k):
            for s in range(S):
                e = int(experts[g, s, j])
                if used[e] < C:
                    keep[g, s, j] = True
                    used[e] += 1
    return keep


def moe_reference(J, mcfg: MoEConfig, blk, h, keep: np.ndarray):
    """The layer's output without dispatch tensors: every expert on every token, weighted by
    its gate where the token chose it and was kept."""
    jnp = J.numpy
    _, gates, experts = routing(J, mcfg, blk, h)
    y = 0.0
    for e in range(mcfg.n_experts):
        w = jnp.sum(jnp.where((experts == e) & keep, gates, 0.0), axis=-1)  # [G,S]
        out = expert_mlp(J, {k: blk[k][e:e + 1] for k in ("w1", "b1", "w2", "b2")},
                         h[None])[0]
        y = y + w[..., None] * out
    return y


def layer_checks(res: TopicResult, mcfg: MoEConfig, d: int = 16, G: int = 3, S: int = 16):
    """The einsum layer against the loop reference, for values, gradients and drop counts."""
    rng = np.random.RandomState(7)
    cfg = gpt.Config(vocab=5, n_layer=1, d_model=d, n_head=2, block=S)
    m = dataclasses.replace(mcfg, d_expert=2 * d)
    blk = init_params(cfg, m, seed=5)["blocks"][0]
    blk = {k: v * 25 if k == "w_router" else v * 10 for k, v in blk.items()}  # peaked routes
    h = rng.standard_normal((G, S, d)).astype(np.float32)
    C = m.capacity(S)
    moe = make_moe_mlp(m)
    # every program below is jitted: JAX's eager mode compiles each primitive on its own
    _, _, experts = jax.jit(lambda b, x: routing(jax, m, b, x))(blk, h)
    keep = keep_mask_loop(np.asarray(experts), m.n_experts, C)
    want_dropped = int((~keep).sum())
    out = {}
    for name, J in MODULES:
        y, aux = J.jit(lambda b, x, J=J: moe(J, b, x))(blk, h)
        ref = J.jit(lambda b, x, J=J: moe_reference(J, m, b, x, keep))(blk, h)
        res.check(f"{name}: MoE layer == loop over experts (values)", y, ref, rtol=1e-4,
                  atol=1e-5)
        res.check_true(f"{name}: dropped tokens == numpy loop ({want_dropped})",
                       int(aux["dropped"]) == want_dropped)
        def loss(b, h, J=J):
            return J.numpy.sum(J.numpy.tanh(moe(J, b, h)[0]))

        def ref_loss(b, h, J=J):
            return J.numpy.sum(J.numpy.tanh(moe_reference(J, m, b, h, keep)))
        g, g_ref = (J.jit(J.grad(f, (0, 1)))(blk, h) for f in (loss, ref_loss))
        res.check(f"{name}: MoE layer == loop over experts (gradients)", g, g_ref, rtol=1e-4,
                  atol=1e-5)
        out[name] = (y, g)
    res.check("MoE layer and gradients agree across modules", out["minijax"], out["jax"],
              rtol=1e-4, atol=1e-5)
    return want_dropped, G * S * m.top_k


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

def dropped_fraction(J, prog, params, val, n_layer: int, k: int) -> float:
    """Fraction of (token, choice) assignments dropped over the validation batches."""
    if "dropped" not in prog:  # one compile per module, reused for other parameters
        prog["dropped"] = J.jit(lambda p, x: prog["forward"](p, x)[1]["dropped"])
    fwd = prog["dropped"]
    xs, _ = val
    total = sum(int(fwd(params, x)) for x in xs)
    return total / (len(xs) * xs[0].size * n_layer * k)


def run(quick: bool = False, text: str | None = None) -> TopicResult:
    res = TopicResult("Mixture-of-experts GPT: router, top-k, capacity, dispatch einsums")
    res.chapter = "chapters/21-mixture-of-experts.md"
    t_start = time.perf_counter()
    raw, source = gpt.load_text(text)
    if quick:
        raw = raw[:200_000]
    data = gpt.CharData.from_text(raw)
    if quick:
        cfg, eval_every, n_val, reps = gpt.quick_config(len(data.chars)), 6, 2, 5
        mcfg = MoEConfig(d_expert=2 * cfg.d_model)
    else:
        cfg, eval_every, n_val, reps = gpt.Config(vocab=len(data.chars)), 100, 16, 30
        mcfg = MoEConfig(d_expert=2 * cfg.d_model)
    lay_dropped, lay_total = layer_checks(res, mcfg)
    ragged_checks(res, mcfg)

    moe_mlp = make_moe_mlp(mcfg)
    p_moe = init_params(cfg, mcfg)
    runners = {name: gpt.raw_runner(J, cfg, p_moe, mlp=moe_mlp, aux_weight=mcfg.aux_weight)
               for name, J in MODULES}
    if not quick:  # the dense GPT on the same batches, for the 5% criterion
        runners["dense (jax)"] = gpt.raw_runner(jax, cfg, gpt.init_params(cfg))
    runs = gpt.train(runners, cfg, data, eval_every=eval_every, n_val=n_val, quiet=quick,
                     desc="moe")
    rel, first_diff, final_val, gap = _training_checks(res, runs, quick, mcfg, cfg)

    dropped = _dropped_tokens(res, data, n_val, cfg, runners, runs, mcfg)

    # Profile: the compiled steps (MoE minijax, MoE JAX, dense JAX if trained), interleaved.
    med, ratio, stages, trace_path, top_ops, plot = _profile(res, data, cfg, runners, p_moe, reps,
                                                             quick, runs)
    wall = time.perf_counter() - t_start

    _record(res, runs, final_val, med, dropped, stages, first_diff, rel, quick, ratio, lay_dropped,
            gap)
    _describe(res, mcfg, cfg, top_ops, source, wall, dropped, runs, final_val, med, gap,
              lay_dropped, lay_total, rel, first_diff, plot, reps, ratio, stages, quick, trace_path)
    return res


def _training_checks(res, runs, quick, mcfg, cfg):
    """The trained runs checked: per-step and validation losses of the two modules, the loss
    falling, the gap to the dense GPT (full size), and gradients of a tiny MoE GPT."""
    mj, jx = runs["minijax"], runs["jax"]
    # Routing is discontinuous: a last-bit difference in one router probability that sits at a
    # top-k or capacity boundary would flip a token to another expert and send the two runs
    # down different trajectories. The steps are bit-identical (both modules emit the same
    # dot_general dimension orders), so every step must agree, to 1e-4 relative.
    rel = np.abs(np.subtract(mj["losses"], jx["losses"])) / np.array(jx["losses"])
    differ = np.flatnonzero(np.asarray(mj["losses"]) != np.asarray(jx["losses"]))
    first_diff = int(differ[0]) if differ.size else None
    res.check(f"per-step losses agree, all {len(rel)} steps (1e-4 relative)", mj["losses"],
              jx["losses"], rtol=1e-4, atol=0)
    res.check("final validation losses agree (1e-4 relative)", mj["val"][-1][1],
              jx["val"][-1][1], rtol=1e-4, atol=0)
    final_val = {n: r["val"][-1][1] for n, r in runs.items()}
    res.check_true("validation loss fell by > 0.2 nats (all)", all(
        r["val"][-1][1] < r["losses"][0] - 0.2 for r in runs.values()))
    gap = None
    if not quick:
        gap = final_val["jax"] / final_val["dense (jax)"] - 1
        res.check_true("MoE val loss within 5% of the dense GPT's", gap <= 0.05)
    tiny = dataclasses.replace(mcfg, d_expert=8)
    gpt.tiny_grad_checks(res, cfg, mlp=make_moe_mlp(tiny), aux_weight=mcfg.aux_weight,
                         init=lambda c, seed: init_params(c, tiny, seed))
    return rel, first_diff, final_val, gap


def _dropped_tokens(res, data, n_val, cfg, runners, runs, mcfg):
    """The fraction of tokens each module's trained model drops on the validation batches, and
    the check that both drop the same tokens on the same parameters."""
    val = gpt.batches(data.val, n_val, cfg.batch, cfg.block, 2)
    dropped = {name: dropped_fraction(J, runners[name][1], runs[name]["state"][0], val,
                                      cfg.n_layer, mcfg.top_k) for name, J in MODULES}
    # On the same parameters the two modules drop exactly the same tokens.
    same = {name: dropped_fraction(J, runners[name][1], runs["jax"]["state"][0], val,
                                   cfg.n_layer, mcfg.top_k) for name, J in MODULES}
    res.check("dropped tokens agree across modules (on JAX's final parameters)",
              same["minijax"], same["jax"], rtol=0, atol=1e-9)
    return dropped


def _profile(res, data, cfg, runners, p_moe, reps, quick, runs):
    """The compiled steps timed interleaved, their stages, a Perfetto trace of JAX's step and
    the loss plot."""
    xb, yb = gpt.batches(data.train, 1, cfg.batch, cfg.block, 99)
    fns, args = {}, {}
    for name, (J, prog, _) in runners.items():
        params = J.device_put(p_moe if name != "dense (jax)" else gpt.init_params(cfg))
        args[name] = (params, prog["init_opt"](params), J.device_put(xb[0]), J.device_put(yb[0]))
        fns[name] = prog["compiled_step"]
    times = gpt.time_steps(fns, args, reps=reps)
    med = {n: statistics.median(t) for n, t in times.items()}
    ratio = med["minijax"] / med["jax"]
    stages = {n: runners[n][1]["stages"] for n in runners}
    res.timings_ms = {"jax MoE step": med["jax"], "minijax MoE step": med["minijax"],
                      "jax dense step": med.get("dense (jax)", float("nan")),
                      "ratio minijax/jax": ratio,
                      "jax trace+lower": 1e3 * stages["jax"]["trace_lower_s"],
                      "minijax trace+lower": 1e3 * stages["minijax"]["trace_lower_s"],
                      "jax compile": 1e3 * stages["jax"]["compile_s"],
                      "minijax compile": 1e3 * stages["minijax"]["compile_s"]}
    folder = Path(tempfile.mkdtemp(prefix="compare-moe-")) if quick else OUT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    trace_path, top_ops = gpt.perfetto_profile(fns["jax"], args["jax"], folder, "moe")
    res.check_true("jax.profiler wrote a Perfetto trace", trace_path is not None)
    plot = gpt.plot_losses(runs, folder, "moe", "MoE GPT vs dense: train and validation loss")
    return med, ratio, stages, trace_path, top_ops, plot


def _record(res, runs, final_val, med, dropped, stages, first_diff, rel, quick, ratio, lay_dropped,
            gap):
    """The numbers kept in the result's extras."""

    def summary(name):
        r = runs[name]
        return {"losses": [float(v) for v in r["losses"]],
                "eval": {"val_loss": float(final_val[name]),
                         "val_curve": [[int(s), float(v)] for s, v in r["val"]]},
                "step_ms": float(med[name]), "dropped_fraction": dropped.get(name),
                **{k: stages[name][k] for k in ("trace_lower_s", "compile_s", "flops",
                                                 "bytes_accessed")}}
    res.extra = {"minijax": summary("minijax"), "jax": summary("jax"),
                 "first_differing_step": first_diff, "max_rel_loss_diff": float(rel.max()),
                 **({"dense": summary("dense (jax)")} if not quick else {}),
                 "step_time_ratio": ratio,
                 "dropped_tokens": {"val_fraction": dropped, "layer_check": lay_dropped},
                 "val_gap_vs_dense": gap}


def _describe(res, mcfg, cfg, top_ops, source, wall, dropped, runs, final_val, med, gap,
              lay_dropped, lay_total, rel, first_diff, plot, reps, ratio, stages, quick,
              trace_path):
    """The sections: setup and results, loss curves, profile."""
    C = mcfg.capacity(cfg.block)
    total_us = sum(us for _, us in top_ops) or 1.0
    ops = "\n".join(f"| {n} | {us:.0f} | {us / total_us:.0%} |" for n, us in top_ops)
    res.sections.append(
        "### Setup\n\n"
        f"Data: {source}, vocabulary {cfg.vocab}. The GPT of the `gpt` topic ({cfg.n_layer} "
        f"layers, d={cfg.d_model}, T={cfg.block}, batch {cfg.batch}, {cfg.steps} steps) with "
        f"each MLP replaced by {mcfg.n_experts} experts of width {mcfg.d_expert}, top-"
        f"{mcfg.top_k} routing, capacity factor {mcfg.capacity_factor} (C={C} slots per "
        f"expert per sequence), load-balancing weight {mcfg.aux_weight}. Whole topic: "
        f"{wall:.1f} s.\n\n"
        "| run | final train loss | final val loss | dropped (val) | step ms |\n"
        "|---|---|---|---|---|\n" + "\n".join(
            f"| {n} | {runs[n]['losses'][-1]:.4f} | {final_val[n]:.4f} | "
            f"{dropped.get(n, float('nan')):.2%} | {med[n]:.2f} |" for n in runs)
        + ("" if gap is None else f"\n\nMoE vs dense validation loss: {gap:+.2%}.")
        + f" Layer check: {lay_dropped} of "
        f"{lay_total} assignments dropped, the same count as the numpy loop. Largest relative "
        f"per-step loss difference, minijax vs JAX, over all {len(rel)} steps: "
        f"**{float(rel.max()):.3g}** ("
        + ("the losses are bit-identical at every step)" if first_diff is None else
           f"bit-identical up to step {first_diff})") + ".")
    res.sections.append(f"### Loss curves\n\n![loss curves]({gpt.rel(plot)})")
    res.sections.append(
        "### Profile\n\n"
        f"Median step over {reps} interleaved calls after warm-up: MoE JAX {med['jax']:.2f} "
        f"ms, MoE minijax {med['minijax']:.2f} ms (ratio **{ratio:.3f}**). XLA's cost "
        f"analysis: MoE {stages['jax']['flops'] / 1e9:.3f} GFLOP per step"
        + ("" if quick else f", dense {stages['dense (jax)']['flops'] / 1e9:.3f}")
        + ". Perfetto trace of one MoE JAX step: "
        f"`{gpt.rel(trace_path) if trace_path else '-'}`.\n\n"
        "| kind of op | us | share |\n|---|---|---|\n" + ops)
