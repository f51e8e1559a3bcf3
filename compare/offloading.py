"""Offloading: memory kinds, moving arrays to host memory, and remat that offloads residuals.

Real JAX only. Accelerators have their own memory (HBM) and can also address page-locked
("pinned") host RAM; JAX names these *memory kinds* and lets a sharding say which one an array
lives in. The program shows, on the CPU backend of JAX 0.10.2:

* which memory kinds a CPU device reports, and whether `memory_stats()` is available;
* `jax.device_put` between kinds, for one device and for a sharded array, with the bytes held
  in each kind before and after (counted from `jax.live_arrays()`);
* `jit` with `out_shardings` that carry a memory kind, and `device_put` to host memory inside
  `jit`;
* `jax.checkpoint` policies that offload saved residuals to host memory
  (`offload_dot_with_no_batch_dims`, `save_and_offload_only_these_names`), whose gradients are
  checked against the plain gradient.

On a CPU "device memory" and "pinned host memory" are the same RAM, so some of this is
bookkeeping only; the sections say exactly which parts are real here and which are not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from compare._jax201 import captured_stdout, catch, table, time_into
from compare._report import OUT_DIR, TopicResult, code


def live_bytes_by_kind() -> dict[str, int]:
    """Bytes of all live jax.Arrays, per memory kind (a stand-in for memory_stats on CPU)."""
    out: dict[str, int] = {}
    for a in jax.live_arrays():
        try:
            kind = a.sharding.memory_kind or "device"
            out[kind] = out.get(kind, 0) + sum(s.data.nbytes for s in a.addressable_shards)
        except Exception:  # noqa: BLE001 - a deleted array can race with the scan
            continue
    return out


def layer(x, w):
    h = checkpoint_name(jnp.sin(x @ w), "h")
    return jnp.tanh(h @ w.T)


def stack_loss(w, x, policy, depth):
    f = layer if policy is None else jax.checkpoint(layer, policy=policy)
    for _ in range(depth):
        x = f(x, w)
    return jnp.sum(x ** 2)


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Offloading: memory kinds, host memory, remat offload")
    res.chapter = "chapters/15-offloading.md"
    res.devices = jax.device_count()
    dev = jax.devices()[0]
    size = 64 if quick else 512
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((size, size)).astype(np.float32)

    # ---------------------------------------------------------------- what the backend offers
    kinds = [m.kind for m in dev.addressable_memories()]
    default_kind = dev.default_memory().kind
    stats = dev.memory_stats()
    res.check_true("CPU device reports 'device' and 'pinned_host' memories",
                   "device" in kinds and "pinned_host" in kinds)
    res.check_true("default memory kind is 'device'", default_kind == "device")
    res.extra["memory_kinds"] = kinds
    res.sections.append(
        "### Memory kinds on the CPU backend\n\n"
        "`jax.devices()[0].addressable_memories()` -> "
        f"`{[str(m) for m in dev.addressable_memories()]}`; "
        f"kinds {kinds}, default `{default_kind}`. `memory_stats()` returns `{stats}` on this "
        "backend: the CPU client keeps no allocator statistics (GPU and TPU return a dict "
        "with `bytes_in_use`, `peak_bytes_in_use`, ...). So below, the before/after numbers "
        "come from summing the live arrays' shard sizes per memory kind instead."
    )

    # ---------------------------------------------------------------- device_put between kinds
    rows = []
    on_dev = jax.device_put(a_np, SingleDeviceSharding(dev, memory_kind="device"))
    before = live_bytes_by_kind()
    moved = {}
    for kind in kinds:
        arr = jax.device_put(on_dev, SingleDeviceSharding(dev, memory_kind=kind))
        moved[kind] = arr
        back = jax.device_put(arr, on_dev.sharding)
        res.check(f"device -> {kind} -> device keeps values", back, a_np)
        res.check_true(f"array reports memory_kind {kind}", arr.sharding.memory_kind == kind)
        rows.append([kind, arr.sharding.memory_kind, f"`{jax.typeof(arr)}`",
                     back.sharding.memory_kind])
    after = live_bytes_by_kind()
    res.check_true("bytes in pinned_host grew by the array size",
                   after.get("pinned_host", 0) - before.get("pinned_host", 0) >= a_np.nbytes)
    mesh = jax.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,))
    sh_dev = NamedSharding(mesh, P("i"), memory_kind="device")
    sh_host = sh_dev.with_memory_kind("pinned_host")
    sharded = jax.device_put(a_np, sh_dev)
    sharded_host = jax.device_put(sharded, sh_host)
    res.check("sharded array moved to pinned_host keeps values", sharded_host, a_np)
    res.check_true("every shard of the sharded array is in pinned_host",
                   all(s.data.sharding.memory_kind == "pinned_host"
                       for s in sharded_host.addressable_shards))
    time_into(res, f"device_put {a_np.nbytes // 1024} KiB device -> pinned_host",
              lambda: jax.device_put(on_dev, moved["pinned_host"].sharding), quick)
    time_into(res, f"device_put {a_np.nbytes // 1024} KiB pinned_host -> device",
              lambda: jax.device_put(moved["pinned_host"], on_dev.sharding), quick)
    time_into(res, "device_put sharded (8 devices) device -> pinned_host",
              lambda: jax.device_put(sharded, sh_host), quick)
    res.sections.append(
        "### device_put between memory kinds\n\n"
        "`jax.device_put(x, SingleDeviceSharding(dev, memory_kind=k))` for each kind, and "
        "back to `device`:\n\n"
        + table(["target kind", "array's memory_kind", "type", "after moving back"], rows)
        + "\n\n(Only `pinned_host` shows up in the type, as `<host>`: it is the kind JAX's "
        "type system tracks as the host memory space.)"
        + f" Live bytes per kind before the moves: `{before}`; after: `{after}`. For a "
        "sharded array the kind is part of the `NamedSharding` "
        "(`NamedSharding(mesh, P('i'), memory_kind='pinned_host')`, or "
        "`sharding.with_memory_kind(...)`) and applies to every shard. On this backend the "
        "copies are ordinary memcpys within the same RAM; on a GPU the same calls would be "
        "PCIe/NVLink transfers, which is what makes offloading a trade of bandwidth for "
        "device memory."
    )

    # ---------------------------------------------------------------- jit + memory kinds
    f_host = jax.jit(lambda t: jnp.tanh(t) * 2.0, out_shardings=sh_host)
    out = f_host(sharded)
    res.check("jit with pinned_host out_shardings: values", out, np.tanh(a_np) * 2.0,
              rtol=1e-6, atol=1e-6)
    res.check_true("jit result lands in pinned_host", out.sharding.memory_kind == "pinned_host")
    hlo = f_host.lower(sharded).compile().as_text()
    layout = next((ln for ln in hlo.splitlines() if "entry_computation_layout" in ln), "")
    layout = layout[layout.find("entry_computation_layout"):].split("}}")[0] + "}}"
    on_host_in = jax.jit(lambda t: t + 1.0)(sharded_host)
    res.check("jit on a pinned_host input computes", on_host_in, a_np + 1.0)
    to_host_inside = jax.jit(lambda t: jax.device_put(jnp.cos(t), jax.memory.Space.Host) * 3.0)
    r = to_host_inside(on_dev)
    res.check("device_put(..., Space.Host) inside jit: values", r, np.cos(a_np) * 3.0,
              rtol=1e-6, atol=1e-6)
    jaxpr = str(jax.make_jaxpr(lambda t: jax.device_put(jnp.cos(t), jax.memory.Space.Host))(on_dev))
    lowered = to_host_inside.lower(on_dev).as_text()
    annotated = "annotate_device_placement" in lowered
    host_line = next((ln.strip() for ln in jaxpr.splitlines() if "<host>" in ln), "(none)")
    res.sections.append(
        "### jit and memory kinds\n\n"
        "`jit(f, out_shardings=NamedSharding(mesh, P('i'), memory_kind='pinned_host'))` works "
        f"on CPU: the result reports `{out.sharding.memory_kind}`, and the compiled module's "
        "signature marks the output buffer with memory space 5 (`S(5)`, XLA's number for "
        "host memory):\n\n" + code(layout)
        + f"\n\nA `jit` whose input already sits in `pinned_host` also runs here (result kind "
        f"`{on_host_in.sharding.memory_kind}`): the CPU can compute on any of its RAM. On a "
        "GPU/TPU the compute units cannot read host memory directly, so such an input must be "
        "brought to the device first (or the computation placed on the host with "
        "`compute_on`).\n\nInside `jit`, `jax.device_put(x, jax.memory.Space.Host)` changes "
        "the value's type in the jaxpr:\n\n" + code(host_line)
        + "\n\nOn GPU and TPU JAX lowers that to an `annotate_device_placement` custom call "
        "that XLA turns into a device-to-host copy. The CPU lowering rule for `device_put` "
        "returns its input unchanged, so on this backend the StableHLO contains "
        f"{'an' if annotated else 'no'} `annotate_device_placement` call: the move is "
        "type-level only, and the value is correct either way (checked)."
    )

    # ---------------------------------------------------------------- remat with offloading
    depth = 3 if quick else 6
    n = 64 if quick else 256
    x = jnp.asarray(rng.standard_normal((n, n)), jnp.float32) * 0.5
    w = jnp.asarray(rng.standard_normal((n, n)) / np.sqrt(n), jnp.float32)
    cp = jax.checkpoint_policies
    policies = {
        "no checkpoint": None,
        "nothing_saveable (recompute all)": cp.nothing_saveable,
        "offload_dot_with_no_batch_dims": cp.offload_dot_with_no_batch_dims(
            "device", "pinned_host"),
        "save_and_offload_only_these_names(['h'])": cp.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
            offload_src="device", offload_dst="pinned_host"),
    }
    grad_fn = jax.jit(jax.grad(stack_loss), static_argnums=(2, 3))
    ref = grad_fn(w, x, None, depth)
    mem_rows, resid_text, host_temps, dev_temps = [], [], [], {}
    for name, pol in policies.items():
        kind, msg = catch(lambda pol=pol: grad_fn(w, x, pol, depth))
        if kind:  # record, do not fail: offload support is backend-dependent
            mem_rows.append([name, f"unsupported: {kind}: {msg.splitlines()[0][:120]}",
                             "-", "-", "-"])
            continue
        g = grad_fn(w, x, pol, depth)
        res.check(f"remat [{name}]: grad equals plain grad", g, ref, rtol=1e-4, atol=1e-5)
        with captured_stdout() as buf:
            jax.ad_checkpoint.print_saved_residuals(
                lambda w_, x_, pol=pol: stack_loss(w_, x_, pol, depth), w, x)
        root = str(OUT_DIR.parent.parent.resolve()) + "/"
        saved = [ln.replace(root, "") for ln in buf.getvalue().splitlines() if ln.strip()]
        on_host = sum("<host>" in ln for ln in saved)
        if pol is not None and "offload" in name:
            res.check_true(f"remat [{name}]: some residuals are saved to host", on_host > 0)
        ma = grad_fn.lower(w, x, pol, depth).compile().memory_analysis()
        ms = time_into(res, f"grad step, {name}", lambda pol=pol: grad_fn(w, x, pol, depth),
                       quick)
        host_temps.append(getattr(ma, "host_temp_size_in_bytes", None))
        dev_temps[name] = getattr(ma, "temp_size_in_bytes", 0)
        mem_rows.append([name, len(saved), on_host,
                         getattr(ma, "temp_size_in_bytes", "n/a"),
                         getattr(ma, "host_temp_size_in_bytes", "n/a"), f"{ms:.3g}"])
        if "only_these_names" in name:
            resid_text = saved
    recompute_temp = dev_temps.get("nothing_saveable (recompute all)", 0)
    no_shrink = all(v >= recompute_temp for k_, v in dev_temps.items() if "offload" in k_)
    res.sections.append(
        "### Remat that offloads residuals\n\n"
        f"A stack of {depth} layers `tanh(checkpoint_name(sin(x @ w), 'h') @ w.T)` on "
        f"{n}x{n} arrays, differentiated under different `jax.checkpoint` policies. The "
        "gradients all equal the plain gradient. Saved residuals come from "
        "`jax.ad_checkpoint.print_saved_residuals`; `<host>` marks those the policy sends to "
        "host memory. Sizes come from `compiled.memory_analysis()`:\n\n"
        + table(["policy", "residuals saved", "of which on host", "device temp bytes",
                 "host temp bytes", "median ms"], mem_rows)
        + "\n\nResiduals under `save_and_offload_only_these_names` (only the named `h` goes "
        "to the host; everything else is recomputed):\n\n" + code("\n".join(resid_text))
        + "\n\nWhat works on CPU and what does not. The *policy* works: JAX decides per "
        "residual to keep, recompute or offload it, the jaxpr carries `f32<host>[...]` types "
        "and `device_put` to `MemorySpace.Host` / back, and the gradient is right. The "
        "*physical* offload does not happen: the CPU lowering drops the placement (see the "
        f"previous section), so XLA reports host temp bytes of {sorted(set(host_temps))} "
        "across the policies, and the offloading policies' device temp size is "
        + ("no smaller than recomputing's" if no_shrink else "different from recomputing's")
        + " (compare the rows). On a GPU or TPU the same program copies `h` to "
        "pinned host memory after the forward pass and back before the backward pass, "
        "lowering peak device memory at the cost of transfer time. Where the offload itself "
        "is impossible JAX would raise; any such error would appear in the table above "
        "instead of failing the run."
    )
    return res
