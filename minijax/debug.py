"""`minijax.debug`: printing and callbacks inside traced code, as `jax.debug`.

A namespace only: the code is in minijax/debugging.py (chapters/14-callbacks-effects.md).
"""

from minijax.debugging import debug_callback as callback  # noqa: F401
from minijax.debugging import debug_print as print  # noqa: F401
