"""Placement: where arrays live, and what `jit` does with that.

Runs minijax and JAX: one program, `observe(J)`, walks through the same steps with each module
and records what it saw (values, device ids, committed flags, types, error kinds and messages);
JAX's observations are checked against NumPy and the rules below, minijax's against JAX's.

* the eight (fake) CPU devices and the meshes built from them, including meshes of one device;
* committed versus uncommitted arrays: an array is *committed* once you have said where it must
  live (`device_put(x, device_or_sharding)`); otherwise it may be moved freely. `jit` runs on
  the devices of its committed arguments and pulls uncommitted ones along;
* `device_put` between single devices and between two meshes made of disjoint devices, in both
  the Explicit mesh mode (JAX 0.10's default: the sharding is part of the array's type) and the
  Auto mode (the sharding is a hint the compiler may override);
* what happens when committed arrays on different devices meet: both refuse rather than guess
  which copy to move. The error messages are recorded in the report.
"""

from __future__ import annotations

import re

import jax
import numpy as np

from compare._jax201 import catch, table, times_into
from compare._modules import MODULES
from compare._report import TopicResult, code


def _ids(arr) -> list[int]:
    return sorted(d.id for d in arr.devices())


def _where(arr) -> str:
    ids = _ids(arr)
    return f"devices {ids}" if len(ids) > 1 else f"device {ids[0]}"


