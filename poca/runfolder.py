"""A run folder belongs to one training process; a run survives Ctrl-C, SIGTERM and crashes.

`claim` takes the folder for the process (an OS lock, released even by kill -9) and tidies what
an earlier, killed process of the same run left; `Interrupts` turns SIGINT, SIGTERM and SIGHUP
into `KeyboardInterrupt` except while a checkpoint is written; `resumed_config` decides what a
resumed run may change.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import json
import os
import re
import signal
import threading
from pathlib import Path

from poca.config import POCAConfig

SAVE_EVERY_SECONDS = 300.0  # a checkpoint at least this often, whatever checkpoint_interval says
LOCK = ".lock"
# Config keys a resumed run may change: where and how long it computes, not what it learns
# (threads and device round differently, as another machine does).
RESUMABLE = ("max_steps", "threads", "num_env_workers", "device")

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


class RunFolderError(ValueError):
    """The run folder is taken by another process, or holds a run this one must not overwrite."""


def holds_run(run_dir: Path) -> bool:
    """A run's checkpoints: `latest.pt` or any step file (a new run there would mix with them,
    and pruning would delete the new ones first). A run stopped before its first checkpoint
    holds none."""
    folder = Path(run_dir) / "checkpoints"
    return (folder / "latest.pt").exists() or bool(step_checkpoints(folder))


def not_a_runs(run_dir: Path) -> list[str]:
    """The files a new run in `run_dir` would overwrite that no run wrote: a config.json or
    metrics.csv not in a run's format (a run stopped before its first checkpoint leaves its own,
    which a new run replaces; files of other names are left alone)."""
    found = []
    config, metrics = Path(run_dir) / "config.json", Path(run_dir) / "metrics.csv"
    if config.exists():
        try:
            saved = json.loads(config.read_text())
            ours = isinstance(saved, dict) and {"env_id", "config"} <= saved.keys()
        except (OSError, ValueError):
            ours = False
        found += [] if ours else [config.name]
    if metrics.exists():
        try:  # empty: a run killed before its header reached the disk
            with open(metrics) as f:
                ours = metrics.stat().st_size == 0 or f.readline().split(",")[0] == "agent_steps"
        except (OSError, ValueError):
            ours = False
        found += [] if ours else [metrics.name]
    return found


def write_atomically(path: Path, text: str) -> None:
    """`path` holds `text` or what it held before, never half of it (a kill mid-write)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as err:
        raise RunFolderError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        tmp.unlink(missing_ok=True)


