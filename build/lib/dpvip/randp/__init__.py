"""DP-RandP (Tang et al., "Differentially Private Image Classification by Learning Priors
from Random Processes"): Phase I learns features from random-process images, without
privacy, with the alignment and uniformity loss of `dpvip.randp.contrastive`."""
