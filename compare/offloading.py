"""Offloading: memory kinds, moving arrays to host memory, and remat that offloads residuals.

Runs minijax and JAX. Accelerators have their own memory (HBM) and can also address page-locked
("pinned") host RAM; JAX names these *memory kinds* and lets a sharding say which one an array
lives in. Each program below runs under both modules (`J = jax` and `J = minijax`):

* which memory kinds a CPU device reports, and whether `memory_stats()` is available;
* `device_put` between kinds, for one device and for a sharded array (values, the arrays' and
  the buffers' memory kinds);
* `jit` with `out_shardings` that carry a memory kind (values, the lowered program's memory-kind
  attributes and placement custom call, the compiled memory statistics), and `device_put` to
  host memory inside `jit`;
* `checkpoint` policies that offload saved residuals to host memory
  (`offload_dot_with_no_batch_dims`, `save_and_offload_only_these_names`): gradients,
  residuals saved and offloaded, compiled memory statistics, step time.

On a CPU "device memory" and "pinned host memory" are the same RAM, so some of this is
bookkeeping only; the sections say which parts are real here. Explained in
chapters/24-memory-offloading.md.
"""

from __future__ import annotations

import contextlib
import io

import jax
import jax.ad_checkpoint
import numpy as np

import minijax
import minijax.ad_checkpoint
from compare._jax201 import table
from compare._modules import MODULES
from compare._report import TopicResult, code, interleaved_ms, plot

STATS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
         "host_argument_size_in_bytes", "host_output_size_in_bytes", "host_temp_size_in_bytes")


def layer(J, x, w):
    jnp = J.numpy
    h = J.ad_checkpoint.checkpoint_name(jnp.sin(x @ w), "h")
    return jnp.tanh(h @ w.T)


def stack_loss(J, policy, depth):
    def loss(w, x):
        f = (lambda x, w: layer(J, x, w)) if policy is None else J.checkpoint(
            lambda x, w: layer(J, x, w), policy=policy)
        for _ in range(depth):
            x = f(x, w)
        return J.numpy.sum(x ** 2)
    return loss


def policies(J) -> dict:
    cp = J.checkpoint_policies
    return {
        "no checkpoint": None,
        "nothing_saveable (recompute all)": cp.nothing_saveable,
        "offload_dot_with_no_batch_dims": cp.offload_dot_with_no_batch_dims(
            "device", "pinned_host"),
        "save_and_offload_only_these_names(['h'])": cp.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
            offload_src="device", offload_dst="pinned_host"),
    }


def saved_residuals(J, f, *args) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        J.ad_checkpoint.print_saved_residuals(f, *args)
    return [ln.split(" from /")[0] for ln in buf.getvalue().splitlines() if ln.strip()]


def placement(J, a_np):
    """device_put to every kind and back, for one device and for a sharded array."""
    d = J.devices()[0]
    S = J.sharding.SingleDeviceSharding
    on_dev = J.device_put(a_np, d)
    out = {}
    for kind in [m.kind for m in d.addressable_memories()]:
        moved = J.device_put(on_dev, S(d, memory_kind=kind))
        back = J.device_put(moved, S(d))
        buf_kinds = sorted({s.data.sharding.memory_kind for s in moved.addressable_shards}) \
            if J is jax else [moved.device_buffer().sharding.memory_kind]
        out[kind] = dict(kind=moved.sharding.memory_kind, buffers=buf_kinds,
                         back=back.sharding.memory_kind, value=np.asarray(back))
    mesh = J.make_mesh((8,), ("i",), axis_types=(J.sharding.AxisType.Auto,))
    sh_host = J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("i"),
                                       memory_kind="pinned_host")
    sharded = J.device_put(J.device_put(a_np, sh_host.with_memory_kind("device")), sh_host)
    out["sharded"] = dict(kind=sharded.sharding.memory_kind, value=np.asarray(sharded))
    return out, on_dev, sharded, sh_host


