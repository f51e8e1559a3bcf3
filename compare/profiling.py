"""Profiling: traces, memory profiles, cost analysis, and how not to benchmark.

The first trace, memory profile, cost analysis and pitfalls run real JAX; `minijax.profiler`
traces the same kind of loop next to `jax.profiler`, and the roofline runs the MNIST MLP and CNN
steps of both modules. The program:

* records a `jax.profiler.trace` of a few steps of a small MLP training loop, with a
  `StepTraceAnnotation` per step, and reads the Perfetto trace back to count the steps and find
  the busiest events (the raw `.xplane.pb` is what TensorBoard/XProf open);
* writes a device memory profile (`jax.profiler.save_device_memory_profile`, pprof format);
* traces a small jitted loop with `minijax.profiler` and `jax.profiler` alike (`trace`,
  `StepTraceAnnotation`, `annotate_function`, `save_device_memory_profile`) and compares what
  the two traces hold;
* checks that `named_scope`/`named_call` names reach the lowered op locations and the compiled
  HLO's op_name metadata in minijax as in JAX, and that the profiled kernels carry them;
* asks the compiler for its cost model (`lowered.cost_analysis()` and
  `compiled.cost_analysis()`) and checks the matmul flop count against 2*m*n*k;
* demonstrates three benchmarking mistakes next to the correct measurement: not waiting for
  the asynchronous result, timing the first (compiling) call, and re-creating the jitted
  function inside the loop. The timings are recorded, not asserted;
* measures this machine's roofline (peak matmul FLOP/s, copy bandwidth) and places the MNIST
  MLP and CNN training steps of minijax and JAX on it (chapters/17-profiling-benchmarking.md).

Full runs write to `compare/out/profile/`; quick runs (the tests) use a temporary folder.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
import shutil
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from compare import _ladder, mnist_mlp, numpy_cnn
from compare._jax201 import catch, out_folder, rel, table, time_into
from compare._modules import MODULES, precision_scope
from compare._report import OUT_DIR, TopicResult, code, interleaved_ms, median_ms, plot


def init_params(key, sizes):
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (m, n)) / np.sqrt(m), jnp.zeros(n)))
    return params


def loss_fn(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    new = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
    return new, loss


def _trace_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def profiled_loop(J, folder: Path, steps: int) -> dict:
    """A few steps of a small jitted regression under `J.profiler.trace`, each step a
    `StepTraceAnnotation`, with an `annotate_function`-wrapped host call; what the trace and a
    device memory profile hold."""
    step = J.jit(lambda w, x: (w - 0.01 * J.grad(lambda v: ((x @ v) ** 2).sum())(w),
                               ((x @ w) ** 2).sum()))
    w, x = J.numpy.ones((16, 16)), np.ones((8, 16), np.float32)
    J.block_until_ready(step(w, x))  # compiled before the trace
    host = J.profiler.annotate_function(lambda v: v + 1, name="host_bookkeeping")
    with J.profiler.trace(str(folder), create_perfetto_trace=True):
        for i in range(steps):
            with J.profiler.StepTraceAnnotation("train", step_num=i):
                w, loss = step(w, x)
                float(loss)
                host(i)
    found = sorted(folder.rglob("perfetto_trace.json.gz"))
    events = _trace_events(found[0]) if found else []
    names = [str(e.get("name", "")) for e in events if e.get("ph") == "X"]
    mem = folder / "device_memory.prof"
    J.profiler.save_device_memory_profile(str(mem))
    return {"files": sorted({q.name.split(".", 1)[-1] for q in folder.rglob("*") if q.is_file()
                             and q.name != "device_memory.prof"}),
            "train": names.count("train"), "host": names.count("host_bookkeeping"),
            "kernels": sorted({n for n in names if n.endswith("fusion")}),
            "memory_profile_gzip": mem.read_bytes()[:2] == b"\x1f\x8b"}


def scoped_step(J):
    """A jitted two-layer step whose layers are `named_scope`s (and a `named_call`), in `J`."""
    jnp = J.numpy

    def step(w1, w2, x):
        with J.named_scope("dense1"):
            h = jnp.tanh(x @ w1)
        with J.named_scope("dense2"):
            h = jnp.maximum(h @ w2, 0.0)
        return J.named_call(lambda t: (t * t).sum(), name="loss")(h)
    return J.jit(step)


def scope_names(J, folder: Path) -> dict:
    """What `scoped_step` carries of its scopes: the lowered module's locations, the compiled
    HLO's op_name metadata, and the kernels of a profile of it with the scope each runs."""
    f = scoped_step(J)
    args = (np.full((16, 32), 0.1, np.float32), np.full((32, 8), 0.1, np.float32),
            np.ones((4, 16), np.float32))
    lowered = f.lower(*args)
    hlo = lowered.compile().as_text()
    J.block_until_ready(f(*args))
    with J.profiler.trace(str(folder)):
        J.block_until_ready(f(*args))
    found = sorted(folder.rglob("*.trace.json.gz"))
    kernels = {str(e.get("name")) for e in _ladder.kernel_events(
        _trace_events(found[0]) if found else [])}
    by_op = _ladder.hlo_op_names(hlo)  # HLO instruction -> op_name
    return {"locs": sorted(set(re.findall(r'loc\("(jit\([^"]*)"', lowered.as_text(
                debug_info=True)))),
            "op_names": sorted({n for n in re.findall(r'op_name="([^"]*)"', hlo)
                                if n.startswith("jit(")}),
            "kernels": {k: by_op.get(k, "") for k in sorted(kernels)},
            "plain": "loc(" in lowered.as_text()}


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Profiling: traces, memory profiles, cost analysis, benchmarking, "
                      "the roofline", runs="jax")  # checks not naming minijax: JAX alone
    res.chapter = "chapters/17-profiling-benchmarking.md"
    res.devices = 1
    folder = out_folder("profile", quick)
    batch, sizes = (32, [16, 32, 4]) if quick else (256, [64, 256, 256, 8])
    steps = 3 if quick else 5
    key = jax.random.key(0)
    kx, ky, kp = jax.random.split(key, 3)
    x = jax.random.normal(kx, (batch, sizes[0]))
    y = jax.random.normal(ky, (batch, sizes[-1]))
    params = init_params(kp, sizes)

    kind, msg, perfetto_ok, top_rows, n_steps = _trace_training(res, params, x, y, folder, steps)
    _describe_trace(res, folder, steps, sizes, batch, quick, n_steps, top_rows, perfetto_ok, kind,
                    msg)

    _memory_profile(res, folder)

    _profiler_in_both(res, folder, steps)

    _named_scopes(res, folder)

    _cost_analysis(res, quick, params, x, y, batch, sizes)

    _benchmarking_pitfalls(res, quick, key)
    _roofline(res, quick)
    if quick:  # the temporary folder has served its purpose
        shutil.rmtree(folder, ignore_errors=True)
    return res


