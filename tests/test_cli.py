"""The `dpvip privacy` and `dpvip bundle` command contracts."""

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
            "argument --sample-rate: must be in (0, 1] (got 1.5)",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "0", "--steps", "10", "--delta", "1e-5"],
            "argument --noise-multiplier: must be positive (got 0)",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "-2", "--steps", "10", "--delta", "1e-5"],
            "argument --noise-multiplier: must be positive (got -2)",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "10", "--delta", "0"],
            "--delta: must be between 0 and 1",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "10", "--delta", "1.5"],
            "argument --delta: must be between 0 and 1, both excluded (got 1.5)",
        ),
        (
            ["sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "-1", "--delta", "1e-5"],
            "dpvip privacy sigma: error: argument --epsilon: must be positive (got -1)",
        ),
        (
            ["sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "0", "--delta", "1e-5"],
            "argument --epsilon: must be positive (got 0)",
        ),
        (  # not "cannot be reached by any noise multiplier": refused as the value it is
            ["sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "inf", "--delta", "1e-5"],
            "dpvip privacy sigma: error: argument --epsilon: must be a finite number (got inf)",
        ),
        (
            ["sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "nan", "--delta", "1e-5"],
            "dpvip privacy sigma: error: argument --epsilon: must be a finite number (got nan)",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "inf", "--steps", "10", "--delta", "1e-5"],
            "dpvip privacy epsilon: error: argument --noise-multiplier: must be a finite number (got inf)",
        ),
        (
            ["epsilon", "--sample-rate", "0.1", "--noise-multiplier", "1", "--steps", "0", "--delta", "1e-5"],
            "dpvip privacy epsilon: error: argument --steps: must be a positive integer (got 0)",
        ),
        (
            ["epsilon", "--sample-rate", "nan", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5"],
            "dpvip privacy epsilon: error: argument --sample-rate: must be in (0, 1] (got nan)",
        ),
        (
            ["audit-empirical", "--mechanism", "dp_mae", "--clip-norm", "-1"],
            "dpvip privacy audit-empirical: error: argument --clip-norm: must be positive (got -1)",
        ),
        (
            ["audit-empirical", "--mechanism", "dp_mae", "--canary-norm", "inf"],
            "dpvip: error: canary norm inf must be finite and at least 1 (in units of the clip norm)",
        ),
        (
            ["sigma", "--sample-rate", "0", "--steps", "10", "--epsilon", "1", "--delta", "1e-5"],
            "argument --sample-rate: must be in (0, 1] (got 0)",
        ),
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
    assert "Traceback" not in done.stderr
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


def test_unreadable_files_are_one_line_errors(tmp_path):
    """A ledger that is not JSON or not UTF-8, a bundle manifest that is not UTF-8: one line
    naming the file and why, exit status 2 (they were tracebacks)."""
    not_json, not_utf8 = tmp_path / "ledger.txt", tmp_path / "ledger.bin"
    not_json.write_text("{not json")
    not_utf8.write_bytes(b"\xff\xfe garbage")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "MANIFEST.sha256").write_bytes(b"\xff\xfe garbage")
    expected = {
        ("privacy", "audit-empirical", "--mechanism", "dp_mae", "--ledger", str(not_json)): (
            f"dpvip: error: --ledger {not_json} is not JSON (line 1 column 2: "
            "Expecting property name enclosed in double quotes)"
        ),
        ("privacy", "audit-empirical", "--mechanism", "dp_mae", "--ledger", str(not_utf8)): (
            f"dpvip: error: --ledger {not_utf8} is not UTF-8 text (byte 0: invalid start byte)"
        ),
        ("bundle", "verify", str(bundle)): (
            f"dpvip: error: manifest {bundle / 'MANIFEST.sha256'} is not UTF-8 text (byte 0: invalid start byte)"
        ),
    }
    for args, message in expected.items():
        done = run_dpvip(*args)
        assert (done.returncode, done.stderr.strip()) == (2, message), done.stderr


def parser_options(parser, path=("dpvip",)):
    """(command, option, help) of every option of every command, and each parser met."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parser_options(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(path), "/".join(action.option_strings) or action.dest, action.help


def test_every_option_has_help_and_every_command_group_ends_with_an_example():
    from dpvip.cli import GROUPS, build_parser

    parser = build_parser()
    assert [(command, option) for command, option, text in parser_options(parser) if not text] == []
    (commands,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    names = {group.__name__.rsplit(".", 1)[1] for group in GROUPS}
    for name in names:
        help_text = commands.choices[name].format_help().rstrip()
        last = help_text.splitlines()[-1].strip()
        assert help_text.splitlines()[-2] == "example:" and last.startswith(f"dpvip {name} "), (name, help_text)


def test_version_is_the_packages(root, capsys):
    """`dpvip --version` prints the installed package's version, pyproject.toml's."""
    import tomllib

    from dpvip.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    expected = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out.strip() == f"dpvip {expected}"


def test_a_bad_input_whose_message_spans_lines_is_printed_on_one_line(monkeypatch, capsys):
    from dpvip import cli
    from dpvip.errors import DpvipInputError

    def refuse(args):
        raise DpvipInputError("shard x.tar cannot be read: opened:\n- method gz: bad\n- method tar: bad")

    monkeypatch.setattr(cli.privacy, "cmd_sigma", refuse)
    args = ["privacy", "sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "1", "--delta", "1e-5"]
    assert cli.main(args) == 2
    assert (
        capsys.readouterr().err
        == "dpvip: error: shard x.tar cannot be read: opened: - method gz: bad; - method tar: bad\n"
    )


def pyproject_requirements(root) -> list[str]:
    """pyproject.toml's dependencies as the installed package's metadata lists them."""
    import tomllib

    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *(f'{r}; extra == "{extra}"' for extra in extras for r in extras[extra])]


def test_a_command_whose_extra_is_missing_names_it_on_one_line(root, monkeypatch, capsys):
    """`pip install dpvip` is the engine alone: a command needing an extra's package says which
    extra installs it (exit 2); a missing module that no extra lists is a real error."""
    from dpvip import cli
    from dpvip.cli import _common

    requirements = pyproject_requirements(root)
    monkeypatch.setattr(cli, "missing_extra", lambda module: _common.missing_extra(module, requirements))
    args = ["privacy", "sigma", "--sample-rate", "0.1", "--steps", "10", "--epsilon", "1", "--delta", "1e-5"]
    expected = {
        "timm.optim": "needs timm, which the 'eval' extra installs: pip install 'dpvip[eval]'",
        "yaml": "needs pyyaml, which the 'eval' or 'workflow' extra installs: pip install 'dpvip[eval]'",
        "snakemake_interface_common.exceptions": "needs snakemake, which the 'workflow' extra installs: "
        "pip install 'dpvip[workflow]'",
        "cv2": "needs opencv-python-headless, which the 'ingest' extra installs: pip install 'dpvip[ingest]'",
    }

    def missing(module: str):
        def handler(args):
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)

        return handler

    for module, advice in expected.items():
        monkeypatch.setattr(cli.privacy, "cmd_sigma", missing(module))
        assert cli.main(args) == 2
        assert capsys.readouterr().err == f"dpvip: error: dpvip privacy sigma {advice}\n"
    for module in ("numpy", "no_such_module"):  # a core dependency, and a module of no extra
        monkeypatch.setattr(cli.privacy, "cmd_sigma", missing(module))
        with pytest.raises(ModuleNotFoundError):
            cli.main(args)
