"""dispatch: what one call costs — an eager primitive, a cached jitted call — and how much
memory an array takes, in minijax and real JAX side by side.

Every figure is measured in this process with both modules (plus NumPy as the floor for the
eager operations), interleaved round by round, `block_until_ready` on every result, after
warm-up; a round times many calls, and the figure is the median over the rounds (the spread,
min to max, is reported too):

* eager `jnp.add`, `jnp.dot` and `a @ b` on two f32[8,8] (minijax runs add's NumPy rule, and
  the float matmul as a one-primitive XLA program, as NumPy's would round otherwise than jit,
  `minijax/dispatch.py: apply_primitive`; JAX runs a compiled XLA op per primitive).
  Target: minijax/JAX <= 0.25. On an accelerator minijax runs them on the device too, one
  compiled program per primitive as JAX does, so there the target is that of a jitted call.
* a cached jitted call: `lambda x: x + 1` on an f32[] Array; the sum of 10 f32[4] arguments; a
  dict of 20 f32[4] in and out (`minijax/interpreters/pxla.py: ExecuteReplicated` runs all three).
  Target: minijax/JAX <= 1.25 each.
* the compiled MNIST MLP step (`compare/mnist_mlp.py: program`): the same XLA program in both,
  so the ratio should be 1 (target <= 1.05).
* peak memory of a script that makes a 256 MiB float32 array from NumPy, runs one jitted and one
  eager expression on it: each module in its own subprocess, the growth of the peak resident
  set size (`VmHWM`, or the resident size now where a sandbox keeps no peak) over the
  script's baseline (the children run on the CPU where this process holds an accelerator: one
  process at a time can open a TPU). Target: minijax/JAX <= 1.1.

Ratios are recorded, not asserted: they depend on the machine and on its load.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import jax
import numpy as np

from compare._modules import CHIP_HELD, MODULES, ROOT, child_env, children_on_cpu
from compare._report import TopicResult
from compare.mnist_mlp import init_params, program

TARGETS = {"eager": 0.25, "jit call": 1.25, "mlp step": 1.05, "peak memory": 1.1}


def _eager_target() -> float:
    # the NumPy path's target holds on a CPU; on an accelerator both modules dispatch a
    # compiled op to the device (minijax/dispatch.py: apply_primitive)
    return TARGETS["eager"] if jax.default_backend() == "cpu" else TARGETS["jit call"]


def _block(J, tree):
    if J is np:
        return
    for x in J.tree_util.tree_leaves(tree):
        x.block_until_ready()


def eager_cases(J) -> dict:
    jnp = J.numpy
    a, b = jnp.ones((8, 8), jnp.float32), jnp.ones((8, 8), jnp.float32)
    return {"eager add f32[8,8]": (jnp.add, (a, b)), "eager dot f32[8,8]": (jnp.dot, (a, b)),
            "eager a @ b f32[8,8]": (_matmul_operator, (a, b))}


def _matmul_operator(a, b):
    return a @ b


# NumPy's own call for each eager case: the floor
NUMPY_EAGER = {"eager add f32[8,8]": np.add, "eager dot f32[8,8]": np.dot,
               "eager a @ b f32[8,8]": _matmul_operator}


def jit_cases(J) -> dict:
    jnp = J.numpy
    x0 = jnp.asarray(1.0, dtype=jnp.float32)
    xs = [jnp.ones((4,), jnp.float32) for _ in range(10)]
    d = {f"k{i:02d}": jnp.ones((4,), jnp.float32) for i in range(20)}
    return {"jit x+1 f32[]": (J.jit(lambda x: x + 1), (x0,)),
            "jit 10 f32[4] args": (J.jit(lambda *a: sum(a[1:], a[0])), tuple(xs)),
            "jit dict of 20 f32[4]": (J.jit(lambda t: {k: v * 2 for k, v in t.items()}), (d,))}


def _per_call_us(J, f, args, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        _block(J, f(*args))
    return (time.perf_counter() - t0) / n * 1e6


def interleaved(fns: dict, rounds: int) -> dict:
    """{name: (median, min, max)} of `rounds` calls of each fn, the fns alternating."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(fn())
    return {k: (statistics.median(v), min(v), max(v)) for k, v in times.items()}


def call_times(cases_of, *, n: int, rounds: int, with_numpy: bool = False) -> dict:
    """{case: {module: (median, min, max) us per call}} and the outputs of each case."""
    cases = {name: cases_of(J) for name, J in MODULES}
    out, outs = {}, {}
    for case in cases["jax"]:
        fns = {}
        for name, J in MODULES:
            f, args = cases[name][case]
            _block(J, f(*args))  # warm-up: trace, compile, caches
            fns[name] = lambda J=J, f=f, args=args: _per_call_us(J, f, args, n)
        if with_numpy:
            a = np.ones((8, 8), np.float32)
            fns["numpy"] = lambda f=NUMPY_EAGER[case], args=(a, a): _per_call_us(np, f, args, n)
        out[case] = interleaved(fns, rounds)
        outs[case] = {name: cases[name][case][0](*cases[name][case][1]) for name, _ in MODULES}
    return out, outs


