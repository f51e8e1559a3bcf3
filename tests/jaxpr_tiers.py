"""Random programs in five tiers of growing difficulty, whose printed jaxprs are compared with
JAX's: `str(minijax.make_jaxpr(f)(*args))` against `str(jax.make_jaxpr(f)(*args))`, exactly.

A seeded generator writes each program once, as Python source `def program(J): ... return f,
args`, which is run with `J=jax` and with `J=minijax` (the same text). The tiers:

1. straight-line elementwise programs (`jnp`, `lax` and operator forms, weak Python literals);
2. tier 1 with reductions, broadcasting, reshapes, transposes, indexing, concatenation, `dot`;
3. tier 2 with control flow (`cond`, `switch`, `scan`, `while_loop`, `fori_loop`) and
   `custom_jvp`/`custom_vjp`, whose bodies are drawn like the straight-line programs and may
   close over outer values;
4. tier-3 programs under `grad`, `value_and_grad`, `jvp`, `vmap` and their compositions;
5. tier 4 with inner `jit`s (also jit-in-jit), pytrees in and out, int32/bool/bfloat16 values
   mixed with f32, weak-typed scalars, `x.at[...]` updates, `take`/`take_along_axis`/`one_hot`/
   `clip`.

Each step's result shape and dtype come from `jax.eval_shape` of the step itself, so the
generator draws only steps JAX accepts; a whole program JAX still refuses (`grad` of a
`while_loop`, or a `custom_vjp` rule closing over the value being differentiated, whose
leaked tracer JAX's `make_jaxpr` keeps as a constant but whose run raises) is counted as invalid
and the next seed is drawn. Nothing is normalised: the two texts must be equal character for
character (variable names, literals, params).

    python tests/jaxpr_tiers.py --n 200                 # every tier: rates, causes of the diffs
    python tests/jaxpr_tiers.py --tier 3 --n 100 --show  # and every differing pair
    python tests/jaxpr_tiers.py --tier 5 --seed 17       # one program: source and both texts

tests/jaxpr_tiers_test.py holds the CI floors on a small fixed slice per tier.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter

import jax
import numpy as np

import minijax

HEADER = """\
import numpy as np
def data(shape, k, dtype=np.float32):  # the inputs: distinct, positive values
    n = int(np.prod(shape))
    v = np.abs(np.sin(np.arange(n) * (k + 1) * 0.37)) + 0.5 + 0.1 * k
    if np.dtype(dtype) == np.int32:
        v = np.arange(n) % 3 + k
    return np.asarray(v, dtype).reshape(shape)
