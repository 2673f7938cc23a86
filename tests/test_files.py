"""Shared file helpers: content hashes and Snakemake benchmark records."""

import hashlib

from dpvip.files import read_benchmark, sha256


def test_sha256_hashes_the_bytes_across_read_blocks(tmp_path):
    path = tmp_path / "blob"
    data = bytes(range(256)) * 5000  # more than one 1 MiB block
    path.write_bytes(data)
    assert sha256(path) == hashlib.sha256(data).hexdigest()


def test_read_benchmark_takes_the_last_run_and_reads_missing_memory_as_none(tmp_path):
    header = "s\th:m:s\tmax_rss\tmax_vms\n"
    path = tmp_path / "job.tsv"
    path.write_text(header + "1.5\t0:00:01\t100.0\t200\n2.25\t0:00:02\tNA\tNA\n")
    assert read_benchmark(path) == {"seconds": 2.25, "max_rss_mb": None}
    path.write_text(header + "3.0\t0:00:03\t42.5\t80\n")
    assert read_benchmark(path) == {"seconds": 3.0, "max_rss_mb": 42.5}
    path.write_text(header)
    assert read_benchmark(path) is None
