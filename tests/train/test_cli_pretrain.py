"""`dpvip pretrain mae`: one-line errors with exit status 2 for bad input, and a
two-process torchrun (gloo) run that matches the one-process run."""

from __future__ import annotations

import pytest

from conftest import run_dpvip
from dpvip.cli import main
from dpvip.train.metrics import read_metrics
from pretrain_data import (  # noqa: F401  (fixtures)
    SIZE,
    STEPS,
    max_difference,
    record,
    reference_run,
    settings_file,
    shaders_index,
    weights,
)


def pretrain(settings, data, out, *extra) -> list[str]:
    return [
        "pretrain",
        "mae",
        "--settings",
        str(settings),
        "--size",
        SIZE,
        "--data",
        str(data),
        "--out",
        str(out),
        *extra,
    ]


@pytest.mark.slow
def test_a_missing_settings_file_is_named_with_exit_status_2(tmp_path):
    done = run_dpvip(*pretrain(tmp_path / "nope.yaml", tmp_path / "index.json", tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"dpvip: error: settings file {tmp_path / 'nope.yaml'} does not exist"]
    assert not (tmp_path / "run").exists()


def test_an_unknown_settings_key_is_named(tmp_path, capsys):
    settings = settings_file(tmp_path, learning_rate=0.1)
    assert main(pretrain(settings, tmp_path / "index.json", tmp_path / "run")) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpvip: error: setting 'learning_rate' is not known (known: ")


def test_a_list_shaped_settings_file_is_named(tmp_path, capsys):
    """A YAML list (`- epochs: 1`) said 'setting '1' is not known'."""
    settings = tmp_path / "settings.yaml"
    settings.write_text("- epochs: 1\n- batch_size: 8\n")
    assert main(pretrain(settings, tmp_path / "index.json", tmp_path / "run")) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"dpvip: error: settings file {settings} holds a list, not a mapping of settings (key: value)"
    ]


def test_a_missing_data_index_is_named(tmp_path, capsys):
    settings = settings_file(tmp_path)
    assert main(pretrain(settings, tmp_path / "missing" / "index.json", tmp_path / "run")) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"dpvip: error: dataset index {tmp_path / 'missing' / 'index.json'} does not exist"
    ]


@pytest.mark.parametrize("model", ["huge", "micro_dec", "micro_decx"])
def test_an_unknown_model_is_named(tmp_path, capsys, model):
    settings = settings_file(tmp_path)
    assert (
        main(
            [
                "pretrain",
                "mae",
                "--settings",
                str(settings),
                "--size",
                model,
                "--data",
                "i.json",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dpvip: error: MAE model '{model}' is not a registered size")


@pytest.mark.slow
def test_two_processes_under_torchrun_match_one_process(reference_run, shaders_index, tmp_path, monkeypatch):
    settings = settings_file(tmp_path)
    scratch = tmp_path / "tmp"  # the launcher's temporary directory: torchrun's log folder goes there
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    done = run_dpvip(*pretrain(settings, shaders_index, tmp_path / "run", "--procs", "2"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(scratch.iterdir()) == []  # ... and nothing is left there (torchrun's torchelastic_* was)
    assert f"{tmp_path / 'run'}/model.pt: {STEPS} steps, 1024 images, 0 skipped" in done.stdout
    stored = record(tmp_path / "run")
    assert stored["world_size"] == 2 and stored["steps"] == STEPS and stored["images_seen"] == 1024
    assert record(reference_run)["world_size"] == 1
    assert max_difference(weights(tmp_path / "run"), weights(reference_run)) < 1e-4
    two, one = read_metrics(tmp_path / "run" / "metrics.jsonl"), read_metrics(reference_run / "metrics.jsonl")
    assert [r["step"] for r in two] == [r["step"] for r in one]
    assert two[-1]["loss"] == pytest.approx(one[-1]["loss"], rel=1e-5)
    assert [r["lr"] for r in two] == [r["lr"] for r in one]


def test_a_batch_that_does_not_divide_over_torchrun_ranks_is_refused_before_launching(shaders_index, tmp_path, capsys):
    settings = settings_file(tmp_path, batch_size=63)
    assert main(list(pretrain(settings, shaders_index, tmp_path / "run", "--procs", "2"))) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["dpvip: error: batch_size 63 does not divide over 2 processes (gpus)"]
    assert not (tmp_path / "run").exists()
