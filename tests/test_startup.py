"""Start-up: what `poca` commands import, and the trainer's own Adam."""

import copy
import subprocess
import sys

import pytest
import torch

from poca.adam import Adam


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def test_adam_matches_torch_adam_and_shares_its_state_dict():
    ours_net, torch_net = _net(), _net()
    ours = Adam(ours_net.parameters(), lr=3e-3)
    ref = torch.optim.Adam(torch_net.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    for _ in range(50):
        x = torch.randn(32, 5, generator=generator)
        for net, opt in ((ours_net, ours), (torch_net, ref)):
            opt.zero_grad(set_to_none=True)
            (net(x) ** 2).mean().backward()
            opt.step()
    for p, q in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    # checkpoints written by either load into the other
    other = Adam(copy.deepcopy(torch_net).parameters(), lr=1.0)
    other.load_state_dict(ref.state_dict())
    assert other.steps == 50 and other.param_groups[0]["lr"] == 3e-3
    torch.testing.assert_close(other.exp_avg_sq, ours.exp_avg_sq, rtol=1e-4, atol=1e-10)
    back = torch.optim.Adam(copy.deepcopy(ours_net).parameters(), lr=1.0)
    back.load_state_dict(ours.state_dict())
    assert float(back.state_dict()["state"][0]["step"]) == 50


def test_adam_refuses_a_state_of_another_network():
    opt = Adam(_net().parameters(), lr=1e-3)
    wider = torch.nn.Sequential(torch.nn.Linear(5, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    ref = torch.optim.Adam(wider.parameters(), lr=1e-3)
    (wider(torch.ones(1, 5)) ** 2).sum().backward()
    ref.step()
    with pytest.raises(ValueError, match="has shape"):
        opt.load_state_dict(ref.state_dict())
    with pytest.raises(ValueError, match="parameters per group"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})


def _modules_after(code: str) -> set[str]:
    code += "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return set(out.stdout.split())


def test_help_imports_neither_torch_nor_the_envs():
    mods = _modules_after("import contextlib, io\nfrom poca import cli\n"
                          "with contextlib.suppress(SystemExit), "
                          "contextlib.redirect_stdout(io.StringIO()):\n"
                          "    cli.main(['train', '--help'])")
    assert "torch" not in mods and "envs" not in mods


def test_training_does_not_import_the_compiler_stack(tmp_path):
    mods = _modules_after(
        "from poca.config import POCAConfig\nfrom poca.trainer import train\n"
        "train('Goal-v0', POCAConfig().override({'max_steps': 200, 'num_envs': 4, "
        "'hyperparameters.buffer_size': 64, 'hyperparameters.batch_size': 16}), "
        f"run_dir={str(tmp_path / 'run')!r})")
    assert "torch._dynamo" not in mods


@pytest.mark.parametrize("torch_first", [False, True])
def test_cli_freezes_torch_out_of_the_garbage_collector_only_in_a_fresh_process(
        tmp_path, torch_first):
    """After `import torch` every full collection walks torch's objects: the `poca` command
    freezes them (the collector still runs for what training makes). A caller that imported
    torch first keeps its own garbage collectable: nothing is frozen."""
    out = subprocess.run(
        [sys.executable, "-c",
         ("import torch\n" if torch_first else "") + "import gc\nfrom poca import cli\n"
         f"cli.main(['train', 'Goal-v0', '--max-steps', '64', '--no-progress', "
         f"'--run-dir', {str(tmp_path / 'run')!r}])\n"
         "print(gc.get_freeze_count(), gc.isenabled())"],
        capture_output=True, text=True, check=True)
    frozen, enabled = out.stdout.split()[-2:]
    assert enabled == "True"
    assert int(frozen) == 0 if torch_first else int(frozen) > 50_000
