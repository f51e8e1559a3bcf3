"""Exercise: the dispatch and combine tensors of a mixture-of-experts layer (chapter 21).

A token goes to its k most probable experts, but each expert takes at most C tokens per group
(the *capacity*), so that every shape is fixed. Write, against a module alias `J` (`jax` or
`minijax`, so the same code runs in both):

* `dispatch_tensors(J, gates, experts, n_experts, capacity)`: for gates f32[G,S,k] and
  experts int32[G,S,k] (token s's k choices, distinct, with their gates), the chapter's
  tensors: `dispatch[g,s,e,c]` is 1 where token s of group g sits in slot c of expert e,
  `combine` the same with the gate as its value, and `dropped` the number of (token, choice)
  assignments that found no slot. Slots are handed out in order within a group, all first
  choices before any second choice: token s's slot in expert e is the number of earlier
  tokens that chose e in this round, plus the slots earlier rounds filled. A slot >= C drops
  the assignment. No Python loop over tokens: a one-hot matrix of the round's choices
  (`J.nn.one_hot`) and its cumulative sum over the tokens (`J.numpy.cumsum`) give every
  token's slot at once; loop over the k rounds only.
* `to_expert_slots(J, dispatch, h)`: h f32[G,S,d] gathered into the experts' slots,
  f32[E,G,C,d] (an einsum), and `from_expert_slots(J, combine, y)`: the experts' outputs
  y f32[E,G,C,d] scattered back to the tokens, weighted by their gates, f32[G,S,d].

The tests check the tensors and the drop count against the chapter's `compare/moe.py:
dispatch_tensors` under real JAX and against `compare/moe.py: keep_mask_loop`, a plain loop
over tokens, for top-1 and top-2 routing with capacities that drop and that do not; then a
layer built from your three functions against a loop over experts, values and gradients.
JAX has no MoE layer of its own: this is GShard's and Switch Transformer's formulation, as
the chapter builds it in compare/moe.py (`dispatch_tensors`, `make_moe_mlp`).
"""

from __future__ import annotations

import numpy as np  # noqa: F401 (for your code)


def dispatch_tensors(J, gates, experts, n_experts: int, capacity: int):
    """gates: f32[G,S,k], experts: int32[G,S,k] (token s's k choices, distinct) ->
    (combine f32[G,S,E,C], dispatch f32[G,S,E,C], dropped int32[])."""
    raise NotImplementedError("dispatch_tensors: per round j, one_hot(experts[..., j]), its "
                              "cumsum over tokens plus the slots filled so far, kept if < C")


def to_expert_slots(J, dispatch, h):
    """dispatch: f32[G,S,E,C], h: f32[G,S,d] -> f32[E,G,C,d]: each slot holds its token."""
    raise NotImplementedError("to_expert_slots: one einsum, 'gsec,gsd->egcd'")


def from_expert_slots(J, combine, y):
    """combine: f32[G,S,E,C], y: f32[E,G,C,d] -> f32[G,S,d]: each token's kept experts'
    outputs, weighted by their gates."""
    raise NotImplementedError("from_expert_slots: one einsum, back to [G,S,d]")
