"""Two checks every model topic makes, whatever its model: its gradients against finite
differences, and where its step's time goes.

    finite_differences(res, what, loss, params, batch, grads)
        central differences of `loss` in float64 (JAX with x64 on) along a few random
        directions, against the directional derivative of each module's float32 gradient;
    phase_times(res, what, steps)
        the time of each stage of a step's life, per module: trace, lower, compile, and one
        compiled call (`J.jit(f).trace(*args).lower().compile()`, chapter 11).

Both record their checks and timings in `res` and return a markdown section for the report.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import jax
import numpy as np

from compare._modules import MODULES
from compare._report import TopicResult, code, interleaved_times, ms_of


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(tree)]


def finite_differences(res: TopicResult, what: str, loss: Callable, params, batch: tuple,
                       grads: dict[str, Any], *, directions: int = 3, h: float = 1e-3,
                       seed: int = 0, rtol: float = 2e-3, atol: float = 1e-6) -> str:
    """Check each module's gradient `grads[name]` (of `loss(params, *batch)`, at `params`)
    along `directions` random unit directions v: <grad, v> must equal the central difference
    (loss(p + h v) - loss(p - h v)) / 2h, computed by JAX in float64 (`jax.enable_x64`), the
    loss written against `jax` (floating-point `batch` arrays are given in float64 too). Only
    floating-point leaves of `params` move."""
    treedef = jax.tree_util.tree_structure(params)
    p64 = _leaves(params)
    is_float = [np.issubdtype(np.asarray(x).dtype, np.floating)
                for x in jax.tree_util.tree_leaves(params)]
    rng = np.random.RandomState(seed)
    vs = []
    for _ in range(directions):
        v = [rng.standard_normal(p.shape) if f else np.zeros(p.shape)
             for p, f in zip(p64, is_float)]
        norm = np.sqrt(sum(float((a * a).sum()) for a in v))
        vs.append([a / norm for a in v])

    batch = tuple(np.asarray(b, np.float64) if np.issubdtype(np.asarray(b).dtype, np.floating)
                  else b for b in batch)  # float inputs in float64 too
    with jax.enable_x64(True):
        f64 = jax.jit(loss)

        def at(v, step):
            moved = [p + step * a if f else p for p, a, f in zip(p64, v, is_float)]
            return float(f64(jax.tree_util.tree_unflatten(treedef, moved), *batch))
        fd = np.array([(at(v, h) - at(v, -h)) / (2 * h) for v in vs])
    dd = {name: np.array([sum(float((g * a).sum()) for g, a in zip(_leaves(grads[name]), v))
                          for v in vs]) for name, _ in MODULES}
    for name, _ in MODULES:
        with res.running("both" if name == "minijax" else "jax"):
            res.check(f"{what}: {name}'s grad along {directions} random directions equals "
                      "central differences (float64)", dd[name], fd, rtol=rtol, atol=atol)
    rows = "\n".join(f"{k}  {fd[k]: .8e}  {dd['jax'][k]: .8e}  {dd['minijax'][k]: .8e}"
                     for k in range(directions))
    return ("### Gradients against finite differences\n\n"
            f"Along {directions} random unit directions v of the parameter space, the "
            "derivative each module's float32 gradient predicts, `<grad, v>`, next to the "
            f"central difference `(L(p + h v) - L(p - h v)) / 2h` with h = {h:g}, computed "
            "in float64 (JAX with x64 on), so its own error is far below float32's "
            f"(tolerance: relative {rtol:g}).\n\n"
            + code("v  central difference (f64)  <grad_jax, v>  <grad_minijax, v>\n" + rows))


def phase_times(res: TopicResult, what: str, steps: dict[str, tuple[Callable, tuple]],
                *, repeat: int = 3) -> str:
    """Time each stage of a step for every module in `steps` ({name: (fn, args)}, `fn`
    not yet jitted): trace, lower, compile, then the first call of the compiled program (the
    median of `repeat` rounds, the modules interleaved; each round traces a fresh function).
    Stores `{what} <stage>: <name>` timings."""
    mods = dict(MODULES)

    def stages(name):
        J, (fn, args) = mods[name], steps[name]
        fresh = lambda *a: fn(*a)  # a new function: no trace cache to hit
        t = [time.perf_counter()]
        traced = J.jit(fresh).trace(*args)
        t.append(time.perf_counter())
        lowered = traced.lower()
        t.append(time.perf_counter())
        compiled = lowered.compile()
        t.append(time.perf_counter())
        J.block_until_ready(compiled(*args))
        t.append(time.perf_counter())
        return [(b - a) * 1e3 for a, b in zip(t, t[1:])]

    seen: dict[str, list[list[float]]] = {name: [] for name in steps}
    interleaved_times({name: lambda name=name: seen[name].append(stages(name))
                       for name in steps}, repeat=repeat, warmup=0)
    rows = []
    for i, stage in enumerate(("trace", "lower", "compile", "first call")):
        for name in steps:
            res.timings_ms[f"{what} {stage}: {name}"] = ms_of([s[i] for s in seen[name]])
        rows.append(f"{stage:10s}" + "".join(
            f"  {name} {float(res.timings_ms[f'{what} {stage}: {name}']):9.2f} ms"
            for name in steps))
    return ("### Profile: where a step's time goes\n\n"
            f"{what}: each stage of the step's life, timed on its own (`jit(f).trace(*args)`, "
            "`.lower()`, `.compile()`, then the first call of the compiled program), median of "
            f"{repeat} rounds with the modules interleaved (the timings table above gives "
            "the spread). The first three are paid once per new input shape; a first call "
            "also pays for moving its inputs and warming the program (later steps: the step "
            "time).\n\n" + code("\n".join(rows)))
