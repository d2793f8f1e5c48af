"""End to end: a plain PyTorch-style script learns the digits, checkpoints resume, and the
demo (the README's main job) runs."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor import nn
from gputensor.datasets import digits_dataset
from gputensor.utils.data import DataLoader


def mlp_script(device: str, epochs: int = 8) -> tuple[nn.Module, float]:
    """What a user writes with `import torch` — here with gputensor."""
    torch = gt
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(digits_dataset("train"), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    test = digits_dataset("test")
    with torch.no_grad():
        x, y = test.tensors
        accuracy = (model(x.to(device)).argmax(1) == y.to(device)).float().mean().item()
    return model, accuracy


def test_pytorch_style_script_learns_digits(device: str) -> None:
    _, accuracy = mlp_script(device)
    assert accuracy >= 0.93


def test_checkpoint_resume_continues_identically(tmp_path, device: str) -> None:
    def make():
        gt.manual_seed(1)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).to(device)
        return model, gt.optim.AdamW(model.parameters(), lr=1e-2)

    data = gt.randn(16, 4, generator=gt.Generator().manual_seed(2)).to(device)

    def step(model, opt):
        opt.zero_grad()
        loss = model(data).pow(2).mean()
        loss.backward()
        opt.step()

    model, opt = make()
    for _ in range(3):
        step(model, opt)
    path = tmp_path / "ckpt.pt"
    gt.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
    for _ in range(3):
        step(model, opt)
    expected = [p.detach().cpu().numpy().copy() for p in model.parameters()]

    model2, opt2 = make()
    state = gt.load(path, map_location=device)
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["opt"])
    for _ in range(3):
        step(model2, opt2)
    for p, e in zip(model2.parameters(), expected, strict=True):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), e)


def test_demo_trains_and_resumes(tmp_path, capsys) -> None:
    from gputensor import demo
    ckpt = str(tmp_path / "demo.pt")
    result = demo.run(demo.parse_args(["--epochs", "2", "--checkpoint", ckpt, "--quiet"]))
    assert result["epochs"] == 2 and result["accuracy"] > 0.5
    again = demo.run(demo.parse_args(["--epochs", "1", "--checkpoint", ckpt, "--quiet",
                                      "--resume"]))
    assert again["epochs"] == 3
    out = capsys.readouterr().out
    assert "resumed from" in out and "test accuracy" in out


@pytest.mark.parametrize("argv", [["--epochs", "0"], ["--lr", "-1"]])
def test_demo_rejects_bad_arguments(argv) -> None:
    from gputensor import demo
    with pytest.raises(SystemExit):
        demo.parse_args(argv)


def test_demo_compiled_and_eager_train_identically(tmp_path) -> None:
    from gputensor import demo
    common = ["--epochs", "2", "--checkpoint", "", "--quiet", "--no-profile", "--device", "cpu"]
    compiled = demo.run(demo.parse_args(common))
    eager = demo.run(demo.parse_args([*common, "--no-compile"]))
    assert compiled == eager
