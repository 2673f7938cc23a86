"""Embedded stand-in for LAION-233M (ViP's private pre-training data): LAION-format
webdataset shards of random crops of the natural photographs that ship with scikit-image and
scikit-learn, so the DP pre-training stage runs on natural images without network.

This is NOT LAION: ten photographs, cropped many times. Everything this module writes says
so (`stand_in_for` in dataset.json and index.json, `skimage://` and `sklearn://` URLs).

Sample `index` is a square crop (random position, side 30-100% of the photo's shorter side,
random horizontal flip) of a random photo, resized to `resolution` px, drawn from
`dpvip.seeds.derive(seed, index)` alone, as img2dataset would write it: `<key>.jpg`
(quality 95), `<key>.txt` (caption), `<key>.json` (img2dataset's fields plus the crop). A
shard is thus a pure function of (settings, shard): any shard can be regenerated alone with
the same bytes (tar headers carry mtime 0; files are written atomically).
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from dpvip.data.shard_index import index_shards
from dpvip.errors import DpvipInputError, first_line
from dpvip.files import atomic_target, writable_target
from dpvip.seeds import derive
from dpvip.synthetic.shards import claim_folder, sample_key, shard_name

STAND_IN_FOR = "LAION-233M (ViP)"
CROP_FRACTION = (0.3, 1.0)  # crop side, as a fraction of the photo's shorter side
JPEG_QUALITY = 95


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        image = getattr(skimage.data, name)()
        return image[0] if isinstance(image, tuple) else image  # stereo_motorcycle: (left, right, disparity)

    return load


def _sklearn(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from sklearn.datasets import load_sample_image

        return load_sample_image(f"{name}.jpg")

    return load


# Colour photographs that ship inside the packages (no pooch download). The list is fixed:
# which photo a sample crops depends on it, so a photo that is missing is an error, not a skip.
PHOTOS: dict[str, tuple[str, Callable[[], np.ndarray]]] = {
    "astronaut": ("skimage", _skimage("astronaut")),
    "coffee": ("skimage", _skimage("coffee")),
    "chelsea": ("skimage", _skimage("chelsea")),
    "rocket": ("skimage", _skimage("rocket")),
    "hubble_deep_field": ("skimage", _skimage("hubble_deep_field")),
    "retina": ("skimage", _skimage("retina")),
    "stereo_motorcycle": ("skimage", _skimage("stereo_motorcycle")),
    "immunohistochemistry": ("skimage", _skimage("immunohistochemistry")),
    "china": ("sklearn", _sklearn("china")),
    "flower": ("sklearn", _sklearn("flower")),
}
PACKAGE_NAMES = {"skimage": "scikit-image", "sklearn": "scikit-learn"}


@functools.cache
def photo(name: str) -> np.ndarray:
    """Photo `name` as (H, W, 3) uint8, loaded once per process."""
    package, load = PHOTOS[name]
    try:
        image = np.asarray(load())
    except Exception as err:  # e.g. a scikit-image build that would fetch it with pooch
        raise DpvipInputError(
            f"photo '{name}' of {PACKAGE_NAMES[package]} is not available offline: {first_line(err)}"
        ) from None
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise DpvipInputError(
            f"photo '{name}' of {PACKAGE_NAMES[package]} is not RGB uint8 ({image.shape}, {image.dtype})"
        )
    return image


@dataclass(frozen=True)
class NaturalSpec:
    """How many crops, at what size, in shards of how many, from which seed."""

    images: int
    resolution: int
    shard_size: int
    seed: int = 0

    @classmethod
    def from_config(cls, values: dict, where: str = "natural dataset") -> NaturalSpec:
        """From config/CLI values; a bad one is named in a one-line error."""
        for key in ("images", "resolution", "shard_size", "seed"):
            value = values.get(key, 0 if key == "seed" else None)
            low = 0 if key == "seed" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                kind = "a non-negative" if low == 0 else "a positive"
                raise DpvipInputError(f"{where}: {key} must be {kind} integer (got {value!r})")
        return cls(values["images"], values["resolution"], values["shard_size"], values.get("seed", 0))

    @property
    def shards(self) -> int:
        return -(-self.images // self.shard_size)

    def shard_range(self, shard: int) -> range:
        if not 0 <= shard < self.shards:
            raise DpvipInputError(f"the natural dataset has shards 0..{self.shards - 1} (asked for {shard})")
        return range(shard * self.shard_size, min((shard + 1) * self.shard_size, self.images))

    def describe(self) -> dict:
        """What the dataset is, for dataset.json and index.json."""
        return {
            "stand_in_for": STAND_IN_FOR,
            "photos": {name: PACKAGE_NAMES[package] for name, (package, _) in PHOTOS.items()},
            "crop_fraction": list(CROP_FRACTION),
            "encoding": "jpg",
            "jpeg_quality": JPEG_QUALITY,
            **asdict(self),
        }


def crop_sample(spec: NaturalSpec, index: int) -> dict:
    """Sample `index` as webdataset members {__key__, jpg, txt, json}."""
    rng = np.random.default_rng(derive(spec.seed, index))
    name = list(PHOTOS)[rng.integers(len(PHOTOS))]
    image = photo(name)
    height, width = image.shape[:2]
    side = max(1, round(rng.uniform(*CROP_FRACTION) * min(height, width)))
    top, left = int(rng.integers(height - side + 1)), int(rng.integers(width - side + 1))
    flip = bool(rng.integers(2))
    # reducing_gap: shrink by whole factors first, then Lanczos (as accurate, 2x faster)
    crop = Image.fromarray(image[top : top + side, left : left + side])
    crop = crop.resize((spec.resolution,) * 2, Image.Resampling.LANCZOS, reducing_gap=3.0)
    if flip:
        crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    encoded = io.BytesIO()
    crop.save(encoded, format="JPEG", quality=JPEG_QUALITY)
    package = PHOTOS[name][0]
    key = sample_key(index)
    caption = f"crop of {PACKAGE_NAMES[package]} '{name}'"
    meta = {  # img2dataset's fields, then where the crop came from
        "key": key,
        "url": f"{package}://{name}",
        "caption": caption,
        "status": "success",
        "error_message": None,
        "width": spec.resolution,
        "height": spec.resolution,
        "original_width": width,
        "original_height": height,
        "stand_in_for": STAND_IN_FOR,
        "photo": name,
        "crop": {"left": left, "top": top, "side": side, "flip": flip},
        "seed": spec.seed,
        "index": index,
    }
    return {"__key__": key, "jpg": encoded.getvalue(), "txt": caption.encode(), "json": json.dumps(meta).encode()}


def write_natural_shard(spec: NaturalSpec, shard: int, path: str | Path, progress: bool = True) -> int:
    """Write shard `shard` of `spec` to `path`; returns the number of samples written."""
    import webdataset as wds

    indices = spec.shard_range(shard)
    bar = tqdm(total=len(indices), desc=f"natural {shard_name(shard)}", unit="img", disable=not progress, mininterval=2)
    with atomic_target(writable_target(path)) as partial, bar, wds.TarWriter(str(partial), mtime=0) as sink:
        for index in indices:
            sink.write(crop_sample(spec, index))
            bar.update()
    return len(indices)


def index_natural(
    spec: NaturalSpec,
    shard_paths: list[str | Path],
    index_path: str | Path,
    checksums: bool = True,
    progress: bool = True,
) -> dict:
    """index.json of the natural dataset's shards; refuses shards that do not match `spec`."""
    counts = [len(spec.shard_range(shard)) for shard in range(spec.shards)]
    return index_shards(
        shard_paths,
        index_path,
        dataset="laion",
        source="natural",
        location="scikit-image and scikit-learn sample photos",
        checksums=checksums,
        expected_samples=counts,
        extra=spec.describe(),
        progress=progress,
    )


def write_natural_dataset(spec: NaturalSpec, out: str | Path, checksums: bool = True, progress: bool = True) -> dict:
    """Shards, dataset.json and index.json in `out`; shards already there are kept (they are
    written atomically, so one that exists is complete) and a rerun resumes."""
    out = Path(out)
    claim_folder(spec, out)  # refuses a folder holding crops made with other settings
    paths = [out / shard_name(shard) for shard in range(spec.shards)]
    for shard, path in enumerate(paths):
        if not path.exists():
            write_natural_shard(spec, shard, path, progress)
    return index_natural(spec, paths, out / "index.json", checksums, progress)