def mlp_step_ms(*, n: int, rounds: int, batch: int = 128) -> dict:
    params = init_params(seed=0)
    rng = np.random.RandomState(0)
    x = rng.rand(batch, 784).astype(np.float32)
    y = rng.randint(0, 10, batch).astype(np.int32)
    fns, outs = {}, {}
    for name, J in MODULES:
        step = program(J, lr=0.1)["step"]
        p = J.tree_util.tree_map(J.numpy.asarray, params)
        xj, yj = J.numpy.asarray(x), J.numpy.asarray(y)
        outs[name] = step(p, xj, yj)
        _block(J, outs[name])
        fns[name] = lambda J=J, step=step, a=(p, xj, yj): _per_call_us(J, step, a, n) / 1e3
    return interleaved(fns, rounds), outs


_MEMORY_SCRIPT = """
import json, resource, sys, numpy as np
J = __import__(sys.argv[1]); jnp = J.numpy
def hwm():  # this process's peak resident set size in MiB: VmHWM (kB), which exec resets
    # (ru_maxrss keeps the forking parent's peak); where a sandbox such as gVisor keeps no
    # VmHWM, the resident size now (statm, in pages): at the end, a lower bound of the peak
    with open("/proc/self/status") as f:
        peak = [int(l.split()[1]) / 1024 for l in f if l.startswith("VmHWM")]
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[1]) * resource.getpagesize() / 2**20
    return max(peak + [now])
f = J.jit(lambda a: a * 2.0)
f(jnp.ones((4,), jnp.float32)).block_until_ready()          # warm-up: compile, first eager op
(jnp.ones((4,), jnp.float32) + 1.0).block_until_ready()
base = hwm()
host = np.random.default_rng(0).random(64 * 1024 * 1024, dtype=np.float32)  # 256 MiB
x = jnp.asarray(host)
del host
y = f(x); y.block_until_ready()                             # one jitted expression
z = x + 1.0; z.block_until_ready()                          # one eager expression
print(json.dumps({"peak_mib": hwm() - base}))
"""


def peak_memory_mib() -> dict:
    """{module: MiB} the 256 MiB script's peak RSS grows by, each module in a subprocess (on
    the CPU where this process holds an accelerator: `child_env`). RuntimeError with the
    tail of the child's stderr when one fails."""
    env = child_env(dict(os.environ))
    out = {}
    for name, _ in MODULES:
        proc = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, name], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=300)
        if proc.returncode:
            raise RuntimeError(f"the peak-memory child for {name} exited {proc.returncode}; "
                               f"its stderr ends:\n{proc.stderr[-2000:]}")
        out[name] = json.loads(proc.stdout.strip().splitlines()[-1])["peak_mib"]
    return out


def _row(case: str, t: dict, target: float, unit: str = "us") -> str:
    """One table row: median (min-max) per module, the ratio, the target and whether it is
    met (a missed one says MISSED in the row, as the check list does)."""
    med = {k: v[0] for k, v in t.items()}
    spread = lambda k: f"{t[k][0]:.1f} ({t[k][1]:.1f}-{t[k][2]:.1f})"
    numpy_col = f" {spread('numpy')} |" if "numpy" in t else ""
    ratio = med["minijax"] / med["jax"]
    return (f"| {case} |{numpy_col} {spread('jax')} | {spread('minijax')} | "
            f"{ratio:.2f} | <= {target} | {'met' if ratio <= target else '**MISSED**'} |")


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("dispatch: eager primitives, cached jitted calls, one copy of an array")
    res.chapter = "chapters/07-jit.md"
    n, rounds = (50, 3) if quick else (300, 15)
    ratios: dict[str, float] = {}
    sections = []

    _call_times(res, n, rounds, ratios, sections)

    _mlp_step(res, quick, rounds, ratios, sections)

    mem = _peak_memory(res, ratios, sections)
    res.sections.extend(sections)
    res.extra = {"ratios": ratios, "targets": TARGETS, "peak_memory_mib": mem}
    return res


