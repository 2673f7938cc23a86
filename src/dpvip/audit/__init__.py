"""What checks the DP engine from outside: the papers' privacy claims recomputed under each
accountant, and empirical audits of our own mechanisms.

Modules: `claims` (the privacy settings the papers state), `claim_check` (each claim's epsilon
under rdp/prv/pld and the sigma each needs), `curves` (epsilon against steps, ViP Figure 6),
`canaries` (white-box gradient canaries through the one DP step), `input_canaries`
(black-box canaries planted in a training set), `bounds` (empirical lower bounds on epsilon
from canary scores). They sit on `dpvip.privacy` (the engine) and `dpvip.models`; the engine
imports none of them.
"""

# The DP mechanisms the empirical audit runs (`canaries`), as the config and command line name them.
AUDITED_MECHANISMS = ("dp_mae", "dp_finetune", "dprandp_phase3", "mehta_head", "dprandp_probe")
ROUNDING_SLACK = 0.005  # a claim printed as 8.0 still "holds" at 8.04 (relative)
