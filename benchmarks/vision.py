"""Kernel cases at the vision models' shapes: the first U-Net stage on 64x64 shapes (batch 16,
width 16), its transposed-conv upsampling, pooling and unpooling, and the digits CNN's second
stage (batch 64, 8x8 -> 4x4)."""

from __future__ import annotations

import numpy as np

from benchmarks.kernels import Case, _torch
from tinyformer import registry


def vision_cases(quick: bool = False, dtype=np.float32) -> list[Case]:
    rng = np.random.default_rng(0)
    n, side = (2, 16) if quick else (16, 64)

    def f(*shape):
        return rng.standard_normal(shape).astype(dtype)

    x, w, b = f(n, 16, side, side), f(16, 16, 3, 3), f(16)
    conv = ((1, 1), (1, 1), (1, 1), 1)  # stride, padding, dilation, groups
    xd, wd, bd = f(4 * n, 16, 8, 8), f(32, 16, 3, 3), f(32)
    xb, wt, bt = f(n, 64, side // 4, side // 4), f(64, 32, 2, 2), f(32)
    up = ((2, 2), (0, 0), (0, 0), (1, 1), 1)  # stride, padding, output_padding, dilation, groups
    pool = ((2, 2), (2, 2), (0, 0), (1, 1))  # kernel, stride, padding, dilation
    with registry.prefer(registry.REFERENCE):
        y = registry.call("conv2d.forward", x, w, b, *conv)
        yd = registry.call("conv2d.forward", xd, wd, bd, *conv)
        yt = registry.call("conv_transpose2d.forward", xb, wt, bt, *up)
        pooled, indices = registry.call("max_pool2d.forward", x, *pool)
    flops = 2 * y.size * w[0].size  # multiply-adds of one product, 2 flops each
    label = f"({n},16,{side},{side}) 3x3 16->16"
    digits = f"({4 * n},16,8,8) 3x3 16->32"
    return [
        Case("conv2d.forward", label, (x, w, b, *conv), {}, flops=flops,
             torch=_torch("nn.functional.conv2d", x, w, b, padding=1)),
        Case("conv2d.backward", label, (y, x, w, *conv), {}, flops=2 * flops),
        # on 8x8 images the kernel calls BLAS once per image from each worker (as in training)
        Case("conv2d.forward", digits, (xd, wd, bd, *conv), {}, flops=2 * yd.size * wd[0].size,
             torch=_torch("nn.functional.conv2d", xd, wd, bd, padding=1), blas_one_thread=True),
        Case("conv2d.backward", digits, (yd, xd, wd, *conv), {}, flops=4 * yd.size * wd[0].size,
             blas_one_thread=True),
        Case("conv_transpose2d.forward", f"({n},64,{side // 4},{side // 4}) 2x2/2 64->32",
             (xb, wt, bt, *up), {}, flops=2 * xb.size * wt[0].size,
             torch=_torch("nn.functional.conv_transpose2d", xb, wt, bt, stride=2),
             blas_one_thread=True),
        Case("conv_transpose2d.backward", f"({n},64,{side // 4},{side // 4}) 2x2/2 64->32",
             (yt, xb, wt, *up), {}, flops=4 * xb.size * wt[0].size, blas_one_thread=True),
        Case("max_pool2d.forward", f"({n},16,{side},{side}) 2x2", (x, *pool), {},
             x.nbytes + 3 * pooled.nbytes, torch=_torch("nn.functional.max_pool2d", x, 2)),
        Case("max_pool2d.backward", f"({n},16,{side},{side}) 2x2", (pooled, indices, x.shape), {},
             x.nbytes + 3 * pooled.nbytes),
        Case("max_unpool2d.forward", f"({n},16,{side // 2},{side // 2}) 2x2",
             (pooled, indices, (side, side)), {}, x.nbytes + 3 * pooled.nbytes),
        Case("max_unpool2d.backward", f"({n},16,{side // 2},{side // 2}) 2x2", (x, indices), {},
             x.nbytes + 3 * pooled.nbytes),
        Case("avg_pool2d.forward", f"({n},16,{side},{side}) 2x2", (x, (2, 2), (2, 2), (0, 0), True),
             {}, x.nbytes + pooled.nbytes, torch=_torch("nn.functional.avg_pool2d", x, 2)),
        Case("avg_pool2d.backward", f"({n},16,{side},{side}) 2x2",
             (pooled, x.shape, (2, 2), (2, 2), (0, 0), True), {}, x.nbytes + pooled.nbytes),
    ]  # fmt: skip
