"""Callbacks: running ordinary Python/NumPy code from inside compiled JAX programs.

Real JAX only. Three doors out of a traced program, and how each behaves under the transforms:

* `jax.pure_callback`: a side-effect-free host function that returns arrays. It may be
  dropped if unused, run more or fewer times than written, and under `vmap` it follows the
  `vmap_method` you choose ("sequential", "expand_dims", "broadcast_all"). It has no derivative;
  pair it with `jax.custom_jvp` to differentiate.
* `jax.experimental.io_callback`: for real side effects. Never dropped; with `ordered=True`
  calls happen in program order (and then `vmap` is refused).
* `jax.debug.callback` / `jax.debug.print`: for looking at runtime values; returns nothing.

Printed output is captured and compared with what NumPy formatting of the expected values
gives; callback call counts and argument shapes are recorded. Sharded inputs show where the
host function is called from.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from compare._jax201 import captured_stdout, catch, table, time_into
from compare._report import TopicResult, code


def numbers(line: str) -> np.ndarray:
    """The numbers in a printed line, in order (what `jax.debug.print` showed)."""
    values = line.split("=", 1)[1]
    return np.array([float(t) for t in re.findall(r"-?\d+\.?\d*(?:e[-+]?\d+)?", values)])


def records(text: str) -> list[str]:
    """Split captured output into printed records; NumPy may wrap one long array over lines."""
    return [r.strip() for r in re.findall(r"^\w+=.*?(?=^\w+=|\Z)", text, re.S | re.M)]


def host_sin(x):
    return np.sin(np.asarray(x)).astype(np.asarray(x).dtype)


def host_cos(x):
    return np.cos(np.asarray(x)).astype(np.asarray(x).dtype)


@jax.custom_jvp
def callback_sin(x):
    """sin computed by NumPy on the host, with a derivative that is also a host call."""
    return jax.pure_callback(host_sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                             vmap_method="expand_dims")


@callback_sin.defjvp
def _callback_sin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    d = jax.pure_callback(host_cos, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                          vmap_method="expand_dims")
    return callback_sin(x), d * t


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Callbacks: pure_callback, io_callback, jax.debug")
    res.chapter = "chapters/14-callbacks.md"
    res.devices = jax.device_count()
    n = 5 if quick else 7
    xs = np.linspace(-1.0, 1.0, 4 * n, dtype=np.float32).reshape(4, n)
    x = xs[0]

    # ---------------------------------------------------------------- pure_callback under jit
    calls: list = []

    def counted_sin(a):
        calls.append(np.shape(a))
        return host_sin(a)

    f = jax.jit(lambda a: jax.pure_callback(counted_sin, jax.ShapeDtypeStruct(a.shape, a.dtype),
                                            a) * 2.0)
    out = f(x).block_until_ready()
    res.check("pure_callback under jit", out, np.sin(x) * 2.0, rtol=1e-6)
    traced_calls = len(calls)
    f(x).block_until_ready()
    res.check_true("host function runs at execution time, once per call",
                   traced_calls == 1 and len(calls) == 2)
    drop: list = []

    def counting_identity(a):
        drop.append(1)
        return np.asarray(a)

    unused_pure = jax.jit(lambda a: (jax.pure_callback(
        counting_identity, jax.ShapeDtypeStruct(a.shape, a.dtype), a), a + 1)[1])
    unused_io = jax.jit(lambda a: (io_callback(
        counting_identity, jax.ShapeDtypeStruct(a.shape, a.dtype), a), a + 1)[1])
    unused_pure(x).block_until_ready()
    pure_count = len(drop)
    unused_io(x).block_until_ready()
    jax.effects_barrier()
    io_count = len(drop) - pure_count
    res.check_true("unused pure_callback is dead-code eliminated", pure_count == 0)
    res.check_true("unused io_callback still runs", io_count == 1)
    dev_sin = jax.jit(lambda a: jnp.sin(a) * 2.0)
    t_dev = time_into(res, "jit(sin(a) * 2) on device", lambda: dev_sin(x), quick)
    t_cb = time_into(res, "jit(pure_callback(np.sin) * 2)", lambda: f(x), quick)
    res.sections.append(
        "### pure_callback under jit\n\n"
        "`jax.pure_callback(fn, result_shape_dtypes, *args)` puts a call to the host function "
        "into the compiled program; the runtime hands it NumPy arrays and copies the result "
        "back. The host function ran once per execution and not while tracing (the call log "
        f"had {traced_calls} entry after the first call, 2 after the second). Because the "
        "callback is declared pure, XLA may delete it when its result is unused: the unused "
        f"`pure_callback` ran {pure_count} times, the same code through `io_callback` ran "
        f"{io_count} time. Timing: {t_cb:.3g} ms with the host call against {t_dev:.3g} ms "
        "on device; the difference is the round trip (runtime to Python, GIL, NumPy, copy "
        "back), which on a GPU or TPU also includes device-to-host transfers."
    )

    # ---------------------------------------------------------------- vmap_method
    vm_rows = []
    for method in ("sequential", "expand_dims", "broadcast_all"):
        seen: list = []

        def two_args(a, b, seen=seen):
            seen.append((np.shape(a), np.shape(b)))
            return (np.asarray(a) * np.asarray(b)).astype(np.float32)

        def per_example(a, method=method, two_args=two_args):
            b = jnp.arange(n, dtype=jnp.float32)  # not batched
            shape = jax.ShapeDtypeStruct(a.shape, a.dtype)
            return jax.pure_callback(two_args, shape, a, b, vmap_method=method)

        got = jax.jit(jax.vmap(per_example))(xs)
        res.check(f"vmap_method={method!r}: values", got, xs * np.arange(n, dtype=np.float32))
        vm_rows.append([f"`{method}`", len(seen), ", ".join(sorted({str(s) for s in seen}))])
        if method == "sequential":
            res.check_true("sequential: one host call per batch element",
                           len(seen) == xs.shape[0] and seen[0] == ((n,), (n,)))
        elif method == "expand_dims":
            res.check_true("expand_dims: one call, unbatched argument gets a size-1 axis",
                           seen == [((4, n), (1, n))])
        else:
            res.check_true("broadcast_all: one call, every argument has the batch axis",
                           seen == [((4, n), (4, n))])
    kind, msg = catch(lambda: jax.vmap(lambda a: jax.pure_callback(
        host_sin, jax.ShapeDtypeStruct(a.shape, a.dtype), a))(xs))
    res.check_true("vmap of pure_callback without vmap_method raises", kind is not None)
    res.sections.append(
        "### pure_callback under vmap: vmap_method\n\n"
        f"A callback `fn(a, b)` with `a` batched (4 examples of length {n}) and `b` a constant "
        "vector, under `jax.vmap`. JAX cannot look inside a NumPy function, so you tell it how "
        "the function copes with a batch axis:\n\n"
        + table(["vmap_method", "host calls", "argument shapes the host saw"], vm_rows)
        + "\n\n`sequential` loops, calling the function once per example; `expand_dims` makes "
        "one call and gives unbatched arguments a leading axis of size 1 (the function must "
        "broadcast); `broadcast_all` makes one call with every argument expanded to the full "
        "batch. Leaving `vmap_method` out is an error under `vmap`:\n\n"
        + code(f"{kind}: {msg}")
    )

    # ---------------------------------------------------------------- grad
    kind, msg = catch(lambda: jax.grad(lambda a: jax.pure_callback(
        host_sin, jax.ShapeDtypeStruct(a.shape, a.dtype), a).sum())(x))
    res.check_true("grad of a bare pure_callback raises", kind is not None)
    g = jax.jit(jax.grad(lambda a: callback_sin(a).sum()))(x)
    res.check("grad via custom_jvp around pure_callback", g, np.cos(x), rtol=1e-6)
    gv = jax.jit(jax.vmap(jax.grad(lambda a: callback_sin(a))))(xs.ravel())
    res.check("vmap(grad) of the custom_jvp callback", gv, np.cos(xs.ravel()), rtol=1e-6)
    res.check("second function value", jax.jit(callback_sin)(x), np.sin(x), rtol=1e-6)
    res.sections.append(
        "### pure_callback under grad\n\n"
        "A host function is a black box to autodiff, so differentiating one fails:\n\n"
        + code(f"{kind}: {msg}")
        + "\n\nThe fix is to supply the derivative: wrap the callback in `jax.custom_jvp` and "
        "compute the tangent with a second callback (here NumPy's `cos`). `grad`, and "
        "`vmap` of `grad`, then match `cos(x)`; reverse mode works because the JVP rule is "
        "linear in the tangent, so JAX can transpose it."
    )

    # ---------------------------------------------------------------- io_callback(ordered=True)
    log: list = []

    def record(v):
        log.append(np.array(v))
        return np.asarray(v).sum().astype(np.float32)

    @jax.jit
    def running(seq):
        def body(c, row):
            s = io_callback(record, jax.ShapeDtypeStruct((), jnp.float32), row, ordered=True)
            return c + s, s

        return jax.lax.scan(body, jnp.float32(0), seq)

    total, per_row = running(xs)
    jax.effects_barrier()
    res.check("io_callback in scan: results", (total, per_row), (xs.sum(), xs.sum(1)),
              rtol=1e-5, atol=1e-5)
    res.check("io_callback ordered: host saw rows in program order", np.stack(log), xs)
    kind_vm, msg_vm = catch(lambda: jax.vmap(lambda a: io_callback(
        record, jax.ShapeDtypeStruct((), jnp.float32), a, ordered=True))(xs))
    res.check_true("vmap of an ordered io_callback raises", kind_vm is not None)
    log.clear()
    unordered = jax.vmap(lambda a: io_callback(
        record, jax.ShapeDtypeStruct((), jnp.float32), a, ordered=False))(xs)
    jax.effects_barrier()
    res.check("vmap of an unordered io_callback: values", unordered, xs.sum(1), rtol=1e-5)
    res.check_true("... one host call per example", len(log) == xs.shape[0])
    kind_g, msg_g = catch(lambda: jax.grad(lambda a: io_callback(
        record, jax.ShapeDtypeStruct((), jnp.float32), a))(np.float32(1.0)))
    res.check_true("grad of io_callback raises", kind_g is not None)
    time_into(res, "scan of 4 ordered io_callbacks", lambda: running(xs), quick)
    res.sections.append(
        "### io_callback(ordered=True)\n\n"
        "Inside a `lax.scan` over 4 rows, an ordered `io_callback` appends each row to a "
        "Python list and returns its sum. The list came back in row order and the sums match. "
        "Ordering is a promise about sequence, which a batched call cannot keep, so `vmap` "
        "refuses; an unordered `io_callback` is batched by calling once per example. There is "
        "no derivative either:\n\n"
        + code(f"vmap, ordered=True  -> {kind_vm}: {msg_vm}\ngrad                -> {kind_g}: "
               f"{msg_g}")
    )

    # ---------------------------------------------------------------- jax.debug.print
    def traced(a):
        jax.debug.print("a={a} sum={s}", a=a, s=a.sum())
        return a * 2.0

    def sin_then_sum(a):
        y = jnp.sin(a)
        jax.debug.print("y={}", y)
        return y.sum()

    with captured_stdout() as buf:
        jax.jit(traced)(x)
        jax.effects_barrier()
        jit_out = records(buf.getvalue())
        buf.truncate(0), buf.seek(0)
        jax.jit(jax.vmap(traced))(xs[:2])
        jax.effects_barrier()
        vmap_out = records(buf.getvalue())
        buf.truncate(0), buf.seek(0)
        g = jax.jit(jax.grad(sin_then_sum))(x)
        jax.effects_barrier()
        grad_out = records(buf.getvalue())
        buf.truncate(0), buf.seek(0)
        plain = jax.jit(lambda a: (print("a =", a), a * 2.0)[1])
        plain(x), plain(x + 1.0)
        jax.effects_barrier()
        plain_out = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    res.check_true("debug.print under jit prints one line", len(jit_out) == 1)
    res.check("... with the runtime values", numbers(jit_out[0]), np.r_[x, x.sum()], rtol=1e-5)
    res.check_true("debug.print under vmap prints once per example", len(vmap_out) == 2)
    res.check("... each line with its example's values",
              np.stack(sorted(map(numbers, vmap_out), key=tuple)),
              np.stack(sorted([np.r_[r, r.sum()] for r in xs[:2]], key=tuple)), rtol=1e-5)
    res.check_true("debug.print under grad prints the forward pass only", len(grad_out) == 1)
    res.check("... the values of sin(a)", numbers(grad_out[0]), np.sin(x), rtol=1e-5,
              atol=1e-6)
    res.check("grad unaffected by debug.print", g, np.cos(x), rtol=1e-6)
    res.check_true("plain print inside jit: one line, at trace time, showing a tracer",
                   len(plain_out) == 1 and "Trace" in plain_out[0])
    res.sections.append(
        "### jax.debug.print under jit, vmap and grad\n\n"
        "Captured output (stdout redirected, `jax.effects_barrier()` before reading):\n\n"
        + code("# jit\n" + "\n".join(jit_out) + "\n# jit(vmap) over 2 rows\n"
               + "\n".join(vmap_out) + "\n# jit(grad) of sum(sin(a)) printing sin(a)\n"
               + "\n".join(grad_out) + "\n# plain print() in a jitted function, called twice\n"
               + "\n".join(plain_out))
        + "\n\nUnder `jit` the values are the runtime ones. A plain `print` runs only while "
        "tracing, so it shows an abstract tracer, once, however often the function is called "
        "afterwards. Under `vmap` the debug print is batched into one printed record per "
        "example. Under `grad` only the forward pass prints: `debug.print` has no "
        "cotangent, so the backward pass adds nothing."
    )

    # ---------------------------------------------------------------- sharded inputs
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
    res.check_true("debug.callback (default) sees the whole array once", whole == [(8,)])
    res.check_true("debug.callback(partitioned=True) sees each shard",
                   sorted(parts) == [(2,)] * 4)
    host_seen: list = []

    def host_cos_logged(v):
        host_seen.append(np.shape(v))
        return host_cos(v)

    whole_cb = jax.jit(lambda a: jax.pure_callback(
        host_cos_logged, jax.ShapeDtypeStruct(a.shape, a.dtype), a))
    r1 = whole_cb(sharded).block_until_ready()
    first_seen = list(host_seen)
    host_seen.clear()
    per_shard = jax.jit(jax.shard_map(lambda a: jax.pure_callback(
        host_cos_logged, jax.ShapeDtypeStruct(a.shape, a.dtype), a),
        mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    r2 = per_shard(sharded).block_until_ready()
    res.check("pure_callback on a sharded input", r1, np.cos(np.arange(8.0)), rtol=1e-6)
    res.check("pure_callback per shard inside shard_map", r2, np.cos(np.arange(8.0)), rtol=1e-6)
    res.check_true("jit: one host call with the gathered array", first_seen == [(8,)])
    res.check_true("shard_map: one host call per shard", sorted(host_seen) == [(2,)] * 4)
    res.sections.append(
        "### Callbacks and sharded inputs\n\n"
        "Input: 8 numbers split over 4 devices.\n\n"
        + table(["call", "host calls (argument shapes)", "result sharding"], [
            ["jax.debug.callback(f, a)", whole, "-"],
            ["jax.debug.callback(f, a, partitioned=True)", sorted(parts), "-"],
            ["jit(pure_callback(f, ..., a))", first_seen, f"`{r1.sharding}`"],
            ["jit(shard_map(pure_callback ...))", sorted(host_seen), f"`{r2.sharding.spec}`"],
        ])
        + "\n\nBy default a callback wants the whole logical array, so the partitioner "
        "gathers the shards to one device, calls the host once, and (for `pure_callback`) "
        "leaves the result on that single device (`maximal device=0`). XLA's log says as much "
        "with an 'Involuntary full rematerialization' warning on stderr. To run the host code "
        "where the data already is, either pass `partitioned=True` (debug callbacks) or call "
        "the callback inside `shard_map`, where each device hands over its own shard."
    )
    return res
