"""Pallas: kernels written once, run under `jax.experimental.pallas` and
`minijax.experimental.pallas`, both in interpret mode on CPU.

Pallas lets you write the body of a GPU/TPU kernel in JAX-flavoured Python: the kernel reads
and writes *refs* (windows onto its inputs and outputs), a *grid* says how many kernel
instances run, and *BlockSpecs* say which block of each array an instance sees. There is no
Pallas compiler for CPU, so every kernel runs with `interpret=True` (on a TPU too, so the runs
compare; there the vector add is also compiled without it, by Mosaic, in both modules). The
kernels live in one module, compare/_pallas_kernels.py, written against the `jax` and `pl`
modules passed in:

* a vector add over a 1-D grid whose last block runs past the end of the array, and a masked
  add (`load`/`store` with `mask=`);
* a tiled matmul with a 3-D grid whose last axis walks the contraction, accumulating into a
  scratch buffer, with a fused bias + ReLU epilogue;
* a fused row softmax and a layer norm (one pass over a block of whole rows);
* FlashAttention: a forward kernel using the online-softmax recurrence (never materialising
  the S x S score matrix) that also returns the log-sum-exp, and two backward kernels (dK/dV
  and dQ) that recompute probabilities blockwise, joined by `custom_vjp`;
* `vmap` of a `pallas_call` (batch axes on either operand, a non-leading axis, nested vmap, a
  block transpose with a 2-D grid) and an in-place update with `input_output_aliases`, whose
  donated buffer the lowered and compiled programs alias in both modules;
* the jvp of a kernel (both modules differentiate the kernel jaxpr), and `grad` failing in
  linearization in both, which is why the backward kernels exist.

Each result is compared with a plain `jnp` reference and with the other module's result; the
report shows a kernel's jaxpr before and after state discharge, and interpret-mode timings.
"""

from __future__ import annotations

import functools
import re

import jax
import numpy as np
from jax.experimental import pallas as jpl
from jax.experimental.pallas import triton as jplgpu

import minijax
from compare import _pallas_kernels
from compare._jax201 import catch, hlo_opcodes, table, times_into
from compare._report import TopicResult, code, plot
from minijax.experimental import pallas as mpl
from minijax.experimental.pallas import triton as mplgpu
from minijax.state import discharge_state
from tools import accelerator_tpu

F32 = np.float32
TOL = dict(rtol=1e-5, atol=1e-5)  # f32 agreement asked of every kernel


def compiles_without_interpret(platform: str, module: str) -> bool:
    """Whether `pallas_call` without `interpret=True` compiles the kernel on `platform` under
    `module` ("jax" or "minijax"): on a TPU both lower it to a Mosaic kernel; JAX also compiles
    for GPUs, minijax for TPUs only (minijax/compiler.py `_check_tpu_kernels`); a CPU has no
    Pallas compiler."""
    return platform == "tpu" or (platform == "gpu" and module == "jax")


def _stablehlo_ops(text: str) -> dict[str, int]:
    """Counts of a few StableHLO ops in a lowered (not yet optimized) module."""
    ops = re.findall(r"stablehlo\.([a-z_]+)", text)
    keep = ("while", "dynamic_slice", "dynamic_update_slice", "dot_general")
    return {o: ops.count(o) for o in keep}


def _hlo_ops(hlo: str) -> dict[str, int]:
    """Counts of a few opcodes in optimized HLO text."""
    ops = hlo_opcodes(hlo)
    keep = ("while", "dynamic-slice", "dynamic-update-slice", "fusion")
    return {o: ops.count(o) for o in keep}


def _draw_times(fig, rows) -> None:
    """Bars on a log scale: each kernel's median ms under JAX's and minijax's interpret mode,
    and the plain `jnp` program it replaces."""
    ax = fig.add_subplot(1, 1, 1)
    labels = [r[0] for r in rows]
    for i, name in enumerate(("jax pallas (interpret)", "minijax pallas (interpret)", "jnp")):
        ax.bar([j + (i - 1) * 0.27 for j in range(len(rows))], [r[1 + i] for r in rows], 0.27,
               label=name)
    ax.set_yscale("log")
    ax.set_ylabel("ms per call (median)")
    ax.set_xticks(range(len(rows)), labels, rotation=25, ha="right", fontsize=7)
    ax.legend(fontsize=7)


