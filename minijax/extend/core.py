"""`minijax.extend.core`: primitives and jaxprs (minijax/core.py) at the path of
`jax.extend.core`. Mirrors jax/extend/core/__init__.py. A namespace only.
"""

from minijax.core import (  # noqa: F401
    ClosedJaxpr,
    DropVar,
    Jaxpr,
    JaxprEqn,
    Literal,
    Primitive,
    Var,
    check_jaxpr,
    jaxpr_as_fun,
    set_current_trace,
)
