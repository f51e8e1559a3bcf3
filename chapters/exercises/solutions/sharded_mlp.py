"""Solution: a tensor-parallel MLP with shard_map, and FSDP's bill predicted (chapter 25)."""

from __future__ import annotations


def tp_mlp(J, h, w_fc, b_fc, w_proj, b_proj, axis: str):
    """Megatron's MLP on one device's column/row blocks: f32[B,d], replicated over `axis`."""
    h = J.lax.pcast(h, axis, to="varying")         # backward: one all-reduce of dh
    hidden = J.nn.gelu(h @ w_fc + b_fc)            # this device's f/n hidden units
    return J.lax.psum(hidden @ w_proj, axis) + b_proj  # forward: one all-reduce of the output


def fsdp_prediction(param_bytes: int, n_params: int, n: int) -> tuple[dict, float]:
    """({"all-gather": k, "reduce-scatter": k}, bytes one device sends per step)."""
    # Over a ring, an all-gather has each device forward n-1 blocks of 1/n of the array:
    # (n-1)/n of the whole. The gradient's reduce-scatter sends the same amount back.
    counts = {"all-gather": n_params, "reduce-scatter": n_params}
    return counts, 2 * (n - 1) / n * param_bytes