def _main_signature(lowered) -> str:
    """The `func.func public @main(...)` line of a lowered module's text."""
    return next(ln.strip() for ln in lowered.as_text().splitlines()
                if "func.func public @main" in ln)


def _vmap_and_aliases(res: TopicResult, J, M, rng) -> None:
    """vmap of pallas_call (batch axes on either operand, a non-leading axis, nested, a 2-D
    grid) and a kernel with `input_output_aliases` (values, the alias in the lowered and
    compiled programs, donation), under both modules."""
    x = rng.standard_normal((3, 12)).astype(F32)
    acc = rng.standard_normal((3, 12)).astype(F32)
    t = rng.standard_normal((16, 3, 8)).astype(F32)  # a 16x8 matrix per batch element, axis 1
    nest = rng.standard_normal((2, 16, 8, 3)).astype(F32)
    cases = [  # name, kernel, vmap (or nested vmap) of it per module, args, jnp reference
        ("vector add, in_axes=(0, None)", "vector_add", dict(in_axes=(0, None)),
         (x, x[0]), x + x[0]),
        ("vector add, in_axes=(None, 1), out_axes=1", "vector_add",
         dict(in_axes=(None, 1), out_axes=1), (x[0], x.T), (x[0] + x).T),
        ("block transpose (2-D grid 2x2), in_axes=1", "block_transpose", dict(in_axes=1),
         (t,), np.stack([np.asarray(J.block_transpose_ref(t[:, b])) for b in range(3)])),
        ("in-place axpy (aliased acc), in_axes=(0, 0)", "axpy_inplace", dict(in_axes=(0, 0)),
         (x, acc), acc + 2 * x),
        ("in-place axpy (aliased acc unbatched), in_axes=(0, None)", "axpy_inplace",
         dict(in_axes=(0, None)), (x, acc[0]), acc[0] + 2 * x),
    ]
    for name, fn, kw, args, ref in cases:
        got_j = jax.jit(jax.vmap(getattr(J, fn), **kw))(*args)
        got_m = minijax.jit(minijax.vmap(getattr(M, fn), **kw))(*args)
        res.check(f"vmap of pallas_call, {name}: jax vs jnp reference", got_j, ref, **TOL)
        res.check(f"vmap of pallas_call, {name}: minijax vs jax", got_m, got_j, **TOL)
    nested = {mod.__name__: mod.jit(mod.vmap(mod.vmap(k.block_transpose, in_axes=2), in_axes=0))
              for mod, k in ((jax, J), (minijax, M))}
    want = np.stack([np.stack([np.asarray(J.block_transpose_ref(nest[a, :, :, b]))
                               for b in range(3)]) for a in range(2)])
    got_j, got_m = nested["jax"](nest), nested["minijax"](nest)
    res.check("nested vmap (axes 0 then 2) of the 2-D-grid block transpose: jax vs jnp "
              "reference", got_j, want, **TOL)
    res.check("nested vmap of the 2-D-grid block transpose: minijax vs jax", got_m, got_j, **TOL)
    eqns = {mod.__name__: mod.make_jaxpr(mod.vmap(k.block_transpose, in_axes=1))(t).jaxpr.eqns
            for mod, k in ((jax, J), (minijax, M))}
    grid_j = eqns["jax"][-1].params["grid_mapping"].grid
    res.check_true("vmap over axis 1 is one pallas_call on a (3, 2, 2) grid in both, with no "
                   "transpose of the operand",
                   [str(e.primitive) for e in eqns["minijax"]]
                   == [str(e.primitive) for e in eqns["jax"]] == ["pallas_call"]
                   and eqns["minijax"][0].params["grid"] == tuple(grid_j) == (3, 2, 2))

    # input_output_aliases: the kernel writes into acc's buffer
    x1, a1 = x[0], acc[0]
    sigs, aliased = {}, {}
    for mod, k in ((jax, J), (minijax, M)):
        f = mod.jit(k.axpy_inplace, donate_argnums=1)
        lowered = f.lower(x1, a1)
        sigs[mod.__name__] = _main_signature(lowered)
        aliased[mod.__name__] = re.search(r"input_output_alias=\{.*?\) \}",
                                          lowered.compile().as_text())
        buf = mod.device_put(a1)
        out = f(x1, buf)
        res.check(f"input_output_aliases, donated acc ({mod.__name__}): acc + 2 x", out,
                  a1.astype(np.float64) + 2 * x1, dtype=np.float32, **TOL)
        with res.running("jax" if mod is jax else "minijax"):
            res.check_true(f"the donated acc buffer is consumed ({mod.__name__})",
                           buf.is_deleted())
            kept = mod.device_put(a1)
            k.axpy_inplace(x1, kept)
            res.check_true(f"called eagerly, acc is not consumed ({mod.__name__})",
                           not kept.is_deleted())
    res.check_true("the lowered main marks acc as aliased to output 0 in both "
                   "(`tf.aliasing_output = 0`)",
                   all("{tf.aliasing_output = 0 : i32}" in s for s in sigs.values()))
    res.check_true("the compiled HLO aliases parameter 1 to the output in both",
                   all(m is not None for m in aliased.values())
                   and aliased["jax"].group(0) == aliased["minijax"].group(0))
    res.sections.append(
        "### vmap of a pallas_call, and kernels that update in place\n\n"
        "`vmap` of a `pallas_call` does not loop over the batch: it adds a leading grid axis, "
        "and each batched operand gets a squeezed block dimension *at its own batch axis*, "
        "indexed by the new grid index. Unbatched operands keep their block mappings (every "
        "batch element sees the same blocks); outputs are batched at axis 0. The kernel "
        "jaxpr is unchanged, and `program_id(i)` still names the kernel's own grid axes. "
        "vmap of the 2-D-grid block transpose over axis 1 is one `pallas_call` on a "
        f"{tuple(grid_j)} grid in both modules, with no transpose of the input; nested vmap "
        "adds one grid axis per level.\n\n"
        "`input_output_aliases={1: 0}` says that output 0 starts as input 1's contents and "
        "may reuse its buffer: `axpy_inplace` reads `o_ref` (acc) and adds `alpha * x`. "
        "Under vmap an aliased input that is unbatched, or batched at another axis, is "
        "broadcast or moved to axis 0 first, like the output it initialises. In interpret "
        "mode the kernel is an ordinary XLA program, so the buffer is reused when the "
        "enclosing `jit` donates the input; both modules then mark the lowered `main`:\n\n"
        + code(f"jax:     {sigs['jax']}\nminijax: {sigs['minijax']}")
        + "\n\nand XLA's compiled module carries `"
        + (aliased["minijax"].group(0) if aliased["minijax"] else "(none)")
        + "`; the donated array is deleted after the call. Called eagerly (no donation) "
        "neither module consumes its argument.")


