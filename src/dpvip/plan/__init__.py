"""The plan: which runs a config asks for, their settings, and which table and figure cell
each one fills, for the three papers. Torch-free, so the workflow knows and checks every job
before anything runs, and the tables read the same plan back.

- `pretrain`, `dp_pretrain`: (Syn)-ViP and DP-MAE settings (and the helpers that read
  settings from a config section);
- `vip_runs`: ViP's DP runs and ablations; `vip_rows`: which run fills which row of the ViP
  tables; `vip_evaluations`: the downstream evaluations those cells need;
- `dprandp_phase1`, `dprandp_private`: DP-RandP's Phase I and private-run settings;
  `dprandp_runs`: its runs; `dprandp_rows`: which runs fill which table, figure and claim;
- `transfer`: the feature caches and linear-head runs of Mehta et al.'s tables and figures
  and of DP-RandP's private linear probing.

It imports only the size registries (`dpvip.models`), the names the privacy code offers
(`dpvip.privacy`) and plain helpers; the training, evaluation and report code import it.
"""
