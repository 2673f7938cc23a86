# The published results bundle: tables, figures, the Snakemake report, provenance, manifest.

BUNDLE_TABLES = [*table_files("privacy_audit")]
BUNDLE_FIGURES = [*figure_files("vip_figure6")]


rule bundle_report:
    localrule: True
    input:
        BUNDLE_TABLES,
        BUNDLE_FIGURES,
    output:
        f"{RESULTS}/report/report.html",
    params:
        config=config,
        snakefile=workflow.main_snakefile,
        workdir=os.getcwd(),
    log:
        f"{LOGS}/bundle_report.log",
    conda:
        ENV
    script:
        "../workflow_scripts/bundle_report.py"


rule bundle:
    localrule: True
    input:
        tables=BUNDLE_TABLES,
        figures=BUNDLE_FIGURES,
        report=rules.bundle_report.output if config["bundle"]["report"] else [],
    output:
        f"{BUNDLE}/MANIFEST.sha256",
    params:
        config=config,
        workflow_dir=workflow.basedir,
        benchmarks=BENCHMARKS,
    log:
        f"{LOGS}/bundle.log",
    conda:
        ENV
    script:
        "../workflow_scripts/bundle.py"
