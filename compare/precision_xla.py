"""Precision and XLA: matmul precision, accumulation types, compiler options, HLO dumps, fusion.

Runs minijax and JAX (the precision levels, `default_matmul_precision`, accumulation types and
per-function compiler options, the dot algorithm presets and HLO dumps through `XLA_FLAGS` run
under both; the op metadata that `named_scope` names give is checked by the profiling topic).
The program shows:

* `jax.lax.Precision` DEFAULT / HIGH / HIGHEST on a float32 matmul: what ends up in the
  program, what the CPU does with it, and (emulated with explicit bfloat16 passes) what the
  levels mean on hardware whose matrix units work in bfloat16;
* `preferred_element_type`: bfloat16 inputs with float32 accumulation, and int8 inputs with
  int32 accumulation;
* per-function XLA options via `jit(f).lower(...).compile(compiler_options={...})`, here
  switching off the fusion pass for one function only;
* dumping HLO with `--xla_dump_to`, which must happen in a fresh process because XLA reads
  `XLA_FLAGS` once, when the backend starts;
* fusion: an elementwise chain becomes a single fused kernel in the optimized HLO.

Errors are measured against NumPy float64 (or int64) references computed from the same inputs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import minijax
from compare._jax201 import catch, hlo_opcodes, out_folder, rel, table, time_into
from compare._modules import MODULES
from compare._report import TopicResult, code, plot

BF16 = jnp.bfloat16
F32 = jnp.float32


def chain(x):
    """A chain of elementwise operations: a natural candidate for one fused loop."""
    return jnp.tanh(jnp.sin(x) * 2.0 + jnp.cos(x)) ** 2 - x / 3.0


def bf16_passes(a, b, passes):
    """Matmul from bfloat16 pieces with float32 accumulation, as bf16 matrix units do it.

    passes=1: round both inputs to bf16 (what DEFAULT means on a TPU).
    passes=3: split each input into a bf16 high part and a bf16 remainder, and add the three
    largest cross products (the 'bf16_3x' algorithm behind HIGH).
    """
    a_hi, b_hi = a.astype(BF16), b.astype(BF16)
    dot = lambda u, v: jnp.matmul(u, v, preferred_element_type=F32)
    if passes == 1:
        return dot(a_hi, b_hi)
    a_lo = (a - a_hi.astype(F32)).astype(BF16)
    b_lo = (b - b_hi.astype(F32)).astype(BF16)
    return dot(a_hi, b_hi) + dot(a_hi, b_lo) + dot(a_lo, b_hi)


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

    rows, outs = _precision_levels(res, a, b, exact, scale, m, k, n, a_d, b_d, quick)
    same_on_cpu, emu, e1, e32, presets = _emulation_and_presets(res, outs, a, b, exact, scale)
    _describe_precision(res, n, a, b, m, k, rows, same_on_cpu, emu, e1, e32, presets, exact, scale,
                        outs, quick)

    _preferred_element_type(res, a, b, scale, rng, m, k, n)

    size, t_f, t_u = _compile_options(res, quick)

    dump_dir, dumps = _hlo_dumps(res, quick)
    after_entry = _describe_hlo_dump(res, dumps, dump_dir, quick)

    _describe_fusion(res, after_entry, t_f, t_u, size)
    if quick:  # the temporary dump folder has served its purpose
        shutil.rmtree(dump_dir, ignore_errors=True)
    return res


def _precision_levels(res, a, b, exact, scale, m, k, n, a_d, b_d, quick):
    """The three precision levels: recorded in the StableHLO dot, checked against float64 and
    timed; `default_matmul_precision` in both modules."""
    rows, outs = [], {}
    for prec in (lax.Precision.DEFAULT, lax.Precision.HIGH, lax.Precision.HIGHEST):
        f = jax.jit(lambda x, y, p=prec: jnp.matmul(x, y, precision=p))
        out = np.asarray(f(a, b), np.float64)
        outs[prec.name] = out
        text = f.lower(a, b).as_text()
        attr = re.search(r"precision = \[([A-Z]+), ([A-Z]+)\]", text)
        res.check_true(f"{prec.name}: precision recorded in the StableHLO dot",
                       attr is not None and attr.group(1) == prec.name)
        res.check(f"{prec.name}: f32 matmul vs float64 reference", out, exact,
                  rtol=1e-4, atol=1e-4 * scale)
        ms = time_into(res, f"f32 matmul {m}x{k}x{n}, precision={prec.name}",
                       lambda f=f: f(a_d, b_d), quick)
        rows.append([prec.name, attr.group(0) if attr else "-",
                     f"{np.abs(out - exact).max() / scale:.2e}", f"{ms:.3g}"])
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


def _emulation_and_presets(res, outs, a, b, exact, scale):
    """TPU-style bf16 passes emulated on this CPU, and each `DotAlgorithmPreset` under both
    modules: refused or computed alike."""
    same_on_cpu = all(np.array_equal(outs["DEFAULT"], o) for o in outs.values())
    emu = {}
    for label, fn in (("1 bf16 pass (TPU DEFAULT)", lambda x, y: bf16_passes(x, y, 1)),
                      ("3 bf16 passes (TPU HIGH, bf16_3x)", lambda x, y: bf16_passes(x, y, 3)),
                      ("float32 (HIGHEST)", lambda x, y: jnp.matmul(x, y, precision="highest"))):
        out = np.asarray(jax.jit(fn)(a, b), np.float64)
        emu[label] = np.abs(out - exact).max() / scale
    e1, e3, e32 = emu.values()
    res.check_true("emulated 1-pass bf16 is much less accurate than 3 passes", e1 > 20 * e3)
    res.check_true("3 bf16 passes come within 20x of float32", e3 < 20 * max(e32, 1e-9))
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
    return same_on_cpu, emu, e1, e32, presets


def _describe_precision(res, n, a, b, m, k, rows, same_on_cpu, emu, e1, e32, presets, exact, scale,
                        outs, quick):
    """The precision section and its error plot, with minijax's own precision checks between
    them."""
    res.sections.append(
        "### Matmul precision levels\n\n"
        f"`jnp.matmul(a, b, precision=...)` for float32 a: {m}x{k}, b: {k}x{n}; error is "
        "max |result - float64 result| / max |float64 result|:\n\n"
        + table(["precision", "in the StableHLO", "relative error", "median ms"], rows)
        + "\n\nThe level is only a request written into the `dot_general` op (and "
        "`jax.default_matmul_precision(...)` sets it for a whole region). What it buys is "
        "backend-specific. On this CPU the three levels give "
        f"{'bit-identical' if same_on_cpu else 'different'} results: XLA:CPU computes "
        "float32 dots in float32 whatever you ask. Matrix units on TPUs (and TF32 tensor "
        "cores on recent NVIDIA GPUs) work on narrower inputs, and there the levels mean "
        "different algorithms. Emulating them here with explicit bfloat16 passes and "
        "float32 accumulation:\n\n"
        + table(["algorithm", "relative error"], [[kk_, f"{v:.2e}"] for kk_, v in emu.items()])
        + "\n\nOne bf16 pass keeps only 8 significant bits per input, so its error is "
        f"{e1 / max(e32, 1e-12):.0f}x float32's here; splitting each input into a high and "
        "a low bf16 part and adding three products recovers nearly full float32 accuracy "
        "for 3x the matrix-unit work. Named algorithms (`jax.lax.DotAlgorithmPreset`) can "
        "also be passed as `precision=`; which ones a backend accepts varies. On this CPU:\n\n"
        + table(["preset", "CPU backend", "relative error", "minijax"], presets)
        + "\n\nAn accepted preset whose error equals float32's was *ignored*: the CPU "
        "computed in float32 whatever the preset asked for. `F16_F16_F16` and `F64_F64_F64` "
        "are not ignored: their operand type differs from the inputs', so the lowering itself "
        "converts the operands (and the result back). minijax takes the same presets "
        "(`minijax/lax/lax.py: _dot_algorithm_types`), writes the same `algorithm` attribute "
        "on the `dot_general` op and refuses the same ones (checked above, bit for bit)."
    )
    _minijax_precision(res, a, b, exact, scale, outs, quick)
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


def _compile_options(res, quick):
    """The same lowered `chain` compiled with per-function XLA options: values, kernel counts,
    timings, a misspelt option, and their section."""
    size = 256 if quick else 2048
    x = jnp.linspace(-2.0, 2.0, size * size, dtype=F32).reshape(size, size)
    lowered = jax.jit(chain).lower(x)
    fused = lowered.compile()
    unfused = lowered.compile(compiler_options={"xla_disable_hlo_passes": "fusion"})
    fast_math = lowered.compile(compiler_options={"xla_cpu_enable_fast_math": True})
    x64 = np.asarray(x, np.float64)
    ref = np.tanh(np.sin(x64) * 2.0 + np.cos(x64)) ** 2 - x64 / 3.0
    for label, c in (("default", fused), ("fusion pass disabled", unfused),
                     ("xla_cpu_enable_fast_math", fast_math)):
        res.check(f"compiled with {label}: values", c(x), ref, rtol=1e-5, atol=1e-5,
                  dtype=F32)  # ref: float64 NumPy
    n_fused = _ops(_entry(fused.as_text())).count("fusion")
    n_unfused = _ops(_entry(unfused.as_text())).count("fusion")
    res.check_true("disabling fusion for this one function gives more kernels",
                   n_unfused > n_fused)
    t_f = time_into(res, f"chain {size}x{size}: default (fused)", lambda: fused(x), quick)
    t_u = time_into(res, f"chain {size}x{size}: fusion disabled", lambda: unfused(x), quick)
    fusion_ms = _minijax_fusion(res, np.asarray(x), ref, quick)
    kind_bad, msg_bad = catch(lambda: lowered.compile(compiler_options={"xla_no_such_flag": 1}))
    res.check_true("an unknown compiler option is rejected", kind_bad is not None)
    via_jit = jax.jit(chain, compiler_options={"xla_disable_hlo_passes": "fusion"})
    res.check("jax.jit(..., compiler_options=...) form", via_jit(x), ref, rtol=1e-5, atol=1e-5,
              dtype=F32)
    res.sections.append(
        "### XLA options for one function\n\n"
        "`XLA_FLAGS` applies to the whole process and is read once. For a single function, "
        "pass options when compiling: `jax.jit(f).lower(x).compile(compiler_options={...})`, "
        "or `jax.jit(f, compiler_options={...})`. Keys are XLA debug-option names; values "
        "are parsed like the flags. Here the same lowered `chain` is compiled three ways:\n\n"
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
        "(the paired rows of the timings table):\n\n"
        + table(["module", "fused ms", "fusion off ms"],
                [[mod, f"{v[0]:.3g}", f"{v[1]:.3g}"] for mod, v in fusion_ms.items()])
        + "\n\n" + plot("fusion_on_off", lambda fig: _bars(
            fig, [(f"{mod} {what}", v[i]) for mod, v in fusion_ms.items()
                  for i, what in enumerate(("fused", "fusion off"))], "median ms"),
            quick=quick)
    )
    return size, t_f, t_u


def _hlo_dumps(res, quick):
    """Each module's `chain` run in a fresh Python with `--xla_dump_to`: exit, value, files and
    the optimized ENTRY compared."""
    dump_dir = out_folder("xla_dump", quick)
    child_n = 1000
    xs = np.linspace(-2.0, 2.0, child_n, dtype=np.float32)
    want = float(np.asarray(jax.jit(chain)(xs)).sum())
    dumps = {}  # module -> (return code, files, before ops, after ENTRY ops, after ENTRY text)
    for mod in ("jax", "minijax"):
        mod_dir = dump_dir / mod
        env = dict(os.environ)
        env["XLA_FLAGS"] = (f"--xla_dump_to={mod_dir} --xla_dump_hlo_as_text "
                            "--xla_dump_hlo_module_re=jit_chain")
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
        proc = subprocess.run([sys.executable, "-c", CHILD.format(module=mod, n=child_n)],
                              env=env, capture_output=True, text=True, timeout=120)
        with res.running("both" if mod == "minijax" else "jax"):
            res.check_true(f"{mod}: dump subprocess exited cleanly", proc.returncode == 0)
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
            res.check_true(f"{mod}: after optimization the chain is one fusion",
                           a_ops.count("fusion") == 1)
    with res.running("both"):
        res.check_true("the optimized ENTRY computations have the same instructions in both "
                       "modules", dumps["jax"][3] == dumps["minijax"][3] != [])
    return dump_dir, dumps


def _describe_hlo_dump(res, dumps, dump_dir, quick):
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
        "(with 8 fake devices). So the program runs a fresh Python per module with\n\n"
        + code(f"XLA_FLAGS='--xla_dump_to={rel(dump_dir) if not quick else '<tmp>'}/<module> "
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


def _describe_fusion(res, after_entry, t_f, t_u, size):
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
        f"({size}x{size} float32). Fusion is also why counting jaxpr equations says little "
        "about runtime: what matters is how many kernels and how many bytes of memory "
        "traffic remain after XLA is done."
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


def _minijax_precision(res: TopicResult, a, b, exact, scale, jax_outs, quick: bool) -> None:
    """The three precision levels in minijax (via lax.dot_general): equal to JAX's results on
    CPU; minijax writes the level into its program as JAX does."""
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
        "on this CPU that changes nothing, as the errors show:\n\n"
        + table(["precision", "written into the StableHLO", "relative error"], rows)
        + "\n\nbf16 inputs with float32 accumulation (`preferred_element_type`) agree with "
        "JAX's to rounding (checked).")


def _minijax_fusion(res: TopicResult, x, ref, quick: bool) -> dict[str, tuple[float, float]]:
    """The chain fused and with fusion off, in both modules, timed with inputs on the device."""
    out = {}
    for name, J in MODULES:
        jnp_ = J.numpy
        fn = lambda t, jnp_=jnp_: jnp_.tanh(jnp_.sin(t) * 2.0 + jnp_.cos(t)) ** 2 - t / 3.0
        xd = J.device_put(x)
        lowered = J.jit(fn).lower(xd)
        fused = lowered.compile()
        unfused = lowered.compile(compiler_options={"xla_disable_hlo_passes": "fusion"})
        res.check(f"{name}: fusion off gives the same values", np.asarray(unfused(xd)), ref,
                  rtol=1e-5, atol=1e-5, dtype=np.float32)  # ref: float64 NumPy
        n_f = _ops(_entry(fused.as_text())).count("fusion")
        n_u = _ops(_entry(unfused.as_text())).count("fusion")
        res.check_true(f"{name}: fusion off gives more kernels ({n_f} -> {n_u})", n_u > n_f)
        out[name] = tuple(time_into(res, f"chain {what}: {name}",
                                    lambda c=c, J=J, xd=xd: J.block_until_ready(c(xd)), quick)
                          for what, c in (("fused", fused), ("fusion off", unfused)))
    return out
