"""Training data: random access into webdataset shards, augmentation seeded per sample, and
the order in which samples are drawn (`sampling`), so that a run can stop and resume at any
step and any number of ranks sees the same global batches."""