def jit_to_host(J, a_np, sh_host):
    """jit with out_shardings in pinned_host, and device_put to the host inside jit."""
    x = J.numpy.asarray(a_np)
    f = J.jit(J.numpy.tanh, out_shardings=sh_host)
    r = f(x)
    lowered = f.lower(x)
    text = lowered.as_text()
    stats = lowered.compile().memory_analysis()
    d = J.devices()[0]
    to_host = J.sharding.SingleDeviceSharding(d, memory_kind="pinned_host")

    def g(t):
        return J.numpy.sum(J.device_put(J.device_put(J.numpy.cos(t), to_host) * 3.0,
                                        J.sharding.SingleDeviceSharding(d)))
    lines = [ln.strip() for ln in text.splitlines()
             if "memory_kind" in ln or "annotate_device_placement" in ln]
    return dict(kind=r.sharding.memory_kind, value=np.asarray(r), lines=lines,
                result_kind='mhlo.memory_kind = "pinned_host"' in text,
                placement="@annotate_device_placement" in text,
                stats={k: int(getattr(stats, k)) for k in STATS},
                inside=float(J.jit(g)(x)), jaxpr=str(J.make_jaxpr(g)(x)))


def remat(J, quick: bool):
    depth, n = (3, 64) if quick else (6, 256)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, n)) * 0.5).astype(np.float32)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    xs, ws = J.device_put(x), J.device_put(w)  # inputs on the device for both modules
    out = {}
    for name, pol in policies(J).items():
        loss = stack_loss(J, pol, depth)
        step = J.jit(J.grad(loss))
        g = np.asarray(step(ws, xs))
        saved = saved_residuals(J, loss, w, x)
        stats = step.lower(ws, xs).compile().memory_analysis()
        out[name] = dict(grad=g, saved=len(saved), offloaded=sum(
            "device_put" in ln for ln in saved), lines=saved,
            call=lambda step=step: J.block_until_ready(step(ws, xs)),
            stats={k: int(getattr(stats, k)) for k in STATS})
    return out, depth, n


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Offloading: memory kinds, host memory, remat offload (minijax and JAX)",
                      runs="both")
    res.chapter = "chapters/24-memory-offloading.md"
    res.devices = jax.device_count()
    dev = jax.devices()[0]
    size = 64 if quick else 512
    a_np = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)

    kinds = _memory_kinds(res, dev)

    got = _device_put_kinds(res, a_np, kinds, quick)

    _jit_memory_kinds(res, got, a_np)

    _remat_offload(res, quick)
    return res


def _memory_kinds(res, dev):
    """The memory kinds the CPU backend offers, the default kind in both modules, and the
    section."""
    kinds = [m.kind for m in dev.addressable_memories()]
    with res.running("jax"):
        res.check_true("CPU device reports 'device', 'pinned_host' and 'unpinned_host'",
                       {"device", "pinned_host", "unpinned_host"} <= set(kinds))
    res.check_true("default memory kind is 'device' (both modules)",
                   dev.default_memory().kind == "device" ==
                   minijax.sharding.SingleDeviceSharding(minijax.devices()[0]).memory_kind)
    res.extra["memory_kinds"] = kinds
    res.sections.append(
        "### Memory kinds on the CPU backend\n\n"
        f"`devices()[0].addressable_memories()` -> `{[str(m) for m in dev.addressable_memories()]}`"
        f"; default `{dev.default_memory().kind}`. minijax's devices are jaxlib's, so both "
        f"modules see the same memories. `memory_stats()` returns `{dev.memory_stats()}` here: "
        "the CPU client keeps no allocator statistics (GPU and TPU return a dict with "
        "`bytes_in_use`, `peak_bytes_in_use`, ...), so the numbers below come from the "
        "compiled programs' `memory_analysis()`.")
    return kinds


