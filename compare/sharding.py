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

Every sharded result is compared with the same function run unsharded on one device. Each
part is written once over a module argument `J` and run under both (`compare/_modules.py:
MODULES`); its checks and its section of the report are written separately, from the two runs.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import minijax
from compare._jax201 import (
    catch,
    collective_lines,
    count_collectives,
    fmt_counts,
    table,
    time_into,
    times_into,
)
from compare._modules import MODULES
from compare._report import TopicResult, code, interleaved_ms, xla_log_lines

AXES = ("data", "model")
MODES = ("Explicit", "Auto")
# The specs are written with JAX's PartitionSpec; each module builds its own (`sharding`).
SPECS = (P(), P("data"), P(None, "model"), P("data", "model"), P(("data", "model")),
         P("model", "data"))
PICTURED = (P("data", "model"), P("model", "data"), P(None, "model"))
STRATEGIES = {
    # name: (x spec, w1 spec, w2 spec, out spec needed in Explicit mode)
    "data parallel": (P("data"), P(), P(), P("data", None)),
    "model parallel": (P(), P(None, "model"), P("model", None), P(None, None)),
    "2D (data x model)": (P("data"), P(None, "model"), P("model", None), P("data", None)),
}
MOVES = ((P("data", None), P()), (P("data", None), P(None, "model")),
         (P(), P("data", "model")), (P("data", "model"), P("model", "data")))
BATCH = P(("data", "model"))  # the batch split over all eight devices
_REMAT_LOG = "[SPMD] Involuntary full rematerialization"
_REMAT_MOVE = "P('data', None) -> P(None, 'model')"


def mlp(J, params, x, out_sharding=None):
    """Two dense layers with a ReLU between them, in module J. `out_sharding` only matters in
    Explicit mode."""
    w1, w2 = params
    return J.numpy.matmul(J.numpy.maximum(x @ w1, 0.0), w2, out_sharding=out_sharding)


def loss_fn(J, out_sharding=None):
    """The MLP's mean squared error in module J, a function of (params, x, y)."""
    return lambda params, x, y: J.numpy.mean((mlp(J, params, x, out_sharding) - y) ** 2)


def sgd_step(J, loss):
    """One SGD step of `loss` in module J: returns (loss, new params)."""
    def step(params, x, y):
        val, grads = J.value_and_grad(loss)(params, x, y)
        return val, J.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return step


def meshes(J) -> dict[str, Any]:
    """Module J's 2 x 4 mesh (`data` = 2, `model` = 4) in each mode; Explicit is the default."""
    auto = (J.sharding.AxisType.Auto,) * 2
    return {"Explicit": J.make_mesh((2, 4), AXES),
            "Auto": J.make_mesh((2, 4), AXES, axis_types=auto)}


def sharding(J, mesh, spec):
    """Module J's NamedSharding of `spec` (a JAX PartitionSpec) on `mesh`."""
    return J.NamedSharding(mesh, J.P(*spec))


def put(J, mesh, a, spec):
    return J.device_put(a, sharding(J, mesh, spec))


def shard_layout(arr) -> list:
    """(device id, index as (start, stop) pairs) per shard, sorted: comparable across modules."""
    return sorted((s.device.id, tuple((sl.start, sl.stop) for sl in s.index))
                  for s in arr.addressable_shards)


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


@dataclasses.dataclass
class Inputs:
    """The MLP's batch and weights (NumPy float32), the same for every part and module."""
    x: np.ndarray
    y: np.ndarray
    w1: np.ndarray
    w2: np.ndarray

    @classmethod
    def make(cls, quick: bool) -> "Inputs":
        B, D, H, O = (16, 32, 64, 16) if quick else (256, 512, 1024, 256)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((B, D), dtype=np.float32)
        y = rng.standard_normal((B, O), dtype=np.float32)
        w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
        w2 = (rng.standard_normal((H, O)) / np.sqrt(H)).astype(np.float32)
        return cls(x, y, w1, w2)

    @property
    def params(self) -> tuple[np.ndarray, np.ndarray]:
        return (self.w1, self.w2)


# ------------------------------------------------------------------ the programs, over J
def put_shards(J, mesh, x) -> dict:
    """`x` put on `mesh` under each spec of SPECS."""
    return {spec: put(J, mesh, x, spec) for spec in SPECS}


