"""Random sharded programs, run under JAX and minijax on 8 CPU devices, compared.

A seeded generator writes each program as Python source, `def program(J): ...`, to run with
`J=jax` and `J=minijax`: a mesh of 1-3 axes over 8 devices (Auto, Explicit or mixed axis
types), inputs placed with `device_put` and random PartitionSpecs, and a body chaining
elementwise ops, reductions, `dot`, `with_sharding_constraint`, `reshard`, inner `jit`s with
`out_shardings`, `pure_callback` and `shard_map` with a random collective over a random subset
of the mesh axes, under `jit` (with or without `in_shardings`/`out_shardings`), `grad`, `jvp`
and `vmap`. The two runs must agree on the values, on every output's sharding (its spec and
mesh shape) and type (`typeof`), and, when they raise, on the error's family.

The programs run in a child process (the 8 devices must be requested before JAX is imported)
that says which program it starts before running it, so a crash of the interpreter (a signal)
is reported with that program, and the sweep goes on in a new child. Every failure prints the
program's source, runnable on its own with `REPRO_HEADER` above it.

    python tests/sharded_programs.py --n 1000            # the sweep (seeds 0..999)
    python tests/sharded_programs.py --seed 17 --show    # one program's source and outcome
    python tests/sharded_programs.py --seeds 1,4,59      # these programs

tests/sharded_programs_test.py runs a fixed slice of seeds in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

# what a printed program needs above it to run on its own
REPRO_HEADER = """\
import os; os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, minijax
def data(shape, k):  # the inputs: distinct, smooth values
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * (k + 1) * 0.37) + 0.1 * k).astype(np.float32).reshape(shape)
"""

MESHES = [((8,), ("a",)), ((2, 4), ("a", "b")), ((4, 2), ("a", "b")),
          ((2, 2, 2), ("a", "b", "c"))]


# ---------------------------------------------------------------------------------------------
# The generator: source text of one program per seed
# ---------------------------------------------------------------------------------------------

class _Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.sizes, self.names = self.r.choice(MESHES)
        self.size = dict(zip(self.names, self.sizes))
        kinds = self.r.choice(["Auto", "Explicit", "Explicit", "mixed"])
        self.types = [kinds if kinds != "mixed" else self.r.choice(["Auto", "Explicit"])
                      for _ in self.names]
        self.explicit = tuple(a for a, t in zip(self.names, self.types) if t == "Explicit")
        self.auto = tuple(a for a, t in zip(self.names, self.types) if t == "Auto")
        self.in_context = self.r.random() < 0.6  # the program runs under set_mesh(mesh)
        self.transforms = self.r.choice([
            [], ["jit"], ["jit_sh"], ["grad"], ["jvp"], ["vmap"], ["jit", "grad"],
            ["grad", "jit_sh"], ["jit", "vmap"], ["vmap", "jit_sh"], ["jvp", "jit"],
            ["jit", "jvp"]])
        self.lines: list[str] = []  # the body of f
        self.n = 0

    def spec(self, ndim: int, axes=None) -> str:
        """A random PartitionSpec (source) for a value of rank `ndim` over `axes`."""
        free = list(self.names if axes is None else axes)
        self.r.shuffle(free)
        parts = []
        for _ in range(ndim):
            k = self.r.choice([0, 0, 1, 1, 2]) if free else 0
            take, free = free[:k], free[k:]
            parts.append(None if not take else take[0] if k == 1 else tuple(take))
        while parts and parts[-1] is None and self.r.random() < 0.5:
            parts.pop()
        return "P(" + ", ".join(repr(p) for p in parts) + ")"

    def factor(self, spec_src: str, ndim: int) -> list[int]:
        spec = eval(spec_src, {"P": lambda *a: a})
        out = []
        for d in range(ndim):
            p = spec[d] if d < len(spec) else None
            axes = () if p is None else (p,) if isinstance(p, str) else p
            f = 1
            for a in axes:
                f *= self.size[a]
            out.append(f)
        return out

    def subset(self, k_max: int = 3) -> tuple:
        k = self.r.randint(1, min(k_max, len(self.names)))
        return tuple(self.r.sample(self.names, k))

    def emit(self, expr: str) -> str:
        self.n += 1
        v = f"v{self.n}"
        self.lines.append(f"{v} = {expr}")
        return v

    def shard_map(self, v: str, shape: tuple) -> tuple[str, tuple]:
        r = self.r
        manual = self.names
        partial = len(self.names) > 1 and r.random() < 0.2
        if partial:
            manual = tuple(sorted(self.subset(len(self.names) - 1), key=self.names.index))
        in_spec = self.spec(len(shape), manual)
        if all(a in self.explicit for a in manual) and r.random() < 0.7:
            # the argument's type must match in_specs on Explicit axes: reshard it first
            v = self.emit(f"S.reshard({v}, {in_spec})")
        local = [max(n // f, 1) for n, f in zip(shape, self.factor(in_spec, len(shape)))]
        nd = len(local)
        kind = r.choice(["psum", "psum", "pmax", "pmin", "pmean", "all_gather",
                         "psum_scatter", "ppermute", "all_to_all", "axis_index", "none"])
        split = [a for a in manual if f"'{a}'" in in_spec]
        if kind in ("psum", "pmax", "pmin", "pmean") and split and r.random() < 0.6:
            axes = tuple(r.sample(split, len(split)))  # over the axes the operand varies along
        else:
            axes = tuple(a for a in self.subset() if a in manual) or (manual[0],)
        n_ax = 1
        for a in axes:
            n_ax *= self.size[a]
        if kind in ("psum", "pmax", "pmin", "pmean"):
            body = f"lax.{kind}(a, {axes!r})"
        elif kind == "all_gather" and nd:
            d = r.randrange(nd)
            body = f"lax.all_gather(a, {axes!r}, axis={d}, tiled=True)"
            local[d] *= n_ax
        elif kind == "psum_scatter" and nd:
            d = r.randrange(nd)
            body = f"lax.psum_scatter(a, {axes!r}, scatter_dimension={d}, tiled=True)"
            local[d] = max(local[d] // n_ax, 1)
        elif kind == "ppermute":
            ax = axes[0]
            perm = [(i, (i + 1) % self.size[ax]) for i in range(self.size[ax])]
            body = f"lax.ppermute(a, {ax!r}, perm={perm})"
        elif kind == "all_to_all" and nd:
            s, c = r.randrange(nd), r.randrange(nd)
            body = (f"lax.all_to_all(a, {axes!r}, split_axis={s}, concat_axis={c}, "
                    f"tiled=True)")
            local[s] = max(local[s] // n_ax, 1)
            local[c] *= n_ax
        elif kind == "axis_index":
            body = f"a * (1.0 + lax.axis_index({axes[0]!r}))"
        else:
            body = "a * 2.0 + 1.0"
        out_spec = self.spec(nd, manual) if r.random() < 0.4 else in_spec
        out = tuple(n * f for n, f in zip(local, self.factor(out_spec, nd)))
        extra = f", axis_names={set(manual)!r}" if partial else ""
        return self.emit(f"J.shard_map(lambda a: {body}, mesh=mesh, in_specs={in_spec}, "
                         f"out_specs={out_spec}{extra})({v})"), out

    def step(self, v: str, shape: tuple, inputs: list) -> tuple[str, tuple]:
        r = self.r
        nd = len(shape)
        kinds = ["unary", "unary", "binary", "wsc", "reshard", "shard_map", "shard_map",
                 "shard_map", "callback", "inner_jit"]
        if nd:
            kinds += ["reduce", "dot"]
        if nd == 2:
            kinds += ["transpose"]
        kind = r.choice(kinds)
        if kind == "callback" and {"grad", "jvp"} & set(self.transforms) and r.random() < 0.8:
            kind = "unary"  # a callback has no derivative: mostly an error, keep a few
        if kind == "unary":
            return self.emit(r.choice(["J.numpy.sin({})", "{} * 2.0 + 1.0", "J.numpy.tanh({})",
                                       "{} * {}"]).format(v, v)), shape
        if kind == "binary":
            same = [x for x, s in inputs if s == shape]
            other = r.choice(same) if same else "1.5"
            return self.emit(f"{v} + {other}"), shape
        if kind == "reduce":
            if r.random() < 0.3:
                return self.emit(f"{v}.sum()"), ()
            d = r.randrange(nd)
            return self.emit(f"{v}.sum(axis={d})"), shape[:d] + shape[d + 1:]
        if kind == "transpose":
            return self.emit(f"{v}.T"), shape[::-1]
        if kind == "dot":
            if nd == 2 and r.random() < 0.5:
                return self.emit(f"{v} @ {v}.T"), (shape[0], shape[0])
            if nd == 1:
                return self.emit(f"J.numpy.dot({v}, {v})"), ()
            return self.emit(f"{v} @ J.numpy.swapaxes({v}, -1, -2)"), (*shape[:-1], shape[-2])
        spec = self.spec(nd)
        if kind == "wsc":  # a constraint names Auto axes (Explicit ones: mostly an error)
            spec = self.spec(nd, self.auto) if self.auto and r.random() < 0.8 else spec
            where = f"NS(mesh, {spec})" if not self.in_context or r.random() < 0.5 else spec
            return self.emit(f"lax.with_sharding_constraint({v}, {where})"), shape
        if kind == "reshard":  # reshard names Explicit axes (Auto ones: an error)
            spec = self.spec(nd, self.explicit) if r.random() < 0.8 else spec
            return self.emit(f"S.reshard({v}, {spec})"), shape
        if kind == "inner_jit":
            return self.emit(f"J.jit(lambda a: a * 3.0, out_shardings=NS(mesh, {spec}))({v})"), \
                shape
        if kind == "callback":
            method = r.choice(["", ", vmap_method='sequential'"])
            return self.emit(f"J.pure_callback(np.sin, J.ShapeDtypeStruct({v}.shape, "
                             f"{v}.dtype), {v}{method})"), shape
        return self.shard_map(v, shape)

    def program(self) -> str:
        r = self.r
        dims = [8, 8, 16, 4]
        rank = r.choice([0, 1, 2, 2, 2, 3])
        shape = tuple(r.choice(dims) for _ in range(rank))
        transforms = self.transforms
        batch = 8 if "vmap" in transforms else None
        n_in = r.choice([1, 2])
        inputs = [(f"x{i}", shape) for i in range(n_in)]
        v = "x0"
        for _ in range(r.randint(1, 4)):
            v, shape = self.step(v, shape, inputs)
        lines = ["def program(J):",
                 "    S, lax = J.sharding, J.lax",
                 "    P, NS = S.PartitionSpec, S.NamedSharding",
                 f"    mesh = J.make_mesh({self.sizes}, {self.names}, axis_types=("
                 + "".join(f"S.AxisType.{t}, " for t in self.types) + "))"]
        full = inputs[0][1] if batch is None else (batch, *inputs[0][1])
        in_specs = []
        for i, (x, _) in enumerate(inputs):
            spec = self.spec(len(full))
            if batch is not None:
                # not generated: vmap over a dimension split on Explicit axes (JAX then takes
                # those axes out of the body's mesh; minijax does not, docs/conformance.md)
                first = self.spec(1, self.auto)[2:-1] or "None"
                rest = self.spec(len(full) - 1, [a for a in self.names if f"'{a}'" not in first])
                spec = f"P({first}, {rest[2:-1]})".replace(", )", ")")
            lines.append(f"    {x} = J.device_put(data({full}, {i}), NS(mesh, {spec}))")
            in_specs.append(spec)
        args = ", ".join(x for x, _ in inputs)
        lines.append(f"    def f({args}):")
        lines += [f"        {ln}" for ln in self.lines]
        lines.append(f"        return {v}")
        fn = "f"
        for t in transforms:
            if t == "jit":
                fn = f"J.jit({fn})"
            elif t == "jit_sh":
                # the argument's own layout, None, or another one (an error: it is committed)
                ins = ", ".join(r.choice([f"NS(mesh, {sp})", "None", f"NS(mesh, {sp})",
                                          f"NS(mesh, {self.spec(len(full))})"])
                                for sp in in_specs)
                outs = (f", out_shardings=NS(mesh, {self.spec(len(shape))})"
                        if r.random() < 0.6 and "grad" not in transforms and
                        "vmap" not in transforms else "")
                fn = f"J.jit({fn}, in_shardings=({ins},){outs})"
            elif t == "grad":
                fn = f"J.grad(lambda *a: {fn}(*a).sum())"
            elif t == "jvp":
                fn = f"(lambda *a: J.jvp({fn}, a, tuple(x * 0.5 + 1.0 for x in a)))"
            elif t == "vmap":
                fn = f"J.vmap({fn})"
        call = f"{fn}({args})"
        if self.in_context:
            lines += ["    with J.set_mesh(mesh):", f"        return {call}"]
        else:
            lines.append(f"    return {call}")
        return "\n".join(lines) + "\n"


def generate(seed: int) -> str:
    """The source of program number `seed`: `def program(J): ...`."""
    return _Gen(seed).program()


# ---------------------------------------------------------------------------------------------
# Running one program under a module, comparing the two outcomes
# ---------------------------------------------------------------------------------------------

# JAX 0.10.2's own failures: an internal error where a user error or a result is due. The
# program is then not compared (docs/conformance.md, "Sharded programs", lists them). Each is
# (a part of the message, and a function of JAX's the error must be raised under, or None).
_JAX_BUGS = [
    ("Length of device assignment 1 is not equal to the size of the mesh", None),  # grad,
    #                                   Explicit mesh, no set_mesh: its seed is not placed
    ("cannot reshape array of size 1 into shape", None),  # the same on a mixed mesh
    ("into SdyArray", None),  # a pure_callback's result (GSPMDSharding) fed to another
    #                           computation
    ("Expected cotangent type", None),  # backward_pass checking the cotangent a transpose
    #                   rule of JAX's own gave (shard_map's, an eager constraint's) against the
    #                   primal's type
    ("Sharding passed to jit does not match", "_pjit_transpose_fancy"),  # a jit's transpose
    #                   run eagerly: its in_shardings (the forward's out_shardings) against the
    #                   cotangent laid out by JAX's own backward pass, not by the user
]


def _jax_bug(j: dict) -> bool:
    """Whether JAX's outcome `j` is one of its own failures above."""
    return "error" in j and any(m in j["message"] and (f is None or f in j["frames"])
                                for m, f in _JAX_BUGS)


