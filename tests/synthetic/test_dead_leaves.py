"""Dead leaves: radii follow p(r) ~ 1/r^3 on [r_min, r_max], the canvas ends fully covered,
and shapes are flat-coloured (few distinct colours)."""

import numpy as np
import pytest
from scipy import stats

from dpvip.synthetic.dead_leaves import DeadLeavesFamily, radii

R_MIN, R_MAX = 0.03, 1.0


def cube_law_cdf(r, r_min=R_MIN, r_max=R_MAX):
    return (r_min**-2 - np.asarray(r) ** -2.0) / (r_min**-2 - r_max**-2)


def square_law_cdf(r, r_min=R_MIN, r_max=R_MAX):
    """CDF of p(r) ~ 1/r^2, a wrong law the test must be able to reject."""
    return (1 / r_min - 1 / np.asarray(r)) / (1 / r_min - 1 / r_max)


def test_radii_follow_the_inverse_cube_law():
    samples = radii(np.random.default_rng(12345), 20000, R_MIN, R_MAX)
    assert samples.min() >= R_MIN and samples.max() <= R_MAX
    assert stats.kstest(samples, cube_law_cdf).pvalue > 0.01
    # The same test has the power to reject a neighbouring law on this sample size.
    assert stats.kstest(samples, square_law_cdf).pvalue < 1e-6


def test_radii_law_holds_on_another_interval():
    samples = radii(np.random.default_rng(7), 20000, 0.1, 0.5)
    assert samples.min() >= 0.1 and samples.max() <= 0.5
    assert stats.kstest(samples, lambda r: cube_law_cdf(r, 0.1, 0.5)).pvalue > 0.01
    assert np.median(samples) == pytest.approx((0.1**-2 - 0.5 * (0.1**-2 - 0.5**-2)) ** -0.5, rel=0.03)


@pytest.mark.parametrize("options", [{}, {"r_min": 0.03, "r_max": 0.1}, {"r_min": 0.2, "r_max": 0.4}])
def test_every_pixel_is_painted(options):
    # The canvas starts black; shape colours are uniform over 2^24 values, so a black pixel
    # (0, 0, 0) means a pixel no shape covered.
    family = DeadLeavesFamily(24, seed=3, **options)
    for index, image in family.images(0, 6):
        unpainted = (image == 0).all(axis=2)
        assert not unpainted.any(), f"{options} image {index}: {int(unpainted.sum())} pixels left black"


def test_shapes_are_flat_coloured():
    family = DeadLeavesFamily(32, seed=0)
    counts = [len(np.unique(image.reshape(-1, 3), axis=0)) for _, image in family.images(0, 10)]
    # Measured: 70..200 colours per 1024-pixel image; noise-like images would have ~1000.
    assert max(counts) < 1024 / 4, counts
    assert min(counts) >= 5, counts  # many shapes, not a single one covering the canvas


def test_bigger_shapes_give_fewer_colours():
    # r_min/r_max act on the picture: larger leaves mean fewer visible shapes.
    small = DeadLeavesFamily(32, seed=0, r_min=0.02, r_max=0.1)
    large = DeadLeavesFamily(32, seed=0, r_min=0.2, r_max=1.0)
    colours = lambda family: np.mean(  # noqa: E731
        [len(np.unique(im.reshape(-1, 3), axis=0)) for _, im in family.images(0, 5)]
    )
    assert colours(small) > 2 * colours(large)


@pytest.mark.parametrize("r_min, r_max", [(0.5, 0.2), (0.0, 1.0), (0.3, 0.3)])
def test_bad_radius_range_is_refused(r_min, r_max):
    with pytest.raises(ValueError, match="r_min < r_max"):
        DeadLeavesFamily(16, r_min=r_min, r_max=r_max)
