"""What an MAE makes of images it has not seen: original, masked input, reconstruction."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

from dpvip.data.images import IMAGENET_MEAN, IMAGENET_STD
from dpvip.models.mae import MaskedAutoencoder
from dpvip.synthetic.family import to_uint8


def _to_uint8(normalised: torch.Tensor) -> np.ndarray:
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return to_uint8(normalised * std + mean)


def evaluation_inputs(images: list[np.ndarray], image_size: int) -> torch.Tensor:
    """(H, W, 3) uint8 images -> the model's normalised input (resize and centre crop)."""
    prepare = transforms.Compose(
        [
            transforms.Resize(image_size, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )
    return torch.stack([prepare(Image.fromarray(image)) for image in images])


@torch.no_grad()
def reconstruct(model: MaskedAutoencoder, inputs: torch.Tensor, seed: int = 0) -> dict[str, np.ndarray]:
    """(N, H, W, 3) uint8 arrays: `original`, `masked` (masked patches grey) and
    `reconstruction` (visible patches as given, masked ones predicted). With norm_pix_loss the
    prediction is per-patch normalised; it is shown with each original patch's mean and
    variance, as MAE's own visualisation does. Also the per-example `loss`."""
    model.eval()
    output = model(inputs, generator=torch.Generator().manual_seed(seed))
    target = model.patchify(inputs)
    prediction = output.prediction
    if model.settings.norm_pix_loss:
        mean, var = target.mean(dim=-1, keepdim=True), target.var(dim=-1, keepdim=True)
        prediction = prediction * (var + 1.0e-6) ** 0.5 + mean
    mask = output.mask.unsqueeze(-1)
    grey = torch.zeros_like(target)  # zero in normalised space: the dataset's mean colour
    return {
        "original": _to_uint8(inputs),
        "masked": _to_uint8(model.unpatchify(target * (1 - mask) + grey * mask)),
        "reconstruction": _to_uint8(model.unpatchify(target * (1 - mask) + prediction * mask)),
        "loss": output.loss.numpy(),
    }
