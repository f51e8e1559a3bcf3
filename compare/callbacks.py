"""Callbacks: running ordinary Python/NumPy code from inside compiled programs, in minijax and JAX.

Each program is written once against a module alias `J` and run with `J=jax` and `J=minijax`;
what the host saw (call counts, argument shapes, order) and what was printed must agree.
Three doors out of a traced program, and how each behaves under the transforms:

* `pure_callback`: a side-effect-free host function that returns arrays. It may be dropped if
  unused, and under `vmap` it follows the `vmap_method` you choose ("sequential",
  "expand_dims", "broadcast_all"). It has no derivative; pair it with `custom_jvp`.
* `experimental.io_callback`: for real side effects. Never dropped; with `ordered=True` calls
  happen in program order (and then `vmap` is refused).
* `debug.callback` / `debug.print`: for looking at runtime values; returns nothing.

Sharded inputs (where the host function is called from) are shown for JAX only: minijax runs
callbacks on one device and refuses a program partitioned over a mesh that contains one.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import minijax
from compare._jax201 import captured_stdout, catch, table
from compare._report import TopicResult, code, median_ms

MODULES = (("jax", jax), ("minijax", minijax))


def host_sin(x):
    return np.sin(np.asarray(x)).astype(np.asarray(x).dtype)


def host_cos(x):
    return np.cos(np.asarray(x)).astype(np.asarray(x).dtype)


def sds(J, a):
    return J.ShapeDtypeStruct(a.shape, a.dtype)


def callback_sin(J):
    """sin computed by NumPy on the host, with a derivative that is also a host call."""
    @J.custom_jvp
    def f(x):
        return J.pure_callback(host_sin, sds(J, x), x, vmap_method="expand_dims")

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        d = J.pure_callback(host_cos, sds(J, x), x, vmap_method="expand_dims")
        return f(x), d * t
    return f


def pure_under_jit(J, x) -> dict:
    calls: list = []

    def counted_sin(a):
        calls.append(np.shape(a))
        return host_sin(a)

    f = J.jit(lambda a: J.pure_callback(counted_sin, sds(J, a), a) * 2.0)
    out = np.asarray(f(x))
    after_first = len(calls)
    J.block_until_ready(f(x))
    drop: list = []

    def counting_identity(a):
        drop.append(1)
        return np.asarray(a)

    io = J.experimental.io_callback
    unused_pure = J.jit(lambda a: (J.pure_callback(counting_identity, sds(J, a), a), a + 1)[1])
    unused_io = J.jit(lambda a: (io(counting_identity, sds(J, a), a), a + 1)[1])
    J.block_until_ready(unused_pure(x))
    pure_count = len(drop)
    J.block_until_ready(unused_io(x))
    J.effects_barrier()
    return dict(out=out, after_first=after_first, calls=len(calls), pure_unused=pure_count,
                io_unused=len(drop) - pure_count, f=f)


def vmap_seen(J, xs, method) -> tuple[np.ndarray, list]:
    seen: list = []

    def two_args(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return (np.asarray(a) * np.asarray(b)).astype(np.float32)

    def per_example(a):
        b = J.numpy.arange(a.shape[0], dtype=J.numpy.float32)  # not batched
        return J.pure_callback(two_args, sds(J, a), a, b, vmap_method=method)

    return np.asarray(J.jit(J.vmap(per_example))(xs)), seen


def ordered_scan(J, xs) -> tuple:
    log: list = []
    io = J.experimental.io_callback

    def record(v):
        log.append(np.array(v))
        return np.asarray(v).sum().astype(np.float32)

    @J.jit
    def running(seq):
        def body(c, row):
            s = io(record, J.ShapeDtypeStruct((), np.float32), row, ordered=True)
            return c + s, s
        return J.lax.scan(body, np.float32(0), seq)

    total, per_row = running(xs)
    J.effects_barrier()
    return (np.asarray(total), np.asarray(per_row)), np.stack(log), running


def printed(J, x, xs) -> dict:
    def traced(a):
        J.debug.print("a={a} sum={s}", a=a, s=a.sum())
        return a * 2.0

    def sin_then_sum(a):
        y = J.numpy.sin(a)
        J.debug.print("y={}", y)
        return y.sum()

    out = {}
    with captured_stdout() as buf:
        for name, run in [("jit", lambda: J.jit(traced)(x)),
                          ("jit(vmap) over 2 rows", lambda: J.jit(J.vmap(traced))(xs[:2])),
                          ("jit(grad) of sum(sin(a)) printing sin(a)",
                           lambda: J.jit(J.grad(sin_then_sum))(x)),
                          ("ordered, in a scan", lambda: J.jit(lambda s: J.lax.scan(
                              lambda c, r: (J.debug.print("c={} r={}", c, r, ordered=True)
                                            or c + r.sum(), None), np.float32(0), s))(xs[:2]))]:
            buf.truncate(0), buf.seek(0)
            run()
            J.effects_barrier()
            out[name] = buf.getvalue()
    return out


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Callbacks: pure_callback, io_callback, debug.print (minijax vs JAX)")
    res.chapter = "chapters/14-callbacks-effects.md"
    res.devices = jax.device_count()
    n = 5 if quick else 7
    xs = np.linspace(-1.0, 1.0, 4 * n, dtype=np.float32).reshape(4, n)
    x = xs[0]

    # ---------------------------------------------------------------- pure_callback under jit
    r = {name: pure_under_jit(J, x) for name, J in MODULES}
    rows = []
    for name, v in r.items():
        res.check(f"{name}: pure_callback under jit", v["out"], np.sin(x) * 2.0, rtol=1e-6)
        res.check_true(f"{name}: host function runs once per execution, not while tracing",
                       v["after_first"] == 1 and v["calls"] == 2)
        res.check_true(f"{name}: unused pure_callback removed, unused io_callback runs",
                       (v["pure_unused"], v["io_unused"]) == (0, 1))
        t_cb = median_ms(lambda f=v["f"], J=dict(MODULES)[name]: J.block_until_ready(f(x)),
                         repeat=5 if quick else 30, warmup=1 if quick else 3)
        res.timings_ms[f"{name}: jit(pure_callback(np.sin) * 2)"] = t_cb
        rows.append([name, v["after_first"], v["calls"], v["pure_unused"], v["io_unused"],
                     f"{t_cb:.3g}"])
    res.sections.append(
        "### pure_callback under jit\n\n"
        "`pure_callback(fn, result_shape_dtypes, *args)` puts a call to the host function into "
        "the compiled program (a `custom_call` to XLA's CPU Python-callback target, with the "
        "Python callable handed to XLA when the module is compiled); the runtime hands it "
        "NumPy arrays and copies the result back. Declared pure, it is deleted when its "
        "result is unused; the same host function through `io_callback` still runs.\n\n"
        + table(["module", "host calls after 1st call", "after 2nd", "unused pure_callback "
                 "calls", "unused io_callback calls", "round trip (ms, median)"], rows)
        + "\n\nThe round trip (runtime to Python, GIL, NumPy, copy back) is the same XLA "
        "machinery in both; timings are noisy on a shared machine."
    )

    # ---------------------------------------------------------------- vmap_method
    vm_rows = []
    for method in ("sequential", "expand_dims", "broadcast_all"):
        got = {name: vmap_seen(J, xs, method) for name, J in MODULES}
        for name, (vals, _) in got.items():
            res.check(f"{name}: vmap_method={method!r} values", vals,
                      xs * np.arange(n, dtype=np.float32))
        res.check_true(f"vmap_method={method!r}: the host saw the same calls and shapes",
                       got["jax"][1] == got["minijax"][1])
        vm_rows.append([f"`{method}`", len(got["minijax"][1]),
                        ", ".join(sorted({str(s) for s in got["minijax"][1]})),
                        len(got["jax"][1])])
    errs = {name: catch(lambda J=J: J.vmap(lambda a: J.pure_callback(
        host_sin, sds(J, a), a))(xs)) for name, J in MODULES}
    res.check_true("vmap without vmap_method: the same error", errs["jax"] == errs["minijax"]
                   and errs["jax"][0] is not None)
    res.sections.append(
        "### pure_callback under vmap: vmap_method\n\n"
        f"A callback `fn(a, b)` with `a` batched (4 examples of length {n}) and `b` a constant "
        "vector, under `vmap`:\n\n"
        + table(["vmap_method", "host calls (minijax)", "argument shapes the host saw",
                 "host calls (JAX)"], vm_rows)
        + "\n\n`sequential` loops (a `scan` calling the function once per example); "
        "`expand_dims` makes one call and gives unbatched arguments a leading axis of size 1; "
        "`broadcast_all` makes one call with every argument expanded to the full batch. "
        "Leaving `vmap_method` out is an error, the same in both:\n\n"
        + code("{}: {}".format(*errs["minijax"]))
    )

    # ---------------------------------------------------------------- grad
    errs = {name: catch(lambda J=J: J.grad(lambda a: J.pure_callback(
        host_sin, sds(J, a), a).sum())(x)) for name, J in MODULES}
    res.check_true("grad of a bare pure_callback: the same error",
                   errs["jax"] == errs["minijax"] and errs["jax"][0] is not None)
    for name, J in MODULES:
        f = callback_sin(J)
        res.check(f"{name}: grad via custom_jvp around pure_callback",
                  J.jit(J.grad(lambda a, f=f: f(a).sum()))(x), np.cos(x), rtol=1e-6)
        res.check(f"{name}: vmap(grad) of the custom_jvp callback",
                  J.jit(J.vmap(J.grad(f)))(xs.ravel()), np.cos(xs.ravel()), rtol=1e-6)
    res.sections.append(
        "### pure_callback under grad\n\n"
        "A host function is a black box to autodiff, so differentiating one fails, in both:\n\n"
        + code("{}: {}".format(*errs["minijax"]))
        + "\n\nThe fix is to supply the derivative: wrap the callback in `custom_jvp` and "
        "compute the tangent with a second callback (NumPy's `cos`). `grad`, and `vmap` of "
        "`grad`, then match `cos(x)` in both modules."
    )

    # ---------------------------------------------------------------- io_callback(ordered=True)
    scans = {name: ordered_scan(J, xs) for name, J in MODULES}
    for name, (vals, log, _) in scans.items():
        res.check(f"{name}: io_callback in scan: results", vals, (xs.sum(), xs.sum(1)),
                  rtol=1e-5, atol=1e-5)
        res.check(f"{name}: ordered io_callback: host saw rows in program order", log, xs)
    errs = {name: catch(lambda J=J: J.vmap(lambda a: J.experimental.io_callback(
        host_sin, sds(J, a), a, ordered=True))(xs)) for name, J in MODULES}
    res.check_true("vmap of an ordered io_callback: the same error",
                   errs["jax"] == errs["minijax"] and errs["jax"][0] is not None)
    for name, J in MODULES:
        fn = scans[name][2]
        res.timings_ms[f"{name}: scan of 4 ordered io_callbacks"] = median_ms(
            lambda fn=fn, J=J: J.block_until_ready(fn(xs)), repeat=5 if quick else 30,
            warmup=1 if quick else 3)
    res.sections.append(
        "### io_callback(ordered=True)\n\n"
        "Inside a `lax.scan` over 4 rows, an ordered `io_callback` appends each row to a "
        "Python list and returns its sum; in both modules the list came back in row order. "
        "The order is kept by a token: `main` takes one and returns one per ordered effect, "
        "the scan's loop carries it from trip to trip, and the runtime hands each call the "
        "token the previous call returned. `vmap` refuses an ordered callback:\n\n"
        + code("{}: {}".format(*errs["minijax"]))
    )

    # ---------------------------------------------------------------- debug.print
    texts = {name: printed(J, x, xs) for name, J in MODULES}
    for what in texts["jax"]:
        res.check_true(f"debug.print, {what}: same text",
                       texts["jax"][what] == texts["minijax"][what] and texts["jax"][what])
    res.sections.append(
        "### debug.print under jit, vmap, grad and scan\n\n"
        "Captured output (stdout redirected, `effects_barrier()` before reading), identical "
        "in both modules:\n\n"
        + code("".join(f"# {what}\n{text}" for what, text in texts["minijax"].items()))
        + "\n\nUnder `vmap` one line per example; under `grad` only the forward pass prints "
        "(the print's transpose does nothing); in a scan with `ordered=True`, one line per "
        "trip, in order."
    )

    # ---------------------------------------------------------------- sharded inputs (JAX)
    sharded_section(res, x)
    return res


def sharded_section(res: TopicResult, x) -> None:
    mesh = jax.make_mesh((4,), ("i",), devices=jax.devices()[:4])
    sharded = jax.device_put(np.arange(8, dtype=np.float32), NamedSharding(mesh, P("i")))
    whole: list = []
    parts: list = []

    @jax.jit
    def peek(a):
        jax.debug.callback(lambda v: whole.append(np.shape(v)), a)
        jax.debug.callback(lambda v: parts.append(np.shape(v)), a, partitioned=True)
        return a + 1

    peek(sharded).block_until_ready()
    jax.effects_barrier()
    res.check_true("JAX: debug.callback (default) sees the whole array once", whole == [(8,)])
    res.check_true("JAX: debug.callback(partitioned=True) sees each shard",
                   sorted(parts) == [(2,)] * 4)
    m_mesh = minijax.make_mesh((4,), ("i",), devices=minijax.devices()[:4])
    m_sharded = minijax.device_put(np.arange(8, dtype=np.float32),
                                   minijax.sharding.NamedSharding(m_mesh, minijax.P("i")))
    kind, msg = catch(lambda: minijax.jit(lambda a: minijax.pure_callback(
        host_cos, sds(minijax, a), a))(m_sharded))
    res.check_true("minijax: a callback in a partitioned program is refused clearly",
                   kind == "NotImplementedError" and "mesh" in msg)
    res.sections.append(
        "### Callbacks and sharded inputs (JAX)\n\n"
        "Input: 8 numbers split over 4 devices. By default a JAX callback wants the whole "
        f"logical array (the host saw {whole}): the partitioner gathers the shards to one "
        "device and calls the host once. `partitioned=True` (debug callbacks) or a callback "
        f"inside `shard_map` runs where the data is (the host saw {sorted(parts)}). minijax "
        "runs callbacks on one device only and says so:\n\n" + code(f"{kind}: {msg}")
    )
