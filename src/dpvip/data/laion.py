"""LAION ingestion: download a URL list with img2dataset into webdataset shards, then index them.

The URL list is a parquet, csv, tsv, txt or json file, or a folder of such files (LAION-400M
ships as 32 parquet files with columns URL and TEXT). img2dataset writes `<out>/shards/`
(`00000.tar`, its `00000_stats.json` and `00000.parquet`); the index (`dpvip.data.shard_index`)
goes to `<out>/index.json` with the download's successes and failures. A rerun resumes:
img2dataset skips shards whose stats exist.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from dpvip.data.shard_index import index_shards
from dpvip.errors import DpvipInputError, first_line

# albumentations (imported by img2dataset) otherwise asks the network for a newer version.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

INPUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".txt": "txt", ".json": "json"}
RESIZE_MODES = ("no", "border", "keep_ratio", "keep_ratio_largest", "center_crop")
SHARDS_FOLDER = "shards"


@dataclass(frozen=True)
class IngestSettings:
    """img2dataset's options that matter here: its defaults, except fewer threads and
    `keep_ratio` (the shorter side to image_size) so random-resized crops meet no borders."""

    image_size: int = 256
    resize_mode: str = "keep_ratio"
    processes: int = 1
    threads: int = 8
    shard_size: int = 10000
    timeout: int = 10
    retries: int = 0
    url_column: str = "url"
    caption_column: str | None = "caption"  # used when the list has it

    def check(self) -> None:
        if self.resize_mode not in RESIZE_MODES:
            raise DpvipInputError(f"resize mode '{self.resize_mode}' is not one of {', '.join(RESIZE_MODES)}")
        for key in ("image_size", "processes", "threads", "shard_size", "timeout"):
            if getattr(self, key) < 1:
                raise DpvipInputError(f"{key} must be a positive integer (got {getattr(self, key)})")
        if self.retries < 0:
            raise DpvipInputError(f"retries must be a non-negative integer (got {self.retries})")


def _list_files(url_list: Path) -> tuple[list[Path], str]:
    """The files of a URL list (a file, or a folder of files of one format) and that format."""
    if url_list.is_dir():
        for suffix, input_format in INPUT_FORMATS.items():
            files = sorted(url_list.glob(f"*{suffix}"))
            if files:
                return files, input_format
        raise DpvipInputError(f"URL list folder {url_list} holds no {', '.join(INPUT_FORMATS)} files")
    if not url_list.is_file():
        raise DpvipInputError(f"URL list {url_list} does not exist")
    if url_list.suffix not in INPUT_FORMATS:
        raise DpvipInputError(f"URL list {url_list} is not one of {', '.join(INPUT_FORMATS)}")
    return [url_list], INPUT_FORMATS[url_list.suffix]


def _columns(path: Path, input_format: str) -> list[str]:
    """Column names of one URL list file, read without loading the rows."""
    try:
        if input_format == "parquet":
            import pyarrow.parquet

            return list(pyarrow.parquet.read_schema(path).names)
        if input_format in ("csv", "tsv"):
            import csv

            with path.open(newline="") as handle:
                return next(csv.reader(handle, delimiter="," if input_format == "csv" else "\t"), [])
        import pandas

        return list(pandas.read_json(path).columns)
    except Exception as err:  # pyarrow, csv and pandas each raise their own errors
        raise DpvipInputError(f"URL list {path} cannot be read as {input_format}: {first_line(err)}") from None


def check_url_list(url_list: str | Path, settings: IngestSettings) -> tuple[str, str | None]:
    """(img2dataset input format, caption column or None); refuses a list without URLs."""
    files, input_format = _list_files(Path(url_list))
    if input_format == "txt":  # one URL a line, no captions
        return input_format, None
    captions = settings.caption_column
    for path in files:
        columns = _columns(path, input_format)
        if settings.url_column not in columns:
            raise DpvipInputError(
                f"URL list {path} has no column '{settings.url_column}' (columns: {', '.join(columns)})"
            )
        if captions not in columns:
            captions = None
    return input_format, captions


# img2dataset's worker pool uses the spawn start method, which re-imports the caller's
# __main__ in every worker: a Snakemake script would run again. `python -c` has no main
# module to re-import, and its own process also keeps img2dataset's SIGINT handler.
_RUN_IMG2DATASET = "import json, sys, img2dataset; img2dataset.download(**json.loads(sys.argv[1]))"


def download(url_list: str | Path, shards_folder: str | Path, settings: IngestSettings) -> None:
    """Run img2dataset on `url_list` into `shards_folder`, its output passed to our stdout."""
    if importlib.util.find_spec("img2dataset") is None:
        raise DpvipInputError("img2dataset is not installed (pip install img2dataset --no-deps, then dpvip[ingest])")
    input_format, caption_column = check_url_list(url_list, settings)
    options = {
        "url_list": str(url_list),
        "output_folder": str(shards_folder),
        "input_format": input_format,
        "url_col": settings.url_column,
        "caption_col": caption_column,
        "output_format": "webdataset",
        "image_size": settings.image_size,
        "resize_mode": settings.resize_mode,
        "processes_count": settings.processes,
        "thread_count": settings.threads,
        "number_sample_per_shard": settings.shard_size,
        "timeout": settings.timeout,
        "retries": settings.retries,
        "enable_wandb": False,
    }
    Path(shards_folder).parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-c", _RUN_IMG2DATASET, json.dumps(options)]
    # Its workers leave two wandb folders each in the temporary directory (wandb off or not):
    # they get one of their own, removed afterwards.
    with tempfile.TemporaryDirectory(prefix=".img2dataset-", dir=Path(shards_folder).parent) as scratch:
        env = os.environ | {"NO_ALBUMENTATIONS_UPDATE": "1", "TMPDIR": scratch}
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as process:
            for line in process.stdout:  # relayed, so a job's log (sys.stdout redirected) holds it
                print(line, end="", flush=True)
    if process.returncode != 0:
        raise RuntimeError(f"img2dataset failed with exit status {process.returncode} (its output is above)")


def ingest(
    url_list: str | Path,
    out: str | Path,
    settings: IngestSettings = IngestSettings(),
    checksums: bool = True,
    progress: bool = True,
) -> dict:
    """Download `url_list` into `out/shards/` and write `out/index.json`; returns the index
    (its `failures` say how many URLs failed and why)."""
    settings.check()
    out = Path(out)
    shards_folder = out / SHARDS_FOLDER
    download(url_list, shards_folder, settings)
    shards = sorted(shards_folder.glob("*.tar"))
    if not shards:
        raise DpvipInputError(f"img2dataset wrote no shards to {shards_folder} (is the URL list {url_list} empty?)")
    return index_shards(
        shards,
        out / "index.json",
        dataset="laion",
        source="img2dataset",
        location=str(url_list),
        checksums=checksums,
        extra={"img2dataset": asdict(settings)},
        progress=progress,
    )