def _trace_training(res, params, x, y, folder, steps):
    """A profiler trace around a few training steps, with a Perfetto trace when the profiler can
    write one; the checks on its files and events."""
    p, l0 = train_step(params, x, y)  # compile outside the trace
    jax.block_until_ready(p)
    trace_dir = folder / "trace"
    losses = []

    def traced_loop(**kw):
        nonlocal p
        with jax.profiler.trace(str(trace_dir), **kw):
            for i in range(steps):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    p, loss = train_step(p, x, y)
                    losses.append(float(loss))  # float() waits for the step to finish

    kind, msg = catch(lambda: traced_loop(create_perfetto_trace=True))
    perfetto_ok = kind is None
    if not perfetto_ok:  # fall back to the plain XPlane dump
        losses.clear()
        traced_loop()
    xplanes = sorted(trace_dir.rglob("*.xplane.pb"))
    perfetto = sorted(trace_dir.rglob("perfetto_trace.json.gz"))
    res.check_true("trace wrote an .xplane.pb file",
                   bool(xplanes) and xplanes[0].stat().st_size > 0)
    res.check_true("training loss went down while tracing", losses[-1] < float(l0))
    top_rows, n_steps, found_fn = [], 0, False
    if perfetto:
        events = _trace_events(perfetto[0])
        n_steps = sum(1 for e in events if e.get("name") == "train" and e.get("ph") == "X")
        found_fn = any("train_step" in str(e.get("name", "")) for e in events)
        total = collections.Counter()
        count = collections.Counter()
        for e in events:
            name = str(e.get("name", ""))
            if e.get("ph") == "X" and not name.startswith("$"):  # `$...` = Python frames
                total[name] += float(e.get("dur", 0))
                count[name] += 1
        top_rows = [[f"`{nm}`", count[nm], f"{us:.0f}"] for nm, us in total.most_common(8)]
    res.check_true("perfetto trace written (create_perfetto_trace=True)", bool(perfetto))
    res.check_true("trace holds one 'train' event per step", n_steps == steps)
    res.check_true("trace names the jitted train_step", found_fn)
    return kind, msg, perfetto_ok, top_rows, n_steps


