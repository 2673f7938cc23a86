"""dpvip's DP engine in your own training loop: a small classifier trained with DP-SGD.

Run it with `python examples/dp_training_loop.py` (a few seconds on a CPU). The same four
pieces carry every DP run of the workflow: a `PrivacyLedger` calibrates sigma for (epsilon,
delta, q, T) before the first step and refuses a step past T; `RunRandomness` holds the
run's secret key (noise and Poisson batches are drawn from it); `ClippedGradientSum` clips
each example's whole gradient to C; `DPStep` charges the ledger, adds the noise once,
divides by the expected batch q n and steps the optimizer. `tests/test_examples.py` runs it.
"""

import torch
import torch.nn.functional as F
from torch import nn

from dpvip.privacy import ClippedGradientSum, DPStep, PrivacyLedger, RunRandomness


def train(n: int = 2000, steps: int = 60, epsilon: float = 4.0) -> tuple[float, float]:
    """Returns (test accuracy, epsilon spent)."""
    generator = torch.Generator().manual_seed(0)  # the data only; the DP draws come from the key
    x = torch.randn(2 * n, 20, generator=generator)
    y = (x[:, :5].sum(1) > 0).long()
    (x_train, y_train), (x_test, y_test) = (x[:n], y[:n]), (x[n:], y[n:])

    # --- the core: a DP training loop --------------------------------------------------
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2))
    ledger = PrivacyLedger.calibrate(
        "rdp", sample_rate=0.05, steps=steps, target_epsilon=epsilon, delta=1e-5, clip_norm=1.0
    )
    dp_step = DPStep(
        ClippedGradientSum(model, clip_norm=1.0),
        torch.optim.SGD(model.parameters(), lr=2.0, momentum=0.9),
        ledger,
        examples=n,
        randomness=RunRandomness.fresh(),  # a secret key in memory (`secret(work_dir)` keeps it to resume)
    )
    for step in range(steps):
        batch = torch.as_tensor(dp_step.batch(step))  # this step's Poisson batch
        # micro-batches: callables returning one loss per example
        dp_step(step, [lambda: F.cross_entropy(model(x_train[batch]), y_train[batch], reduction="none")])
    spent = dp_step.ledger.epsilon_spent()  # <= epsilon
    # ---------------------------------------------------------------------------------------

    with torch.no_grad():
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    return accuracy, spent


if __name__ == "__main__":
    accuracy, spent = train()
    print(f"test accuracy {accuracy:.3f} at epsilon {spent:.2f} (delta 1e-5)")