def run(quick: bool = False) -> TopicResult:
    res = TopicResult("Pallas kernels in interpret mode, under jax and minijax", runs="both")
    res.chapter = "chapters/16-pallas.md"
    res.devices = 1
    rng = np.random.default_rng(0)
    J = _pallas_kernels.build(jax, jpl, jplgpu)
    M = _pallas_kernels.build(minijax, mpl, mplgpu)
    rows = []  # kernel, jax ms, minijax ms, jnp ms
    slower = []  # (kernel ms, jnp ms) pairs, to describe the timings honestly

    def both(name, fn_name, args, ref, tol=TOL, **kw):
        """Run `fn_name` under both modules (jitted); check against `ref` and each other (a
        float64 NumPy `ref` stands for float32 results: their dtype is checked as such)."""
        if all(np.asarray(r).dtype == np.float64 for r in jax.tree_util.tree_leaves(ref)):
            tol = {**tol, "dtype": np.float32}
        fj = jax.jit(functools.partial(getattr(J, fn_name), **kw))
        fm = minijax.jit(functools.partial(getattr(M, fn_name), **kw))
        got_j, got_m = fj(*args), fm(*args)
        res.check(f"{name}: jax.experimental.pallas vs jnp reference", got_j, ref, **tol)
        res.check(f"{name}: minijax.experimental.pallas vs jnp reference", got_m, ref, **tol)
        res.check(f"{name}: minijax vs jax", got_m, got_j, **tol)
        return fj, fm

    def timed(name, fns, ref_name, f_ref, args):
        """(jax, minijax, jnp reference) ms of the kernel `fns` (from `both`) and of jit of
        `f_ref`, the three timed interleaved."""
        fj, fm = fns
        fr = jax.jit(f_ref)
        t = times_into(res, {f"{name}: jax pallas (interpret)": lambda: fj(*args),
                             f"{name}: minijax pallas (interpret)": lambda: fm(*args),
                             f"{ref_name}: jnp": lambda: fr(*args)}, quick)
        return tuple(t.values())

    platform = jax.default_backend()
    no_interp, no_interp_msg, m_no, m_no_msg = _vector_add(res, quick, rng, both, timed, rows,
                                                           slower, J, M, platform)

    _vmap_and_aliases(res, J, M, rng)

    m, kk, nn, low_ops, mm_ops, m_low_ops = _tiled_matmul(res, quick, rng, both, timed, rows,
                                                          slower)

    _softmax_layer_norm(res, quick, rng, both, J, timed, rows, slower, M)

    _flash_attention(res, quick, rng, J, both, timed, rows, slower, M)

    _describe_kernels(res, rows, quick, m_low_ops, m_no, m_no_msg, platform)

    _describe_interpret(res, slower, low_ops, m, nn, kk, mm_ops, no_interp, no_interp_msg,
                        platform)
    res.sections.append(accelerator_tpu.report_section(("flash", "matmul")))
    return res


