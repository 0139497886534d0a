"""Shared fixtures, imported by each test module (a conftest.py here would shadow the suite's top-level `conftest`
module that other directories import): Fashion-MNIST subsets and the shipped model (skipped where Debian's data set
is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


@pytest.fixture(scope="session")
def fmnist():
    if not DATA.exists():
        pytest.skip("dataset-fashion-mnist is not installed (scripts/env.sh installs it)")
    from nearflash.cognitive import fashion_mnist

    db, db_labels = fashion_mnist("train", 2000)
    qs, q_labels = fashion_mnist("test", 200)
    return db, db_labels, qs, q_labels


@pytest.fixture(scope="session")
def model():
    from nearflash.cognitive import load_model

    return load_model()


@pytest.fixture(scope="session")
def index(fmnist, model):
    from nearflash.cognitive import DlgIndex

    return DlgIndex(fmnist[0], model, calibration=500)


#: A small Cosmos+ (4 channels x 2 ways, 64 blocks of 32 pages per plane) with `reserved` blocks per plane for DLG-x.
SMALL = dict(channels=4, chips_per_channel=2, blocks_per_plane=64, pages_per_block=32, over_provisioning=25,
             write_buffer="1MiB")


def small_device(reserved: int = 8):
    from nearflash import Device

    return Device(None, "cosmos-plus", ext_reserved_blocks=reserved, **SMALL)