def observe(J, n: int) -> dict:
    """Run the placement program with module `J`; returns what it saw, keyed by step."""
    jnp, S = J.numpy, J.sharding
    Explicit, Auto = S.AxisType.Explicit, S.AxisType.Auto
    P, Named = S.PartitionSpec, S.NamedSharding
    devs = J.devices()
    o: dict = {"n_devices": len(devs), "platform": devs[0].platform}
    mesh = J.make_mesh((2, 4), ("x", "y"))
    o["mesh_explicit"] = all(t == Explicit for t in mesh.axis_types)
    o["mesh_grid"] = np.vectorize(lambda d: d.id)(mesh.devices).tolist()
    o["mesh_text"] = str(mesh)
    one = J.make_mesh((1,), ("x",), devices=[devs[6]])
    a_np = np.arange(16, dtype=np.float32).reshape(4, 4)
    on_six = J.device_put(a_np, Named(one, P("x")))
    sq = J.jit(lambda q: q @ q)(on_six)
    o.update(one_mesh=str(one), one_value=np.asarray(sq), one_ids=_ids(sq),
             one_type=str(J.typeof(on_six)), one_replicated=on_six.sharding.is_fully_replicated,
             one_2d=[[d.id for d in row] for row in J.make_mesh((1, 1), ("a", "b")).devices])

    # committed vs uncommitted
    x = jnp.arange(n, dtype=jnp.float32)
    x_np = np.arange(n, dtype=np.float32)
    on3 = J.device_put(x, devs[3])
    add, double = J.jit(lambda a, b: a + b), J.jit(lambda a: 2 * a)
    rows = {"jnp.arange(n)": x, "device_put(numpy_array)": J.device_put(x_np),
            "device_put(x, devices()[3])": on3, "jit(2*a)(uncommitted x)": double(x),
            "jit(a+b)(uncommitted x, committed on3)": add(x, on3),
            "jit(a+b)(on3, numpy array)": add(on3, x_np), "eager on3 * x": on3 * x}
    if hasattr(J, "default_device"):
        with J.default_device(devs[5]):
            rows["jnp.ones(n) inside default_device(devices()[5])"] = jnp.ones(n)
            rows["jit(2*a)(numpy) inside default_device(5)"] = double(x_np)
    o["placed"] = {k: (_ids(v), bool(v.committed)) for k, v in rows.items()}
    o["placed_values"] = {k: np.asarray(v) for k, v in rows.items()}

    # device_put between places
    on1 = J.device_put(x, devs[1])
    moved = J.device_put(on1, devs[2])
    o["moved"] = (_ids(moved), bool(moved.committed), np.asarray(moved))
    mat_np = np.arange(8 * n, dtype=np.float32).reshape(8, n)
    o["meshes"] = {}
    for label, mode in (("Explicit", Explicit), ("Auto", Auto)):
        mesh_a = J.make_mesh((4,), ("i",), axis_types=(mode,), devices=devs[:4])
        mesh_b = J.make_mesh((2, 2), ("r", "c"), axis_types=(mode,) * 2, devices=devs[4:])
        on_a = J.device_put(mat_np, Named(mesh_a, P("i")))
        on_b = J.device_put(on_a, Named(mesh_b, P("c", "r")))
        to_one = J.device_put(on_b, S.SingleDeviceSharding(devs[7]))
        o["meshes"][label] = {
            "on_b": np.asarray(on_b), "ids_b": _ids(on_b), "to_one": np.asarray(to_one),
            "shards_ok": all(np.array_equal(np.asarray(s.data), mat_np[s.index])
                             for s in on_b.addressable_shards),
            "shard_shapes": sorted({tuple(s.data.shape) for s in on_b.addressable_shards}),
            "types": (str(J.typeof(on_a)), str(J.typeof(on_b)), str(J.typeof(to_one))),
            "specs": (str(on_a.sharding.spec), str(on_b.sharding.spec))}
        if mode == Explicit:
            o["timed"] = {
                "device_put mesh A (4 dev) -> mesh B (4 dev)":
                    lambda on_a=on_a, mesh_b=mesh_b: J.device_put(on_a, Named(mesh_b,
                                                                              P("c", "r"))),
                "device_put device 1 -> device 2": lambda: J.device_put(on1, devs[2]),
                "jit(a+b) on committed device-3 inputs": lambda: add(on3, on3)}

    # when committed arrays meet
    on2 = J.device_put(x, devs[2])
    errs = {"eager on1 + on2 (devices 1 and 2)": catch(lambda: on1 + on2),
            "jit(a+b)(on1, on2)": catch(lambda: add(on1, on2)),
            "1-device mesh on 6 + array on 3":
                catch(lambda: add(on_six, J.device_put(a_np, devs[3])))}
    o["fixed"] = {}
    for label, mode in (("Explicit", Explicit), ("Auto", Auto)):
        pa = J.device_put(x, Named(J.make_mesh((4,), ("i",), axis_types=(mode,),
                                               devices=devs[:4]), P("i")))
        pb = J.device_put(x, Named(J.make_mesh((4,), ("i",), axis_types=(mode,),
                                               devices=devs[4:]), P("i")))
        errs[f"{label}: mesh on 0-3 + mesh on 4-7"] = catch(lambda pa=pa, pb=pb: add(pa, pb))
        o["fixed"][label] = np.asarray(add(pa, J.device_put(pb, pa.sharding)))
    sq_np = np.arange(64, dtype=np.float32).reshape(8, 8)
    m8e = J.make_mesh((8,), ("i",))
    m8a = J.make_mesh((8,), ("i",), axis_types=(Auto,))
    rows_e, cols_e = (J.device_put(sq_np, Named(m8e, p)) for p in (P("i"), P(None, "i")))
    errs["Explicit: P('i') + P(None,'i') on one mesh"] = catch(lambda: add(rows_e, cols_e))
    rows_a, cols_a = (J.device_put(sq_np, Named(m8a, p)) for p in (P("i"), P(None, "i")))
    auto_sum = add(rows_a, cols_a)
    o["auto_sum"], o["auto_spec"] = np.asarray(auto_sum), str(auto_sum.sharding.spec)
    strict = J.jit(lambda a: a * 2, in_shardings=Named(m8a, P("i")))
    errs["jit(in_shardings=P('i')) given a committed P(None,'i') array"] = catch(
        lambda: strict(J.device_put(sq_np, Named(m8a, P(None, "i")))))
    o["strict_np"] = np.asarray(strict(sq_np))
    o["errors"] = errs
    return o