def _vector_add(res, quick, rng, both, timed, rows, slower, J, M, platform):
    """The vector-add kernel under both modules: values, timings, the call without interpret
    mode (refused on a CPU, compiled on a TPU), and the kernel's jaxpr before and after state
    discharge."""
    n = 1000 if quick else 8000  # not a multiple of the block: the last block is partial
    x = rng.standard_normal(n).astype(F32)
    y = rng.standard_normal(n).astype(F32)
    fns = both(f"vector add n={n}", "vector_add", (x, y), x + y)
    t_j, t_m, t_r = timed(f"vector add n={n}", fns, f"vector add n={n}", jax.numpy.add, (x, y))
    rows.append([f"vector add n={n} (block 128)", t_j, t_m, t_r])
    slower.append((t_m, t_r))
    xs, ys = x[:20], y[:20]
    both("masked add n=20", "masked_add", (xs, ys), xs + ys)
    calls = {"jax": jpl.pallas_call(J.add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape,
                                                                                 x.dtype)),
             "minijax": mpl.pallas_call(M.add_kernel, out_shape=minijax.ShapeDtypeStruct(
                 x.shape, x.dtype))}
    compiled = {}  # module -> (error type or None, message, result: NaN where it raised)
    for mod, call in calls.items():
        result = [np.full_like(x, np.nan)]
        kind, msg = catch(lambda call=call, result=result: result.append(np.asarray(call(x, y))))
        compiled[mod] = kind, msg, result[-1]
    (no_interp, no_interp_msg, out_j), (m_no, m_no_msg, out_m) = compiled.values()
    with res.running("jax"):
        if compiles_without_interpret(platform, "jax"):
            res.check(f"without interpret=True the {platform.upper()} backend compiles the "
                      "kernel: jax vs jnp reference", out_j, x + y, **TOL)
        else:
            res.check_true(f"without interpret=True the {platform.upper()} backend refuses",
                           no_interp is not None)
    if compiles_without_interpret(platform, "minijax"):
        res.check("minijax compiles it without interpret=True too: minijax vs jax", out_m,
                  out_j, **TOL)
    else:
        res.check_true("minijax refuses interpret=False too", m_no is not None)

    # kernel jaxpr, before and after discharge
    xb = x[:256]
    closed = minijax.make_jaxpr(functools.partial(M.vector_add, block=128))(xb, xb)
    kernel_jaxpr = closed.jaxpr.eqns[0].params["jaxpr"]
    pure, _ = discharge_state(kernel_jaxpr.jaxpr, kernel_jaxpr.consts)
    jclosed = jax.make_jaxpr(functools.partial(J.vector_add, block=128))(xb, xb)
    jkernel = jclosed.jaxpr.eqns[0].params["jaxpr"]
    res.check_true("the kernel jaxpr reads and writes refs; its discharge does not",
                   "Ref{" in str(kernel_jaxpr) and "Ref{" not in str(pure))
    ktext = kernel_jaxpr.jaxpr.pretty_print(print_effects=True)
    jtext = jkernel.pretty_print(print_effects=True)
    # JAX lists the effects in set order and writes the refs' memory space
    jnorm = re.sub(r": \{ (.*?) \}", lambda m: ": { " + ", ".join(
        sorted(m.group(1).split(", "))) + " }", jtext.replace("Ref<default>", "Ref"))
    res.check_true("the kernel jaxpr prints as JAX's (state primitives and ref effects)",
                   ktext == jnorm)
    res.sections.append(
        "### A kernel as a jaxpr, before and after discharge\n\n"
        "`pallas_call` traces the kernel once, on refs of the *block* shapes, and keeps the "
        "jaxpr as the param of the `pallas_call` primitive. minijax's kernel jaxpr of the "
        "vector add (`d:f32[128] <- a[...]` is a `get`, `c[...] <- f` a `swap`; after `in`, "
        "the refs' effects, printed with `print_effects=True`):\n\n"
        + code(ktext) + "\n\nJAX's:\n\n" + code(jtext)
        + "\n\nState discharge (`minijax/state/discharge.py: discharge_state`) turns it into a "
        "pure function of the blocks' contents that returns their final contents; "
        "interpret mode runs this at every grid point:\n\n" + code(str(pure)))
    return no_interp, no_interp_msg, m_no, m_no_msg


