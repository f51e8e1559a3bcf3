"""jit: one small function through every stage of `jit` in minijax and real JAX, and what
`jit` itself costs.

The stages, for `f(x, w, b) = (tanh(x @ w + b) * 2, tanh(x @ w + b).sum(0))`, written once
against a module alias `J`:

* `J.jit(f).trace(*args).jaxpr` — the jaxpr (checked: same text once JAX-only params such
  as `out_sharding=None` are dropped; see `compare/core.py: jaxpr_grade`);
* `.lower()` then `.as_text()` — StableHLO (checked: a public `main`, the same set of ops);
* `.compile()` then `.as_text()` — the HLO after XLA's optimizations (checked: the same
  instructions and fusion kinds in the entry computation), `.cost_analysis()` (checked: same
  flops, and 2*m*n*k for a plain matmul) and `.memory_analysis()` (checked: same argument and
  output bytes);
* the compiled function's outputs (checked: equal).

Two benchmarks, both modules in one process, interleaved:

* per-call dispatch overhead of a cached jitted function on 1, 10 and 20 small arrays (a pytree
  in, the same pytree + 1 out), `block_until_ready` on every call; median of many single calls
  after warm-up. Target: minijax within 2x of JAX, whose dispatch path is C++.
* trace + lower of the MNIST MLP training step (784-256-256-10, `jit(value_and_grad)` plus an
  SGD update, `compare/mnist_mlp.py: program`), built fresh for each repetition so that neither
  module can answer from its cache. Target: minijax at most half of JAX's time.

Ratios are recorded, not asserted (timings depend on the machine).
"""

from __future__ import annotations

import inspect
import re
import statistics
import textwrap
import time

import numpy as np

from compare._modules import MODULES
from compare._report import TopicResult, code, plot
from compare.core import jaxpr_grade
from compare.mnist_mlp import init_params, program

TARGETS = {"dispatch": 2.0, "trace+lower": 0.5}


def stage_fn(J):
    jnp = J.numpy

    def f(x, w, b):
        h = jnp.tanh(x @ w + b)
        return h * 2.0, h.sum(axis=0)
    return f


def _side_by_side(title: str, texts: dict[str, str], note: str = "", lang: str = "") -> str:
    out = f"### {title}\n\n" + (note + "\n\n" if note else "")
    for name, _ in MODULES:
        out += f"{name}:\n\n{code(texts[name], lang)}\n\n"
    return out.rstrip()


def stablehlo_ops(text: str) -> list[str]:
    return sorted(set(re.findall(r"stablehlo\.([a-z_]+)", text)))


def entry_instructions(hlo: str) -> list[str]:
    """`opcode` (with `kind=` for fusions) of each instruction of the ENTRY computation."""
    entry = hlo[hlo.index("\nENTRY"):].split("\n}", 1)[0]
    out = []
    for line in entry.splitlines()[1:]:
        m = re.search(r"=\s+\S+\s+([\w-]+)\(", line)
        if m:
            kind = re.search(r"kind=(\w+)", line)
            out.append(m.group(1) + (f"[{kind.group(1)}]" if kind else ""))
    return out


# ---------------------------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------------------------

def _stages(J, args) -> dict:
    f = J.jit(stage_fn(J))
    traced = f.trace(*args)
    lowered = traced.lower()
    compiled = lowered.compile()
    cost = compiled.cost_analysis()
    mem = compiled.memory_analysis()
    m, k = args[0].shape
    n = args[1].shape[1]
    matmul = J.jit(lambda a, b: a @ b).lower(args[0], args[1]).compile()
    return {
        "jaxpr": str(traced.jaxpr),
        "out_info": [(s.shape, np.dtype(s.dtype).name, s.weak_type)
                     for s in J.tree_util.tree_leaves(traced.out_info)],
        "stablehlo": lowered.as_text(),
        "hlo": compiled.as_text(),
        "cost": {key: float(cost[key]) for key in ("flops", "transcendentals", "bytes accessed")
                 if key in cost},
        "memory": {key: int(getattr(mem, key)) for key in
                   ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                    "alias_size_in_bytes")},
        "matmul_flops": float(matmul.cost_analysis()["flops"]),
        "matmul_2mnk": 2 * m * n * k,
        "outputs": [np.asarray(o) for o in compiled(*args)],
    }


