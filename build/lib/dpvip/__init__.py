"""dpvip: reproducible differentially private vision pipelines (ViP, DP-RandP, Mehta et al.)."""

__version__ = "0.1.0"
