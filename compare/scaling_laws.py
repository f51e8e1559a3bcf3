"""scaling_laws: compute-optimal scaling from scratch — isoFLOP sweeps of the character GPT
(chapter 19) and its mixture of experts (chapter 21), trained through minijax, with the fits
and the statistics that make claims at this scale honest (chapter 27).

- **FLOPs two ways**: `6 N D` (N the parameters that multiply, D the tokens) and XLA's
  `cost_analysis()` of the compiled train step (forward, backward and AdamW), with the gap
  split into its terms: attention's `T^2` part, the optimizer, and the elementwise rest.
- **isoFLOP sweeps**: for each compute budget C, a ladder of model sizes (the width rule of
  `Sweep`), each trained on the D = C / (6 N) tokens the budget allows, with a warmup + cosine
  schedule that ends exactly at the budget, for several seeds (each seed changes the
  initialisation and the order of the batches); the score is the loss on held-out text.
- **Fits**: per budget a parabola of loss against log N gives N_opt(C) and D_opt(C) = C / (6
  N_opt); across budgets N_opt ∝ C^a and D_opt ∝ C^b; bootstrap over seeds gives intervals.
  Chinchilla's approach 3, L(N, D) = E + A / N^α + B / D^β, is fitted with a Huber loss on
  log L (scipy's L-BFGS-B), its interval from the same bootstrap.
- **Dense vs MoE** at matched active-parameter FLOPs: the MoE (top-2 of 4 experts of width
  2d, the dense MLP's 4d in active FLOPs) on the same ladder and budgets.
- **Noise**: seed-to-seed spread at every point against the loss differences the parabolas
  rest on, and the exponent refitted with each budget left out.
- **Cross-check**: one point per budget is trained through real JAX as well; the losses of
  the two modules agree step by step.

Every finished run is a JSON file in the cache folder (`compare/out/scaling_laws_cache/`),
named by a hash of everything that decides its result (the settings, the text, and the
source of minijax and of the training code: `code_digest`), so a stopped sweep resumes where
it stopped and a changed program trains again; a progress bar counts the whole sweep.
`python -m compare.scaling_laws --quick` runs the tests' sweep; `--budgets`, `--widths`,
`--seeds` change the sweep (larger budgets on an accelerator: the same code, with JAX finding
the device).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

import minijax
from compare import gpt, moe
from compare._modules import MODULES
from compare._report import OUT_DIR, TopicResult, progress

DEFAULT_CACHE = OUT_DIR / "scaling_laws_cache"
CACHE_VERSION = 2  # bump when a change to the training code changes results
_CODE_DIGEST: list[str] = []


def code_digest() -> str:
    """A hash of the code a run's record depends on besides its settings: minijax's source
    (its lowering decides the compiled step, hence the losses and XLA's FLOP count) and the
    training code here and in `gpt.py`/`moe.py`. A run cached by older code is then trained
    again instead of being read back with its old numbers."""
    if not _CODE_DIGEST:
        root = Path(__file__).resolve().parents[1]
        files = sorted((root / "minijax").rglob("*.py")) + [
            root / "compare" / n for n in ("scaling_laws.py", "gpt.py", "moe.py")]
        h = hashlib.sha1()
        for f in files:
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
        _CODE_DIGEST.append(h.hexdigest()[:12])
    return _CODE_DIGEST[0]
# Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models"), Table 2: the
# exponents of N_opt ∝ C^a and D_opt ∝ C^b by their three approaches.
CHINCHILLA = {"approach 1": (0.50, 0.50), "approach 2": (0.49, 0.51), "approach 3": (0.46, 0.54)}


# ---------------------------------------------------------------------------------------------
# The sweep: which models, which budgets
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Sweep:
    """An isoFLOP sweep. The size rule: `n_layer` blocks of width d, n_head = max(1, d // 8)
    heads, MLP width 4d (the MoE: `n_experts` experts of width 2d, top-2: the same active
    FLOPs). The widths form a ladder; budget i (budgets in increasing order) trains the
    `window` widths starting at rung `i * slide`, so the window climbs the ladder as the
    budget grows, where the optimum goes. Every model sees batches of `batch` x `block`
    characters with a linear warmup over `warmup_frac` of its steps to `peak_lr` and a cosine
    to `peak_lr / 10` at its last step, the step its budget runs out. Budgets are FLOPs
    counted as 6ND."""

    budgets: tuple[float, ...] = (6e8, 2e9, 6e9, 2e10)
    widths: tuple[int, ...] = (3, 4, 6, 8, 12, 16, 24, 32)
    window: int = 5
    slide: int = 1
    seeds: tuple[int, ...] = (0, 1, 2)
    moe_seeds: tuple[int, ...] = (0, 1, 2)
    n_layer: int = 2
    batch: int = 16
    block: int = 32
    peak_lr: float = 1e-2
    warmup_frac: float = 0.05
    n_val: int = 16                # validation batches, the same for every run
    text_chars: int | None = None  # train on the first this many characters only
    n_experts: int = 4

    def widths_for(self, i: int) -> tuple[int, ...]:
        return self.widths[i * self.slide:i * self.slide + self.window]

    def describe(self) -> str:
        pts = sum(len(self.widths_for(i)) for i in range(len(self.budgets)))
        return (f"{len(self.budgets)} budgets ({', '.join(f'{c:.0e}' for c in self.budgets)} "
                f"FLOPs), {self.window} widths each from the ladder {list(self.widths)}, "
                f"{len(self.seeds)} seeds dense and {len(self.moe_seeds)} MoE: "
                f"{pts * (len(self.seeds) + len(self.moe_seeds))} runs")


QUICK = Sweep(budgets=(3e8, 1e9), widths=(8, 12, 16), window=3, slide=0, seeds=(0, 1),
              moe_seeds=(0, 1), n_layer=1, batch=8, block=16, n_val=4, text_chars=300_000)


def model_config(sweep: Sweep, vocab: int, width: int, steps: int = 1) -> gpt.Config:
    return gpt.Config(vocab=vocab, n_layer=sweep.n_layer, d_model=width,
                      n_head=max(1, width // 8), block=sweep.block, batch=sweep.batch,
                      steps=steps, peak_lr=sweep.peak_lr,
                      warmup=max(1, round(sweep.warmup_frac * steps)),
                      end_lr=sweep.peak_lr / 10)


def moe_config(sweep: Sweep, width: int) -> moe.MoEConfig:
    return moe.MoEConfig(n_experts=sweep.n_experts, top_k=2, d_expert=2 * width)


def init(kind: str, cfg: gpt.Config, sweep: Sweep, seed: int) -> dict:
    if kind == "dense":
        return gpt.init_params(cfg, seed)
    return moe.init_params(cfg, moe_config(sweep, cfg.d_model), seed)


def count_params(kind: str, cfg: gpt.Config, sweep: Sweep) -> dict:
    """{"total", "embedding", "N"}: N is what 6ND counts, the parameters a token is multiplied
    by: all but the two embedding tables (looked up, not multiplied), and of the MoE's experts
    only top_k of n_experts (its active parameters)."""
    params = init(kind, cfg, sweep, 0)
    total = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
    emb = int(np.size(params["wte"]) + np.size(params["wpe"]))
    idle = 0
    if kind == "moe":
        m = moe_config(sweep, cfg.d_model)
        per_layer = sum(int(np.size(params["blocks"][0][k])) for k in ("w1", "b1", "w2", "b2"))
        idle = cfg.n_layer * per_layer * (m.n_experts - m.top_k) // m.n_experts
    return {"total": total, "embedding": emb, "N": total - emb - idle}


def steps_for(budget: float, n: int, sweep: Sweep) -> int:
    """The steps a budget of 6ND FLOPs gives a model with N = n (at least 4)."""
    return max(4, round(budget / (6 * n * sweep.batch * sweep.block)))


def learning_rates(sweep: Sweep, vocab: int, width: int, steps: int) -> np.ndarray:
    """f32[steps]: the GPT's own warmup + cosine schedule (`gpt.program`'s `schedule`), with
    its horizon at this run's last step."""
    prog = gpt.program(minijax, model_config(sweep, vocab, width, steps))
    return np.asarray(prog["schedule"](np.arange(steps, dtype=np.int32)), np.float32)


# ---------------------------------------------------------------------------------------------
# Training one run (through minijax or JAX)
# ---------------------------------------------------------------------------------------------

class Trainer:
    """Trains the runs of a sweep on one text. The step takes the learning rate as an
    argument (`gpt.program`'s AdamW reads `opt["lr"]` when it is there), so one compiled step
    per (module, kind, width) serves every budget and seed."""

    def __init__(self, sweep: Sweep, data: gpt.CharData):
        self.sweep, self.data = sweep, data
        self.vocab = len(data.chars)
        self.val = gpt.batches(data.val, sweep.n_val, sweep.batch, sweep.block, 12345)
        self._programs: dict = {}
        self.compile_s = 0.0

    def program(self, module: str, kind: str, width: int) -> dict:
        """{"J", "cfg", "prog", "step" (compiled), "stats" (its cost analysis), "grad_stats",
        "forward_stats" (the same for value_and_grad of the loss, and for the loss alone)}."""
        key = (module, kind, width)
        if key in self._programs:
            return self._programs[key]
        J, cfg = dict(MODULES)[module], model_config(self.sweep, self.vocab, width)
        kw = {}
        if kind == "moe":
            m = moe_config(self.sweep, width)
            kw = {"mlp": moe.make_moe_mlp(m), "aux_weight": m.aux_weight}
        prog = gpt.program(J, cfg, **kw)

        def train_step(params, opt, x, y, lr):
            value, grads = J.value_and_grad(prog["loss"])(params, x, y)
            params, opt, _ = prog["adamw"](params, grads, {**opt, "lr": lr})
            return params, opt, value
        params = J.device_put(init(kind, cfg, self.sweep, 0))
        tokens = J.device_put(np.zeros((cfg.batch, cfg.block), np.int32))
        lr = np.float32(0)
        step, stats = gpt.stage_times(J, train_step, (params, prog["init_opt"](params), tokens,
                                                      tokens, lr))
        self.compile_s += stats["trace_lower_s"] + stats["compile_s"]
        # The validation loss is the cross-entropy alone (the MoE trains on it plus its
        # load-balancing loss).
        evaluate = gpt.program(J, cfg, mlp=kw.get("mlp", gpt.dense_mlp))["eval_loss"]
        entry = {"J": J, "cfg": cfg, "prog": prog, "step": step, "stats": stats,
                 "eval_loss": evaluate}
        self._programs[key] = entry
        return entry

    def cost_terms(self, module: str, kind: str, width: int) -> dict:
        """XLA's FLOPs of value_and_grad of the loss and of the whole step."""
        e = self.program(module, kind, width)
        J, cfg, prog = e["J"], e["cfg"], e["prog"]
        params = J.device_put(init(kind, cfg, self.sweep, 0))
        tokens = J.device_put(np.zeros((cfg.batch, cfg.block), np.int32))
        _, grad = gpt.stage_times(J, J.value_and_grad(prog["loss"]), (params, tokens, tokens))
        return {"forward_backward": grad["flops"], "step": e["stats"]["flops"]}

    def train(self, module: str, kind: str, width: int, budget: float, seed: int,
              keep_losses: bool = False, lrs: np.ndarray | None = None) -> dict:
        """One run; its record is what the cache stores and the topic's "runs" lists. `lrs`
        (f32[steps]) replaces the run's own schedule (chapter 27's exercise 3)."""
        e = self.program(module, kind, width)
        J, cfg, prog, step = e["J"], e["cfg"], e["prog"], e["step"]
        n = count_params(kind, cfg, self.sweep)
        steps = steps_for(budget, n["N"], self.sweep)
        if lrs is None:
            lrs = learning_rates(self.sweep, self.vocab, width, steps)
        params = J.device_put(init(kind, cfg, self.sweep, seed))
        state = (params, prog["init_opt"](params))
        xs, ys = gpt.batches(self.data.train, steps, cfg.batch, cfg.block, 1000 + seed)
        t0 = time.perf_counter()
        losses = []
        for s in range(steps):
            *state, loss = step(*state, xs[s], ys[s], lrs[s])
            losses.append(loss)
        losses = [float(v) for v in J.block_until_ready(losses)]
        train_s = time.perf_counter() - t0
        val = float(np.mean([float(e["eval_loss"](state[0], x, y))
                             for x, y in zip(*self.val)]))
        tokens = steps * cfg.batch * cfg.block
        rec = {"budget": float(budget), "params": n["N"], "tokens": tokens, "seed": int(seed),
               "kind": kind, "val_loss": val, "flops_6nd": 6.0 * n["N"] * tokens,
               "flops_xla": float(e["stats"]["flops"]) * steps, "width": width,
               "steps": steps, "params_total": n["total"], "module": module,
               "final_train_loss": float(np.mean(losses[-max(1, steps // 20):])),
               "train_s": train_s}
        if keep_losses:
            rec["losses"] = losses
        return rec


# ---------------------------------------------------------------------------------------------
# The sweep, cached run by run
# ---------------------------------------------------------------------------------------------

def plan(sweep: Sweep) -> list[dict]:
    """Every run of the sweep, smallest budget first; the middle width of each budget's
    window, dense, seed 0, keeps its per-step losses and is trained through JAX as well."""
    runs = []
    for i, budget in enumerate(sorted(sweep.budgets)):
        ws = sweep.widths_for(i)
        mid = ws[len(ws) // 2]
        for kind, seeds in (("dense", sweep.seeds), ("moe", sweep.moe_seeds)):
            for w in ws:
                for s in seeds:
                    xc = kind == "dense" and w == mid and s == sweep.seeds[0]
                    runs.append({"module": "minijax", "kind": kind, "width": w,
                                 "budget": float(budget), "seed": s, "keep_losses": xc})
                    if xc:
                        runs.append({**runs[-1], "module": "jax"})
    return runs


def cache_key(sweep: Sweep, source: str, n_chars: int, spec: dict) -> str:
    what = {"version": CACHE_VERSION, "code": code_digest(),
            "sweep": {k: v for k, v in dataclasses.asdict(sweep).items()
                      if k not in ("budgets", "widths", "window", "slide", "seeds",
                                   "moe_seeds")},
            "text": [source, n_chars], **spec}
    digest = hashlib.sha1(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]
    return (f"{spec['kind']}-w{spec['width']}-C{spec['budget']:.2e}-s{spec['seed']}-"
            f"{spec['module']}-{digest}")


def cache_path(sweep: Sweep, data: gpt.CharData, source: str, spec: dict,
               cache_dir: Path) -> Path:
    return cache_dir / f"{cache_key(sweep, source, len(data.train) + len(data.val), spec)}.json"


def run_sweep(sweep: Sweep, data: gpt.CharData, source: str, cache_dir: Path,
              trainer: Trainer | None = None) -> tuple[list[dict], dict]:
    """Train (or load from `cache_dir`) every run of `plan(sweep)`: (records, stats) with
    stats {"trained", "cached", "train_s", "compile_s", "wall_s"}."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    trainer = trainer or Trainer(sweep, data)
    todo = plan(sweep)
    out, trained, t0 = [], 0, time.perf_counter()
    bar = progress(todo, "scaling_laws sweep", total=len(todo), unit="run")
    for spec in bar:
        path = cache_path(sweep, data, source, spec, cache_dir)
        if path.exists():
            rec = json.loads(path.read_text())
        else:
            rec = trainer.train(**spec)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")  # the test and chapter 27 share it
            tmp.write_text(json.dumps(rec))
            tmp.replace(path)  # a run is in the cache whole or not at all
            trained += 1
        out.append(rec)
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"{rec['kind']} d={rec['width']} C={rec['budget']:.0e}: "
                                f"{rec['val_loss']:.3f}")
    stats = {"trained": trained, "cached": len(todo) - trained, "wall_s":
             time.perf_counter() - t0, "compile_s": trainer.compile_s,
             "train_s": sum(r["train_s"] for r in out)}
    return out, stats


# ---------------------------------------------------------------------------------------------
# Fits: parabolas per budget, power laws across budgets, approach 3
# ---------------------------------------------------------------------------------------------

def grid(runs: list[dict], kind: str) -> dict:
    """The runs of one kind (minijax's) as arrays: {"budgets" f[nb], "N" f[nb,ns], "D"
    f[nb,ns], "L" f[nb,ns,seeds]}, sizes in increasing N within each budget."""
    rs = [r for r in runs if r["kind"] == kind and r["module"] == "minijax"]
    budgets = sorted({r["budget"] for r in rs})
    seeds = sorted({r["seed"] for r in rs})
    N, D, L = [], [], []
    for c in budgets:
        at = [r for r in rs if r["budget"] == c]
        ns = sorted({r["params"] for r in at})
        N.append(ns)
        D.append([next(r["tokens"] for r in at if r["params"] == n) for n in ns])
        L.append([[next(r["val_loss"] for r in at if r["params"] == n and r["seed"] == s)
                   for s in seeds] for n in ns])
    return {"budgets": np.array(budgets), "N": np.array(N, float), "D": np.array(D, float),
            "L": np.array(L, float), "seeds": seeds}


def parabola_fits(log_n: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares parabolas loss = c0 + c1 x + c2 x^2 in x = log N, one per column of
    `loss` (f[ns, k]; log_n f[ns]): (x at the minimum f[k], the loss there f[k]); NaN where
    the parabola opens downward (no minimum)."""
    X = np.stack([np.ones_like(log_n), log_n, log_n ** 2], axis=1)
    c = np.linalg.lstsq(X, loss, rcond=None)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(c[2] > 0, -c[1] / (2 * c[2]), np.nan)
    return x, c[0] + c[1] * x + c[2] * x ** 2


def power_law(budgets: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log v = log k + e log C by least squares, per column of `values` (f[nb, k]):
    (e f[k], k f[k])."""
    X = np.stack([np.ones_like(budgets), np.log(budgets)], axis=1)
    c = np.linalg.lstsq(X, np.log(values), rcond=None)[0]
    return c[1], np.exp(c[0])


def frontier(g: dict, L: np.ndarray | None = None) -> dict:
    """Per budget N_opt, D_opt = C / 6 N_opt and the loss at the minimum, from parabolas of
    the seed-mean loss (or of `L` f[nb, ns, k] already averaged into k columns)."""
    L = g["L"].mean(axis=2, keepdims=True) if L is None else L
    n_opt, l_opt = [], []
    for i in range(len(g["budgets"])):
        x, lo = parabola_fits(np.log(g["N"][i]), L[i])
        n_opt.append(np.exp(x))
        l_opt.append(lo)
    n_opt, l_opt = np.array(n_opt), np.array(l_opt)   # [nb, k]
    return {"N_opt": n_opt, "D_opt": g["budgets"][:, None] / (6 * n_opt), "L_opt": l_opt}


def resample_seeds(g: dict, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """f[nb, ns, n_boot]: seed-mean losses with the seeds of each point drawn with
    replacement (each point on its own)."""
    nb, ns, S = g["L"].shape
    idx = rng.integers(0, S, size=(nb, ns, n_boot, S))
    return np.take_along_axis(g["L"][:, :, None, :], idx, axis=3).mean(axis=3)


def interval(v: np.ndarray, level: float = 0.95) -> list[float]:
    v = v[np.isfinite(v)]
    if not v.size:
        return [math.nan, math.nan]
    q = (1 - level) / 2
    return [float(np.quantile(v, q)), float(np.quantile(v, 1 - q))]


def exponents(g: dict, n_boot: int = 2000, seed: int = 0) -> dict:
    """Approaches 1-2 (isoFLOP parabolas): a and b of N_opt ∝ C^a and D_opt ∝ C^b, with 95%
    bootstrap intervals over seeds, the same with each budget left out, and how often a
    resampled parabola had its minimum inside the sizes trained."""
    point = frontier(g)
    a, kn = power_law(g["budgets"], point["N_opt"])
    b, kd = power_law(g["budgets"], point["D_opt"])
    boot = frontier(g, resample_seeds(g, n_boot, np.random.default_rng(seed)))
    ok = np.all(np.isfinite(boot["N_opt"]), axis=0)
    inside = ok & np.all((boot["N_opt"] >= g["N"].min(1)[:, None]) &
                         (boot["N_opt"] <= g["N"].max(1)[:, None]), axis=0)
    a_b = power_law(g["budgets"], boot["N_opt"][:, ok])[0]
    b_b = power_law(g["budgets"], boot["D_opt"][:, ok])[0]
    loo = []
    for i in range(len(g["budgets"])):
        keep = np.arange(len(g["budgets"])) != i
        if keep.sum() < 2:
            continue
        a_i = power_law(g["budgets"][keep], point["N_opt"][keep])[0]
        a_ib = power_law(g["budgets"][keep], boot["N_opt"][keep][:, ok])[0]
        loo.append({"left_out": float(g["budgets"][i]), "a": float(a_i[0]),
                    "a_ci": interval(a_ib)})
    return {"a": float(a[0]), "a_ci": interval(a_b), "b": float(b[0]), "b_ci": interval(b_b),
            "N_opt": point["N_opt"][:, 0].tolist(), "D_opt": point["D_opt"][:, 0].tolist(),
            "L_opt": point["L_opt"][:, 0].tolist(),
            "N_opt_ci": [interval(v) for v in boot["N_opt"]],
            "L_opt_ci": [interval(v) for v in boot["L_opt"]],
            "k_N": float(kn[0]), "k_D": float(kd[0]), "n_boot": n_boot,
            "boot_with_minimum": float(ok.mean()), "boot_minimum_inside": float(inside.mean()),
            "leave_one_budget_out": loo, "_boot": boot, "_ok": ok}


def _huber(r: np.ndarray, delta: float) -> np.ndarray:
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def approach3_objective(theta, log_n, log_d, log_l, delta=1e-3):
    """Chinchilla's objective and its gradient: the Huber loss of log L(N, D) - log L summed
    over the runs, L(N, D) = exp(e) + exp(a) / N^α + exp(b) / D^β written as a log-sum-exp
    of u = (a - α log N, b - β log D, e); d pred / d u is the softmax of u."""
    a, b, e, alpha, beta = theta
    u = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    pred = np.logaddexp.reduce(u, axis=0)
    r = pred - log_l
    h = np.clip(r, -delta, delta)                      # the Huber loss's derivative
    w = np.exp(u - pred) * h                           # d loss / d u, per run
    grad = [w[0].sum(), w[1].sum(), w[2].sum(), -(w[0] * log_n).sum(), -(w[1] * log_d).sum()]
    return float(np.sum(_huber(r, delta))), np.array(grad)


def fit_approach3(N: np.ndarray, D: np.ndarray, L: np.ndarray, starts=None) -> dict:
    """L(N, D) = E + A / N^α + B / D^β fitted to runs (flat arrays) by L-BFGS-B from a grid
    of starting points, keeping the best: {"E", "A", "B", "alpha", "beta", "a", "b", "loss",
    "theta"}; a = β / (α + β) and b = α / (α + β) are the exponents of N_opt and D_opt it
    implies."""
    from scipy.optimize import minimize
    ln, ld, ll = np.log(N), np.log(D), np.log(L)
    if starts is None:
        starts = [(a, b, e, al, be) for a in (0.0, 8.0) for b in (0.0, 8.0)
                  for e in (-1.0, 0.5) for al in (0.2, 0.6) for be in (0.2, 0.6)]
    best = None
    for s in starts:
        r = minimize(approach3_objective, np.array(s, float), args=(ln, ld, ll), jac=True,
                     method="L-BFGS-B", bounds=[(-10, 30), (-10, 30), (-5, 3), (0.01, 3),
                                                (0.01, 3)])
        if best is None or r.fun < best.fun:
            best = r
    a, b, e, alpha, beta = best.x
    return {"E": float(np.exp(e)), "A": float(np.exp(a)), "B": float(np.exp(b)),
            "alpha": float(alpha), "beta": float(beta), "a": float(beta / (alpha + beta)),
            "b": float(alpha / (alpha + beta)), "loss": float(best.fun),
            "theta": [float(v) for v in best.x]}


def approach3(g: dict, n_boot: int = 100, seed: int = 1) -> dict:
    """The parametric fit on every run (each seed a data point), with 95% intervals from
    refits on resampled seeds (each warm-started from the full fit)."""
    nb, ns, S = g["L"].shape
    N = np.repeat(g["N"][:, :, None], S, axis=2)
    D = np.repeat(g["D"][:, :, None], S, axis=2)
    fit = fit_approach3(N.ravel(), D.ravel(), g["L"].ravel())
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, S, size=(nb, ns, S))
        Lb = np.take_along_axis(g["L"], idx, axis=2)
        boots.append(fit_approach3(N.ravel(), D.ravel(), Lb.ravel(), starts=[fit["theta"]]))
    out = dict(fit)
    for k in ("E", "A", "B", "alpha", "beta", "a", "b"):
        out[f"{k}_ci"] = interval(np.array([bt[k] for bt in boots]))
    out["n_boot"] = n_boot
    return out


def n_opt_approach3(fit: dict, budget: float) -> float:
    """The N that minimises fit's L(N, D) on the budget's isoFLOP line 6ND = C:
    G (C / 6)^a with G = (α A / (β B))^(1 / (α + β))."""
    al, be = fit["alpha"], fit["beta"]
    G = (al * fit["A"] / (be * fit["B"])) ** (1 / (al + be))
    return G * (budget / 6) ** (be / (al + be))


def noise(g: dict) -> dict:
    """Seed-to-seed spread (standard deviation over seeds) at every point, against what the
    parabolas rest on: per budget, the loss differences between neighbouring sizes and the
    depth of the curve (its highest seed-mean minus its lowest)."""
    sd = g["L"].std(axis=2, ddof=1)
    mean = g["L"].mean(axis=2)
    steps = np.abs(np.diff(mean, axis=1))
    per = []
    for i, c in enumerate(g["budgets"]):
        j = int(np.argmin(mean[i]))
        near = [steps[i][k] for k in (j - 1, j) if 0 <= k < steps.shape[1]]
        per.append({"budget": float(c), "seed_sd": sd[i].tolist(),
                    "depth": float(mean[i].max() - mean[i].min()),
                    "step_near_min": float(min(near)),
                    "sd_over_step_near_min": float(np.median(sd[i]) / min(near))})
    return {"per_budget": per, "median_seed_sd": float(np.median(sd)),
            "max_seed_sd": float(sd.max()),
            "median_neighbour_step": float(np.median(steps))}


def moe_vs_dense(gd: dict, gm: dict, n_boot: int = 2000, seed: int = 2) -> dict:
    """The frontier of each kind (loss at the parabola's minimum, N_opt) per budget, the
    MoE's minus the dense one's with 95% intervals (seeds of each resampled independently),
    and the mean difference at each size."""
    rng = np.random.default_rng(seed)
    fd, fm = frontier(gd), frontier(gm)
    bd = frontier(gd, resample_seeds(gd, n_boot, rng))
    bm = frontier(gm, resample_seeds(gm, n_boot, rng))
    dl = bm["L_opt"] - bd["L_opt"]
    ratio = bm["N_opt"] / bd["N_opt"]
    same_size = (gm["L"].mean(2) - gd["L"].mean(2))
    return {"budgets": gd["budgets"].tolist(),
            "dense_loss_opt": fd["L_opt"][:, 0].tolist(),
            "moe_loss_opt": fm["L_opt"][:, 0].tolist(),
            "delta_loss_opt": (fm["L_opt"] - fd["L_opt"])[:, 0].tolist(),
            "delta_loss_opt_ci": [interval(v) for v in dl],
            "dense_n_opt": fd["N_opt"][:, 0].tolist(), "moe_n_opt": fm["N_opt"][:, 0].tolist(),
            "n_opt_ratio": (fm["N_opt"] / fd["N_opt"])[:, 0].tolist(),
            "n_opt_ratio_ci": [interval(v) for v in ratio],
            "delta_at_same_size": same_size.tolist(),
            "delta_at_same_size_mean": float(same_size.mean())}


# ---------------------------------------------------------------------------------------------
# FLOPs two ways
# ---------------------------------------------------------------------------------------------

def flop_terms(trainer: Trainer, kind: str, width: int, module: str = "minijax") -> dict:
    """One step's FLOPs: 6ND and attention's T^2 part by formula, XLA's cost analysis of
    value_and_grad of the loss and of the whole step; the optimizer is the step minus
    value_and_grad, and "rest" is what value_and_grad counts beyond matmuls and attention
    (layer norms, softmax, GELU, the cross-entropy, the MoE's dispatch and combine)."""
    sw = trainer.sweep
    cfg = model_config(sw, trainer.vocab, width)
    n = count_params(kind, cfg, sw)
    bt = cfg.batch * cfg.block
    xla = trainer.cost_terms(module, kind, width)
    six_nd = 6.0 * n["N"] * bt
    attention = 12.0 * cfg.n_layer * cfg.batch * cfg.block ** 2 * cfg.d_model
    optimizer = xla["step"] - xla["forward_backward"]
    return {"kind": kind, "width": width, "N": n["N"], "params_total": n["total"],
            "tokens_per_step": bt, "six_nd": six_nd, "attention": attention,
            "xla_forward_backward": xla["forward_backward"],
            "xla_step": xla["step"], "optimizer": optimizer,
            "optimizer_per_param": optimizer / n["total"],
            "rest": xla["forward_backward"] - six_nd - attention,
            "xla_over_6nd": xla["step"] / six_nd}


# ---------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------

def plot_sweep(runs: list[dict], fits: dict, folder: Path, stem: str = "scaling_laws") -> dict:
    """Three PNGs in `folder`: the isoFLOP curves (seed mean ± sd, the fitted parabolas,
    dense solid and MoE dashed), N_opt and D_opt against C with the power law and its
    bootstrap band, and the loss at the minimum for dense and MoE with intervals."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    g = {k: grid(runs, k) for k in ("dense", "moe")}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind, style in (("dense", "-"), ("moe", "--")):
        gk = g[kind]
        for i, c in enumerate(gk["budgets"]):
            x = np.log(gk["N"][i])
            m, sd = gk["L"][i].mean(1), gk["L"][i].std(1, ddof=1)
            ax.errorbar(gk["N"][i], m, yerr=sd, fmt="o" if kind == "dense" else "s",
                        color=colors[i], capsize=3, markersize=4,
                        label=f"{kind} C={c:.0e}")
            X = np.stack([np.ones_like(x), x, x * x], 1)
            coef = np.linalg.lstsq(X, m, rcond=None)[0]
            xs = np.linspace(x.min(), x.max(), 100)
            ax.plot(np.exp(xs), coef[0] + coef[1] * xs + coef[2] * xs ** 2, style,
                    color=colors[i], linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("N (parameters a token multiplies; MoE: active)")
    ax.set_ylabel("validation loss (nats/char)")
    ax.set_title("isoFLOP curves: seed mean ± sd, parabolas in log N")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    paths["isoflop"] = folder / f"{stem}_isoflop.png"
    fig.savefig(paths["isoflop"], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind, marker in (("dense", "o"), ("moe", "s")):
        f = fits[kind]
        C = g[kind]["budgets"]
        boot, ok = f["_boot"], f["_ok"]
        cs = np.geomspace(C.min() / 1.5, C.max() * 1.5, 50)
        for key, name, col in (("N_opt", "N_opt", 0), ("D_opt", "D_opt", 1)):
            e, k = power_law(C, boot[key][:, ok])
            band = k[None, :] * cs[:, None] ** e[None, :]
            ax.fill_between(cs, *np.quantile(band, [0.025, 0.975], axis=1), alpha=0.15,
                            color=colors[col + 2 * (kind == "moe")])
            ax.plot(C, f[key], marker, color=colors[col + 2 * (kind == "moe")],
                    label=f"{kind} {name}: exponent {f['a' if key == 'N_opt' else 'b']:.2f}")
            ax.plot(cs, f["k_N" if key == "N_opt" else "k_D"] *
                    cs ** f["a" if key == "N_opt" else "b"], "-", linewidth=1,
                    color=colors[col + 2 * (kind == "moe")])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("compute C (FLOPs, 6ND)")
    ax.set_ylabel("N_opt, D_opt")
    ax.set_title("compute-optimal frontier, 95% bootstrap band over seeds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths["frontier"] = folder / f"{stem}_frontier.png"
    fig.savefig(paths["frontier"], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    md = fits["moe_vs_dense"]
    C = np.array(md["budgets"])
    for kind, key, marker in (("dense", "dense_loss_opt", "o"), ("moe", "moe_loss_opt", "s")):
        ci = np.array(fits[kind]["L_opt_ci"])
        y = np.array(md[key])
        ax.errorbar(C, y, yerr=[y - ci[:, 0], ci[:, 1] - y], fmt=marker + "-", capsize=3,
                    label=kind)
    ax.set_xscale("log")
    ax.set_xlabel("compute C (FLOPs, 6ND with active N)")
    ax.set_ylabel("loss at the isoFLOP minimum")
    ax.set_title("dense vs MoE at matched active FLOPs (95% intervals)")
    ax.legend()
    fig.tight_layout()
    paths["moe_vs_dense"] = folder / f"{stem}_moe_vs_dense.png"
    fig.savefig(paths["moe_vs_dense"], dpi=100)
    plt.close(fig)
    return paths


# ---------------------------------------------------------------------------------------------
# The topic
# ---------------------------------------------------------------------------------------------

def load_data(sweep: Sweep, text: str | None = None) -> tuple[gpt.CharData, str]:
    raw, source = gpt.load_text(text)
    if sweep.text_chars:
        raw = raw[:sweep.text_chars]
        source += f", first {sweep.text_chars:,} characters"
    return gpt.CharData.from_text(raw), source


def analyse(runs: list[dict], n_boot: int = 2000, n_boot3: int = 100) -> dict:
    """Every fit of the sweep: {"dense", "moe" (exponents), "approach3" (dense),
    "moe_vs_dense", "noise" (dense)}."""
    gd, gm = grid(runs, "dense"), grid(runs, "moe")
    return {"dense": exponents(gd, n_boot), "moe": exponents(gm, n_boot, seed=3),
            "approach3": approach3(gd, n_boot3), "moe_vs_dense": moe_vs_dense(gd, gm, n_boot),
            "noise": noise(gd)}


def cross_check(runs: list[dict]) -> dict:
    """The points trained through both modules: final validation losses and the largest
    relative per-step difference of the training losses."""
    jx = [r for r in runs if r["module"] == "jax"]
    pairs = [(next(m for m in runs if m["module"] == "minijax" and all(
        m[k] == r[k] for k in ("kind", "width", "budget", "seed"))), r) for r in jx]
    step_rel = [float(np.max(np.abs(np.subtract(m["losses"], j["losses"])) /
                             np.abs(j["losses"]))) for m, j in pairs]
    return {"points": [{k: j[k] for k in ("kind", "width", "budget", "seed", "steps")}
                       for _, j in pairs],
            "minijax_losses": [m["val_loss"] for m, _ in pairs],
            "jax_losses": [j["val_loss"] for _, j in pairs],
            "max_rel_step_loss_diff": step_rel,
            "flops_xla_per_step": {"minijax": [m["flops_xla"] / m["steps"] for m, _ in pairs],
                                   "jax": [j["flops_xla"] / j["steps"] for _, j in pairs]}}


def _public(fit: dict) -> dict:
    return {k: v for k, v in fit.items() if not k.startswith("_")}


def _ci(v: float, ci) -> str:
    return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def run(quick: bool = False, text: str | None = None, sweep: Sweep | None = None,
        cache_dir: Path | None = None, plots: bool | None = None) -> TopicResult:
    res = TopicResult("Compute-optimal scaling: isoFLOP sweeps, dense vs MoE, with their noise")
    res.chapter = "chapters/27-scaling-laws.md"
    t0 = time.perf_counter()
    sweep = sweep or (QUICK if quick else Sweep())
    data, source = load_data(sweep, text)
    cache_dir = cache_dir or DEFAULT_CACHE
    trainer = Trainer(sweep, data)
    runs, stats = run_sweep(sweep, data, source, cache_dir, trainer)
    mj, xc = _sweep_checks(res, runs, sweep, quick)

    fd, fm, a3, md, nz, flops, ft = _fit_checks(res, runs, quick, sweep, trainer)

    if plots is None:
        plots = not quick
    figs = _record(res, plots, runs, fd, fm, md, t0, sweep, stats, a3, mj, nz, xc, flops, source)

    # --- report sections --------------------------------------------------------------------
    _describe_sweep(res, runs, sweep, source, stats)
    _describe_fits(res, fd, a3, md, fm, nz, ft, xc)
    if figs:
        res.sections.append("### Plots\n\n" + "\n".join(
            f"![{k}](plots/{p.name})" for k, p in figs.items()))
    return res


def _sweep_checks(res, runs, sweep, quick):
    """The sweep's checks: minijax against JAX on the cross-checked points, every point trained,
    every run within its budget."""
    mj = [r for r in runs if r["module"] == "minijax"]
    xc = cross_check(runs)
    res.check("cross-check: validation losses, minijax vs JAX (1e-4 relative)",
              xc["minijax_losses"], xc["jax_losses"], rtol=1e-4, atol=0)
    res.check_true("cross-check: every step's training loss within 1e-4 relative",
                   max(xc["max_rel_step_loss_diff"]) <= 1e-4)
    res.check("cross-check: XLA's FLOPs per step, minijax vs JAX (1% relative)",
              xc["flops_xla_per_step"]["minijax"], xc["flops_xla_per_step"]["jax"],
              rtol=1e-2, atol=0)
    n_points = sum(len(sweep.widths_for(i)) for i in range(len(sweep.budgets)))
    res.check_true(f"sweep complete: {n_points} points x seeds, every loss finite",
                   len(mj) == n_points * (len(sweep.seeds) + len(sweep.moe_seeds))
                   and all(math.isfinite(r["val_loss"]) for r in mj))
    res.check_true("every run stays within 1% of its budget (6ND)",
                   all(abs(r["flops_6nd"] / r["budget"] - 1) < 0.01 for r in mj)
                   or quick)
    return mj, xc


def _fit_checks(res, runs, quick, sweep, trainer):
    """The fits of the sweep (both kinds, approach 3, MoE vs dense, noise), the FLOP terms of a
    middle size, and their checks."""
    fits = analyse(runs, n_boot=500 if quick else 2000, n_boot3=10 if quick else 100)
    fd, fm, a3, md, nz = (fits[k] for k in ("dense", "moe", "approach3", "moe_vs_dense",
                                            "noise"))
    mid = sweep.widths_for(len(sweep.budgets) // 2)
    mid = mid[len(mid) // 2]
    flops = {"dense": flop_terms(trainer, "dense", mid)}
    if not quick:
        flops["moe"] = flop_terms(trainer, "moe", mid)
    ft = flops["dense"]
    res.check_true("FLOPs: 6ND + attention <= XLA's forward+backward <= XLA's step",
                   ft["six_nd"] + ft["attention"] <= ft["xla_forward_backward"] <= ft["xla_step"])
    if not quick:
        res.check_true("every dense budget's parabola has its minimum inside the sizes trained",
                       all(lo_n <= n <= hi_n for n, lo_n, hi_n in zip(
                           fd["N_opt"], grid(runs, "dense")["N"].min(1),
                           grid(runs, "dense")["N"].max(1))))
        res.check_true("the loss at the minimum falls as the budget grows (dense)",
                       all(np.diff(fd["L_opt"]) < 0))
    return fd, fm, a3, md, nz, flops, ft


def _record(res, plots, runs, fd, fm, md, t0, sweep, stats, a3, mj, nz, xc, flops, source):
    """The plots (unless quick), the timings and the numbers kept in the result's extras."""
    figs = {}
    if plots:
        figs = plot_sweep(runs, {"dense": fd, "moe": fm, "moe_vs_dense": md},
                          OUT_DIR / "plots")
    wall = time.perf_counter() - t0
    res.timings_ms = {"sweep wall": 1e3 * stats["wall_s"],
                      "training (sum over runs trained now)": 1e3 * stats["train_s"],
                      "trace+lower+compile": 1e3 * stats["compile_s"]}
    fit_json = {"a": fd["a"], "a_ci": fd["a_ci"], "b": fd["b"], "b_ci": fd["b_ci"],
                "approach2": _public(fd), "approach3": a3, "moe": _public(fm),
                "chinchilla": {k: list(v) for k, v in CHINCHILLA.items()}}
    res.extra = {"budgets": sorted(float(c) for c in sweep.budgets),
                 "runs": [{k: r[k] for k in ("budget", "params", "tokens", "seed", "kind",
                                             "val_loss", "flops_6nd", "flops_xla", "width",
                                             "steps", "params_total")} for r in mj],
                 "fit": fit_json, "moe_vs_dense": md, "noise": nz,
                 "cross_check": xc, "flops": flops,
                 "sweep": {**dataclasses.asdict(sweep), "description": sweep.describe(),
                           "text": source, **stats, "topic_wall_s": wall}}
    return figs


def _describe_sweep(res, runs, sweep, source, stats):
    """The section listing the sweep's points and losses."""
    gd = grid(runs, "dense")
    rows = []
    for i, c in enumerate(gd["budgets"]):
        for j, n in enumerate(gd["N"][i]):
            L = gd["L"][i, j]
            moe_l = grid(runs, "moe")["L"][i, j]
            rows.append(f"| {c:.0e} | {n:,.0f} | {gd['D'][i, j]:,.0f} | {L.mean():.4f} ± "
                        f"{L.std(ddof=1):.4f} | {moe_l.mean():.4f} ± {moe_l.std(ddof=1):.4f} |")
    res.sections.append(
        "### The sweep\n\n"
        f"{sweep.describe()}; {sweep.n_layer}-layer GPTs, batch {sweep.batch} x {sweep.block} "
        f"characters, AdamW with peak lr {sweep.peak_lr}, warmup {sweep.warmup_frac:.0%} then "
        f"cosine to the last step. Data: {source}, validation on {sweep.n_val} fixed held-out "
        f"batches. Trained now: {stats['trained']} runs, from the cache: {stats['cached']}; "
        f"sweep wall time {stats['wall_s']:.0f} s (compiling {stats['compile_s']:.0f} s). "
        "Loss: seed mean ± sd.\n\n"
        "| C (6ND) | N | D | dense val loss | MoE val loss (same width) |\n|---|---|---|---|---|\n"
        + "\n".join(rows))


def _describe_fits(res, fd, a3, md, fm, nz, ft, xc):
    """The sections on the fits, dense vs MoE, the noise, the FLOP terms and the cross-check."""
    res.sections.append(
        "### Fits\n\n"
        f"Isoflop parabolas (dense): **a = {_ci(fd['a'], fd['a_ci'])}**, **b = "
        f"{_ci(fd['b'], fd['b_ci'])}** (95% bootstrap over seeds, {fd['n_boot']} resamples; "
        f"{fd['boot_minimum_inside']:.0%} of them had every minimum inside the sizes "
        "trained). Chinchilla: a = 0.50, b = 0.50 (approach 1), 0.49/0.51 (2), 0.46/0.54 "
        f"(3). Approach 3: E = {_ci(a3['E'], a3['E_ci'])}, α = "
        f"{_ci(a3['alpha'], a3['alpha_ci'])}, β = {_ci(a3['beta'], a3['beta_ci'])}, implied "
        f"a = {_ci(a3['a'], a3['a_ci'])}. Leaving one budget out: " + ", ".join(
            f"without {x['left_out']:.0e}: a = {_ci(x['a'], x['a_ci'])}"
            for x in fd["leave_one_budget_out"]) + ".")
    res.sections.append(
        "### Dense vs MoE (matched active FLOPs)\n\n"
        "| C | dense loss at min | MoE loss at min | MoE - dense (95%) | N_opt MoE / dense |\n"
        "|---|---|---|---|---|\n" + "\n".join(
            f"| {c:.0e} | {d:.4f} | {m:.4f} | {_ci(x, ci)} | {_ci(r, rci)} |"
            for c, d, m, x, ci, r, rci in zip(md["budgets"], md["dense_loss_opt"],
                                              md["moe_loss_opt"], md["delta_loss_opt"],
                                              md["delta_loss_opt_ci"], md["n_opt_ratio"],
                                              md["n_opt_ratio_ci"]))
        + f"\n\nMoE exponent a = {_ci(fm['a'], fm['a_ci'])}.")
    res.sections.append(
        "### Noise\n\n"
        f"Median seed-to-seed sd {nz['median_seed_sd']:.4f} nats (largest "
        f"{nz['max_seed_sd']:.4f}); median loss step between neighbouring sizes "
        f"{nz['median_neighbour_step']:.4f}. Per budget, the smallest step next to the "
        "minimum and the sd's share of it: " + ", ".join(
            f"{p['budget']:.0e}: {p['step_near_min']:.4f} ({p['sd_over_step_near_min']:.2f})"
            for p in nz["per_budget"]) + ".")
    res.sections.append(
        "### FLOPs two ways (one step, width {w})\n\n".format(w=ft["width"]) +
        "| term | FLOPs |\n|---|---|\n" + "\n".join(
            f"| {k} | {ft[k]:,.0f} |" for k in ("six_nd", "attention", "rest", "optimizer",
                                                 "xla_forward_backward", "xla_step"))
        + f"\n\nXLA's step / 6ND = {ft['xla_over_6nd']:.3f}.")
    res.sections.append(
        "### Cross-check through JAX\n\n" + "\n".join(
            f"- {p['kind']} d={p['width']} C={p['budget']:.0e} ({p['steps']} steps): val "
            f"loss minijax {m:.6f}, JAX {j:.6f}; largest per-step difference {s:.2g}"
            for p, m, j, s in zip(xc["points"], xc["minijax_losses"], xc["jax_losses"],
                                  xc["max_rel_step_loss_diff"])))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m compare.scaling_laws",
                                description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="the tests' sweep")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--text", metavar="PATH", help="train on this text file")
    p.add_argument("--budgets", type=float, nargs="+", help="FLOPs (6ND), increasing")
    p.add_argument("--widths", type=int, nargs="+", help="the ladder of widths")
    p.add_argument("--seeds", type=int, default=None, help="seeds per point (dense and MoE)")
    p.add_argument("--cache", metavar="DIR", help="the run cache (default compare/out/...)")
    args = p.parse_args(argv)
    from compare._report import save_topic, write_json, write_report
    sweep = QUICK if args.quick else Sweep()
    if args.budgets:
        sweep = dataclasses.replace(sweep, budgets=tuple(sorted(args.budgets)))
    if args.widths:
        sweep = dataclasses.replace(sweep, widths=tuple(args.widths))
    if args.seeds:
        sweep = dataclasses.replace(sweep, seeds=tuple(range(args.seeds)),
                                    moe_seeds=tuple(range(args.seeds)))
    res = run(quick=args.quick, text=args.text, sweep=sweep,
              cache_dir=Path(args.cache) if args.cache else None)
    save_topic("scaling_laws", res)
    print(f"report: {write_report({'scaling_laws': res})}")
    if args.json:
        write_json({"scaling_laws": res}, args.json)
    bad = [c.name for c in res.checks if not c.ok]
    print(f"{len(res.checks) - len(bad)}/{len(res.checks)} checks passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
