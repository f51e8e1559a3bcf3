"""Sharding: NamedSharding, PartitionSpec, and what the compiler does with them.

minijax and real JAX side by side on a 2 x 4 mesh of CPU devices with axes `data` and `model`.
Every part runs in both modules and is checked against JAX (values, output specs, types,
collectives in the compiled HLO): shards of `device_put`, jit with in/out shardings, the MLP in
Explicit mode (sharding in types: `typeof`, `out_sharding=`, `reshard`) and in Auto mode, an
MLP trained data-parallel, model-parallel and 2-D with losses equal to the unsharded run and to
JAX's, with per-step timings like for like. The program shows:

* how a PartitionSpec cuts an array into per-device shards, and how many bytes each device
  holds (read from the array's addressable shards);
* `jit(in_shardings=..., out_shardings=...)` moving inputs and results to requested layouts;
* sharding propagation through a two-layer MLP under data, model and 2D (data x model)
  parallelism, in Explicit mode (JAX 0.10's default: shardings are part of the types, and a
  matmul whose result layout is ambiguous must be told its `out_sharding`) and in Auto mode
  (the compiler propagates shardings itself);
* changing a layout inside a program with `jax.sharding.reshard` (Explicit) and
  `jax.lax.with_sharding_constraint` (Auto);
* which collectives XLA's SPMD partitioner inserted, counted in `compiled.as_text()`.

Every sharded result is compared with the same function run unsharded on one device.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, reshard
from jax.sharding import PartitionSpec as P

from compare._jax201 import (catch, collective_lines, count_collectives, fmt_counts, table,
                             time_into, times_into)
from compare._report import TopicResult, code, interleaved_ms, xla_log_lines

import minijax
import minijax.numpy as mjnp
from minijax.sharding import AxisType as MAxisType
from minijax.sharding import NamedSharding as MNamedSharding
from minijax.sharding import PartitionSpec as MP


def mlp(params, x, out_sharding=None):
    """Two dense layers with a ReLU between them. `out_sharding` only matters in Explicit mode."""
    w1, w2 = params
    h = jnp.maximum(x @ w1, 0.0)
    return jnp.matmul(h, w2, out_sharding=out_sharding)


def loss_fn(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


def m_mlp(params, x, out_sharding=None):
    """`mlp` in minijax."""
    w1, w2 = params
    return mjnp.matmul(mjnp.maximum(x @ w1, 0.0), w2, out_sharding=out_sharding)


def m_loss_fn(params, x, y):
    return mjnp.mean((m_mlp(params, x) - y) ** 2)


def mspec(spec):
    """The minijax PartitionSpec with the entries of JAX's `spec`."""
    return MP(*spec)


def shard_layout(arr) -> list:
    """(device id, index as (start, stop) pairs) per shard, sorted: comparable across modules."""
    return sorted((s.device.id, tuple((sl.start, sl.stop) for sl in s.index))
                  for s in arr.addressable_shards)


def sgd_step(J, loss):
    """One SGD step of `loss` in module J: returns (loss, new params)."""
    def step(params, x, y):
        val, grads = J.value_and_grad(loss)(params, x, y)
        return val, J.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return step


def explicit_sgd_step(J, out_sharding):
    """One SGD step of the MLP's MSE in module J, the second matmul told `out_sharding`."""
    jnp_ = J.numpy

    def step(params, x, y):
        def loss(p):
            w1, w2 = p
            out = jnp_.matmul(jnp_.maximum(x @ w1, 0.0), w2, out_sharding=out_sharding)
            return jnp_.mean((out - y) ** 2)
        val, grads = J.value_and_grad(loss)(params)
        return val, J.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return step