def _head(msg: str) -> str:
    """An error message's first sentence, without the argument names and shapes that follow
    (the part that should read the same in both modules)."""
    return re.split(r"[.:]\s", msg, maxsplit=1)[0]


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Placement: devices, meshes, committed arrays, device_put")
    res.chapter = "chapters/12-sharding.md"
    res.devices = jax.device_count()
    n = 64 if quick else 1024
    obs = {name: observe(J, n) for name, J in MODULES}
    jx, mj = obs["jax"], obs["minijax"]
    x_np = np.arange(n, dtype=np.float32)
    a_np = np.arange(16, dtype=np.float32).reshape(4, 4)
    mat_np = np.arange(8 * n, dtype=np.float32).reshape(8, n)
    sq_np = np.arange(64, dtype=np.float32).reshape(8, 8)

    _devices_and_meshes(res, jx, a_np, mj)

    _committed(res, n, x_np, jx, mj)

    _device_put_moves(res, jx, x_np, mj, mat_np, obs, quick)

    _committed_arrays_meet(res, jx, mj, x_np, sq_np, obs)
    return res


def _devices_and_meshes(res, jx, a_np, mj):
    """Devices and meshes: JAX's answers checked against what they must be, minijax's against
    JAX's, and the section."""
    with res.running("jax"):
        res.check_true("eight CPU devices", jx["n_devices"] == 8 and jx["platform"] == "cpu")
        res.check_true("make_mesh defaults to Explicit axes", jx["mesh_explicit"])
        res.check_true("mesh device grid is 2x4 and covers every device",
                       sorted(sum(jx["mesh_grid"], [])) == list(range(8)))
        res.check("single-device mesh: jit result", jx["one_value"], a_np @ a_np)
        res.check_true("single-device mesh: ran on device 6", jx["one_ids"] == [6])
        res.check_true("one-device NamedSharding counts as fully replicated",
                       jx["one_replicated"])
    with res.running("both"):
        for key in ("n_devices", "platform", "mesh_explicit", "mesh_grid", "mesh_text",
                    "one_mesh", "one_ids", "one_type", "one_replicated", "one_2d"):
            res.check_true(f"devices and meshes: minijax's {key} equals JAX's",
                           mj[key] == jx[key])
        res.check("single-device mesh: minijax's jit result equals JAX's", mj["one_value"],
                  jx["one_value"])
    res.sections.append(
        "### Devices and meshes\n\n"
        f"Both modules list {jx['n_devices']} CPU devices; they exist because "
        "`compare/__init__.py` sets `--xla_force_host_platform_device_count=8` before JAX "
        "starts. A mesh gives those devices a shape and axis names:\n\n"
        + code(f"make_mesh((2, 4), ('x', 'y'))\n-> {jx['mesh_text']}   (minijax: "
               f"{mj['mesh_text']})\ndevice ids: {jx['mesh_grid']}")
        + "\n\nIn JAX 0.10 `make_mesh` gives **Explicit** axes unless you ask otherwise. Meshes "
        "of a single device are legal and useful: they let code written for `NamedSharding` "
        "run unchanged on one chip. `make_mesh((1,), ('x',), devices=[devices()[6]])` is "
        f"`{jx['one_mesh']}`; an array put there has type `{jx['one_type']}` (minijax: "
        f"`{mj['one_type']}`; the `@x` says dimension 0 is split over axis `x`, which has one "
        f"device, so nothing is really split) and `jit` runs on device {jx['one_ids'][0]} "
        f"(minijax: device {mj['one_ids'][0]}). Without `devices=`, a (1, 1) mesh picks the "
        f"first device: `{jx['one_2d']}`."
    )


