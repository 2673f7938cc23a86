"""Images must not depend on the number of threads a job runs with (Snakemake jobs, the
CLI and tests all use different counts). Some torch CPU kernels (bilinear upsampling,
batched FFT) round differently across thread counts; the generators pin those to one thread."""

import numpy as np
import pytest
import torch

from dpvip.synthetic.spec import DatasetSpec


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("family", ["stylegan_oriented", "shaders"])  # the torch families
def test_same_images_with_one_or_two_threads(family, restore_threads):
    spec = DatasetSpec.from_config("t", {"family": family, "images": 32, "resolution": 64, "shard_size": 32})
    rendered = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        rendered[threads] = np.stack([image for _, image in spec.generator().images(0, 32)])
    assert torch.get_num_threads() == 2  # the pinning is undone after each kernel
    assert np.array_equal(rendered[1], rendered[2])