def jit_in_out(J, mesh, x) -> dict:
    """`sin(x) * 2` under jit, in_shardings P('data'), out_shardings P(None, 'model'): the
    result, the compiled HLO and the lowered module's text."""
    f = J.jit(lambda a: J.numpy.sin(a) * 2.0, in_shardings=sharding(J, mesh, P("data")),
              out_shardings=sharding(J, mesh, P(None, "model")))
    out = f(x)
    lowered = f.lower(x)
    return {"out": out, "hlo": lowered.compile().as_text(), "text": lowered.as_text()}


def mlp_forward(J, mesh, mode: str, strategy: str, inp: Inputs) -> dict:
    """The MLP's forward with the inputs laid out per `strategy`: the result, its compiled
    program and collectives, the call (`fn`, `args`), and in Explicit mode the error raised
    without `out_sharding` (`error`: (type name, message) or (None, ""))."""
    xs, w1s, w2s, outs = STRATEGIES[strategy]
    args = ((put(J, mesh, inp.w1, w1s), put(J, mesh, inp.w2, w2s)), put(J, mesh, inp.x, xs))
    error: tuple = (None, "")
    if mode == "Explicit":
        error = catch(lambda: J.jit(lambda p, a: mlp(J, p, a))(*args))
        fn = J.jit(lambda p, a: mlp(J, p, a, sharding(J, mesh, outs)))
    else:
        fn = J.jit(lambda p, a: mlp(J, p, a))
    compiled = fn.lower(*args).compile()
    return {"out": fn(*args), "compiled": compiled,
            "counts": count_collectives(compiled.as_text()), "fn": fn, "args": args,
            "error": error}


def dp_grad(J, mesh, inp: Inputs) -> dict:
    """The MSE's gradient under jit, parameters replicated, the batch over all devices."""
    rep, batch = sharding(J, mesh, P()), sharding(J, mesh, BATCH)
    fn = J.jit(J.grad(loss_fn(J)), in_shardings=((rep, rep), batch, batch))
    args = (inp.params, inp.x, inp.y)
    return {"grad": fn(*args), "counts": count_collectives(fn.lower(*args).compile().as_text()),
            "fn": fn, "args": args}


def train(J, step, params, x, y, steps: int) -> dict:
    """`steps` calls of `step`: the losses, and the last call's arguments (for timing)."""
    losses = []
    for _ in range(steps):
        loss, params = step(params, x, y)
        losses.append(float(loss))
    return {"losses": losses, "params": params, "step": step, "args": (params, x, y)}


def dp_train(J, mesh, inp: Inputs, steps: int) -> dict:
    """SGD on the MLP, parameters replicated, the batch split over all eight devices; on one
    device when `mesh` is None."""
    place = (lambda a, spec: J.device_put(a)) if mesh is None else \
        (lambda a, spec: put(J, mesh, a, spec))
    params = tuple(place(p, P()) for p in inp.params)
    return train(J, J.jit(sgd_step(J, loss_fn(J))), params, place(inp.x, BATCH),
                 place(inp.y, BATCH), steps)


def explicit_train(J, mesh, strategy: str, inp: Inputs, steps: int) -> dict:
    """SGD on the MLP laid out per `strategy` on an Explicit mesh, the second matmul told its
    `out_sharding`."""
    xs, w1s, w2s, outs = STRATEGIES[strategy]
    params = (put(J, mesh, inp.w1, w1s), put(J, mesh, inp.w2, w2s))
    step = J.jit(sgd_step(J, loss_fn(J, sharding(J, mesh, outs))))
    return train(J, step, params, put(J, mesh, inp.x, xs), put(J, mesh, inp.y, outs), steps)


def move(J, mesh: dict, src, dst, x) -> dict:
    """`cos(x) * 3` with the layout changed from `src` to `dst` in between: by `reshard`
    (Explicit) and by `with_sharding_constraint` (Auto); results and collectives."""
    e, a = mesh["Explicit"], mesh["Auto"]
    f = J.jit(lambda t: J.sharding.reshard(J.numpy.cos(t), sharding(J, e, dst)) * 3.0)
    g = J.jit(lambda t: J.lax.with_sharding_constraint(J.numpy.cos(t),
                                                       sharding(J, a, dst)) * 3.0)
    xe, xa = put(J, e, x, src), put(J, a, x, src)
    return {"reshard": f(xe), "reshard_counts": count_collectives(f.lower(xe).compile().as_text()),
            "constraint": g(xa),
            "constraint_counts": count_collectives(g.lower(xa).compile().as_text())}


