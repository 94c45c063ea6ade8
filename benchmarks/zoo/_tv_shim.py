"""Make `import torchvision` (and so `import timm`) work where torchvision's C++ ops cannot load.

The PyPI wheel of torchvision 0.28.0 is a CUDA build: its `_C.so` links `libc10_cuda.so`, which
the CPU build of torch 2.13 does not ship, so `torch.ops.load_library` fails and
`torchvision/_meta_registrations.py` dies on `register_fake("torchvision::nms")` ("operator
torchvision::nms does not exist"). timm imports torchvision, so it dies too.

When (and only when) the real library does not load, this defines the two schemas that
`_meta_registrations` registers fakes for (nms, qnms) and gives nms a plain-torch CPU kernel.
Nothing else of torchvision's C++ ops exists then (roi_align, deform_conv2d...), so the zoo uses
no model that needs them (no Faster R-CNN; segmentation models and DETR instead).
"""
from __future__ import annotations

import torch

_LIB = None


def _nms_cpu(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    order = scores.argsort(descending=True)
    keep = []
    suppressed = torch.zeros(dets.shape[0], dtype=torch.bool)
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        xx1 = torch.maximum(x1[i], x1)
        yy1 = torch.maximum(y1[i], y1)
        xx2 = torch.minimum(x2[i], x2)
        yy2 = torch.minimum(y2[i], y2)
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        iou = inter / (areas[i] + areas - inter)
        suppressed |= iou > iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def install() -> bool:
    """Returns True when the shim was needed (the real torchvision ops did not load)."""
    global _LIB
    if _LIB is not None:
        return True
    try:
        import torchvision.extension as _ext  # noqa: F401  (loads _C if it can)
        # importing torchvision.extension imports torchvision/__init__ first, which is what fails
    except ImportError:
        return False  # no torchvision at all: nothing to shim
    except RuntimeError:
        pass
    if hasattr(torch.ops, "torchvision") and _has("nms"):
        return False
    _LIB = torch.library.Library("torchvision", "FRAGMENT")
    _LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIB.impl("nms", _nms_cpu, "CPU")
    import sys
    for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
        del sys.modules[k]  # the failed half-import
    return True


def _has(op: str) -> bool:
    try:
        getattr(torch.ops.torchvision, op)
        return True
    except (AttributeError, RuntimeError):
        return False