"""

SHAPES = [(3,), (2, 3), (3, 1), (4,), (2, 3)]
LITERALS = ["0.5", "2.0", "3.0", "0.1", "1.5", "2", "1", "0.25"]
UNARY = ["jnp.sin({a})", "jnp.cos({a})", "jnp.exp({a})", "jnp.log({a})", "jnp.tanh({a})",
         "jnp.sqrt({a})", "jnp.abs({a})", "-{a}", "{a} ** 2", "jnp.square({a})",
         "lax.logistic({a})", "lax.rsqrt({a})", "jnp.log1p({a})", "jnp.expm1({a})",
         "{a} * {c}", "{a} + {c}", "{a} - {c}", "{c} - {a}", "{a} / {c}", "{c} * {a}",
         "J.nn.relu({a})", "J.nn.sigmoid({a})", "lax.sin({a})", "lax.exp({a})",
         "jnp.reciprocal({a})", "{a} ** 3", "lax.integer_pow({a}, 2)", "J.nn.gelu({a})",
         "jnp.maximum({a}, {c})", "J.nn.softplus({a})", "lax.tanh({a})", "jnp.sign({a}) * {a}"]
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "jnp.maximum({a}, {b})",
          "jnp.minimum({a}, {b})", "jnp.where({a} > {b}, {a}, {b})", "lax.add({a}, {b})",
          "lax.mul({a}, {b})", "jnp.arctan2({a}, {b})", "{a} ** {b}", "lax.max({a}, {b})",
          "jnp.where({a} < 1.0, {a}, {b})", "lax.select({a} > {b}, {b}, {a})"]
# tier 2: shape-changing steps of one operand, and broadcasting binaries
SHAPING = ["jnp.sum({a})", "jnp.sum({a}, axis={d})", "jnp.max({a}, axis={d})",
           "jnp.mean({a}, axis={d})", "jnp.prod({a})", "{a}.sum(axis={d}, keepdims=True)",
           "jnp.min({a})", "jnp.argmax({a}, axis={d}).astype(jnp.float32)",
           "{a}.reshape(-1)", "jnp.ravel({a})", "{a}.T", "{a}[None]",
           "jnp.expand_dims({a}, {d})", "{a}[0]", "{a}[1:]", "{a}[::-1]", "{a}[-1]",
           "{a}[..., :1]", "jnp.concatenate([{a}, {a}], axis={d})", "jnp.stack([{a}, {a}])",
           "jnp.cumsum({a}, axis={d})", "jnp.sort({a}, axis={d})", "lax.reduce_sum({a}, ({d},))",
           "{a} @ {a}.T", "jnp.dot({a}, {a}.T)", "jnp.squeeze({a})",
           "jnp.broadcast_to({a}, (2,) + {a}.shape)",
           "{a} - jnp.mean({a}, axis={d}, keepdims=True)",
           "J.nn.softmax({a}, axis={d})", "J.nn.logsumexp({a}, axis={d})",
           "jnp.linalg.norm({a})", "jnp.var({a})", "jnp.flip({a}, {d})", "jnp.tile({a}, 2)",
           "jnp.pad({a}, 1)", "jnp.outer({a}, {a})", "{a}[:, None] * {a}[None, :]"]
BBINARY = ["{a} + {b}", "{a} * {b}", "{a} - {b}", "{a} / {b}", "jnp.maximum({a}, {b})",
           "jnp.where({a} > {b}, {a}, {b})", "{a} @ {b}", "jnp.dot({a}, {b})",
           "jnp.matmul({a}, {b})"]
# tier 5: dtypes, weak types, indexed updates, gathers (`{i}`: an int32 value of the program)
MIXED = ["{a} * {i}", "{a} + {i}", "{a}.astype(jnp.int32)", "({a} > 1.0)",
         "jnp.where({a} > 1.0, {a}, 0)", "jnp.logical_and({a} > 0.8, {a} < 1.5)",
         "({a}.astype(jnp.bfloat16) * 2).astype(jnp.float32)", "jnp.float32(2.0) * {a}",
         "{a} + jnp.asarray(0.5)", "jnp.zeros_like({a}) + 1", "jnp.full_like({a}, 0.1) * {a}",
         "{a}.astype(jnp.float16)", "{a} * True", "jnp.int32(3) * {a}",
         "{a}.at[0].set(1.0)", "{a}.at[1:].add(2.0)", "{a}.at[..., 0].mul(2.0)",
         "{a}.at[jnp.array([0, 1])].add(1.0)", "{a}.at[0].max({a}[-1])",
         "{a}.at[{i0}].set(0.0)", "{a}.at[-1].min(0.5)",
         "jnp.take({a}, jnp.array([0, 2]), axis=-1)", "jnp.take({a}, {i0})",
         "jnp.take({a}, jnp.array([1, 0]), axis=0, mode='clip')",
         "J.nn.one_hot({i}, 3)", "J.nn.one_hot(jnp.argmax({a}, axis=-1), 3)",
         "jnp.clip({a}, 0.6, 1.2)", "jnp.clip({a}, max=1.0)", "jnp.clip({a}, {b}, 1.5)",
         "jnp.take_along_axis({a}, jnp.argsort({a}, axis=-1), axis=-1)",
         "{a}[{i0}]", "{a}[jnp.array([0, 0])]", "lax.dynamic_slice_in_dim({a}, {i0}, 1)"]
TRANSFORMS = ["grad", "grad", "value_and_grad", "jvp", "vmap", "vmap", "vmap_grad", "hvp",
              "jit_grad", "grad_vmap"]
TRANSFORMS_5 = ["none", "none", "jit", "grad", "value_and_grad", "jvp", "vmap", "vmap_grad",
                "jit_grad"]


def _aval(expr: str, env: dict):
    """The ShapeDtypeStruct of `expr` with `env`'s names as abstract values, or None."""
    names = list(env)
    try:
        fn = eval(f"lambda {', '.join(names)}: {expr}",  # safe: the expression is our own source
                  {"jnp": jax.numpy, "lax": jax.lax, "J": jax, "np": np})
        return jax.eval_shape(fn, *env.values())
    except Exception:  # a step JAX refuses is not drawn
        return None


def _float(aval) -> bool:
    return isinstance(aval, jax.ShapeDtypeStruct) and aval.dtype == np.float32


