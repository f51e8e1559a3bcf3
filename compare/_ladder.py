"""Shared pieces of the model-ladder topics (`cnn_bn`, and later `gpt`, `moe`).

Each ladder topic trains one model written against a module alias `J` under both minijax and
JAX, then profiles it the same way. What they share lives here, small on purpose:

    progress(total, desc, quiet)           a tqdm bar (or None when tqdm is missing)
    step_times(calls, reps, warmup)        interleaved per-call wall times, ms, per module
    medians(times)                         the median of each module's times
    stage_times(jitted, *args)             trace+lower and compile times, and the executable
    cost(compiled)                         XLA's flops / bytes accessed as a plain dict
    jax_trace(fn, args, folder, hlo_text)  a jax.profiler Perfetto trace of one call, summarised
                                           per HLO op and per JAX primitive and phase
    hlo_op_names(hlo_text), op_kind(...)   HLO instruction -> the JAX op it came from
    plot_curves(curves, path, title)       one matplotlib plot, every module's curve on it
    module_entry(losses, eval, step_ms)    the JSON entry for one module

Taught with chapters/18-cnn-batchnorm.md (and chapter 17 for the profiler itself).
"""

from __future__ import annotations

import collections
import gzip
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from compare._report import interleaved_times


def progress(total: int, desc: str, quiet: bool = False):
    """A tqdm progress bar on stdout with `total` steps, or None if tqdm is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional: no bar then
        return None
    return tqdm(total=total, desc=desc, unit="step", disable=quiet, file=sys.stdout, leave=False)


def step_times(calls: dict[str, Callable[[], Any]], *, reps: int = 30,
               warmup: int = 5) -> dict[str, list[float]]:
    """Wall time in ms of each `calls[name]()`, `warmup + reps` rounds, the modules interleaved
    call by call in this process (`compare/_report.py: interleaved_times`) so that machine
    load hits both alike. Each callable must block on its own result
    (`J.block_until_ready`). Returns the `reps` times after warm-up."""
    return interleaved_times(calls, repeat=reps, warmup=warmup)


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    """The median of each module's list of times."""
    return {name: statistics.median(t) for name, t in times.items()}


def stage_times(jitted, *args) -> tuple[dict[str, float], Any]:
    """({"trace_lower_ms", "compile_ms"}, compiled) for `jitted` (a fresh `J.jit(f)`, so no
    cache hides the work) at `args`, through the AOT stages both modules share:
    `jitted.trace(*args).lower()` then `.compile()`."""
    t0 = time.perf_counter()
    lowered = jitted.trace(*args).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    return {"trace_lower_ms": (t1 - t0) * 1e3, "compile_ms": (t2 - t1) * 1e3}, compiled


def cost(compiled) -> dict[str, float]:
    """XLA's cost model for an executable: {"flops", "bytes accessed"} (JAX returns a dict,
    older jaxlibs a one-element list of dicts; both are accepted)."""
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0]
    return {k: float(ca.get(k, 0.0)) for k in ("flops", "bytes accessed")}


def hlo_op_names(hlo_text: str) -> dict[str, str]:
    """{HLO instruction name: the JAX op it came from}, read from optimized HLO text (JAX
    stamps `metadata={op_name="jit(step)/transpose(jvp())/conv_general_dilated"}` on each
    instruction; a fusion without its own metadata takes the first op_name inside it)."""
    own, calls, first_in = {}, {}, {}
    comp = None
    for line in hlo_text.splitlines():
        head = re.match(r"^(?:ENTRY )?%([\w.-]+) \(", line)
        if head:
            comp = head.group(1)
            continue
        m = re.match(r"^\s*(?:ROOT )?%([\w.-]+) = ", line)
        if not m:
            continue
        name = m.group(1)
        called = re.search(r"calls=%([\w.-]+)", line)
        called = called and called.group(1)
        op = re.search(r'op_name="([^"]*)"', line)
        op = op and op.group(1)
        if op:
            own[name] = op
            first_in.setdefault(comp, op)
        if called:
            calls[name] = called
    names = {name: own.get(name) or first_in.get(calls.get(name)) for name in set(own) | set(calls)}
    return {name: op for name, op in names.items() if op}


