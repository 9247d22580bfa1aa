"""Frozen-backbone feature extraction: image lists, preprocessing, the DINOv2 backbone, resumable shards.

Its own half beside `engine/`: it runs torch and `transformers` in the process that asks for it (the
`extract` command), never opens the store, and is never imported by the console; `study/` imports it only
for a replication (its calibration times the backbone in-process, and its inputs check `--model` and
`--weights` with `architectures` and `weights`). The torch-free modules (`sources`, `preprocess`,
`architectures`, `weights`, `shards`) let the CLI validate everything before torch is loaded; `backbone`,
`runner` and `calibration` import torch and `transformers`.
"""
