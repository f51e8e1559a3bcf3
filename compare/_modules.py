"""The modules a topic runs its programs under, as (name, module) pairs: JAX, the reference,
first, then minijax. Every topic that writes a program once over a module argument `J` loops
over `MODULES` (`for name, J in MODULES`), so the two runs see the same code.

Which modules each topic runs, "both" or "jax" alone, it declares in `compare/__init__.py:
TOPICS`, read by `python -m compare` (`compare/__main__.py: runs_of`).
"""

from __future__ import annotations

import jax

import minijax

MODULES = (("jax", jax), ("minijax", minijax))
