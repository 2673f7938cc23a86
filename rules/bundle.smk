# The published results bundle: tables, figures, the Snakemake report, provenance, the
# privacy statement (what each file reveals, from the ledgers of the runs behind it), manifest.

BUNDLE_TABLES = [
    *table_files("privacy_audit"),
    *(table_files("privacy_empirical") if AUDIT_SOURCES else []),
    *table_files("synthetic_datasets"),
    *table_files("vip_table3"),
    *table_files("vip_dp_runs"),
    *[path for table in VIP_TABLES for path in table_files(table)],
    *[path for t in DPRANDP_TABLES for path in table_files(f"dprandp_{t}")],
    *table_files("dprandp_claims"),
    *table_files("dprandp_table8"),
    *table_files("dprandp_table9"),
    *[
        path
        for name in CLAIM_TABLES.values()
        if name != "dprandp_claims"
        for path in table_files(name)
    ],
    *table_files("claims"),
    *table_files("coverage"),
    *table_files("compute_budget"),
    *table_files("compute_budget_summary"),
    *table_files("compute_budget_papers"),
    *[
        path
        for t in MEHTA_OUTPUTS
        if t in MEHTA_TABLES
        for path in table_files(f"mehta_{t}")
    ],
    *[path for t in PROBE_OUTPUTS for path in table_files(f"dprandp_{t}")],
    *[path for name in mehta_appendix_tables() for path in table_files(name)],
]
BUNDLE_FIGURES = [
    *figure_files("vip_figure6"),
    *figure_files("privacy_empirical"),
    *figure_files("synthetic_samples"),
    *figure_files("syn_vip_loss"),
    *figure_files("syn_vip_reconstructions"),
    *[path for figure in DP_FIGURES for path in figure_files(figure)],
    *figure_files("vip_figure1"),
    *figure_files("vip_figure5"),
    *[path for f in DPRANDP_FIGURES for path in figure_files(f"dprandp_{f}")],
    *[
        path
        for f in MEHTA_OUTPUTS
        if f in MEHTA_FIGURES
        for path in figure_files(f"mehta_{f}")
    ],
]


rule bundle_report:
    input:
        tables=BUNDLE_TABLES,
        figures=BUNDLE_FIGURES,
        claims=f"{TABLES}/claims.csv",
    output:
        f"{RESULTS}/report/report.html",
    log:
        f"{LOGS}/bundle/report.log",
    benchmark:
        f"{BENCHMARKS}/bundle/report.tsv"
    localrule: True
    conda:
        ENV
    params:
        config=config,
        snakefile=os.path.join(DPVIP_DIR, "Snakefile"),  # dpvip's own, also as a module
        workdir=working_directory,
        intro=workflow_path("report/workflow.rst"),
    script:
        "../workflow_scripts/bundle_report.py"


rule bundle:
    input:
        tables=BUNDLE_TABLES,
        figures=BUNDLE_FIGURES,
        report=rules.bundle_report.output if config["bundle"]["report"] else [],
        privacy=sorted({path for paths in PRIVACY_SOURCES.values() for path in paths}),
    output:
        f"{BUNDLE}/MANIFEST.sha256",
    log:
        f"{LOGS}/bundle/bundle.log",
    benchmark:
        f"{BENCHMARKS}/bundle/bundle.tsv"
    localrule: True
    conda:
        ENV
    params:
        config=config,
        workflow_dir=DPVIP_DIR,
        benchmarks=BENCHMARKS,
        privacy_sources=PRIVACY_SOURCES,
        scale=config["scale"],
    script:
        "../workflow_scripts/bundle.py"