def run_program(src: str, J) -> dict:
    """Run `program(J)`: {"ok": [per output leaf: shape, dtype, values, sharding, type]} or
    {"error": family, "message": ...}."""
    import numpy as np
    ns = {"np": np}
    exec(REPRO_HEADER.split("\n", 2)[2], ns)  # data()
    exec(src, ns)
    try:
        out = ns["program"](J)
        leaves = J.tree_util.tree_leaves(out)
        res = []
        for x in leaves:
            s = x.sharding
            sh = ([list(s.mesh.axis_sizes), _layout_spec(s.spec)] if hasattr(s, "spec")
                  else type(s).__name__)
            res.append({"shape": list(x.shape), "dtype": str(x.dtype), "sharding": sh,
                        "spec": str(getattr(s, "spec", None)),
                        "type": str(J.typeof(x)), "value": np.asarray(x).tolist()})
        return {"ok": res}
    except Exception as e:  # the error is part of the outcome
        return {"error": _family(e), "message": f"{type(e).__name__}: {e}"[:600],
                "frames": [f.name for f in traceback.extract_tb(e.__traceback__)],
                "where": traceback.format_exc(limit=-3)[-1500:]}


def _layout_spec(spec) -> str:
    """The spec without its trailing Nones: `P('a')` and `P('a', None)` are one layout, and
    JAX itself writes either (a type's spec has one entry per dimension, a spec read back from
    the executable drops the trailing ones), so only the layout is compared; `spec` keeps the
    spelling, counted apart (summary's `spec_spelling`)."""
    parts = list(spec)
    while parts and parts[-1] is None:
        parts.pop()
    return repr(tuple(parts))


