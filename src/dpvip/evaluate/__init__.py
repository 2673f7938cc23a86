"""Downstream evaluations of MAE encoders (ViP section 4 and appendix B).

Modules: `datasets` (labelled images: scikit-learn digits as the embedded stand-in,
ImageFolder trees, webdataset shards with class labels), `features` (frozen-encoder
features: class token or mean pool, last k blocks, final norm or not), `kshot`
(class-balanced K-shot subsets), `linear_probe` (BatchNorm + linear head with LARS),
`finetune` (few-shot fine-tuning of the whole encoder with AdamW and AutoAugment),
`coco_standin` (a generated COCO-format instance set, the embedded stand-in for COCO).
"""
