"""`dpvip bench synthetic`: images per second of each family at each resolution.

Runs each (family, resolution) for a fixed number of images, once in one process (torch
using every core) and once split over worker processes (one thread each, as Snakemake runs
one shard job per core). For StyleGAN-Oriented it also renders the same images one at a
time, which shows what batching buys. Reference: the authors' own generators, measured on
this machine at 128 px on 2 cores, made 1.7 (StyleGAN-Oriented) and 1.9-2.6 (dead leaves)
images/s; the target is >= 20.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import asdict, dataclass

import torch

from dpvip.synthetic.spec import DatasetSpec

AUTHORS_IMAGES_PER_SECOND_128 = {"stylegan_oriented": 1.7, "dead_leaves": 2.6}


@dataclass
class BenchRow:
    family: str
    resolution: int
    images: int
    mode: str
    seconds: float

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds


def _render(family: str, resolution: int, start: int, stop: int, threads: int, options: dict) -> float:
    torch.set_num_threads(threads)
    spec = DatasetSpec.from_config(
        "bench", {"family": family, "images": stop, "resolution": resolution, "shard_size": stop, "options": options}
    )
    generator = spec.generator()
    began = time.perf_counter()
    for _ in generator.images(start, stop):
        pass
    return time.perf_counter() - began


def _worker(job: tuple, barrier, results) -> None:
    family, resolution, start, stop, options = job
    _render(family, resolution, start, min(stop, start + 8), 1, options)  # warm-up before the clock
    barrier.wait()
    results.put(_render(family, resolution, start, stop, 1, options))


def _split_seconds(family: str, resolution: int, images: int, processes: int, options: dict) -> float:
    """Wall time for `processes` one-thread workers rendering `images` between them, from a
    common start after each worker has imported everything and warmed up."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    per = -(-images // processes)
    workers = [
        context.Process(
            target=_worker, args=((family, resolution, k * per, min(images, (k + 1) * per), options), barrier, results)
        )
        for k in range(processes)
    ]
    for worker in workers:
        worker.start()
    seconds = max(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    return seconds


def bench_one(family: str, resolution: int, images: int, processes: int, options: dict | None = None) -> list[BenchRow]:
    options = options or {}
    cores = torch.get_num_threads()
    _render(family, resolution, 0, min(images, 8), cores, options)  # warm-up: imports, allocator, caches
    rows = [
        BenchRow(
            family,
            resolution,
            images,
            f"1 process x {cores} threads",
            _render(family, resolution, 0, images, cores, options),
        )
    ]
    if processes > 1:
        seconds = _split_seconds(family, resolution, images, processes, options)
        rows.append(BenchRow(family, resolution, images, f"{processes} processes x 1 thread", seconds))
    if family == "stylegan_oriented":
        single = _render(family, resolution, 0, images, cores, options | {"block_size": 1})
        rows.append(BenchRow(family, resolution, images, f"unbatched, 1 process x {cores} threads", single))
    return rows


def run_bench(families: list[str], resolutions: list[int], images: int, processes: int) -> list[BenchRow]:
    rows = []
    for family in families:
        for resolution in resolutions:
            rows += bench_one(family, resolution, images, processes)
    return rows


def format_rows(rows: list[BenchRow]) -> str:
    lines = [f"{'family':<18} {'px':>4} {'images':>6} {'images/s':>9}  {'vs authors':>10}  mode"]
    for row in rows:
        authors = AUTHORS_IMAGES_PER_SECOND_128.get(row.family) if row.resolution == 128 else None
        versus = f"{row.images_per_second / authors:9.1f}x" if authors else f"{'':>10}"
        lines.append(
            f"{row.family:<18} {row.resolution:>4} {row.images:>6} {row.images_per_second:9.1f}  {versus}  {row.mode}"
        )
    return "\n".join(lines)


def rows_as_records(rows: list[BenchRow]) -> list[dict]:
    return [asdict(row) | {"images_per_second": row.images_per_second} for row in rows]
