"""A study's fairness and leakage audits: each check a pure function of its evidence, by family."""