def step_checkpoints(folder: Path) -> list[Path]:
    """A run's step-N.pt files, oldest first (by N, not by name: past 10**9 agent-steps the
    names grow a digit)."""
    found = [(int(p.stem[5:]), p) for p in Path(folder).glob("step-*.pt")
             if p.stem[5:].isascii() and p.stem[5:].isdigit()]  # not a user's step-best.pt
    return [path for _, path in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a resumed run continues from, or a clear error."""
    path = Path(run_dir) / "checkpoints" / "latest.pt"
    if not Path(run_dir).is_dir():
        raise RunFolderError(f"no run folder {run_dir} to resume")
    if not path.exists():
        pid = _holder(Path(run_dir))
        if pid is not None:  # a run still before its first checkpoint: say so, not "stopped"
            raise _in_use(run_dir, pid)
        older = [p.name for p in step_checkpoints(path.parent)]
        raise RunFolderError(
            f"{run_dir} holds no checkpoint to resume from" + (
                f" in {path.name}; it keeps {older}: copy one over {path} to resume from it"
                if older else
                " (a run stopped before its first checkpoint can only start again, without "
                "--resume)"))
    return path


@contextlib.contextmanager
def claim(run_dir: Path, fresh: bool, agent_steps: int):
    """Hold `run_dir` for this process while the block runs.

    `fresh`: a new run; the folder must not hold one (the metrics.csv of a run stopped before
    its first checkpoint are dropped). Otherwise the run continues from `agent_steps`: rows of
    metrics.csv past it (written after the checkpoint by a process that was then killed) are
    dropped, and step files past it (a run rolled back to an earlier checkpoint) set aside.
    Half-written checkpoint files are removed either way.
    """
    run_dir = Path(run_dir)
    theirs = not_a_runs(run_dir) if fresh else []
    if theirs:
        raise RunFolderError(f"{run_dir} holds {', '.join(theirs)} that no run wrote; a new run "
                             "writes its own there: choose another run folder")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        handle = open(run_dir / LOCK, "a+")
    except OSError as err:
        raise RunFolderError(f"cannot use {run_dir} as a run folder: {err.strerror or err}"
                             ) from None
    try:
        _lock(handle, run_dir)
        if fresh and holds_run(run_dir):
            raise RunFolderError(f"{run_dir} already holds a run; pass --resume (resume=True) "
                                 "to continue it or choose another run folder")
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        for tmp in (run_dir / "checkpoints").glob("*.tmp"):
            tmp.unlink()
        if fresh:
            (run_dir / "metrics.csv").unlink(missing_ok=True)
        else:
            truncate_metrics(run_dir / "metrics.csv", agent_steps)
            set_aside_later_checkpoints(run_dir / "checkpoints", agent_steps)
        yield run_dir
    finally:
        handle.close()  # releases the lock


def _lock(handle, run_dir: Path) -> None:
    if fcntl is None:
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            raise RunFolderError(f"{run_dir} is in use by another training process") from None
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise _in_use(run_dir, _pid_in(handle)) from None


def _pid_in(handle) -> str:
    """The pid the holding process wrote in the lock file ("?" before it has written it)."""
    handle.seek(0)
    return handle.read().strip() or "?"


def _in_use(run_dir: Path, pid: str) -> RunFolderError:
    return RunFolderError(f"{run_dir} is in use by another training process (pid {pid}); two "
                          "runs cannot share a folder")


def _holder(run_dir: Path) -> str | None:
    """The pid of the process that holds `run_dir` now, or None (where flock exists: POSIX)."""
    if fcntl is None or not (run_dir / LOCK).is_file():
        return None
    with open(run_dir / LOCK) as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return _pid_in(handle)
    return None  # closing the file released the lock just taken


def last_wall_seconds(path: Path) -> float:
    """The wall_s of the last row of a metrics.csv (0 when there is none to read)."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        return float(rows[-1]["wall_s"]) if rows else 0.0
    except (OSError, KeyError, TypeError, ValueError):  # absent, or not ours: start at 0
        return 0.0


def truncate_metrics(path: Path, agent_steps: int) -> None:
    """Keep the header and the rows up to `agent_steps`, stopping at the first row past it or
    half written (atomically)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or "agent_steps" not in rows[0]:
        return
    col, keep = rows[0].index("agent_steps"), rows[:1]
    for row in rows[1:]:
        if len(row) != len(rows[0]) or not row[col].isdigit() or int(row[col]) > agent_steps:
            break
        keep.append(row)
    if len(keep) == len(rows):
        return
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(keep)
    os.replace(tmp, path)


def set_aside_later_checkpoints(folder: Path, agent_steps: int) -> None:
    """Move the step files past `agent_steps` (a run resumed from an earlier checkpoint copied
    over latest.pt) into `abandoned-after-<agent_steps>/` (`-2`, `-3`... after later rollbacks
    to the same step): they belong to the branch the run
    left, and among its own files they would outrank them (pruning keeps the highest steps, so
    it deleted the files the resumed run wrote). Moved, not deleted: nothing is lost."""
    later = [p for p in step_checkpoints(folder) if int(p.stem[5:]) > agent_steps]
    if later:
        aside, n = folder / f"abandoned-after-{agent_steps}", 1
        while aside.exists():  # rolled back to this step before: that branch's files stay
            n += 1
            aside = folder / f"abandoned-after-{agent_steps}-{n}"
        aside.mkdir()
        for path in later:
            os.replace(path, aside / path.name)


# Ctrl-C; a scheduler's or `timeout`'s stop; a closed terminal or dropped SSH session (POSIX)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP")
                                                   else ())


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP raise `KeyboardInterrupt`, except inside `held()`: there a
    signal waits until the block ends (so a checkpoint being written is finished first)."""

    def __init__(self):
        self.held_depth, self.pending, self._old = 0, None, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if sig != signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
                    continue  # ignored on purpose (`nohup` ignores SIGHUP): it stays ignored
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}

    def _handle(self, signum, frame):
        first = self.pending is None
        self.pending = signum
        if self.held_depth or not first:  # after the first, signals only wait for the exit
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextlib.contextmanager
    def held(self, then_raise: bool = True):
        self.held_depth += 1
        try:
            yield
        finally:
            self.held_depth -= 1
        if then_raise and not self.held_depth and self.pending is not None:
            raise KeyboardInterrupt(signal.Signals(self.pending).name)


def same_env_id(new: str, saved: str) -> bool:
    """Runs saved before callables were recorded as module:qualname hold the bare qualname,
    before a script's own factory was named by the script's module, `__main__:qualname`, and
    before lambdas and closures were named by the module attribute that holds them or a
    fingerprint, `module:<lambda>` (`adapters.env_name`)."""
    if saved.endswith(":parallel_wrapper_fn.<locals>.par_fn") and ":" in new:
        return True  # every PettingZoo env was recorded so before: nothing to compare
    if not FINGERPRINT.search(saved):  # a lambda recorded before it got its fingerprint
        new = FINGERPRINT.sub(r"\1", new)
    return new.removeprefix("groupenvs/") == saved.removeprefix("groupenvs/") or (
        ":" in new and saved.removeprefix("__main__:") == new.partition(":")[2])


FINGERPRINT = re.compile(r"(<(?:lambda|locals)>[\w.<>]*)#[0-9a-f]{8}\b")  # <lambda>#3f2a9c01


