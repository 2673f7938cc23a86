"""examples/: the DP training loop the README shows runs and spends what it claims, the own
loop on vision models learns, resumes and stays within its budget, and the settings files
the README's `dpvip pretrain` commands take are accepted as they are."""

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


@pytest.mark.slow  # about 25 s on one thread
@pytest.mark.usefixtures("torch_one_thread")
def test_the_own_loop_vision_example_learns_resumes_and_stays_within_its_budget(root, monkeypatch, key_store):
    # The example sets its own key store for its process (`use_key_store`): the session's after.
    monkeypatch.setenv("DPVIP_KEY_DIR", str(key_store))
    monkeypatch.setenv("DPVIP_KEEP_KEYS", "false")
    example = load_example(root, "own_loop_vision")
    results = example.main()
    assert set(results) == {"resnet18-gn", "vit-s16"}
    chance = 1 / example.CLASSES
    for name, result in results.items():
        # Zero heads start at chance; a step that did not learn (or learnt the wrong way) stays there.
        assert result["accuracy"] >= chance + 0.20, (name, result)
        assert 0 < result["epsilon"] <= example.EPSILON, (name, result)
        # The second start rebuilt everything, resumed the stored ledger at the middle step and finished.
        assert result["resumed_from"] == example.STEPS // 2 and result["steps"] == example.STEPS, (name, result)


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
