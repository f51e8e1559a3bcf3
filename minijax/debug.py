"""`minijax.debug`: tools for looking at values while a program runs. Mirrors jax/debug.py
(the public module) over jax/_src/debugging.py.
"""

# sharding pictures (chapters/12-sharding.md)
from minijax.sharding import visualize_array_sharding, visualize_sharding  # noqa: F401
