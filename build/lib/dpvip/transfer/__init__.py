"""DP transfer on frozen features: feature caches, Mehta et al.'s last-layer DP fine-tuning,
DP-RandP's private linear probing."""