def _tiled_matmul(res, quick, rng, both, timed, rows, slower):
    """The tiled matmul + bias + relu kernel: values, timings, and the while loop interpret mode
    lowers its grid to."""
    m, kk, nn = (64, 96, 64) if quick else (256, 256, 256)
    a = rng.standard_normal((m, kk)).astype(F32)
    b = rng.standard_normal((kk, nn)).astype(F32)
    bias = rng.standard_normal(nn).astype(F32)
    ref = np.maximum(a.astype(np.float64) @ b + bias, 0)
    mm_j, mm_m = both(f"matmul+bias+relu {m}x{kk}x{nn}", "matmul", (a, b, bias), ref,
                      tol=dict(rtol=1e-5, atol=2e-5))
    t_j, t_m, t_r = timed(f"matmul+bias+relu {m}x{kk}x{nn}", (mm_j, mm_m),
                          f"matmul {m}x{kk}x{nn}", lambda a, b, c: jax.nn.relu(a @ b + c),
                          (a, b, bias))
    rows.append([f"matmul+bias+relu {m}x{kk}x{nn} (32^3 tiles)", t_j, t_m, t_r])
    slower.append((t_m, t_r))
    lowered = mm_j.lower(a, b, bias)
    low_ops = _stablehlo_ops(lowered.as_text())
    mm_ops = _hlo_ops(lowered.compile().as_text())
    m_low_ops = _stablehlo_ops(mm_m.lower(a, b, bias).as_text())
    res.check_true("interpret mode emits a while loop over the grid (jax)", low_ops["while"] >= 1)
    res.check_true("interpret mode emits a while loop over the grid (minijax)",
                   m_low_ops["while"] >= 1)
    return m, kk, nn, low_ops, mm_ops, m_low_ops


