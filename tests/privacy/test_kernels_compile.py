"""dpvip's Triton kernels compiled for the GPUs they run on (Ampere sm_80, Hopper sm_90) by
Triton's own compiler and the ptxas it ships, without a GPU: a kernel edited on a CPU
machine (where the tests run it in Triton's interpreter, which accepts more than the
compiler does) is known to build before a GPU session is spent on it."""

import pytest

triton = pytest.importorskip("triton")
pytestmark = pytest.mark.slow  # 16 s: make test, not make test-fast

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

ARCHITECTURES = [80, 90]
_STRIDES = ["a_example", "a_token", "a_feature", "g_example", "g_token", "g_feature", "out_example", "out_part"]


def compiled(fn, signature: dict, constants: dict, arch: int, **options):
    source = ASTSource(fn=fn, signature=signature | dict.fromkeys(constants, "constexpr"), constexprs=constants)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # compiled here, not read from an old cache


@pytest.mark.parametrize(
    "arch, operands, wide", [(80, "*bf16", False), (90, "*bf16", False), (90, "*fp16", False), (90, "*fp32", True)]
)
def test_the_ghost_norm_kernel_compiles_for_every_tile_shape(arch, operands, wide):
    from dpvip.privacy import gram_kernel

    signature = {"a_ptr": operands, "g_ptr": operands, "out_ptr": "*fp64", "tokens": "i32", "fan_in": "i32"}
    signature |= {"fan_out": "i32"} | dict.fromkeys(_STRIDES, "i64")
    for config in gram_kernel.CONFIGS:
        kernel = compiled(
            gram_kernel.ghost_norm_tiles,
            signature,
            config.kwargs | {"WIDE": wide},
            arch,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )
        assert kernel.asm["cubin"] and ".entry ghost_norm_tiles" in kernel.asm["ptx"]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_noise_kernel_compiles(arch):
    from dpvip.privacy import cuda_noise, noise_kernel

    signature = {"out_ptr": "*fp32", "key_ptr": "*i32", "n": "i64", "scale": "fp32"}
    kernel = compiled(noise_kernel.keyed_normal_add, signature, {"BLOCK": cuda_noise.BLOCK}, arch)
    assert kernel.asm["cubin"] and ".entry keyed_normal_add" in kernel.asm["ptx"]
