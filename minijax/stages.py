"""The ahead-of-time stages of `jit`: `jit(f).trace(*args)` gives a `Traced` (the jaxpr),
`.lower()` a `Lowered` (the StableHLO module), `.compile()` a `Compiled` (the XLA executable,
run through its `pxla.ExecuteReplicated`).

Mirrors jax/_src/stages.py. Taught in chapters/07-jit.md and chapters/11-aot-async-benchmarking.md.
"""

from __future__ import annotations

import dataclasses
import warnings
import weakref
from typing import Sequence

import numpy as np

from minijax import api_util, compiler, core, effects
from minijax.core import ClosedJaxpr, ShapeDtypeStruct
from minijax.interpreters import mlir, partial_eval as pe, pxla
from minijax.mesh import AbstractMesh, get_concrete_mesh
from minijax.named_sharding import NamedSharding
from minijax.sharding_impls import SingleDeviceSharding, aval_sharding
from minijax.tree_util import tree_flatten, tree_unflatten

# Counters tests read to check caching: how many times jit traced and compiled.
cache_stats = {"traces": 0, "compiles": 0}


def _warn_unusable_donations(jaxpr: ClosedJaxpr, donated, usable) -> None:
    unusable = [a for a, d, u in zip(jaxpr.in_avals, donated, usable) if d and not u]
    if unusable:
        warnings.warn(f"Some donated buffers were not usable: "
                      f"{', '.join(a.str_short() for a in unusable)}. Donation works when an "
                      "output has the same shape and dtype as the donated input.", stacklevel=2)


# JAX: jax/_src/interpreters/pxla.py prune_unused_inputs and _dce_jaxpr (keep_unused=False)
def prune_unused_inputs(closed: ClosedJaxpr, nconsts: int = 0):
    """`(jaxpr, kept)`: the jaxpr without the arguments after its `nconsts` leading ones (a
    jit's hoisted constants, always kept) that nothing it computes reads, nor the equations
    nothing needs, and the positions of the arguments it keeps (counted after the
    constants; None when it reads them all). None where arguments are not pruned at all
    (below).
    As JAX, the unread arguments are not inputs of the executable (a donated one is then not
    donated), so their placement does not choose its devices: a gradient that does not
    depend on an argument on a mesh is computed on the default device. Differs: none are
    pruned with a mesh in context (`set_mesh`) or a typed output (`f32[8@x]`), where minijax
    reads the devices from the arguments' layouts and JAX from the mesh."""
    if get_concrete_mesh() is not None or any(a.sharding is not None
                                              for a in closed.out_avals):
        return None
    return _pruned(closed, nconsts)


@api_util.identity_cache  # the same jaxpr object for the same jaxpr: the executable cache hits
def _pruned(closed: ClosedJaxpr, nconsts: int):
    nargs = len(closed.jaxpr.invars) - nconsts
    pruned, used = pe.dce_closed_jaxpr(closed, instantiate=[True] * nconsts + [False] * nargs)
    kept = tuple(i for i, u in enumerate(used[nconsts:]) if u)
    return pruned, None if len(kept) == nargs else kept


# JAX: jax/_src/stages.py Traced
class Traced:
    """The result of `jit(f).trace(*args)`: the jaxpr for one input signature."""

    def __init__(self, hoisted: ClosedJaxpr, consts, in_tree, out_tree, name: str,
                 donated: tuple[bool, ...], in_shardings: Sequence = (),
                 out_shardings: Sequence = (), keep_unused: bool = False) -> None:
        n = len(consts)
        self._keep_unused = keep_unused
        self._in_shardings = tuple(in_shardings)  # per argument leaf (consts not included)
        self._out_shardings = tuple(out_shardings)
        if n:
            # put the closed-over arrays back as constants, as in the traced program
            inner = hoisted.jaxpr
            hoisted = ClosedJaxpr(core.Jaxpr(inner.invars[:n], inner.invars[n:], inner.outvars,
                                             inner.eqns), consts)
        self.jaxpr = hoisted
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._name = name
        self._donated = donated[n:]
        self.out_info = tree_unflatten(out_tree, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                                                  for a in hoisted.out_avals])

    def lower(self, *, lowering_platforms: tuple[str, ...] | None = None) -> "Lowered":
        """The module for this signature, lowered for the default device's platform or for
        `lowering_platforms` (e.g. `("tpu",)` on a CPU machine: printable, not compilable
        here; several: one module that picks each platform's rules by its `_platform_index`
        argument). Mirrors jax/_src/stages.py Traced.lower."""
        in_sh = self._in_shardings  # the consts are constants of the module, not inputs
        return Lowered(self.jaxpr, self._in_tree, self._out_tree, self._name, self._donated,
                       in_sh if any(s is not None for s in in_sh) else (),
                       self._out_shardings, lowering_platforms, self._keep_unused)


