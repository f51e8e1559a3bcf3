"""Effects: what an equation does besides computing its outputs.

An `Effect` is a marker object. A primitive declares the effects of one application with
`Primitive.def_effectful_abstract_eval`; the equation that records it carries them
(`JaxprEqn.effects`), and so does every jaxpr holding such an equation (`Jaxpr.effects`) and
every higher-order equation holding such a jaxpr (jit, cond, while, scan, custom_jvp/vjp,
checkpoint: `minijax/core.py: eqn_effects`). Two things follow from an effect:

* dead-code elimination keeps the equation even when no output is used
  (`minijax/interpreters/partial_eval.py: dce_jaxpr`), unless each of its effects is in
  `dceable_effects` (reading a ref is);
* an effect whose type is in `ordered_effects` is sequenced: the lowered `main` takes and
  returns one runtime token per ordered effect, every equation with that effect consumes the
  current token and produces the next, and the runtime hands each compiled call the token the
  previous call returned (`minijax/interpreters/mlir.py: lower_jaxpr_to_module`,
  `minijax/compiler.py: RuntimeTokenSet`). So host calls happen in program order, across
  jitted calls too.

The callbacks' effects live with them (`minijax/callback.py: IOEffect, OrderedIOEffect`,
`minijax/debugging.py: DebugEffect, OrderedDebugEffect`); effects that belong to one input of
an equation (reading or writing a `Ref`) subclass `JaxprInputEffect`.
Mirrors jax/_src/effects.py. Taught in chapters/14-callbacks-effects.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Any


# JAX: jax/_src/effects.py Effect
class Effect:
    """A side effect. Subclass it; JAX's convention is one instance per kind of effect, whose
    `str` is what `jaxpr.pretty_print(print_effects=True)` shows (`IO`, `Debug`, ...)."""


Effects = Set[Effect]
no_effects: Effects = frozenset()


# JAX: jax/_src/effects.py JaxprInputEffect
class JaxprInputEffect(Effect):
    """An effect on one input of an equation or jaxpr (`input`: its position, or its Var once
    the equation is formed), e.g. reading or writing a mutable `Ref`. Equal when of the same
    class on the same input. A higher-order primitive whose inner jaxpr has such effects must
    say which of its own inputs they concern, so `core.eqn_effects` does not pass them up."""

    def __init__(self, input: Any) -> None:
        self.input = input

    def replace(self, input: Any) -> "JaxprInputEffect":
        return self.__class__(input)

    def __eq__(self, other) -> bool:
        if not isinstance(other, JaxprInputEffect):
            return NotImplemented
        return type(self) is type(other) and self.input == other.input

    def __hash__(self) -> int:
        return hash((self.__class__, self.input))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.input})"


# JAX: jax/_src/effects.py EffectTypeSet
class EffectTypeSet:
    """A registry of effect classes (membership by isinstance), e.g. `ordered_effects`."""

    def __init__(self) -> None:
        self._effect_types: set[type[Effect]] = set()

    def __repr__(self) -> str:
        return f"EffectTypeSet({self._effect_types})"

    def add_type(self, effect_type: type[Effect]) -> None:
        self._effect_types.add(effect_type)

    def contains(self, eff: Effect) -> bool:
        return any(isinstance(eff, t) for t in self._effect_types)

    def filter_in(self, effects: Iterable[Effect]) -> list[Effect]:
        return [e for e in effects if self.contains(e)]

    def filter_not_in(self, effects: Iterable[Effect]) -> list[Effect]:
        return [e for e in effects if not self.contains(e)]


# The effects sequenced by runtime tokens (JAX keeps more registries: which effects control
# flow, custom derivatives and remat accept; minijax accepts every effect there).
ordered_effects: EffectTypeSet = EffectTypeSet()

# JAX: jax/_src/effects.py shardable_ordered_effects — the ordered effects a program
# partitioned over several devices may have (ordered io_callback's; not ordered debug's)
shardable_ordered_effects: EffectTypeSet = EffectTypeSet()

# JAX: jax/_src/interpreters/partial_eval.py dceable_effects — effects that do not keep an
# unused equation alive in dead-code elimination (reading a ref: minijax/state/types.py)
dceable_effects: EffectTypeSet = EffectTypeSet()