def _device_put_kinds(res, a_np, kinds, quick):
    """device_put to each memory kind and back in both modules: values, kinds, timing and the
    section."""
    got = {name: placement(J, a_np) for name, J in MODULES}
    rows = []
    for kind in [*kinds, "sharded"]:
        jx, mj = got["jax"][0][kind], got["minijax"][0][kind]
        res.check(f"device_put -> {kind}: values", mj["value"], jx["value"], rtol=0, atol=0)
        same = {k: v for k, v in mj.items() if k != "value"} == \
            {k: v for k, v in jx.items() if k != "value"}
        res.check_true(f"device_put -> {kind}: memory kinds equal JAX's", same)
        rows.append([kind, jx["kind"], mj["kind"], jx.get("buffers", "-"),
                     mj.get("buffers", "-"), jx.get("back", "-"), mj.get("back", "-")])
    res.timings_ms.update(interleaved_ms(
        {f"device_put {a_np.nbytes // 1024} KiB device -> pinned_host: {name}":
         lambda J=J, o=got[name][1]: J.block_until_ready(J.device_put(
             o, J.sharding.SingleDeviceSharding(J.devices()[0], memory_kind="pinned_host")))
         for name, J in MODULES}, repeat=5 if quick else 30))
    res.sections.append(
        "### device_put between memory kinds\n\n"
        "`device_put(x, SingleDeviceSharding(dev, memory_kind=k))` for each kind, then back "
        "with `SingleDeviceSharding(dev)`; last row: a `NamedSharding(mesh, P('i'), "
        "memory_kind='pinned_host')` over 8 devices. The buffers' kind is what jaxlib says of "
        "the underlying device buffers:\n\n"
        + table(["target", "JAX kind", "minijax kind", "JAX buffers", "minijax buffers",
                 "JAX after moving back", "minijax after moving back"], rows)
        + "\n\nOn this backend the copies are memcpys within the same RAM; on a GPU the same "
        "calls are PCIe/NVLink transfers, which is what makes offloading a trade of bandwidth "
        "for device memory. The timed `device_put` (both modules start from an array on the "
        "device) is much cheaper in minijax here: a minijax Array made from NumPy keeps its "
        "host copy, and the new buffer is made from that copy, which jaxlib's CPU client may "
        "alias instead of copying; JAX copies the device buffer.")
    return got


def _jit_memory_kinds(res, got, a_np):
    """jit with a pinned_host output sharding and a device_put to host inside jit, in both
    modules, and the section."""
    sh = {name: got[name][3] for name, _ in MODULES}
    jt = {name: jit_to_host(J, a_np, sh[name]) for name, J in MODULES}
    jx, mj = jt["jax"], jt["minijax"]
    res.check("jit(out_shardings=pinned_host): values", mj["value"], jx["value"], rtol=1e-6)
    for k in ("kind", "result_kind", "placement", "stats"):
        res.check_true(f"jit(out_shardings=pinned_host): {k} equal JAX's", mj[k] == jx[k])
    with res.running("jax"):
        res.check_true("JAX's result is in pinned_host", jx["kind"] == "pinned_host")
    res.check("device_put to host inside jit: values", np.float64(mj["inside"]),
              np.float64(jx["inside"]), rtol=1e-5)
    res.sections.append(
        "### jit and memory kinds\n\n"
        "`jit(tanh, out_shardings=NamedSharding(mesh, P('i'), memory_kind='pinned_host'))`: "
        f"the result reports `{jx['kind']}` in JAX and `{mj['kind']}` in minijax. Both lower "
        "the output with an `mhlo.memory_kind` attribute and wrap it in a "
        "`custom_call @annotate_device_placement` whose `_xla_buffer_placement` names the "
        "memory; XLA turns that into a copy to host memory. The lines that say so, JAX:\n\n"
        + code("\n".join(jx["lines"])) + "\n\nminijax:\n\n" + code("\n".join(mj["lines"]))
        + "\n\nCompiled memory statistics (bytes), equal in both:\n\n"
        + table(["statistic", "JAX", "minijax"], [[k, jx["stats"][k], mj["stats"][k]]
                                                  for k in STATS])
        + "\n\nThe CPU compiler counts host output bytes as 0 even with the placement: on CPU "
        "host and device memory are one RAM. Inside `jit`, `device_put(x, "
        "SingleDeviceSharding(dev, memory_kind='pinned_host'))` is a `device_put` equation. "
        "JAX's type records the memory (`f32<host>[...]`), minijax's does not (its avals "
        "carry no memory space); on the CPU backend both lower it to nothing, as JAX's CPU "
        "rule does. JAX:\n\n" + code(jx["jaxpr"]) + "\n\nminijax:\n\n" + code(mj["jaxpr"]))


