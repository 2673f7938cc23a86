"""The two kinds of DP transfer job: caching one feature set, and running one study (every
run of one table or figure) on cached features. Shared by the workflow scripts and tests.

A study job appends each finished run to `<out>.partial.jsonl` as it goes, and saves the
run in progress in its private work folder every few steps and on SIGTERM; a rerun after a
crash or a kill skips the runs recorded there and resumes the one interrupted, so nothing
computed is lost or recomputed. Caches are read as memory maps, a micro-batch at a time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

from tqdm import tqdm

from dpvip.files import private_work_dir, sha256, write_json
from dpvip.plan.data_paths import private_data_name
from dpvip.plan.transfer_runs import FeatureSet, Run
from dpvip.privacy.randomness import release_key

log = logging.getLogger(__name__)
TEST_CROP = "center"  # the test split is always centre-cropped (Mehta et al.'s evaluation)
# Steps between saves of a run's state: a head's step is one Poisson batch (ImageNet at
# q = 0.0004: 512 rows), a probe's a pass over the whole train split (ImageNet blocks4: 94 GB).
STATE_EVERY = {"head": 100, "probe": 5}
CACHE_KEY = "features_digest"  # in a finished run's line: the bytes of the cache it ran on


def _device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _load_size(image_size: int, ratio: float) -> int:
    return max(image_size, int(round(image_size * ratio)))


class _CentreCropped:
    """`data` (LabelledImages, or FolderImages read on demand) with its images centre-cropped
    to `size` as a batch is read through `subset`: an ImageNet-sized test split is never
    decoded whole."""

    def __init__(self, data, size: int):
        self.data, self.size = data, size
        self.labels, self.classes, self.name = data.labels, data.classes, data.name

    def __len__(self) -> int:
        return len(self.data)

    def subset(self, indices):
        from dpvip.transfer.features import crop_views

        part = self.data.subset(indices)
        part.images = crop_views(part.images, self.size, TEST_CROP, 0, None, 0)
        return part


def build_feature_cache(
    feature_set: FeatureSet, kind: str, checkpoint: str, dataset_spec: dict, section: dict, out_dir: str | Path
) -> dict:
    """Cache the features of `feature_set` (the `dp_transfer.features` config `section`):
    train split under its crop (one view per epoch for an inception crop), test centre-cropped."""
    from dpvip.evaluate.datasets import labelled_split
    from dpvip.transfer.cache import cache_features
    from dpvip.transfer.features import crop_views, load_extractor

    size, ratios = feature_set.image_size, section["load_ratio"]
    train, _, data = labelled_split(feature_set.dataset, dataset_spec, _load_size(size, ratios[feature_set.crop]))
    _, test, _ = labelled_split(feature_set.dataset, dataset_spec, _load_size(size, ratios[TEST_CROP]))
    test = _CentreCropped(test, size)
    augment = lambda images, view, indices: crop_views(images, size, feature_set.crop, view, indices, 0)  # noqa: E731
    extractor = load_extractor(kind, checkpoint, feature_set.recipe, size, _device())
    fingerprint = {
        "features": feature_set.path,
        "kind": kind,
        "checkpoint_sha256": sha256(checkpoint),
        "dataset": dataset_spec,
        "load_ratio": ratios,
        "dtype": section["dtype"],
        "shard_size": section["shard_size"],
    }
    meta = cache_features(
        extractor,
        train,
        test,
        out_dir,
        fingerprint=fingerprint,
        views=feature_set.views,
        augment=augment,
        batch_size=section["batch_size"],
        shard_size=section["shard_size"],
        dtype=section["dtype"],
    )
    return meta | {"data": data}


def _randomness(run: Run, work_dir: Path, fingerprint: dict):
    """The run's own stream from the study's key (or, seeded, from the run's seed), keyed by
    `fingerprint`: the run, its feature cache's digest and n, so a run on changed features
    never repeats the noise of the first."""
    from dpvip.privacy.randomness import RunRandomness

    settings = run.settings
    return RunRandomness.for_run(settings["randomness"], work_dir, settings["seed"], fingerprint)


def held_out(views, labels, validation: dict) -> tuple[list, object, tuple]:
    """(train views, train labels, (validation rows, labels)) of a run whose settings hold
    `validation` ({fraction, seed, stratified}: `dpvip.selection`): the cut is made once,
    the same for every view; the held-out examples are scored on the first view (the only
    one of a centre-cropped cache; an inception crop's first epoch otherwise)."""
    import torch

    from dpvip.selection import validation_split
    from dpvip.transfer.rows import SubsetRows, as_views

    views = as_views(views)
    kept, held = validation_split(
        labels.numpy(), validation["fraction"], validation["seed"], validation.get("stratified", False)
    )
    train = [SubsetRows(view, kept) for view in views]
    return train, labels[torch.from_numpy(kept)], (SubsetRows(views[0], held), labels[torch.from_numpy(held)])


def _train(run: Run, cached, randomness, state, progress: bool) -> dict:
    """One run on its memory-mapped cache (`dpvip.transfer.cache.open_cache`). A head whose
    settings hold `validation` trains on the cache's train split less a held-out share, and
    is scored on that share as well as on test."""
    spec = cached.meta.get("fingerprint", {}).get("dataset")
    data = private_data_name(spec) if spec else None
    if run.kind == "head":
        from dpvip.transfer.head import HeadSettings, train_head

        settings = dict(run.settings)
        validation = settings.pop("validation", None)
        train, labels, held = cached.train, cached.train_labels, None
        if validation:
            train, labels, held = held_out(train, labels, validation)
        return train_head(
            train,
            labels,
            cached.test,
            cached.test_labels,
            cached.classes,
            HeadSettings(**settings),
            _device(),
            randomness,
            state,
            progress,
            held,
            cached.meta.get("test_set", "test"),
            data,
        )
    from dpvip.transfer.private_probe import PrivateProbeSettings, train_probe

    return train_probe(
        cached.train[0],
        cached.train_labels,
        cached.test,
        cached.test_labels,
        cached.classes,
        PrivateProbeSettings(**run.settings),
        randomness,
        _device(),
        state,
        progress,
        cached.meta.get("test_set", "test"),
        data,
    )


def _finished(partial: Path, digests: dict[str, str]) -> dict[str, dict]:
    """Runs a previous attempt recorded on the caches as they are now (a line cut short by a
    kill, or a run on a cache since rebuilt, is dropped)."""
    done = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.pop(CACHE_KEY, None) == digests.get(record["features"]):
                done[record["key"]] = record
    return done


def _summary(folder: Path) -> dict:
    """What a study result records of a cache it read (not its file list)."""
    meta = json.loads((folder / "meta.json").read_text())
    return {key: value for key, value in meta.items() if key != "files"}


def state_path(work: Path, run: Run) -> Path:
    """Where a run of a study keeps its resumable state: named by its key's hash."""
    return work / f"{run.kind}_{hashlib.sha256(run.key.encode()).hexdigest()[:16]}.pt"


def study_runs(config: dict, study: str, digest: str) -> list[Run]:
    """`study`'s runs, rebuilt from the workflow's `config` as the plan built them; refused
    if they are not the ones the job was planned with (`digest`, TransferPlan.runs_digest)."""
    from dpvip.errors import DpvipInputError
    from dpvip.plan.transfer import TransferPlan

    plan = TransferPlan(config["dp_transfer"], config["privacy"])
    if plan.runs_digest(study) != digest:
        raise DpvipInputError(f"study {study}: the runs rebuilt from the config are not those its job was planned with")
    return plan.runs(study)


def run_study(
    study: str,
    runs: list[Run],
    caches: dict[str, str | Path],
    out: str | Path,
    progress: bool = True,
    selection: dict | None = None,
) -> dict:
    """Every run of `study` on its cached features (`caches`: feature-set path -> folder),
    each read as memory maps a micro-batch at a time. A run's state is saved in the job's
    private work folder every few steps and on SIGTERM (then the job stops); a rerun skips
    the runs finished and resumes the one interrupted. `selection`: how the study's cells
    choose their learning rate and what the privacy guarantee then covers
    (`TransferPlan.selection_record`), recorded in the result."""
    from dpvip.transfer.cache import cache_digest, cache_meta, open_cache
    from dpvip.train.resume import LoopState

    out = Path(out)
    partial = out.with_name(out.name + ".partial.jsonl")
    work = private_work_dir(out)
    digests = {path: cache_digest(cache_meta(folder)) for path, folder in caches.items()}
    done = _finished(partial, digests)
    if done:
        log.info("%s: resuming, %d of %d runs already done", study, sum(r.key in done for r in runs), len(runs))
    started = time.perf_counter()
    opened: dict[str, object] = {}
    records = []
    with partial.open("a") as sink:
        for run in tqdm(runs, desc=study, disable=not progress):
            if run.key not in done:
                path = run.features.path
                if path not in opened:
                    opened[path] = open_cache(caches[path])  # checks every file's hash, once per job
                fingerprint = {
                    "run": run.record(),
                    "features": digests[path],
                    "examples": len(opened[path].train_labels),
                }
                randomness = _randomness(run, work, fingerprint)
                # the state belongs to the run's key: one left by a deleted key is refused
                fingerprint |= {"key": randomness.identity()}
                with LoopState(state_path(work, run), fingerprint, STATE_EVERY[run.kind]) as state:
                    result = _train(run, opened[path], randomness, state, progress)
                    done[run.key] = run.record() | {"result": result}
                    sink.write(json.dumps(done[run.key] | {CACHE_KEY: digests[path]}) + "\n")
                    sink.flush()
                    state.clear()
                    if state.stop_requested():  # SIGTERM came after the last step: the run is recorded, stop now
                        raise SystemExit(f"{study}: stopped by SIGTERM after the run {run.key}")
            records.append(done[run.key])
    features = {path: _summary(Path(folder)) for path, folder in caches.items()}
    result = {"study": study, "runs": records, "features": features, "seconds": round(time.perf_counter() - started, 1)}
    if selection is not None:
        result["selection"] = selection
    write_json(result, out)
    partial.unlink()
    release_key(work)  # every run is done: a rerun of the study starts over with a new key
    return result
