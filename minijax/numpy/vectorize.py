"""`jnp.vectorize`: NumPy's vectorize, built on `vmap` rather than a Python loop.

Without a signature every argument is broadcast against the others and the function is
`vmap`ped once per dimension, so it sees scalars. With a signature such as `"(n),(n)->()"`
each argument's trailing core dimensions are kept, its leading loop dimensions broadcast and
`vmap`ped. Mirrors jax/_src/numpy/vectorize.py.
"""

from __future__ import annotations

import functools
import re

from minijax import core
from minijax.numpy.array_constructors import asarray
from minijax.numpy.util import broadcast_shapes, broadcast_to

_DIMS = r"\((\w+(?:,\s*\w+)*)?\)"
_ARGS = rf"{_DIMS}(?:,\s*{_DIMS})*"
_SIGNATURE = re.compile(rf"^\s*{_ARGS}\s*->\s*{_ARGS}\s*$")


def _parse_signature(signature: str):
    """`"(m,n),(n)->(m)"` -> `([("m", "n"), ("n",)], [("m",)])`."""
    if not _SIGNATURE.match(signature):
        raise ValueError(f"jnp.vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = signature.split("->")
    parse = lambda part: [tuple(d.strip() for d in dims.split(",") if d.strip())
                          for dims in re.findall(r"\(([^)]*)\)", part)]
    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature: str | None = None):
    """`pyfunc`, mapped over the leading (broadcast) dimensions of its arguments with `vmap`.

    Args:
      pyfunc: the function of scalars (or of core-dimension arrays, per `signature`).
      excluded: positions or keyword names passed through unvectorized.
      signature: a generalized-ufunc signature, e.g. `"(n),(n)->()"`.
    Returns: a function whose outputs have the broadcast loop shape plus the core dimensions.
    Raises: ValueError for a bad signature, a wrong number of arguments for it, or core
      dimensions of inconsistent sizes. Mirrors jax/_src/numpy/vectorize.py vectorize.
    """
    in_core, out_core = _parse_signature(signature) if signature else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        from minijax import api  # not at the top: minijax.api imports minijax.numpy
        excluded_kw = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_kw = sorted(k for k in kwargs if k not in excluded)
        positions = [i for i in range(len(args)) if i not in excluded]
        arrays = [asarray(args[i]) for i in positions] + [asarray(kwargs[k]) for k in mapped_kw]
        cores = in_core if in_core is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise ValueError(f"jnp.vectorize: signature {signature!r} takes {len(cores)} "
                             f"arguments, got {len(arrays)}")
        sizes: dict[str, int] = {}
        loop_shapes = []
        for x, dims in zip(arrays, cores):
            shape = core.get_aval(x).shape
            if len(shape) < len(dims):
                raise ValueError(f"jnp.vectorize: an input of shape {shape} has fewer "
                                 f"dimensions than its core dimensions {dims}")
            for d, n in zip(dims, shape[len(shape) - len(dims):]):
                if sizes.setdefault(d, n) != n:
                    raise ValueError(f"jnp.vectorize: core dimension {d!r} has sizes "
                                     f"{sizes[d]} and {n}")
            loop_shapes.append(shape[:len(shape) - len(dims)])
        loop = broadcast_shapes(*loop_shapes)
        arrays = [broadcast_to(x, loop + core.get_aval(x).shape[len(s):])
                  for x, s in zip(arrays, loop_shapes)]

        def call(*mapped):
            full = list(args)
            for i, x in zip(positions, mapped):
                full[i] = x
            kw = dict(zip(mapped_kw, mapped[len(positions):]), **excluded_kw)
            out = pyfunc(*full, **kw)
            outs = out if isinstance(out, tuple) else (out,)
            if out_core is not None and (len(outs) != len(out_core) or any(
                    core.get_aval(o).ndim != len(d) for o, d in zip(outs, out_core))):
                raise ValueError(f"jnp.vectorize: outputs of shapes "
                                 f"{[core.get_aval(o).shape for o in outs]} do not match the "
                                 f"core dimensions {out_core} of signature {signature!r}")
            return out

        fn = call
        for _ in loop:
            fn = api.vmap(fn)
        return fn(*arrays)

    return wrapped