def op_kind(hlo_op: str, op_name: str | None) -> str:
    """'forward conv_general_dilated' / 'backward dot_general' from a JAX op_name path, or
    'XLA reduce-window' for an op XLA made up itself (no op_name: e.g. `wrapped_iota`)."""
    if op_name is None:
        return "XLA " + re.sub(r"^wrapped_|\.\d+$", "", hlo_op)
    phase = "backward" if "transpose(" in op_name else "forward"
    return f"{phase} {op_name.rsplit('/', 1)[-1]}"


def kernel_events(events: list[dict]) -> list[dict]:
    """The complete ("X") events of a profiler trace that are XLA's kernels. On an accelerator
    they sit on the "XLA Ops" threads of a "/device:..." process (every event of such a
    process where no thread is so named); on a CPU, whose kernels run on host threads, they
    are the events that carry an `hlo_op` or `long_name` argument. An event's name is its
    HLO instruction's."""
    device_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") ==
                   "process_name" and "/device:" in str((e.get("args") or {}).get("name", ""))}
    op_threads = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e.get("name") ==
                  "thread_name" and e.get("pid") in device_pids
                  and "XLA Ops" in str((e.get("args") or {}).get("name", ""))}
    done = [e for e in events if e.get("ph") == "X" and "dur" in e]
    if op_threads:
        return [e for e in done if (e["pid"], e.get("tid")) in op_threads]
    if device_pids:
        return [e for e in done if e["pid"] in device_pids]
    return [e for e in done if {"hlo_op", "long_name"} & set(e.get("args") or {})]


def jax_trace(fn: Callable, args: tuple, folder: Path, *, hlo_text: str | None = None,
              top: int = 8) -> dict[str, Any]:
    """Run `fn(*args)` (a compiled JAX function, already warmed up) once inside
    `jax.profiler.trace(folder, create_perfetto_trace=True)`.

    Returns {"perfetto": path of perfetto_trace.json.gz, "total_ms": summed duration of the
    XLA op events, "top": [(HLO op, ms), ...] the `top` busiest, and, given the executable's
    optimized `hlo_text`, "by_kind": [(kind, ms), ...] the time per JAX primitive and phase
    (see `op_kind`)}. The op events are the trace's kernels (`kernel_events`), not Python or
    runtime events.
    """
    import jax

    folder = Path(folder)
    with jax.profiler.trace(str(folder), create_perfetto_trace=True):
        jax.block_until_ready(fn(*args))
    path = sorted(folder.rglob("perfetto_trace.json.gz"))[-1]
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    per_op: collections.Counter = collections.Counter()
    for ev in kernel_events(events):
        per_op[ev.get("name", "?")] += float(ev.get("dur", 0.0)) / 1e3
    out = {"perfetto": path, "total_ms": sum(per_op.values()), "top": per_op.most_common(top)}
    if hlo_text is not None:
        names = hlo_op_names(hlo_text)
        kinds: collections.Counter = collections.Counter()
        for op, ms in per_op.items():
            kinds[op_kind(op, names.get(op))] += ms
        out["by_kind"] = kinds.most_common()
    return out


def plot_curves(curves: dict[str, list[float]], path: Path, *, title: str,
                ylabel: str = "training loss", logy: bool = True) -> Path:
    """Plot every module's curve (x = step) on one figure, saved as PNG at `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for (name, ys), style in zip(curves.items(), ("-", "--", ":", "-.")):
        ax.plot(ys, style, label=name, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def module_entry(losses, eval: dict[str, float], step_ms: float, **more) -> dict[str, Any]:
    """One module's JSON entry: {"losses": [...], "eval": {...}, "step_ms": t, **more}."""
    return {"losses": [float(v) for v in losses],
            "eval": {k: float(v) for k, v in eval.items()}, "step_ms": float(step_ms), **more}
