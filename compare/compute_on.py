"""compute_on and the GPU memory flags: where XLA runs an op, where the GPU client gets memory.

Runs minijax and JAX. `compute_on('device_host')` marks the operations traced inside a block
(or a decorated jitted function) to run on the host CPU instead of the accelerator; each
program below runs under both modules (`J = jax` and `J = minijax`):

* a `compute_on('device_host')` block inside `jit`, and a decorated jitted function called
  from `jit` (values; which ops of the lowered StableHLO and of the compiled HLO carry
  `_xla_compute_type = "host"`);
* `grad` and `vmap` through both (values, the marks on the derivative's ops, a
  finite-difference check), `compute_on('device')`, nested blocks, the `jit` cache key, and
  the errors for a bad compute type; a `scan` in a host block (where XLA's compiler refuses
  one of its programs, JAX's gradient on a TPU, that it refuses minijax's alike);
* the step time with and without the marks, interleaved.

Then the GPU client's memory flags (`XLA_PYTHON_CLIENT_PREALLOCATE`, `..._MEM_FRACTION`,
`..._ALLOCATOR`, `TF_GPU_ALLOCATOR`, `--xla_gpu_*` in `XLA_FLAGS`): what each does on a GPU,
and what fresh CPU processes with them set show in both modules. Explained in
chapters/24-memory-offloading.md (compute_on) and chapters/23-gpu-memory.md (the flags).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.experimental.compute_on
import numpy as np

import minijax
import minijax.experimental.compute_on
from compare._jax201 import table
from compare._modules import CHIP_HELD, MODULES, ROOT, child_env, children_on_cpu
from compare._report import TopicResult, code, interleaved_ms

# ------------------------------------------------------------------------- reading the marks

def lowered_marks(text: str) -> dict[str, list[str]]:
    """{StableHLO op: the compute types its lines carry, '-' for none} (constants and JAX's
    `call` of the function it outlines left out: minijax inlines the jitted function)."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = re.search(r"= \"?(?:stablehlo\.)?([a-z_]+)\"?[ (]", line)
        if not m or m.group(1) in ("constant", "call"):
            continue
        t = re.search(r'_xla_compute_type = "(\w+)"', line)
        out.setdefault(m.group(1), set()).add(t.group(1) if t else "-")
    return {k: sorted(v) for k, v in sorted(out.items())}


def compiled_marks(hlo: str) -> dict[str, list[str]]:
    """The same over the instructions of a compiled HLO module (constants, parameters left
    out): what XLA kept of the marks after fusion."""
    out: dict[str, set[str]] = {}
    for line in hlo.splitlines():
        m = re.match(r"\s*(?:ROOT )?%\S+ = \S+ ([a-z-]+)\(", line)
        if not m or m.group(1) in ("constant", "parameter"):
            continue
        t = re.search(r'_xla_compute_type="(\w+)"', line)
        out.setdefault(m.group(1), set()).add(t.group(1) if t else "-")
    return {k: sorted(v) for k, v in sorted(out.items())}


def marked_lines(text: str) -> str:
    return "\n".join(ln.strip() for ln in text.splitlines() if "_xla_compute_type" in ln)


# ------------------------------------------------------------------------- the programs

def block_program(J, c_type="device_host"):
    """A layer whose batch statistics are computed in a host block inside jit (c_type None:
    the same layer without the block, the reference for values and time)."""
    jnp, compute_on = J.numpy, J.experimental.compute_on.compute_on

    def loss(w, x):
        h = jnp.tanh(x @ w)
        with compute_on(c_type) if c_type else contextlib.nullcontext():
            mean = h.mean(axis=0)
            scale = 1.0 / jnp.sqrt(((h - mean) ** 2).mean(axis=0) + 1e-3)
        return jnp.sum(((h - mean) * scale) ** 3)
    return loss