def _committed(res, n, x_np, jx, mj):
    """Where each expression's result lives and whether it is committed, in both modules, and
    the section."""
    want = {"jnp.arange(n)": ([0], False), "device_put(numpy_array)": ([0], False),
            "device_put(x, devices()[3])": ([3], True), "jit(2*a)(uncommitted x)": ([0], False),
            "jit(a+b)(uncommitted x, committed on3)": ([3], True),
            "jit(a+b)(on3, numpy array)": ([3], True), "eager on3 * x": ([3], True),
            "jnp.ones(n) inside default_device(devices()[5])": ([5], False),
            "jit(2*a)(numpy) inside default_device(5)": ([5], False)}
    values = {"jnp.arange(n)": x_np, "device_put(numpy_array)": x_np,
              "device_put(x, devices()[3])": x_np, "eager on3 * x": x_np * x_np,
              "jnp.ones(n) inside default_device(devices()[5])": np.ones(n, np.float32)}
    for what, (ids, committed) in jx["placed"].items():
        with res.running("jax"):
            res.check_true(f"{what}: on {want[what][0]}, committed={want[what][1]}",
                           (ids, committed) == want[what])
            res.check(f"{what}: values", jx["placed_values"][what],
                      values.get(what, 2 * x_np))
        if what in mj["placed"]:
            with res.running("both"):
                res.check_true(f"{what}: minijax places and commits as JAX",
                               mj["placed"][what] == (ids, committed),
                               known="minijax keeps jax_default_device's value but does not "
                               "model it yet (it warns so)" if "default_device" in what else "")
                res.check(f"{what}: minijax values equal JAX's", mj["placed_values"][what],
                          jx["placed_values"][what])
    jax_only = [w for w in jx["placed"] if w not in mj["placed"]]
    rows = [[w, f"device{'s' if len(ids) > 1 else ''} {ids}", c,
             "-" if w not in mj["placed"] else
             f"device{'s' if len(mj['placed'][w][0]) > 1 else ''} {mj['placed'][w][0]}, "
             f"{mj['placed'][w][1]}"] for w, (ids, c) in jx["placed"].items()]
    res.sections.append(
        "### Committed and uncommitted arrays\n\n"
        "An array is *committed* when the program has pinned it to a place. Uncommitted arrays "
        "(made by `jnp` functions or by `device_put` without a target) live on the default "
        "device but may be moved to wherever a computation needs them. The rule `jit` follows: "
        "run where the committed arguments are, bring the uncommitted ones there, and commit "
        "the result only if some input was committed.\n\n"
        + table(["expression", "JAX: where the result lives", "JAX: committed",
                 "minijax: where, committed"], rows)
        + "\n\n`jax.default_device` changes where *uncommitted* work goes without committing "
        "anything, so later code can still move those arrays. minijax accepts "
        "`default_device` but does not model it yet: its rows show minijax's default device "
        "(the checks mark that as a KNOWN difference)."
        + (f" minijax has no `default_device` yet: {len(jax_only)} rows above run under JAX "
           "only." if jax_only else "")
    )


def _device_put_moves(res, jx, x_np, mj, mat_np, obs, quick):
    """device_put between devices and between meshes (Explicit and Auto), checks, timings and
    the section."""
    with res.running("jax"):
        res.check_true("device_put device 1 -> device 2",
                       jx["moved"][:2] == ([2], True))
        res.check("device_put keeps the values", jx["moved"][2], x_np)
    with res.running("both"):
        res.check_true("device_put device 1 -> device 2: minijax places as JAX",
                       mj["moved"][:2] == jx["moved"][:2])
        res.check("device_put device 1 -> device 2: minijax values equal JAX's",
                  mj["moved"][2], jx["moved"][2])
    lines = []
    for label in ("Explicit", "Auto"):
        j, m = jx["meshes"][label], mj["meshes"][label]
        with res.running("jax"):
            res.check(f"{label}: mesh A -> mesh B keeps values", j["on_b"], mat_np)
            res.check_true(f"{label}: mesh B array lives on devices 4-7",
                           j["ids_b"] == [4, 5, 6, 7])
            res.check_true(f"{label}: shards sit where the spec says", j["shards_ok"])
            res.check(f"{label}: gather to one device keeps values", j["to_one"], mat_np)
        with res.running("both"):
            res.check(f"{label}: minijax's mesh A -> mesh B equals JAX's", m["on_b"], j["on_b"])
            res.check_true(f"{label}: minijax's devices, shards, types and specs equal JAX's",
                           all(m[k] == j[k] for k in ("ids_b", "shards_ok", "shard_shapes",
                                                      "types", "specs")))
            res.check(f"{label}: minijax's gather to one device equals JAX's", m["to_one"],
                      j["to_one"])
        a, b, one = j["types"]
        lines.append(f"[{label}] on mesh A: type {a}  spec {j['specs'][0]}\n"
                     f"[{label}] on mesh B: type {b}  spec {j['specs'][1]}  "
                     f"shard shapes {j['shard_shapes']}\n[{label}] on device 7: type {one}")
    for what in jx["timed"]:
        times_into(res, {f"{what}: {name}": obs[name]["timed"][what] for name, _ in MODULES},
                   quick)
    res.sections.append(
        "### Moving arrays with device_put\n\n"
        "`device_put` copies between any two placements: device to device, mesh to mesh "
        "(here mesh A = devices 0-3 and mesh B = devices 4-7, a different shape and spec), and "
        "back to a single device. The values never change; only the layout does. What JAX "
        "printed (minijax's types and specs are checked equal above):\n\n"
        + code("\n".join(lines))
        + "\n\nThe difference between the two mesh modes shows up in the *type*: with Explicit "
        "axes the sharding is written into the array type (`f32[8@i,...]`), so tracing code "
        "can see it and shape rules check it; with Auto axes the type is plain `f32[8,...]` and "
        "the sharding is only a property of the runtime value. The timings are interleaved, "
        "module by module, round by round."
    )