def _softmax_layer_norm(res, quick, rng, both, J, timed, rows, slower, M):
    """Row softmax and layer norm kernels: values, timings, jvp through a kernel, and grad
    failing alike in both modules."""
    r, c = (32, 64) if quick else (256, 512)
    s = (rng.standard_normal((r, c)) * 3).astype(F32)
    g = rng.standard_normal(c).astype(F32)
    be = rng.standard_normal(c).astype(F32)
    fns = both(f"row softmax {r}x{c}", "row_softmax", (s,), J.softmax_ref(s))
    t_j, t_m, t_r = timed(f"row softmax {r}x{c}", fns, f"softmax {r}x{c}",
                          lambda t: jax.nn.softmax(t, axis=1), (s,))
    rows.append([f"row softmax {r}x{c}", t_j, t_m, t_r])
    slower.append((t_m, t_r))
    fns = both(f"layer norm {r}x{c}", "layer_norm", (s, g, be), J.layer_norm_ref(s, g, be))
    t_j, t_m, t_r = timed(f"layer norm {r}x{c}", fns, f"layer norm {r}x{c}", J.layer_norm_ref,
                          (s, g, be))
    rows.append([f"layer norm {r}x{c}", t_j, t_m, t_r])
    slower.append((t_m, t_r))

    # jvp: both modules differentiate the kernel jaxpr (a tangent ref beside each ref)
    ts = rng.standard_normal((r, c)).astype(F32)
    jvp_m = minijax.jvp(M.row_softmax, (s,), (ts,))
    jvp_j = jax.jvp(J.row_softmax, (s,), (ts,))
    jvp_r = jax.jvp(J.softmax_ref, (s,), (ts,))
    res.check("jvp of the row softmax kernel: minijax vs jax", jvp_m[1], jvp_j[1], **TOL)
    res.check("jvp of the row softmax kernel: minijax vs jvp of the reference", jvp_m[1],
              jvp_r[1], **TOL)
    grad_j, grad_j_msg = catch(lambda: jax.grad(lambda t: J.row_softmax(t).sum())(s))
    grad_m, grad_m_msg = catch(lambda: minijax.grad(
        lambda t: minijax.numpy.sum(M.row_softmax(t)))(s))
    res.check_true("grad of a pallas_call fails in linearization in both (no transpose rule)",
                   grad_j is not None and grad_m is not None
                   and all("Linearization failed" in m for m in (grad_j_msg, grad_m_msg)))


def _flash_attention(res, quick, rng, J, both, timed, rows, slower, M):
    """FlashAttention forward (full and causal) and its custom-vjp backward, in both modules
    against the jnp reference."""
    bh, seq, d = (2, 64, 16) if quick else (4, 256, 32)
    blk = 16 if quick else 32
    q, k, v, ct = (rng.standard_normal((bh, seq, d)).astype(F32) for _ in range(4))
    for causal in (False, True):
        tag = "causal" if causal else "full"
        ref_o = J.attention_ref(q, k, v, causal)
        ref_lse = J.lse_ref(q, k, causal)
        fns = both(f"flash attention forward ({tag})", "flash_forward", (q, k, v),
                   (ref_o, ref_lse), bq=blk, bk=blk, causal=causal)
        t_j, t_m, t_r = timed(f"flash attention forward ({tag})", fns,
                              f"attention forward ({tag})",
                              functools.partial(J.attention_ref, causal=causal), (q, k, v))
        rows.append([f"attention fwd ({tag}) {bh}x{seq}x{d}", t_j, t_m, t_r])
        slower.append((t_m, t_r))

        def grads(mod, att):
            return mod.jit(mod.grad(lambda q_, k_, v_: mod.numpy.sum(att(q_, k_, v_) * ct),
                                    argnums=(0, 1, 2)))

        g_j = grads(jax, lambda *t, c=causal: J.flash_attention(*t, blk, blk, c))
        g_m = grads(minijax, lambda *t, c=causal: M.flash_attention(*t, blk, blk, c))
        g_r = grads(jax, lambda *t, c=causal: J.attention_ref(*t, c))
        want = g_r(q, k, v)
        got_j, got_m = g_j(q, k, v), g_m(q, k, v)
        for i, name in enumerate(("dq", "dk", "dv")):
            res.check(f"flash attention backward {name} ({tag}): jax vs jax.grad of reference",
                      got_j[i], want[i], rtol=1e-4, atol=1e-4)
            res.check(f"flash attention backward {name} ({tag}): minijax vs jax.grad of "
                      "reference", got_m[i], want[i], rtol=1e-4, atol=1e-4)
            res.check(f"flash attention backward {name} ({tag}): minijax vs jax",
                      got_m[i], got_j[i], **TOL)
        t_j, t_m, t_r = times_into(res, {
            f"attention fwd+bwd ({tag}): jax pallas (interpret)": lambda f=g_j: f(q, k, v),
            f"attention fwd+bwd ({tag}): minijax pallas (interpret)": lambda f=g_m: f(q, k, v),
            f"attention fwd+bwd ({tag}): jnp reference": lambda f=g_r: f(q, k, v)},
            quick).values()
        rows.append([f"attention fwd+bwd ({tag}) {bh}x{seq}x{d}", t_j, t_m, t_r])
        slower.append((t_m, t_r))


