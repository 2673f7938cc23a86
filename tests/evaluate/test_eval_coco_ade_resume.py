"""COCO detection and ADE20K segmentation, resumable: a run killed by SIGTERM resumes to the
weights, losses and scores of an uninterrupted run, bit for bit on CPU; a state of other
settings, another encoder or other data is refused. (Two processes against one:
test_eval_coco_ade_ddp.)"""

import dataclasses
import os
import signal

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate import dense_training
from dpvip.evaluate.coco_standin import CocoStandIn
from dpvip.evaluate.detection import evaluate_coco, score_detector, train_detector
from dpvip.evaluate.segmentation import SegmentationSettings, evaluate_ade, score_segmenter, train_segmenter
from dpvip.evaluate.segmentation_data import shapes_segmentation
from dense_tasks import QUICK, micro_mae, write_coco
from dpvip.train.resume import LoopState

pytestmark = pytest.mark.usefixtures("torch_one_thread")

# --- COCO ----------------------------------------------------------------------------------
# Drop path and two micro-batches a step: the model's randomness and the accumulation are
# part of what must repeat.
TINY = dataclasses.replace(QUICK, micro_batch=2, drop_path=0.1)


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return write_coco(tmp_path_factory.mktemp("coco"))


@pytest.fixture
def sigterm_after(monkeypatch):
    """Send this process SIGTERM once the loop has finished step `step`."""

    def arm(step: int) -> None:
        class Killed(LoopState):
            def after_step(self, done, state, last=False):
                if done == step:
                    os.kill(os.getpid(), signal.SIGTERM)
                super().after_step(done, state, last)

        monkeypatch.setattr(dense_training, "LoopState", Killed)

    yield arm
    monkeypatch.setattr(dense_training, "LoopState", LoopState)


def test_a_detector_killed_by_sigterm_resumes_to_the_same_weights_losses_and_scores(coco, tmp_path, sigterm_after):
    root, train_json, val_json = coco
    whole = train_detector(micro_mae(), train_json, root, TINY, progress=False)
    sigterm_after(2)
    with pytest.raises(SystemExit, match="after step 2"):
        train_detector(micro_mae(), train_json, root, TINY, progress=False, work_dir=tmp_path)
    assert torch.load(tmp_path / "vitdet.pt", weights_only=True)["step"] == 2
    sigterm_after(0)  # disarmed
    resumed = train_detector(micro_mae(), train_json, root, TINY, progress=False, work_dir=tmp_path)
    assert resumed.training_record["losses"] == whole.training_record["losses"]
    expected = whole.state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in resumed.state_dict().items())
    assert score_detector(resumed, val_json, root) == score_detector(whole, val_json, root)


def test_evaluate_coco_resumes_with_a_new_interval_and_deletes_its_state(coco, tmp_path, sigterm_after):
    root, train_json, val_json = coco
    settings = dataclasses.replace(TINY, iterations=3, checkpoint_every=1)
    whole = evaluate_coco(micro_mae(), train_json, root, val_json, root, settings, progress=False)
    sigterm_after(1)
    with pytest.raises(SystemExit, match="after step 1"):
        evaluate_coco(micro_mae(), train_json, root, val_json, root, settings, progress=False, work_dir=tmp_path)
    sigterm_after(0)
    # The interval is not part of the fingerprint: a rerun may save more or less often.
    rerun = dataclasses.replace(settings, checkpoint_every=7)
    resumed = evaluate_coco(micro_mae(), train_json, root, val_json, root, rerun, progress=False, work_dir=tmp_path)
    assert not (tmp_path / "vitdet.pt").exists()
    assert resumed.pop("seconds") and whole.pop("seconds")
    assert resumed.pop("settings")["checkpoint_every"] == 7 and whole.pop("settings")["checkpoint_every"] == 1
    assert resumed == whole


