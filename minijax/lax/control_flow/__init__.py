"""Control flow as primitives that hold jaxprs: `cond`/`switch`, `while_loop`, `scan`, and
`fori_loop`/`map` built on them. Mirrors jax/_src/lax/control_flow/__init__.py."""

from minijax.lax.control_flow.conditionals import cond, cond_p, switch  # noqa: F401
from minijax.lax.control_flow.loops import (  # noqa: F401
    fori_loop, map, scan, scan_p, while_loop, while_p,
)