def tile_map(arr) -> str:
    """A small text picture: for each block of a 2-D array, which device ids hold it."""
    owners: dict[tuple, list[int]] = {}
    for s in arr.addressable_shards:
        key = tuple((sl.start or 0) for sl in s.index)
        owners.setdefault(key, []).append(s.device.id)
    rows = sorted({k[0] for k in owners})
    cols = sorted({k[1] for k in owners})
    cells = [[",".join(map(str, sorted(owners[(r, c)]))) for c in cols] for r in rows]
    w = max(len(c) for row in cells for c in row)
    return "\n".join(" | ".join(c.ljust(w) for c in row) for row in cells)


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Sharding: NamedSharding, jit shardings, propagation, collectives",
                      runs="jax")  # the checks not naming minijax run JAX alone
    res.chapter = "chapters/12-sharding.md"
    res.devices = jax.device_count()
    if quick:
        B, D, H, O = 16, 32, 64, 16
    else:
        B, D, H, O = 256, 512, 1024, 256
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((B, D), dtype=np.float32)
    y_np = rng.standard_normal((B, O), dtype=np.float32)
    w1_np = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    w2_np = (rng.standard_normal((H, O)) / np.sqrt(H)).astype(np.float32)
    params_np = (w1_np, w2_np)

    # The single-device reference everything else is compared with.
    ref_fwd = jax.jit(mlp)(params_np, x_np)
    ref_grad = jax.jit(jax.grad(loss_fn))(params_np, x_np, y_np)

    mesh_e = jax.make_mesh((2, 4), ("data", "model"))
    mesh_a = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    mmesh_e = minijax.make_mesh((2, 4), ("data", "model"))
    mmesh_a = minijax.make_mesh((2, 4), ("data", "model"), axis_types=(MAxisType.Auto,) * 2)
    res.check_true("minijax.make_mesh defaults to Explicit axes, as jax.make_mesh",
                   [t.name for t in mmesh_e.axis_types] == [t.name for t in mesh_e.axis_types])

    # ---------------------------------------------------------------- specs, shards, bytes
    rows, pictures = [], []
    total = x_np.nbytes
    for spec in (P(), P("data"), P(None, "model"), P("data", "model"), P(("data", "model")),
                 P("model", "data")):
        arr = jax.device_put(x_np, NamedSharding(mesh_e, spec))
        marr = minijax.device_put(x_np, MNamedSharding(mmesh_e, mspec(spec)))
        res.check(f"{spec}: minijax shards reassemble to the array", np.asarray(marr), x_np)
        res.check_true(f"{spec}: minijax puts the same blocks on the same devices as JAX",
                       shard_layout(marr) == shard_layout(arr)
                       and str(marr.sharding.spec) == str(arr.sharding.spec))
        res.check_true(f"{spec}: minijax's type equals JAX's ({jax.typeof(arr)})",
                       str(minijax.typeof(marr)) == str(jax.typeof(arr)))
        per_dev = {s.device.id: s.data.nbytes for s in arr.addressable_shards}
        distinct = len({tuple((sl.start, sl.stop) for sl in s.index)
                        for s in arr.addressable_shards})
        copies = len(per_dev) // distinct
        res.check(f"{spec}: shards reassemble to the array", arr, x_np)
        res.check_true(f"{spec}: bytes per device = total / number of distinct shards",
                       all(b == total // distinct for b in per_dev.values()))
        res.check_true(f"{spec}: sum over devices = total x replication",
                       sum(per_dev.values()) == total * copies)
        shard_shape = arr.addressable_shards[0].data.shape
        rows.append([f"`{spec}`", f"`{jax.typeof(arr)}`", shard_shape, per_dev[0],
                     sum(per_dev.values()), copies])
        if spec in (P("data", "model"), P("model", "data"), P(None, "model")):
            pictures.append(f"{spec}: device ids per block of x[{B},{D}]\n{tile_map(arr)}")
    res.sections.append(
        "### PartitionSpec -> shards -> bytes per device\n\n"
        f"A `NamedSharding(mesh, spec)` names, for each array dimension, the mesh axes it is "
        f"split over; unnamed mesh axes mean copies. For x of shape {x_np.shape} "
        f"({total} bytes) on the 2 x 4 mesh (`data` = 2, `model` = 4):\n\n"
        + table(["spec", "type (Explicit mesh)", "shard shape", "bytes on device 0",
                 "bytes on all devices", "copies of each shard"], rows)
        + "\n\nThe per-device numbers come straight from `arr.addressable_shards[i].data.nbytes`."
        " minijax's `device_put(x, NamedSharding(mesh, spec))` cuts the same blocks and puts them"
        " on the same devices (checked shard by shard) and gives them the same types."
        " Splitting over both axes (`P('data','model')` or the flattened `P(('data','model'))`)"
        " leaves each device 1/8 of the data; `P()` keeps eight full copies. Who holds what:\n\n"
        + code("\n\n".join(pictures))
    )

    # ---------------------------------------------------------------- jit in/out shardings
    jit_rows = []
    for label, mesh, mmesh in (("Explicit", mesh_e, mmesh_e), ("Auto", mesh_a, mmesh_a)):
        f = jax.jit(lambda a: jnp.sin(a) * 2.0,
                    in_shardings=NamedSharding(mesh, P("data")),
                    out_shardings=NamedSharding(mesh, P(None, "model")))
        out = f(x_np)
        hlo = f.lower(x_np).compile().as_text()
        res.check(f"{label}: jit with in/out shardings matches", out, np.sin(x_np) * 2.0,
                  rtol=1e-6, atol=1e-6)
        res.check_true(f"{label}: output has the requested sharding",
                       out.sharding.spec == P(None, "model"))
        mf = minijax.jit(lambda a: mjnp.sin(a) * 2.0,
                         in_shardings=MNamedSharding(mmesh, MP("data")),
                         out_shardings=MNamedSharding(mmesh, MP(None, "model")))
        mout = mf(x_np)
        mhlo = mf.lower(x_np).compile().as_text()
        minijax_text, jax_text = mf.lower(x_np).as_text(), f.lower(x_np).as_text()
        res.check(f"{label}: minijax jit with in/out shardings matches JAX", np.asarray(mout),
                  np.asarray(out), rtol=1e-6, atol=1e-6)
        res.check_true(f"{label}: minijax output spec and shards equal JAX's",
                       str(mout.sharding.spec) == str(out.sharding.spec)
                       and shard_layout(mout) == shard_layout(out))
        res.check_true(f"{label}: minijax's compiled program has JAX's collectives",
                       count_collectives(mhlo) == count_collectives(hlo))
        jit_rows.append([label, f"`{jax.typeof(out)}`", f"`{out.sharding.spec}`",
                         fmt_counts(count_collectives(hlo)), f"`{mout.sharding.spec}`",
                         fmt_counts(count_collectives(mhlo))])
    res.sections.append(
        "### jit with in_shardings / out_shardings\n\n"
        "`jit(f, in_shardings=NamedSharding(mesh, P('data')), out_shardings=NamedSharding(mesh, "
        "P(None, 'model')))` on an elementwise `sin(x) * 2`: a NumPy input is uncommitted, so "
        "JAX places it as `in_shardings` asks; the result must come out split by columns, so "
        "the compiled program has to move data between the two layouts. In both modes the "
        "partitioner does it inside the program:\n\n"
        + table(["mode", "result type (JAX)", "JAX result spec", "JAX collectives",
                 "minijax result spec", "minijax collectives"], jit_rows)
        + "\n\nminijax lowers the same call to Shardy: an `sdy.mesh`, `sdy.sharding` attributes "
        "on `main`'s arguments and results, compiled with `num_partitions = 8`. Its module "
        "(the Auto row), next to JAX's:\n\n" + code(minijax_text) + "\n\n" + code(jax_text)
    )

    # ---------------------------------------------------------------- the MLP, three ways
    m_ref_fwd = minijax.jit(m_mlp)(params_np, x_np)
    res.check("minijax unsharded MLP forward equals JAX's", np.asarray(m_ref_fwd),
              np.asarray(ref_fwd), rtol=1e-5, atol=1e-5)
    # like for like: one jitted function each, inputs already on the device, interleaved
    fwd_j, fwd_m = jax.jit(mlp), minijax.jit(m_mlp)
    in_j, in_m = jax.device_put((params_np, x_np)), minijax.device_put((params_np, x_np))
    times_into(res, {"MLP forward, 1 device: jax": lambda: fwd_j(*in_j),
                     "MLP forward, 1 device: minijax": lambda: fwd_m(*in_m)}, quick)
    strategies = {
        # name: (x spec, w1 spec, w2 spec, out spec needed in Explicit mode)
        "data parallel": (P("data"), P(), P(), P("data", None)),
        "model parallel": (P(), P(None, "model"), P("model", None), P(None, None)),
        "2D (data x model)": (P("data"), P(None, "model"), P("model", None), P("data", None)),
    }
    mlp_rows, hlo_quotes, mem_rows = [], [], []
    for name, (xs, w1s, w2s, outs) in strategies.items():
        for label, mesh in (("Explicit", mesh_e), ("Auto", mesh_a)):
            put = lambda a, s, mesh=mesh: jax.device_put(a, NamedSharding(mesh, s))
            xa, pa = put(x_np, xs), (put(w1_np, w1s), put(w2_np, w2s))
            note = ""
            if label == "Explicit":
                kind, msg = catch(lambda pa=pa, xa=xa: jax.jit(mlp)(pa, xa))
                if kind:
                    note = f"without out_sharding: `{kind}`: {msg.split('. ')[0]}."
                out_s = NamedSharding(mesh, outs)
                fn = jax.jit(lambda p, a, s=out_s: mlp(p, a, s))
            else:
                fn = jax.jit(mlp)
            out = fn(pa, xa)
            compiled = fn.lower(pa, xa).compile()
            hlo = compiled.as_text()
            counts = count_collectives(hlo)
            res.check(f"{name} [{label}]: output equals unsharded run", out, ref_fwd,
                      rtol=1e-4, atol=1e-4)
            mmesh = mmesh_a if label == "Auto" else mmesh_e
            mput = lambda a, s, mmesh=mmesh: minijax.device_put(a, MNamedSharding(mmesh,
                                                                                 mspec(s)))
            mxa, mpa = mput(x_np, xs), (mput(w1_np, w1s), mput(w2_np, w2s))
            if label == "Explicit":
                mkind, _ = catch(lambda mpa=mpa, mxa=mxa: minijax.jit(m_mlp)(mpa, mxa))
                res.check_true(f"{name} [Explicit]: without out_sharding minijax raises as JAX "
                               f"({kind})", mkind == kind)
                m_out_s = MNamedSharding(mmesh, mspec(outs))
                mfn = minijax.jit(lambda p, a, s=m_out_s: m_mlp(p, a, s))
            else:
                mfn = minijax.jit(m_mlp)
            mout = mfn(mpa, mxa)
            mc = count_collectives(mfn.lower(mpa, mxa).compile().as_text())
            res.check(f"{name} [{label}]: minijax output equals the unsharded run",
                      np.asarray(mout), ref_fwd, rtol=1e-4, atol=1e-4)
            res.check_true(f"{name} [{label}]: minijax output spec and type equal JAX's",
                           str(mout.sharding.spec) == str(out.sharding.spec)
                           and str(minijax.typeof(mout)) == str(jax.typeof(out)))
            res.check_true(f"{name} [{label}]: minijax's compiled HLO has JAX's collectives",
                           mc == counts)
            m_spec, m_counts = f"`{mout.sharding.spec}`", fmt_counts(mc)
            mlp_rows.append([name, label, f"`{jax.typeof(out)}`", f"`{out.sharding.spec}`",
                             fmt_counts(counts), m_spec, m_counts, note or "-"])
            if label == "Auto":
                time_into(res, f"MLP forward, {name} (8 devices, Auto)",
                          lambda fn=fn, pa=pa, xa=xa: fn(pa, xa), quick)
                hlo_quotes.append(f"# {name}\n" + ("\n".join(collective_lines(hlo, 4))
                                                    or "(no collectives)"))
                dev0 = sum(a.addressable_shards[0].data.nbytes for a in (*pa, xa))
                ma = compiled.memory_analysis()
                mem_rows.append([name, dev0, w1_np.nbytes + w2_np.nbytes + x_np.nbytes,
                                 getattr(ma, "argument_size_in_bytes", "n/a"),
                                 getattr(ma, "temp_size_in_bytes", "n/a")])
                if name == "model parallel":
                    res.check_true("model parallel: partitioner inserted an all-reduce",
                                   counts["all-reduce"] >= 1)
                if name == "data parallel":
                    res.check_true("data parallel forward needs no collectives",
                                   sum(counts.values()) == 0)
    res.sections.append(
        "### Sharding propagation through a 2-layer MLP\n\n"
        "`mlp(params, x) = relu(x @ w1) @ w2`, with only the inputs' shardings chosen by us. "
        "Data parallel splits the batch and copies the weights; model parallel splits the "
        "hidden dimension (columns of `w1`, rows of `w2`, Megatron style); 2D does both. Every "
        "row's output equals the one-device run (see the checks).\n\n"
        + table(["strategy", "mode", "result type", "JAX result spec", "JAX collectives",
                 "minijax result spec", "minijax collectives", "note (both modules)"],
                mlp_rows)
        + "\n\nWhat to notice. Data parallelism needs no communication in the forward pass: "
        "each device owns whole rows. In model parallelism the second matmul contracts over "
        "the split hidden dimension, so each device holds a *partial sum* of the output and "
        "an all-reduce over `model` finishes it. In Explicit mode JAX will not guess how that "
        "result should be laid out (replicated? split?), so the plain program fails at trace "
        "time with the message in the note column, and we pass `out_sharding=` to the second "
        "matmul. In Auto mode the partitioner decides on its own. (The timings are for "
        "orientation only: the eight CPU 'devices' share this machine's cores, so sharding "
        "adds communication without adding compute.) The collective instructions, as they "
        "appear in `compiled.as_text()` (Auto mode):\n\n" + code("\n\n".join(hlo_quotes))
        + "\n\nParameters + input bytes held by device 0 (from addressable shards) and XLA's "
        "own per-device accounting (`compiled.memory_analysis()`):\n\n"
        + table(["strategy", "device-0 bytes (x, w1, w2)", "unsharded bytes",
                 "memory_analysis argument bytes", "temp bytes"], mem_rows)
    )

    # Data-parallel training step: gradient all-reduce.
    rep = NamedSharding(mesh_a, P())
    batch = NamedSharding(mesh_a, P(("data", "model")))
    grad_fn = jax.jit(jax.grad(loss_fn), in_shardings=((rep, rep), batch, batch))
    g = grad_fn(params_np, x_np, y_np)
    g_counts = count_collectives(grad_fn.lower(params_np, x_np, y_np).compile().as_text())
    res.check("data-parallel gradient equals unsharded gradient", g, ref_grad,
              rtol=1e-4, atol=1e-5)
    res.check_true("data-parallel gradient uses an all-reduce", g_counts["all-reduce"] >= 1)
    mrep = MNamedSharding(mmesh_a, MP())
    mbatch = MNamedSharding(mmesh_a, MP(("data", "model")))
    m_grad_fn = minijax.jit(minijax.grad(m_loss_fn), in_shardings=((mrep, mrep), mbatch, mbatch))
    mg = m_grad_fn(params_np, x_np, y_np)
    mg_counts = count_collectives(m_grad_fn.lower(params_np, x_np, y_np).compile().as_text())
    res.check("minijax data-parallel gradient equals the unsharded gradient",
              [np.asarray(t) for t in mg], ref_grad, rtol=1e-4, atol=1e-5)
    res.check_true("minijax data-parallel gradient: JAX's collectives", mg_counts == g_counts)
    time_into(res, "data-parallel grad step (8 devices)",
              lambda: grad_fn(params_np, x_np, y_np), quick)
    res.sections.append(
        "### Data-parallel gradients\n\n"
        "Split the batch over all eight devices (`P(('data', 'model'))`) and take `jax.grad` of "
        "the mean-squared error. Each device computes the gradient of its slice; the true "
        "gradient is their sum, so XLA inserts an all-reduce. Collectives in the compiled "
        f"gradient: **{fmt_counts(g_counts)}** (JAX), **{fmt_counts(mg_counts)}** (minijax, "
        "same call, same in_shardings). There are two weight gradients but XLA's "
        "all-reduce combiner may merge them into one tuple-shaped all-reduce, so the count can "
        "be lower than the number of parameters."
    )

    # ---------------------------------------------------------------- data-parallel training
    steps = 3 if quick else 10
    step_j = jax.jit(sgd_step(jax, loss_fn))
    step_m = minijax.jit(sgd_step(minijax, m_loss_fn))
    step_1 = minijax.jit(sgd_step(minijax, m_loss_fn))

    def train(step, put, params):
        losses = []
        xs, ys = put(x_np, batch_spec), put(y_np, batch_spec)
        params = tuple(put(p, None) for p in params)
        for _ in range(steps):
            loss, params = step(params, xs, ys)
            losses.append(float(loss))
        return losses, params, xs, ys

    batch_spec = ("data", "model")
    jput = lambda a, s: jax.device_put(a, NamedSharding(mesh_a, P() if s is None else P(s)))
    mput = lambda a, s: minijax.device_put(a, MNamedSharding(mmesh_a,
                                                             MP() if s is None else MP(s)))
    j_losses, j_params, jx, jy = train(step_j, jput, params_np)
    m_losses, m_params, mx, my = train(step_m, mput, params_np)
    u_losses, _, ux, uy = train(step_1, lambda a, s: minijax.device_put(a), params_np)
    res.check("data-parallel training: minijax losses equal JAX's", m_losses, j_losses,
              rtol=1e-5, atol=1e-6)
    res.check("data-parallel training: minijax losses equal the unsharded run", m_losses,
              u_losses, rtol=1e-5, atol=1e-6)
    res.check_true("data-parallel training: parameters stay replicated (P())",
                   all(str(p.sharding.spec) == "P()" for p in m_params))
    # per-step medians, like for like: inputs already on device, one step per call
    t_j, t_m = interleaved_ms(
        {"jax": lambda: jax.block_until_ready(step_j(j_params, jx, jy)),
         "minijax": lambda: minijax.block_until_ready(step_m(m_params, mx, my))},
        repeat=15 if quick else 90, warmup=1).values()
    res.timings_ms["data-parallel SGD step, JAX (8 devices)"] = t_j
    res.timings_ms["data-parallel SGD step, minijax (8 devices)"] = t_m
    res.sections.append(
        "### A data-parallel training step, minijax and JAX\n\n"
        f"`value_and_grad` of the MSE plus an SGD update, parameters replicated (`P()`), the "
        f"batch split over all eight devices (`P(('data', 'model'))`), {steps} steps:\n\n"
        + table(["step", "JAX loss", "minijax loss", "minijax, one device"],
                [[i, f"{a:.6f}", f"{b:.6f}", f"{c:.6f}"]
                 for i, (a, b, c) in enumerate(zip(j_losses, m_losses, u_losses))])
        + f"\n\nMedian time per step (inputs on device on both sides, the two measured in "
        f"alternating rounds): JAX {t_j:.3f} ms, "
        f"minijax {t_m:.3f} ms, ratio minijax/JAX **{t_m / t_j:.2f}** (same XLA program "
        "underneath, the same flops and one all-reduce on both sides; the eight CPU devices "
        "share this machine's cores, so the figure is noisy)."
    )

    # ---------------------------------------------------------------- training, three ways
    train_rows, time_rows = [], []
    u_step = minijax.jit(explicit_sgd_step(minijax, None))
    u_params = (minijax.device_put(w1_np), minijax.device_put(w2_np))
    ux, uy = minijax.device_put(x_np), minijax.device_put(y_np)
    u_losses = []
    for _ in range(steps):
        loss, u_params = u_step(u_params, ux, uy)
        u_losses.append(float(loss))
    for name, (xs, w1s, w2s, outs) in strategies.items():
        runs = {}
        for J, mesh, NS, PS in ((jax, mesh_e, NamedSharding, P),
                                (minijax, mmesh_e, MNamedSharding, MP)):
            put = lambda a, sp, J=J, mesh=mesh, NS=NS, PS=PS: J.device_put(a, NS(mesh, PS(*sp)))
            params, xa, ya = (put(w1_np, w1s), put(w2_np, w2s)), put(x_np, xs), put(y_np, outs)
            step = J.jit(explicit_sgd_step(J, NS(mesh, PS(*outs))))
            losses = []
            for _ in range(steps):
                loss, params = step(params, xa, ya)
                losses.append(float(loss))
            runs[J.__name__] = (losses, params, step, xa, ya)
        (jl, jp, jstep, jx_, jy_), (ml, mp, mstep, mx_, my_) = runs["jax"], runs["minijax"]
        res.check(f"{name} training (Explicit): minijax losses equal JAX's", ml, jl,
                  rtol=1e-5, atol=1e-6)
        res.check(f"{name} training (Explicit): minijax losses equal the unsharded run", ml,
                  u_losses, rtol=1e-4, atol=1e-5)
        res.check_true(f"{name} training (Explicit): parameters keep their types, as in JAX",
                       [str(minijax.typeof(p)) for p in mp] == [str(jax.typeof(p)) for p in jp])
        t_j, t_m = interleaved_ms(
            {"jax": lambda f=jstep, a=(jp, jx_, jy_): jax.block_until_ready(f(*a)),
             "minijax": lambda f=mstep, a=(mp, mx_, my_): minijax.block_until_ready(f(*a))},
            repeat=15 if quick else 90, warmup=1).values()
        res.timings_ms[f"{name} SGD step (Explicit), JAX"] = t_j
        res.timings_ms[f"{name} SGD step (Explicit), minijax"] = t_m
        train_rows.append([name, f"`{jax.typeof(jp[0])}`, `{jax.typeof(jp[1])}`",
                           f"{jl[-1]:.6f}", f"{ml[-1]:.6f}", f"{u_losses[-1]:.6f}"])
        time_rows.append([name, f"{t_j:.3f}", f"{t_m:.3f}", f"**{t_m / t_j:.2f}**"])
    res.sections.append(
        "### The MLP trained three ways (Explicit mode), minijax and JAX\n\n"
        f"The same SGD step ({steps} steps, `value_and_grad` of the MSE, the second matmul "
        "told its `out_sharding`), with the inputs laid out per strategy. The gradients come "
        "out with the parameters' types (each cotangent carries its primal's sharding), so the "
        "update keeps every parameter where it was. Final losses:\n\n"
        + table(["strategy", "parameter types", "JAX loss", "minijax loss",
                 "minijax, one device"], train_rows)
        + "\n\nMedian ms per step, like for like (inputs already on device on both sides, "
        "measured in alternating rounds; eight CPU devices share this machine's cores, so the "
        "numbers are noisy):\n\n"
        + table(["strategy", "JAX ms", "minijax ms", "minijax / JAX"], time_rows)
    )

    # ---------------------------------------------------------------- reshard / constraint
    moves = [(P("data", None), P()), (P("data", None), P(None, "model")),
             (P(), P("data", "model")), (P("data", "model"), P("model", "data"))]
    mv_rows = []
    with xla_log_lines(_REMAT_LOG) as remat_lines:
        for src, dst in moves:
            mv_rows.append(_move_row(res, src, dst, x_np, mesh_e, mesh_a, mmesh_e, mmesh_a))
    if remat_lines:
        print(f"   XLA logged {len(remat_lines)} '{_REMAT_LOG}' warnings while compiling "
              f"{_REMAT_MOVE}: expected, see the report's reshard section", flush=True)
    a = jax.device_put(x_np, NamedSharding(mesh_e, P("data")))
    kind, msg = catch(lambda: jax.jit(
        lambda t: jax.lax.with_sharding_constraint(t, NamedSharding(mesh_e, P("model"))))(a))
    res.check_true("Explicit mode: with_sharding_constraint to a different spec raises "
                   "ValueError", kind == "ValueError")
    ma = minijax.device_put(x_np, MNamedSharding(mmesh_e, MP("data")))
    mkind, mmsg = catch(lambda: minijax.jit(lambda t: minijax.lax.with_sharding_constraint(
        t, MNamedSharding(mmesh_e, MP("model"))))(ma))
    res.check_true("Explicit mode: minijax's with_sharding_constraint raises JAX's error",
                   (mkind, mmsg.split(" Got")[0]) == (kind, msg.split(" Got")[0]))
    res.sections.append(
        "### Changing layout inside a program: reshard and with_sharding_constraint\n\n"
        "`jax.sharding.reshard(x, spec)` (Explicit) changes the array's type to the new layout; "
        "`jax.lax.with_sharding_constraint(x, sharding)` (Auto) pins the layout of an "
        "intermediate and lets the partitioner work out the rest. Each row computes "
        "`cos(x)`, changes the layout, multiplies by 3:\n\n"
        + table(["move", "Explicit result type", "Explicit: collectives",
                 "minijax Explicit type", "minijax collectives",
                 "Auto result spec", "Auto: collectives", "minijax (Auto) spec",
                 "minijax collectives"], mv_rows)
        + "\n\nSplit to replicated needs an all-gather. `P('data', None)` to `P(None, 'model')` "
        "changes which mesh axis does the splitting, so XLA gathers the rows over `data` and "
        "each device then cuts out its columns locally (no second collective). "
        f"For this move XLA's partitioner logs `{_REMAT_LOG}` ({len(remat_lines)} times in "
        "this run, collected here instead of on the console): it finds no direct path from "
        "the one layout to the other, so it rebuilds the whole array on every device and "
        "slices it again, which is the all-gather in the table. It is expected, the same "
        "for JAX and minijax, and costs one array's worth of memory per device. Replicated to "
        "split needs no communication at all: each device keeps its slice. Swapping the two "
        "axes (`P('data','model')` to `P('model','data')`) makes devices trade pieces, which "
        "XLA does with an all-to-all plus a collective-permute. In Explicit mode "
        "`with_sharding_constraint` is only an assertion: asking it for a different layout "
        "fails, pointing you to `reshard`:\n\n"
        + code(f"{kind}: {msg}")
    )
    return res


_REMAT_LOG = "[SPMD] Involuntary full rematerialization"
_REMAT_MOVE = "P('data', None) -> P(None, 'model')"


def _move_row(res, src, dst, x_np, mesh_e, mesh_a, mmesh_e, mmesh_a) -> list[str]:
    """One layout move, in JAX and minijax, Explicit and Auto: checks into `res`, a row."""
    a = jax.device_put(x_np, NamedSharding(mesh_e, src))
    f = jax.jit(lambda t, dst=dst: reshard(jnp.cos(t), NamedSharding(mesh_e, dst)) * 3.0)
    out = f(a)
    ce = count_collectives(f.lower(a).compile().as_text())
    res.check(f"reshard {src} -> {dst}: values", out, np.cos(x_np) * 3.0,
              rtol=1e-6, atol=1e-6)
    res.check_true(f"reshard {src} -> {dst}: result has layout {dst}",
                   out.sharding.is_equivalent_to(NamedSharding(mesh_e, dst), out.ndim))
    ma = minijax.device_put(x_np, MNamedSharding(mmesh_e, mspec(src)))
    mf = minijax.jit(lambda t, dst=dst: minijax.sharding.reshard(
        mjnp.cos(t), MNamedSharding(mmesh_e, mspec(dst))) * 3.0)
    mout = mf(ma)
    mce = count_collectives(mf.lower(ma).compile().as_text())
    res.check(f"minijax reshard {src} -> {dst}: values equal JAX's", np.asarray(mout),
              np.asarray(out), rtol=1e-6, atol=1e-6)
    res.check_true(f"minijax reshard {src} -> {dst}: type, spec and collectives equal "
                   "JAX's", str(minijax.typeof(mout)) == str(jax.typeof(out))
                   and str(mout.sharding.spec) == str(out.sharding.spec) and mce == ce)
    b = jax.device_put(x_np, NamedSharding(mesh_a, src))
    g2 = jax.jit(lambda t, dst=dst: jax.lax.with_sharding_constraint(
        jnp.cos(t), NamedSharding(mesh_a, dst)) * 3.0)
    out2 = g2(b)
    ca = count_collectives(g2.lower(b).compile().as_text())
    res.check(f"with_sharding_constraint {src} -> {dst}: values", out2,
              np.cos(x_np) * 3.0, rtol=1e-6, atol=1e-6)
    mb = minijax.device_put(x_np, MNamedSharding(mmesh_a, mspec(src)))
    mg2 = minijax.jit(lambda t, dst=dst: minijax.lax.with_sharding_constraint(
        mjnp.cos(t), MNamedSharding(mmesh_a, mspec(dst))) * 3.0)
    mout2 = mg2(mb)
    mca = count_collectives(mg2.lower(mb).compile().as_text())
    res.check(f"minijax with_sharding_constraint {src} -> {dst}: values equal JAX's",
              np.asarray(mout2), np.asarray(out2), rtol=1e-6, atol=1e-6)
    res.check_true(f"minijax with_sharding_constraint {src} -> {dst}: spec and "
                   "collectives equal JAX's",
                   str(mout2.sharding.spec) == str(out2.sharding.spec) and mca == ca)
    return [f"`{src}` -> `{dst}`", f"`{jax.typeof(out)}`", fmt_counts(ce),
            f"`{minijax.typeof(mout)}`", fmt_counts(mce), f"`{out2.sharding.spec}`",
            fmt_counts(ca), f"`{mout2.sharding.spec}`", fmt_counts(mca)]