def _describe_kernels(res, rows, quick, m_low_ops, m_no, m_no_msg, platform):
    """The timing plot and the sections on the kernels and on FlashAttention's backward pass."""
    res.sections.append("### Kernels vs jnp\n\n" + plot(
        "pallas-vs-jnp", lambda fig: _draw_times(fig, rows), figsize=(7.5, 4.0), quick=quick))
    res.sections.append(
        "### Every kernel under both modules\n\n"
        "Each kernel source in compare/_pallas_kernels.py ran under "
        "`jax.experimental.pallas` and `minijax.experimental.pallas` (both `interpret=True`, "
        "jitted), and matched a `jnp` reference and the other module within 1e-5 (the "
        "backward kernels within 1e-4 of `jax.grad` of the reference attention). Median "
        f"milliseconds per call on this {platform.upper()}, measured on a shared machine "
        "(noisy):\n\n"
        + table(["kernel", "jax pallas (ms)", "minijax pallas (ms)", "jnp (ms)"],
                [[rw[0]] + [f"{t:.3g}" for t in rw[1:]] for rw in rows])
        + f"\n\nThe lowered minijax matmul has {m_low_ops['while']} `while`, "
        f"{m_low_ops['dynamic_slice']} `dynamic_slice` and "
        f"{m_low_ops['dynamic_update_slice']} `dynamic_update_slice`: the same loop over "
        "blocks that JAX's interpret mode builds.\n\n"
        + ("minijax without `interpret=True`:\n\n" + code(f"{m_no}: {m_no_msg}") if m_no else
           f"minijax without `interpret=True` compiles the vector add for this "
           f"{platform.upper()} (its Mosaic lowering) and gives JAX's result (checked)."))
    res.sections.append(
        "### The kernels\n\n"
        + code("def matmul_kernel(x_ref, y_ref, b_ref, o_ref, acc_ref, *, activation):\n"
               "    kk = pl.program_id(2)\n\n"
               "    @pl.when(kk == 0)\n"
               "    def _():\n"
               "        acc_ref[...] = jnp.zeros_like(acc_ref)\n\n"
               "    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...],\n"
               "                            preferred_element_type=jnp.float32)\n\n"
               "    @pl.when(kk == pl.num_programs(2) - 1)\n"
               "    def _():\n"
               "        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0)  # bias: (1, bn)",
               "python")
        + "\n\nA `BlockSpec(block_shape, index_map)` maps a grid position to a *block index* "
        "(not an element offset): instance (i, j, kk) sees row block i of x and column "
        "block j of y. Because the output's index map ignores `kk`, all instances along the "
        "last grid axis write the same block, which is how the kernel accumulates over the "
        "contraction: zero the scratch accumulator at `kk == 0`, add a partial product each "
        "step, and apply the bias and activation once, at the last step (the fused epilogue). "
        "The softmax and layer norm give each instance 8 whole rows, so the reductions and "
        "the elementwise work happen in one pass over data already in fast memory.\n\n"
        "FlashAttention's forward kernel visits key blocks in turn and keeps, per query row, "
        "the running maximum `m`, the running sum `l` of `exp(s - m)` and the un-normalised "
        "output `acc`; when a new block raises the maximum, `l` and `acc` are rescaled by "
        "`exp(m_old - m_new)`. `acc / l` is the output and `m + log(l)` (the log-sum-exp) is "
        "saved for the backward pass, which recomputes `p = exp(s - lse)` blockwise: with "
        "`delta = rowsum(dO * O)`, `dV = p^T dO`, `dS = p * (dO V^T - delta)`, "
        "`dK = dS^T Q / sqrt(d)`, `dQ = dS K / sqrt(d)`. With a causal mask, key blocks "
        "entirely in a query block's future are skipped (a loop with a traced trip count).")


