"""`dpvip evaluate run`: its settings file round-trips an evaluation and its section, a bad one
is refused in one line naming what is wrong, and the job it runs writes the result
`run_evaluation` writes (one process here; two: test_eval_dp_finetune_distributed.py)."""

from __future__ import annotations

import argparse
import json

import pytest
import torch
import yaml

from dpvip.cli import evaluate as evaluate_cli
from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder
from dpvip.plan.vip_evaluations import Evaluation

pytestmark = pytest.mark.usefixtures("torch_one_thread")

EVALUATION = Evaluation("few_shot", "vip_pico", "CIFAR-100", 10)
SECTION = {
    "image_size": 8,
    "datasets": {"CIFAR-100": {"source": "digits", "test_fraction": 0.2, "seed": 0}},
    "few_shot": {"epochs": 1, "warmup_epochs": 0, "batch_size": 50, "lrs": [1e-3], "weight_decay": 0.05}
    | {"auto_augment": False, "seed": 0, "features": {"pooling": "mean", "last_blocks": 1, "final_norm": True}}
    | {"cnn_lrs": [1e-2], "baselines": {}, "checkpoint_every": 1},
}


def parsed(*arguments: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    evaluate_cli.add_commands(parser.add_subparsers())
    return parser.parse_args(["evaluate", "run", *arguments])


def test_the_settings_file_round_trips_the_evaluation_and_its_section(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(evaluate_cli.evaluation_settings(EVALUATION, SECTION)))
    assert evaluate_cli.read_evaluation_settings(path) == (EVALUATION, SECTION)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "settings file .*settings.yaml does not exist"),
        ("section: {}\n", "has no 'evaluation' mapping"),
        ("evaluation: {task: few_shot, backbone: b}\n", "has no 'section' mapping"),
        (
            "evaluation: {task: x, backbone: b, color: red}\nsection: {}\n",
            "'evaluation' takes task, backbone, dataset, shots .*color",
        ),
        ("evaluation: {task: knn, backbone: b}\nsection: {}\n", "task 'knn' is not one of linear_probe"),
    ],
)
def test_a_bad_settings_file_is_refused_naming_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "settings.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DpvipInputError, match=message):
        evaluate_cli.read_evaluation_settings(path)


def test_the_command_runs_the_job_and_writes_what_run_evaluation_writes(tmp_path, capsys):
    from dpvip.evaluate.jobs import run_evaluation

    torch.manual_seed(0)
    checkpoint = tmp_path / "model.pt"
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=8, patch_size=4)), checkpoint, {})
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump(evaluate_cli.evaluation_settings(EVALUATION, SECTION)))
    args = parsed("--settings", str(settings), "--out", str(tmp_path / "cli.json"), "--checkpoint", str(checkpoint))
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'cli.json'}: CIFAR-100 10-shot ")
    run_evaluation(EVALUATION, SECTION, str(checkpoint), tmp_path / "direct.json")
    cli, direct = (json.loads((tmp_path / name).read_text()) for name in ("cli.json", "direct.json"))
    assert cli.pop("seconds") >= 0 and direct.pop("seconds") >= 0
    assert cli == direct and cli["data"]["train"] == 100  # 10 shots of 10 classes