def resumed_config(saved: dict, config: POCAConfig | dict | None, env_id: str,
                   env_kwargs: dict | None, max_agents: int | None,
                   force: bool) -> tuple[POCAConfig, dict, int | None]:
    """The config, env arguments and agent slots (`max_agents`) a resumed run continues with.

    The run's own (from its checkpoint `saved`) unless `config`/`env_kwargs`/`max_agents` are
    given; those may differ from the run's only in `RESUMABLE` keys, or with `force`. A dict
    `config` holds only the settings to change (as `POCAConfig.override` takes them): the
    others stay the run's, not the defaults.
    """
    try:
        own = POCAConfig.from_dict(saved["config"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"the run's saved config is invalid: {err}") from None
    if isinstance(config, dict):
        config = own.override(config)
    # Rollout sizes left unset are derived from max_steps (`POCAConfig.rollout_sizes`): a resume
    # with more steps must not change them, so unset ones mean the run's own.
    slots = saved.get("spec", {}).get("num_agents")

    def pinned(c: POCAConfig) -> POCAConfig:
        """`c` with its unset sizes written out: the run's own, or, after a forced change of
        num_envs or time_horizon, those of the new shape at the run's max_steps."""
        if not slots:
            return c
        same_shape = (c.num_envs, c.time_horizon) == (own.num_envs, own.time_horizon)
        source = own if same_shape else c.override({"max_steps": own.max_steps})
        hp, sizes = c.hyperparameters, source.rollout_sizes(slots)
        unset = {key: size for key, size, value in
                 zip(("hyperparameters.buffer_size", "hyperparameters.batch_size"), sizes,
                     (hp.buffer_size, hp.batch_size), strict=True) if value is None}
        return c.override(unset) if unset else c

    own, config = pinned(own), None if config is None else pinned(config)
    changes = []
    if not same_env_id(env_id, saved["env_id"]):
        changes.append(f"environment {saved['env_id']!r} -> {env_id!r}")
    if env_kwargs is not None and _plain(env_kwargs) != _plain(saved["env_kwargs"]):
        changes.append(f"env_kwargs {saved['env_kwargs']} -> {env_kwargs}")
    own_slots = saved.get("max_agents")  # None: slots are possible_agents (slot_order)
    # (checkpoints written before max_agents was saved take the one given)
    if "max_agents" in saved and max_agents is not None and max_agents != own_slots:
        changes.append(f"max_agents {own_slots} -> {max_agents}")
    settings = {} if config is None else {
        key: pair for key, pair in _diff(_scheduled(own), _scheduled(config)).items()
        if key not in RESUMABLE}
    changes += [f"{key} {a!r} -> {b!r}" for key, (a, b) in settings.items()]
    if changes and not force:
        hint = ("; if your config does not set network_settings.normalize_value: its default "
                "is now true, and runs started before that learned in raw units (false): write "
                "'normalize_value: false' under network_settings, or resume without --config"
                if settings.get("network_settings.normalize_value") == (False, True) else "")
        raise ValueError("a resumed run keeps its settings; this would change "
                         + "; ".join(changes) + ". Only max_steps, threads, device and "
                         "num_env_workers (--max-steps, --threads, --device, --env-workers; "
                         "and --no-progress) may differ; pass --force (force=True) to change "
                         "them anyway" + hint)
    return (config or own), (saved["env_kwargs"] if env_kwargs is None else env_kwargs), (
        own_slots if max_agents is None else max_agents)


def _scheduled(config: POCAConfig) -> dict:
    """`config.to_dict()` with unset beta and epsilon schedules written out as the learning
    rate's, which they follow: a run saved when they were always written compares equal."""
    data = config.to_dict()
    data["hyperparameters"].update(config.hyperparameters.schedules())
    return data


def _plain(value):
    """Tuples and lists compare equal (config.json and checkpoints may hold either)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _diff(a: dict, b: dict, prefix: str = "") -> dict:
    out = {}
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out.update(_diff(x, y, f"{prefix}{key}."))
        elif _plain(x) != _plain(y):
            out[f"{prefix}{key}"] = (x, y)
    return out


def snapshot(trainer) -> dict:
    """The trainer's state as it is now, unaffected by what training does next."""
    from poca import checkpoint  # torch: only once a trainer exists

    state = checkpoint.trainer_state(trainer)
    return {**state, **{k: _copied(state[k]) for k in ("actor", "critic", "optimizer")}}


def _copied(value):
    """Nested dicts and lists with their tensors cloned: what `copy.deepcopy` gives for a
    state_dict (a dict's attributes, e.g. `_metadata`, kept) at a fifth of its cost; taken
    before every update."""
    if isinstance(value, dict):
        out = copy.copy(value)
        for key, item in value.items():
            out[key] = _copied(item)
        return out
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value.clone() if hasattr(value, "clone") else copy.deepcopy(value)
