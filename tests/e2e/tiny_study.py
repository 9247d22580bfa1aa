"""The tiny study the end-to-end tests launch with `run`: two seeds, two epochs, a small model on CPU."""

TINY: list[str] = [
    "--epochs", "2", "--seeds", "42,2024",
    "--set", "training.hidden=32", "--set", "training.out_dim=8", "--set", "training.batch_size=32",
    "--set", "training.lr=1e-3", "--set", "evaluation.n_query=40", "--set", "compute.device='cpu'",
]  # fmt: skip