def _describe_trace(res, folder, steps, sizes, batch, quick, n_steps, top_rows, perfetto_ok, kind,
                    msg):
    """The section on the trace: the files written and the busiest events."""
    files = sorted(str(q.relative_to(folder)) for q in folder.rglob("*") if q.is_file())
    res.sections.append(
        "### A profiler trace of a training loop\n\n"
        f"`jax.profiler.trace(dir, create_perfetto_trace=True)` around {steps} steps of an "
        f"MLP {sizes} on batch {batch}, each step wrapped in "
        "`jax.profiler.StepTraceAnnotation('train', step_num=i)`. The first call (compilation) "
        "happened before the trace so only steady-state steps are recorded. Files written "
        f"under `{rel(folder) if not quick else '<tmp>'}`:\n\n" + code("\n".join(files))
        + "\n\nThe `.xplane.pb` is the profiler's native format (open it with TensorBoard's "
        "profile plugin or XProf); `perfetto_trace.json.gz` is Chrome-trace JSON that "
        "ui.perfetto.dev loads without any server. Reading that JSON back: "
        f"{n_steps} `train` step events (one per step), and the jitted function appears as "
        "`PjitFunction(train_step)`. Busiest non-Python events by total duration (the "
        "`$`-prefixed Python-frame events, recorded by the Python tracer, are left out):\n\n"
        + table(["event", "count", "total us"], top_rows)
        + "\n\nOn the CPU backend the compiled program runs on host threads, so XLA's kernels "
        "(fusions, dot ops) appear next to runtime bookkeeping such as argument handling and "
        "buffer allocation; on a GPU they would sit on separate device streams."
        + ("" if perfetto_ok else "\n\n`create_perfetto_trace=True` failed here: "
           + code(f"{kind}: {msg}"))
    )


def _memory_profile(res, folder):
    """The device memory profile: written as gzip pprof (checked), and its section."""
    mem_path = folder / "device_memory.prof"
    jax.profiler.save_device_memory_profile(str(mem_path))
    head = mem_path.read_bytes()[:2] if mem_path.exists() else b""
    res.check_true("device memory profile written (gzip-compressed pprof)",
                   mem_path.exists() and mem_path.stat().st_size > 0 and head == b"\x1f\x8b")
    live = jax.live_arrays()
    res.sections.append(
        "### Device memory profile\n\n"
        f"`jax.profiler.save_device_memory_profile(path)` wrote "
        f"{mem_path.stat().st_size if mem_path.exists() else 0} bytes: a gzip-compressed "
        "pprof profile of the buffers currently alive, attributed to the Python code that "
        "created them (`go tool pprof` / pprof's web UI read it). At that moment "
        f"{len(live)} arrays were live, {sum(a.nbytes for a in live)} bytes in total. It is "
        "the tool for 'who is holding memory?'; the trace above is the tool for 'where does "
        "the time go?'."
    )