def _family(e: Exception) -> str:
    name = type(e).__name__
    if name in ("JaxRuntimeError", "XlaRuntimeError"):
        return "runtime"
    if name == "ShardingTypeError":
        return "ShardingTypeError"
    for fam in (NotImplementedError, NameError, TypeError, ValueError):
        if isinstance(e, fam):
            return fam.__name__
    return name


def compare(j: dict, m: dict) -> str | None:
    """None when the outcomes agree, else what differs."""
    import numpy as np
    if _jax_bug(j):
        return None if "error" not in m or m["error"] != "AssertionError" else \
            f"JAX fails internally; minijax fails too: {m['message']}"
    if "error" in j or "error" in m:
        if "error" in j and "error" in m and j["error"] == m["error"]:
            return None
        return (f"errors differ: jax {j.get('message', 'ran')} | minijax "
                f"{m.get('message', 'ran')}")
    if len(j["ok"]) != len(m["ok"]):
        return f"jax returns {len(j['ok'])} leaves, minijax {len(m['ok'])}"
    for i, (a, b) in enumerate(zip(j["ok"], m["ok"])):
        for key in ("shape", "dtype", "sharding", "type"):
            if key == "sharding" and a[key] == "GSPMDSharding":
                continue  # JAX could not name the layout as a NamedSharding: nothing to compare
            if a[key] != b[key]:
                return f"leaf {i}: {key} jax {a[key]} | minijax {b[key]}"
        if not np.allclose(np.asarray(a["value"], float), np.asarray(b["value"], float),
                           rtol=2e-4, atol=2e-4, equal_nan=True):
            return f"leaf {i}: values differ: jax {a['value']} | minijax {b['value']}"
    return None