def _stage_checks(res: TopicResult, args) -> None:
    st = {name: _stages(J, args) for name, J in MODULES}
    jx, mj = st["jax"], st["minijax"]
    res.check("compiled outputs", mj["outputs"], jx["outputs"], rtol=1e-5, atol=1e-5)
    grade = jaxpr_grade(mj["jaxpr"], jx["jaxpr"])
    res.check_true("trace: jaxpr text identical", grade == "identical")
    res.check_true("trace: out_info shapes, dtypes, weak types", mj["out_info"] == jx["out_info"])
    for name, s in st.items():
        res.check_true(f"lower: {name} StableHLO has a public main",
                       "func.func public @main(" in s["stablehlo"])
    res.check_true("lower: same StableHLO ops",
                   stablehlo_ops(mj["stablehlo"]) == stablehlo_ops(jx["stablehlo"]))
    res.check_true("compile: same entry instructions and fusion kinds",
                   entry_instructions(mj["hlo"]) == entry_instructions(jx["hlo"]))
    res.check_true("cost_analysis: same flops", mj["cost"]["flops"] == jx["cost"]["flops"])
    res.check_true("cost_analysis: matmul flops == 2*m*n*k in both",
                   mj["matmul_flops"] == jx["matmul_flops"] == mj["matmul_2mnk"])
    res.check_true("memory_analysis: same argument and output bytes",
                   all(mj["memory"][k] == jx["memory"][k]
                       for k in ("argument_size_in_bytes", "output_size_in_bytes")))

    src = textwrap.dedent(inspect.getsource(stage_fn)).strip()
    shapes = ", ".join(f"f32{list(a.shape)}" for a in args)
    res.sections.append("### The function\n\n" + code(src, "python") + f"\n\nArguments: {shapes}. "
                        "Each module runs `J.jit(f).trace(*args)`, `.lower()`, `.compile()`.")
    res.sections.append(_side_by_side(
        "Stage 1: trace -> jaxpr", {n: s["jaxpr"] for n, s in st.items()},
        f"Comparison: **{grade}**. `out_info`: "
        + ", ".join(f"{shape} {dt}{' weak' if w else ''}" for shape, dt, w in jx["out_info"])))
    res.sections.append(_side_by_side(
        "Stage 2: lower -> StableHLO", {n: s["stablehlo"] for n, s in st.items()},
        "JAX adds module attributes (`mhlo.num_partitions`, `jax.result_info` names of the "
        "outputs) and explicit `precision` on the dot; the ops are the same: "
        + ", ".join(f"`{o}`" for o in stablehlo_ops(jx["stablehlo"])) + ".", "mlir"))
    res.sections.append(_side_by_side(
        "Stage 3: compile -> optimized HLO", {n: s["hlo"] for n, s in st.items()},
        "Both modules hand XLA the same program, so XLA makes the same fusions; JAX's text "
        "also carries its source-location tables. Entry computation: "
        + ", ".join(f"`{i}`" for i in entry_instructions(jx["hlo"])) + "."))
    keys = sorted(set(jx["cost"]) | set(jx["memory"]))
    rows = [f"| {k} | {jx['cost'].get(k, jx['memory'].get(k))} | "
            f"{mj['cost'].get(k, mj['memory'].get(k))} |" for k in keys]
    rows.append(f"| flops of `a @ b` alone (2*m*n*k = {mj['matmul_2mnk']}) | "
                f"{jx['matmul_flops']:g} | {mj['matmul_flops']:g} |")
    res.sections.append("### cost_analysis() and memory_analysis()\n\n"
                        "| quantity | jax | minijax |\n|---|---|---|\n" + "\n".join(rows))


# ---------------------------------------------------------------------------------------------
# Benchmarks
# ---------------------------------------------------------------------------------------------

def _dispatch_case(J, n_leaves: int):
    """A cached jitted call on `n_leaves` small arrays: (call, timed) where `timed()` makes one
    blocking call and returns its wall time in seconds."""
    jnp = J.numpy
    leaves = [jnp.asarray(np.full((8,), i, np.float32)) for i in range(n_leaves)]
    arg = leaves[0] if n_leaves == 1 else {f"p{i:02d}": x for i, x in enumerate(leaves)}
    f = J.jit(lambda tree: J.tree_util.tree_map(lambda a: a + 1.0, tree))
    bur = J.block_until_ready
    bur(f(arg))  # trace + compile outside the timing

    def timed() -> float:
        t0 = time.perf_counter()
        bur(f(arg))
        return time.perf_counter() - t0
    return (lambda: f(arg)), timed


def dispatch_overhead(n_leaves: int, *, calls: int, warmup: int = 50) -> dict:
    """Median wall time (ms) of one blocking call of each module's cached jitted function.

    Each call is timed on its own and the modules alternate call by call: a median of single
    calls ignores the moments the OS gives the CPU to another process, which a timed batch of
    calls would average in (and more so for the slower module)."""
    cases = {name: _dispatch_case(J, n_leaves) for name, J in MODULES}
    for _ in range(warmup):
        for _, timed in cases.values():
            timed()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(calls):
        for name, (_, timed) in cases.items():
            times[name].append(timed())
    outs = {name: J.tree_util.tree_leaves(cases[name][0]()) for name, J in MODULES}
    return {"ms": {n: statistics.median(t) * 1e3 for n, t in times.items()}, "outs": outs}