class _Gen:
    def __init__(self, seed: int, tier: int) -> None:
        self.r = random.Random(seed * 7919 + tier)
        self.tier = tier
        self.n = 0

    def name(self, prefix: str = "v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def step(self, env: dict, lines: list, kinds: list[str]) -> str | None:
        """Append one drawn step `vN = expr` to `lines`; its name, or None."""
        r = self.r
        floats = [k for k, a in env.items() if _float(a)]
        ints = [k for k, a in env.items() if a.dtype == np.int32 and a.shape == ()]
        for _ in range(20):
            kind = r.choice(kinds)
            recent = floats[-3:] if r.random() < 0.7 else floats
            a = r.choice(recent)
            if kind == "unary":
                expr = r.choice(UNARY)
            elif kind == "binary":
                same = [k for k in floats if env[k].shape == env[a].shape]
                expr = r.choice(BINARY).replace("{b}", r.choice(same))
            elif kind == "shaping":
                expr = r.choice(SHAPING)
            elif kind == "bbinary":
                expr = r.choice(BBINARY).replace("{b}", r.choice(floats))
            elif kind == "mixed":
                i = r.choice(ints) if ints else "jnp.int32(1)"
                expr = (r.choice(MIXED).replace("{b}", r.choice(floats)).replace("{i0}", i)
                        .replace("{i}", i))
            else:  # control flow: the bodies' lines go first, the result is shaped as `a`
                expr = self.control(kind, a, env, lines)
                if expr is None:
                    continue
                v = self.name()
                lines.append(f"{v} = {expr}")
                env[v] = env[a]
                return v
            nd = max(len(env[a].shape), 1)
            expr = expr.replace("{a}", a).replace("{c}", r.choice(LITERALS)).replace(
                "{d}", str(r.randrange(nd)))
            aval = _aval(expr, env)
            if aval is None or not isinstance(aval, jax.ShapeDtypeStruct) or aval.size > 64:
                continue
            v = self.name()
            lines.append(f"{v} = {expr}")
            env[v] = aval
            return v
        return None

    def block(self, env: dict, lines: list, n: int, kinds: list[str]) -> str:
        """n steps; the name of the last f32 value made (or of the last f32 in env)."""
        last = [k for k, a in env.items() if _float(a)][-1]
        for _ in range(n):
            v = self.step(env, lines, kinds)
            if v is not None and _float(env[v]):
                last = v
        return last

    def body(self, params: list[str], aval, outer: dict, lines: list, indent: str) -> str:
        """A nested function `def bN(params): ...` of f32 values shaped `aval`, returning the
        same aval; it may close over `outer`'s values. Its name."""
        fn = self.name("b")
        env = {p: aval for p in params}
        closed = [k for k, a in outer.items() if _float(a) and a.shape == aval.shape]
        inner: list[str] = []
        kinds = ["unary", "unary", "binary"] + (["shaping"] if self.tier >= 2 else [])
        if closed and self.r.random() < 0.3:
            v = self.name("t")
            inner.append(f"{v} = {params[-1]} * {self.r.choice(closed)}")
            env[v] = aval
        for _ in range(self.r.randint(1, 3)):
            self.step(env, inner, kinds)
        ok = [k for k, a in env.items() if _float(a) and a.shape == aval.shape]
        out = ok[-1]
        if len(params) > 1 and self.r.random() < 0.6:
            out2 = f"{out} * {params[0]}" if out != params[0] else f"{out} + 1.0"
            inner.append(f"{out}_ = {out2}")
            out = f"{out}_"
        lines.append(f"{indent}def {fn}({', '.join(params)}):")
        lines.extend(f"{indent}    {line}" for line in inner)
        lines.append(f"{indent}    return {out}")
        return fn

    def control(self, kind: str, a: str, env: dict, lines: list) -> str | None:
        """The expression of one control-flow step on `a`, its bodies appended to `lines`."""
        r, aval = self.r, env[a]
        if not _float(aval):
            return None
        if kind == "cond":
            g, h = self.body(["c"], aval, env, lines, ""), self.body(["c"], aval, env, lines, "")
            pred = r.choice([f"jnp.sum({a}) > 2.0", f"{a}.ravel()[0] < 1.0", "True"])
            return f"lax.cond({pred}, {g}, {h}, {a})"
        if kind == "switch":
            bs = [self.body(["c"], aval, env, lines, "") for _ in range(r.randint(2, 3))]
            return (f"lax.switch(jnp.sum({a}).astype(jnp.int32), [{', '.join(bs)}], {a})")
        if kind == "fori_loop":
            g = self.body(["c"], aval, env, lines, "")
            use_i = r.random() < 0.4
            step = f"{g}(c) + i" if use_i else f"{g}(c) * 0.5"
            return f"lax.fori_loop(0, {r.randint(1, 3)}, lambda i, c: {step}, {a})"
        if kind == "while_loop":
            g = self.body(["c"], aval, env, lines, "")
            return (f"lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, {g}(s[1])), "
                    f"(0, {a}))[1]")
        if kind == "scan":
            g = self.body(["c", "xi"], aval, env, lines, "")
            h = self.body(["c"], aval, env, lines, "")
            same = [k for k in env if _float(env[k]) and env[k].shape == aval.shape]
            xs = f"jnp.stack([{a}, {r.choice(same)}])"
            form = r.choice(["carry", "ys", "both", "rev"])
            if form == "carry":
                return f"lax.scan(lambda c, xi: ({g}(c, xi), None), {a}, {xs})[0]"
            if form == "ys":
                return f"lax.scan(lambda c, xi: ({g}(c, xi), {h}(c)), {a}, {xs})[1].sum(0)"
            if form == "rev":
                return (f"lax.scan(lambda c, xi: ({g}(c, xi), {h}(xi)), {a}, {xs}, "
                        f"reverse=True)[1][0]")
            return (f"(lambda cy: cy[0] + cy[1].sum(0))(lax.scan(lambda c, xi: ({g}(c, xi), "
                    f"{h}(c)), {a}, {xs}))")
        if kind == "custom_jvp":
            g, h = self.body(["c"], aval, env, lines, ""), self.body(["c"], aval, env, lines, "")
            fn = self.name("cj")
            lines += [f"{fn} = J.custom_jvp({g})",
                      f"{fn}.defjvp(lambda p, t: ({g}(p[0]), {h}(p[0]) * t[0]))"]
            return f"{fn}({a})"
        if kind == "custom_vjp":
            g, h = self.body(["c"], aval, env, lines, ""), self.body(["c"], aval, env, lines, "")
            fn = self.name("cv")
            lines += [f"{fn} = J.custom_vjp({g})",
                      f"{fn}.defvjp(lambda x: ({g}(x), {h}(x)), lambda res, ct: (res * ct,))"]
            return f"{fn}({a})"
        if kind == "inner_jit":
            g = self.body(["c"], aval, env, lines, "")
            if r.random() < 0.4:
                return f"J.jit(lambda c: J.jit({g})(c) * 2.0)({a})"
            return f"J.jit({g})({a})"
        return None

    def kinds(self) -> list[str]:
        kinds = ["unary", "unary", "unary", "binary", "binary"]
        if self.tier >= 2:
            kinds += ["shaping", "shaping", "bbinary"]
        if self.tier >= 3:
            kinds += ["cond", "switch", "fori_loop", "while_loop", "scan", "scan",
                      "custom_jvp", "custom_vjp"]
        if self.tier >= 5:
            kinds += ["mixed", "mixed", "mixed", "inner_jit"]
        return kinds

    def program(self) -> str:
        r, tier = self.r, self.tier
        n_in = r.randint(1, 2)
        shape = r.choice(SHAPES[:2] if tier == 1 else SHAPES)
        shapes = [shape if tier == 1 else r.choice(SHAPES) for _ in range(n_in)]
        if tier == 1:
            shapes = [shape] * n_in
        env = {f"x{k}": jax.ShapeDtypeStruct(s, np.float32) for k, s in enumerate(shapes)}
        args = [f"data({s}, {k})" for k, s in enumerate(shapes)]
        params = list(env)
        pytree = tier >= 5 and r.random() < 0.4
        if tier >= 5 and r.random() < 0.6:  # an int32 scalar input
            env[f"x{n_in}"] = jax.ShapeDtypeStruct((), np.int32)
            args.append(f"data((), {n_in}, np.int32)")
            params.append(f"x{n_in}")
        lines: list[str] = []
        if pytree:  # the first two inputs as a dict
            lines.append(f"x0, {params[-1]} = p['w'], p['b']" if len(params) > 1 else
                         "x0 = p['w']")
            sig = "p"
            args = ["{'w': " + args[0] + (", 'b': " + args[-1] if len(params) > 1 else "") +
                    "}"]
        else:
            sig = ", ".join(params)
        if len(params) > 2 and pytree:
            sig, args = "p, x1", [args[0], f"data({shapes[1]}, 1)"]
        out = self.block(env, lines, r.randint(2, 6 if tier < 3 else 5), self.kinds())
        transform = ("none" if tier < 4 else r.choice(TRANSFORMS) if tier == 4
                     else r.choice(TRANSFORMS_5))
        ret = out
        if tier >= 5 and r.random() < 0.4:
            others = [k for k, a in env.items() if _float(a) and k != out]
            other = r.choice(others) if others else out
            ret = r.choice([f"({out}, {other})", f"{{'y': {out}, 'aux': [{other}]}}"])
        src = ["def program(J):", "    jnp, lax = J.numpy, J.lax", f"    def f({sig}):"]
        src += [f"        {line}" for line in lines]
        src.append(f"        return {ret}")
        src.append("    def loss(*a):")
        src.append("        return sum(jnp.sum(l) for l in J.tree_util.tree_leaves(f(*a)))")
        src.append(f"    args = ({', '.join(args)},)")
        if transform in ("vmap", "vmap_grad", "grad_vmap"):
            src.append("    args = J.tree_util.tree_map(lambda v: np.stack([v, v + 0.25]), args)")
        src.append("    return " + {
            "none": "f", "jit": "J.jit(f)", "grad": "J.grad(loss)",
            "value_and_grad": "J.value_and_grad(loss)",
            "jvp": "lambda *a: J.jvp(f, a, J.tree_util.tree_map(jnp.ones_like, a))",
            "vmap": "J.vmap(f)", "vmap_grad": "J.vmap(J.grad(loss))",
            "hvp": "lambda *a: J.jvp(J.grad(loss), a, J.tree_util.tree_map(jnp.ones_like, a))",
            "jit_grad": "J.jit(J.grad(loss))",
            "grad_vmap": "J.grad(lambda *a: jnp.sum(J.vmap(loss)(*a)))",
        }[transform] + ", args")
        return "\n".join(src) + "\n"


def generate(seed: int, tier: int) -> str:
    """The source of program `seed` of `tier` (1..5): `def program(J): ... return fn, args`."""
    return _Gen(seed, tier).program()


def jaxpr_text(src: str, J) -> str:
    ns: dict = {}
    exec(HEADER + src, ns)  # safe: the generator's own source
    fn, args = ns["program"](J)
    closed = J.make_jaxpr(fn)(*args)
    if J is jax and any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        # a tracer leaked into the jaxpr as a constant (a custom_vjp rule closing over the
        # value being differentiated): JAX raises UnexpectedTracerError when it runs it
        raise jax.errors.UnexpectedTracerError("a leaked tracer among the jaxpr's constants")
    return str(closed)


def compare(seed: int, tier: int) -> tuple[str, str, str] | None:
    """(source, JAX's text, minijax's text or the error it raised); None if JAX refuses."""
    src = generate(seed, tier)
    try:
        want = jaxpr_text(src, jax)
    except Exception:  # a program JAX refuses is not counted
        return None
    try:
        got = jaxpr_text(src, minijax)
    except Exception as e:  # counted as a difference, and reported
        got = f"raised {type(e).__name__}: {e}"
    return src, want, got


def measure(tier: int, n: int, start: int = 0) -> tuple[int, int, list]:
    """(valid programs, identical, the differing ones as (seed, src, want, got)) over the first
    n valid seeds from `start`."""
    diffs, valid, seed = [], 0, start
    while valid < n:
        res = compare(seed, tier)
        if res is not None:
            valid += 1
            if res[1] != res[2]:
                diffs.append((seed, *res))
        seed += 1
    return valid, valid - len(diffs), diffs


def first_difference(want: str, got: str) -> str:
    """The first differing line pair, with names of variables blanked: a cause's signature."""
    if got.startswith("raised"):
        return got.splitlines()[0][:120]
    for w, g in zip(want.splitlines(), got.splitlines()):
        if w != g:
            blank = lambda s: re.sub(r"\b[a-z]{1,2}\b", "_", s.strip())[:100]
            return f"{blank(w)}  ||  {blank(g)}"
    return "line count differs"


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tier", type=int, action="append")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--show", action="store_true")
    opts = ap.parse_args()
    for tier in opts.tier or [1, 2, 3, 4, 5]:
        if opts.seed is not None:
            res = compare(opts.seed, tier)
            print(generate(opts.seed, tier))
            if res:
                print("--- jax\n", res[1], "\n--- minijax\n", res[2], "\nsame:", res[1] == res[2])
            continue
        n, same, diffs = measure(tier, opts.n)
        causes = Counter(first_difference(d[2], d[3]) for d in diffs)
        if opts.show:
            for seed, src, want, got in diffs:
                print("=" * 80, f"\nseed {seed}\n{src}--- jax\n{want}\n--- minijax\n{got}")
        for cause, k in causes.most_common(12):
            print(f"  {k:3d}  {cause}")
        print(f"tier {tier}: {same}/{n} identical ({100 * same / n:.1f}%)", flush=True)
