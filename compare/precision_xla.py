"""Precision and XLA: matmul precision, accumulation types, compiler options, HLO dumps, fusion.

Runs minijax and JAX (the precision levels, `default_matmul_precision`, accumulation types and
per-function compiler options, the dot algorithm presets and HLO dumps through `XLA_FLAGS` run
under both; the op metadata that `named_scope` names give is checked by the profiling topic).
The program shows:

* `jax.lax.Precision` DEFAULT / HIGH / HIGHEST on a float32 matmul: what ends up in the
  program, what the backend does with it (a CPU: float32 at every level; a TPU: one bfloat16
  pass at DEFAULT), and (emulated with explicit bfloat16 passes) what the levels mean on
  hardware whose matrix units work in bfloat16;
* `preferred_element_type`: bfloat16 inputs with float32 accumulation, and int8 inputs with
  int32 accumulation;
* per-function XLA options via `jit(f).lower(...).compile(compiler_options={...})`, here
  switching off the fusion pass for one function only;
* dumping HLO with `--xla_dump_to`, which must happen in a fresh process because XLA reads
  `XLA_FLAGS` once, when the backend starts;
* fusion: an elementwise chain becomes a single fused kernel in the optimized HLO.

Errors are measured against NumPy float64 (or int64) references computed from the same inputs.
The compiler options and the dumps are XLA:CPU's: on another backend (a TPU) those parts run on
the CPU device, and their checks say so (`cpu_note`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import minijax
from compare._jax201 import catch, hlo_opcodes, out_folder, rel, table, time_into
from compare._modules import MODULES, child_env
from compare._report import TopicResult, code, plot

BF16 = jnp.bfloat16
F32 = jnp.float32


def chain(x):
    """A chain of elementwise operations: a natural candidate for one fused loop."""
    return jnp.tanh(jnp.sin(x) * 2.0 + jnp.cos(x)) ** 2 - x / 3.0


def bf16_passes(a: np.ndarray, b: np.ndarray, passes: int) -> jax.Array:
    """f32[m,n]: the matmul of NumPy f32[m,k] and f32[k,n] from bfloat16 pieces with float32
    accumulation, as bf16 matrix units do it.

    passes=1: round both inputs to bf16 (what DEFAULT means on a TPU).
    passes=3: split each input into a bf16 high part and a bf16 remainder, and add the three
    largest cross products (the 'bf16_3x' algorithm behind HIGH).

    The pieces are cut in NumPy, outside jit: in a jitted program XLA may fold `f32(bf16(a))`
    back to `a` (excess precision is allowed by default, `xla_allow_excess_precision`), and
    XLA:TPU does: there the remainders came out zero and 3 passes no better than one.
    """
    dot = jax.jit(lambda u, v: jnp.matmul(u, v, preferred_element_type=F32))
    a_hi, b_hi = a.astype(BF16), b.astype(BF16)
    if passes == 1:
        return dot(a_hi, b_hi)
    a_lo = (a - a_hi.astype(np.float32)).astype(BF16)
    b_lo = (b - b_hi.astype(np.float32)).astype(BF16)
    return dot(a_hi, b_hi) + dot(a_hi, b_lo) + dot(a_lo, b_hi)


def one_bf16_pass_default(platform: str) -> bool:
    """Whether a float32 matmul at precision DEFAULT is one bfloat16 pass on `platform`: on a
    TPU, whose matrix unit multiplies bf16 inputs; not on a CPU, which computes float32 dots in
    float32 at every level."""
    return platform == "tpu"


def cpu_note(platform: str) -> str:
    """What the names of the XLA:CPU parts (compiler options, dumps) add: nothing on a CPU; on
    another platform, where they run on the CPU device, that they do."""
    return "" if platform == "cpu" else " (on the CPU device)"


def _ops(hlo_text: str) -> list[str]:
    return hlo_opcodes(hlo_text)


def _entry(hlo_text: str) -> str:
    i = hlo_text.find("\nENTRY")
    return hlo_text[i + 1:] if i >= 0 else hlo_text


CHILD = textwrap.dedent("""
    import {module} as J
    jnp = J.numpy
    def chain(x):
        return jnp.tanh(jnp.sin(x) * 2.0 + jnp.cos(x)) ** 2 - x / 3.0
    x = jnp.linspace(-2.0, 2.0, {n}, dtype=jnp.float32)
    print(repr(float(J.jit(chain)(x).sum())))
