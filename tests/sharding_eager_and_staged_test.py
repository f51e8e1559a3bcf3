"""Sharded operations computed now and staged under jit (tests/sharding_eager_and_staged_checks.py)
against JAX, on 8 CPU devices: all checks run in ONE child process, each reported here as its
own test.
"""

import os

import pytest
from eight_devices import check_names, child_results

# One xdist worker runs this module (`make test` distributes with --dist loadgroup), so
# its module fixture (the 8-device child) is computed once, not once per worker.
# Slow: all its checks in one 8-device child.
pytestmark = [pytest.mark.xdist_group("sharding_eager_and_staged_test"), pytest.mark.slow]

_SCRIPT = os.path.join(os.path.dirname(__file__), "sharding_eager_and_staged_checks.py")
CHECKS = check_names(_SCRIPT)


@pytest.fixture(scope="module")
def results():
    return child_results(_SCRIPT)


def test_every_check_ran(results):
    assert len(CHECKS) >= 7
    assert sorted(results["passed"] + list(results["failed"])) == sorted(CHECKS)


@pytest.mark.parametrize("name", CHECKS)
def test_sharding_eager_and_staged(results, name):
    if name in results["failed"]:
        pytest.fail(results["failed"][name], pytrace=False)
    assert name in results["passed"]