def _profiler_in_both(res, folder, steps):
    """The same traced loop under `minijax.profiler` and `jax.profiler`: the same files, steps,
    spans and kernels."""
    loops = {name: profiled_loop(J, folder / f"{name}_trace", steps)
             for name, J in MODULES}
    with res.running("both"):
        mj, jx = loops["minijax"], loops["jax"]
        res.check_true("minijax.profiler.trace writes JAX's files (xplane.pb, trace.json.gz, "
                       "perfetto_trace.json.gz)", mj["files"] == jx["files"])
        res.check_true("minijax's trace holds one StepTraceAnnotation per step, as JAX's",
                       mj["train"] == jx["train"] == steps)
        res.check_true("minijax's annotate_function spans: one per call, as JAX's",
                       mj["host"] == jx["host"] == steps)
        res.check_true("minijax's compiled kernels appear in its trace, as JAX's",
                       bool(mj["kernels"]) and bool(jx["kernels"]))
        res.check_true("minijax.profiler.save_device_memory_profile writes gzip pprof, as "
                       "JAX's", mj["memory_profile_gzip"] and jx["memory_profile_gzip"])
    res.sections.append(
        "### The same profiler around a minijax program\n\n"
        "`minijax.profiler` drives the backend's own profiler session (the one under "
        "`jax.profiler`): `trace`/`start_trace`/`stop_trace`, `TraceAnnotation`, "
        "`StepTraceAnnotation`, `annotate_function`, `save_device_memory_profile`. The same "
        f"{steps}-step loop, traced in each module, wrote "
        + ", ".join(f"`*.{f}`" for f in mj["files"]) + "; each trace holds "
        f"{jx['train']} `train` steps and {jx['host']} `host_bookkeeping` spans, and the "
        "compiled program's kernels: JAX " + ", ".join(f"`{k}`" for k in jx["kernels"])
        + "; minijax " + ", ".join(f"`{k}`" for k in mj["kernels"]) + ".")


def _named_scopes(res, folder):
    """Named scopes in the compiled HLO's op_name metadata and in the profile, compared between
    the modules."""
    scopes = {name: scope_names(J, folder / f"{name}_scopes")
              for name, J in MODULES}
    sj, sm = scopes["jax"], scopes["minijax"]
    want = {"jit(step)/dense1/tanh", "jit(step)/dense2/max", "jit(step)/loss/reduce_sum"}
    with res.running("both"):
        res.check_true("the compiled HLO's op_name metadata is JAX's, named_scope and "
                       "named_call names included", sm["op_names"] == sj["op_names"]
                       and want <= set(sm["op_names"]))
        res.check_true("the lowered ops' locations (as_text(debug_info=True)) are JAX's name "
                       "locations", bool(sm["locs"]) and set(sm["locs"]) <= set(sj["locs"]))
        res.check_true("as_text() without debug_info shows no locations, in both",
                       not sm["plain"] and not sj["plain"])
        common = set(sm["kernels"]) & set(sj["kernels"])
        reached = {op.split("/")[1] for op in sm["kernels"].values() if op.count("/") > 1}
        scopes = {"dense1", "dense2", "loss"}
        # XLA:CPU keeps one kernel per scope here, each with an op_name. XLA:TPU fuses across
        # scopes (a fusion takes the op_name of one op inside it) and adds copies of its own
        # (copy-start/copy-done prefetching the weights), which carry no op_name
        on_cpu = jax.default_backend() == "cpu"
        named = [op for op in sm["kernels"].values() if op]
        res.check_true("minijax's profiled kernels each run one scope's op ("
                       + ("dense1, dense2 and loss all among them" if on_cpu else
                          "dense1, dense2 or loss; XLA's own copies have none") +
                       "), the op_name of JAX's kernel of the same name",
                       bool(common) and (len(named) == len(sm["kernels"]) if on_cpu else
                                         bool(named))
                       and (reached == scopes if on_cpu else bool(reached) and reached <= scopes)
                       and all(sm["kernels"][k] == sj["kernels"][k] for k in common))
    res.sections.append(
        "### Named scopes in the HLO and the profile\n\n"
        "`named_scope(name)` (and `named_call(f, name=...)`) pushes a name onto the *name "
        "stack*; every equation traced inside records it (JAX: `eqn.source_info.name_stack`; "
        "printed jaxprs leave it out), and the lowering makes it each op's location, after "
        "the jit's own name: `loc(\"jit(step)/dense1/tanh\")`. XLA keeps that as the HLO "
        "instruction's `op_name` metadata, which profilers show next to the kernel. A "
        "two-layer step with scopes `dense1`, `dense2` and a `named_call` `loss`; minijax's "
        "compiled HLO carries the op names\n\n" + code("\n".join(sm["op_names"]))
        + f"\n\n({'the same set as' if sm['op_names'] == sj['op_names'] else 'unlike'} "
        "JAX's). The profile's kernel events name only the HLO instruction "
        f"(on this {jax.default_backend().upper()}); its op_name is read from the compiled "
        "module. minijax's kernels and the scope each one computes:\n\n"
        + table(["kernel (hlo_op)", "op_name (minijax)", "op_name (jax)"],
                [[f"`{k}`", f"`{op}`", f"`{sj['kernels'].get(k, '-')}`"]
                 for k, op in sm["kernels"].items()])
        + "\n\nUnder `grad` and `vmap` the scopes are kept too; JAX also wraps them in the "
        "transformation's name (`jvp(dense1)`, `transpose(jvp(dense1))`, `vmap(dense1)`), "
        "which minijax does not record.")