""")


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Precision and XLA: matmul precision, compiler options, dumps, fusion",
                      runs="jax")  # the checks not naming minijax run JAX alone
    res.chapter = "chapters/22-precision-xla-flags.md"
    res.devices = 1
    rng = np.random.default_rng(0)
    m, k, n = (64, 256, 32) if quick else (256, 2048, 256)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(exact).max()
    a_d, b_d = jax.device_put(a), jax.device_put(b)  # timed calls take device inputs
    platform = jax.default_backend()

    rows, outs = _precision_levels(res, a, b, exact, scale, m, k, n, a_d, b_d, quick, platform)
    same_levels, emu, e1, e32, presets = _emulation_and_presets(res, outs, a, b, exact, scale,
                                                                platform)
    _describe_precision(res, n, a, b, m, k, rows, same_levels, emu, e1, e32, presets, exact,
                        scale, outs, quick, platform)

    _preferred_element_type(res, a, b, scale, rng, m, k, n)

    size, t_f, t_u = _compile_options(res, quick, platform)

    dump_dir, dumps = _hlo_dumps(res, quick, platform)
    after_entry = _describe_hlo_dump(res, dumps, dump_dir, quick, platform)

    _describe_fusion(res, after_entry, t_f, t_u, size, platform)
    if quick:  # the temporary dump folder has served its purpose
        shutil.rmtree(dump_dir, ignore_errors=True)
    return res


def _precision_levels(res, a, b, exact, scale, m, k, n, a_d, b_d, quick, platform):
    """The three precision levels: recorded in the StableHLO dot, checked against float64 (at
    DEFAULT on a TPU: of bf16 size) and timed; `default_matmul_precision` in both modules."""
    rows, outs = [], {}
    for prec in (lax.Precision.DEFAULT, lax.Precision.HIGH, lax.Precision.HIGHEST):
        f = jax.jit(lambda x, y, p=prec: jnp.matmul(x, y, precision=p))
        out = np.asarray(f(a, b), np.float64)
        outs[prec.name] = out
        text = f.lower(a, b).as_text()
        attr = re.search(r"precision = \[([A-Z]+), ([A-Z]+)\]", text)
        res.check_true(f"{prec.name}: precision recorded in the StableHLO dot",
                       attr is not None and attr.group(1) == prec.name)
        err = np.abs(out - exact).max() / scale
        if prec.name == "DEFAULT" and one_bf16_pass_default(platform):
            res.check_true(f"DEFAULT on a {platform.upper()}: one bf16 pass, a relative error of "
                           "bf16 size (between 1e-4 and 1e-2)", 1e-4 < err < 1e-2)
        else:
            res.check(f"{prec.name}: f32 matmul vs float64 reference", out, exact,
                      rtol=1e-4, atol=1e-4 * scale)
        ms = time_into(res, f"f32 matmul {m}x{k}x{n}, precision={prec.name}",
                       lambda f=f: f(a_d, b_d), quick)
        rows.append([prec.name, attr.group(0) if attr else "-", f"{err:.2e}", f"{ms:.3g}"])
    with jax.default_matmul_precision("highest"):
        ctx_text = jax.jit(jnp.matmul).lower(a, b).as_text()
    res.check_true("default_matmul_precision('highest') changes the recorded precision",
                   "precision = [HIGHEST, HIGHEST]" in ctx_text)
    with minijax.default_matmul_precision("highest"):
        m_text = minijax.jit(minijax.numpy.matmul).lower(a, b).as_text()
    recorded = re.compile(r"precision = \[[A-Z]+, [A-Z]+\]")
    res.check_true("minijax's default_matmul_precision('highest') records the precision JAX's "
                   "does", recorded.findall(m_text) == recorded.findall(ctx_text) != [])
    return rows, outs


def _emulation_and_presets(res, outs, a, b, exact, scale, platform):
    """TPU-style bf16 passes emulated with explicit bf16 pieces (on a TPU, DEFAULT checked
    equal to one pass), and each `DotAlgorithmPreset` under both modules: refused or computed
    alike."""
    same_levels = all(np.array_equal(outs["DEFAULT"], o) for o in outs.values())
    emu, emu_outs = {}, {}
    highest = jax.jit(lambda x, y: jnp.matmul(x, y, precision="highest"))
    for label, fn in (("1 bf16 pass (TPU DEFAULT)", lambda x, y: bf16_passes(x, y, 1)),
                      ("3 bf16 passes (TPU HIGH, bf16_3x)", lambda x, y: bf16_passes(x, y, 3)),
                      ("float32 (HIGHEST)", highest)):
        emu_outs[label] = np.asarray(fn(a, b), np.float64)
        emu[label] = np.abs(emu_outs[label] - exact).max() / scale
    e1, e3, e32 = emu.values()
    res.check_true("emulated 1-pass bf16 is much less accurate than 3 passes", e1 > 20 * e3)
    # nearer float32 than one pass on a log scale: e3 / e32 < e1 / e3 (a fixed factor over
    # float32 would depend on how the backend accumulates: 19x at the quick size on a CPU)
    res.check_true("3 bf16 passes win back most of float32's digits (error nearer float32's "
                   "than one pass's, on a log scale)", e3 * e3 < e1 * max(e32, 1e-12))
    if one_bf16_pass_default(platform):
        res.check(f"DEFAULT on a {platform.upper()} equals the emulated 1 bf16 pass (float32 "
                  "tolerance)", outs["DEFAULT"], emu_outs["1 bf16 pass (TPU DEFAULT)"],
                  rtol=1e-4, atol=1e-4 * scale)
    presets = []
    for name in ("DEFAULT", "F32_F32_F32", "BF16_BF16_F32", "BF16_BF16_F32_X3",
                 "BF16_BF16_F32_X6", "F16_F16_F16", "F64_F64_F64", "TF32_TF32_F32",
                 "TF32_TF32_F32_X3", "F16_F16_F32"):
        got = {}
        for label, J in MODULES:
            fn = J.jit(lambda x, y, name=name, J=J: J.numpy.matmul(x, y, precision=name))
            kind, msg = catch(lambda fn=fn: np.asarray(fn(a, b)))
            got[label] = (kind, msg, None if kind else np.asarray(fn(a, b)),
                          None if kind else _algorithm_of(fn.lower(a, b).as_text()))
        (kind, msg, out, alg), (m_kind, _, m_out, m_alg) = got["jax"], got["minijax"]
        with res.running("both"):
            if kind or m_kind:
                res.check_true(f"preset {name}: minijax refuses it as JAX does "
                               f"({kind or 'runs'} / {m_kind or 'runs'})", kind == m_kind)
            else:
                res.check(f"preset {name}: minijax's result equals JAX's", m_out, out,
                          rtol=0, atol=0)
                res.check_true(f"preset {name}: the same `algorithm` attribute on the op",
                               m_alg == alg)
        err = "-" if kind else f"{np.abs(out.astype(np.float64) - exact).max() / scale:.2e}"
        presets.append([f"`{name}`", "accepted" if kind is None else
                        f"{kind}: {msg.splitlines()[0][:90]}", err,
                        "same" if kind == m_kind else f"differs ({m_kind or 'runs'})"])
    return same_levels, emu, e1, e32, presets


def _describe_precision(res, n, a, b, m, k, rows, same_levels, emu, e1, e32, presets, exact,
                        scale, outs, quick, platform):
    """The precision section and its error plot, with minijax's own precision checks between
    them."""
    this = f"this {platform.upper()}"
    if one_bf16_pass_default(platform):
        levels = (
            f"On {this} they are different algorithms on its matrix unit, which multiplies "
            "bfloat16 inputs: DEFAULT is one bf16 pass (an error of bf16 size, and equal to "
            "the one-pass emulation below: both checked), HIGH three passes (`bf16_3x`) and "
            "HIGHEST float32 accuracy from six. Emulating the passes with explicit bfloat16 "
            "pieces and float32 accumulation:\n\n")
        ignored = (
            f"On {this} the accepted bf16 presets name the passes the levels make: compare the "
            "errors of `BF16_BF16_F32`, `_X3` and `_X6` with DEFAULT's, HIGH's and HIGHEST's "
            "above.")
    else:
        levels = (
            f"On {this} the three levels give "
            f"{'bit-identical' if same_levels else 'different'} results: XLA:CPU computes "
            "float32 dots in float32 whatever you ask. Matrix units on TPUs (and TF32 tensor "
            "cores on recent NVIDIA GPUs) work on narrower inputs, and there the levels mean "
            "different algorithms. Emulating them here with explicit bfloat16 passes and "
            "float32 accumulation:\n\n")
        ignored = (
            "An accepted preset whose error equals float32's was *ignored*: the CPU "
            "computed in float32 whatever the preset asked for. `F16_F16_F16` and `F64_F64_F64` "
            "are not ignored: their operand type differs from the inputs', so the lowering "
            "itself converts the operands (and the result back).")
    res.sections.append(
        "### Matmul precision levels\n\n"
        f"`jnp.matmul(a, b, precision=...)` for float32 a: {m}x{k}, b: {k}x{n}; error is "
        "max |result - float64 result| / max |float64 result|:\n\n"
        + table(["precision", "in the StableHLO", "relative error", "median ms"], rows)
        + "\n\nThe level is only a request written into the `dot_general` op (and "
        "`jax.default_matmul_precision(...)` sets it for a whole region). What it buys is "
        "backend-specific. " + levels
        + table(["algorithm", "relative error"], [[kk_, f"{v:.2e}"] for kk_, v in emu.items()])
        + "\n\nOne bf16 pass keeps only 8 significant bits per input, so its error is "
        f"{e1 / max(e32, 1e-12):.0f}x float32's here; splitting each input into a high and "
        "a low bf16 part and adding three products recovers nearly full float32 accuracy "
        "for 3x the matrix-unit work. Named algorithms (`jax.lax.DotAlgorithmPreset`) can "
        f"also be passed as `precision=`; which ones a backend accepts varies. On {this}:\n\n"
        + table(["preset", f"{platform.upper()} backend", "relative error", "minijax"], presets)
        + "\n\n" + ignored + " minijax takes the same presets "
        "(`minijax/lax/lax.py: _dot_algorithm_types`), writes the same `algorithm` attribute "
        "on the `dot_general` op and refuses the same ones (checked above, bit for bit)."
    )
    _minijax_precision(res, a, b, exact, scale, outs, quick, platform)
    bars = [(label, v) for label, v in emu.items()] + [
        (f"preset {r[0].strip('`')}", float(r[2])) for r in presets if r[2] != "-"]
    res.sections.append("### Precision error vs algorithm\n\n" + plot(
        "precision_error", lambda fig: _bars(fig, bars, "relative error (log scale)",
                                             log=True), figsize=(8, 4), quick=quick))


def _preferred_element_type(res, a, b, scale, rng, m, k, n):
    """bf16 and int8 matmuls with and without a wider `preferred_element_type`: checks and
    section."""
    ab, bb = jnp.asarray(a, BF16), jnp.asarray(b, BF16)
    exact_bf = np.asarray(ab, np.float64) @ np.asarray(bb, np.float64)
    o_bf = jax.jit(jnp.matmul)(ab, bb)
    o_f32 = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=F32))(ab, bb)
    err_bf = np.abs(np.asarray(o_bf, np.float64) - exact_bf).max() / scale
    err_f32 = np.abs(np.asarray(o_f32, np.float64) - exact_bf).max() / scale
    res.check_true("bf16 x bf16 -> bf16 result dtype", o_bf.dtype == BF16)
    res.check_true("preferred_element_type=float32 -> float32 result", o_f32.dtype == F32)
    res.check("bf16 inputs, f32 accumulation vs exact product of the bf16 values", o_f32,
              exact_bf, rtol=1e-4, atol=1e-4 * scale, dtype=F32)  # exact_bf: float64
    res.check_true("bf16 output is much coarser than f32 accumulation", err_bf > 10 * err_f32)
    ai = rng.integers(-128, 128, (m, k)).astype(np.int8)
    bi = rng.integers(-128, 128, (k, n)).astype(np.int8)
    exact_i = ai.astype(np.int64) @ bi.astype(np.int64)
    o_i8 = np.asarray(jax.jit(jnp.matmul)(ai, bi)).astype(np.int64)
    o_i32 = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.int32))(ai, bi)
    res.check("int8 inputs, int32 accumulation is exact", np.asarray(o_i32), exact_i,
              rtol=0, atol=0, dtype=np.int32)  # exact_i: int64
    wrapped = int(np.sum(o_i8 != exact_i))
    res.check_true("int8 x int8 -> int8 wraps around", wrapped > 0)
    res.sections.append(
        "### preferred_element_type: the accumulator's type\n\n"
        "`preferred_element_type` sets the dtype the dot produces, which is also the type "
        "the hardware accumulates in. Relative to the exact product of the same bf16 values:"
        "\n\n" + table(["inputs", "result dtype", "relative error / mismatches"], [
            ["bf16 x bf16", "bfloat16", f"{err_bf:.2e}"],
            ["bf16 x bf16, preferred_element_type=float32", "float32", f"{err_f32:.2e}"],
            ["int8 x int8", "int8", f"{wrapped} of {exact_i.size} entries wrong (wrapped)"],
            ["int8 x int8, preferred_element_type=int32", "int32", "exact"],
        ])
        + "\n\nThe usual mixed-precision recipe is the second row: store and move bf16 (half "
        "the bytes), but accumulate sums of many products in float32. For quantized int8 "
        f"matmuls the int32 accumulator is not optional: sums of {k} products of int8 values "
        "overflow int8 immediately."
    )


def _compile_options(res, quick, platform):
    """The same lowered `chain` compiled with per-function XLA:CPU options (on the CPU device
    off a CPU): values, kernel counts, timings, a misspelt option, and their section; the fused
    and unfused chain in both modules on this process's device."""
    size = 256 if quick else 2048
    on = cpu_note(platform)
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        x = jnp.linspace(-2.0, 2.0, size * size, dtype=F32).reshape(size, size)
        lowered = jax.jit(chain).lower(x)
        fused = lowered.compile()
        unfused = lowered.compile(compiler_options={"xla_disable_hlo_passes": "fusion"})
        fast_math = lowered.compile(compiler_options={"xla_cpu_enable_fast_math": True})
        x64 = np.asarray(x, np.float64)
        ref = np.tanh(np.sin(x64) * 2.0 + np.cos(x64)) ** 2 - x64 / 3.0
        for label, c in (("default", fused), ("fusion pass disabled", unfused),
                         ("xla_cpu_enable_fast_math", fast_math)):
            res.check(f"compiled with {label}{on}: values", c(x), ref, rtol=1e-5, atol=1e-5,
                      dtype=F32)  # ref: float64 NumPy
        n_fused = _ops(_entry(fused.as_text())).count("fusion")
        n_unfused = _ops(_entry(unfused.as_text())).count("fusion")
        res.check_true(f"disabling fusion for this one function gives more kernels{on}",
                       n_unfused > n_fused)
        t_f = time_into(res, f"chain {size}x{size}: default (fused){on}", lambda: fused(x), quick)
        t_u = time_into(res, f"chain {size}x{size}: fusion disabled{on}", lambda: unfused(x),
                        quick)
    fusion_ms, counts = _minijax_fusion(res, np.asarray(x), ref, quick, platform)
    with jax.default_device(cpu):
        kind_bad, msg_bad = catch(
            lambda: lowered.compile(compiler_options={"xla_no_such_flag": 1}))
        res.check_true(f"an unknown compiler option is rejected{on}", kind_bad is not None)
        via_jit = jax.jit(chain, compiler_options={"xla_disable_hlo_passes": "fusion"})
        res.check(f"jax.jit(..., compiler_options=...) form{on}", via_jit(x), ref, rtol=1e-5,
                  atol=1e-5, dtype=F32)
    elsewhere = "" if not on else (
        f" On this {platform.upper()} they ran on the CPU device "
        "(`jax.default_device(jax.devices('cpu')[0])`): `xla_cpu_enable_fast_math` and the pass "
        f"named `fusion` are XLA:CPU's. Compiled for the {platform.upper()} (below, in both "
        f"modules), the chain has {counts[0]} kernel(s), and {counts[1]} with that pass off.")
    res.sections.append(
        "### XLA options for one function\n\n"
        "`XLA_FLAGS` applies to the whole process and is read once. For a single function, "
        "pass options when compiling: `jax.jit(f).lower(x).compile(compiler_options={...})`, "
        "or `jax.jit(f, compiler_options={...})`. Keys are XLA debug-option names; values "
        "are parsed like the flags. Here the same lowered `chain` is compiled three ways:"
        + elsewhere + "\n\n"
        + table(["compile options", "kernels (fusion instrs) in ENTRY", "median ms"], [
            ["(none)", n_fused, f"{t_f:.3g}"],
            ["`{'xla_disable_hlo_passes': 'fusion'}`", n_unfused, f"{t_u:.3g}"],
            ["`{'xla_cpu_enable_fast_math': True}`",
             _ops(_entry(fast_math.as_text())).count("fusion"), "-"],
        ])
        + "\n\nWith the fusion pass off, each elementwise op becomes its own kernel (XLA:CPU "
        "still wraps single ops as `wrapped_*` fusions), so every intermediate is written "
        "to memory and read back. All three give the same values (checked). A misspelt "
        "option fails loudly instead of being ignored:\n\n" + code(f"{kind_bad}: {msg_bad}")
        + "\n\nminijax's `Lowered.compile(compiler_options=...)` passes the options to XLA "
        "the same way; the fused and unfused chain in both modules, inputs on the device "
        f"(the paired rows of the timings table{'' if not on else ', on the ' + platform.upper()}"
        "):\n\n"
        + table(["module", "fused ms", "fusion off ms"],
                [[mod, f"{v[0]:.3g}", f"{v[1]:.3g}"] for mod, v in fusion_ms.items()])
        + "\n\n" + plot("fusion_on_off", lambda fig: _bars(
            fig, [(f"{mod} {what}", v[i]) for mod, v in fusion_ms.items()
                  for i, what in enumerate(("fused", "fusion off"))], "median ms"),
            quick=quick)
    )
    return size, t_f, t_u


