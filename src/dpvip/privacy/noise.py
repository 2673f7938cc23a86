"""Privatising a summed clipped gradient: sum over ranks, add N(0, sigma^2 C^2) once, and
normalise by the expected batch size.

Every rank draws the same noise from a generator seeded by the run's keyed derivation of
(noise, step) (`dpvip.privacy.randomness`), after the all-reduce, so the noise enters the
global sum exactly once and every rank applies the same update without a broadcast. The
noise does not depend on the number of ranks. Each coordinate is the sum of four draws
divided by 2 (same law; see `randomness` for why).

Normalisation is by the expected batch size q * n, not by the realised one: the realised
size is data-dependent and not privatised, while q * n is public (opacus does the same, and
the ViP paper's equation 3 divides by the average batch size B).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from dpvip.privacy.randomness import RunRandomness

DRAWS = 4  # N(0, s^2) as (x1 + x2 + x3 + x4) / 2, as opacus' secure_mode draws it
NOISE_CHUNK = 1 << 22  # coordinates drawn at a time (16 MiB of float32); part of the stream's layout
CHUNK_SEED_BOUND = (1 << 63) - 1  # each chunk's generator takes a 63-bit seed, as the step's does


def noise_generator(randomness: RunRandomness, step: int, device: torch.device, purpose: str = "noise"):
    """The generator of `step`'s noise (or of another noisy release: `purpose`)."""
    return torch.Generator(device=device).manual_seed(randomness.seed(purpose, step))


def add_gaussian_noise_(values: torch.Tensor, std: float, generator: torch.Generator) -> torch.Tensor:
    """values += N(0, std^2) per coordinate, in place, as DRAWS standard draws each scaled by
    std / sqrt(DRAWS). Drawn chunk by chunk into a scratch buffer: the noise of a 100M-
    parameter model then costs a chunk of memory per thread, not several model-sized
    temporaries (which also cost a page fault per 4 KiB on CPU). Chunk k draws from its own
    generator, seeded by `generator`'s k-th draw, so that on CPU (where one `normal_` runs on
    one thread) the chunks are drawn on all of torch's threads at once, with the same result
    whatever their number."""
    flat = values.view(-1)
    chunks = flat.split(NOISE_CHUNK)
    seeds = torch.randint(CHUNK_SEED_BOUND, (len(chunks),), generator=generator, device=generator.device).tolist()
    workers = min(torch.get_num_threads(), len(chunks)) if flat.device.type == "cpu" else 1

    def draw_every(first: int) -> None:  # chunks first, first + workers, ...: one scratch buffer
        scratch = torch.empty(min(NOISE_CHUNK, flat.numel()), device=flat.device, dtype=flat.dtype)
        for k in range(first, len(chunks), workers):
            part, own = chunks[k], torch.Generator(device=flat.device).manual_seed(seeds[k])
            draw = scratch[: part.numel()]
            for _ in range(DRAWS):
                part.add_(draw.normal_(generator=own), alpha=std / DRAWS**0.5)

    if workers == 1:
        draw_every(0)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(draw_every, range(workers)))  # list(): re-raises a worker's exception
    return values


def gaussian_noise(shape: torch.Size | tuple, std: float, generator: torch.Generator) -> torch.Tensor:
    """N(0, std^2) values of `shape` (float32): the noise `add_gaussian_noise_` adds."""
    return add_gaussian_noise_(torch.zeros(shape, device=generator.device, dtype=torch.float32), std, generator)


def privatize_(
    flat: torch.Tensor,
    noise_multiplier: float,
    clip_norm: float,
    expected_batch_size: float,
    generator: torch.Generator,
    all_reduce: Callable[[torch.Tensor], None] = lambda flat: None,
) -> torch.Tensor:
    """In place: `flat` (this rank's clipped sums, end to end, float32) becomes (global sum +
    N(0, (sigma C)^2)) / expected batch size; `all_reduce` sums it over ranks in place.
    `ClippedGradientSum.flat` is noised this way where it is: a 100M-parameter model then
    saves a 400 MB copy (and on CPU its page faults) per step."""
    all_reduce(flat)
    if noise_multiplier > 0:
        add_gaussian_noise_(flat, noise_multiplier * clip_norm, generator)
    return flat.div_(expected_batch_size)


def privatize(
    sums: Sequence[torch.Tensor],
    noise_multiplier: float,
    clip_norm: float,
    expected_batch_size: float,
    generator: torch.Generator,
    all_reduce: Callable[[torch.Tensor], None] = lambda flat: None,
) -> list[torch.Tensor]:
    """`privatize_` on a flat copy of `sums` (left as they are), split back per tensor."""
    flat = torch.cat([total.reshape(-1).float() for total in sums])
    privatize_(flat, noise_multiplier, clip_norm, expected_batch_size, generator, all_reduce)
    return [part.view_as(total) for part, total in zip(flat.split([t.numel() for t in sums]), sums)]
