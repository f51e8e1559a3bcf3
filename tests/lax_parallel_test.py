"""pshuffle, pswapaxes and pbroadcast (minijax/lax/parallel.py) under shard_map on 8 CPU
devices, against JAX: the checks run in one child process (tests/lax_parallel_checks.py)."""

import os

import pytest
from eight_devices import check_names, child_results

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the 8-device child) is computed once, not once per worker.
pytestmark = pytest.mark.xdist_group("lax_parallel_test")

_SCRIPT = os.path.join(os.path.dirname(__file__), "lax_parallel_checks.py")
CHECKS = check_names(_SCRIPT)


@pytest.fixture(scope="module")
def results():
    return child_results(_SCRIPT)


@pytest.mark.parametrize("name", CHECKS)
def test_collective(results, name):
    if name in results["failed"]:
        pytest.fail(results["failed"][name], pytrace=False)
    assert name in results["passed"]
