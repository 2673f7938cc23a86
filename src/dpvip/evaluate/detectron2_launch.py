"""detectron2's tools/lazyconfig_train_net.py with dpvip's datasets registered under their own
names. It runs in detectron2's Python (envs/detectron2.yaml), not in dpvip's: it imports only
the standard library and detectron2, and nothing in dpvip imports it.

`dpvip.evaluate.detectron2_run` starts it as `python detectron2_launch.py <lazyconfig_train_net
arguments>` with two environment variables: DPVIP_DETECTRON2_DATASETS, {name: {json,
image_root}} of the COCO-format sets, and DPVIP_DETECTRON2_TRAIN_SCRIPT, detectron2's
lazyconfig_train_net.py. Registering under our own names (not detectron2's builtin
coco_2017_*) lets any COCO-format set in any layout train, the stand-in included, without
clashing with the builtin COCO metadata (its 80 class names).

Both happen at import, not under `__main__`: with several GPUs detectron2's `launch` spawns
workers, which re-import this file and unpickle the train script's `main` by its module name.
"""

import importlib.util
import json
import os
import sys

DATASETS_VARIABLE = "DPVIP_DETECTRON2_DATASETS"
TRAIN_SCRIPT_VARIABLE = "DPVIP_DETECTRON2_TRAIN_SCRIPT"
TRAIN_MODULE = "lazyconfig_train_net"


def register_datasets(datasets: dict) -> None:
    from detectron2.data import DatasetCatalog
    from detectron2.data.datasets import register_coco_instances

    for name, files in datasets.items():
        if name not in DatasetCatalog.list():
            register_coco_instances(name, {}, files["json"], files["image_root"])


def load_train_script(path: str):
    spec = importlib.util.spec_from_file_location(TRAIN_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[TRAIN_MODULE] = module  # where a spawned worker finds `main`
    spec.loader.exec_module(module)
    return module


register_datasets(json.loads(os.environ[DATASETS_VARIABLE]))
TRAIN = load_train_script(os.environ[TRAIN_SCRIPT_VARIABLE])

if __name__ == "__main__":  # lazyconfig_train_net.py's own __main__ block
    from detectron2.engine import default_argument_parser, launch

    args = default_argument_parser().parse_args()
    launch(
        TRAIN.main,
        args.num_gpus,
        num_machines=args.num_machines,
        machine_rank=args.machine_rank,
        dist_url=args.dist_url,
        args=(args,),
    )
