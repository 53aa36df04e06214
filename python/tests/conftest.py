# SPDX-License-Identifier: MIT
"""The device under test is Keel's default device: KEEL_BACKEND picks it
(KEEL_BACKEND=cpu on CI, KEEL_BACKEND=cuda on a GPU machine)."""
import os

import numpy as np
import pytest

import keel


@pytest.fixture(scope="session")
def dev():
    return keel.default_device()


@pytest.fixture
def rng():
    seed = int(os.environ.get("KEEL_TEST_SEED", np.random.SeedSequence().entropy % (1 << 32)))
    print(f"KEEL_TEST_SEED={seed}")
    return np.random.default_rng(seed)


def to_keel(x, dev):
    """A Keel array holding x, on dev (a copy where dev cannot address host memory)."""
    return keel.asarray(np.ascontiguousarray(x), device=dev)
