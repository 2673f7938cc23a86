"""Downstream evaluations of MAE encoders (ViP section 4 and appendix B).

- Data: `datasets` (labelled images: scikit-learn digits as the embedded stand-in, ImageFolder
  trees read on demand, webdataset shards with class labels), `kshot` (class-balanced K-shot
  subsets), `coco_standin` (a generated COCO-format instance set).
- Classification: `features` (frozen-encoder features as a recorded choice), `linear_probe`
  (BatchNorm + linear head with LARS), `finetune` (few-shot fine-tuning with AdamW),
  `cnn_baselines` (AlexNet and ResNet-50 with SGD), `dp_finetune` (DP-AdamW end to end).
- Dense tasks: `vitdet` and `detection` (ViTDet with Mask R-CNN heads, COCO AP),
  `detectron2_convert` and `detectron2_run` (detectron2's own ViTDet at paper scale),
  `upernet` and `segmentation` (UPerNet, ADE20K mIoU); `dense_training` (what both share to
  resume bit for bit and to run as several processes under DDP).
- Workflow: `jobs` (one job's result file, in one process or as a rank of several),
  `resumable` (epoch loops resumed mid-epoch, on `dpvip.train.resume`'s job and loop states).
"""
