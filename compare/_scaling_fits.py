"""Chinchilla's three approaches fitted to an isoFLOP sweep's runs, under two conventions for
counting parameters, with intervals whose coverage is checked by simulation (chapter 27).

The runs are those `tools/scaling_tpu.py` saves: each has "budget", "params" (non-embedding),
"params_all" (with the embeddings and the head), "seed", "tokens", "val_loss" and "curve"
([[tokens, loss], ...] along the run). Under a convention, N is one of the two counts and the
compute of a run is C = 6 N D with that N (D its tokens), as Kaplan et al. (2020) counted
non-embedding parameters and compute and Hoffmann et al. (2022) all of them. Pearce & Song
(2024, "Reconciling Kaplan and Chinchilla scaling laws") show that this choice alone moves
the exponent of N_opt ∝ C^a at small sizes, where the embeddings are a large share of the
model; Porian et al. (2024, "Resolving discrepancies in compute-optimal scaling of language
models") add the head's compute, the warmup and the optimizer's tuning at small scale.

- **Approach 1**: the envelope of the training curves. Every run's loss curve (seeds
  averaged) is a map from compute to loss; at each compute the lowest curves name the size
  that spends it best (a parabola through the best size and its neighbours places it
  between rungs), and a line through log N against log C gives a.
- **Approach 2**: isoFLOP parabolas. Per budget, a parabola of the seed-mean loss in log N;
  its vertex is N_opt, at the compute interpolated there; a line through the vertices gives a.
- **Approach 3**: L(N, D) = E + A / N^α + B / D^β fitted to every run by the Huber loss
  (δ = 1e-3) of log L, L-BFGS-B from a grid of starting points (`compare/scaling_laws.py:
  fit_approach3`); a = β / (α + β).

Intervals are a parametric bootstrap: the fitted curve plus Gaussian noise of the sweep's own
size. The noise of a seed mean is the pooled seed-to-seed variance divided by its seeds,
raised to the parabolas' residual variance where that is larger (a valley that is not a
parabola shows up there). Resampling the seeds of each point, as the CPU sweep's `exponents`
does, draws from two or three values per point and understates the spread; `coverage`
simulates sweeps from a known law with the sweep's design and noise and counts how often the
95% interval of approach 2 contains the law's a.
"""

from __future__ import annotations

import math

import numpy as np

from compare.scaling_laws import fit_approach3, interval, n_opt_approach3

CONVENTIONS = {"non_embedding": "params", "all": "params_all"}
# Starting points of approach 3 (log A, log B, log E, α, β), after Besiroglu et al. (2024,
# "Chinchilla scaling: a replication attempt"), who started from a grid of 4,500.
STARTS = [(a, b, e, al, be) for a in (0.0, 5.0, 10.0, 15.0) for b in (0.0, 5.0, 10.0, 15.0)
          for e in (-1.0, 0.0, 1.0) for al in (0.2, 0.5, 1.0) for be in (0.2, 0.5, 1.0)]


# ---------------------------------------------------------------------------------------------
# The sweep as points
# ---------------------------------------------------------------------------------------------

def points(runs: list[dict], convention: str) -> list[dict]:
    """Per budget (increasing), its sizes in increasing N: {"budget", "N" f[ns], "C" f[ns]
    (6 N D under the convention), "D" f[ns], "L" list of f[seeds] per size}."""
    key = CONVENTIONS[convention]
    out = []
    for c in sorted({r["budget"] for r in runs}):
        at = [r for r in runs if r["budget"] == c]
        ns = sorted({r[key] for r in at})
        D = [next(r["tokens"] for r in at if r[key] == n) for n in ns]
        out.append({"budget": float(c), "N": np.array(ns, float), "D": np.array(D, float),
                    "C": 6 * np.array(ns, float) * np.array(D, float),
                    "L": [np.array([r["val_loss"] for r in at if r[key] == n]) for n in ns]})
    return out


def seed_noise(pts: list[dict]) -> dict:
    """The pooled seed-to-seed variance of one run's loss (over points with two seeds or
    more) and its degrees of freedom."""
    ss = sum(float(((l - l.mean()) ** 2).sum()) for p in pts for l in p["L"] if l.size > 1)
    df = sum(l.size - 1 for p in pts for l in p["L"])
    return {"var": ss / df if df else math.nan, "df": int(df)}


