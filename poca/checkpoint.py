"""Checkpoints: written atomically, read without running code, checked before use.

A checkpoint holds only tensors and plain Python values (dicts, lists, tuples, str, int, float,
bool, None), so it is read with `torch.load(weights_only=True)`: a file that holds anything else
(for example a pickled object whose `__reduce__` would run code) is refused unread.
"""

from __future__ import annotations

import dataclasses
import io
import os
import time
import warnings
import zipfile
import zlib
from pathlib import Path

import torch

from envs.core import GroupSpec
from poca import runfolder

FORMAT = "groupenvs-poca/1"
# What every checkpoint holds, and the type of each entry.
FIELDS = {"config": dict, "env_id": str, "env_kwargs": dict, "spec": dict, "actor": dict,
          "critic": dict, "optimizer": dict, "agent_steps": int, "updates": int,
          "episodes": int, "episode_log": list, "team_log": list, "torch_rng": torch.Tensor,
          "generator": torch.Tensor}
SPEC_FIELDS = {"num_agents": int, "obs": (list, tuple), "continuous_size": int,
               "discrete_branches": (list, tuple), "max_steps": int}
OBS_FIELDS = ("name", "kind", "shape", "low", "high")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read, is incomplete, or does not fit the environment."""


def one_line(err: BaseException) -> str:
    """An exception's message on one line (torch's state-dict errors span several)."""
    return " ".join(str(err).split())


def spec_dict(spec: GroupSpec) -> dict:
    return dataclasses.asdict(spec)


def _interface(spec: dict) -> dict:
    """What the networks' shapes depend on. A shared policy runs on any number of agents."""
    return {"obs": [(o["name"], o["kind"], tuple(o["shape"]), o["low"], o["high"])
                    for o in spec["obs"]],
            "continuous_size": spec["continuous_size"],
            "discrete_branches": tuple(spec["discrete_branches"])}