def decorated_program(J):
    """JAX's documented form: `@compute_on('device_host')` on a jitted function."""
    jnp, compute_on = J.numpy, J.experimental.compute_on.compute_on

    @compute_on("device_host")
    @J.jit
    def host_part(h):
        return jnp.cumsum(jnp.sin(h), axis=1) * 0.5

    def loss(w, x):
        return jnp.sum(jnp.tanh(host_part(x @ w)) ** 2)
    return loss


def scan_program(J):
    """A recurrence run as a `scan` inside a host block: the loop and its body are marked."""
    jnp, compute_on = J.numpy, J.experimental.compute_on.compute_on

    def loss(w, x):
        def step(c, xi):
            c = jnp.tanh(c @ w + xi)
            return c, c.sum()
        with compute_on("device_host"):
            _, ys = J.lax.scan(step, jnp.zeros(w.shape[0], w.dtype), x)
        return jnp.sum(ys ** 2)
    return loss


def compute_on2_program(J):
    """`compute_on2`: the function staged whole, its outputs placed in device memory."""
    jnp, co = J.numpy, J.experimental.compute_on

    @co.compute_on2(compute_type="device_host", out_memory_spaces=J.memory.Space.Device)
    def host_part(h):
        return jnp.sin(h) * 2.0, jnp.cos(h)

    def loss(w, x):
        a, b = host_part(x @ w)
        return jnp.sum(a * b + x @ w)
    return loss


PROGRAMS = {"block in jit": block_program, "decorated jitted function": decorated_program}


def run_program(J, make, w, x):
    loss = make(J)
    f, g = J.jit(loss), J.jit(J.grad(loss))
    xs = np.stack([x, -x])
    lowered = f.lower(w, x)
    return dict(value=f(w, x), grad=g(w, x), vmap=J.jit(J.vmap(loss, (None, 0)))(w, xs),
                lowered=lowered.as_text(), compiled=compiled_marks(lowered.compile().as_text()),
                grad_compiled=compiled_marks(g.lower(w, x).compile().as_text()),
                call=lambda: J.block_until_ready(g(w, x)))


def compiled_or_refused(J, make, w, x) -> dict:
    """{"value", "grad", "vmap": each the array `jit` computes, or the first line of the
    JaxRuntimeError raised where XLA's compiler refused that program (a str)}, and
    "lowered": the lowered text of the loss (lowering compiles nothing, so it is there even
    when the compiles are refused). Each of the three is compiled on its own, so one refused
    program does not hide the others' values."""
    loss = make(J)
    xs = np.stack([x, -x])
    calls = {"value": lambda: J.jit(loss)(w, x), "grad": lambda: J.jit(J.grad(loss))(w, x),
             "vmap": lambda: J.jit(J.vmap(loss, (None, 0)))(w, xs)}
    out: dict = {"lowered": J.jit(loss).lower(w, x).as_text()}
    for key, call in calls.items():
        try:
            out[key] = np.asarray(call())
        except jax.errors.JaxRuntimeError as e:  # minijax raises jaxlib's type too
            out[key] = str(e).strip().splitlines()[0]
    return out


def refused_alike(got: dict[str, dict], key: str) -> bool:
    """Whether XLA refused `got[module][key]` in both modules with an INTERNAL error (its
    compiler's RET_CHECK failures are INTERNAL), as JAX's on a TPU: scan_program's gradient."""
    return all(isinstance(g[key], str) and g[key].startswith("INTERNAL") for g in got.values())


def check_scan_outcomes(res: TopicResult, got: dict[str, dict]) -> dict[str, dict[str, str]]:
    """The checks on `compiled_or_refused`'s outcomes of the scan program, per module: where
    both compiled, the values agree; where either was refused, both were, with an INTERNAL
    error. Each module's outcome goes to `res.extra`; returns {key: {module: outcome}} for the
    programs refused in either module."""
    refused = {}
    for key in ("value", "grad", "vmap"):
        outcome = {name: g[key] if isinstance(g[key], str) else "compiled and ran"
                   for name, g in got.items()}
        res.extra.setdefault("scan_in_host_block", {})[key] = outcome
        if not any(isinstance(g[key], str) for g in got.values()):
            res.check(f"scan in a host block: {key} equals JAX's", got["minijax"][key],
                      got["jax"][key], rtol=2e-4, atol=2e-5)
            continue
        refused[key] = outcome
        res.check_true(f"scan in a host block: {key}: XLA's compiler refuses it in both "
                       f"modules, as JAX's, with an INTERNAL error (JAX: {outcome['jax'][:100]}; "
                       f"minijax: {outcome['minijax'][:100]})", refused_alike(got, key))
    return refused


