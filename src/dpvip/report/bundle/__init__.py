"""The results bundle and what opens it: the bundle and its manifest, the RO-Crate, provenance,
the first page (claims overview and coverage), the Snakemake report, and the coverage entries of
the three papers gathered."""
