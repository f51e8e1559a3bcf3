"""Placement: where arrays live, and what `jit` does with that.

Real JAX only. The program walks through:

* the eight (fake) CPU devices and the meshes built from them, including meshes of one device;
* committed versus uncommitted arrays: an array is *committed* once you have said where it must
  live (`jax.device_put(x, device_or_sharding)`); otherwise JAX may move it freely. `jit` runs
  on the devices of its committed arguments and pulls uncommitted ones along;
* `jax.device_put` between single devices and between two meshes made of disjoint devices, in
  both the Explicit mesh mode (JAX 0.10's default: the sharding is part of the array's type) and
  the Auto mode (the sharding is a hint the compiler may override);
* what happens when committed arrays on different devices meet: JAX refuses rather than
  guessing which copy to move. The error messages are recorded in the report.

Every numeric result is checked against NumPy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from compare._jax201 import catch, table, time_into
from compare._report import TopicResult, code


def _ids(arr) -> list[int]:
    return sorted(d.id for d in arr.devices())


def _where(arr) -> str:
    ids = _ids(arr)
    return f"devices {ids}" if len(ids) > 1 else f"device {ids[0]}"


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Placement: devices, meshes, committed arrays, device_put")
    res.chapter = "chapters/11-aot-async-benchmarking.md"
    devs = jax.devices()
    res.devices = jax.device_count()
    n = 64 if quick else 1024

    # ---------------------------------------------------------------- devices and meshes
    res.check_true("eight CPU devices", len(devs) == 8 and devs[0].platform == "cpu")
    mesh = jax.make_mesh((2, 4), ("x", "y"))
    mesh_auto = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    res.check_true("make_mesh defaults to Explicit axes",
                   all(t == AxisType.Explicit for t in mesh.axis_types))
    res.check_true("mesh device grid is 2x4 and covers every device",
                   mesh.devices.shape == (2, 4)
                   and sorted(d.id for d in mesh.devices.flat) == list(range(8)))
    one = jax.make_mesh((1,), ("x",), devices=[devs[6]])
    one_2d = jax.make_mesh((1, 1), ("a", "b"))
    a_np = np.arange(16, dtype=np.float32).reshape(4, 4)
    on_six = jax.device_put(a_np, NamedSharding(one, P("x")))
    sq = jax.jit(lambda q: q @ q)(on_six)
    res.check("single-device mesh: jit result", sq, a_np @ a_np)
    res.check_true("single-device mesh: ran on device 6", _ids(sq) == [6])
    res.check_true("one-device NamedSharding counts as fully replicated",
                   on_six.sharding.is_fully_replicated)
    res.sections.append(
        "### Devices and meshes\n\n"
        f"`jax.devices()` lists {len(devs)} CPU devices (`{devs[0]}` ... `{devs[-1]}`); they "
        "exist because `compare/__init__.py` sets `--xla_force_host_platform_device_count=8` "
        "before JAX starts. A mesh gives those devices a shape and axis names:\n\n"
        + code(f"jax.make_mesh((2, 4), ('x', 'y'))\n-> {mesh}\n"
               f"device ids:\n{np.vectorize(lambda d: d.id)(mesh.devices)}\n"
               f"with axis_types=(Auto, Auto):\n-> {mesh_auto}")
        + "\n\nIn JAX 0.10 `make_mesh` gives **Explicit** axes unless you ask otherwise. Meshes "
        "of a single device are legal and useful: they let code written for `NamedSharding` "
        "run unchanged on one chip. "
        f"`jax.make_mesh((1,), ('x',), devices=[jax.devices()[6]])` is `{one}`; an array put "
        f"there has type `{jax.typeof(on_six)}` (the `@x` says dimension 0 is split over "
        "axis `x`, which has one device, so nothing is really split) and `jit` runs on "
        f"{_where(sq)}. "
        f"Without `devices=`, a (1, 1) mesh picks the first device: `{one_2d.devices.tolist()}`."
    )

    # ---------------------------------------------------------------- committed vs uncommitted
    x = jnp.arange(n, dtype=jnp.float32)
    x_np = np.arange(n, dtype=np.float32)
    put_plain = jax.device_put(x_np)
    on3 = jax.device_put(x, devs[3])
    add = jax.jit(lambda a, b: a + b)
    double = jax.jit(lambda a: 2 * a)
    r_unc = double(x)
    r_mixed = add(x, on3)
    r_np = add(on3, x_np)
    r_eager = on3 * x
    with jax.default_device(devs[5]):
        made_in_ctx = jnp.ones(n)
        jit_in_ctx = double(x_np)
    rows = [
        ["jnp.arange(n)", _where(x), x.committed],
        ["jax.device_put(numpy_array)", _where(put_plain), put_plain.committed],
        ["jax.device_put(x, devices()[3])", _where(on3), on3.committed],
        ["jit(2*a)(uncommitted x)", _where(r_unc), r_unc.committed],
        ["jit(a+b)(uncommitted x, committed on3)", _where(r_mixed), r_mixed.committed],
        ["jit(a+b)(on3, numpy array)", _where(r_np), r_np.committed],
        ["eager on3 * x", _where(r_eager), r_eager.committed],
        ["jnp.ones(n) inside jax.default_device(devices()[5])", _where(made_in_ctx),
         made_in_ctx.committed],
        ["jit(2*a)(numpy) inside default_device(5)", _where(jit_in_ctx), jit_in_ctx.committed],
    ]
    res.check_true("jnp.arange is uncommitted", not x.committed)
    res.check_true("device_put without a target stays uncommitted", not put_plain.committed)
    res.check_true("device_put to a device commits", on3.committed and _ids(on3) == [3])
    res.check_true("jit of uncommitted input: default device, uncommitted",
                   _ids(r_unc) == [0] and not r_unc.committed)
    res.check_true("jit follows the committed argument",
                   _ids(r_mixed) == [3] and r_mixed.committed and _ids(r_np) == [3])
    res.check_true("eager op follows the committed argument", _ids(r_eager) == [3])
    res.check_true("default_device moves uncommitted work",
                   _ids(made_in_ctx) == [5] and _ids(jit_in_ctx) == [5]
                   and not jit_in_ctx.committed)
    res.check("values: jit(2*a)", r_unc, 2 * x_np)
    res.check("values: committed + uncommitted", r_mixed, 2 * x_np)
    res.check("values: default_device jit", jit_in_ctx, 2 * x_np)
    res.sections.append(
        "### Committed and uncommitted arrays\n\n"
        "An array is *committed* when the program has pinned it to a place. Uncommitted arrays "
        "(made by `jnp` functions or by `device_put` without a target) live on the default "
        "device but may be moved to wherever a computation needs them. The rule `jit` follows: "
        "run where the committed arguments are, bring the uncommitted ones there, and commit "
        "the result only if some input was committed.\n\n"
        + table(["expression", "where the result lives", "committed"], rows)
        + "\n\nNotice the last two rows: `jax.default_device` changes where *uncommitted* work "
        "goes without committing anything, so later code can still move those arrays."
    )

    # ---------------------------------------------------------------- device_put between places
    on1 = jax.device_put(x, devs[1])
    moved = jax.device_put(on1, devs[2])
    res.check_true("device_put device 1 -> device 2", _ids(moved) == [2] and moved.committed)
    res.check("device_put keeps the values", moved, x_np)
    mat_np = np.arange(8 * n, dtype=np.float32).reshape(8, n)
    lines = []
    for label, mode in (("Explicit", AxisType.Explicit), ("Auto", AxisType.Auto)):
        mesh_a = jax.make_mesh((4,), ("i",), axis_types=(mode,), devices=devs[:4])
        mesh_b = jax.make_mesh((2, 2), ("r", "c"), axis_types=(mode,) * 2, devices=devs[4:])
        on_a = jax.device_put(mat_np, NamedSharding(mesh_a, P("i")))
        on_b = jax.device_put(on_a, NamedSharding(mesh_b, P("c", "r")))
        to_one = jax.device_put(on_b, SingleDeviceSharding(devs[7]))
        res.check(f"{label}: mesh A -> mesh B keeps values", on_b, mat_np)
        res.check_true(f"{label}: mesh B array lives on devices 4-7", _ids(on_b) == [4, 5, 6, 7])
        res.check_true(f"{label}: shards sit where the spec says",
                       all(np.array_equal(np.asarray(s.data), mat_np[s.index])
                           for s in on_b.addressable_shards))
        res.check(f"{label}: gather to one device keeps values", to_one, mat_np)
        shard_shapes = sorted({s.data.shape for s in on_b.addressable_shards})
        lines.append(
            f"[{label}] on mesh A: type {jax.typeof(on_a)}  spec {on_a.sharding.spec}\n"
            f"[{label}] on mesh B: type {jax.typeof(on_b)}  spec {on_b.sharding.spec}  "
            f"shard shapes {shard_shapes}\n"
            f"[{label}] on device 7: type {jax.typeof(to_one)}"
        )
        if mode == AxisType.Explicit:
            time_into(res, "device_put mesh A (4 dev) -> mesh B (4 dev)",
                      lambda on_a=on_a, mesh_b=mesh_b:
                      jax.device_put(on_a, NamedSharding(mesh_b, P("c", "r"))), quick)
    time_into(res, "device_put device 1 -> device 2", lambda: jax.device_put(on1, devs[2]), quick)
    time_into(res, "jit(a+b) on committed device-3 inputs", lambda: add(on3, on3), quick)
    res.sections.append(
        "### Moving arrays with device_put\n\n"
        "`jax.device_put` copies between any two placements: device to device, mesh to mesh "
        "(here mesh A = devices 0-3 and mesh B = devices 4-7, a different shape and spec), and "
        "back to a single device. The values never change; only the layout does.\n\n"
        + code("\n".join(lines))
        + "\n\nThe difference between the two mesh modes shows up in the *type*: with Explicit "
        "axes the sharding is written into the array type (`f32[8@i,...]`), so tracing code "
        "can see it and shape rules check it; with Auto axes the type is plain `f32[8,...]` and "
        "the sharding is only a property of the runtime value."
    )

    # ---------------------------------------------------------------- when committed arrays meet
    on2 = jax.device_put(x, devs[2])
    errs = []
    kind, msg = catch(lambda: on1 + on2)
    res.check_true("eager op on device 1 + device 2 raises ValueError", kind == "ValueError")
    errs.append(("eager on1 + on2 (devices 1 and 2)", kind, msg))
    kind, msg = catch(lambda: add(on1, on2))
    res.check_true("jit on device 1 + device 2 raises ValueError", kind == "ValueError")
    errs.append(("jit(a+b)(on1, on2)", kind, msg))
    kind, msg = catch(lambda: add(on_six, jax.device_put(a_np, devs[3])))
    res.check_true("single-device mesh (dev 6) + device 3 raises ValueError",
                   kind == "ValueError")
    errs.append(("1-device mesh on 6 + array on 3", kind, msg))
    for label, mode in (("Explicit", AxisType.Explicit), ("Auto", AxisType.Auto)):
        ma = jax.make_mesh((4,), ("i",), axis_types=(mode,), devices=devs[:4])
        mb = jax.make_mesh((4,), ("i",), axis_types=(mode,), devices=devs[4:])
        pa = jax.device_put(x, NamedSharding(ma, P("i")))
        pb = jax.device_put(x, NamedSharding(mb, P("i")))
        kind, msg = catch(lambda pa=pa, pb=pb: add(pa, pb))
        res.check_true(f"{label}: arrays on disjoint meshes raise ValueError",
                       kind == "ValueError")
        errs.append((f"{label}: mesh on 0-3 + mesh on 4-7", kind, msg))
        fixed = add(pa, jax.device_put(pb, pa.sharding))
        res.check(f"{label}: after device_put onto one mesh it works", fixed, 2 * x_np)
    # Same devices, conflicting specs: Explicit refuses, Auto lets the compiler choose.
    m8e = jax.make_mesh((8,), ("i",))
    m8a = jax.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,))
    sq_np = np.arange(64, dtype=np.float32).reshape(8, 8)
    for label, m8 in (("Explicit", m8e), ("Auto", m8a)):
        rows_ = jax.device_put(sq_np, NamedSharding(m8, P("i")))
        cols_ = jax.device_put(sq_np, NamedSharding(m8, P(None, "i")))
        kind, msg = catch(lambda r=rows_, c=cols_: add(r, c))
        if label == "Explicit":
            res.check_true("Explicit: rows-sharded + cols-sharded is a type error "
                           "(ShardingTypeError)", kind == "ShardingTypeError")
            errs.append(("Explicit: P('i') + P(None,'i') on one mesh", kind, msg))
        else:
            out = add(rows_, cols_)
            res.check("Auto: rows-sharded + cols-sharded computes", out, 2 * sq_np)
            errs.append(("Auto: P('i') + P(None,'i') on one mesh", None,
                         f"ok, result spec {out.sharding.spec}"))
    strict = jax.jit(lambda a: a * 2, in_shardings=NamedSharding(m8a, P("i")))
    kind, msg = catch(lambda: strict(jax.device_put(sq_np, NamedSharding(m8a, P(None, "i")))))
    res.check_true("committed input that contradicts in_shardings raises ValueError",
                   kind == "ValueError")
    errs.append(("jit(in_shardings=P('i')) given a committed P(None,'i') array", kind, msg))
    res.check("uncommitted input is moved to in_shardings", strict(sq_np), 2 * sq_np)
    res.extra["placement_errors"] = {w: f"{k}: {m}" if k else m for w, k, m in errs}
    body = "\n\n".join(f"**{w}** -> `{k or 'no error'}`\n\n" + code(m) for w, k, m in errs)
    res.sections.append(
        "### When committed arrays on different devices meet\n\n"
        "Committed means *the user chose this place*, so JAX will not silently pick one "
        "argument and copy it to the other's device: mixing committed arrays from different "
        "devices (or from meshes over different devices) is an error, in eager code and under "
        "`jit` alike, and the fix is an explicit `device_put`. The same strictness applies when "
        "a committed argument contradicts `jit(in_shardings=...)`; an uncommitted one is simply "
        "moved. With Explicit axes even two layouts on the *same* mesh can clash, because the "
        "result type would need `i` on two dimensions at once; with Auto axes the compiler "
        "picks a layout and inserts the communication itself. Messages as raised:\n\n" + body
    )
    return res