def _cost_analysis(res, quick, params, x, y, batch, sizes):
    """`cost_analysis` and `memory_analysis` of a matmul and of the training step, checked
    against the FLOPs by hand."""
    m, k, n = (32, 48, 16) if quick else (256, 512, 128)
    a = jnp.ones((m, k), jnp.float32)
    b = jnp.ones((k, n), jnp.float32)
    lowered = jax.jit(jnp.matmul).lower(a, b)
    compiled = lowered.compile()
    c_low = lowered.cost_analysis() or {}
    c_comp = compiled.cost_analysis() or {}
    if isinstance(c_comp, list):  # older JAX returned one dict per device
        c_comp = c_comp[0]
    want_flops = 2 * m * n * k
    res.check("cost_analysis flops of a matmul = 2*m*n*k (compiled)",
              np.float64(c_comp.get("flops", -1)), np.float64(want_flops), rtol=0, atol=0.5)
    want_bytes = 4 * (m * k + k * n + m * n)
    on_cpu = jax.default_backend() == "cpu"
    if on_cpu:  # XLA:CPU's cost model; an accelerator's counts differently (recorded below)
        res.check("cost_analysis flops (lowered, pre-optimization)",
                  np.float64(c_low.get("flops", -1)), np.float64(want_flops), rtol=0, atol=0.5)
        res.check("bytes accessed = inputs + output",
                  np.float64(c_comp.get("bytes accessed", -1)), np.float64(want_bytes),
                  rtol=0, atol=0.5)
    res.extra["matmul_cost"] = {"lowered": {k: c_low.get(k) for k in ("flops", "bytes accessed")},
                                "compiled": {k: c_comp.get(k) for k in ("flops",
                                                                        "bytes accessed")},
                                "inputs_plus_output_bytes": want_bytes}
    step_cost = train_step.lower(params, x, y).compile().cost_analysis() or {}
    if isinstance(step_cost, list):
        step_cost = step_cost[0]
    dense_flops = sum(2 * batch * i * o for i, o in zip(sizes[:-1], sizes[1:]))
    ratio = float(step_cost.get("flops", float("nan"))) / dense_flops
    res.check_true("training-step flops between 2x and 3.5x the forward matmuls",
                   2.0 <= ratio <= 3.5)
    mem = compiled.memory_analysis()
    res.sections.append(
        "### What the compiler thinks a program costs\n\n"
        f"For `a @ b` with a: {m}x{k}, b: {k}x{n}, `compiled.cost_analysis()` reports "
        f"`flops = {c_comp.get('flops')}` (expected 2*m*n*k = {want_flops}: one multiply and "
        f"one add per term) and `bytes accessed = {c_comp.get('bytes accessed')}` "
        + ("(the two inputs plus the output, each read or written once). The same numbers are "
           "available before optimization from `lowered.cost_analysis()`. " if on_cpu else
           f"(the two inputs plus the output are {want_bytes} bytes: XLA's "
           f"{jax.default_backend().upper()} cost model counts more). Before optimization, "
           f"`lowered.cost_analysis()` gives flops = {c_low.get('flops')} and bytes accessed "
           f"= {c_low.get('bytes accessed')} here, where XLA:CPU gives 2*m*n*k and the bytes "
           "above. ")
        + "`memory_analysis()` gives the "
        f"buffer sizes: arguments {getattr(mem, 'argument_size_in_bytes', 'n/a')} B, output "
        f"{getattr(mem, 'output_size_in_bytes', 'n/a')} B, temporaries "
        f"{getattr(mem, 'temp_size_in_bytes', 'n/a')} B.\n\n"
        f"For the whole training step the estimate is {step_cost.get('flops', 'n/a')} flops "
        f"and {step_cost.get('bytes accessed', 'n/a')} bytes accessed; the forward matmuls "
        f"alone are {dense_flops} flops. The backward pass adds up to two matmuls per layer "
        "(weight gradient and input gradient; the first layer needs no input gradient), so "
        f"the step should cost between 2x and 3x the forward matmuls plus elementwise work: "
        f"the ratio here is {ratio:.2f}. Dividing such counts by a "
        "measured step time gives achieved FLOP/s, the usual way to judge how close a program "
        "runs to the hardware's peak."
    )


