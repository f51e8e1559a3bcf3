"""Exercise: a tensor-parallel MLP with shard_map, and FSDP's bill predicted (chapter 25).

1. `tp_mlp(J, h, w_fc, b_fc, w_proj, b_proj, axis)`: the per-device body of Megatron's MLP,
   `gelu(h @ w_fc + b_fc) @ w_proj + b_proj`, for module `J` (jax or minijax). Inside
   `shard_map` the device holds h f32[B,d] whole, a block of columns of w_fc f32[d,f/n] and of
   b_fc f32[f/n], the matching block of rows of w_proj f32[f/n,d], and b_proj f32[d] whole.
   Return the full output f32[B,d] on every device, with exactly one collective in the
   forward pass. Mark h as varying over `axis` before it meets the split weights
   (`J.lax.pcast(h, axis, to="varying")`): then `grad` gives its cotangent one all-reduce,
   not one per use.

2. `fsdp_prediction(param_bytes, n_params, n)`: for an FSDP training step of a model with
   `n_params` weight arrays of `param_bytes` bytes in all, each split over `n` devices along
   one dimension and all-gathered just before use (the backward pass reuses the gathered
   weights), predict `(counts, bytes_sent)`: `counts` a dict with the number of
   "all-gather" and "reduce-scatter" instructions in the compiled step (one per weight array
   each, unless you can argue otherwise) and `bytes_sent` the bytes one device sends per step
   for them over a ring.

The tests run 1. under `shard_map` in both modules against the unsharded MLP (values and
gradients), and check 2. against the HLO of a compiled minijax FSDP step, counted by
`compare.gpt_sharded.hlo_bytes`.
"""

from __future__ import annotations


def tp_mlp(J, h, w_fc, b_fc, w_proj, b_proj, axis: str):
    """Megatron's MLP on one device's column/row blocks: f32[B,d], replicated over `axis`."""
    raise NotImplementedError("tp_mlp")


def fsdp_prediction(param_bytes: int, n_params: int, n: int) -> tuple[dict, float]:
    """({"all-gather": k, "reduce-scatter": k}, bytes one device sends per step)."""
    raise NotImplementedError("fsdp_prediction")
