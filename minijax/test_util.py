"""`minijax.test_util`: the public testing helpers, as `jax.test_util`."""

from minijax.public_test_util import check_grads, check_jvp, check_vjp  # noqa: F401
