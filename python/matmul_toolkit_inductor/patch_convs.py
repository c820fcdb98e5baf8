"""Patch convolutions as GEMMs: use_model() does it by default (patchify=False leaves them).

A convolution whose stride equals its kernel, without padding, dilation or groups (ViT's
patch embedding, ConvNeXt's stem and downsampling layers) reads every input pixel once: it is
a GEMM of the input cut into patches, (N*Ho*Wo, C*kh*kw) @ (C*kh*kw, C_out), which cuBLAS
runs several times faster than cuDNN runs the convolution with its layout conversions
(docs/experiments/2026-12-06-patch-convolutions-as-gemms.md). Rewritten before lowering, the
GEMM is Inductor's mm or addmm, which the model decides like any other, and cutting the input
into patches is a copy that Inductor fuses with whatever produced it. The patch's elements
are ordered along the input's contiguous dimension: (C, kh, kw) for an NCHW input (an image),
(kh, kw, C) for a channels-last one (ConvNeXt's LayerNorm output), so that the fused copy
reads and writes runs of memory; there the weight is permuted to match, a copy of the weight.

The rewrite is a post-grad graph pass (Inductor's `post_grad_custom_pre_pass`, chained to
one the user set), a CustomGraphPass so that its version goes into the compile cache key.
Torch is imported only when a pass is built.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Optional, Sequence

# Goes into the compile cache key (the pass's uuid): change it when the rewrite changes.
VERSION = "2"


def patch_of(input_shape: Sequence[Any], weight_shape: Sequence[Any], stride: Sequence[Any],
             padding: Sequence[Any], dilation: Sequence[Any], transposed: Any, output_padding: Sequence[Any],
             groups: Any) -> Optional[tuple[int, int]]:
    """(kh, kw) where aten.convolution with these arguments is a patch convolution that the
    pass rewrites: 2-D, stride == kernel (larger than 1x1), no padding, no dilation, not
    transposed, one group, the input's channels and sizes known (the batch may be symbolic)
    and at least one patch each way; else None."""
    if len(weight_shape) != 4 or len(input_shape) != 4 or transposed or groups != 1:
        return None
    sizes = [*weight_shape, *input_shape[1:]]
    if not all(isinstance(s, int) for s in sizes):
        return None
    kh, kw = weight_shape[2], weight_shape[3]
    if kh * kw <= 1 or list(stride) != [kh, kw]:
        return None
    if any(p != 0 for p in padding) or any(d != 1 for d in dilation) or any(p != 0 for p in output_padding):
        return None
    if input_shape[1] != weight_shape[1] or input_shape[2] < kh or input_shape[3] < kw:
        return None
    return kh, kw


def channels_innermost(shape: Sequence[Any], stride: Sequence[Any]) -> bool:
    """Whether a 4-D (N, C, H, W) tensor with these sizes and strides is channels-last:
    more than one channel, at stride 1."""
    return len(shape) == 4 and len(stride) == 4 and isinstance(shape[1], int) and shape[1] > 1 and stride[1] == 1


def conv_as_gemm(x: Any, weight: Any, bias: Any, kh: int, kw: int, channels_last: bool = False) -> Any:
    """The patch convolution of x (N, C, H, W) by weight (C_out, C, kh, kw), as a GEMM:
    (N, C_out, H // kh, W // kw), laid out N, Ho, Wo, C_out (the GEMM's rows). A patch's
    elements are ordered (kh, kw, C) when `channels_last`, else (C, kh, kw)."""
    import torch

    n, c, h, w = x.shape
    ho, wo = h // kh, w // kw
    windows = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw)
    # The weight (C_out, C, kh, kw) is ordered like the patches, so the GEMM pairs them up.
    patch_order, weight_order = ((3, 5, 1), (2, 3, 1)) if channels_last else ((1, 3, 5), (1, 2, 3))
    patches = windows.permute(0, 2, 4, *patch_order).reshape(n * ho * wo, c * kh * kw)
    kernel = weight.permute(0, *weight_order).reshape(weight.shape[0], c * kh * kw).t()
    out = torch.mm(patches, kernel) if bias is None else torch.addmm(bias, patches, kernel)
    return out.reshape(n, ho, wo, weight.shape[0]).permute(0, 3, 1, 2)


@functools.cache
def _patterns() -> Any:
    """Inductor's pattern pass that matches aten.convolution and rewrites the patch ones."""
    import torch
    from torch._inductor.pattern_matcher import CallFunction, KeywordArg, Match, PatternMatcherPass, \
        register_graph_pattern

    names = ("x", "w", "b", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
    patterns = PatternMatcherPass(pass_name="matmul_toolkit_patch_convs")
    pattern = CallFunction(torch.ops.aten.convolution.default, *(KeywordArg(n) for n in names))

    def patch(match: Match) -> Optional[tuple[int, int, bool]]:
        k = match.kwargs
        x, w = (k[n].meta.get("val") if hasattr(k[n], "meta") else None for n in ("x", "w"))
        if x is None or w is None or not x.is_cuda:
            return None
        found = patch_of(list(x.shape), list(w.shape), k["stride"], k["padding"], k["dilation"], k["transposed"],
                         k["output_padding"], k["groups"])
        return None if found is None else (*found, channels_innermost(list(x.shape), list(x.stride())))

    @register_graph_pattern(pattern, extra_check=lambda match: patch(match) is not None, pass_dict=patterns)
    def rewrite(match: Match, **k: Any) -> None:
        found = patch(match)
        assert found is not None, "extra_check matched it"
        kh, kw, channels_last = found
        if k["b"] is None:
            match.replace_by_example(lambda x, w: conv_as_gemm(x, w, None, kh, kw, channels_last), [k["x"], k["w"]])
        else:
            match.replace_by_example(lambda x, w, b: conv_as_gemm(x, w, b, kh, kw, channels_last),
                                     [k["x"], k["w"], k["b"]])

    return patterns


def graph_pass(then: Optional[Callable[[Any], None]] = None) -> Any:
    """The post-grad pass that rewrites patch convolutions, then runs `then` (the pass it
    replaces in Inductor's config, if any). On any error it leaves the graph to Inductor,
    with one warning."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
        base: type = CustomGraphPass
    except ImportError:  # an older torch: the pass still runs, the FX cache is bypassed
        base = object

    class PatchConvs(base):  # type: ignore[misc, valid-type]
        warned = False

        def __call__(self, graph: Any) -> None:
            try:
                _patterns().apply(graph)
            except Exception as e:  # never break the user's compile
                if not PatchConvs.warned:
                    PatchConvs.warned = True
                    warnings.warn(f"matmul_toolkit: patch convolutions left to Inductor: {type(e).__name__}: {e}",
                                  RuntimeWarning, stacklevel=2)
            if then is not None:
                then(graph)

        def uuid(self) -> Any:
            if then is None:
                return f"matmul_toolkit.patch_convs-{VERSION}"
            before = then.uuid() if hasattr(then, "uuid") else None
            # A pass of the user's with no uuid: no caching, as Inductor does for it alone
            return None if before is None else f"matmul_toolkit.patch_convs-{VERSION}-{before}"

    return PatchConvs()


def settings() -> list[tuple[Any, str, Callable[[Any], Any]]]:
    """The Inductor setting that installs the pass, chained to the user's (handlers.Setting)."""
    from torch._inductor import config as inductor_config

    return [(inductor_config, "post_grad_custom_pre_pass", graph_pass)]