def _benchmarking_pitfalls(res, quick, key):
    """One jitted function timed the right and the wrong ways (recorded, not asserted), and the
    section that reads them."""
    size = 128 if quick else 1024
    big = jax.random.normal(key, (size, size))
    big_np = np.asarray(big)

    def work(t):
        return jnp.tanh(t @ t) @ t

    fast = jax.jit(work)
    repeat = 5 if quick else 20
    t0 = time.perf_counter()
    fast(big).block_until_ready()
    first_ms = (time.perf_counter() - t0) * 1e3
    res.timings_ms["first call (trace + compile + run)"] = first_ms
    no_block = median_ms(lambda: fast(big), repeat=repeat)  # WRONG: measures dispatch only
    res.timings_ms["warm, without block_until_ready (wrong)"] = no_block
    fast(big).block_until_ready()  # drain the queue those calls left behind
    with_block = time_into(res, "warm, with block_until_ready (right)", lambda: fast(big), quick)
    np_input = time_into(res, "warm, NumPy input (includes host->device copy)",
                         lambda: fast(big_np), quick)
    fresh = []
    for _ in range(3 if quick else 5):  # WRONG: a new function object every time -> recompiles
        t0 = time.perf_counter()
        jax.jit(lambda t: jnp.tanh(t @ t) @ t)(big).block_until_ready()
        fresh.append((time.perf_counter() - t0) * 1e3)
    res.timings_ms["jit(lambda ...) re-created inside the loop (wrong)"] = statistics.median(fresh)
    # Same mistake made by calling a jitted function with a new Python scalar that is static.
    static = jax.jit(lambda t, s: t * s, static_argnums=1)
    scal = []
    for i in range(3 if quick else 5):
        t0 = time.perf_counter()
        static(big, float(i) + 0.5).block_until_ready()
        scal.append((time.perf_counter() - t0) * 1e3)
    res.timings_ms["changing a static argument each call (wrong)"] = statistics.median(scal)
    static_warm = median_ms(lambda: static(big, 0.5).block_until_ready(), repeat=repeat)
    res.timings_ms["... same static value every call (right)"] = static_warm
    rows = [
        ["first call: trace + compile + run", f"{first_ms:.3g}"],
        ["warm, no `block_until_ready` (wrong)", f"{no_block:.3g}"],
        ["warm, with `block_until_ready` (right)", f"{with_block:.3g}"],
        ["warm, NumPy argument each call", f"{np_input:.3g}"],
        ["`jax.jit(lambda ...)` built inside the loop", f"{statistics.median(fresh):.3g}"],
        ["`t * s`, new value of static `s` each call", f"{statistics.median(scal):.3g}"],
        ["`t * s`, same static `s` every call", f"{static_warm:.3g}"],
    ]
    res.sections.append(
        "### Benchmarking pitfalls\n\n"
        f"`jit(lambda t: tanh(t @ t) @ t)` on a {size}x{size} float32 matrix, timed several "
        "ways (medians in ms; recorded, not asserted):\n\n" + table(["how", "ms"], rows)
        + "\n\nWhat to read from it. JAX dispatches asynchronously: the call returns as soon "
        "as the work is queued, so a timer that does not wait with `block_until_ready()` "
        "measures dispatch overhead, not compute (compare rows 2 and 3; the gap grows with "
        "the size of the work). The first call includes tracing and XLA compilation, so "
        "warm up before timing. A jitted function is cached on the function object and on "
        "the static arguments; building `jax.jit(lambda ...)` inside the loop, or passing a "
        "new static value each time, recompiles every iteration. Passing NumPy arrays adds "
        "a host-to-device copy per call (small on CPU, a PCIe transfer on a GPU)."
    )


