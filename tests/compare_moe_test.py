"""The `moe` comparison topic (`compare/moe.py`) at quick sizes: the mixture-of-experts layer
(router, top-k, capacity with dropping, dispatch/combine einsums, load-balancing loss) matches a
loop over experts in values, gradients and dropped-token counts, and the MoE GPT trains step
for step the same under minijax and JAX (bit for bit)."""

import numpy as np
import pytest
from model_checks import assert_grads_checked_and_profiled

from compare import moe


@pytest.mark.slow
def test_moe_topic_quick():
    res = moe.run(quick=True)
    assert_grads_checked_and_profiled(res)
    failing = [f"{c.name} (max_err={c.max_err})" for c in res.checks if not c.ok]
    assert len(res.checks) >= 12 and not failing, failing
    assert res.extra["minijax"]["losses"] == pytest.approx(res.extra["jax"]["losses"], rel=1e-4)
    assert res.extra["first_differing_step"] is None  # bit-identical steps: no routing flip
    ragged = [c for c in res.checks if "ragged_dot path == einsum path" in c.name]
    assert len(ragged) == 4  # values and gradients, both modules
    dropped = res.extra["dropped_tokens"]
    assert set(dropped["val_fraction"]) == {"minijax", "jax"}
    assert 0 <= dropped["val_fraction"]["minijax"] < 1 and dropped["layer_check"] >= 0


def test_keep_mask_loop_gives_first_choices_priority():
    # Two experts, capacity 2. First choices fill expert 1 (tokens 0, 1) and give expert 0
    # token 2; second choices come after all of them: token 0's takes expert 0's last slot,
    # tokens 1 and 2 find their experts full and are dropped there.
    experts = np.array([[[1, 0], [1, 0], [0, 1]]])
    keep = moe.keep_mask_loop(experts, E=2, C=2)
    np.testing.assert_array_equal(keep, [[[True, True], [True, False], [True, False]]])
