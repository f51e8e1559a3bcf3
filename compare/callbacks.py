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

With inputs split over a mesh, a callback in the bulk program gets the whole array on one
device, and one inside `shard_map` (or `debug.callback(partitioned=True)`) each shard.
"""

from __future__ import annotations

import re

import jax
import numpy as np

from compare._jax201 import captured_stdout, catch, table
from compare._modules import MODULES
from compare._report import TopicResult, code, interleaved_ms


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
    res = TopicResult("Callbacks: pure_callback, io_callback, debug.print (minijax vs JAX)",
                      runs="both")
    res.chapter = "chapters/14-callbacks-effects.md"
    res.devices = jax.device_count()
    n = 5 if quick else 7
    xs = np.linspace(-1.0, 1.0, 4 * n, dtype=np.float32).reshape(4, n)
    x = xs[0]

    _pure_under_jit(res, x, quick)

    _vmap_method(res, xs, n)

    _grad(res, x, xs)

    _ordered_io(res, xs, quick)

    _debug_print(res, x, xs)

    sharded_section(res, x)
    return res


def _pure_under_jit(res, x, quick):
    """pure_callback under jit in both modules: values, host calls, dead-code removal, round-
    trip timing and the section."""
    r = {name: pure_under_jit(J, x) for name, J in MODULES}
    rows = []
    t_cb = interleaved_ms({name: lambda f=v["f"], J=dict(MODULES)[name]: J.block_until_ready(
        f(x)) for name, v in r.items()}, repeat=5 if quick else 30, warmup=1 if quick else 3)
    for name, v in r.items():
        res.check(f"{name}: pure_callback under jit", v["out"], np.sin(x) * 2.0, rtol=1e-6)
        res.check_true(f"{name}: host function runs once per execution, not while tracing",
                       v["after_first"] == 1 and v["calls"] == 2)
        res.check_true(f"{name}: unused pure_callback removed, unused io_callback runs",
                       (v["pure_unused"], v["io_unused"]) == (0, 1))
        res.timings_ms[f"{name}: jit(pure_callback(np.sin) * 2)"] = t_cb[name]
        rows.append([name, v["after_first"], v["calls"], v["pure_unused"], v["io_unused"],
                     f"{t_cb[name]:.3g}"])
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


def _vmap_method(res, xs, n):
    """pure_callback under vmap with each vmap_method, and the error without one, in both
    modules, and the section."""
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


def _grad(res, x, xs):
    """grad of a bare pure_callback (the same error) and through custom_jvp, in both modules,
    and the section."""
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


def _ordered_io(res, xs, quick):
    """An ordered io_callback in a scan: results, the host's order, vmap's refusal, timings and
    the section."""
    scans = {name: ordered_scan(J, xs) for name, J in MODULES}
    for name, (vals, log, _) in scans.items():
        res.check(f"{name}: io_callback in scan: results", vals, (xs.sum(), xs.sum(1)),
                  rtol=1e-5, atol=1e-5)
        res.check(f"{name}: ordered io_callback: host saw rows in program order", log, xs)
    errs = {name: catch(lambda J=J: J.vmap(lambda a: J.experimental.io_callback(
        host_sin, sds(J, a), a, ordered=True))(xs)) for name, J in MODULES}
    res.check_true("vmap of an ordered io_callback: the same error",
                   errs["jax"] == errs["minijax"] and errs["jax"][0] is not None)
    res.timings_ms.update(interleaved_ms(
        {f"{name}: scan of 4 ordered io_callbacks": lambda fn=scans[name][2], J=J:
         J.block_until_ready(fn(xs)) for name, J in MODULES},
        repeat=5 if quick else 30, warmup=1 if quick else 3))
    res.sections.append(
        "### io_callback(ordered=True)\n\n"
        "Inside a `lax.scan` over 4 rows, an ordered `io_callback` appends each row to a "
        "Python list and returns its sum; in both modules the list came back in row order. "
        "The order is kept by a token: `main` takes one and returns one per ordered effect, "
        "the scan's loop carries it from trip to trip, and the runtime hands each call the "
        "token the previous call returned. `vmap` refuses an ordered callback:\n\n"
        + code("{}: {}".format(*errs["minijax"]))
    )


def _debug_print(res, x, xs):
    """debug.print under jit, vmap, grad and scan: the same text from both modules, and the
    section."""
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


def sharded_seen(J) -> dict:
    """What host functions see when their inputs are split over 4 devices of a mesh: under
    `jit` (the bulk program) and inside `shard_map`; each callback appends (what, shape,
    values) to one log. Also the callbacks' `sdy.sharding` annotations in the lowered text."""
    mesh = J.make_mesh((4,), ("i",), devices=J.devices()[:4],
                       axis_types=(J.sharding.AxisType.Auto,))
    a = J.device_put(np.arange(8, dtype=np.float32),
                     J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("i")))
    log: list = []

    def seen(what):
        def host(v):
            log.append((what, np.shape(v), np.asarray(v).tolist()))
            return np.asarray(v) * 2
        return host

    def bulk(v):
        w = J.pure_callback(seen("pure_callback"), sds(J, v), v)
        w = J.experimental.io_callback(seen("io_callback(ordered)"), sds(J, v), w,
                                       ordered=True)
        on3 = J.sharding.SingleDeviceSharding(J.devices()[3])
        w = J.experimental.io_callback(seen("io_callback(sharding=device 3)"), sds(J, v), w,
                                       sharding=on3)
        J.debug.callback(seen("debug.callback"), w)
        J.debug.callback(seen("debug.callback(partitioned)"), v, partitioned=True)
        return w

    def per_shard(v):
        J.debug.callback(seen("shard_map: debug.callback"), v)
        return J.pure_callback(seen("shard_map: pure_callback"), sds(J, v), v)

    f = J.jit(bulk)
    g = J.jit(J.shard_map(per_shard, mesh=mesh, in_specs=J.P("i"), out_specs=J.P("i")))
    out, out_g = f(a), g(a)
    J.block_until_ready((out, out_g))
    J.effects_barrier()
    text = f.lower(a).as_text() + g.lower(a).as_text()
    attrs = [m for line in text.splitlines() if "python_cpu_callback" in line
             for m in re.findall(r"sdy\.sharding = (#sdy\.sharding_per_value<\[.*?\]>)\}", line)]
    meshes = sorted(set(re.findall(r"sdy\.mesh @(\w+) = (<[^>]*>)", text)))
    order = ["pure_callback", "io_callback(ordered)", "io_callback(sharding=device 3)",
             "debug.callback", "debug.callback(partitioned)", "shard_map: debug.callback",
             "shard_map: pure_callback"]
    return dict(log=sorted(log, key=lambda e: (order.index(e[0]), e[2])),
                out=np.asarray(out), out_g=np.asarray(out_g),
                out_spec=str(out.sharding.spec), attrs=attrs, meshes=meshes,
                ordered_debug=catch(lambda: J.jit(lambda v: J.debug.print(
                    "{}", v, ordered=True)).lower(a)))