# JAX: jax/_src/stages.py ArgInfo
@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """One argument leaf of a lowered signature: its type and whether it is donated."""
    _aval: core.ShapedArray
    donated: bool

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)


# JAX: jax/_src/stages.py Lowered — differs: holds the module and the jaxpr only
class Lowered:
    """The result of `jit(f).lower(*args)`: StableHLO for one input signature. With
    `keep_unused=False` (jit's default) the module has no parameter for an argument nothing
    computed reads (`prune_unused_inputs`); `args_info` and `Compiled` still take them all."""

    def __init__(self, closed: ClosedJaxpr, in_tree, out_tree, name: str,
                 donated: Sequence[bool] = (), in_shardings: Sequence = (),
                 out_shardings: Sequence = (), platforms: Sequence[str] | None = None,
                 keep_unused: bool = True) -> None:
        self.jaxpr = closed  # the signature: every argument
        # where it runs: the devices its shardings name, else the default device (read
        # before pruning, as JAX's device assignment)
        self._here = _platform_of([*in_shardings, *out_shardings])
        self._platforms = tuple(platforms or (self._here,))
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._name = name
        self._all_donated = tuple(donated)
        pruned = None if keep_unused else prune_unused_inputs(closed)
        self._kept = None if pruned is None else pruned[1]
        if pruned is not None:
            closed, kept = pruned  # (DCE'd: the DCE before lowering hands it back as it is)
            if kept is not None:
                donated = tuple(donated[i] for i in kept) if donated else ()
                in_shardings = tuple(in_shardings[i] for i in kept) if in_shardings else ()
        self._lowered_jaxpr = closed  # the module's parameters only
        self._donated = tuple(donated)
        self._in_shardings = tuple(in_shardings)
        self._given_out = tuple(out_shardings) or (None,) * len(closed.out_avals)
        # sharding in types: an output typed `f32[8@x]` is laid out as its type says
        self._out_shardings = tuple(
            a.sharding if a.sharding is not None and (not out_shardings or s is None) else s
            for a, s in zip(closed.out_avals, out_shardings or [None] * len(closed.out_avals)))
        if not any(s is not None for s in self._out_shardings):
            self._out_shardings = tuple(out_shardings)
        meshes: list = []  # the mesh the module is partitioned over, if any
        self._host_callbacks: list = []  # the callables XLA gets with the module
        # as JAX (pxla's _dce_jaxpr before lowering): equations nothing needs are not emitted,
        # e.g. the primal `sum` of a `grad` (every input stays: the signature is kept)
        closed = pe.dce_closed_jaxpr(closed, instantiate=True)[0]
        self._module = mlir.lower_jaxpr_to_module(closed, name, self._donated,
                                                  self._in_shardings, self._out_shardings,
                                                  meshes, self._host_callbacks,
                                                  platforms=self._platforms)
        self._mesh = meshes[0] if meshes else None
        if self._mesh is not None and self._mesh.size > 1:  # JAX: pxla.lower_sharding_computation
            bad = effects.shardable_ordered_effects.filter_not_in(
                effects.ordered_effects.filter_in(closed.effects))
            if bad:
                raise ValueError("The following ordered effects are not supported for more "
                                 f"than 1 device: {sorted(map(str, bad))}")

    @property
    def args_info(self):
        """`(args, kwargs)` with an `ArgInfo` (type, donated) at each argument leaf."""
        return tree_unflatten(self._in_tree, [
            ArgInfo(a, d) for a, d in zip(self.jaxpr.in_avals, self._all_donated)])

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The StableHLO module as text: `module @jit_f { func.func public @main(...) ... }`;
        with `debug_info`, each op's location too (`loc("jit(f)/scope/sin")`: its name stack,
        which XLA keeps as the op_name metadata). Raises ValueError for a dialect other than
        "stablehlo"."""
        if dialect not in (None, "stablehlo"):
            raise ValueError(f"Lowered.as_text: unknown dialect {dialect!r}; minijax lowers "
                             "to 'stablehlo' only")
        if debug_info:
            return self._module.operation.get_asm(enable_debug_info=True)
        return str(self._module)

    def compiler_ir(self):
        """The `ir.Module` object."""
        return self._module

    def compile(self, compiler_options: dict | None = None) -> "Compiled":
        """Compile the module with XLA (cache_stats["compiles"] counts it), with XLA options
        for this executable only if given (`{"xla_disable_hlo_passes": "fusion"}`). Warns
        when a donated input has no output of its type to reuse its buffer. Raises ValueError
        for a module lowered for other platforms than this machine's (JAX compiles it for the
        local backend anyway, which fails later, or not at all, depending on its ops)."""
        here, jaxpr = self._here, self._lowered_jaxpr
        if self._platforms != (here,):
            raise ValueError(
                f"jit({self._name}) was lowered for platforms {self._platforms}, and this "
                f"machine compiles for {here!r}: print it with `as_text()`, or lower it again "
                f"without `lowering_platforms` to compile it here (chapters/07-jit.md)")
        mesh, device = self._mesh, self._one_device()
        exe = compiler.compile(self._module, mesh.devices_flat if mesh is not None else
                               None if device is None else [device._device],
                               self._host_callbacks, compiler_options)
        cache_stats["compiles"] += 1
        usable = mlir.usable_donations(jaxpr, self._donated)
        _warn_unusable_donations(jaxpr, self._donated, usable)
        placed = [s if s is not None and s.memory_kind != "device" else None
                  for s in self._out_shardings]
        # a host callback also runs with a runtime token, which exit waits for (as in JAX)
        effs = (mlir.ordered_effects_of(jaxpr.jaxpr),
                bool(jaxpr.effects or self._host_callbacks))
        if device is not None:
            executor = pxla.ExecuteOnDevice(exe, jaxpr.in_avals, jaxpr.out_avals,
                                                usable, device, *effs)
        elif mesh is None and any(placed):
            executor = pxla.ExecutePlaced(exe, jaxpr.in_avals, jaxpr.out_avals,
                                              usable, placed, *effs)
        elif mesh is None:
            executor = pxla.ExecuteReplicated(exe, jaxpr.in_avals,
                                                  jaxpr.out_avals, usable, *effs)
        else:
            # the layouts the partitioner chose where none was given (as JAX reads them back)
            ntok = len(effs[0])  # the leading token parameters and results
            chosen_in = pxla.parameter_shardings(exe, mesh, jaxpr.in_avals, ntok)
            in_sh = [s if s is not None else c for s, c in
                     zip(self._in_shardings or [None] * len(chosen_in), chosen_in)]
            chosen = pxla.output_shardings(exe, mesh, jaxpr.out_avals, ntok)
            out_sh, out_avals = _output_layouts(mesh, jaxpr.out_avals, chosen,
                                                self._given_out, self._out_shardings
                                                or self._given_out, self._orig_input())
            executor = pxla.ExecuteSharded(exe, jaxpr.in_avals, out_avals,
                                               usable, in_sh, out_sh, mesh, *effs)
        executor.jaxpr, executor.name = weakref.ref(jaxpr), self._name  # jax_debug_nans
        return Compiled(self.jaxpr, executor, self._in_tree, self._out_tree, self._kept)

    def _one_device(self):
        """The SingleDeviceSharding (default memory) that every sharding given names, if
        there are some and no other kind: the program runs on that device."""
        given = [s for s in [*self._in_shardings, *self._given_out] if s is not None]
        if self._mesh is None and given and all(
                isinstance(s, SingleDeviceSharding) and s.memory_kind == "device" and
                s._device == given[0]._device for s in given):
            return given[0]
        return None

    def _orig_input(self):
        """(the first argument's NamedSharding, its rank), or None: JAX reuses that sharding,
        spec as written, for an output the partitioner lays out the same way."""
        n = len(self._in_shardings)
        avals = self._lowered_jaxpr.in_avals
        avals = avals[len(avals) - n:]  # after the consts
        for s, a in zip(self._in_shardings, avals):
            if isinstance(s, NamedSharding):
                return s, a.ndim
        return None


# JAX: jax/_src/interpreters/pxla.py lower_sharding_computation (its `platforms`)
def _platform_of(shardings) -> str:
    """The platform of the devices the first concrete sharding names (a computation on a mesh
    of CPU devices lowers for 'cpu' on a TPU machine), else the default device's."""
    for s in shardings:
        if isinstance(s, SingleDeviceSharding):
            return s._device.platform
        if isinstance(s, NamedSharding) and not isinstance(s.mesh, AbstractMesh):
            return s.mesh.devices_flat[0].platform
    return mlir.default_platform()


# JAX: jax/_src/interpreters/pxla.py _get_out_sharding_from_orig_sharding
def _output_layouts(mesh, out_avals, chosen, given, typed, orig) -> tuple[list, list]:
    """Per output: (the sharding its Array carries, its aval). An `out_shardings` entry wins,
    and the type follows it (on Explicit axes `f32[8@i]`, as JAX's); else the type's spec on a
    mesh of Explicit axes only; else what the partitioner chose (on a mixed mesh the type
    follows it too), written as the first input's
    sharding `orig` when it is the same layout of the same rank (JAX:
    pxla.py _get_out_sharding_from_orig_sharding). Each must lay the elements
    out as the executable does (`chosen`): a mismatch would hand the runtime buffers it does
    not hold, so it raises AssertionError here, once per executable."""
    out_sh, avals = [], []
    for a, c, g, t in zip(out_avals, chosen, given, typed):
        s = c
        if g is not None:
            s = NamedSharding(mesh, g.spec)
            a = a.update(sharding=aval_sharding(s, a.ndim))
        elif a.sharding is not None and mesh.are_all_axes_explicit:
            s = NamedSharding(mesh, a.sharding.spec)
        elif orig is not None and orig[1] == a.ndim and c.num_devices > 1 and \
                c.is_equivalent_to(orig[0], a.ndim):
            s = NamedSharding(mesh, orig[0].spec)
        if g is None and a.sharding is not None and mesh.auto_axes:
            # a mixed mesh: the type of the layout the partitioner chose (as a JAX Array's
            # is), not the jaxpr's, which a constraint inside may have contradicted
            a = a.update(sharding=aval_sharding(s, a.ndim))
        if s is not c and not s.is_equivalent_to(c, a.ndim):
            raise AssertionError(f"minijax: output of type {a.str_short()} would be labelled "
                                 f"{s} but the executable lays it out as {c}")
        if t is not None and t.memory_kind != "device":  # the layout chosen, the memory given
            s = s.with_memory_kind(t.memory_kind)
        out_sh.append(s)
        avals.append(a)
    return out_sh, avals


# JAX: jax/_src/stages.py Compiled
class Compiled:
    """An XLA executable for one input signature; call it with arguments of those types."""

    def __init__(self, closed: ClosedJaxpr, executor: pxla.ExecuteReplicated, in_tree,
                 out_tree, kept: tuple[int, ...] | None = None) -> None:
        self.jaxpr = closed
        self._executor = executor
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._kept = kept  # the arguments the executable takes (None: all)
        # the types calls are checked against: the executor's (ExecuteSharded: one per type)
        # where it takes the argument, the jaxpr's for an unread one
        self._in_avals = list(executor.in_avals) if kept is None else list(closed.in_avals)
        for j, i in enumerate(kept or ()):
            self._in_avals[i] = executor.in_avals[j]

    def as_text(self) -> str:
        """The optimized HLO XLA produced (after fusion)."""
        return self._executor.executable.get_hlo_text()

    def cost_analysis(self):
        """XLA's estimates for the executable: a dict with 'flops', 'bytes accessed', ..."""
        return self._executor.executable.cost_analysis()

    def memory_analysis(self):
        """XLA's buffer sizes in bytes (arguments, outputs, temporaries, generated code)."""
        return self._executor.executable.get_compiled_memory_stats()

    def __call__(self, *args, **kwargs):
        """Run on arguments of the compiled types (static arguments left out).

        Raises TypeError naming each argument leaf whose type differs (expected vs got), or
        the pytree structures if those differ. Mirrors jax/_src/stages.py Compiled.call.
        """
        flat, in_tree = tree_flatten((args, kwargs))
        if in_tree != self._in_tree:
            raise TypeError("Compiled function called with a different pytree structure of "
                            f"arguments: compiled for {self._in_tree}, called with {in_tree}")
        in_avals = self._in_avals
        # an Array holding the compiled type itself (a result of this executable fed back:
        # pxla.ExecuteSharded shares the objects) needs no comparison
        if any(getattr(x, "aval", None) is not b and not core.typematch(core.get_aval(x), b)
               for x, b in zip(flat, in_avals)):
            bad = [f"argument leaf {i}: compiled for {b.str_short()}, called with "
                   f"{a.str_short()}" for i, (a, b) in
                   enumerate(zip(map(core.get_aval, flat), in_avals)) if not core.typematch(a, b)]
            raise TypeError("Argument types differ from the types for which this computation "
                            "was compiled. The mismatches are:\n" + "\n".join(bad))
        if not isinstance(self._executor, pxla.ExecuteSharded):
            # compiled for the default device: an argument laid out on a mesh is gathered
            flat = [x if getattr(x, "_sharding", None) is None else np.asarray(x) for x in flat]
        if self._kept is not None:  # (as JAX, every argument is checked, the read ones run)
            flat = [flat[i] for i in self._kept]
        return tree_unflatten(self._out_tree, self._executor(flat))
