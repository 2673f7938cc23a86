"""One split of the generated COCO-format stand-in (shapes with instance masks on textures)."""

from pathlib import Path

from dpvip.evaluate.coco_standin import CocoStandIn, write_split
from dpvip.logs import workflow_job

with workflow_job(snakemake.log[0]):
    split, shapes = snakemake.wildcards.split, snakemake.params.shapes
    images = shapes["train_images"] if split == "train" else shapes["val_images"]
    spec = CocoStandIn(
        images=images, image_size=snakemake.params.image_size, max_objects=shapes["max_objects"], seed=shapes["seed"]
    )
    write_split(spec, split, Path(snakemake.output[0]).parent)
