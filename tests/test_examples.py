"""examples/: the DP training loop the README shows runs and spends what it claims, and the
settings files the README's `dpvip pretrain` commands take are accepted as they are."""

import importlib.util

import pytest
import yaml

from dpvip.plan.dp_pretrain import DPPretrainSettings
from dpvip.plan.pretrain import PretrainSettings


def load_example(root, name: str):
    spec = importlib.util.spec_from_file_location(name, root / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.usefixtures("torch_one_thread")
def test_the_dp_training_loop_learns_within_its_budget(root):
    accuracy, spent = load_example(root, "dp_training_loop").train()
    assert accuracy > 0.75  # chance is 0.5
    assert 3.9 < spent <= 4.0 * 1.005


@pytest.mark.parametrize(
    "name, settings_class", [("syn_vip_micro", PretrainSettings), ("dp_mae_micro", DPPretrainSettings)]
)
def test_the_example_settings_are_accepted(root, name, settings_class):
    values = yaml.safe_load((root / "examples" / f"{name}.yaml").read_text())
    settings = settings_class.from_config(values, "micro")
    assert settings.model.image_size == 32 and settings.batch_size == 128


def test_a_copied_syn_vip_section_is_refused_naming_its_first_workflow_key(root):
    """What the README says: `pretrain mae --settings` takes pretrain.syn_vip's training keys only."""
    from dpvip.errors import DpvipInputError

    section = yaml.safe_load((root / "config" / "config.yaml").read_text())["pretrain"]["syn_vip"]
    with pytest.raises(DpvipInputError, match="setting 'dataset' is not known"):
        PretrainSettings.from_config(section, "micro")
