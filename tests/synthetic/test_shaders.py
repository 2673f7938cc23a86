"""Shaders: image `i` renders program `i mod programs` at a time in [0.1, 10]; a program at a
given time is one fixed picture; with mix > 1 an image is a convex mix of that many renders."""

import numpy as np
import pytest
import torch

from dpvip.synthetic.family import to_uint8
from dpvip.synthetic.shaders import TIME_RANGE, ShaderFamily

RESOLUTION = 16


def test_metadata_names_program_index_mod_programs_and_a_time_in_range():
    family = ShaderFamily(RESOLUTION, seed=0, programs=5)
    metas = [family.metadata(i) for i in range(23)]
    assert [m["program"] for m in metas] == [i % 5 for i in range(23)]
    times = [m["time"] for m in metas]
    assert all(TIME_RANGE[0] <= t <= TIME_RANGE[1] for t in times)
    assert TIME_RANGE == (0.1, 10.0)
    assert len(set(times)) == len(times)  # a fresh time per image, not per program


def test_image_is_its_program_rendered_at_its_time():
    family = ShaderFamily(RESOLUTION, seed=0, programs=5)
    for index, image in family.images(0, 8):
        meta = family.metadata(index)
        # A second, independent family object stands for another run; the time in the
        # metadata is rounded to 1e-6, so allow one grey level from the rounding.
        other = ShaderFamily(RESOLUTION, seed=0, programs=5)
        again = to_uint8(other.program(meta["program"]).render(other.x, other.y, meta["time"])[None])[0]
        assert np.abs(again.astype(int) - image.astype(int)).max() <= 1, f"image {index}"
        assert (again == image).mean() > 0.99


def test_same_program_at_same_time_is_the_same_image_and_time_matters():
    a, b = ShaderFamily(RESOLUTION, seed=0, programs=50), ShaderFamily(RESOLUTION, seed=0, programs=7)
    for program in (0, 3, 6):
        # The program is fixed by (dataset seed, program id) alone, not by the programs count.
        first = a.program(program).render(a.x, a.y, 2.5)
        second = b.program(program).render(b.x, b.y, 2.5)
        assert torch.equal(first, second)
        later = a.program(program).render(a.x, a.y, 7.5)
        assert not torch.equal(first, later), f"program {program} is static in time"


def test_images_sharing_a_program_differ_through_their_time():
    family = ShaderFamily(RESOLUTION, seed=0, programs=3)
    images = dict(family.images(0, 9))
    for index in range(3):
        assert family.metadata(index)["program"] == family.metadata(index + 3)["program"]
        assert not np.array_equal(images[index], images[index + 3])


def test_programs_differ_between_dataset_seeds():
    a, b = ShaderFamily(RESOLUTION, seed=0), ShaderFamily(RESOLUTION, seed=1)
    assert not torch.equal(a.program(4).render(a.x, a.y, 1.0), b.program(4).render(b.x, b.y, 1.0))


def test_mix_metadata_is_a_convex_combination_of_six_programs():
    family = ShaderFamily(RESOLUTION, seed=0, programs=1000, mix=6)
    for index in range(10):
        meta = family.metadata(index)
        assert len(meta["programs"]) == len(meta["times"]) == len(meta["weights"]) == 6
        assert all(0 <= p < 1000 for p in meta["programs"])
        assert all(TIME_RANGE[0] <= t <= TIME_RANGE[1] for t in meta["times"])
        assert all(w >= 0 for w in meta["weights"])
        assert sum(meta["weights"]) == pytest.approx(1.0, abs=1e-5)
        assert len(set(meta["weights"])) > 1  # Dirichlet draws, not uniform 1/6


def test_mix_image_is_the_weighted_sum_of_its_renders():
    family = ShaderFamily(RESOLUTION, seed=0, programs=1000, mix=6)
    ((index, image),) = family.images(4, 5)
    meta = family.metadata(index)
    other = ShaderFamily(RESOLUTION, seed=0, programs=1000)
    renders = [other.program(p).render(other.x, other.y, t) for p, t in zip(meta["programs"], meta["times"])]
    expected = to_uint8(sum(w * r for w, r in zip(meta["weights"], renders))[None])[0]
    assert np.abs(expected.astype(int) - image.astype(int)).max() <= 1
    # ... and not simply one of its components.
    for render in renders:
        assert np.abs(to_uint8(render[None])[0].astype(int) - image.astype(int)).mean() > 2
