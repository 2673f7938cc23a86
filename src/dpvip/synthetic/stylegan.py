"""StyleGAN-Oriented: an untrained StyleGAN2-style generator with oriented filters.

The stand-in for Baradad et al.'s StyleGAN-Oriented data (DP-RandP Phase I), written from
the description in ANCHORS.md. Per network (rebuilt every `rebuild_every` images): the 4x4
constant input and the style affine maps. Per image (its own seed, so images do not depend
on their batch): per-layer styles w = LeakyReLU_0.2(N(0, I_512)), a random subset of 5..40
filters of the oriented bank with one filter per input channel, N(0, 1) weight scales,
biases ~ U(-0.2, 0.2), one pink-noise map (1/f^alpha, alpha ~ U(0.5, 1.5)) shared by all
layers at strength U(0, 0.3), ToRGB weights ~ N(0, 1), and output colour statistics.

The modulated 3x3 convolution with weight[o, i] = a[o, i] * s[i] * f_c(i) factorises exactly
into a depthwise 3x3 convolution (each input channel by its own filter) followed by a
per-image 1x1 mix, which is what makes batched generation fast.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from dpvip.synthetic.family import ImageFamily, thread_invariant, to_uint8
from dpvip.synthetic.noise import pink_noise
from dpvip.synthetic.oriented_filters import oriented_bank
from dpvip.synthetic.seeding import IMAGE, NETWORK, torch_rng

STYLE_DIM = 512


def _upsample(x: torch.Tensor) -> torch.Tensor:
    with thread_invariant(x.device):
        return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


class StyleGANOrientedFamily(ImageFamily):
    name = "stylegan_oriented"

    def __init__(
        self,
        resolution: int,
        seed: int = 0,
        device: str = "cpu",
        rebuild_every: int = 400,
        channel_base: int = 2048,
        channel_max: int = 128,
        block_size: int = 8,
    ) -> None:
        super().__init__(resolution, seed, device)
        if resolution < 4 or resolution & (resolution - 1):
            raise ValueError(f"stylegan_oriented resolution must be a power of two >= 4 (got {resolution})")
        self.rebuild_every, self.block_size = rebuild_every, block_size
        self.resolutions = [4 * 2**k for k in range(int(math.log2(resolution)) - 1)]
        self.channels = {r: min(channel_base // r, channel_max) for r in self.resolutions}
        # (resolution, input channels, output channels) of each modulated conv, in order
        self.convs = [(4, self.channels[4], self.channels[4])]
        for low, high in zip(self.resolutions, self.resolutions[1:]):
            self.convs += [
                (high, self.channels[low], self.channels[high]),
                (high, self.channels[high], self.channels[high]),
            ]
        self.bank = oriented_bank().to(self.device)
        self.bank_norms = self.bank.flatten(1).pow(2).sum(1)
        self._networks: dict[int, dict] = {}

    # Random draws ---------------------------------------------------------------------

    def network(self, network_id: int) -> dict:
        """The constant input and style affine maps shared by images of one network."""
        if network_id not in self._networks:
            g = torch_rng(self.seed, self.name, NETWORK, network_id)
            # Only the latest network is kept: blocks run through the indices in order.
            self._networks = {
                network_id: {
                    "const": torch.randn(self.channels[4], 4, 4, generator=g),
                    "conv_affine": [
                        torch.randn(STYLE_DIM, c_in, generator=g) / math.sqrt(STYLE_DIM) for _, c_in, _ in self.convs
                    ],
                    "rgb_affine": [
                        torch.randn(STYLE_DIM, self.channels[r], generator=g) / math.sqrt(STYLE_DIM)
                        for r in self.resolutions
                    ],
                }
            }
        return self._networks[network_id]

    def _style(self, g: torch.Generator, affine: torch.Tensor) -> torch.Tensor:
        w = F.leaky_relu(torch.randn(STYLE_DIM, generator=g), 0.2)
        return w @ affine + 1  # StyleGAN initialises the style bias to 1

    def image_draws(self, index: int) -> dict:
        """Everything image `index` draws for itself, from its own generator."""
        g = torch_rng(self.seed, self.name, IMAGE, index)
        net = self.network(index // self.rebuild_every)
        convs = []
        for (_, c_in, c_out), affine in zip(self.convs, net["conv_affine"]):
            subset = torch.randperm(len(self.bank), generator=g)[
                : int(torch.randint(5, len(self.bank) + 1, (1,), generator=g))
            ]
            convs.append(
                {
                    "style": self._style(g, affine),
                    "filters": subset[torch.randint(len(subset), (c_in,), generator=g)],
                    "scales": torch.randn(c_out, c_in, generator=g),
                    "bias": torch.rand(c_out, generator=g) * 0.4 - 0.2,
                }
            )
        rgb = [
            {"style": self._style(g, affine), "weight": torch.randn(3, affine.shape[1], generator=g)}
            for affine in net["rgb_affine"]
        ]
        return {
            "const": net["const"],
            "convs": convs,
            "rgb": rgb,
            "white": torch.randn(self.resolution, self.resolution, generator=g),
            "alpha": torch.rand((), generator=g) + 0.5,
            "noise_strength": torch.rand((), generator=g) * 0.3,
            "colour_mean": torch.rand(3, generator=g) * 0.6 + 0.2,
            "colour_std": torch.rand(3, generator=g) * 0.2 + 0.1,
        }

    # Batched synthesis ------------------------------------------------------------------

    def _stack(self, draws: list[dict], key: str) -> torch.Tensor:
        """One image-level draw of every image in the block, batched on the device."""
        return torch.stack([d[key] for d in draws]).to(self.device)

    def _modulated_conv(self, x: torch.Tensor, draws: list[dict], noise: torch.Tensor) -> torch.Tensor:
        batch, c_in, height, width = x.shape
        style, filters, scales, bias = (self._stack(draws, key) for key in ("style", "filters", "scales", "bias"))
        depthwise = self.bank[filters].reshape(batch * c_in, 1, 3, 3)
        padded = F.pad(
            (x * style[:, :, None, None]).reshape(1, batch * c_in, height, width), (1, 1, 1, 1), mode="reflect"
        )
        z = F.conv2d(padded, depthwise, groups=batch * c_in).reshape(batch, c_in, height * width)
        mix = scales * style[:, None, :]
        demod = torch.rsqrt((mix.pow(2) * self.bank_norms[filters][:, None, :]).sum(2) + 1e-8)
        out = torch.bmm(mix * demod[:, :, None], z).reshape(batch, -1, height, width)
        return F.relu(out + noise + bias[:, :, None, None])

    def _to_rgb(self, x: torch.Tensor, draws: list[dict]) -> torch.Tensor:
        weight = self._stack(draws, "weight") * self._stack(draws, "style")[:, None, :] / math.sqrt(x.shape[1])
        return torch.bmm(weight, x.flatten(2)).reshape(x.shape[0], 3, *x.shape[2:])

    def render_block(self, start: int, count: int) -> np.ndarray:
        with thread_invariant(self.device):  # the styles' vector-matrix products too
            draws = [self.image_draws(i) for i in range(start, start + count)]
            pink = pink_noise(self._stack(draws, "white"), self._stack(draws, "alpha"))
        pink = pink[:, None] * self._stack(draws, "noise_strength")[:, None, None, None]
        noise_at = {r: F.adaptive_avg_pool2d(pink, r) * (self.resolution / r) for r in self.resolutions}
        x = self._stack(draws, "const")
        conv_index, rgb = 0, None
        for level, res in enumerate(self.resolutions):
            if level > 0:
                x, rgb = _upsample(x), _upsample(rgb)
            for _ in range(1 if level == 0 else 2):
                x = self._modulated_conv(x, [d["convs"][conv_index] for d in draws], noise_at[res])
                conv_index += 1
            layer_rgb = self._to_rgb(x, [d["rgb"][level] for d in draws])
            rgb = layer_rgb if rgb is None else rgb + layer_rgb
        mean = rgb.mean(dim=(2, 3), keepdim=True)
        std = rgb.std(dim=(2, 3), keepdim=True).clamp_min(1e-6)
        target_mean = self._stack(draws, "colour_mean")[:, :, None, None]
        target_std = self._stack(draws, "colour_std")[:, :, None, None]
        return to_uint8((rgb - mean) / std * target_std + target_mean)

    def metadata(self, index: int) -> dict:
        return {"network": index // self.rebuild_every}