def _call_times(res, n, rounds, ratios, sections):
    """Eager primitives and cached jitted calls timed in both modules (NumPy too for eager):
    outputs, timings, targets and the two sections."""
    eager, outs = call_times(eager_cases, n=n, rounds=rounds, with_numpy=True)
    jitted, jit_outs = call_times(jit_cases, n=n, rounds=rounds)
    for times, case_outs in ((eager, outs), (jitted, jit_outs)):
        for case, t in times.items():
            res.check(f"{case}: outputs", case_outs[case]["minijax"], case_outs[case]["jax"])
            for k, (med, _, _) in t.items():
                res.timings_ms[f"{case}: {k}"] = med / 1e3
            ratios[case] = t["minijax"][0] / t["jax"][0]
            target = _eager_target() if times is eager else TARGETS["jit call"]
            res.check_target(f"{case}: minijax/jax {ratios[case]:.2f} <= {target}",
                             ratios[case] <= target)
    where = ("an eager minijax add runs its NumPy implementation on the host (no "
             "compilation, no device), an eager minijax float matmul and every eager JAX "
             "operation dispatch one compiled XLA program (cached per shape and dtype) to the "
             "device (NumPy's matmul would round otherwise than jit's). NumPy's own time for "
             "the same operation is the floor minijax's eager path cannot go below"
             if jax.default_backend() == "cpu" else
             "on this accelerator every eager operation of both modules dispatches one "
             "compiled XLA program (cached per shape and dtype) to the device, where the "
             "arrays are; NumPy's time is the host's, for scale")
    sections.append(
        f"### Eager primitives\n\nWhat these rows compare: {where}. us per call, median "
        f"(min-max) of {rounds} interleaved rounds of {n} calls, `block_until_ready` on each "
        "result.\n\n"
        "| op | numpy | jax | minijax | minijax/jax | target | status |\n"
        "|---|---|---|---|---|---|---|\n"
        + "\n".join(_row(c, t, _eager_target()) for c, t in eager.items()))
    sections.append(
        "### Cached jitted calls\n\nus per call, median (min-max) of "
        f"{rounds} interleaved rounds of {n} calls.\n\n"
        "| call | jax | minijax | minijax/jax | target | status |\n|---|---|---|---|---|---|\n"
        + "\n".join(_row(c, t, TARGETS["jit call"]) for c, t in jitted.items()))


def _mlp_step(res, quick, rounds, ratios, sections):
    """The compiled MNIST MLP step in both modules: outputs, timings, its target and the
    section."""
    step, step_outs = mlp_step_ms(n=2 if quick else 10, rounds=rounds)
    res.check("mlp step: outputs", step_outs["minijax"], step_outs["jax"], rtol=1e-4, atol=1e-5)
    for k, (med, _, _) in step.items():
        res.timings_ms[f"mlp step: {k}"] = med
    ratios["mlp step"] = step["minijax"][0] / step["jax"][0]
    res.check_target(f"mlp step: minijax/jax {ratios['mlp step']:.2f} <= {TARGETS['mlp step']}",
                     ratios["mlp step"] <= TARGETS["mlp step"])
    sections.append("### Compiled MNIST MLP step\n\nms per step, median (min-max).\n\n"
                    "| step | jax | minijax | minijax/jax | target | status |\n"
                    "|---|---|---|---|---|---|\n"
                    + _row("784-256-256-10, batch 128", step, TARGETS["mlp step"]))


def _peak_memory(res, ratios, sections):
    """The peak memory of a 256 MiB array in each module's own process: its target and the
    section."""
    mem = peak_memory_mib()
    where = f" ({CHIP_HELD})" if children_on_cpu() else ""
    ratios["peak memory"] = mem["minijax"] / mem["jax"] if mem["jax"] > 0 else float("nan")
    res.check_true("peak memory measured" + where, min(mem.values()) > 0)
    on_cpu = (f", {CHIP_HELD} (`JAX_PLATFORMS=cpu` in both children; one process at a "
              "time can open the chip)" if where else "")
    sections.append(
        "### Peak memory: a 256 MiB array, one jitted and one eager expression\n\n"
        "Growth of the peak resident set over the script's baseline, each module in its own "
        f"process{on_cpu}. One copy of the data is kept: `jnp.asarray` wraps the NumPy buffer, "
        "and moving an Array to the device drops its host copy (`minijax/array.py: "
        "Array.device_buffer`).\n\n"
        "| jax (MiB) | minijax (MiB) | minijax/jax | target | status |\n|---|---|---|---|---|\n"
        f"| {mem['jax']:.0f} | {mem['minijax']:.0f} | {ratios['peak memory']:.2f} | "
        f"<= {TARGETS['peak memory']} | "
        f"{'met' if ratios['peak memory'] <= TARGETS['peak memory'] else '**MISSED**'} |")
    res.check_target(f"peak memory: minijax/jax {ratios['peak memory']:.2f} <= "
                     f"{TARGETS['peak memory']}", ratios["peak memory"] <= TARGETS["peak memory"])
    return mem
