"""Images the user already has, as a synthetic dataset: the `image_folder` family.

For sets that can no longer be generated here or whose authors released images, e.g. a
rendered Shaders21k (its GLSL sources are offline) or Baradad et al.'s StyleGAN-Oriented
images. Image `i` is the i-th image file of the folder (and its sub-folders) in sorted
order of relative path, centre-cropped to a square and resized to the dataset's resolution
(PIL, bicubic), in RGB. Written into shards, indexed and fingerprinted (each shard's
SHA-256, each sample's source file) like a generated family, it feeds the same (Syn)-ViP and
DP-RandP Phase I rules.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from dpvip.errors import DpvipInputError
from dpvip.synthetic.family import ImageFamily

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


def list_images(folder: str | Path) -> list[Path]:
    """The image files under `folder`, sorted by relative path (the order images are numbered)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"image folder {folder} does not exist")
    files = [path for path in folder.rglob("*") if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES]
    return sorted(files, key=lambda path: path.relative_to(folder).as_posix())


def square_resized(image: Image.Image, resolution: int) -> np.ndarray:
    """The centred square of `image`, resized to resolution x resolution, as (H, W, 3) uint8."""
    image = image.convert("RGB")
    side = min(image.size)
    left, top = (image.width - side) // 2, (image.height - side) // 2
    square = image.crop((left, top, left + side, top + side))
    return np.asarray(square.resize((resolution, resolution), Image.BICUBIC), dtype=np.uint8)


class ImageFolderFamily(ImageFamily):
    name = "image_folder"

    def __init__(self, resolution: int, seed: int = 0, device: str = "cpu", path: str = "", images: int = 0):
        super().__init__(resolution, seed, device)
        self.folder = Path(path)
        self.files = list_images(self.folder)
        if len(self.files) != images:  # the config's count is what the plan shards by
            raise ValueError(
                f"image folder {self.folder} holds {len(self.files)} images ({', '.join(IMAGE_SUFFIXES)}); "
                f"the config says images: {images}"
            )

    def render_block(self, start: int, count: int) -> np.ndarray:
        images = []
        for path in self.files[start : start + count]:
            try:
                with Image.open(path) as image:
                    images.append(square_resized(image, self.resolution))
            except OSError as err:
                raise DpvipInputError(f"image {path} cannot be read: {err}") from None
        return np.stack(images)

    def metadata(self, index: int) -> dict:
        return {"file": self.files[index].relative_to(self.folder).as_posix()}
