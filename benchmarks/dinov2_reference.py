"""Our backbone against Meta's own DINOv2 code: the same random weights, the same input, the features.

    python benchmarks/dinov2_reference.py --dinov2-src PATH/TO/facebookresearch-dinov2 [--size 224]

Not a benchmark but a check that needs a checkout of github.com/facebookresearch/dinov2 (pure torch;
xFormers not needed), so it cannot run in the test suite. It builds Meta's ViT-S/14 and ViT-B/14
(518-px position embeddings, LayerScale), perturbs every parameter, saves the state dict in Meta's
layout, loads it through hierconsole's loader (renaming to transformers' keys, strict) and compares the
layer-normed CLS token of both on random 224-px inputs. A difference of 0.0 means the renaming, the
fused qkv split and the position-embedding resize all agree with the reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dinov2-src", type=Path, required=True, help="a checkout holding dinov2/models/")
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    sys.path.insert(0, str(args.dinov2_src))
    from dinov2.models.vision_transformer import vit_base, vit_small

    from hierconsole.extraction.architectures import ARCHITECTURES
    from hierconsole.extraction.backbone import build, check_matches, hf_layout

    torch.manual_seed(0)
    worst = 0.0
    for name, make in (("vits14", vit_small), ("vitb14", vit_base)):
        meta = make(patch_size=14, img_size=518, init_values=1.0, block_chunks=0).eval()
        with torch.no_grad():
            for p in meta.parameters():
                p.add_(0.02 * torch.randn_like(p))
        arch = ARCHITECTURES[name]
        ours = build(arch)
        state = hf_layout(dict(meta.state_dict()))
        check_matches(Path(f"{name} (Meta layout)"), state, ours, arch)
        ours.load_state_dict(state, strict=True)
        x = torch.randn(2, 3, args.size, args.size)
        with torch.inference_mode():
            diff = (meta(x) - ours(pixel_values=x).pooler_output).abs().max().item()
        worst = max(worst, diff)
        print(f"{name} at {args.size} px: max |Meta - hierconsole| = {diff:.3g}")
    return 0 if worst < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