def constraint_error(J, mesh, x) -> tuple:
    """In Explicit mode, with_sharding_constraint to another layout than the input's: the
    error raised, (type name, message)."""
    a = put(J, mesh, x, P("data"))
    return catch(lambda: J.jit(
        lambda t: J.lax.with_sharding_constraint(t, sharding(J, mesh, P("model"))))(a))


# ------------------------------------------------------------------ checks, from both runs
def check_shards(res: TopicResult, got: dict, x) -> tuple[list, list]:
    """minijax's shards against JAX's; JAX's bytes per device against the arithmetic. Returns
    the table's rows and the pictures of who holds what."""
    rows, pictures = [], []
    for spec in SPECS:
        arr, marr = got["jax"][spec], got["minijax"][spec]
        res.check(f"{spec}: minijax shards reassemble to the array", np.asarray(marr), x)
        res.check_true(f"{spec}: minijax puts the same blocks on the same devices as JAX",
                       shard_layout(marr) == shard_layout(arr)
                       and str(marr.sharding.spec) == str(arr.sharding.spec))
        res.check_true(f"{spec}: minijax's type equals JAX's ({jax.typeof(arr)})",
                       str(minijax.typeof(marr)) == str(jax.typeof(arr)))
        per_dev = {s.device.id: s.data.nbytes for s in arr.addressable_shards}
        distinct = len({tuple((sl.start, sl.stop) for sl in s.index)
                        for s in arr.addressable_shards})
        copies = len(per_dev) // distinct
        res.check(f"{spec}: shards reassemble to the array", arr, x)
        res.check_true(f"{spec}: bytes per device = total / number of distinct shards",
                       all(b == x.nbytes // distinct for b in per_dev.values()))
        res.check_true(f"{spec}: sum over devices = total x replication",
                       sum(per_dev.values()) == x.nbytes * copies)
        rows.append([f"`{spec}`", f"`{jax.typeof(arr)}`", arr.addressable_shards[0].data.shape,
                     per_dev[0], sum(per_dev.values()), copies])
        if spec in PICTURED:
            pictures.append(f"{spec}: device ids per block of x[{x.shape[0]},{x.shape[1]}]\n"
                            f"{tile_map(arr)}")
    return rows, pictures


def check_jit(res: TopicResult, got: dict, x) -> list:
    """jit with in/out shardings, per mode: JAX's values and layout, minijax's against JAX's.
    Returns the table's rows."""
    rows = []
    for mode in MODES:
        j, m = got["jax"][mode], got["minijax"][mode]
        res.check(f"{mode}: jit with in/out shardings matches", j["out"], np.sin(x) * 2.0,
                  rtol=1e-6, atol=1e-6)
        res.check_true(f"{mode}: output has the requested sharding",
                       j["out"].sharding.spec == P(None, "model"))
        res.check(f"{mode}: minijax jit with in/out shardings matches JAX", np.asarray(m["out"]),
                  np.asarray(j["out"]), rtol=1e-6, atol=1e-6)
        res.check_true(f"{mode}: minijax output spec and shards equal JAX's",
                       str(m["out"].sharding.spec) == str(j["out"].sharding.spec)
                       and shard_layout(m["out"]) == shard_layout(j["out"]))
        res.check_true(f"{mode}: minijax's compiled program has JAX's collectives",
                       count_collectives(m["hlo"]) == count_collectives(j["hlo"]))
        rows.append([mode, f"`{jax.typeof(j['out'])}`", f"`{j['out'].sharding.spec}`",
                     fmt_counts(count_collectives(j["hlo"])), f"`{m['out'].sharding.spec}`",
                     fmt_counts(count_collectives(m["hlo"]))])
    return rows


def check_mlp(res: TopicResult, got: dict, ref_fwd) -> list:
    """Each strategy and mode: both modules' forward against the one-device run, minijax's
    layout, type, collectives and Explicit-mode error against JAX's; the collectives JAX's
    partitioner must insert. Returns the table's rows."""
    rows = []
    for name in STRATEGIES:
        for mode in MODES:
            j, m = got["jax"][name, mode], got["minijax"][name, mode]
            kind, msg = j["error"]
            res.check(f"{name} [{mode}]: output equals unsharded run", j["out"], ref_fwd,
                      rtol=1e-4, atol=1e-4)
            if mode == "Explicit":
                res.check_true(f"{name} [Explicit]: without out_sharding minijax raises as JAX "
                               f"({kind})", m["error"][0] == kind)
            res.check(f"{name} [{mode}]: minijax output equals the unsharded run",
                      np.asarray(m["out"]), ref_fwd, rtol=1e-4, atol=1e-4)
            res.check_true(f"{name} [{mode}]: minijax output spec and type equal JAX's",
                           str(m["out"].sharding.spec) == str(j["out"].sharding.spec)
                           and str(minijax.typeof(m["out"])) == str(jax.typeof(j["out"])))
            res.check_true(f"{name} [{mode}]: minijax's compiled HLO has JAX's collectives",
                           m["counts"] == j["counts"])
            if mode == "Auto" and name == "model parallel":
                res.check_true("model parallel: partitioner inserted an all-reduce",
                               j["counts"]["all-reduce"] >= 1)
            if mode == "Auto" and name == "data parallel":
                res.check_true("data parallel forward needs no collectives",
                               sum(j["counts"].values()) == 0)
            note = f"without out_sharding: `{kind}`: {msg.split('. ')[0]}." if kind else "-"
            rows.append([name, mode, f"`{jax.typeof(j['out'])}`", f"`{j['out'].sharding.spec}`",
                         fmt_counts(j["counts"]), f"`{m['out'].sharding.spec}`",
                         fmt_counts(m["counts"]), note])
    return rows


def check_dp_grad(res: TopicResult, got: dict, ref_grad) -> None:
    j, m = got["jax"], got["minijax"]
    res.check("data-parallel gradient equals unsharded gradient", j["grad"], ref_grad,
              rtol=1e-4, atol=1e-5)
    res.check_true("data-parallel gradient uses an all-reduce", j["counts"]["all-reduce"] >= 1)
    res.check("minijax data-parallel gradient equals the unsharded gradient",
              [np.asarray(t) for t in m["grad"]], ref_grad, rtol=1e-4, atol=1e-5)
    res.check_true("minijax data-parallel gradient: JAX's collectives",
                   m["counts"] == j["counts"])


def check_dp_train(res: TopicResult, got: dict, one_device: dict) -> None:
    m_losses = got["minijax"]["losses"]
    res.check("data-parallel training: minijax losses equal JAX's", m_losses,
              got["jax"]["losses"], rtol=1e-5, atol=1e-6)
    res.check("data-parallel training: minijax losses equal the unsharded run", m_losses,
              one_device["losses"], rtol=1e-5, atol=1e-6)
    res.check_true("data-parallel training: parameters stay replicated (P())",
                   all(str(p.sharding.spec) == "P()" for p in got["minijax"]["params"]))


def check_explicit_train(res: TopicResult, name: str, got: dict, one_device: dict) -> None:
    (jl, jp), (ml, mp) = ((got[k]["losses"], got[k]["params"]) for k in ("jax", "minijax"))
    res.check(f"{name} training (Explicit): minijax losses equal JAX's", ml, jl,
              rtol=1e-5, atol=1e-6)
    res.check(f"{name} training (Explicit): minijax losses equal the unsharded run", ml,
              one_device["losses"], rtol=1e-4, atol=1e-5)
    res.check_true(f"{name} training (Explicit): parameters keep their types, as in JAX",
                   [str(minijax.typeof(p)) for p in mp] == [str(jax.typeof(p)) for p in jp])


def check_moves(res: TopicResult, got: dict, mesh_e, x) -> list:
    """Each layout move: JAX's values and layout, minijax's against JAX's. Returns the rows."""
    rows = []
    for src, dst in MOVES:
        j, m = got["jax"][src, dst], got["minijax"][src, dst]
        out, mout, out2, mout2 = j["reshard"], m["reshard"], j["constraint"], m["constraint"]
        res.check(f"reshard {src} -> {dst}: values", out, np.cos(x) * 3.0,
                  rtol=1e-6, atol=1e-6)
        res.check_true(f"reshard {src} -> {dst}: result has layout {dst}",
                       out.sharding.is_equivalent_to(NamedSharding(mesh_e, dst), out.ndim))
        res.check(f"minijax reshard {src} -> {dst}: values equal JAX's", np.asarray(mout),
                  np.asarray(out), rtol=1e-6, atol=1e-6)
        res.check_true(f"minijax reshard {src} -> {dst}: type, spec and collectives equal "
                       "JAX's", str(minijax.typeof(mout)) == str(jax.typeof(out))
                       and str(mout.sharding.spec) == str(out.sharding.spec)
                       and m["reshard_counts"] == j["reshard_counts"])
        res.check(f"with_sharding_constraint {src} -> {dst}: values", out2,
                  np.cos(x) * 3.0, rtol=1e-6, atol=1e-6)
        res.check(f"minijax with_sharding_constraint {src} -> {dst}: values equal JAX's",
                  np.asarray(mout2), np.asarray(out2), rtol=1e-6, atol=1e-6)
        res.check_true(f"minijax with_sharding_constraint {src} -> {dst}: spec and "
                       "collectives equal JAX's",
                       str(mout2.sharding.spec) == str(out2.sharding.spec)
                       and m["constraint_counts"] == j["constraint_counts"])
        rows.append([f"`{src}` -> `{dst}`", f"`{jax.typeof(out)}`",
                     fmt_counts(j["reshard_counts"]), f"`{minijax.typeof(mout)}`",
                     fmt_counts(m["reshard_counts"]), f"`{out2.sharding.spec}`",
                     fmt_counts(j["constraint_counts"]), f"`{mout2.sharding.spec}`",
                     fmt_counts(m["constraint_counts"])])
    return rows


# ------------------------------------------------------------------ the report's prose
def describe_shards(x, rows: list, pictures: list) -> str:
    return (
        "### PartitionSpec -> shards -> bytes per device\n\n"
        f"A `NamedSharding(mesh, spec)` names, for each array dimension, the mesh axes it is "
        f"split over; unnamed mesh axes mean copies. For x of shape {x.shape} "
        f"({x.nbytes} bytes) on the 2 x 4 mesh (`data` = 2, `model` = 4):\n\n"
        + table(["spec", "type (Explicit mesh)", "shard shape", "bytes on device 0",
                 "bytes on all devices", "copies of each shard"], rows)
        + "\n\nThe per-device numbers come straight from `arr.addressable_shards[i].data.nbytes`."
        " minijax's `device_put(x, NamedSharding(mesh, spec))` cuts the same blocks and puts them"
        " on the same devices (checked shard by shard) and gives them the same types."
        " Splitting over both axes (`P('data','model')` or the flattened `P(('data','model'))`)"
        " leaves each device 1/8 of the data; `P()` keeps eight full copies. Who holds what:\n\n"
        + code("\n\n".join(pictures)))


def describe_jit(rows: list, auto: dict) -> str:
    return (
        "### jit with in_shardings / out_shardings\n\n"
        "`jit(f, in_shardings=NamedSharding(mesh, P('data')), out_shardings=NamedSharding(mesh, "
        "P(None, 'model')))` on an elementwise `sin(x) * 2`: a NumPy input is uncommitted, so "
        "JAX places it as `in_shardings` asks; the result must come out split by columns, so "
        "the compiled program has to move data between the two layouts. In both modes the "
        "partitioner does it inside the program:\n\n"
        + table(["mode", "result type (JAX)", "JAX result spec", "JAX collectives",
                 "minijax result spec", "minijax collectives"], rows)
        + "\n\nminijax lowers the same call to Shardy: an `sdy.mesh`, `sdy.sharding` attributes "
        "on `main`'s arguments and results, compiled with `num_partitions = 8`. Its module "
        "(the Auto row), next to JAX's:\n\n" + code(auto["minijax"]["text"]) + "\n\n"
        + code(auto["jax"]["text"]))


def mlp_layouts(got: dict, inp: Inputs) -> tuple[list, list]:
    """JAX's Auto-mode MLP per strategy: the collective lines of its compiled program, and the
    bytes device 0 holds next to XLA's own accounting (`memory_analysis`)."""
    quotes, mem_rows = [], []
    for name in STRATEGIES:
        run = got[name, "Auto"]
        quotes.append(f"# {name}\n" + ("\n".join(collective_lines(run["compiled"].as_text(), 4))
                                       or "(no collectives)"))
        (pa, xa), ma = run["args"], run["compiled"].memory_analysis()
        dev0 = sum(a.addressable_shards[0].data.nbytes for a in (*pa, xa))
        mem_rows.append([name, dev0, inp.w1.nbytes + inp.w2.nbytes + inp.x.nbytes,
                         getattr(ma, "argument_size_in_bytes", "n/a"),
                         getattr(ma, "temp_size_in_bytes", "n/a")])
    return quotes, mem_rows


def describe_mlp(rows: list, quotes: list, mem_rows: list) -> str:
    return (
        "### Sharding propagation through a 2-layer MLP\n\n"
        "`mlp(params, x) = relu(x @ w1) @ w2`, with only the inputs' shardings chosen by us. "
        "Data parallel splits the batch and copies the weights; model parallel splits the "
        "hidden dimension (columns of `w1`, rows of `w2`, Megatron style); 2D does both. Every "
        "row's output equals the one-device run (see the checks).\n\n"
        + table(["strategy", "mode", "result type", "JAX result spec", "JAX collectives",
                 "minijax result spec", "minijax collectives", "note (both modules)"], rows)
        + "\n\nWhat to notice. Data parallelism needs no communication in the forward pass: "
        "each device owns whole rows. In model parallelism the second matmul contracts over "
        "the split hidden dimension, so each device holds a *partial sum* of the output and "
        "an all-reduce over `model` finishes it. In Explicit mode JAX will not guess how that "
        "result should be laid out (replicated? split?), so the plain program fails at trace "
        "time with the message in the note column, and we pass `out_sharding=` to the second "
        "matmul. In Auto mode the partitioner decides on its own. (The timings are for "
        "orientation only: the eight CPU 'devices' share this machine's cores, so sharding "
        "adds communication without adding compute.) The collective instructions, as they "
        "appear in `compiled.as_text()` (Auto mode):\n\n" + code("\n\n".join(quotes))
        + "\n\nParameters + input bytes held by device 0 (from addressable shards) and XLA's "
        "own per-device accounting (`compiled.memory_analysis()`):\n\n"
        + table(["strategy", "device-0 bytes (x, w1, w2)", "unsharded bytes",
                 "memory_analysis argument bytes", "temp bytes"], mem_rows))


def describe_dp_grad(got: dict) -> str:
    return (
        "### Data-parallel gradients\n\n"
        "Split the batch over all eight devices (`P(('data', 'model'))`) and take `jax.grad` of "
        "the mean-squared error. Each device computes the gradient of its slice; the true "
        "gradient is their sum, so XLA inserts an all-reduce. Collectives in the compiled "
        f"gradient: **{fmt_counts(got['jax']['counts'])}** (JAX), "
        f"**{fmt_counts(got['minijax']['counts'])}** (minijax, "
        "same call, same in_shardings). There are two weight gradients but XLA's "
        "all-reduce combiner may merge them into one tuple-shaped all-reduce, so the count can "
        "be lower than the number of parameters.")


def describe_dp_train(steps: int, got: dict, one_device: dict, t_j: float, t_m: float) -> str:
    losses = zip(got["jax"]["losses"], got["minijax"]["losses"], one_device["losses"])
    return (
        "### A data-parallel training step, minijax and JAX\n\n"
        f"`value_and_grad` of the MSE plus an SGD update, parameters replicated (`P()`), the "
        f"batch split over all eight devices (`P(('data', 'model'))`), {steps} steps:\n\n"
        + table(["step", "JAX loss", "minijax loss", "minijax, one device"],
                [[i, f"{a:.6f}", f"{b:.6f}", f"{c:.6f}"] for i, (a, b, c) in enumerate(losses)])
        + f"\n\nMedian time per step (inputs on device on both sides, the two measured in "
        f"alternating rounds): JAX {t_j:.3f} ms, "
        f"minijax {t_m:.3f} ms, ratio minijax/JAX **{t_m / t_j:.2f}** (same XLA program "
        "underneath, the same flops and one all-reduce on both sides; the eight CPU devices "
        "share this machine's cores, so the figure is noisy).")


def describe_explicit_train(steps: int, train_rows: list, time_rows: list) -> str:
    return (
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
        + table(["strategy", "JAX ms", "minijax ms", "minijax / JAX"], time_rows))


def describe_moves(rows: list, n_remat: int, error: tuple) -> str:
    kind, msg = error
    return (
        "### Changing layout inside a program: reshard and with_sharding_constraint\n\n"
        "`jax.sharding.reshard(x, spec)` (Explicit) changes the array's type to the new layout; "
        "`jax.lax.with_sharding_constraint(x, sharding)` (Auto) pins the layout of an "
        "intermediate and lets the partitioner work out the rest. Each row computes "
        "`cos(x)`, changes the layout, multiplies by 3:\n\n"
        + table(["move", "Explicit result type", "Explicit: collectives",
                 "minijax Explicit type", "minijax collectives",
                 "Auto result spec", "Auto: collectives", "minijax (Auto) spec",
                 "minijax collectives"], rows)
        + "\n\nSplit to replicated needs an all-gather. `P('data', None)` to `P(None, 'model')` "
        "changes which mesh axis does the splitting, so XLA gathers the rows over `data` and "
        "each device then cuts out its columns locally (no second collective). "
        f"For this move XLA's partitioner logs `{_REMAT_LOG}` ({n_remat} times in "
        "this run, collected here instead of on the console): it finds no direct path from "
        "the one layout to the other, so it rebuilds the whole array on every device and "
        "slices it again, which is the all-gather in the table. It is expected, the same "
        "for JAX and minijax, and costs one array's worth of memory per device. Replicated to "
        "split needs no communication at all: each device keeps its slice. Swapping the two "
        "axes (`P('data','model')` to `P('model','data')`) makes devices trade pieces, which "
        "XLA does with an all-to-all plus a collective-permute. In Explicit mode "
        "`with_sharding_constraint` is only an assertion: asking it for a different layout "
        "fails, pointing you to `reshard`:\n\n"
        + code(f"{kind}: {msg}"))


# ------------------------------------------------------------------ the topic
def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Sharding: NamedSharding, jit shardings, propagation, collectives",
                      runs="jax")  # the checks not naming minijax run JAX alone
    res.chapter = "chapters/12-sharding.md"
    res.devices = jax.device_count()
    inp, steps, reps = Inputs.make(quick), 3 if quick else 10, 15 if quick else 90
    # The single-device reference everything else is compared with.
    ref_fwd = jax.jit(lambda p, x: mlp(jax, p, x))(inp.params, inp.x)
    ref_grad = jax.jit(jax.grad(loss_fn(jax)))(inp.params, inp.x, inp.y)
    mesh = {name: meshes(J) for name, J in MODULES}
    res.check_true("minijax.make_mesh defaults to Explicit axes, as jax.make_mesh",
                   [t.name for t in mesh["minijax"]["Explicit"].axis_types]
                   == [t.name for t in mesh["jax"]["Explicit"].axis_types])

    shards = {name: put_shards(J, mesh[name]["Explicit"], inp.x) for name, J in MODULES}
    res.sections.append(describe_shards(inp.x, *check_shards(res, shards, inp.x)))

    jits = {name: {mode: jit_in_out(J, mesh[name][mode], inp.x) for mode in MODES}
            for name, J in MODULES}
    res.sections.append(describe_jit(check_jit(res, jits, inp.x),
                                     {name: jits[name]["Auto"] for name in jits}))

    _mlp_forward(res, inp, ref_fwd, quick, mesh)

    one_device = _data_parallel(res, mesh, inp, ref_grad, quick, steps, reps)

    _explicit_train(res, mesh, inp, steps, one_device, reps)

    _moves(res, mesh, inp)
    return res


def _mlp_forward(res, inp, ref_fwd, quick, mesh):
    """The MLP forward on one device and under every strategy and mesh mode, in both modules:
    values against the single-device reference, timings and the section."""
    one = {name: (J.jit(lambda p, x, J=J: mlp(J, p, x)), J.device_put((inp.params, inp.x)))
           for name, J in MODULES}
    res.check("minijax unsharded MLP forward equals JAX's",
              np.asarray(one["minijax"][0](*one["minijax"][1])), np.asarray(ref_fwd),
              rtol=1e-5, atol=1e-5)
    # like for like: one jitted function each, inputs already on the device, interleaved
    times_into(res, {f"MLP forward, 1 device: {name}": lambda f=f, a=a: f(*a)
                     for name, (f, a) in one.items()}, quick)
    fwd = {name: {(s, mode): mlp_forward(J, mesh[name][mode], mode, s, inp)
                  for s in STRATEGIES for mode in MODES} for name, J in MODULES}
    mlp_rows = check_mlp(res, fwd, ref_fwd)
    for s in STRATEGIES:
        run_ = fwd["jax"][s, "Auto"]
        time_into(res, f"MLP forward, {s} (8 devices, Auto)",
                  lambda r=run_: r["fn"](*r["args"]), quick)
    res.sections.append(describe_mlp(mlp_rows, *mlp_layouts(fwd["jax"], inp)))


def _data_parallel(res, mesh, inp, ref_grad, quick, steps, reps):
    """The data-parallel gradient and training steps in both modules, against one device:
    checks, timings and sections."""
    grads = {name: dp_grad(J, mesh[name]["Auto"], inp) for name, J in MODULES}
    check_dp_grad(res, grads, ref_grad)
    time_into(res, "data-parallel grad step (8 devices)",
              lambda g=grads["jax"]: g["fn"](*g["args"]), quick)
    res.sections.append(describe_dp_grad(grads))

    dp = {name: dp_train(J, mesh[name]["Auto"], inp, steps) for name, J in MODULES}
    one_device = dp_train(minijax, None, inp, steps)
    check_dp_train(res, dp, one_device)
    # per-step medians, like for like: inputs already on device, one step per call
    t_j, t_m = _step_ms(dp, reps)
    res.timings_ms["data-parallel SGD step, JAX (8 devices)"] = t_j
    res.timings_ms["data-parallel SGD step, minijax (8 devices)"] = t_m
    res.sections.append(describe_dp_train(steps, dp, one_device, t_j, t_m))
    return one_device


def _explicit_train(res, mesh, inp, steps, one_device, reps):
    """Training under every strategy with Explicit axes, in both modules, against one device:
    checks, timings and the section."""
    train_rows, time_rows = [], []
    for s in STRATEGIES:
        got = {name: explicit_train(J, mesh[name]["Explicit"], s, inp, steps)
               for name, J in MODULES}
        check_explicit_train(res, s, got, one_device)
        t_j, t_m = _step_ms(got, reps)
        res.timings_ms[f"{s} SGD step (Explicit), JAX"] = t_j
        res.timings_ms[f"{s} SGD step (Explicit), minijax"] = t_m
        jp = got["jax"]["params"]
        train_rows.append([s, f"`{jax.typeof(jp[0])}`, `{jax.typeof(jp[1])}`",
                           f"{got['jax']['losses'][-1]:.6f}",
                           f"{got['minijax']['losses'][-1]:.6f}",
                           f"{one_device['losses'][-1]:.6f}"])
        time_rows.append([s, f"{t_j:.3f}", f"{t_m:.3f}", f"**{t_m / t_j:.2f}**"])
    res.sections.append(describe_explicit_train(steps, train_rows, time_rows))


def _moves(res, mesh, inp):
    """Resharding between layouts (XLA's rematerialization warnings collected), and
    with_sharding_constraint's error under Explicit axes: checks and the section."""
    with xla_log_lines(_REMAT_LOG) as remat_lines:
        moves = {name: {(src, dst): move(J, mesh[name], src, dst, inp.x) for src, dst in MOVES}
                 for name, J in MODULES}
    if remat_lines:
        print(f"   XLA logged {len(remat_lines)} '{_REMAT_LOG}' warnings while compiling "
              f"{_REMAT_MOVE}: expected, see the report's reshard section", flush=True)
    mv_rows = check_moves(res, moves, mesh["jax"]["Explicit"], inp.x)
    errors = {name: constraint_error(J, mesh[name]["Explicit"], inp.x) for name, J in MODULES}
    (kind, msg), (mkind, mmsg) = errors["jax"], errors["minijax"]
    res.check_true("Explicit mode: with_sharding_constraint to a different spec raises "
                   "ValueError", kind == "ValueError")
    res.check_true("Explicit mode: minijax's with_sharding_constraint raises JAX's error",
                   (mkind, mmsg.split(" Got")[0]) == (kind, msg.split(" Got")[0]))
    res.sections.append(describe_moves(mv_rows, len(remat_lines), errors["jax"]))


def _step_ms(got: dict, reps: int) -> tuple[float, float]:
    """Median ms of one more step of each module's run, JAX's and minijax's, interleaved."""
    calls = {name: lambda r=got[name], J=J: J.block_until_ready(r["step"](*r["args"]))
             for name, J in MODULES}
    ms = interleaved_ms(calls, repeat=reps, warmup=1)
    return ms["jax"], ms["minijax"]
