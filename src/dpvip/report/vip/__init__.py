"""ViP (Yu et al., 2023): its result tables and figures, its DP pre-training runs' table and
loss figures, the readings that keep its tables honest, its claims and its coverage entries."""
