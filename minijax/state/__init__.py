"""Mutable references (refs), the state primitives and state discharge (jax/_src/state/)."""

from minijax.state.types import AbstractRef, Slice, ds, dslice, is_ref  # noqa: F401
from minijax.state.primitives import (  # noqa: F401
    addupdate_p, get_p, ref_addupdate, ref_get, ref_set, ref_swap, swap_p,
)
from minijax.state.discharge import discharge_state, discharge_rules, run_state  # noqa: F401