# ---------------------------------------------------------------------------------------------
# The child (runs programs) and the parent (restarts it after a crash, collects the report)
# ---------------------------------------------------------------------------------------------

def _child(seeds: list[int]) -> None:
    sys.path.insert(0, HERE)
    from eight_devices import request_eight_devices
    request_eight_devices()
    import jax

    import minijax
    # JAX's whole traceback, so that `_JAX_BUGS` can tell where an error was raised
    jax.config.update("jax_traceback_filtering", "off")
    crash_at = os.environ.get("SHARDED_PROGRAMS_CRASH_AT")  # tests/sharded_programs_test.py
    for seed in seeds:
        print(f"START {seed}", flush=True)
        if crash_at is not None and seed == int(crash_at):
            import signal
            os.kill(os.getpid(), signal.SIGSEGV)
        src = generate(seed)
        j = run_program(src, jax)
        m = run_program(src, minijax)
        diff = compare(j, m)
        if minijax.core.trace_ctx.trace is not minijax.core.eval_trace:
            diff = "minijax left a trace in context"
            minijax.core.trace_ctx.trace = minijax.core.eval_trace
        kind = "jax_bug" if _jax_bug(j) \
            else "error" if "error" in j else "ran"
        spelled = "ok" in j and "ok" in m and [a["spec"] for a in j["ok"]] != [
            b["spec"] for b in m["ok"]]
        print("RESULT " + json.dumps({"seed": seed, "diff": diff, "kind": kind,
                                      "spelling": bool(spelled and not diff),
                                      "jax": j.get("message"), "minijax": m.get("message")}),
              flush=True)