def peak_and_bandwidth(quick: bool) -> tuple[float, float]:
    """(FLOP/s of a large float32 matmul, bytes/s of a donated elementwise pass), best runs."""
    n, mib = (256, 8) if quick else (1024, 64)
    if jax.default_backend() != "cpu":  # an accelerator needs more work per call than its
        n, mib = n * 4, mib * 4        # dispatch costs before its ceilings show
    a = jax.device_put(np.random.default_rng(0).random((n, n), dtype=np.float32))
    mm = jax.jit(lambda t: t @ t)
    best = min(median_ms(lambda: mm(a).block_until_ready(), repeat=1, warmup=0)
               for _ in range(3 if quick else 7))
    bump = jax.jit(lambda v: v + 1.0, donate_argnums=0)  # reuses its buffer: no page faults
    v = bump(jax.device_put(np.ones(mib * 2**20 // 4, np.float32)))
    times = []
    for _ in range(3 if quick else 7):
        t0 = time.perf_counter()
        v = bump(v).block_until_ready()
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / (best * 1e-3), 2 * v.nbytes / min(times)


def _model_steps(J, batch: int):
    rng = np.random.RandomState(0)
    y = J.device_put(rng.randint(0, 10, batch).astype(np.int32))
    mlp = mnist_mlp.program(J, lr=0.1)["step"]
    cnn = numpy_cnn.program(J, lr=0.1)["step"]
    return {
        "MLP": (mlp, (J.device_put(mnist_mlp.init_params()),
                      J.device_put(rng.rand(batch, 784).astype(np.float32)), y)),
        "CNN": (cnn, (J.device_put(numpy_cnn.init_params()),
                      J.device_put(rng.rand(batch, 1, 28, 28).astype(np.float32)), y)),
    }


LADDER = (("cnn_bn", "CNN-BN"), ("gpt", "GPT"), ("moe", "MoE GPT"))


def ladder_points(topics_dir: Path = OUT_DIR / "topics") -> list[tuple]:
    """The model ladder's training steps as roofline points, (label, FLOP/byte, FLOP/s, flops,
    bytes, ms), from the stored results of the ladder topics (compare/out/topics/*.json:
    XLA's flops and bytes accessed and the median step time that each topic measured, in its
    own default sizes). Topics not run yet, or run before they recorded bytes, are left out."""
    points = []
    for topic, label in LADDER:
        path = topics_dir / f"{topic}.json"
        if not path.exists():
            continue
        extra = json.loads(path.read_text()).get("extra", {})
        for name in ("jax", "minijax"):
            e = extra.get(name) or {}
            flops, nbytes, ms = e.get("flops"), e.get("bytes_accessed"), e.get("step_ms")
            if flops and nbytes and ms:
                points.append((f"{label} {name}", flops / nbytes, flops / (ms * 1e-3),
                               flops, nbytes, ms))
    return points


# Why the roofline runs at the chip's default precision on a TPU (`roofline_precision`).
TPU_DEFAULT_PRECISION = (
    "at `highest` (what the rest of the topic runs at there, `compare/_modules.py: "
    "check_precision`) the CNN step holds the first layer's weight gradient, a float32 "
    "convolution of the batch's 1-channel 28x28 images by its 8-channel 28x28 output "
    "gradients, the kind whose XLA compile on a TPU v5e did not finish within 25 s at HIGHEST "
    "in cnn_bn (64x1x28x28 by 64x16x28x28, chapters/data/compare-tpu-run/cnn-highest.json), "
    "and the roofline compiles that step in both modules; it checks no values, and the chip's "
    "default is the precision its peak is quoted at")


def roofline_precision() -> str | None:
    """The matmul precision the roofline runs at: "default" (one bf16 pass) on a TPU, for
    the reason TPU_DEFAULT_PRECISION gives; None (whatever the caller set) elsewhere."""
    return "default" if jax.default_backend() == "tpu" else None


def _roofline(res: TopicResult, quick: bool) -> None:
    precision = roofline_precision()
    with precision_scope(precision):
        _measure_roofline(res, quick, precision)


def _measure_roofline(res: TopicResult, quick: bool, precision: str | None) -> None:
    peak, bw = peak_and_bandwidth(quick)
    res.check_true("measured peak FLOP/s and bandwidth are positive", peak > 0 and bw > 0)
    batch = 16 if quick else 128
    points, rows = [], []
    costs, calls = {}, {}
    for name, J in MODULES:
        for model, (step, args) in _model_steps(J, batch).items():
            cost = step.lower(*args).compile().cost_analysis()
            key = f"{model} step (batch {batch}): {name}"
            costs[key] = (model, name, float(cost["flops"]), float(cost["bytes accessed"]))
            calls[key] = lambda step=step, args=args, J=J: J.block_until_ready(step(*args))
    times = interleaved_ms(calls, repeat=5 if quick else 30, warmup=1 if quick else 3)
    res.timings_ms.update(times)
    for key, (model, name, flops, nbytes) in costs.items():
        ms = times[key]
        achieved = flops / (ms * 1e-3)
        roof = min(peak, flops / nbytes * bw)
        points.append((f"{model} {name}", flops / nbytes, achieved))
        rows.append([f"{model} {name}", f"{flops:.4g}", f"{nbytes:.4g}", f"{flops / nbytes:.2f}",
                     f"{ms:.3g}", f"{achieved / 1e9:.3g}", f"{achieved / roof:.0%}"])
    ladder = [] if quick else ladder_points()
    for label, intensity, achieved, flops, nbytes, ms in ladder:
        points.append((label, intensity, achieved))
        rows.append([label + " (its topic's sizes)", f"{flops:.4g}", f"{nbytes:.4g}",
                     f"{intensity:.2f}", f"{ms:.3g}", f"{achieved / 1e9:.3g}",
                     f"{achieved / min(peak, intensity * bw):.0%}"])
    res.extra["roofline"] = {"peak_flops": peak, "bandwidth": bw, "precision": precision,
                             "points": [list(p) for p in points]}
    mlp = {r[0]: r for r in rows}
    res.check_true("the MLP step's flop count is the same in both modules (cost model)",
                   float(mlp["MLP jax"][1]) == float(mlp["MLP minijax"][1]) or
                   abs(float(mlp["MLP jax"][1]) / float(mlp["MLP minijax"][1]) - 1) < 0.01)
    section = (
        "### The roofline of this machine, with both modules' model steps\n\n"
        f"Ceilings, each from its fastest run: peak {peak / 1e9:.3g} GFLOP/s (a float32 "
        f"matmul), bandwidth {bw / 1e9:.3g} GB/s (a donated elementwise pass over a large "
        f"array); ridge point {peak / bw:.3g} FLOP/byte. Each SGD step (batch {batch}, inputs "
        "on the device) is placed by its arithmetic intensity (XLA's flops / bytes accessed) "
        "and its achieved FLOP/s (flops / median step time):\n\n"
        + table(["step", "flops", "bytes", "FLOP/byte", "median ms", "GFLOP/s", "of roof"], rows)
        + "\n\nThe MLP programs of the two modules cost the same by XLA's model; the CNN's "
        "gradients lower differently (see the bytes column). "
        + ("The model ladder's steps (CNN with batch norm, GPT, MoE GPT) come from the last "
           "run of their own topics, at their default sizes. " if ladder else "")
        + "Numbers from a shared machine."
        + (f" On this {jax.default_backend().upper()} the ceilings and the steps are measured "
           f"at the chip's default matmul precision (one bf16 pass): {TPU_DEFAULT_PRECISION}."
           if precision else ""))
    if not quick:
        section += "\n\n" + plot("roofline", lambda fig: _draw_roofline(fig, peak, bw, points))
    res.sections.append(section)


def _draw_roofline(fig, peak: float, bw: float, points) -> None:
    ax = fig.add_subplot()
    xs = np.logspace(-2, 3, 200)
    ax.plot(xs, np.minimum(peak, xs * bw) / 1e9, "k-", label="roofline")
    for (label, x, y), marker in zip(points, "os^Dv<>phX*P"):
        ax.plot(x, y / 1e9, marker, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline: measured ceilings, model steps of both modules")
    ax.legend(fontsize=8)
