"""minijax's version (`minijax.version.__version__`, also `minijax.__version__`).
Mirrors jax/version.py."""

__version__ = "0.1.0"
__version_info__ = tuple(int(p) for p in __version__.split("."))
