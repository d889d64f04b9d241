"""Checkpoints: written atomically, checked on load against the environment they are used with."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import torch

from envs.core import GroupSpec

FORMAT = "groupenvs-poca/1"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read, or does not fit the environment."""


def spec_dict(spec: GroupSpec) -> dict:
    return dataclasses.asdict(spec)


def _interface(spec: dict) -> dict:
    """What the networks' shapes depend on. A shared policy runs on any number of agents."""
    return {k: spec[k] for k in ("obs", "continuous_size", "discrete_branches")}


def save(path: Path, state: dict) -> None:
    """Write to a temporary file in the same folder, then rename: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        torch.save({"format": FORMAT, **state}, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path: Path, spec: GroupSpec | None = None) -> dict:
    """Read a checkpoint; with `spec`, fail unless its observations and actions match."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch raises many kinds for truncated or foreign files
        raise CheckpointError(f"{path} is not a readable checkpoint ({err})") from err
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a {FORMAT} checkpoint")
    if spec is not None and _interface(state["spec"]) != _interface(spec_dict(spec)):
        raise CheckpointError(
            f"{path} was trained on a different environment: its observations and actions are "
            f"{_interface(state['spec'])}, this environment's are {_interface(spec_dict(spec))}")
    return state