def check_plain(value, where: str) -> None:
    """Fail unless `value` holds only what a checkpoint may hold (see the module docstring)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise TypeError(f"{where} has a key {key!r} of type {type(key).__name__}; "
                                "checkpoints hold only str or int keys")
            check_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
    elif not (value is None or isinstance(value, (str, int, float, bool, torch.Tensor))):
        raise TypeError(f"{where} is a {type(value).__name__}; checkpoints hold only tensors, "
                        "str, int, float, bool, None, lists, tuples and dicts")


def save(path: Path, state: dict) -> None:
    """Write to a temporary file in the same folder, then rename: never a half-written file.
    The file gets the permissions of any file written there (the umask's), as metrics.csv does
    (tempfile.mkstemp's are the owner's alone)."""
    check_plain(state, "the checkpoint")
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{time.monotonic_ns()}.tmp")
    data = io.BytesIO()  # serialised first: torch's own file writer hides a full disk's OSError
    torch.save({"format": FORMAT, **state}, data)
    try:  # written here: a folder that cannot be written or a full disk is an OSError
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data.getbuffer())
        os.replace(tmp, path)
    except OSError as err:
        raise CheckpointError(f"cannot write the checkpoint {path}: {err.strerror or err}"
                              ) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path: Path, spec: GroupSpec | None = None, state: dict | None = None) -> dict:
    """Read and check a checkpoint; with `spec`, fail unless its observations and actions match.

    Every failure (missing, unreadable, foreign, incomplete, another environment) is a
    `CheckpointError` that names the file. `state`: the checkpoint at `path` when it was
    already read (it is then only checked against `spec`, not read again).
    """
    if state is not None:
        if spec is not None:
            check_fits(path, state, spec)
        return state
    path = Path(path)
    if path.is_dir():
        hint = (f"; a run folder's latest is {path / 'checkpoints' / 'latest.pt'}"
                if (path / "checkpoints" / "latest.pt").is_file() else "")
        raise CheckpointError(f"{path} is a directory, not a checkpoint file{hint}")
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    _check_checksums(path)
    try:
        with warnings.catch_warnings():  # a pickle of another protocol is refused below
            warnings.filterwarnings("ignore", "Detected pickle protocol", UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for truncated, foreign or unsafe files
        text = str(err).strip()
        # torch's weights-only unpickler words every refusal the same way; only one naming a
        # global (a class or function to import) means Python objects, anything else means
        # bytes that are not a pickle it understands: damaged, or another kind of file
        if "weights only load failed" in text.lower():
            why = ("it holds Python objects a checkpoint never contains; refused without "
                   "running them" if "global" in text.lower() else "damaged, or not a file "
                   "torch.save wrote")
        else:
            why = text.splitlines()[0] if text else type(err).__name__
        raise CheckpointError(f"{path} is not a readable checkpoint ({why})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a {FORMAT} checkpoint")
    _check_fields(path, state)
    net = state["config"].get("network_settings")
    if isinstance(net, dict):  # saved before normalize_value existed, when critics always
        net.setdefault("normalize_value", False)  # learned in raw units (today's default: true)
    if spec is not None:
        check_fits(path, state, spec)
    return state


def _check_checksums(path: Path) -> None:
    """torch.save writes a zip archive with a CRC per record, which torch.load never checks: a
    file with flipped bytes inside the weights loaded as different weights, without a word."""
    if not zipfile.is_zipfile(path):
        return  # not torch's format: torch.load says what it is
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as err:
        raise CheckpointError(f"{path} is not a readable checkpoint (damaged: {err})") from None
    if damaged is not None:
        raise CheckpointError(f"{path} is damaged: its record {damaged!r} fails its checksum")


def check_fits(path: Path, state: dict, spec: GroupSpec) -> None:
    """Fail unless the checkpoint `state` (read from `path`) has `spec`'s observations and
    actions."""
    if _interface(state["spec"]) != _interface(spec_dict(spec)):
        raise CheckpointError(
            f"{path} was trained on a different environment ({state['env_id']!r} with "
            f"env_kwargs {state['env_kwargs']}): its observations and actions are "
            f"{_interface(state['spec'])}, this environment's are {_interface(spec_dict(spec))}")


def _check_fields(path: Path, state: dict) -> None:
    def fail(what: str):
        raise CheckpointError(f"{path} is not a complete {FORMAT} checkpoint: {what}")

    for fields, where in ((FIELDS, state), (SPEC_FIELDS, state.get("spec"))):
        for key, typ in fields.items():
            prefix = "" if fields is FIELDS else "spec."
            if key not in where:
                fail(f"'{prefix}{key}' is missing")
            if not isinstance(where[key], typ) or isinstance(where[key], bool):
                fail(f"'{prefix}{key}' is a {type(where[key]).__name__}")
    for i, obs in enumerate(state["spec"]["obs"]):
        if not isinstance(obs, dict) or any(k not in obs for k in OBS_FIELDS):
            fail(f"'spec.obs[{i}]' needs the fields {list(OBS_FIELDS)}")
    names = state.get("slot_names")  # optional (older checkpoints have none)
    if names is not None and not (isinstance(names, list)
                                  and all(isinstance(n, str) for n in names)):
        fail("'slot_names' must be a list of str")
    if not isinstance(state.get("max_agents"), (int, type(None))) or isinstance(
            state.get("max_agents"), bool):  # optional (older checkpoints have none)
        fail(f"'max_agents' is a {type(state['max_agents']).__name__}")
    for name in ("actor", "critic"):
        if not all(isinstance(v, torch.Tensor) for v in state[name].values()):
            fail(f"'{name}' must map parameter names to tensors")
        for key, tensor in state[name].items():
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                raise CheckpointError(f"{path} holds NaN/inf in '{name}.{key}': its network "
                                      "cannot act; use an earlier checkpoint")
    if state["agent_steps"] < 0:
        fail(f"'agent_steps' is {state['agent_steps']}")


# --- a trainer's checkpoints ---------------------------------------------------------------------
def trainer_state(trainer) -> dict:
    """Everything `restore` needs to continue `trainer` (a `poca.trainer.Trainer`): only tensors
    and plain values."""
    return {"config": trainer.config.to_dict(), "env_id": trainer.env_id,
            "env_kwargs": trainer.env_kwargs, "max_agents": trainer.max_agents,
            "spec": spec_dict(trainer.spec), "slot_names": _slot_names(trainer.env),
            "actor": trainer.actor.state_dict(), "critic": trainer.critic.state_dict(),
            "optimizer": trainer.optimizer.state_dict(), "agent_steps": int(trainer.agent_steps),
            "updates": int(trainer.updates), "episodes": int(trainer.episodes),
            "episode_log": list(trainer.episode_log), "team_log": list(trainer.team_log),
            "torch_rng": torch.get_rng_state(), "generator": trainer.generator.get_state()}


def save_trainer(trainer, state: dict | None = None) -> Path:
    """Write `state` (default: the trainer's current one) as step-N.pt and latest.pt in the
    trainer's run folder, keeping the newest `keep_checkpoints` step files."""
    if trainer.run_dir is None:
        raise ValueError("this trainer has no run_dir to save checkpoints in")
    state = trainer_state(trainer) if state is None else state
    folder = trainer.run_dir / "checkpoints"
    path = folder / f"step-{state['agent_steps']:09d}.pt"
    save(path, state)
    save(folder / "latest.pt", state)
    keep = trainer.config.keep_checkpoints  # 0: all, as in ML-Agents
    for old in runfolder.step_checkpoints(folder)[:-keep] if keep else []:
        old.unlink()
    trainer.last_checkpoint, trainer._saved_at = path, state["agent_steps"]
    trainer._config_unsaved = False
    return path


def _slot_names(env) -> list[str] | None:
    """The agent of each slot, for envs whose slots are fixed names (PettingZoo envs without
    max_agents); None otherwise."""
    names = getattr(env, "slot_names", None)
    return None if names is None else [str(name) for name in names]


def restore(trainer, path: str | Path, state: dict | None = None) -> None:
    """Put the checkpoint at `path` into `trainer`: networks, optimizer, counters and random
    streams. `state`: that checkpoint when it was already read with `load`."""
    state = load(path, trainer.spec, state)  # read once, or only checked
    saved, now = state.get("slot_names"), _slot_names(trainer.env)
    if saved is not None and now is not None and saved != now:  # older checkpoints have none
        raise CheckpointError(f"{path} was saved with the agents in slots {saved}; this env "
                              f"puts them in {now}: the critic would read them in other "
                              "slots (the absorbing critic in a fixed order); pass --force "
                              "(force=True) to resume anyway")
    put_back(trainer, state, path)
    trainer.last_checkpoint, trainer._saved_at = Path(path), trainer.agent_steps
    # resumed with another config (--force, a new max_steps): the run's end saves again, also
    # with no step left to train, so that its checkpoint holds the config that config.json
    # shows and a later resume goes on with
    trainer._config_unsaved = state["config"] != trainer.config.to_dict()


def put_back(trainer, state: dict, source) -> None:
    """`state`'s networks, optimizer, random stream and counters into `trainer` (`source` names
    it in errors). Not torch's global generator (`torch_rng`, kept in checkpoints): it only
    initialises the networks, and the caller's own draws are the caller's."""
    try:
        trainer.actor.load_state_dict(state["actor"])
        trainer.critic.load_state_dict(trainer.critic.in_own_units(state["critic"]))
        trainer.optimizer.load_state_dict(state["optimizer"])
        if state["generator"].numel() == trainer.generator.get_state().numel():
            trainer.generator.set_state(state["generator"])
        else:  # saved on another device (a CUDA generator's state is 16 bytes, a CPU one's
            # 5,056): a stream seeded from the run's seed and update count, as its envs are
            trainer.generator.manual_seed(trainer.config.seed + 1_000_003 * state["updates"])
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(
            f"{source} does not fit this network configuration: {one_line(err)}") from None
    trainer.agent_steps, trainer.updates = state["agent_steps"], state["updates"]
    trainer.episodes, trainer.episode_log = state["episodes"], list(state["episode_log"])
    trainer.team_log = list(state["team_log"])