def trace_lower_time(*, reps: int, warmup: int = 1, batch: int = 128) -> dict:
    """Median ms of `program(J)["step"].lower(params, x, y)` with a fresh step each time."""
    params = init_params(seed=0)
    rng = np.random.RandomState(0)
    x = rng.rand(batch, 784).astype(np.float32)
    y = rng.randint(0, 10, batch).astype(np.int32)

    def once(J) -> tuple[float, object]:
        step = program(J, lr=0.1)["step"]  # a new function object: nothing cached
        t0 = time.perf_counter()
        lowered = step.lower(params, x, y)
        return time.perf_counter() - t0, lowered
    for _ in range(warmup):
        for _, J in MODULES:
            once(J)
    times: dict[str, list[float]] = {name: [] for name, _ in MODULES}
    lowered = {}
    for _ in range(reps):
        for name, J in MODULES:
            dt, lowered[name] = once(J)
            times[name].append(dt)
    outs = {name: lowered[name].compile()(params, x, y) for name, _ in MODULES}
    return {"ms": {n: statistics.median(t) * 1e3 for n, t in times.items()}, "outs": outs,
            "eqns": len(lowered["minijax"].jaxpr.jaxpr.eqns)}


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("jit in depth: trace, lower, compile in both modules; dispatch and "
                      "trace+lower cost")
    res.chapter = "chapters/07-jit.md"
    rng = np.random.RandomState(0)
    args = (rng.standard_normal((8, 16)).astype(np.float32),
            rng.standard_normal((16, 32)).astype(np.float32),
            rng.standard_normal(32).astype(np.float32))
    _stage_checks(res, args)

    calls = 200 if quick else 5000
    ratios, rows, curve = {}, [], {name: [] for name, _ in MODULES}
    leaf_counts = (1, 10, 20) if quick else (1, 10, 20, 50, 100)
    for n in leaf_counts:
        d = dispatch_overhead(n, calls=calls)
        res.check(f"dispatch {n} leaves: outputs", d["outs"]["minijax"], d["outs"]["jax"])
        for name, ms in d["ms"].items():
            res.timings_ms[f"dispatch {n} leaves: {name}"] = ms
            curve[name].append(ms * 1e3)
        ratios[f"dispatch {n} leaves"] = d["ms"]["minijax"] / d["ms"]["jax"]
        rows.append(f"| {n} | {d['ms']['jax'] * 1e3:.1f} | {d['ms']['minijax'] * 1e3:.1f} | "
                    f"{ratios[f'dispatch {n} leaves']:.2f} | <= {TARGETS['dispatch']} |")

    tl = trace_lower_time(reps=2 if quick else 15, warmup=1)
    res.check("trace+lower: compiled MNIST step agrees", tl["outs"]["minijax"], tl["outs"]["jax"],
              rtol=1e-4, atol=1e-5)
    for name, ms in tl["ms"].items():
        res.timings_ms[f"trace+lower MNIST step: {name}"] = ms
    ratios["trace+lower"] = tl["ms"]["minijax"] / tl["ms"]["jax"]
    res.sections.append(
        "### Dispatch overhead of a cached jitted call\n\n"
        "`f = jit(lambda tree: tree_map(lambda a: a + 1.0, tree))` on a pytree of f32[8] arrays "
        "(a dict for 10 and 20 leaves), called with `block_until_ready` each time; median of "
        f"{calls} single calls, timed one by one, the two modules alternating. "
        "JAX's dispatch runs in C++ (`jaxlib` `PjitFunction`); minijax's is the Python closure "
        "`JitWrapped.__call__` fast path and its executor "
        "`minijax/interpreters/pxla.py: ExecuteReplicated` (look up, execute, wrap).\n\n"
        "| leaves | jax (us) | minijax (us) | minijax/jax | target |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n" + plot("dispatch_vs_leaves", lambda fig: _draw_dispatch(
            fig, leaf_counts, curve), quick=quick))
    res.sections.append(
        "### Trace + lower of the MNIST MLP training step\n\n"
        "`program(J)['step'].lower(params, x, y)` from `compare/mnist_mlp.py` (784-256-256-10, "
        "`jit` of `value_and_grad` plus an SGD `tree_map`, batch 128), a fresh function each "
        f"repetition. minijax's jitted step has {tl['eqns']} equations.\n\n"
        "| jax (ms) | minijax (ms) | minijax/jax | target |\n|---|---|---|---|\n"
        f"| {tl['ms']['jax']:.2f} | {tl['ms']['minijax']:.2f} | {ratios['trace+lower']:.2f} | "
        f"<= {TARGETS['trace+lower']} |")
    res.extra = {"ratios": ratios, "targets": TARGETS}
    return res


def _draw_dispatch(fig, leaf_counts, curve) -> None:
    ax = fig.add_subplot()
    for name, us in curve.items():
        ax.plot(leaf_counts, us, "o-", label=name)
    ax.set_xlabel("leaves in the argument pytree")
    ax.set_ylabel("median us per blocked call")
    ax.set_title("dispatch cost of a cached jitted call")
    ax.set_ylim(bottom=0)
    ax.legend()
