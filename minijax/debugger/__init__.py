"""The debugger behind `debug.breakpoint`: `core.py` captures the frames and calls a registered
debugger at run time; `cli_debugger.py` is the text one. Mirrors jax/_src/debugger/.
"""

from minijax.debugger import cli_debugger  # noqa: F401 - registers the `cli` backend
from minijax.debugger.core import breakpoint  # noqa: F401