def nested_and_cache(J, x):
    """An inner 'device' block in a host block, and how often a jitted function traces."""
    jnp, compute_on = J.numpy, J.experimental.compute_on.compute_on
    traces = []

    @J.jit
    def g(t):
        traces.append(1)
        return jnp.cos(t)

    def f(t):
        with compute_on("device_host"):
            a = jnp.sin(t)
            with compute_on("device"):
                b = jnp.exp(a)
        return b + g(t)
    marks = lowered_marks(J.jit(f).lower(x).as_text())
    g(x)
    with compute_on("device_host"):
        g(x)
        g(x)
    return marks, len(traces)


def _finite_difference(make, w, x, eps=1e-4):
    """Central differences of minijax's loss in w along a fixed random direction, computed in
    float64 (x64 on), so that float32 rounding does not swamp them at full sizes."""
    d = np.random.default_rng(1).standard_normal(w.shape)
    with minijax.config.override("jax_enable_x64", True):
        loss = minijax.jit(make(minijax))
        x64 = x.astype(np.float64)
        up, down = (float(loss(w.astype(np.float64) + s * eps * d, x64)) for s in (1, -1))
    return (up - down) / (2 * eps), d


def compute_on_part(res: TopicResult, quick: bool) -> None:
    n, k = (16, 8) if quick else (256, 128)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = (rng.standard_normal((k, k)) / np.sqrt(k)).astype(np.float32)
    rows, shown = [], {}
    for title, make in PROGRAMS.items():
        got = {name: run_program(J, make, w, x) for name, J in MODULES}
        jx, mj = got["jax"], got["minijax"]
        for key in ("value", "grad", "vmap"):
            res.check(f"{title}: {key} equals JAX's", mj[key], jx[key], rtol=2e-4, atol=2e-5)
        lj, lm = lowered_marks(jx["lowered"]), lowered_marks(mj["lowered"])
        res.check_true(f"{title}: the lowered ops marked host equal JAX's", lm == lj)
        with res.running("jax"):
            res.check_true(f"{title}: JAX marks some ops host and leaves others",
                           ["host"] in lj.values() and ["-"] in lj.values())
        res.check_true(f"{title}: the compiled program's marks equal JAX's",
                       mj["compiled"] == jx["compiled"])
        res.check_true(f"{title}: the compiled gradient's marks equal JAX's",
                       mj["grad_compiled"] == jx["grad_compiled"])
        fd, d = _finite_difference(make, w, x)
        res.check(f"{title}: minijax grad agrees with finite differences",
                  np.float64(np.sum(np.asarray(mj["grad"], np.float64) * d)), np.float64(fd),
                  rtol=1e-3, atol=1e-4)
        host = [op for op, m in lm.items() if m == ["host"]]
        rows.append([title, ", ".join(host), ", ".join(op for op, m in lm.items() if "-" in m),
                     ", ".join(op for op, m in mj["grad_compiled"].items() if "host" in m)])
        shown[title] = (marked_lines(jx["lowered"]), marked_lines(mj["lowered"]))
        res.timings_ms.update(interleaved_ms(
            {f"grad step, {title}: jax": jx["call"], f"grad step, {title}: minijax": mj["call"]},
            repeat=5 if quick else 30, warmup=1 if quick else 3))
    plain = {name: J.jit(J.grad(block_program(J, None))) for name, J in MODULES}
    for name, J in MODULES:
        ref = np.asarray(plain[name](w, x))
        # on a CPU both programs run XLA:CPU's float32 math; on an accelerator the host block
        # runs the CPU's and the unmarked program the device's (its tanh, rsqrt and division
        # differ in the last bits), and the gradient's cancelling sums carry that to an
        # absolute error of a few ulps of its largest elements (6.1e-05 seen on a TPU v5e)
        atol = 1e-6 if jax.default_backend() == "cpu" else 2e-6 * float(np.abs(ref).max())
        res.check(f"block in jit: grad equals the unmarked program's ({name})",
                  np.asarray(J.jit(J.grad(block_program(J)))(w, x)), ref, rtol=1e-5, atol=atol)
    res.timings_ms.update(interleaved_ms(
        {f"grad step, no compute_on: {name}": (lambda J=J: J.block_until_ready(
            plain[J.__name__](w, x))) for name, J in MODULES},
        repeat=5 if quick else 30, warmup=1 if quick else 3))

    got = {name: compiled_or_refused(J, scan_program, w, x) for name, J in MODULES}
    refused = check_scan_outcomes(res, got)
    scan_marks = {name: lowered_marks(g["lowered"]) for name, g in got.items()}
    loop_ops = ("while", "dynamic_slice", "dot_general", "tanh", "add")
    res.check_true("scan in a host block: the loop, its slicing and its body are marked host "
                   "in both", all(scan_marks[name].get(op) == ["host"] for op in loop_ops
                                  for name in scan_marks))
    only_jax = sorted(op for op, m in scan_marks["jax"].items()
                      if "host" in m and "host" not in scan_marks["minijax"].get(op, []))
    got = {name: run_program(J, compute_on2_program, w, x) for name, J in MODULES}
    for key in ("value", "grad", "vmap"):
        res.check(f"compute_on2: {key} equals JAX's", got["minijax"][key], got["jax"][key],
                  rtol=2e-4, atol=2e-5)
    c2 = {name: {op: m for op, m in lowered_marks(g["lowered"]).items() if op != "custom_call"}
          for name, g in got.items()}
    res.check_true("compute_on2: the lowered ops marked host equal JAX's (JAX's placement "
                   "custom calls left out)", c2["minijax"] == c2["jax"])
    dense = {name: lowered_marks(J.jit(block_program(J, "device")).lower(w, x).as_text())
             for name, J in MODULES}
    res.check_true("compute_on('device') marks the same ops \"dense\" as JAX",
                   dense["minijax"] == dense["jax"] and ["dense"] in dense["jax"].values())
    nest = {name: nested_and_cache(J, x[0]) for name, J in MODULES}
    res.check_true("nested blocks: the innermost compute type wins, as in JAX",
                   nest["minijax"][0] == nest["jax"][0]
                   and nest["jax"][0]["exponential"] == ["dense"])
    res.check_true("jit traces again under compute_on, once, as JAX's",
                   nest["minijax"][1] == nest["jax"][1] == 2)
    eqns = {name: [(e.primitive.name, e.ctx.compute_type if e.ctx else None) for e in
                   J.make_jaxpr(block_program(J))(w, x).jaxpr.eqns] for name, J in MODULES}
    res.check_true("each equation records the compute type it was traced under, as JAX's",
                   eqns["minijax"] == eqns["jax"])
    errors = []
    for arg, exc in ((3, TypeError), ("gpu", ValueError)):
        msgs = [res.check_raises(f"compute_on({arg!r}) raises {exc.__name__} ({name})",
                                 lambda J=J, arg=arg:
                                 J.experimental.compute_on.compute_on(arg).__enter__(),
                                 exc) for name, J in MODULES]
        res.check_true(f"compute_on({arg!r}): minijax's message is JAX's", msgs[0] == msgs[1])
        errors.append(msgs[1])

    res.sections.append(
        "### Host compute inside jit\n\n"
        "`with compute_on('device_host'):` sets a trace state; every equation traced inside "
        "records it (`eqn.ctx.compute_type`), the transformations rebind an equation under "
        "its context (so its derivative, its batched form and the cotangent sums it makes "
        "keep the mark), and the lowering writes `mhlo.frontend_attributes = "
        "{_xla_compute_type = \"host\"}` on each op the equation emits. On a GPU or TPU, "
        "XLA's host-offloading passes move the marked ops to the host CPU, with copies "
        "around them; on the CPU backend host and device are the same processor, and XLA "
        f"runs the program as it would without the marks. Inputs: x f32[{n},{k}], "
        f"w f32[{k},{k}]. The StableHLO ops each program marks (minijax, equal to JAX's):\n\n"
        + table(["program", "ops marked host", "ops not marked", "compiled gradient: "
                 "instructions marked host"], rows)
        + "\n\nThe marked lines of the block program, JAX:\n\n"
        + code(shown["block in jit"][0]) + "\n\nminijax:\n\n" + code(shown["block in jit"][1])
        + "\n\nJAX lowers a decorated jitted function to a `call` of a private function and "
        "puts the mark on the `call` and on the ops inside; minijax inlines the function, "
        "and its ops inherit the mark. XLA inlines JAX's call before it compiles, so the "
        "compiled programs carry the same marks (checked above, including on the fusion "
        "that wraps them). With JAX 0.10.2 on the CPU backend the marked programs compile "
        "and run, and their values and gradients equal the unmarked program's.\n\n"
        f"A bad compute type raises the same error in both: `{errors[0]}`; `{errors[1]}`."
        "\n\n`compute_on2(f, compute_type=..., out_memory_spaces=...)` stages `f` whole: "
        "in JAX as one `compute_on` equation (lowered to a marked `call`, each output "
        "wrapped in an `annotate_device_placement` naming its memory), in minijax as a `jit` "
        "traced under the compute type with a `device_put` per output; values and marked "
        "ops agree (checked above)."
        "\n\nControl flow: a `scan` inside a host block is marked whole, the `while` loop, "
        "its counter, its slicing and its body, in both modules (JAX lowers `scan` through "
        "a traced implementation whose equations carry the mark; minijax marks the ops its "
        "loop lowering emits). The two lowerings are not op for op the same, so the marked "
        "ops are compared for the loop's own ops only; kinds of op JAX marks host and minijax "
        f"leaves unmarked: {only_jax or 'none'}."
        + "".join(f" On this {jax.default_backend().upper()} XLA's compiler refused the "
                  f"scan program's {key} (checked above): JAX `{o['jax']}`; minijax "
                  f"`{o['minijax']}`." for key, o in refused.items()))


