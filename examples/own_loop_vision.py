"""dpvip's DP engine in your own loop on vision models: a torchvision ResNet-18 (GroupNorm for
BatchNorm) and a timm ViT-S/16 (4 of its 12 blocks, at 32 px), each trained from scratch
with DP-SGD at epsilon 8 on a small generated image set, interrupted half-way, rebuilt from
its checkpoint and finished; it prints each model's test accuracy and epsilon spent.

Run it with `python examples/own_loop_vision.py` (about 25 s on one CPU thread; where other
processes keep the cores busy, set OMP_NUM_THREADS=1, as torch's threads wait spinning for
one another; `tests/test_examples.py` runs it). What it shows, beyond dp_training_loop.py:

- sigma from the accountant for a target (epsilon, delta) before the first step
  (`PrivacyLedger.calibrate`), and the epsilon spent read back at the end;
- the run's secret key (`RunRandomness.secret(work_dir)`) in a key store of its own
  (`use_key_store`): made at the first start, read back on resume, deleted at the end
  (`release_key`); the noise and the Poisson batches are drawn from it;
- a plain `Dataset` under a `DataLoader` whose batch sampler is the step's Poisson batches
  (`IndexBatches(dp_step.sampler, start_step)`);
- a checkpoint (model, optimizer, the ledger's record, the step) and a resume that rebuilds
  everything and continues the stored ledger (`ledger.resumed`, which refuses another
  mechanism or another step count).

What the models need for per-example clipping (`ClippedGradientSum`, docs/privacy.md lists
the layers): no BatchNorm (its batch statistics mix the examples), hence GroupNorm in the
ResNet; torch's nn.LayerNorm in the ViT (timm's LayerNorm subclass is not accepted as one);
and the ViT's class token and position embedding, bare nn.Parameters that the model adds
outside any layer's forward, are frozen at their random initialisation (see `vit_s16`).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import timm
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpvip.privacy import (
    ClippedGradientSum,
    DPStep,
    IndexBatches,
    PrivacyLedger,
    RunRandomness,
    release_key,
    use_key_store,
)

CLASSES = 4  # chance is 25%
SIZE = 32  # pixels
TRAIN, TEST = 512, 256
EPSILON, DELTA = 8.0, 1e-5  # delta well below 1/n
BATCH = 64  # expected Poisson batch: q = 64/512
STEPS = 16  # two epochs' worth of steps
CLIP, LR = 1.0, 0.25  # DP-SGD with momentum 0.5


def tinted_noise(n: int, seed: int) -> TensorDataset:
    """Images of pixel noise tinted red, green, blue or yellow (the class), normalised:
    learnable from colour alone, whatever the noise."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(CLASSES, (n,), generator=generator)
    tints = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    noise = 0.5 + 0.15 * torch.randn(n, 3, SIZE, SIZE, generator=generator)
    images = 0.6 * noise + 0.4 * tints[labels][:, :, None, None]
    return TensorDataset((images - 0.5) / 0.25, labels)


def zero_head(model: nn.Module, head: nn.Linear) -> nn.Module:
    """A zero head: no gradient reaches the body through it at first, so the first steps'
    clipped gradients are all the head's, learnt on the body's random features."""
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    return model


def resnet18() -> nn.Module:
    """torchvision's ResNet-18 with GroupNorm (at most 32 groups) for every BatchNorm."""
    model = torchvision.models.resnet18(num_classes=CLASSES, norm_layer=lambda c: nn.GroupNorm(min(32, c), c))
    return zero_head(model, model.fc)


def vit_s16() -> nn.Module:
    """timm's ViT-S/16 (width 384, 6 heads, 16 px patches, no pretrained weights) at 32 px
    (4 patches) with 4 of its 12 blocks, to stay fast on a CPU (12 blocks: 3x the time of
    a step); torch's nn.LayerNorm."""
    model = timm.create_model(
        "vit_small_patch16_224",
        pretrained=False,
        num_classes=CLASSES,
        img_size=SIZE,
        depth=4,
        norm_layer=nn.LayerNorm,
    )
    # The class token and the position embedding are nn.Parameters of the VisionTransformer
    # itself, added to the tokens outside any layer's forward: the clipper cannot form their
    # per-example gradients and refuses them. Frozen, they keep their random initialisation,
    # which depends on no data (nothing to clip, no privacy cost): the position embedding
    # still tells the patches apart. (dpvip's own MAE makes its class token a Linear(1, d)
    # fed ones instead, to train it.)
    model.cls_token.requires_grad_(False)
    model.pos_embed.requires_grad_(False)
    return zero_head(model, model.head)


