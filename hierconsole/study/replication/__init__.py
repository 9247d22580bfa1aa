"""A replication of the paper: its stage graph, the stages and their inputs, and its time estimate."""
