"""The `synthetic_datasets` table: what was generated, how fast, and what it stands in for."""

from __future__ import annotations

import json
from pathlib import Path

from dpvip.files import read_benchmark, sha256
from dpvip.synthetic import PAPER_DATASETS


def shard_seconds(benchmark_files: list[str | Path]) -> float:
    """Total wall time of the shard jobs, from Snakemake's benchmark files."""
    records = (read_benchmark(path) for path in benchmark_files)
    return sum(record["seconds"] for record in records if record is not None)


def dataset_row(index_path: str | Path, benchmark_files: list[str | Path]) -> dict:
    index = json.loads(Path(index_path).read_text())
    paper = PAPER_DATASETS.get(index["family"])  # none for the user's own images
    seconds = shard_seconds(benchmark_files)
    return {
        "dataset": index["dataset"],
        "family": index["family"],
        "images": index["total_samples"],
        "resolution": index["resolution"],
        "shards": len(index["shards"]),
        "options": json.dumps(index["options"], sort_keys=True),
        "shard_job_seconds": round(seconds, 2),
        "images_per_job_second": round(index["total_samples"] / seconds, 1) if seconds else None,
        "stands_in_for": f"{paper.name} ({paper.paper})" if paper else f"the images in {index.get('path')}",
        "paper_images": paper.images if paper else None,
        "paper_resolution": paper.resolution if paper else None,
        "index_sha256": sha256(index_path),
    }


def summary_notes(scale: str) -> list[str]:
    return [
        f"Scale: {scale}. Every image is generated here from a seed, except image_folder and image_shards "
        "datasets: the user's own images, centre-cropped and resized, which stand in for nothing.",
        "shaders stands in for Shaders21k (its GLSL sources are offline and mostly non-commercial): "
        "shader-like random programs evaluated as tensor code.",
        "stylegan_oriented and dead_leaves are written from the descriptions of Baradad et al. (2021).",
        "index_sha256 fingerprints the dataset: the index lists every shard's SHA-256.",
        "images_per_job_second: images over the summed wall time of the shard jobs (process start included).",
    ]
