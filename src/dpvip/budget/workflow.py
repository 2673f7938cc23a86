"""The jobs a target needs, as Snakemake itself plans them.

The workflow is loaded through Snakemake's Python API with the given config files (over the
embedded config.yaml, as on the command line) and the resources of a Snakemake profile
(its `default-resources` and `set-resources`: the Slurm `runtime` a job gets). The DAG is
built as `snakemake --dry-run --forceall TARGET` builds it, without locking the working
directory, and each job is read with its rule, wildcards, evaluated params (exactly what its
script receives), resources and benchmark file. The Snakefile's module-level names (the
plans of common.smk) come along, so a job's shapes are read from the workflow's own plan,
never re-derived here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dpvip.errors import DpvipInputError


@dataclass(frozen=True)
class WorkflowJob:
    rule: str
    wildcards: dict
    params: dict
    resources: dict
    benchmark: str | None
    log: str | None = None  # its first log file, where a workflow job's exact peak RSS is

    @property
    def name(self) -> str:
        """The rule and its wildcards, as Snakemake prints a job."""
        values = ", ".join(f"{k}={v}" for k, v in self.wildcards.items())
        return f"{self.rule}[{values}]" if values else self.rule

    @property
    def declares_gpu(self) -> bool:
        """A rule that asks for GPUs at any scale (its `gpu` resource, 0 on a CPU config)."""
        return "gpu" in self.resources


@dataclass
class PlannedWorkflow:
    jobs: list[WorkflowJob]
    names: dict  # the Snakefile's module-level names: config, plans, helper functions
    profile: dict = field(default_factory=dict)  # the profile's settings (retries, ...)

    @property
    def config(self) -> dict:
        return self.names["config"]


def profile_settings(profile: str | Path | None) -> dict:
    """A Snakemake profile's settings (profile.yaml or config.yaml in its folder); {} for None."""
    if profile is None:
        return {}
    folder = Path(profile)
    for name in ("profile.yaml", "config.yaml"):
        if (folder / name).is_file():
            return yaml.safe_load((folder / name).read_text()) or {}
    raise DpvipInputError(f"profile {profile} has no profile.yaml or config.yaml")


def _resource_settings(profile: dict):
    from snakemake.settings.types import ResourceSettings

    return ResourceSettings(
        cores=1,
        nodes=1,
        default_resources=profile.get("default-resources") or None,
        overwrite_resources={rule: dict(values) for rule, values in (profile.get("set-resources") or {}).items()},
    )


def _job(job) -> WorkflowJob:
    resources = {key: value for key, value in job.resources.items() if not key.startswith("_")}
    return WorkflowJob(
        rule=job.rule.name,
        wildcards=dict(job.wildcards.items()),
        params=dict(job.params.items()),
        resources=resources,
        benchmark=str(job.benchmark) if job.benchmark else None,
        log=str(job.log[0]) if job.log else None,
    )


def plan_workflow(
    snakefile: str | Path,
    configfiles: Sequence[str | Path] = (),
    targets: Sequence[str] = (),
    profile: str | Path | None = None,
    workdir: str | Path | None = None,
) -> PlannedWorkflow:
    """Every job `targets` (default: the workflow's default target) needs under the config,
    with the profile's resources, as `snakemake -n --forceall` plans them in `workdir`
    (default: here)."""
    from snakemake.api import SnakemakeApi
    from snakemake_interface_common.exceptions import WorkflowError
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness

    snakefile = Path(snakefile).resolve()
    if not snakefile.is_file():
        raise DpvipInputError(f"Snakefile {snakefile} does not exist")
    missing = [str(path) for path in configfiles if not Path(path).is_file()]
    if missing:
        raise DpvipInputError(f"configuration file {missing[0]} does not exist")
    settings = profile_settings(profile)
    here, environment = Path.cwd(), dict(os.environ)
    workdir = Path(workdir).resolve() if workdir else here
    try:
        output = OutputSettings(
            dryrun=True, quiet={Quietness.ALL}, log_level_override=logging.ERROR, enable_file_logging=False
        )
        with SnakemakeApi(output) as api:
            workflow_api = api.workflow(
                resource_settings=_resource_settings(settings),
                config_settings=ConfigSettings(configfiles=[Path(p).resolve() for p in configfiles]),
                snakefile=snakefile,
                workdir=workdir,
            )
            workflow_api.dag(DAGSettings(targets=frozenset(targets), forceall=True))
            workflow = workflow_api._workflow  # the loaded workflow: Snakemake's own DAG below
            workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            jobs = [_job(job) for job in workflow.dag.jobs]
            names = dict(workflow.globals)
    except WorkflowError as err:  # a bad target or config: Snakemake's message, on one line
        raise DpvipInputError(f"snakemake: {' '.join(str(err).split())}") from None
    finally:
        os.chdir(here)  # the API changes into the workdir and back; make sure of it
        # Parsing the Snakefile sets the jobs' environment (the key store, the library's
        # path): planning leaves the caller's as it was.
        os.environ.clear()
        os.environ.update(environment)
    return PlannedWorkflow(sorted(jobs, key=lambda job: (job.rule, job.name)), names, settings)
