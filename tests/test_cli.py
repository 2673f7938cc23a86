"""The `dpvip privacy` and `dpvip bundle` contracts of DESIGN.md."""

import pytest

from conftest import dpvip_json, run_dpvip


@pytest.mark.slow
def test_epsilon_contract():
    out = dpvip_json(
        "privacy",
        "epsilon",
        "--sample-rate",
        str(98304 / 233e6),
        "--noise-multiplier",
        "0.48",
        "--steps",
        "6100",
        "--delta",
        str(1 / 466e6),
        "--accountant",
        "rdp",
    )
    assert out["epsilon"] == pytest.approx(8.0, abs=0.05)
    assert out["accountant"] == "rdp"


@pytest.mark.slow
def test_sigma_contract_round_trips_through_epsilon():
    out = dpvip_json(
        "privacy",
        "sigma",
        "--sample-rate",
        "0.08192",
        "--steps",
        "875",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--accountant",
        "prv",
    )
    back = dpvip_json(
        "privacy",
        "epsilon",
        "--sample-rate",
        "0.08192",
        "--noise-multiplier",
        str(out["noise_multiplier"]),
        "--steps",
        "875",
        "--delta",
        "1e-5",
        "--accountant",
        "prv",
    )
    assert 0.95 <= back["epsilon"] <= 1.0


@pytest.mark.slow
def test_composed_full_batch_mechanisms():
    # DP-RandP Table 23, epsilon = 1: private mean (sigma 71) + 100 steps (sigma 43).
    out = dpvip_json(
        "privacy",
        "epsilon",
        "--sample-rate",
        "1",
        "--noise-multiplier",
        "71",
        "--steps",
        "1",
        "--noise-multiplier",
        "43",
        "--steps",
        "100",
        "--delta",
        "7.8e-7",
        "--accountant",
        "pld",
    )
    assert out["method"] == "analytic-gaussian-gdp"
    assert out["epsilon"] <= 1.0 and len(out["mechanisms"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["epsilon", "--sample-rate", "1.5", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5"],
            "sample rate 1.5",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "0", "--steps", "10", "--delta", "1e-5"],
            "noise multiplier 0.0",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "-2", "--steps", "10", "--delta", "1e-5"],
            "noise multiplier -2.0",
        ),
        (["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "10", "--delta", "0"], "delta 0.0"),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "10", "--delta", "1.5"],
            "delta 1.5",
        ),
        (["sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "-1", "--delta", "1e-5"], "epsilon -1.0"),
        (["sigma", "--sample-rate", "0", "--steps", "10", "--epsilon", "1", "--delta", "1e-5"], "sample rate 0.0"),
        (["sigma", "--sample-rate", "abc", "--steps", "10", "--epsilon", "1", "--delta", "1e-5"], "--sample-rate"),
        (
            [
                "epsilon",
                "--sample-rate",
                "0.1",
                "--noise-multiplier",
                "1",
                "--noise-multiplier",
                "2",
                "--noise-multiplier",
                "3",
                "--steps",
                "1",
                "--steps",
                "2",
                "--delta",
                "1e-5",
            ],
            "--steps is given 2 times",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    done = run_dpvip("privacy", *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert done.stdout == ""


def test_the_accountant_flag_takes_exactly_the_library_accountants(capsys):
    from dpvip.cli import build_parser
    from dpvip.privacy.accounting import ACCOUNTANTS

    parser = build_parser()
    base = ["privacy", "sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "1", "--delta", "1e-5"]
    assert [parser.parse_args([*base, "--accountant", name]).accountant for name in ACCOUNTANTS] == list(ACCOUNTANTS)
    with pytest.raises(SystemExit) as refused:
        parser.parse_args([*base, "--accountant", "moments"])
    assert refused.value.code == 2 and "invalid choice: 'moments'" in capsys.readouterr().err