# ---------------------------------------------------------------------------------------------
# Approach 2: isoFLOP parabolas, vectorised over columns (bootstrap draws, simulated sweeps)
# ---------------------------------------------------------------------------------------------

def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of y on x, per column (both f[nb, k])."""
    xm, ym = x - x.mean(0), y - y.mean(0)
    return (xm * ym).sum(0) / (xm * xm).sum(0)


def approach2_columns(pts: list[dict], means: list[np.ndarray]) -> dict:
    """Approach 2 on seed-mean losses means[i] f[ns_i, k] (k columns: the data, or draws):
    {"a" f[k], "log_n" f[nb, k] (vertices), "log_c" f[nb, k], "fitted" [f[ns_i, k]]}. The
    compute at a vertex is interpolated linearly in log N along its budget's points (under
    a convention that is not the budget's own, C varies a little along a budget)."""
    log_n, log_c, fitted = [], [], []
    for p, y in zip(pts, means):
        x = np.log(p["N"])
        X = np.stack([np.ones_like(x), x, x * x], axis=1)
        coef = np.linalg.lstsq(X, y, rcond=None)[0]
        fitted.append(X @ coef)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(coef[2] > 0, -coef[1] / (2 * coef[2]), np.nan)
        cc = np.polyfit(x, np.log(p["C"]), 1)
        log_n.append(v)
        log_c.append(cc[0] * v + cc[1])
    log_n, log_c = np.array(log_n), np.array(log_c)
    return {"a": _slope(log_c, log_n), "log_n": log_n, "log_c": log_c, "fitted": fitted}