def _describe_interpret(res, slower, low_ops, m, nn, kk, mm_ops, no_interp, no_interp_msg,
                        platform):
    """The section on what interpret mode means for the timings above."""
    n_slow = sum(tk > tr for tk, tr in slower)
    res.sections.append(
        "### What interpret mode is, and what it is not\n\n"
        "`pallas_call(..., interpret=True)` does not compile a kernel. JAX turns the kernel "
        "body into ordinary JAX operations, replaces reads and writes of refs by "
        "`dynamic_slice` / `dynamic_update_slice` on whole arrays, and wraps the body in a "
        "loop over every grid point; the result is then compiled by "
        f"XLA:{platform.upper()} like any other "
        "program. The lowered (pre-optimization) module of the tiled matmul contains "
        f"{low_ops['while']} `while`, {low_ops['dynamic_slice']} `dynamic_slice`, "
        f"{low_ops['dynamic_update_slice']} `dynamic_update_slice` and "
        f"{low_ops['dot_general']} `dot_general`: one loop over the "
        f"{m // 32 * (nn // 32) * (kk // 32)} grid points, slicing the blocks out of the "
        "operands and writing the output block back. After XLA's optimizations "
        f"{mm_ops['while']} `while` loop(s) remain"
        + (" (a short, fixed trip count can be fully unrolled)" if mm_ops["while"] == 0 else "")
        + ". That makes interpret mode a faithful check of the *semantics* (indexing, "
        "BlockSpecs, masking, accumulation order) but not of speed: the grid runs one point "
        f"at a time. In the timings, the kernel was slower than the `jnp` version in {n_slow} "
        f"of {len(slower)} comparisons"
        + ("" if n_slow == len(slower) else
           "; where it was not, the arrays are so small that fixed per-call costs dominate")
        + (".\n\nWithout `interpret=True` this machine refuses the call:"
           "\n\n" + code(f"{no_interp}: {no_interp_msg}") if no_interp else
           f".\n\nWithout `interpret=True` this {platform.upper()} compiles the call instead "
           "(the vector add, checked against `x + y` above).")
        + "\n\n"
        "On real accelerators the same kernel source goes through a backend compiler instead."
        " On NVIDIA GPUs the default is Mosaic GPU (Hopper and newer): TMA copies between HBM"
        " and shared memory, warpgroup matmuls, barriers. The older Triton backend (each grid"
        " point a thread block, masked pointer loads) is kept on a best-effort basis. On TPUs "
        "Mosaic compiles the kernel for one TensorCore, runs the grid as a sequential loop, "
        "and pipelines the BlockSpec copies between HBM and on-chip VMEM so the next block "
        "loads while the current one is computed. Block shapes then have hardware constraints"
        " (the last two dimensions multiples of (8, 128) for 32-bit types on TPU) that "
        "interpret mode does not enforce.\n\n"
        + ("No GPU was available when this report was written: every number above is from CPU "
           "interpret mode (chapters/16-pallas.md)." if platform == "cpu" else
           f"Every number above is from interpret mode, compiled for this {platform.upper()} "
           "by XLA (chapters/16-pallas.md).")
    )
