"""Beyond one process: JAX's multi-controller runtime, with a minijax program on top.

When a model outgrows one host, JAX runs one Python process per host ("multi-controller"):
every process runs the same program, `jax.distributed.initialize` connects them through a
coordinator, `jax.devices()` lists every device of every process, and `jax.local_devices()`
the ones this process drives. A jitted program over a global mesh is compiled by each process
for all the devices; each process feeds and reads only its own shards.

This topic starts 2 local processes with 4 CPU devices each (coordinator on 127.0.0.1, CPU
collectives through `gloo`), and runs the same minijax data-parallel training step (an MLP,
its batch split over the 8-device global mesh, Explicit axes) in each, next to one process
with 8 devices. The checks: both processes get the loss the single process gets, step by
step; JAX's own run of the program in the same processes agrees. Every child is stopped with a
timeout on every path (a hung coordinator kills both, and the topic reports it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from compare._jax201 import table
from compare._report import TopicResult, code

STEPS = 3
_TIMEOUT_S = 120


def _program(J, mesh, steps: int) -> list[float]:
    """`steps` SGD steps of an MLP's MSE in module J on `mesh` (axis "data"), the batch split
    over every device; every process makes the same global arrays and places its own shards."""
    import numpy as np
    jnp = J.numpy
    NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
    rng = np.random.default_rng(0)
    B, D, H, O = 32, 16, 32, 8
    x, y = rng.standard_normal((B, D), np.float32), rng.standard_normal((B, O), np.float32)
    w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.standard_normal((H, O)) / np.sqrt(H)).astype(np.float32)

    def step(params, x, y):
        def loss(p):
            return jnp.mean((jnp.maximum(x @ p[0], 0.0) @ p[1] - y) ** 2)
        val, grads = J.value_and_grad(loss)(params)
        return val, (params[0] - 0.1 * grads[0], params[1] - 0.1 * grads[1])

    def put(a, spec):
        return J.make_array_from_callback(a.shape, NS(mesh, spec), lambda idx: a[idx])
    params = (put(w1, P()), put(w2, P()))
    xs, ys = put(x, P("data")), put(y, P("data"))
    f = J.jit(step)
    losses = []
    for _ in range(steps):
        loss, params = f(params, xs, ys)
        # the loss is replicated: every process holds a copy on its own devices
        losses.append(float(np.asarray(loss.addressable_shards[0].data)))
    return losses


def _worker(process_id: int, num_processes: int, port: int) -> None:
    """One process of the job: connect (if more than one), run the program in minijax and
    in JAX, print one JSON line."""
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if num_processes > 1:
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}",
                                   num_processes=num_processes, process_id=process_id,
                                   initialization_timeout=60)
    try:
        import minijax
        out = {"process_index": jax.process_index(), "devices": len(minijax.devices()),
               "local_devices": len(minijax.local_devices())}
        out["minijax"] = _program(minijax, minijax.make_mesh((8,), ("data",)), STEPS)
        out["jax"] = _program(jax, jax.make_mesh((8,), ("data",)), STEPS)
        print(json.dumps(out), flush=True)
    finally:
        if num_processes > 1:
            jax.distributed.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(process_id: int, num_processes: int, port, devices: int, log) -> subprocess.Popen:
    env = dict(os.environ)
    flags = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                     if "xla_force_host_platform_device_count" not in f)
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-m", "compare.multi_process", str(process_id), str(num_processes),
         str(port)], stdout=log, stderr=subprocess.STDOUT, text=True, env=env, cwd=root)


def run_job(num_processes: int, devices_per_process: int,
            timeout_s: float = _TIMEOUT_S) -> list[dict]:
    """Start the processes, wait for all (at most `timeout_s` in all), and return each one's
    JSON result. As soon as one child fails, or at the time limit, every child still running
    is killed (no peer is left waiting on a dead coordinator) and RuntimeError says which
    one failed, with the tail of its output."""
    port = _free_port()
    logs = [tempfile.TemporaryFile("w+") for _ in range(num_processes)]
    procs = []
    error = None
    try:
        for i in range(num_processes):
            procs.append(_start(i, num_processes, port, devices_per_process, logs[i]))
        deadline = time.monotonic() + timeout_s
        while error is None and any(p.poll() is None for p in procs):
            failed = [i for i, p in enumerate(procs) if p.poll() not in (None, 0)]
            if failed:
                error = f"process {failed[0]} exited with {procs[failed[0]].returncode}"
            elif time.monotonic() > deadline:
                error = f"no result within {timeout_s:.0f} s"
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
    texts = []
    for log in logs:
        log.seek(0)
        texts.append(log.read())
        log.close()
    outs = []
    for i, (p, text) in enumerate(zip(procs, texts)):
        lines = [ln for ln in text.splitlines() if ln.startswith("{")]
        if error is None and (p.returncode != 0 or not lines):
            error = f"process {i} exited with {p.returncode}"
        if error is None:
            outs.append(json.loads(lines[-1]))
    if error is not None:
        raise RuntimeError(error + "".join(f"\n--- process {i}:\n{t[-1500:]}"
                                           for i, t in enumerate(texts)))
    return outs


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Multi-process: 2 processes x 4 CPU devices, one global mesh")
    res.chapter = "chapters/12-sharding.md"
    res.devices = 8
    t0 = time.perf_counter()
    single = run_job(1, 8)[0]
    t1 = time.perf_counter()
    both = run_job(2, 4)
    t2 = time.perf_counter()
    res.timings_ms["one process, 8 devices (start to finish)"] = (t1 - t0) * 1e3
    res.timings_ms["two processes x 4 devices (start to finish)"] = (t2 - t1) * 1e3
    res.check_true("each of the 2 processes sees 8 devices, 4 of them local",
                   [(o["devices"], o["local_devices"]) for o in both] == [(8, 4), (8, 4)])
    res.check_true("the processes are numbered 0 and 1",
                   sorted(o["process_index"] for o in both) == [0, 1])
    for o in both:
        k = o["process_index"]
        res.check(f"process {k}: minijax losses equal the one-process run's", o["minijax"],
                  single["minijax"], rtol=1e-6, atol=1e-7)
        res.check(f"process {k}: minijax losses equal JAX's (same processes)", o["minijax"],
                  o["jax"], rtol=1e-6, atol=1e-7)
    res.check("one process: minijax losses equal JAX's", single["minijax"], single["jax"],
              rtol=1e-6, atol=1e-7)
    rows = [[i, f"{single['minijax'][i]:.7f}", *[f"{o['minijax'][i]:.7f}" for o in both],
             f"{single['jax'][i]:.7f}"] for i in range(STEPS)]
    res.sections.append(
        "### One program, two controllers\n\n"
        "Each process calls `jax.distributed.initialize(coordinator_address='127.0.0.1:PORT', "
        "num_processes=2, process_id=i)` (after `jax_cpu_collectives_implementation='gloo'`), "
        "then runs the minijax program: `make_mesh((8,), ('data',))` over the 8 global "
        "devices, inputs made with `make_array_from_callback` (each process places only the "
        "shards of its own devices), a jitted SGD step. XLA compiles the same partitioned "
        "program in both processes; the gradient all-reduce crosses the process boundary "
        "through gloo. Losses per step:\n\n"
        + table(["step", "1 process x 8", "process 0 of 2", "process 1 of 2", "JAX, 1 x 8"],
                rows)
        + "\n\nThe children are started with a free port and stopped on every path: a child "
        "that fails or does not answer within the time limit has every other one killed, so "
        "no coordinator is left waiting. Start-to-finish times (process start, compile, 3 "
        "steps) are in the timings.\n\n"
        + code("python -m compare.multi_process 0 2 PORT   # one child, as the topic starts it")
    )
    return res


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
