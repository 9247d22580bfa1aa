"""Frozen-backbone feature extraction: image lists, preprocessing, the DINOv2 backbone, resumable shards.

Its own half beside `engine/`: it runs torch and `transformers` in the process that asks for it (the
`extract` command), never opens the store, and is never imported by `study/` or the console. The
torch-free modules (`sources`, `preprocess`, `architectures`, `shards`, `manifest`) let the CLI validate
everything before torch is loaded; `backbone` and `runner` import torch and `transformers`.
"""
