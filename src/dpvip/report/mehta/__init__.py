"""Mehta et al. (2023): its result tables (1-5), hyper-parameter tables (6-9), throughput table
(10), figures, claims and coverage entries, and the notes on its stand-ins."""
