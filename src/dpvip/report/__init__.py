"""Tables, figures, paper values and the results bundle, one package per concern, importing
only downwards (an import-linter contract holds it):

- `bundle` (the bundle, its RO-Crate, provenance, the first page, the Snakemake report, the
  papers' coverage entries gathered) and `jobs` (the smoke run's table, `dpvip bench workflow`);
- `vip`, `mehta`, `dprandp`: each paper's tables, figures, claims and coverage entries, none
  importing another;
- `claims` (the catalogue, verdicts, chance levels, coverage) and `privacy` (the statement,
  composition, notes, audit tables and figures);
- `common`: table and figure writing, paper values, what every one of them uses.
"""
