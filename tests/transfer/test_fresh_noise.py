"""A DP transfer run's noise depends on the private data it reads (finding 2 of the privacy
review): rerunning a study on features with one example removed, with the same study key,
draws other noise, so differencing the two releases (n w - (n - 1) w') recovers nothing of
the removed example. Before, the stream was keyed by the run's settings only: the same noise,
and the difference gave the removed example's clipped vector to 1e-6."""

import numpy as np
import torch

from dpvip.evaluate.datasets import LabelledImages
from dpvip.plan.transfer_runs import FeatureSet, Run
from dpvip.privacy.noise import gaussian_noise, noise_stream
from dpvip.transfer import jobs
from dpvip.transfer.cache import cache_features
from dpvip.transfer.private_probe import clipped_row_sum

WIDTH, N, C, SIGMA = 256, 60, 1.0, 1.0


def released_means(tmp_path, monkeypatch, images: LabelledImages) -> torch.Tensor:
    """A study of one private-mean release on `images`' features, run in the same job folder
    (hence with the same study key, kept between the two studies)."""
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(48, WIDTH, generator=generator)
    cache = tmp_path / f"cache{len(images)}"
    test = LabelledImages(images.images[:10], images.labels[:10], 3, "tiny")
    cache_features(lambda x: x.flatten(1) @ weight, images, test, cache, fingerprint={}, progress=False)
    released = {}

    def release(run, cached, randomness, state, progress):  # the private mean, as the probe releases it
        rows = cached.train[0].read(0, len(cached.train_labels))
        noise = gaussian_noise((WIDTH,), SIGMA * C, noise_stream(randomness, 0, torch.device("cpu")))
        released["mean"] = (clipped_row_sum(rows, C) + noise.double()) / len(cached.train_labels)
        return {"released": True}

    monkeypatch.setattr(jobs, "_train", release)
    features = FeatureSet("tiny", "blobs", "prelogits", 4)
    settings = {"delta": 1e-5, "clip_norm": C, "randomness": "secret", "epsilon": 4.0, "steps": 1, "lr": 1.0}
    out = tmp_path / "study" / "study.json"
    out.parent.mkdir(exist_ok=True)
    jobs.run_study(
        "study",
        [Run("probe", "row", "seed 0", features, settings | {"seed": 0})],
        {features.path: cache},
        out,
        progress=False,
    )
    out.unlink()  # the next study runs afresh in the same folder
    return released["mean"], cache


def test_removing_one_example_draws_other_noise_and_differencing_recovers_nothing(tmp_path, monkeypatch, keep_keys):
    generator = torch.Generator().manual_seed(0)
    images = LabelledImages(torch.randn(N, 3, 4, 4, generator=generator), torch.arange(N) % 3, 3, "tiny")
    whole, cache = released_means(tmp_path, monkeypatch, images)
    removed, _ = released_means(tmp_path, monkeypatch, images.subset(range(1, N)))
    rows = torch.from_numpy(np.load(sorted(cache.glob("train_v0_*.npy"))[0])).double()
    target = clipped_row_sum(rows[:1], C)  # the removed example's clipped feature vector
    difference = N * whole - (N - 1) * removed
    correlation = torch.corrcoef(torch.stack([difference, target]))[0, 1]
    # fresh noise: the difference is target + Z - Z', |corr| ~ 1 / sqrt(1 + 2 sigma^2 C^2 d) = 0.044
    assert abs(float(correlation)) < 0.25
    assert (difference - target).norm() > 10 * C  # the noise did not cancel
