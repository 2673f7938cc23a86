"""The README and docs/ as a user reads them: every command in their bash blocks is checked
cheaply (a `dpvip` command parses with the real command line, a `make` target is the
Makefile's, the repository paths it names exist, the targets of `snakemake` commands are ones
the embedded default can build, by one dry run), the README stays short, its links resolve,
its library example is the core of `examples/dp_training_loop.py`, and `profiles/slurm_site`
adds a partition without dropping the Slurm profile's resources."""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest

from conftest import ROOT, run_snakemake

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 250
# Where a command's path argument is a file of this repository (others are outputs:
# results/, runs/, data/). A path component starting with `my_` is the user's own file.
REPO_ROOTS = ("config", "profiles", "envs", "examples", "docs", "src", "tests", "rules", "workflow_scripts")
# Snakemake options the docs use: those taking one value, and those taking every word up to
# the next option (so a target written after them would be read as one of their values).
SNAKEMAKE_ONE_VALUE = {"--cores", "-c", "--jobs", "-j", "--profile", "--directory", "-d", "--sdm"}
SNAKEMAKE_ONE_VALUE |= {"--slurm-qos", "--slurm-status-command", "--snakefile", "-s"}
SNAKEMAKE_MANY_VALUES = {"--configfile", "--configfiles", "--config", "--default-resources", "--set-resources"}
SNAKEMAKE_FLAGS = {"-n", "--dry-run", "--lint", "--quiet", "--rerun-incomplete", "--keep-going", "-p"}


@dataclass(frozen=True)
class Command:
    doc: str
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.doc}: {shlex.join(self.words)}"


def bash_commands(path: Path) -> list[Command]:
    """Every command of the file's bash code blocks (indented ones too), continuation lines
    joined and comments dropped."""
    commands = []
    for block in re.findall(r"^[ \t]*```(?:bash|sh|shell)\n(.*?)^[ \t]*```", path.read_text(), re.S | re.M):
        text = re.sub(r"\\\n\s*", " ", textwrap.dedent(block))
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(Command(path.relative_to(ROOT).as_posix(), tuple(words)))
    return commands


ALL_COMMANDS = [command for path in (README, *DOCS) for command in bash_commands(path)]


def program(command: Command) -> str:
    return Path(command.words[0]).name  # .venv/bin/dpvip -> dpvip


def of_program(*names: str) -> list[Command]:
    return [command for command in ALL_COMMANDS if program(command) in names]


def repo_path_problems(command: Command) -> list[str]:
    """The words (or option values) that name a path of this repository that does not exist."""
    problems = []
    for word in command.words[1:]:
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        parts = Path(value).parts
        if not parts or parts[0] not in REPO_ROOTS or any(part.startswith("my_") for part in parts):
            continue
        if not (ROOT / value).exists():
            problems.append(value)
    return problems


def test_the_docs_have_commands_of_every_kind():
    assert {"make", "dpvip", "snakemake"} <= {program(command) for command in ALL_COMMANDS}
    assert len(ALL_COMMANDS) > 30


def test_every_program_is_one_the_checks_know():
    known = {"make", "dpvip", "snakemake", "python", "conda"}
    unknown = [str(command) for command in ALL_COMMANDS if program(command) not in known]
    assert not unknown, "a command no check here covers: " + "; ".join(unknown)


def test_every_repository_path_in_a_command_exists():
    missing = [f"{command} -> {path}" for command in ALL_COMMANDS for path in repo_path_problems(command)]
    assert not missing, "\n".join(missing)


def test_make_targets_are_the_makefiles():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", makefile, re.M))
    asked = {  # not options, nor variable assignments (make NAME=value)
        word
        for command in of_program("make")
        for word in command.words[1:]
        if not word.startswith("-") and "=" not in word
    }
    assert asked and asked <= targets, asked - targets


@pytest.mark.parametrize("command", of_program("dpvip"), ids=str)
def test_dpvip_commands_parse(command):
    """Each `dpvip` command is one the command line takes, options and values included."""
    from dpvip.cli import build_parser

    try:
        args = build_parser().parse_args(list(command.words[1:]))
    except SystemExit as exit:
        pytest.fail(f"{command}: the command line refuses it (exit {exit.code})")
    assert callable(args.handler)