def train(build, data: TensorDataset, work_dir: Path, stop_at: int | None = None) -> dict:
    """Train `build()` with DP-SGD for STEPS steps, resuming from `work_dir`'s checkpoint if
    there is one; with `stop_at`, save a checkpoint at that step and stop (an interrupted job)."""
    torch.manual_seed(0)  # the initialisation (a resume overwrites it)
    model = build()
    # Before the first step: sigma such that STEPS steps at q spend at most EPSILON.
    ledger = PrivacyLedger.calibrate(
        "rdp", sample_rate=BATCH / len(data), steps=STEPS, target_epsilon=EPSILON, delta=DELTA, clip_norm=CLIP
    )
    randomness = RunRandomness.secret(work_dir)  # made on the first start, read back on a resume
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=LR, momentum=0.5)
    dp_step = DPStep(ClippedGradientSum(model, clip_norm=CLIP), optimizer, ledger, len(data), randomness)

    checkpoint, start = work_dir / "checkpoint.pt", 0
    if checkpoint.exists():  # everything above was rebuilt; now the stored state
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        # continue the stored ledger: refused if its mechanism or step count is not this run's
        dp_step.ledger = dp_step.ledger.resumed(state["ledger"], start, str(checkpoint))

    # Each step's Poisson batch, from step `start` on, as index lists for a plain Dataset.
    loader = DataLoader(data, batch_sampler=IndexBatches(dp_step.sampler, start_step=start))
    model.train()
    for step, (images, labels) in enumerate(loader, start):
        if step == stop_at:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
            torch.save(state | {"ledger": dp_step.ledger.record(), "step": step}, checkpoint)
            break
        dp_step(step, [lambda: F.cross_entropy(model(images), labels, reduction="none")])
    dp_step.close()  # the clipper's hooks off: the model evaluates as usual
    return {"model": model, "ledger": dp_step.ledger, "resumed_from": start}


def accuracy(model: nn.Module, data: TensorDataset) -> float:
    images, labels = data.tensors
    with torch.no_grad():
        return float((model.eval()(images).argmax(1) == labels).float().mean())


def main() -> dict:
    """Both models, in a temporary folder: {name: {accuracy, epsilon, resumed_from, steps, seconds}}."""
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        use_key_store(folder / "keys", keep=False)  # the run keys, outside the runs' folders
        train_set, test_set = tinted_noise(TRAIN, seed=1), tinted_noise(TEST, seed=2)
        results = {}
        for name, build in (("resnet18-gn", resnet18), ("vit-s16", vit_s16)):
            started = time.perf_counter()
            work_dir = folder / name
            work_dir.mkdir(parents=True)
            train(build, train_set, work_dir, stop_at=STEPS // 2)  # interrupted half-way
            run = train(build, train_set, work_dir)  # a new start: rebuilt, resumed, finished
            release_key(work_dir)  # the run is done: nothing can regenerate its noise any more
            spent = run["ledger"].epsilon_spent()
            assert run["ledger"].steps_done == STEPS and spent <= EPSILON
            results[name] = {
                "accuracy": accuracy(run["model"], test_set),
                "epsilon": spent,
                "resumed_from": run["resumed_from"],
                "steps": run["ledger"].steps_done,
                "seconds": time.perf_counter() - started,
            }
    return results


if __name__ == "__main__":
    started = time.perf_counter()
    for name, result in main().items():
        print(
            f"{name}: test accuracy {result['accuracy']:.3f} (chance {1 / CLASSES:.2f}) at epsilon "
            f"{result['epsilon']:.2f} (delta {DELTA:g}), {result['steps']} steps resumed from step "
            f"{result['resumed_from']}, {result['seconds']:.1f} s"
        )
    print(f"{time.perf_counter() - started:.1f} s in all, on {torch.get_num_threads()} torch threads")