def sharded_section(res: TopicResult, x) -> None:
    got = {name: sharded_seen(J) for name, J in MODULES}
    j, m = got["jax"], got["minijax"]
    res.check_true("sharded inputs: each host function saw the same calls, shapes and values",
                   j["log"] == m["log"] and len(j["log"]) == 16)
    res.check("minijax: sharded inputs: results of the bulk callbacks", m["out"], j["out"])
    res.check("minijax: sharded inputs: results inside shard_map", m["out_g"], j["out_g"])
    res.check_true("sharded inputs: a bulk callback's result is replicated (same spec)",
                   m["out_spec"] == j["out_spec"])
    res.check_true("sharded inputs: the same sdy.sharding on each callback, same meshes",
                   m["attrs"] == j["attrs"] and m["meshes"] == j["meshes"] and m["attrs"])
    prefix = "The following ordered effects are not supported for more than 1 device"
    res.check_true("ordered debug.print on 4 devices: the same error",
                   m["ordered_debug"][0] == j["ordered_debug"][0] == "ValueError"
                   and prefix in m["ordered_debug"][1] and prefix in j["ordered_debug"][1])
    rows, seen_rows = [], {}
    for what, shape, _ in m["log"]:
        seen_rows.setdefault(what, []).append(shape)
    for what, shapes in seen_rows.items():
        rows.append([f"`{what}`", len(shapes), ", ".join(sorted({str(s) for s in shapes}))])
    res.sections.append(
        "### Callbacks and sharded inputs\n\n"
        "Input: 8 numbers split over 4 devices (`P('i')`). In the bulk program (`jit`) a "
        "callback wants the whole logical array: the partitioner gathers the shards to one "
        "device (a MAXIMAL sharding, `@maximal_mesh_0`; `io_callback(sharding="
        "SingleDeviceSharding(d))` picks device `d`) and calls the host once; its result is "
        f"replicated (`{m['out_spec']}`). `debug.callback(partitioned=True)` and any "
        "callback inside `shard_map` run where the data is, once per device. The same in "
        "both modules:\n\n"
        + table(["host function", "calls", "shapes it saw"], rows)
        + "\n\nThe annotations on the callbacks' `custom_call`s (minijax's text equals "
        "JAX's):\n\n" + code("\n".join(m["attrs"]))
        + "\n\nAn ordered `io_callback` keeps its order on a mesh (its token lives on every "
        "device); an ordered `debug.print` there is refused, in both:\n\n"
        + code("{}: {}".format(*m["ordered_debug"]))
    )
