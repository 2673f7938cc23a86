"""A workflow job's log and its fast exit: output kept, status right, exceptions still fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dpvip.logs import PEAK_RSS_PREFIX, STARTUP_PREFIX
from dpvip.report.jobs.smoke import exact_peak_mb

WORKFLOW_SCRIPTS = Path(__file__).resolve().parents[1] / "workflow_scripts"


def run_job(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(
        "import atexit, sys\n"
        "from dpvip.logs import workflow_job\n"
        f"atexit.register(lambda: open({str(tmp_path / 'teardown')!r}, 'w').write('ran'))\n"
        f"with workflow_job({str(tmp_path / 'job.log')!r}):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    )
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True)


def test_a_finished_job_keeps_its_output_and_skips_teardown(tmp_path):
    out = tmp_path / "result.txt"
    done = run_job(
        tmp_path,
        f"print('progress line')\nimport logging; logging.info('a logged line')\nopen({str(out)!r}, 'w').write('42')",
    )
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "job.log").read_text().splitlines()
    assert log[0].startswith(STARTUP_PREFIX)
    assert "progress line" in log and any(line.endswith("a logged line") for line in log)
    assert out.read_text() == "42"
    assert not (tmp_path / "teardown").exists()  # atexit handlers, like the rest of teardown, are skipped


def test_a_finished_job_leaves_no_temporary_directory_behind(tmp_path):
    # as wandb does at import (timm imports it): one made at module level, one by a class
    made = tmp_path / "made.txt"
    done = run_job(
        tmp_path,
        "import tempfile\n"
        f"module_level = tempfile.TemporaryDirectory('dpvip-test', dir={str(tmp_path)!r})\n"
        f"class Holder: kept = tempfile.TemporaryDirectory('dpvip-test', dir={str(tmp_path)!r})\n"
        f"open({str(made)!r}, 'w').write(module_level.name + ' ' + Holder.kept.name)",
    )
    assert done.returncode == 0, done.stderr
    folders = made.read_text().split()
    assert len(folders) == 2 and not any(Path(folder).exists() for folder in folders), folders
    assert not (tmp_path / "teardown").exists()  # removed without the rest of teardown


def test_a_finished_job_ends_its_log_with_its_exact_peak_rss(tmp_path):
    """The high-water mark, not a sample: 400 MB held for an instant (and freed) still counts;
    and the job's own, not its parent's."""
    peaks = []
    for megabytes in (0, 400):
        done = run_job(tmp_path, f"block = bytearray({megabytes} * 2**20); del block")
        assert done.returncode == 0, done.stderr
        log = tmp_path / "job.log"
        assert log.read_text().splitlines()[-1].startswith(PEAK_RSS_PREFIX)
        peaks.append(exact_peak_mb(log))
    # MB as Snakemake's max_rss counts them (2^20 bytes). The interpreter alone is well under
    # 300, however large the parent that started it (getrusage would report pytest's RSS here)
    assert peaks[1] >= 400 and peaks[0] < 300, peaks


def test_a_failing_job_fails_with_its_traceback_logged(tmp_path):
    done = run_job(tmp_path, "raise ValueError('config key x is wrong')")
    assert done.returncode == 1
    log = (tmp_path / "job.log").read_text()
    assert "job failed" in log and "ValueError: config key x is wrong" in log
    assert (tmp_path / "teardown").read_text() == "ran"  # a failure exits the usual way


def test_a_bad_input_fails_the_job_in_one_line_without_a_traceback(tmp_path):
    """A corrupt shard (any DpvipInputError): status 2, one line on stderr (which Snakemake
    shows) and in the log naming the file and the whole reason."""
    shard = tmp_path / "00000.tar"
    shard.write_bytes(b"not a tar archive" * 100)
    done = run_job(tmp_path, f"from dpvip.data.shard_reader import member_table\nmember_table({str(shard)!r})")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: shard {shard} cannot be read as a tar file: file could not be opened successfully: "
        "- method gz: ReadError('not a gzip file'); - method bz2: ReadError('not a bzip2 file'); "
        "- method xz: ReadError('not an lzma file'); - method tar: ReadError('invalid header')"
    ]
    log = (tmp_path / "job.log").read_text()
    assert "Traceback" not in log and f"job failed: shard {shard} cannot be read" in log


def test_a_bad_input_whose_message_spans_lines_is_still_one_line(tmp_path):
    """image_shards' corrupt shard gave tarfile's whole multi-line reason: one line whatever raises."""
    done = run_job(
        tmp_path,
        "from dpvip.errors import DpvipInputError\n"
        "raise DpvipInputError('shard x.tar cannot be read: opened:\\n- method gz: bad\\n- method tar: bad\\nend')",
    )
    assert done.returncode == 2
    one = "shard x.tar cannot be read: opened: - method gz: bad; - method tar: bad; end"
    assert done.stderr.strip().splitlines() == [f"error: {one}"]
    assert f"job failed: {one}\n" in (tmp_path / "job.log").read_text()


def test_a_stopped_job_keeps_its_exit_status(tmp_path):
    done = run_job(tmp_path, "raise SystemExit('stopped by SIGTERM at step 3 of 8')")
    assert done.returncode == 1
    assert "stopped by SIGTERM at step 3 of 8" in done.stderr


def test_every_workflow_script_runs_as_a_workflow_job():
    scripts = sorted(WORKFLOW_SCRIPTS.glob("*.py"))
    assert len(scripts) > 30
    for script in scripts:
        assert "\nwith workflow_job(snakemake.log[0]):\n" in script.read_text(), script.name


def test_a_job_of_another_checkouts_snakefile_stops_naming_both_copies(tmp_path, monkeypatch):
    import dpvip

    imported = Path(dpvip.__file__).resolve().parent
    monkeypatch.setenv("DPVIP_SRC", str(tmp_path / "other" / "src"))
    done = run_job(tmp_path, "print('job body ran')")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: this job imported dpvip from {imported}, but its Snakefile comes with "
        f"{tmp_path / 'other' / 'src' / 'dpvip'}: put {tmp_path / 'other' / 'src'} first on PYTHONPATH, "
        "or run the Snakefile of the copy you mean"
    )
    assert "job body ran" not in (tmp_path / "job.log").read_text()
    monkeypatch.setenv("DPVIP_SRC", str(imported.parent))
    assert run_job(tmp_path, "print('job body ran')").returncode == 0