# ------------------------------------------------------------------------- the memory flags

FLAGS = {
    "XLA_PYTHON_CLIENT_PREALLOCATE": (
        "false", "no pool is taken up front; the BFC allocator grows as the program asks "
        "(more fragmentation, and an out-of-memory can come later than with the pool)"),
    "XLA_PYTHON_CLIENT_MEM_FRACTION": (
        ".50", "the pool is this fraction of the GPU's memory instead of 75% "
        "(`XLA_CLIENT_MEM_FRACTION` is its newer name)"),
    "XLA_PYTHON_CLIENT_ALLOCATOR": (
        "platform", "no pool and no BFC: each buffer is a cudaMalloc and each free a cudaFree, "
        "so memory goes back to the driver at once (slow; for finding the smallest footprint)"),
    "TF_GPU_ALLOCATOR": (
        "cuda_malloc_async", "CUDA's stream-ordered cudaMallocAsync pool instead of XLA's BFC "
        "allocator: no big fixed pool, a pool that grows"),
    "XLA_FLAGS": (
        "--xla_gpu_memory_limit_slop_factor=90", "a GPU compiler option (here: how much of "
        "the memory limit the scheduler may plan for); XLA parses every `--xla_*` flag when "
        "the backend starts"),
}

_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    first = sys.argv[1]
    import minijax
    print("imported", flush=True)  # no backend yet: XLA_FLAGS is read when one starts
    import jax
    from jaxlib import xla_client
    out = {}
    for name, J in (("minijax", minijax), ("jax", jax))[::1 if first == "minijax" else -1]:
        d = J.devices()[0]
        out[name] = dict(platform=d.platform, stats=d.memory_stats(),
                         value=float(J.jit(lambda t: (t @ t).sum())(np.ones((256, 256),
                                                                            np.float32))))
    try:
        out["gpu_options"] = {k: v for k, v in xla_client.generate_pjrt_gpu_plugin_options(
            ).items() if k in ("allocator", "memory_fraction", "preallocate")}
    except Exception as e:  # noqa: BLE001 (recorded: a bad allocator name is a ValueError)
        out["gpu_options"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out), flush=True)
