"""Images the user already has, as a synthetic dataset: the `image_folder` and
`image_shards` families.

For sets that can no longer be generated here or whose authors released images, e.g. a
rendered Shaders21k (its GLSL sources are offline) or Baradad et al.'s StyleGAN-Oriented
images. `image_folder`: image `i` is the i-th image file of the folder (and its
sub-folders) in sorted order of relative path. `image_shards`: the i-th sample with an image
member of the folder's .tar shards (webdataset), shards in sorted order, samples in tar
order. Each is centre-cropped to a square and resized to the dataset's resolution (PIL,
bicubic), in RGB. Written into shards, indexed and fingerprinted (each shard's SHA-256, each
sample's source) like a generated family, it feeds the same (Syn)-ViP and DP-RandP Phase I
rules.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

from dpvip.errors import DpvipInputError, first_line
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


def _check_count(where: str, found: int, images: int) -> None:
    if found != images:  # the config's count is what the plan shards by
        raise ValueError(
            f"{where} holds {found} images ({', '.join(IMAGE_SUFFIXES)}); the config says images: {images}"
        )


class ImageFolderFamily(ImageFamily):
    name = "image_folder"

    def __init__(self, resolution: int, seed: int = 0, device: str = "cpu", path: str = "", images: int = 0):
        super().__init__(resolution, seed, device)
        self.folder = Path(path)
        self.files = list_images(self.folder)
        _check_count(f"image folder {self.folder}", len(self.files), images)

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


def list_shard_images(folder: str | Path) -> list[tuple[Path, str, int, int]]:
    """(shard, member, offset, size) of each sample's image in the folder's .tar shards, in
    order. Every job lists them all (tar headers only): the numbering must not depend on which
    shard job asks."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"shard folder {folder} does not exist")
    found = []
    for shard in sorted(folder.glob("*.tar")):
        try:
            with tarfile.open(shard) as archive:
                seen = set()
                for member in archive:
                    key, _, extension = member.name.partition(".")
                    if member.isfile() and f".{extension.lower()}" in IMAGE_SUFFIXES and key not in seen:
                        seen.add(key)  # one image a sample
                        found.append((shard, member.name, member.offset_data, member.size))
        except tarfile.TarError as err:
            raise DpvipInputError(f"shard {shard} cannot be read as a tar file: {first_line(err)}") from None
    return found


class ImageShardsFamily(ImageFamily):
    name = "image_shards"

    def __init__(self, resolution: int, seed: int = 0, device: str = "cpu", path: str = "", images: int = 0):
        super().__init__(resolution, seed, device)
        self.folder = Path(path)
        self.samples = list_shard_images(self.folder)
        _check_count(f"shard folder {self.folder}", len(self.samples), images)

    def render_block(self, start: int, count: int) -> np.ndarray:
        images = []
        for shard, member, offset, size in self.samples[start : start + count]:
            with shard.open("rb") as handle:  # the member's bytes where the tar header put them
                handle.seek(offset)
                data = handle.read(size)
            try:
                with Image.open(io.BytesIO(data)) as image:
                    images.append(square_resized(image, self.resolution))
            except OSError as err:
                raise DpvipInputError(f"{shard}: image {member} cannot be read: {err}") from None
        return np.stack(images)

    def metadata(self, index: int) -> dict:
        shard, member, _, _ = self.samples[index]
        return {"file": f"{shard.name}/{member}"}
