import os
import sys

# gdn_ref.py (the float64 oracle) lives beside the tests.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id: fresh inputs per test, reproducible per test."""
    seed = abs(hash(request.node.nodeid)) % (2 ** 32)
    return np.random.default_rng(seed)
