"""Training loops and what they share: process groups (`distributed`), atomic checkpoints
with RNG states (`checkpoint`), resume-safe JSON-lines metrics (`metrics`), AdamW with
warm-up and cosine decay (`optim`); `mae_pretrain` is non-private MAE pre-training."""