def simulate_means(pts: list[dict], truth: dict, var: float, k: int,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """k sweeps' seed means drawn from the law `truth` on the design of `pts`: per budget
    f[ns, k], the law at each point plus Gaussian noise of variance var / seeds."""
    return [law(truth, p["N"], p["D"])[:, None] + np.sqrt(var / np.array(
        [l.size for l in p["L"]], float))[:, None] * rng.standard_normal((len(p["N"]), k))
        for p in pts]


def approach2(pts: list[dict], truth: dict, var: float, n_boot: int = 1000,
              seed: int = 0) -> dict:
    """a with a 95% interval, and the vertices per budget. The interval is a parametric
    bootstrap from the fitted law `truth` (approach 3's, noise of variance `var` per run):
    sweeps drawn from it are refitted, and the spread of their a around the law's own
    β / (α + β) is the estimate's error, bias included: a parabola is not the valley's
    shape, and a window of sizes not centred on the optimum shifts its vertex."""
    means = [np.array([l.mean() for l in p["L"]])[:, None] for p in pts]
    fit = approach2_columns(pts, means)
    rng = np.random.default_rng(seed)
    boot = approach2_columns(pts, simulate_means(pts, truth, var, n_boot, rng))
    err = boot["a"] - truth["beta"] / (truth["alpha"] + truth["beta"])
    a = float(fit["a"][0])
    lo, hi = interval(err)
    return {"a": a, "ci": [a - hi, a - lo], "bias": float(np.nanmean(err)),
            "N_opt": np.exp(fit["log_n"][:, 0]).tolist(),
            "C_opt": np.exp(fit["log_c"][:, 0]).tolist(),
            "budgets": [p["budget"] for p in pts],
            "boot_ok": float(np.isfinite(boot["a"]).mean()), "n_boot": n_boot}


# ---------------------------------------------------------------------------------------------
# Approach 1: the envelope of the training curves
# ---------------------------------------------------------------------------------------------

def curves(runs: list[dict], convention: str) -> list[dict]:
    """Per (budget, size): {"N", "log_c" f[m], "loss" f[m]}, the seeds' curves averaged."""
    key = CONVENTIONS[convention]
    out = []
    for c, n in sorted({(r["budget"], r[key]) for r in runs}):
        cs = [np.array(r["curve"], float) for r in runs if r["budget"] == c and r[key] == n]
        m = min(len(x) for x in cs)
        avg = np.mean([x[:m] for x in cs], axis=0)
        out.append({"N": float(n), "log_c": np.log(6 * n * avg[:, 0]), "loss": avg[:, 1],
                    "seeds": len(cs)})
    return out


def envelope(cvs: list[dict], offsets: np.ndarray, n_grid: int = 40) -> dict:
    """N_opt along the envelope at n_grid computes between the smallest and largest run's
    final compute, and the slope of log N_opt on log C, per column of offsets f[ncurves, k]
    (added to each curve's loss). At each compute every size's loss is its lowest over the
    curves that reach there (one per budget it trained at); the best size and its two
    neighbours give a parabola in log N whose vertex is N_opt, so that N_opt moves smoothly
    between the sizes trained rather than in steps of a rung. Computes where the best size
    is the smallest or largest present are left out (NaN)."""
    lo = min(c["log_c"][-1] for c in cvs)
    hi = max(c["log_c"][-1] for c in cvs)
    grid = np.linspace(lo, hi, n_grid)
    sizes = sorted({c["N"] for c in cvs})
    L = np.full((len(sizes), n_grid, offsets.shape[1]), np.inf)
    for i, c in enumerate(cvs):
        inside = (grid >= c["log_c"][0]) & (grid <= c["log_c"][-1])
        li = np.full(n_grid, np.inf)
        li[inside] = np.interp(grid[inside], c["log_c"], c["loss"])
        j = sizes.index(c["N"])
        L[j] = np.minimum(L[j], li[:, None] + offsets[i][None, :])
    x = np.log(sizes)
    j = np.clip(np.argmin(L, axis=0), 1, len(sizes) - 2)            # [n_grid, k]
    edge = np.argmin(L, axis=0) != j
    ys = [np.take_along_axis(L, (j + s)[None], 0)[0] for s in (-1, 0, 1)]
    xs = [x[j + s] for s in (-1, 0, 1)]
    with np.errstate(divide="ignore", invalid="ignore"):   # the parabola's vertex
        num = (xs[1] - xs[0]) ** 2 * (ys[1] - ys[2]) - (xs[1] - xs[2]) ** 2 * (ys[1] - ys[0])
        den = (xs[1] - xs[0]) * (ys[1] - ys[2]) - (xs[1] - xs[2]) * (ys[1] - ys[0])
        y = xs[1] - 0.5 * num / den
        y = np.where(edge | ~np.isfinite(y) | ~np.all(np.isfinite(ys), 0), np.nan, y)
    g = np.repeat(grid[:, None], y.shape[1], axis=1)
    g = np.where(np.isfinite(y), g, np.nan)
    n = np.isfinite(y).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gm, ym = g - np.nansum(g, 0) / n, y - np.nansum(y, 0) / n
        a = np.where(n >= 2, np.nansum(gm * ym, 0) / np.nansum(gm * gm, 0), np.nan)
    return {"a": a, "log_c": grid, "log_n": y}


def approach1(runs: list[dict], convention: str, var: float, n_boot: int = 1000,
              seed: int = 0) -> dict:
    """a from the envelope, with a 95% interval from curves shifted by Gaussian offsets of a
    seed mean's sd (seed-to-seed differences are mostly a shift of the whole curve)."""
    cvs = curves(runs, convention)
    sd = np.sqrt(var / np.array([c["seeds"] for c in cvs], float))
    fit = envelope(cvs, np.zeros((len(cvs), 1)))
    rng = np.random.default_rng(seed)
    boot = envelope(cvs, sd[:, None] * rng.standard_normal((len(cvs), n_boot)))
    return {"a": float(fit["a"][0]), "ci": interval(boot["a"]),
            "frontier": [[float(math.exp(c)), float(math.exp(n))]
                         for c, n in zip(fit["log_c"], fit["log_n"][:, 0]) if np.isfinite(n)]}


# ---------------------------------------------------------------------------------------------
# Approach 3: the parametric law
# ---------------------------------------------------------------------------------------------

def law(theta: dict, N, D):
    return theta["E"] + theta["A"] / np.power(N, theta["alpha"]) + theta["B"] / np.power(
        D, theta["beta"])


def approach3(pts: list[dict], var: float, n_boot: int = 200, seed: int = 0,
              starts=None) -> dict:
    """The law fitted to every run (each seed a point), with a 95% interval from refits on
    the fitted law plus Gaussian noise (warm-started from the fit). The noise variance
    "var" is the larger of the seeds' `var` and the fit's residual variance: where the law
    misses the runs by more than the seeds differ, the misfit counts as noise."""
    N = np.concatenate([np.repeat(p["N"], [l.size for l in p["L"]]) for p in pts])
    D = np.concatenate([np.repeat(p["D"], [l.size for l in p["L"]]) for p in pts])
    L = np.concatenate([np.concatenate(p["L"]) for p in pts])
    fit = fit_approach3(N, D, L, starts=starts or STARTS)
    rng = np.random.default_rng(seed)
    centre = law(fit, N, D)
    resid = float(np.sum((L - centre) ** 2) / max(1, L.size - 5))
    var = max(var, resid) if math.isfinite(var) else resid
    boots = [fit_approach3(N, D, centre + math.sqrt(var) * rng.standard_normal(L.size),
                           starts=[fit["theta"]]) for _ in range(n_boot)]
    out = {k: fit[k] for k in ("E", "A", "B", "alpha", "beta", "a", "theta")}
    out["var"], out["resid_var"] = var, resid
    out["ci"] = interval(np.array([b["a"] for b in boots]))
    for k in ("E", "alpha", "beta"):
        out[f"{k}_ci"] = interval(np.array([b[k] for b in boots]))
    out["N_opt"] = [n_opt_approach3(fit, 6 * p["N"].mean() * p["D"].mean()) for p in pts]
    return out


# ---------------------------------------------------------------------------------------------
# Coverage by simulation
# ---------------------------------------------------------------------------------------------

def coverage(pts: list[dict], truth: dict, sd: float, n_sim: int = 400, n_boot: int = 400,
             seed: int = 0) -> dict:
    """Sweeps simulated from the law `truth` (E, A, B, alpha, beta) on the design of `pts`
    (its N, D and seeds per point), with Gaussian noise of sd per run, each analysed as a
    real sweep is: approach 3 fitted (from the law's own parameters as the starting point),
    then approach 2 with its interval. Returns the share of 95% intervals that contain the
    law's a = β / (α + β), with the estimates' mean and sd and the intervals' median width."""
    rng = np.random.default_rng(seed)
    a_true = truth["beta"] / (truth["alpha"] + truth["beta"])
    start = [math.log(truth["A"]), math.log(truth["B"]), math.log(truth["E"]),
             truth["alpha"], truth["beta"]]
    est, covered, width = [], [], []
    for _ in range(n_sim):
        sim = [{**p, "L": [law(truth, n, d) + sd * rng.standard_normal(l.size)
                           for n, d, l in zip(p["N"], p["D"], p["L"])]} for p in pts]
        var = seed_noise(sim)["var"]
        f3 = approach3(sim, var, n_boot=0, starts=[start])
        a2 = approach2(sim, f3, f3["var"], n_boot, seed=int(rng.integers(2 ** 31)))
        est.append(a2["a"])
        covered.append(a2["ci"][0] <= a_true <= a2["ci"][1])
        width.append(a2["ci"][1] - a2["ci"][0])
    est = np.array(est)
    return {"coverage": float(np.mean(covered)), "a_true": float(a_true),
            "a_mean": float(np.nanmean(est)), "a_sd": float(np.nanstd(est, ddof=1)),
            "width_median": float(np.nanmedian(width)), "n_sim": n_sim, "n_boot": n_boot,
            "noise_sd": float(sd), "truth": {k: float(truth[k]) for k in
                                             ("E", "A", "B", "alpha", "beta")}}


# ---------------------------------------------------------------------------------------------
# Everything, for a saved sweep
# ---------------------------------------------------------------------------------------------

def fit_all(doc: dict, n_boot: int = 1000, n_sim: int = 300, n_boot3: int = 200,
            starts=None) -> dict:
    """{"fits": {approach: {convention: {"a", "ci", ...}}}, "coverage", "coverage_detail",
    "noise"} for a sweep saved by tools/scaling_tpu.py: approaches 1 and 3 on every run,
    approach 2 on the budgets with three sizes or more. Without a second seed anywhere, the
    noise is approach 3's residual variance. The coverage is that of approach 2's interval
    under the non-embedding convention, simulated from that convention's approach-3 law with
    the sweep's seed noise."""
    runs = doc["runs"]
    sizes = {}
    for r in runs:
        sizes.setdefault(r["budget"], set()).add(r["params"])
    valleys = [r for r in runs if len(sizes[r["budget"]]) >= 3]   # approach 2's budgets
    fits = {"approach1": {}, "approach2": {}, "approach3": {}}
    noise = {}
    for conv in CONVENTIONS:
        nz = seed_noise(points(runs, conv))
        noise[conv] = nz
        a3 = approach3(points(runs, conv), nz["var"], n_boot3, starts=starts)
        fits["approach1"][conv] = approach1(runs, conv, a3["var"], n_boot)
        fits["approach2"][conv] = approach2(points(valleys, conv), a3, a3["var"], n_boot)
        fits["approach3"][conv] = a3
    var = noise["non_embedding"]["var"]
    sd = math.sqrt(var if math.isfinite(var) else fits["approach3"]["non_embedding"]["var"])
    detail = coverage(points(valleys, "non_embedding"), fits["approach3"]["non_embedding"], sd,
                      n_sim=n_sim, n_boot=min(n_boot, 400))
    return {"fits": fits, "coverage": detail["coverage"], "coverage_detail": detail,
            "noise": {"seed_sd": sd, "df": noise["non_embedding"]["df"]},
            "moe_vs_dense": moe_vs_dense(doc)}


def moe_vs_dense(doc: dict) -> list[dict]:
    """Per budget with MoE runs: the best seed-mean loss of the dense sizes and of the MoE
    sizes (same budget in active 6ND, same data and schedule), the vertex of each parabola
    in log N (three sizes or more), the loss difference at each size both trained, and the
    wall-clock price: the MoE's step time over the dense step of the same depth and width."""
    dense, moe = doc["runs"], doc.get("moe", [])
    step = {(z["rung"], z.get("experts", 0)): z["step_s"] for z in doc.get("sizes", [])}
    out = []
    for c in sorted({r["budget"] for r in moe}):
        row = {"budget": c}
        for kind, runs in (("dense", dense), ("moe", moe)):
            at = [r for r in runs if r["budget"] == c]
            rungs = sorted({r["rung"] for r in at})
            n = np.array([next(r["params"] for r in at if r["rung"] == g) for g in rungs], float)
            loss = np.array([np.mean([r["val_loss"] for r in at if r["rung"] == g])
                             for g in rungs])
            row[kind] = {"rungs": rungs, "N": n.tolist(), "loss": loss.tolist(),
                         "best": float(loss.min()), "N_best": float(n[loss.argmin()])}
            if len(rungs) >= 3:
                coef = np.polyfit(np.log(n), loss, 2)
                row[kind]["N_vertex"] = (float(np.exp(-coef[1] / (2 * coef[0])))
                                         if coef[0] > 0 else None)
        both = [g for g in row["moe"]["rungs"] if g in row["dense"]["rungs"]]
        row["delta_same_size"] = {
            g: row["moe"]["loss"][row["moe"]["rungs"].index(g)]
            - row["dense"]["loss"][row["dense"]["rungs"].index(g)] for g in both}
        row["delta_best"] = row["moe"]["best"] - row["dense"]["best"]
        e = next(r["experts"] for r in moe if r["budget"] == c)
        row["step_ratio"] = {g: step[(g, e)] / step[(g, 0)] for g in row["moe"]["rungs"]
                             if (g, e) in step and (g, 0) in step}
        out.append(row)
    return out


def report(doc: dict) -> str:
    """A saved accelerator sweep as text: where it ran, the corpus and its baselines, the
    runs per budget (seed mean ± sd), the fits per approach and convention, the coverage."""
    runs, c, s = doc["runs"], doc["corpus"], doc["settings"]
    lines = [f"{doc['device_kind']}, JAX {doc['jax']}, {doc['date']}: {len(runs)} runs in "
             f"{s.get('wall_s', 0):.0f} s ({len(doc['skipped'])} skipped for time)",
             f"corpus: {c['train_bytes']:,} bytes of Python source to train on, "
             f"{c['val_bytes']:,} held out; the longest run sees "
             f"{max([r['epochs'] for r in runs] or [0]):.1f} epochs",
             "baselines on the held-out bytes (nats/byte): " + ", ".join(
                 f"{k} {v['loss']:.3f}" for k, v in doc["baselines"].items())]
    for b in sorted({r["budget"] for r in runs}):
        cells = []
        for n in sorted({r["params"] for r in runs if r["budget"] == b}):
            ls = np.array([r["val_loss"] for r in runs if r["budget"] == b and r["params"] == n])
            sd = f"±{ls.std(ddof=1):.3f}" if ls.size > 1 else ""
            cells.append(f"{n / 1e6:.2f}M {ls.mean():.3f}{sd}")
        lines.append(f"C={b:.0e}  " + "  ".join(cells))
    if not doc.get("fits"):
        lines.append("no fits yet: python tools/scaling_tpu.py --refit <file> fills them")
        return "\n".join(lines)
    lines.append(f"a of N_opt ∝ C^a [95% interval]   {'non-embedding N':>22s}"
                 f"   {'all parameters':>22s}")
    for name, by in doc["fits"].items():
        lines.append(f"{name:33s}" + "".join(
            f"   {f['a']:.3f} [{f['ci'][0]:.3f}, {f['ci'][1]:.3f}]".rjust(25)
            for f in (by["non_embedding"], by["all"])))
    lines.append("approach 2's parabolas alone, on the fitted law, miss its a by " + ", ".join(
        f"{f['bias']:+.3f} ({conv})" for conv, f in doc["fits"]["approach2"].items())
        + ": the interval is shifted by that much from the estimate")
    a2 = doc["fits"]["approach2"]["non_embedding"]
    cells = []
    for c, n in zip(a2["budgets"], a2["N_opt"]):
        ns = [r["params"] for r in runs if r["budget"] == c]
        inside = min(ns) <= n <= max(ns)
        cells.append(f"C={c:.0e} {n / 1e6:.2f}M" + ("" if inside else " (outside)"))
    lines.append("approach 2's vertices, non-embedding N: " + ", ".join(cells))
    for conv, f in doc["fits"]["approach3"].items():
        lines.append(f"approach 3's law, {conv} N: E = {f['E']:.3f}, alpha = {f['alpha']:.3f}, "
                     f"beta = {f['beta']:.3f}")
    for row in doc.get("moe_vs_dense", []):
        same = ", ".join(f"{v:+.3f}" for v in row["delta_same_size"].values())
        price = ", ".join(f"{v:.1f}x" for v in row["step_ratio"].values())
        lines.append(f"MoE at C={row['budget']:.0e}: best {row['moe']['best']:.3f} "
                     f"(N {row['moe']['N_best'] / 1e6:.2f}M) vs dense {row['dense']['best']:.3f} "
                     f"(N {row['dense']['N_best'] / 1e6:.2f}M), {row['delta_best']:+.3f}; "
                     f"at the same sizes {same}; a step costs {price} the dense one's")
    cd = doc["coverage_detail"]
    lines.append(f"approach 2's 95% interval covered the law's a in {doc['coverage']:.0%} of "
                 f"{cd['n_sim']} simulated sweeps (seed sd {cd['noise_sd']:.4f}; estimates "
                 f"{cd['a_mean']:.3f} ± {cd['a_sd']:.3f} around {cd['a_true']:.3f})")
    return "\n".join(lines)


def plot_tpu(doc: dict, png) -> None:
    """Draw the accelerator sweep into `png`: validation loss against non-embedding N per
    budget (seed means; dense solid, MoE dashed at the same active budget), approach 2's
    vertices where fitted, and the n-gram baselines as horizontal lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    budgets = sorted({r["budget"] for r in doc["runs"]})
    colours = plt.cm.viridis(np.linspace(0.05, 0.85, len(budgets)))
    for c, col in zip(budgets, colours):
        for kind, runs, style in (("dense", doc["runs"], "-o"),
                                  ("MoE", doc.get("moe", []), "--s")):
            at = [r for r in runs if r["budget"] == c]
            ns = sorted({r["params"] for r in at})
            if not ns:
                continue
            loss = [np.mean([r["val_loss"] for r in at if r["params"] == n]) for n in ns]
            ax.plot(ns, loss, style, color=col, ms=4,
                    label=f"C={c:.0e}" + ("" if kind == "dense" else " MoE"))
    for name, b in doc.get("baselines", {}).items():
        if name != "unigram":
            ax.axhline(b["loss"], color="grey", lw=0.8, ls=":")
            ax.text(2.2e5, b["loss"] + 0.02, name, color="grey", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel("validation loss (nats per byte)")
    ax.set_title(f"isoFLOP curves on {doc['device_kind']}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