def _remat_offload(res, quick):
    """checkpoint policies that save, recompute or offload residuals, in both modules:
    gradients, residuals, memory, timings and the section."""
    rm = {name: remat(J, quick) for name, J in MODULES}
    (rj, depth, n), (rmj, _, _) = rm["jax"], rm["minijax"]
    ref = rj["no checkpoint"]["grad"]
    mem_rows = []
    for name in rj:
        jx, mj = rj[name], rmj[name]
        res.check(f"remat [{name}]: minijax grad equals JAX's", mj["grad"], jx["grad"],
                  rtol=2e-4, atol=2e-5)
        with res.running("jax"):
            res.check(f"remat [{name}]: JAX grad equals the plain grad", jx["grad"], ref,
                      rtol=1e-4, atol=1e-5)
        res.check_true(f"remat [{name}]: residuals saved / offloaded equal JAX's",
                       (mj["saved"], mj["offloaded"]) == (jx["saved"], jx["offloaded"]))
        res.check_true(f"remat [{name}]: host temp bytes equal JAX's",
                       mj["stats"]["host_temp_size_in_bytes"]
                       == jx["stats"]["host_temp_size_in_bytes"])
        if "offload" in name:
            with res.running("jax"):
                res.check_true(f"remat [{name}]: some residuals go to host",
                               jx["offloaded"] > 0)
        res.timings_ms.update(interleaved_ms(
            {f"grad step, {name}: jax": jx["call"], f"grad step, {name}: minijax": mj["call"]},
            repeat=5 if quick else 30, warmup=1 if quick else 3))
        mem_rows.append([name, jx["saved"], mj["saved"], jx["offloaded"], mj["offloaded"],
                         jx["stats"]["temp_size_in_bytes"], mj["stats"]["temp_size_in_bytes"],
                         jx["stats"]["host_temp_size_in_bytes"]])
    named = "save_and_offload_only_these_names(['h'])"
    res.extra["remat_memory"] = {name: {"jax": rj[name]["stats"], "minijax": rmj[name]["stats"]}
                                 for name in rj}
    res.sections.append(
        "### Remat that offloads residuals\n\n"
        f"A stack of {depth} layers `tanh(checkpoint_name(sin(x @ w), 'h') @ w.T)` on "
        f"{n}x{n} arrays, differentiated under `checkpoint` policies, in both modules. Saved "
        "residuals come from `print_saved_residuals` (an offloaded one is the output of a "
        "`device_put` to host memory); sizes from `compiled.memory_analysis()`:\n\n"
        + table(["policy", "saved JAX", "saved minijax", "offloaded JAX", "offloaded minijax",
                 "device temp B JAX", "device temp B minijax", "host temp B"], mem_rows)
        + "\n\n" + plot("remat_memory_vs_policy", lambda fig: _draw_memory(
            fig, rj, rmj), figsize=(8, 4), quick=quick)
        + f"\n\nResiduals under `{named}`, JAX:\n\n" + code("\n".join(rj[named]["lines"]))
        + "\n\nminijax:\n\n" + code("\n".join(rmj[named]["lines"]))
        + "\n\nWhat works on CPU and what does not. The *policy* works in both modules: per "
        "residual it keeps, recomputes or offloads, the jaxpr carries the `device_put` to "
        "`MemorySpace.Host` and back, and the gradient is right. The *physical* offload does "
        "not happen on CPU: the lowering drops the placement inside the program, so the host "
        "temp bytes stay 0. On a GPU or TPU the same program copies `h` to pinned host memory "
        "after the forward pass and back before the backward pass, lowering peak device "
        "memory at the cost of transfer time.")


def _draw_memory(fig, rj: dict, rmj: dict) -> None:
    """Device temp bytes and residual counts per policy, both modules."""
    ax = fig.add_subplot()
    names = list(rj)
    xs = np.arange(len(names))
    for k, (label, runs) in enumerate((("jax", rj), ("minijax", rmj))):
        ax.bar(xs + (k - 0.5) * 0.4, [runs[n]["stats"]["temp_size_in_bytes"] / 1024
                                      for n in names], 0.4, label=label)
    ax.set_xticks(xs, [n.split(" (")[0].split("(")[0] for n in names], rotation=15,
                  ha="right", fontsize=8)
    ax.set_ylabel("device temp KiB (memory_analysis)")
    ax.set_title("remat: device memory vs policy")
    ax.legend()