def _committed_arrays_meet(res, jx, mj, x_np, sq_np, obs):
    """Committed arrays on different places meeting in one computation: the errors both modules
    raise, the fixes, and the section."""
    expected = {"Explicit: P('i') + P(None,'i') on one mesh": "ShardingTypeError"}
    for what, (kind, msg) in jx["errors"].items():
        want_kind = expected.get(what, "ValueError")
        mkind, mmsg = mj["errors"][what]
        with res.running("jax"):
            res.check_true(f"{what}: raises {want_kind}", kind == want_kind)
        with res.running("both"):
            res.check_true(f"{what}: minijax raises JAX's error, same first words",
                           mkind == kind and _head(mmsg) == _head(msg))
    for label in ("Explicit", "Auto"):
        with res.running("jax"):
            res.check(f"{label}: after device_put onto one mesh it works",
                      jx["fixed"][label], 2 * x_np)
        res.check(f"{label}: after device_put onto one mesh, minijax equals JAX",
                  mj["fixed"][label], jx["fixed"][label])
    with res.running("jax"):
        res.check("Auto: rows-sharded + cols-sharded computes", jx["auto_sum"], 2 * sq_np)
        res.check("uncommitted input is moved to in_shardings", jx["strict_np"], 2 * sq_np)
    with res.running("both"):
        res.check("Auto: rows + cols, minijax equals JAX", mj["auto_sum"], jx["auto_sum"])
        res.check_true("Auto: rows + cols, minijax's result spec equals JAX's",
                       mj["auto_spec"] == jx["auto_spec"])
        res.check("uncommitted input moved to in_shardings: minijax equals JAX",
                  mj["strict_np"], jx["strict_np"])
    res.extra["placement_errors"] = {name: {w: f"{k}: {m}" if k else m
                                            for w, (k, m) in obs[name]["errors"].items()}
                                     for name, _ in MODULES}
    body = "\n\n".join(f"**{w}** -> `{k or 'no error'}`\n\n" + code(f"JAX:     {m}\nminijax: "
                                                                   f"{mj['errors'][w][1]}")
                       for w, (k, m) in jx["errors"].items())
    res.sections.append(
        "### When committed arrays on different devices meet\n\n"
        "Committed means *the user chose this place*, so neither module will silently pick "
        "one argument and copy it to the other's device: mixing committed arrays from "
        "different devices (or from meshes over different devices) is an error, in eager code "
        "and under `jit` alike, and the fix is an explicit `device_put`. The same strictness "
        "applies when a committed argument contradicts `jit(in_shardings=...)`; an uncommitted "
        "one is simply moved. With Explicit axes even two layouts on the *same* mesh can "
        "clash, because the result type would need `i` on two dimensions at once; with Auto "
        f"axes the compiler picks a layout (result spec `{jx['auto_spec']}`) and inserts the "
        "communication itself. Messages as raised:\n\n" + body
    )
