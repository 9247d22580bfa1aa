"""What a front end shows of a replication before and while it runs, through the front door: its stages,
scales and datasets, and its time left (the console's replication view). Kept apart from `replicate`, which
runs stages and measures the machine (torch, the extractor): the console must start without them."""

from hierconsole.study.replication.estimate import calibrated_left
from hierconsole.study.replication.graph import Stage
from hierconsole.study.replication.stages import DATASETS, PAPER, paper_stages, replication_scale

__all__ = ["DATASETS", "PAPER", "Stage", "calibrated_left", "paper_stages", "replication_scale"]