def _hlo_dumps(res, quick, platform):
    """Each module's `chain` run in a fresh Python with `--xla_dump_to`: exit, value, files and
    the optimized ENTRY compared. Off a CPU the fresh Python runs on the CPU backend
    (`JAX_PLATFORMS=cpu`): only one process can hold a TPU, and this one does."""
    dump_dir = out_folder("xla_dump", quick)
    child_n = 1000
    xs = np.linspace(-2.0, 2.0, child_n, dtype=np.float32)
    on = cpu_note(platform)
    with jax.default_device(jax.devices("cpu")[0]):
        want = float(np.asarray(jax.jit(chain)(xs)).sum())
    dumps = {}  # module -> (return code, files, before ops, after ENTRY ops, after ENTRY text)
    for mod in ("jax", "minijax"):
        mod_dir = dump_dir / mod
        env = dict(os.environ)
        env["XLA_FLAGS"] = (f"--xla_dump_to={mod_dir} --xla_dump_hlo_as_text "
                            "--xla_dump_hlo_module_re=jit_chain")
        env = child_env(env)
        proc = subprocess.run([sys.executable, "-c", CHILD.format(module=mod, n=child_n)],
                              env=env, capture_output=True, text=True, timeout=120)
        with res.running("both" if mod == "minijax" else "jax"):
            res.check_true(f"{mod}: dump subprocess{on} exited cleanly", proc.returncode == 0)
            got = (float(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                   else float("nan"))
            res.check(f"{mod}: the subprocess computed the same value", np.float64(got),
                      np.float64(want), rtol=1e-6, atol=1e-6)
        files = sorted(p.name for p in mod_dir.iterdir() if p.is_file()) \
            if mod_dir.exists() else []
        before = [f for f in files if f.endswith("before_optimizations.txt")]
        after = [f for f in files if f.endswith("after_optimizations.txt")]
        b_ops, a_ops, a_entry = [], [], ""
        if before and after:
            b_ops = _ops((mod_dir / before[0]).read_text())
            a_text = (mod_dir / after[0]).read_text()
            a_ops, a_entry = _ops(_entry(a_text)), _entry(a_text).split("\n}\n")[0] + "\n}"
        dumps[mod] = (proc.returncode, files, b_ops, a_ops, a_entry)
        with res.running("both" if mod == "minijax" else "jax"):
            res.check_true(f"{mod}: the dump has before- and after-optimization HLO for "
                           "jit_chain", bool(before) and bool(after))
            res.check_true(f"{mod}: after optimization the chain is one fusion{on}",
                           a_ops.count("fusion") == 1)
    with res.running("both"):
        res.check_true("the optimized ENTRY computations have the same instructions in both "
                       f"modules{on}", dumps["jax"][3] == dumps["minijax"][3] != [])
    return dump_dir, dumps


def _describe_hlo_dump(res, dumps, dump_dir, quick, platform):
    """The section on dumping HLO: the flags, the files JAX's run wrote and the instruction
    counts."""
    files, after_entry = dumps["jax"][1], dumps["jax"][4]
    dump_rows = []
    for mod, (_, _, b_ops, a_ops, _) in dumps.items():
        for label, ops in (("before optimizations", b_ops), ("after (ENTRY only)", a_ops)):
            counts = {o: ops.count(o) for o in sorted(set(ops)) if o != "parameter"}
            dump_rows.append([mod, label, len(ops),
                              ", ".join(f"{o} x{c}" for o, c in counts.items())])
    res.sections.append(
        "### Dumping HLO (in a subprocess)\n\n"
        "`XLA_FLAGS` is read when the XLA backend starts, and this process started long ago "
        + ("(with 8 fake devices). So the program runs a fresh Python per module with"
           if platform == "cpu" else
           f"(on the {platform.upper()}). So the program runs a fresh Python per module, on the "
           "CPU backend (`JAX_PLATFORMS=cpu`: only one process can hold a TPU, and this one "
           "does), with")
        + "\n\n"
        + code(("" if platform == "cpu" else "JAX_PLATFORMS=cpu ")
               + f"XLA_FLAGS='--xla_dump_to={rel(dump_dir) if not quick else '<tmp>'}/<module> "
               "--xla_dump_hlo_as_text --xla_dump_hlo_module_re=jit_chain'")
        + "\n\nand a tiny script that jits `chain` with that module (exit codes: "
        + ", ".join(f"{m} {d[0]}" for m, d in dumps.items())
        + "; both computed the same sum as this process). The flag belongs to XLA, not to "
        "JAX: minijax hands its StableHLO to the same compiler, which dumps it the same way, "
        "under the same module name (`jit_chain`). `--xla_dump_hlo_module_re` keeps only "
        "modules whose name matches (otherwise every little `jit` JAX runs internally gets "
        "dumped too). Files JAX's run wrote:\n\n" + code("\n".join(files))
        + "\n\n`*.before_optimizations.txt` is the HLO as the module handed it over, "
        "`*.cpu_after_optimizations.txt` what XLA:CPU will run; the buffer-assignment and "
        "memory-usage reports, the LLVM IR (`.ll`) and object files (`.o`) show the later "
        "stages. Instruction counts:\n\n"
        + table(["module", "HLO", "instructions", "opcodes"], dump_rows)
    )
    return after_entry


def _describe_fusion(res, after_entry, t_f, t_u, size, platform):
    """The fusion section: the optimized ENTRY from the dump and the fused / unfused timings."""
    res.sections.append(
        "### Fusion\n\n"
        "`chain(x) = tanh(sin(x) * 2 + cos(x)) ** 2 - x / 3` is a dozen HLO instructions, each "
        "a full pass over the array if run one by one. XLA's fusion pass merges producer-"
        "consumer elementwise ops into a single loop that reads x once and writes the result "
        "once; intermediates live in registers. The optimized entry computation from the "
        "dump:\n\n" + code(after_entry or "(dump missing)")
        + f"\n\nOne `fusion` instruction (`kind=kLoop`) calls a fused computation holding all "
        "the arithmetic. Timed above: fused "
        f"{t_f:.3g} ms against {t_u:.3g} ms with the fusion pass disabled "
        f"({size}x{size} float32{cpu_note(platform)}). Fusion is also why counting jaxpr "
        "equations says little about runtime: what matters is how many kernels and how many "
        "bytes of memory traffic remain after XLA is done."
    )


def _bars(fig, bars, ylabel: str, log: bool = False) -> None:
    ax = fig.add_subplot()
    ax.bar(range(len(bars)), [v for _, v in bars])
    ax.set_xticks(range(len(bars)), [name for name, _ in bars], rotation=30, ha="right",
                  fontsize=8)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")


def _algorithm_of(text: str) -> str:
    """The `algorithm = <...>` attribute of the first dot_general in StableHLO text ("" if
    none)."""
    line = next((ln for ln in text.splitlines() if "dot_general" in ln), "")
    return line.split("algorithm = ", 1)[1].split(">")[0] if "algorithm = " in line else ""


def _minijax_precision(res: TopicResult, a, b, exact, scale, jax_outs, quick: bool,
                       platform: str) -> None:
    """The three precision levels in minijax (via lax.dot_general): equal to JAX's results on
    the same device; minijax writes the level into its program as JAX does."""
    dn = (((1,), (0,)), ((), ()))
    rows = []
    for prec in (lax.Precision.DEFAULT, lax.Precision.HIGH, lax.Precision.HIGHEST):
        mprec = minijax.lax.Precision[prec.name]
        f = minijax.jit(lambda x, y, p=mprec: minijax.lax.dot_general(x, y, dn, precision=p))
        out = np.asarray(f(a, b), np.float64)
        res.check(f"minijax {prec.name}: equals JAX's result", out, jax_outs[prec.name],
                  rtol=1e-6, atol=1e-6 * scale)
        text = f.lower(a, b).as_text()
        rows.append([prec.name, "precision = [" in text,
                     f"{np.abs(out - exact).max() / scale:.2e}"])
    bf = minijax.numpy.bfloat16
    mixed = minijax.jit(lambda x, y: minijax.lax.dot_general(
        x.astype(bf), y.astype(bf), dn, preferred_element_type=np.float32))(a, b)
    ref = jax.jit(lambda x, y: jnp.matmul(x.astype(BF16), y.astype(BF16),
                                          preferred_element_type=F32))(a, b)
    res.check("minijax bf16 inputs, f32 accumulation: equals JAX's", np.asarray(mixed),
              np.asarray(ref), rtol=1e-6, atol=1e-6 * scale)
    res.check_true("minijax preferred_element_type=float32 gives float32", mixed.dtype == F32)
    res.sections.append(
        "### The same levels in minijax\n\n"
        "`minijax.lax.dot_general(a, b, dn, precision=...)` (`jnp.matmul` passes its "
        "`precision` on to it). minijax keeps the level as a param and lowers it as JAX does; "
        + (f"on this {platform.upper()} each level computes what JAX's does (checked), one, "
           "three and six bf16 passes, as the errors show:\n\n"
           if one_bf16_pass_default(platform) else
           f"on this {platform.upper()} that changes nothing, as the errors show:\n\n")
        + table(["precision", "written into the StableHLO", "relative error"], rows)
        + "\n\nbf16 inputs with float32 accumulation (`preferred_element_type`) agree with "
        "JAX's to rounding (checked).")


def _minijax_fusion(res: TopicResult, x, ref, quick: bool, platform: str
                    ) -> tuple[dict[str, tuple[float, float]], tuple[int, int]]:
    """The chain fused and with fusion off, in both modules, timed with inputs on the device;
    returns the timings and JAX's kernel counts (fused, fusion off). On a CPU each module's
    values are checked against float64 and fusion off must add kernels; elsewhere (XLA:CPU's
    pass named `fusion`, XLA:TPU's own transcendentals) minijax is checked against JAX."""
    out, got = {}, {}
    for name, J in MODULES:
        jnp_ = J.numpy
        fn = lambda t, jnp_=jnp_: jnp_.tanh(jnp_.sin(t) * 2.0 + jnp_.cos(t)) ** 2 - t / 3.0
        xd = J.device_put(x)
        lowered = J.jit(fn).lower(xd)
        fused = lowered.compile()
        unfused = lowered.compile(compiler_options={"xla_disable_hlo_passes": "fusion"})
        n_f = _ops(_entry(fused.as_text())).count("fusion")
        n_u = _ops(_entry(unfused.as_text())).count("fusion")
        got[name] = np.asarray(fused(xd)), np.asarray(unfused(xd)), (n_f, n_u)
        if platform == "cpu":
            res.check(f"{name}: fusion off gives the same values", got[name][1], ref,
                      rtol=1e-5, atol=1e-5, dtype=np.float32)  # ref: float64 NumPy
            res.check_true(f"{name}: fusion off gives more kernels ({n_f} -> {n_u})", n_u > n_f)
        out[name] = tuple(time_into(res, f"chain {what}: {name}",
                                    lambda c=c, J=J, xd=xd: J.block_until_ready(c(xd)), quick)
                          for what, c in (("fused", fused), ("fusion off", unfused)))
    if platform != "cpu":
        P, (j_f, j_u, j_n), (m_f, m_u, m_n) = platform.upper(), got["jax"], got["minijax"]
        with res.running("both"):
            res.check(f"on the {P}, minijax's fused chain equals JAX's", m_f, j_f, rtol=1e-6,
                      atol=1e-6)
            res.check(f"on the {P}, minijax's chain with fusion off equals JAX's", m_u, j_u,
                      rtol=1e-6, atol=1e-6)
            res.check_true(f"on the {P}, minijax's programs have JAX's kernel counts (fused "
                           f"{j_n[0]}, fusion off {j_n[1]})", m_n == j_n)
    return out, got["jax"][2]
