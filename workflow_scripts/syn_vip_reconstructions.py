"""Reconstructions of held-out synthetic images (indices beyond the training set) by one run."""

import numpy as np

from dpvip.logs import workflow_job
from dpvip.models.checkpoint import load_mae
from dpvip.models.reconstruction import evaluation_inputs, reconstruct
from dpvip.synthetic.spec import DatasetSpec

with workflow_job(snakemake.log[0]):
    model, record = load_mae(snakemake.input[0])
    spec = DatasetSpec.from_config(snakemake.params.dataset, snakemake.params.spec)
    # The dataset's images are 0 .. images-1; the same generator continues past them.
    held_out = [image for _, image in spec.generator().images(spec.images, spec.images + snakemake.params.images)]
    panel = reconstruct(model, evaluation_inputs(held_out, model.settings.image_size))
    np.savez_compressed(snakemake.output[0], **panel, first_index=spec.images)
    print(f"{len(held_out)} held-out images from index {spec.images}; mean loss {panel['loss'].mean():.4f}")