""")


def flag_children(quick: bool) -> dict[str, dict]:
    """Fresh processes, run side by side, each with some flags set: what each printed."""
    every = {k: v for k, (v, _) in FLAGS.items()}
    cases = {
        "no flags": ({}, "minijax"),
        "every flag above": (every, "minijax"),
        "XLA_PYTHON_CLIENT_ALLOCATOR=bogus": ({"XLA_PYTHON_CLIENT_ALLOCATOR": "bogus"}, "jax"),
        "XLA_FLAGS=--xla_gpu_no_such_flag=1, minijax first": (
            {"XLA_FLAGS": "--xla_gpu_no_such_flag=1"}, "minijax"),
        "XLA_FLAGS=--xla_gpu_no_such_flag=1, JAX first": (
            {"XLA_FLAGS": "--xla_gpu_no_such_flag=1"}, "jax"),
    }
    if quick:  # fewer processes: the first and last are what the others add to
        for name in ("no flags", "XLA_FLAGS=--xla_gpu_no_such_flag=1, JAX first"):
            del cases[name]
    # CPU processes, also where this one holds the chip
    base = child_env({k: v for k, v in os.environ.items() if k not in FLAGS})
    procs = {name: subprocess.Popen([sys.executable, "-c", _CHILD, first], cwd=ROOT,
                                    env={**base, **env}, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for name, (env, first) in cases.items()}
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        lines = stdout.strip().splitlines()
        err = [ln for ln in stderr.splitlines() if "XLA_FLAGS" in ln]
        out[name] = dict(rc=p.returncode, imported=bool(lines) and lines[0] == "imported",
                         result=json.loads(lines[-1]) if len(lines) > 1 else None,
                         error=re.sub(r"^\S+ \S+\s+\d+ ", "", err[-1]) if err else "",
                         stderr="" if len(lines) > 1 else stderr[-1500:])
    return out


def flags_part(res: TopicResult, quick: bool) -> None:
    kids = flag_children(quick)
    every = kids["every flag above"]["result"] or {}
    failed = {name: k["stderr"] for name, k in kids.items()
              if k["result"] is None and "no_such_flag" not in name}
    if failed:  # say why in the record, and let the checks below fail on the missing values
        res.extra["failed_children"] = failed
    for name in ("no flags", "every flag above", "XLA_PYTHON_CLIENT_ALLOCATOR=bogus"):
        if name not in kids:
            continue
        r = kids[name]["result"]
        res.check_true(f"{name}: the child runs and both modules compute the same value",
                       kids[name]["rc"] == 0 and r is not None
                       and r["minijax"]["value"] == r["jax"]["value"] == 256.0 ** 3)
        res.check_true(f"{name}: minijax's memory_stats() is JAX's (None on CPU)",
                       r is not None and r["minijax"]["stats"] == r["jax"]["stats"] is None)
    with res.running("jax"):
        res.check_true("the flags become the GPU client's options (jaxlib reads them)",
                       every.get("gpu_options") == {"allocator": "platform",
                                                "memory_fraction": 0.5, "preallocate": False}
                       and ("no flags" not in kids
                            or (kids["no flags"]["result"] or {}).get("gpu_options")
                            == {"allocator": "default"}))
        res.check_true("a bad allocator name is an error only where a GPU client is made",
                       str((kids["XLA_PYTHON_CLIENT_ALLOCATOR=bogus"]["result"] or {})
                           .get("gpu_options"))
                       .startswith("ValueError: XLA_PYTHON_CLIENT_ALLOCATOR"))
    bad = [kids[f"XLA_FLAGS=--xla_gpu_no_such_flag=1, {w} first"] for w in ("minijax", "JAX")
           if f"XLA_FLAGS=--xla_gpu_no_such_flag=1, {w} first" in kids]
    res.check_true("an unknown --xla_ flag kills the process when the backend starts, "
                   "whichever module starts it",
                   all(b["rc"] != 0 and b["imported"] and b["result"] is None
                       and "Unknown flag in XLA_FLAGS" in b["error"] for b in bad))
    source = "".join(p.read_text() for p in (ROOT / "minijax").rglob("*.py"))
    res.check_true("minijax's source reads none of these variables",
                   not any(f in source for f in ("XLA_PYTHON_CLIENT", "TF_GPU_ALLOCATOR",
                                                 "XLA_CLIENT_MEM")))
    rows = [[f"`{k}={v}`", what] for k, (v, what) in FLAGS.items()]
    seen = [[name, k["rc"], json.dumps(k["result"]["minijax"]) if k["result"] else "-",
             json.dumps(k["result"]["gpu_options"]) if k["result"] else "-",
             k["error"] or "-"] for name, k in kids.items()]
    res.extra["flag_children"] = {name: {key: k[key] for key in ("rc", "result", "error")}
                                  for name, k in kids.items()}
    res.sections.append(
        "### GPU memory flags: what each does, what a CPU run shows\n\n"
        "On a GPU the client takes 75% of the GPU's memory as one pool the first time a "
        "program runs, and XLA's BFC allocator hands buffers out of it (JAX's "
        "docs/gpu_memory_allocation.rst). Environment variables change that, read once, when "
        "the client is made:\n\n" + table(["variable", "on a GPU"], rows)
        + "\n\nThe variables reach the GPU client through jaxlib "
        "(`jaxlib/xla_client.py generate_pjrt_gpu_plugin_options` turns them into the "
        "plugin's options), `TF_GPU_ALLOCATOR` through the CUDA plugin itself, and `XLA_FLAGS` "
        "through XLA's flag parser: none through minijax, whose client is jaxlib's. Fresh "
        "processes, each importing minijax first (no backend starts on import), then "
        "running a jitted 256x256 matmul in both modules"
        + (f" ({CHIP_HELD}: `JAX_PLATFORMS=cpu` in each child, as one process at a time "
           "can open the chip)" if children_on_cpu() else "") + ":\n\n"
        + table(["flags", "exit code", "minijax's device (JAX's is the same)",
                 "GPU client options jaxlib would pass", "XLA's message"], seen)
        + "\n\nWhat a CPU run can show: that both modules see the same client (the same "
        "`memory_stats()`: None, since the CPU client keeps no allocator statistics, and the "
        "same values with or without the variables), what options a GPU client would be "
        "given, and that `XLA_FLAGS` is parsed when the backend starts whichever module "
        "starts it (a GPU flag is accepted by the CPU build, an unknown one kills the "
        "process). What it cannot show: the pool itself (its size in `nvidia-smi`, "
        "`bytes_limit` in `memory_stats()`), fragmentation, when an out-of-memory error "
        "comes, or the time cudaMalloc and cudaFree cost under `platform`: the CPU client "
        "allocates every buffer from the process heap and never reads these variables.")


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("host compute inside jit, and the GPU memory flags (minijax and JAX)",
                      runs="both")
    res.chapter = "chapters/24-memory-offloading.md"
    compute_on_part(res, quick)
    flags_part(res, quick)
    return res