def test_python_commands_name_files_or_modules_that_exist():
    for command in of_program("python"):
        words = command.words[1:]
        if words[0] == "-m":
            assert find_spec(words[1]) is not None, f"{command}: no module {words[1]}"
        else:
            assert (ROOT / words[0]).is_file(), f"{command}: no file {words[0]}"


def snakemake_targets(command: Command) -> list[str]:
    """The command's targets; fails on an option the parser here does not know, and on a
    target written where an option would take it as its value."""
    targets, words, many = [], list(command.words[1:]), False
    while words:
        word = words.pop(0)
        if word in SNAKEMAKE_ONE_VALUE:
            words.pop(0)
            many = False
        elif word in SNAKEMAKE_MANY_VALUES:
            many = True
        elif word in SNAKEMAKE_FLAGS:
            many = False
        elif word.startswith("-"):
            pytest.fail(f"{command}: option {word} is unknown to this test (add it to the sets above)")
        elif many:
            assert word.endswith((".yaml", ".yml", ".json")) or "=" in word, (
                f"{command}: {word} follows an option that takes every word after it: put targets first"
            )
        else:
            targets.append(word)
    return targets


def test_snakemake_targets_are_built_by_the_embedded_default(tmp_path):
    """One dry run asks for every target the docs name (at the embedded default)."""
    targets = sorted({target for command in of_program("snakemake") for target in snakemake_targets(command)})
    assert "results/tables/vip_table11.csv" in targets
    done = run_snakemake(tmp_path, *targets, "-n", "--quiet", "rules", timeout=300)
    assert done.returncode == 0, done.output


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda path: path.relative_to(ROOT).as_posix())
def test_links_resolve_inside_the_repository(doc):
    """Every relative link of the README and docs/ names a file of this repository (the
    README stands alone: it links nothing outside it)."""
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+://|#|mailto:", target):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
        assert path.exists(), f"{doc.name} links to {target}, which does not exist"


def test_the_readme_links_every_docs_file():
    text = README.read_text()
    assert DOCS and all(f"docs/{doc.name}" in text for doc in DOCS)


def test_the_readme_sections_come_in_the_users_order():
    headings = re.findall(r"^## (.+)$", README.read_text(), re.M)
    order = ["Set-up", "Run", "Results", "Use your own data", "Slurm", "The library in one example", "Citing"]
    assert [h for h in headings if h in order] == order


def test_the_library_example_is_the_core_of_the_tested_example():
    """Each line of the README's Python block is a line of examples/dp_training_loop.py,
    which tests/test_examples.py runs: the README shows no API the code does not use."""
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    assert len(blocks) == 1
    example = {line.strip() for line in (ROOT / "examples" / "dp_training_loop.py").read_text().splitlines()}
    shown = [line.strip() for line in blocks[0].splitlines() if line.strip()]
    assert len(shown) >= 10
    assert [line for line in shown if line not in example] == []


def test_the_site_profile_keeps_the_slurm_profiles_resources(tmp_path):
    """`--profile profiles/slurm --profile profiles/slurm_site`: the partition and account are
    added, the default and per-rule resources of profiles/slurm kept."""
    done = run_snakemake(
        tmp_path,
        "-n",
        "--profile",
        str(ROOT / "profiles/slurm"),
        "--profile",
        str(ROOT / "profiles/slurm_site"),
        "results/data/laion/index.json",
        timeout=300,
    )
    assert done.returncode == 0, done.output
    resources = dict(
        item.split("=", 1)
        for rule, line in re.findall(r"^rule (\w+):.*?\n\s+resources: ([^\n]+)", done.output, re.M | re.S)
        if rule == "laion_index"
        for item in line.split(", ")
    )
    assert resources["slurm_partition"] == "gpu" and resources["slurm_account"] == "myproj"
    assert (resources["runtime"], resources["mem_mb"], resources["cpus_per_task"]) == ("60", "8000", "2")


def test_the_own_data_overlay_shown_is_the_example_file_and_validates():
    """The README's YAML block is examples/own_data.yaml, which the schema takes over the
    embedded default."""
    import yaml
    from snakemake.utils import update_config

    from dpvip.config import validate_config

    blocks = re.findall(r"^```yaml\n(.*?)^```", README.read_text(), re.S | re.M)
    example = yaml.safe_load((ROOT / "examples" / "own_data.yaml").read_text())
    assert len(blocks) == 1 and yaml.safe_load(blocks[0]) == example
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    update_config(config, example)
    validate_config(config)
