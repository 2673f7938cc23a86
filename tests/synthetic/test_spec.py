"""DatasetSpec: every configured value is checked and a bad one is named in a one-line
DpvipInputError; the torch-free family registry matches the family classes."""

import inspect

import pytest

from dpvip.errors import DpvipInputError
from dpvip.synthetic import FAMILIES, GENERATED_FAMILIES, family_class
from dpvip.synthetic.spec import DatasetSpec

GOOD = {"family": "dead_leaves", "images": 25, "resolution": 16, "shard_size": 10}


def spec_with(**changes) -> dict:
    return {k: v for k, v in (GOOD | changes).items() if v is not ...}


def test_good_config_gives_shards_and_ranges():
    spec = DatasetSpec.from_config("d", spec_with(options={"r_min": 0.05, "r_max": 1}))
    assert spec.shards == 3
    assert [spec.shard_range(s) for s in range(3)] == [range(0, 10), range(10, 20), range(20, 25)]
    assert spec.describe()["options"] == {"r_min": 0.05, "r_max": 1}


@pytest.mark.parametrize(
    "values, named",
    [
        (spec_with(family="dead_leafs"), "dead_leafs"),
        (spec_with(images=0), "images must be a positive integer (got 0)"),
        (spec_with(images=-5), "images must be a positive integer (got -5)"),
        (spec_with(images=2.5), "images must be a positive integer (got 2.5)"),
        (spec_with(images="100"), "images must be a positive integer (got '100')"),
        (spec_with(images=True), "images must be a positive integer (got True)"),
        (spec_with(resolution=0), "resolution must be a positive integer (got 0)"),
        (spec_with(shard_size=0), "shard_size must be a positive integer (got 0)"),
        (spec_with(encoding="gif"), "gif"),
        (spec_with(colour="red"), "unknown key 'colour'"),
        (spec_with(images=...), "missing key 'images'"),
        (spec_with(options={"mix": 6}), "option 'mix' does not apply to dead_leaves"),
        (spec_with(family="shaders", options={"mix": 1.5}), "option mix must be a positive int (got 1.5)"),
        (spec_with(family="shaders", options={"programs": 0}), "option programs must be a positive int (got 0)"),
        (spec_with(family="shaders", options={"programs": "9"}), "option programs must be a positive int (got '9')"),
        (spec_with(options={"r_min": -0.1}), "option r_min must be a positive float (got -0.1)"),
        (spec_with(family="stylegan_oriented", resolution=48), "power of two for stylegan_oriented (got 48)"),
    ],
)
def test_bad_values_are_named(values, named):
    with pytest.raises(DpvipInputError) as caught:
        DatasetSpec.from_config("bad_set", values)
    message = str(caught.value)
    assert named in message and "bad_set" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "values, named",
    [
        (spec_with(seed=-1), "seed"),  # numpy's SeedSequence refuses negative seeds at render time
        (spec_with(seed=1.5), "seed"),
        (spec_with(options=None), "options"),  # e.g. a YAML `options:` with nothing under it
    ],
)
def test_seed_and_options_container_are_checked_too(values, named):
    # The module promises that from_config "checks every value and names the bad one".
    with pytest.raises(DpvipInputError, match=named):
        DatasetSpec.from_config("bad_set", values)


def test_option_combination_the_family_refuses_is_named_by_the_generator():
    spec = DatasetSpec.from_config("leaves", spec_with(options={"r_min": 0.5, "r_max": 0.2}))
    with pytest.raises(DpvipInputError, match="leaves.*r_min < r_max"):
        spec.generator()
    tiny = DatasetSpec.from_config("tiny", spec_with(family="stylegan_oriented", resolution=2))
    with pytest.raises(DpvipInputError, match=r"tiny.*got 2"):
        tiny.generator()


@pytest.mark.parametrize("shard", [3, -1, 100])
def test_shard_range_out_of_range_is_named(shard):
    spec = DatasetSpec.from_config("d", GOOD)
    with pytest.raises(DpvipInputError, match=rf"shards 0\.\.2 \(asked for {shard}\)"):
        spec.shard_range(shard)


def test_last_shard_holds_the_remainder_and_exact_division_has_no_empty_shard():
    assert DatasetSpec.from_config("d", spec_with(images=20)).shards == 2
    spec = DatasetSpec.from_config("d", spec_with(images=21))
    assert spec.shards == 3 and spec.shard_range(2) == range(20, 21)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_registry_options_are_exactly_the_class_keywords(name):
    parameters = inspect.signature(family_class(name).__init__).parameters
    # a family that reads the user's images also takes the dataset's path and image count
    given = ("self", "resolution", "seed", "device", *(("path", "images") if FAMILIES[name].reads_path else ()))
    keywords = {k: p for k, p in parameters.items() if k not in given}
    assert set(FAMILIES[name].options) == set(keywords)
    for key, kind in FAMILIES[name].options.items():
        assert type(keywords[key].default) is kind, (
            f"{name}.{key}: default {keywords[key].default!r} is not {kind.__name__}"
        )
    assert family_class(name).name == name


def test_power_of_two_flag_matches_the_class():
    for name in GENERATED_FAMILIES:
        cls, info = family_class(name), FAMILIES[name]
        if info.power_of_two:
            with pytest.raises(ValueError):
                cls(48)
        else:
            cls(12)  # any size is fine


def test_registry_import_does_not_need_torch():
    import subprocess
    import sys

    code = "import sys, dpvip.synthetic, dpvip.synthetic.spec; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
