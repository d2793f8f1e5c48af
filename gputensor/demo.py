"""The main job: train a small CNN on the bundled 8x8 digits.

    python -m gputensor.demo [--device cpu|cuda] [--epochs N] [--resume] [--no-profile]
                             [--no-compile]

It trains on CUDA when ``gt.cuda.is_available()`` (else the CPU), shows a progress bar with
the loss and throughput, prints the test accuracy, and saves a checkpoint (model, optimizer,
epoch) that ``--resume`` continues from. The last epoch runs under ``gt.profiler.profile``
(recording changes no result), and its kernel profile is printed at the end. The model's
forward and backward run compiled (``gt.compile``: captured once per batch shape, then
replayed with fused elementwise kernels; ``--no-compile`` runs them eagerly, with the same
results). Written as a plain PyTorch-style script on purpose.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

import gputensor as gt
from gputensor import nn
from gputensor.datasets import digits_dataset
from gputensor.utils.data import DataLoader

DEFAULT_CHECKPOINT = "digits_cnn.pt"


def build_model() -> nn.Module:
    """Two conv blocks and a small classifier: 8x8 → 4x4 → 2x2 → 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def pick_device(requested: str | None) -> gt.device:
    if requested:
        dev = gt.device(requested)
        if dev.type == "cuda" and not gt.cuda.is_available():
            raise SystemExit(f"--device {requested}: CUDA is not available on this machine")
        return dev
    return gt.device("cuda" if gt.cuda.is_available() else "cpu")


def evaluate(model: nn.Module, loader: DataLoader, device: gt.device) -> tuple[float, float]:
    """Mean loss and accuracy over ``loader``."""
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    with gt.no_grad():
        for images, targets in loader:
            images, targets = images.to(device), targets.to(device)
            logits = model(images)
            loss_sum += nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            correct += (logits.argmax(1) == targets).sum().item()
            seen += targets.shape[0]
    model.train()
    return loss_sum / seen, correct / seen


def train_epoch(model: Any, loader: DataLoader, optimizer: gt.optim.Optimizer,
                device: gt.device, desc: str, quiet: bool) -> float:
    """One pass over ``loader``; returns the mean training loss."""
    total, count = 0.0, 0
    start = time.perf_counter()
    bar = tqdm(loader, desc=desc, unit="batch", leave=True, disable=quiet, dynamic_ncols=True)
    for images, targets in bar:
        images, targets = images.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), targets)
        loss.backward()
        optimizer.step()
        n = targets.shape[0]
        total += loss.item() * n
        count += n
        bar.set_postfix(refresh=False, loss=f"{total / count:.4f}",
                        samples_s=f"{count / (time.perf_counter() - start):,.0f}")
    return total / max(count, 1)


def save_checkpoint(path: str, model: nn.Module, optimizer: gt.optim.Optimizer,
                    epoch: int, args: argparse.Namespace) -> None:
    gt.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
             "seed": args.seed}, path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    gt.manual_seed(args.seed)
    device = pick_device(args.device)
    train_set, test_set = digits_dataset("train"), digits_dataset("test")
    shuffle_gen = gt.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              generator=shuffle_gen)
    test_loader = DataLoader(test_set, batch_size=256)
    model = build_model().to(device)
    optimizer = gt.optim.Adam(model.parameters(), lr=args.lr)
    first_epoch = 0
    if args.resume:
        if not os.path.exists(args.checkpoint):
            raise SystemExit(f"--resume: no checkpoint at {args.checkpoint}")
        state = gt.load(args.checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"]
        shuffle_gen.manual_seed(args.seed + first_epoch)
        print(f"resumed from {args.checkpoint} after epoch {first_epoch}")
    forward = gt.compile(model) if args.compile else model
    n_params = sum(p.numel() for p in model.parameters())
    print(f"training a {n_params:,}-parameter CNN on {len(train_set)} digits on {device} "
          f"({gt.cuda.get_device_name() if device.type == 'cuda' else 'CPU'})")
    last_epoch = first_epoch + args.epochs if args.resume else args.epochs
    train_loss = float("nan")
    start = time.perf_counter()
    prof = None
    for epoch in range(first_epoch, last_epoch):
        profiled = args.profile and epoch == last_epoch - 1
        if profiled:
            prof = gt.profiler.profile(record_shapes=True)
        with prof if profiled else contextlib.nullcontext():
            train_loss = train_epoch(forward, train_loader, optimizer, device,
                                     f"epoch {epoch + 1}/{last_epoch}", args.quiet)
        if args.checkpoint:
            save_checkpoint(args.checkpoint, model, optimizer, epoch + 1, args)
    elapsed = time.perf_counter() - start
    test_loss, accuracy = evaluate(model, test_loader, device)
    print(f"test accuracy {accuracy:.2%} (loss {test_loss:.4f}) on {len(test_set)} held-out "
          f"digits; {last_epoch - first_epoch} epochs in {elapsed:.1f} s")
    if args.checkpoint:
        print(f"checkpoint: {args.checkpoint} (continue with --resume)")
    if prof is not None:
        print(f"\nkernel profile of epoch {last_epoch} on {device} (--no-profile to skip):")
        print(prof.key_averages().table(sort_by="device_time_total", row_limit=args.profile_rows),
              end="")
    return {"accuracy": accuracy, "test_loss": test_loss, "train_loss": train_loss,
            "device": str(device), "epochs": last_epoch}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gputensor demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help=f"where to save (default {DEFAULT_CHECKPOINT}; '' to skip)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                   help="profile the last epoch and print its kernel table (default: on)")
    p.add_argument("--profile-rows", type=int, default=15, help=argparse.SUPPRESS)
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                   help="train through gt.compile (default: on)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.lr <= 0 or args.profile_rows < 1:
        p.error("--epochs, --batch-size and --profile-rows must be >= 1 and --lr > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
