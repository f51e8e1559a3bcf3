"""The checks of tests/lax_parallel_test.py (pshuffle, pswapaxes, pbroadcast), run in one
child process with 8 CPU devices: XLA_FLAGS must be set before JAX is imported. Prints one
JSON line {"passed": [...], "failed": {name: traceback}} (tests/eight_devices.py)."""

from eight_devices import request_eight_devices, run_checks

request_eight_devices()  # before JAX is imported

import jax  # noqa: E402
import numpy as np  # noqa: E402

import minijax  # noqa: E402

X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)


def _smap(J, f, out_specs):
    mesh = J.make_mesh((8,), ("i",), axis_types=(J.sharding.AxisType.Auto,))
    return J.jit(J.shard_map(f, mesh=mesh, in_specs=J.sharding.PartitionSpec("i"),
                             out_specs=out_specs))


def check_pshuffle_and_pswapaxes_match_jax():
    def program(J):
        P = J.sharding.PartitionSpec
        body = lambda a: (J.lax.pshuffle(a, "i", [3, 2, 1, 0, 7, 6, 5, 4]),
                          J.lax.pswapaxes(J.numpy.tile(a, (8, 1)), "i", 0))
        return _smap(J, body, (P("i"), P("i")))(X)
    for got, want in zip(program(minijax), program(jax)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def check_pbroadcast_copies_the_source_block():
    # JAX's pbroadcast has no CPU lowering (XLA's CollectiveBroadcast): checked by its meaning
    f = _smap(minijax, lambda a: minijax.lax.pbroadcast(a, "i", 5),
              minijax.sharding.PartitionSpec("i"))
    np.testing.assert_array_equal(np.asarray(f(X)), np.tile(X[5:6], (8, 1)))


if __name__ == "__main__":
    run_checks(globals())
