"""Privatising a summed clipped gradient: sum over ranks, add N(0, sigma^2 C^2) once, and
normalise by the expected batch size.

Every rank draws the same noise, after the all-reduce, from the run's keyed stream of
(noise, step) (`dpvip.privacy.randomness`), so the noise enters the global sum exactly once
and every rank applies the same update without a broadcast. The noise does not depend on the
number of ranks. Each coordinate is the sum of four draws divided by 2 (same law; see
`randomness` for why).

Key material. Each release (a step's noise, or another noisy release: `purpose`) has 256
bits of key material, HMAC-SHA256 of the run's secret, from which SHAKE-256 expands every
generator's whole state:

- CPU: the noise is drawn in chunks of `NOISE_CHUNK` coordinates, one mt19937 generator per
  chunk, its 624 32-bit state words (19,968 bits) all set from the material and the chunk's
  number with `set_state` (`keyed_cpu_generator`). `manual_seed` would keep the low 32 bits
  of a seed only: 2^32 streams, which a search enumerates. Chunks are drawn on all of torch's
  CPU threads at once, with the same bits whatever their number.
- CUDA: one fused Triton kernel (`dpvip.privacy.cuda_noise`) adds all four draws of every
  coordinate in one pass over memory, from two Philox-4x32 generators of 128 bits of
  material each (64-bit key, upper counter words), XORed: a search must guess both.

So every draw rests on the 256 bits of the step's material.

Normalisation is by the expected batch size q * n, not by the realised one: the realised
size is data-dependent and not privatised, while q * n is public (opacus does the same, and
the ViP paper's equation 3 divides by the average batch size B).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from dpvip.privacy.cuda_noise import keyed_normal_add_
from dpvip.privacy.randomness import RunRandomness

DRAWS = 4  # N(0, s^2) as (x1 + x2 + x3 + x4) / 2, as opacus' secure_mode draws it
NOISE_CHUNK = 1 << 22  # coordinates drawn at a time (16 MiB of float32); part of the stream's layout
MT_WORDS = 624  # mt19937's state: 624 words of 32 bits
# torch's CPU generator state (CPUGeneratorImplState, 5,056 bytes): the_initial_seed (u64),
# left (i32), seeded (i32), next (u64), then the 624 state words, each stored as a u64.
MT_STATE_OFFSET = 24
_MT_TEMPLATE = torch.Generator().get_state()  # a fresh generator: left = 1, seeded, next = 0; words overwritten


@dataclass(frozen=True)
class NoiseStream:
    """The noise of one release: 256 bits of key `material` (never printed) and the device."""

    material: bytes
    device: torch.device

    def __repr__(self) -> str:
        return f"NoiseStream(device={self.device})"

    def chunk_material(self, chunk: int, label: bytes, size: int) -> bytes:
        """`size` bytes for chunk `chunk` (`label` tells a chunk's generators apart)."""
        message = b"dpvip noise chunk\0" + label + b"\0" + chunk.to_bytes(8, "big") + self.material
        return hashlib.shake_256(message).digest(size)

    def draw_(self, chunk: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """A function filling its argument (on CPU) with N(0, 1) draws of chunk `chunk`'s
        stream, one draw after another."""
        generator = keyed_cpu_generator(self.chunk_material(chunk, b"mt19937", 4 * MT_WORDS))
        return lambda scratch: scratch.normal_(generator=generator)

    def philox_material(self) -> tuple[bytes, bytes]:
        """The CUDA kernel's two generators' 16 bytes of material each."""
        return self.chunk_material(0, b"philox a", 16), self.chunk_material(0, b"philox b", 16)


def keyed_cpu_generator(words: bytes) -> torch.Generator:
    """A CPU (mt19937) generator whose 624 state words are `words` (2,496 bytes): every bit of
    the state is key material, unlike `manual_seed`, which keeps 32 bits of a seed."""
    if len(words) != 4 * MT_WORDS:
        raise ValueError(f"an mt19937 state takes {4 * MT_WORDS} bytes, not {len(words)}")
    state = _MT_TEMPLATE.clone()
    wide = np.frombuffer(words, dtype="<u4").astype("<u8")  # stored widened to 64 bits
    state[MT_STATE_OFFSET : MT_STATE_OFFSET + 8 * MT_WORDS] = torch.from_numpy(wide.view(np.uint8).copy())
    generator = torch.Generator()
    generator.set_state(state)
    return generator


def noise_stream(randomness: RunRandomness, step: int, device: torch.device, purpose: str = "noise") -> NoiseStream:
    """The stream of `step`'s noise (or of another noisy release: `purpose`)."""
    return NoiseStream(randomness.material(purpose, step), torch.device(device))


def add_gaussian_noise_(values: torch.Tensor, std: float, stream: NoiseStream) -> torch.Tensor:
    """values += N(0, std^2) per coordinate, in place, as DRAWS standard draws each scaled by
    std / sqrt(DRAWS). Drawn chunk by chunk into a scratch buffer: the noise of a 100M-
    parameter model then costs a chunk of memory per thread, not several model-sized
    temporaries (which also cost a page fault per 4 KiB on CPU). Chunk k draws from its own
    keyed generators, so that on CPU (where one `normal_` runs on one thread) the chunks are
    drawn on all of torch's threads at once, with the same result whatever their number."""
    flat = values.view(-1)
    if flat.device.type == "cuda":
        keyed_normal_add_(flat, std, *stream.philox_material())
        return values
    if flat.device.type != "cpu":
        raise ValueError(f"DP noise is drawn on CPU or CUDA, not on {flat.device.type}")
    chunks = flat.split(NOISE_CHUNK)
    workers = min(torch.get_num_threads(), len(chunks))

    def draw_every(first: int) -> None:  # chunks first, first + workers, ...: one scratch buffer
        scratch = torch.empty(min(NOISE_CHUNK, flat.numel()), device=flat.device, dtype=flat.dtype)
        for k in range(first, len(chunks), workers):
            part = chunks[k]
            draw = stream.draw_(k)
            for _ in range(DRAWS):
                part.add_(draw(scratch[: part.numel()]), alpha=std / DRAWS**0.5)

    if workers == 1:
        draw_every(0)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(draw_every, range(workers)))  # list(): re-raises a worker's exception
    return values


def gaussian_noise(shape: torch.Size | tuple, std: float, stream: NoiseStream) -> torch.Tensor:
    """N(0, std^2) values of `shape` (float32): the noise `add_gaussian_noise_` adds."""
    return add_gaussian_noise_(torch.zeros(shape, device=stream.device, dtype=torch.float32), std, stream)


def privatize_(
    flat: torch.Tensor,
    noise_multiplier: float,
    clip_norm: float,
    expected_batch_size: float,
    stream: NoiseStream,
    all_reduce: Callable[[torch.Tensor], None] = lambda flat: None,
) -> torch.Tensor:
    """In place: `flat` (this rank's clipped sums, end to end, float32) becomes (global sum +
    N(0, (sigma C)^2)) / expected batch size; `all_reduce` sums it over ranks in place.
    `ClippedGradientSum.flat` is noised this way where it is: a 100M-parameter model then
    saves a 400 MB copy (and on CPU its page faults) per step."""
    all_reduce(flat)
    if noise_multiplier > 0:
        add_gaussian_noise_(flat, noise_multiplier * clip_norm, stream)
    return flat.div_(expected_batch_size)


def privatize(
    sums: Sequence[torch.Tensor],
    noise_multiplier: float,
    clip_norm: float,
    expected_batch_size: float,
    stream: NoiseStream,
    all_reduce: Callable[[torch.Tensor], None] = lambda flat: None,
) -> list[torch.Tensor]:
    """`privatize_` on a flat copy of `sums` (left as they are), split back per tensor."""
    flat = torch.cat([total.reshape(-1).float() for total in sums])
    privatize_(flat, noise_multiplier, clip_norm, expected_batch_size, stream, all_reduce)
    return [part.view_as(total) for part, total in zip(flat.split([t.numel() for t in sums]), sums)]