def sweep(seeds: list[int], *, per_child: int = 250, quiet: bool = False,
          env: dict | None = None) -> dict:
    """Run `seeds` in child processes (a new one after `per_child` programs or a crash),
    with `env` added to their environment. Returns {"results": {seed: result}, "crashes":
    {seed: how}}."""
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    results, crashes = {}, {}
    todo = list(seeds)
    while todo:
        batch, todo = todo[:per_child], todo[per_child:]
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child",
                                 ",".join(map(str, batch))], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        current = None
        for line in proc.stdout:
            if line.startswith("START "):
                current = int(line.split()[1])
            elif line.startswith("RESULT "):
                r = json.loads(line[7:])
                results[r["seed"]] = r
                current = None
                if not quiet and r["diff"]:
                    print(report(r["seed"], r["diff"]), flush=True)
        err = proc.stderr.read()
        rc = proc.wait()
        if current is not None:  # died running a program: a crash, then carry on after it
            how = f"signal {-rc}" if rc < 0 else f"exit {rc}"
            crashes[current] = how
            if not quiet:
                print(report(current, f"the interpreter died ({how})\n{err[-2000:]}"),
                      flush=True)
            todo = [s for s in batch if s not in results and s != current] + todo
        elif rc != 0:
            raise RuntimeError(f"the sweep's child failed (exit {rc}):\n{err[-3000:]}")
    return {"results": results, "crashes": crashes}


def report(seed: int, what: str) -> str:
    return (f"--- program {seed}: {what}\n# reproduce: REPRO_HEADER of tests/sharded_programs.py,"
            f" then\n{generate(seed)}for J in (jax, minijax): print(program(J))\n")


def summary(out: dict) -> dict:
    res = out["results"].values()
    return {"programs": len(out["results"]) + len(out["crashes"]),
            "disagreements": sum(1 for r in res if r["diff"]),
            "crashes": len(out["crashes"]),
            "both_ran": sum(1 for r in res if r["kind"] == "ran" and not r["diff"]),
            "both_raised": sum(1 for r in res if r["kind"] == "error" and not r["diff"]),
            "jax_internal_errors": sum(1 for r in res if r["kind"] == "jax_bug"),
            "spec_spelling": sum(1 for r in res if r.get("spelling"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="how many programs")
    ap.add_argument("--start", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this one program")
    ap.add_argument("--seeds", help="run these programs (comma-separated seeds)")
    ap.add_argument("--show", action="store_true", help="print the program's source too")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child([int(s) for s in args.child.split(",")])
        return 0
    seeds = ([args.seed] if args.seed is not None else
             [int(x) for x in args.seeds.split(",")] if args.seeds else
             list(range(args.start, args.start + args.n)))
    if args.show:
        for s in seeds:
            print(f"# program {s}\n{generate(s)}")
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    out = {"results": {}, "crashes": {}}
    chunks = [seeds[i:i + 50] for i in range(0, len(seeds), 50)]
    for chunk in (tqdm(chunks, unit="50 programs") if tqdm and len(chunks) > 1 else chunks):
        part = sweep(chunk)
        out["results"].update(part["results"])
        out["crashes"].update(part["crashes"])
    s = summary(out)
    print(json.dumps(s))
    return 0 if not s["disagreements"] and not s["crashes"] else 1


if __name__ == "__main__":
    sys.exit(main())