def test_a_state_of_other_settings_or_another_encoder_is_refused(coco, tmp_path, sigterm_after):
    root, train_json, _ = coco
    sigterm_after(1)
    with pytest.raises(SystemExit):
        train_detector(micro_mae(), train_json, root, TINY, progress=False, work_dir=tmp_path)
    sigterm_after(0)
    with pytest.raises(DpvipInputError, match="settings.lr 0.001 \\(now 0.002\\)"):
        train_detector(
            micro_mae(), train_json, root, dataclasses.replace(TINY, lr=2e-3), progress=False, work_dir=tmp_path
        )
    other = micro_mae()
    with torch.no_grad():
        other.blocks[0].attn.qkv.weight.add_(1e-3)
    with pytest.raises(DpvipInputError, match="encoder.weights"):
        train_detector(other, train_json, root, TINY, progress=False, work_dir=tmp_path)


# --- ADE20K --------------------------------------------------------------------------------
# 10 images in batches of 4 (4, 4, 2 a epoch) cut into micro-batches of 2; flips and the heads'
# dropout draw randomness. Killed in the second epoch, the running epoch loss must survive.
SEGMENTATION = SegmentationSettings(
    epochs=2, batch_size=4, micro_batch=2, lr=2e-3, warmup_epochs=0.5, channels=16, aux_channels=8
)


@pytest.fixture(scope="module")
def shapes():
    spec = CocoStandIn(images=10, image_size=32)
    return shapes_segmentation(spec, "train"), shapes_segmentation(spec, "val", 4)


def pico_mae():
    return micro_mae("pico", 32)


def test_a_segmenter_killed_by_sigterm_resumes_to_the_same_weights_losses_and_scores(shapes, tmp_path, sigterm_after):
    train, test = shapes
    whole = train_segmenter(pico_mae(), train, SEGMENTATION, progress=False)
    sigterm_after(4)
    with pytest.raises(SystemExit, match="after step 4"):
        train_segmenter(pico_mae(), train, SEGMENTATION, progress=False, work_dir=tmp_path)
    assert torch.load(tmp_path / "upernet.pt", weights_only=True)["step"] == 4
    sigterm_after(0)
    resumed = train_segmenter(pico_mae(), train, SEGMENTATION, progress=False, work_dir=tmp_path)
    assert len(whole.epoch_losses) == 2 and resumed.epoch_losses == whole.epoch_losses
    expected = whole.state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in resumed.state_dict().items())
    scores = score_segmenter(whole, test)
    assert score_segmenter(resumed, test) == scores and scores["miou"] > 0


def test_evaluate_ade_resumes_and_deletes_its_state(shapes, tmp_path, sigterm_after):
    train, test = shapes
    settings = dataclasses.replace(SEGMENTATION, checkpoint_every=2)
    whole = evaluate_ade(pico_mae(), train, test, settings, progress=False)
    sigterm_after(5)
    with pytest.raises(SystemExit, match="after step 5"):
        evaluate_ade(pico_mae(), train, test, settings, progress=False, work_dir=tmp_path)
    sigterm_after(0)
    resumed = evaluate_ade(pico_mae(), train, test, settings, progress=False, work_dir=tmp_path)
    assert not (tmp_path / "upernet.pt").exists()
    assert resumed.pop("seconds") and whole.pop("seconds")
    assert resumed == whole


def test_a_segmentation_state_of_other_data_is_refused(shapes, tmp_path, sigterm_after):
    train, _ = shapes
    sigterm_after(1)
    with pytest.raises(SystemExit):
        train_segmenter(pico_mae(), train, SEGMENTATION, progress=False, work_dir=tmp_path)
    sigterm_after(0)
    with pytest.raises(DpvipInputError, match="data.digest"):
        train_segmenter(pico_mae(), train.subset(range(9, -1, -1)), SEGMENTATION, progress=False, work_dir=tmp_path)
    with pytest.raises(DpvipInputError, match="settings.micro_batch 2 \\(now 1\\)"):
        train_segmenter(
            pico_mae(), train, dataclasses.replace(SEGMENTATION, micro_batch=1), progress=False, work_dir=tmp_path
        )
