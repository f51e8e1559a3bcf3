"""`minijax.debug`: tools for looking at values while a program runs. Mirrors jax/debug.py
(the public module) over jax/_src/debugging.py. A namespace only.
"""

# printing and callbacks inside traced code (minijax/debugging.py, chapters/14-callbacks-effects.md)
from minijax.debugging import debug_callback as callback  # noqa: F401
from minijax.debugging import debug_print as print  # noqa: F401

# stopping a running program to look at its values (chapters/15-debugging.md)
from minijax.debugger import breakpoint  # noqa: F401

# sharding pictures (chapters/12-sharding.md)
from minijax.debugging import visualize_array_sharding, visualize_sharding  # noqa: F401
