"""ragged: `lax.ragged_dot` in minijax against JAX, the grouped-matmul Pallas kernels of
compare/_ragged_kernels.py under both Pallas implementations, and the cost model of the fused
expert MLP (chapter 28).

- **ragged_dot**: random group sizes (empty groups, totals below M) over several shapes and
  dtypes; minijax's values (eager and jit) and grads against JAX's.
  Outputs (and the first operand's gradient) are compared on the rows some group covers:
  XLA's CPU expansion writes zeros past sum(group_sizes), a TPU's result there is not
  specified; the largest value found there is recorded (`max_abs_past_the_groups`).
- **gmm / tgmm**: the kernel against `jax.lax.ragged_dot`, and grad through its custom_vjp
  against grad of `jax.lax.ragged_dot`, under minijax's Pallas and JAX's (interpret mode).
- **fused MLP**: `silu(x_g @ W_up[g]) @ W_down[g]` in one kernel (and its two backward
  kernels) against two `jax.lax.ragged_dot`s, forward and backward, under both.
- **roofline**: FLOPs and HBM bytes, fused and unfused, over a grid of (G, M, D, F) with
  F/D in {1, 2, 4, 8}, and the roofline time of each on the published numbers of one
  accelerator.
- **CPU benchmark**: the fused kernel against the two `ragged_dot`s for F/D in {1, 2, 4, 8}
  (both modules in full runs, minijax only with `--quick`). No accelerator ran here
  (`"gpu": null`): CPU times of interpret-mode kernels say nothing about speed and are
  labelled so.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.experimental import pallas as jpl
from jax.experimental.pallas import tpu as jpltpu

import minijax
from compare import _ragged_kernels
from compare._modules import MODULES
from compare._report import TopicResult, compare_trees, interleaved_ms, plot
from minijax.experimental import pallas as mpl
from minijax.experimental.pallas import tpu as mpltpu
from tools import accelerator_tpu

PALLAS = {"jax": (jpl, jpltpu), "minijax": (mpl, mpltpu)}  # each module's Pallas, its TPU part

# The model's accelerator: an H200's datasheet numbers (dense bf16 tensor-core FLOP/s, HBM3e
# bandwidth). Only the cost model uses them; nothing ran on one.
ACCELERATOR = {"name": "H200 (datasheet)", "peak_flops": 989e12, "hbm_bytes_per_s": 4.8e12}


def group_sizes(rng, g: int, m: int) -> np.ndarray:
    """g random sizes summing to at most m, about a quarter of them zero."""
    cuts = np.sort(rng.randint(0, m + 1, size=g))
    sizes = np.diff(np.concatenate([[0], cuts]))
    sizes[rng.rand(g) < 0.25] = 0
    return sizes.astype(np.int32)


def _err(a, b) -> float:
    """Largest absolute difference of a and b; inf when their shapes, dtypes or weak types
    differ, or when NaN or inf stands on one side only (`compare_trees` with no tolerance on
    finite values)."""
    v = compare_trees(a, b, rtol=0.0, atol=1e300)
    return v.max_err if v.ok and v.max_err is not None else (0.0 if v.ok else math.inf)


def _split(a, total: int) -> tuple[np.ndarray, float]:
    """(the rows some group covers, the largest |value| of the rows past `total`). XLA's CPU
    expansion writes zeros past sum(group_sizes); what a TPU leaves there is not specified
    (`jax.lax.ragged_dot` does not say), so the checks compare the covered rows and record
    the rest."""
    a = np.asarray(a)
    tail = a[total:]
    return a[:total], float(np.max(np.abs(tail))) if tail.size else 0.0


def ragged_dot_cases(res: TopicResult, n_cases: int) -> dict:
    rng = np.random.RandomState(0)
    max_err = grad_err = tail = 0.0
    refused: list[str] = []
    for _ in range(n_cases):
        m, k, n, g = (int(v) for v in rng.randint(1, 12, size=4))
        x = rng.randn(m, k).astype(np.float32)
        w = rng.randn(g, k, n).astype(np.float32)
        gs = group_sizes(rng, g, m)
        ct = rng.randn(m, n).astype(np.float32)
        total = int(gs.sum())
        want, want_tail = _split(jax.lax.ragged_dot(x, w, gs), total)
        tail = max(tail, want_tail)
        for f in (minijax.lax.ragged_dot, minijax.jit(minijax.lax.ragged_dot)):
            got, got_tail = _split(f(x, w, gs), total)
            max_err, tail = max(max_err, _err(got, want)), max(tail, got_tail)

        def loss(J, gs=gs, ct=ct):
            return lambda lhs, rhs: (J.lax.ragged_dot(lhs, rhs, gs) * ct).sum()
        theirs = jax.jit(jax.grad(loss(jax), (0, 1)))  # one compile
        try:
            want_grads = theirs(x, w)
        except jax.errors.JaxRuntimeError as e:
            # on a TPU v5e, XLA's compiler refused one of these tiny cases (an INTERNAL
            # RET_CHECK in its mask aggregator): the reference is then JAX on the CPU
            refused.append(f"m {m}, k {k}, n {n}, groups {gs.tolist()}: "
                           + str(e).splitlines()[0][:120])
            with jax.default_device(jax.devices("cpu")[0]):  # `theirs` compiled for the CPU
                want_grads = theirs(x, w)
        (d_x, d_w), (want_dx, want_dw) = minijax.grad(loss(minijax), (0, 1))(x, w), want_grads
        grad_err = max(grad_err, _err(_split(d_x, total)[0], _split(want_dx, total)[0]),
                       _err(d_w, want_dw))
    res.check_true(f"ragged_dot: {n_cases} random cases, minijax == jax (values, eager and "
                   f"jit, the rows the groups cover; max err {max_err:.2g})", max_err < 1e-5)
    where = (f"; JAX's compile for this device refused {len(refused)} of them, whose grads "
             "come from JAX on the CPU" if refused else "")
    res.check_true(f"ragged_dot: grads wrt both operands == jax (max err {grad_err:.2g}"
                   f"{where})", grad_err < 1e-5)
    return {"cases": n_cases, "max_err": max_err, "grad_max_err": grad_err,
            "max_abs_past_the_groups": tail, "jax_compile_refused": refused}


def _covered_errors(got, want, grads, want_grads, total: int) -> tuple[float, float]:
    """The largest differences of the outputs and of the gradients, over the rows some group
    covers for the output and the first operand's gradient (`_split`), whole for the weights'."""
    err = _err(_split(got, total)[0], _split(want, total)[0])
    first, *weights = grads
    want_first, *want_weights = want_grads
    gerr = max([_err(_split(first, total)[0], _split(want_first, total)[0])]
               + [_err(a, b) for a, b in zip(weights, want_weights)])
    return err, gerr


def gmm_checks(res: TopicResult, kernels: dict, m: int, k: int, n: int) -> dict:
    rng = np.random.RandomState(1)
    g = 4
    x = rng.randn(m, k).astype(np.float32)
    w = rng.randn(g, k, n).astype(np.float32)
    gs = group_sizes(rng, g, m)
    dy = rng.randn(m, n).astype(np.float32)
    want, vjp = jax.vjp(lambda x, w: jax.lax.ragged_dot(x, w, gs), x, w)
    want_grads = vjp(dy)
    out = {}
    for name, J in MODULES:
        K = kernels[name]
        got, got_vjp = J.vjp(lambda x, w, K=K: K.grouped_matmul(x, w, gs), x, w)
        err, gerr = _covered_errors(got, want, got_vjp(dy), want_grads, int(gs.sum()))
        res.check_true(f"gmm ({name} pallas): == jax.lax.ragged_dot (max err {err:.2g}), "
                       f"groups {gs.tolist()} over {m} rows", err < 1e-4)
        res.check_true(f"gmm ({name} pallas): grad (gmm + tgmm) == grad of ragged_dot "
                       f"(max err {gerr:.2g})", gerr < 1e-4)
        out[name] = {"max_err": err, "grad_max_err": gerr}
    return out


def fused_mlp_checks(res: TopicResult, kernels: dict, m: int, d: int, f: int) -> dict:
    rng = np.random.RandomState(2)
    g = 4
    x = rng.randn(m, d).astype(np.float32)
    up = (rng.randn(g, d, f) / np.sqrt(d)).astype(np.float32)
    down = (rng.randn(g, f, d) / np.sqrt(f)).astype(np.float32)
    gs = group_sizes(rng, g, m)
    dy = rng.randn(m, d).astype(np.float32)
    ref = kernels["jax"].ragged_mlp
    want, vjp = jax.vjp(lambda *a: ref(*a, gs), x, up, down)
    want_grads = vjp(dy)
    out = {}
    for name, J in MODULES:
        K = kernels[name]
        got, got_vjp = J.vjp(lambda *a, K=K: K.fused_mlp(*a, gs), x, up, down)
        err, gerr = _covered_errors(got, want, got_vjp(dy), want_grads, int(gs.sum()))
        res.check_true(f"fused MLP ({name} pallas): == two ragged_dots (max err {err:.2g})",
                       err < 1e-4)
        res.check_true(f"fused MLP ({name} pallas): grads of x, W_up, W_down == those of two "
                       f"ragged_dots (max err {gerr:.2g})", gerr < 1e-4)
        out[name] = {"max_err": err, "grad_max_err": gerr}
    return out


def roofline_rows(quick: bool) -> list[dict]:
    """The cost model over the grid: G=8 experts, bf16, F/D in {1, 2, 4, 8}."""
    rows = []
    for m in ((1024,) if quick else (1024, 16384)):
        for d in ((512,) if quick else (128, 512, 2048)):
            for ratio in (1, 2, 4, 8):
                c = _ragged_kernels.mlp_cost(g=8, m=m, d=d, f=ratio * d, itemsize=2)
                t_f, t_u = (_ragged_kernels.roofline_time(
                    c, ACCELERATOR["peak_flops"], ACCELERATOR["hbm_bytes_per_s"], fused)
                    for fused in (True, False))
                rows.append({**c, "intensity_fused": c["flops"] / c["bytes_fused"],
                             "intensity_unfused": c["flops"] / c["bytes_unfused"],
                             "roofline_us_fused": 1e6 * t_f, "roofline_us_unfused": 1e6 * t_u})
    return rows


def _ms(cases: dict, quick: bool) -> dict[str, float]:
    """Median milliseconds of each blocking call `fn(*args)` of `cases` ({key: (J, fn,
    args)}), timed interleaved after one warm-up call each."""
    calls = {k: (lambda J=J, fn=fn, args=args: J.block_until_ready(fn(*args)))
             for k, (J, fn, args) in cases.items()}
    return {k: float(v) for k, v in
            interleaved_ms(calls, repeat=3 if quick else 10, warmup=1).items()}


def cpu_benchmark(res: TopicResult, kernels: dict, quick: bool) -> list[dict]:
    """The fused kernel against the two ragged_dots over F/D in {1, 2, 4, 8} (correctness
    for each module; CPU times of the interpret-mode kernel and of XLA's unfused pair, which
    measure an interpreter and say nothing about the kernel's speed on an accelerator)."""
    rng = np.random.RandomState(4)
    m, d, g = 32, 8, 4
    names = ["minijax"] if quick else [name for name, _ in MODULES]
    rows = []
    for ratio in ((1, 4) if quick else (1, 2, 4, 8)):
        f = d * ratio
        x = rng.randn(m, d).astype(np.float32)
        up = (rng.randn(g, d, f) / np.sqrt(d)).astype(np.float32)
        down = (rng.randn(g, f, d) / np.sqrt(f)).astype(np.float32)
        gs = group_sizes(rng, g, m)
        total = int(gs.sum())
        want = _split(kernels["jax"].ragged_mlp(x, up, down, gs), total)[0]
        row = {"G": g, "M": m, "D": d, "F": f}
        cases = {}
        for name in names:
            J = dict(MODULES)[name]
            fused = J.jit(kernels[name].fused_mlp)
            row[f"max_err_{name}"] = _err(_split(fused(x, up, down, gs), total)[0], want)
            cases[f"cpu_interpret_ms_fused_{name}"] = (J, fused, (x, up, down, gs))
        cases["cpu_xla_ms_unfused_jax"] = (jax, jax.jit(kernels["jax"].ragged_mlp),
                                           (x, up, down, gs))
        row.update(_ms(cases, quick))
        rows.append(row)
    res.check_true("fused MLP == two ragged_dots (the rows the groups cover) for F/D in "
                   f"{[r['F'] // r['D'] for r in rows]} ({', '.join(names)})",
                   all(r[f"max_err_{n}"] < 1e-4 for r in rows for n in names))
    return rows


def _draw_roofline(fig, rows) -> None:
    ax = fig.add_subplot(1, 1, 1)
    ridge = ACCELERATOR["peak_flops"] / ACCELERATOR["hbm_bytes_per_s"]
    for key, marker in (("intensity_unfused", "o"), ("intensity_fused", "s")):
        for m in sorted({r["M"] for r in rows}):
            for d in sorted({r["D"] for r in rows}):
                sel = [r for r in rows if r["M"] == m and r["D"] == d]
                ax.plot([r["F"] / r["D"] for r in sel], [r[key] for r in sel], marker=marker,
                        label=f"{key.split('_')[1]} M={m} D={d}")
    ax.axhline(ridge, color="k", linestyle="--", label=f"ridge of {ACCELERATOR['name']}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("F / D")
    ax.set_ylabel("arithmetic intensity (FLOP per HBM byte)")
    ax.legend(fontsize=6)


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("ragged_dot and grouped-matmul Pallas kernels (gmm, fused expert MLP)")
    res.chapter = "chapters/28-ragged-dot-gmm.md"
    kernels = {name: _ragged_kernels.build(J, *PALLAS[name]) for name, J in MODULES}
    rd = ragged_dot_cases(res, 6 if quick else 40)
    gmm = gmm_checks(res, kernels, *((24, 8, 8) if quick else (64, 32, 16)))
    mlp = fused_mlp_checks(res, kernels, *((24, 8, 16) if quick else (64, 16, 64)))
    rows = roofline_rows(quick)
    bench = cpu_benchmark(res, kernels, quick)
    res.check_true("cost model: fused and unfused do the same FLOPs; the fused kernel saves "
                   "the hidden layer's 2*M*F*itemsize bytes and re-reads each group's weights "
                   "once per row tile", all(
                       r["bytes_unfused"] - r["bytes_fused"] == 2 * (
                           2 * r["M"] * r["F"] - 2 * r["D"] * r["F"] * (r["row_tiles"] - r["G"]))
                       for r in rows))

    _cpu_times(res, quick, kernels)

    res.extra = {"ragged_dot": rd, "gmm": gmm, "fused_mlp": mlp, "roofline": rows,
                 "accelerator_model": ACCELERATOR, "cpu_interpret_benchmark": bench,
                 "gpu": None}
    _describe(res, rows, bench, quick)
    res.sections.append(accelerator_tpu.report_section(("gmm", "tgmm", "fused")))
    return res


def _cpu_times(res, quick, kernels):
    """CPU times (a shared machine, noisy): XLA's ragged_dot through each module, and the
    interpret-mode kernel, which only shows that it runs."""
    rng = np.random.RandomState(3)
    m, d, f, g = (64, 16, 64, 4) if not quick else (24, 8, 16, 4)
    x = rng.randn(m, d).astype(np.float32)
    up, down = rng.randn(g, d, f).astype(np.float32), rng.randn(g, f, d).astype(np.float32)
    args = (x, up, down, group_sizes(rng, g, m))
    cases = {}
    for name, J in MODULES:
        cases[f"unfused MLP (2 ragged_dot, XLA): {name}"] = (J, J.jit(kernels[name].ragged_mlp),
                                                             args)
        cases[f"fused MLP kernel (interpret mode): {name}"] = (J, J.jit(kernels[name].fused_mlp),
                                                               args)
    res.timings_ms.update(_ms(cases, quick))


def _describe(res, rows, bench, quick):
    """The cost-model section, with the interpret-mode benchmark, and the intensity plot at full
    size."""
    head = "| G | M | D | F | GFLOP | MB fused | MB unfused | FLOP/B fused | FLOP/B unfused |"
    table = "\n".join(
        f"| {r['G']} | {r['M']} | {r['D']} | {r['F']} | {r['flops'] / 1e9:.2f} | "
        f"{r['bytes_fused'] / 1e6:.1f} | {r['bytes_unfused'] / 1e6:.1f} | "
        f"{r['intensity_fused']:.0f} | {r['intensity_unfused']:.0f} |" for r in rows)
    ridge = ACCELERATOR["peak_flops"] / ACCELERATOR["hbm_bytes_per_s"]
    res.sections.append(
        "### The cost model\n\n"
        "Expert MLP `silu(x_g @ W_up[g]) @ W_down[g]`, bf16, G=8 experts. Both versions do "
        "4*M*D*F (+M*F) FLOPs; the unfused one writes the (M, F) hidden layer to HBM and reads "
        "it back, 2*M*F*2 bytes more; the fused kernel re-reads its group's weights once per "
        "row tile (bm = 512 rows), 2*D*F*2 bytes each time. The ridge point of the model "
        "accelerator "
        f"({ACCELERATOR['name']}) is {ridge:.0f} FLOP/B: below it a kernel is memory-bound.\n\n"
        f"{head}\n|---|---|---|---|---|---|---|---|---|\n{table}\n\n"
        "No accelerator was used: the kernels ran in interpret mode on CPU, which checks "
        "correctness only; their CPU times measure an interpreter on a shared machine, not "
        "the kernels:\n\n| F/D | max err (" + " / ".join(
            k[8:] for k in bench[0] if k.startswith("max_err_")) + ") | CPU ms, fused kernel "
        "in interpret mode (minijax) | CPU ms, XLA's two ragged_dots (jax) |\n|---|---|---|---|\n"
        + "\n".join(f"| {r['F'] // r['D']} | " + " / ".join(
            f"{r[k]:.1g}" for k in r if k.startswith("max_err_"))
            + f" | {r['cpu_interpret_ms_fused_minijax']:.2f} | "
            f"{r['cpu_xla_ms_unfused_jax']:.3f} |" for r in bench))
    if not quick:
        res.sections.append("### Intensity vs F/D\n\n" + plot(
            "ragged-roofline", lambda fig: _draw_roofline(fig, rows)))
