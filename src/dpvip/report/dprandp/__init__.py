"""DP-RandP (Tang et al., 2024): its result, probing and cost tables, its figures (2, 4-7), the
runs its claims compare, its claims and coverage entries, and the places where the paper prints
two numbers for one quantity."""
