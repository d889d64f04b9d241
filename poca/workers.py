"""The copies of a PettingZoo env stepped in worker processes (`num_env_workers`, `--env-workers`).

`WorkerEnvGroup` is a `GroupEnv` whose copies are split over N worker processes that step in
parallel. The processes are Gymnasium's `AsyncVectorEnv` (shared memory for the arrays): each of
its sub-envs is one worker's share of the copies, a `ParallelEnvGroup` wrapped as a Gymnasium env
(`_Share`) whose observation is the whole `GroupStep` as padded `[rows, A, ...]` arrays. The
trainer's process only checks the actions and gathers the arrays.

Copy `i` seeds its episodes from (seed, i) whichever worker holds it, so the same seed gives the
same run for any N (and the same as without workers). An exception in a worker reaches the
trainer with the worker's traceback (`EnvWorkerError`, or the adapter's own ValueError/TypeError
for bad env values, naming the copy, step and agent); a worker that dies stops the run with an
`EnvWorkerError` naming it. Either way every worker is shut down first.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.async_vector_env import AsyncState

from envs.core import GroupEnv, GroupStep, check_int
from poca.adapters import ParallelEnvGroup
from poca.runfolder import STOP_SIGNALS

PACKAGE_DIRS = tuple(str(Path(__file__).resolve().parent.parent / d) for d in ("poca", "envs"))
WAIT_ON_CLOSE_S = 10.0


class EnvWorkerError(RuntimeError):
    """An env worker raised (the message holds its traceback) or died."""


def _fields(spec, rows: int, masked: bool) -> dict[str, spaces.Box]:
    """The arrays of one worker's GroupStep, padded to `rows` copies."""
    A, big = spec.num_agents, np.inf

    def box(shape, dtype):
        if np.dtype(dtype) == np.bool_:
            return spaces.Box(0, 1, shape, bool)
        return spaces.Box(-big, big, shape, dtype) if np.dtype(dtype).kind == "f" else \
            spaces.Box(0, np.iinfo(dtype).max, shape, dtype)

    fields = {}
    for j, o in enumerate(spec.obs):
        fields[f"obs{j}"] = box((rows, A, *o.shape), o.dtype)
        fields[f"final{j}"] = box((rows, A, *o.shape), o.dtype)
    fields |= {"alive": box((rows, A), bool), "reward": box((rows, A), np.float32),
               "group_reward": box((rows,), np.float32), "terminated": box((rows, A), bool),
               "truncated": box((rows, A), bool), "group_done": box((rows,), bool)}
    if masked:
        fields["action_mask"] = box((rows, A, sum(spec.discrete_branches)), bool)
    return fields


def _actions(spec, rows: int) -> spaces.Dict:
    A, C, branches = spec.num_agents, spec.continuous_size, spec.discrete_branches
    parts = {}
    if C:
        parts["continuous"] = spaces.Box(-np.inf, np.inf, (rows, A, C), np.float32)
    if branches:
        parts["discrete"] = spaces.Box(0, np.iinfo(np.int64).max, (rows, A, len(branches)),
                                       np.int64)
    return spaces.Dict(parts)


class _Share(gymnasium.Env):
    """One worker's copies `first .. first + count - 1` as a Gymnasium env (runs in the worker).

    The copies are made on the first reset, so the probe AsyncVectorEnv builds in the trainer's
    process costs nothing. Errors are caught and returned in `info["error"]`, so the worker
    stays up to be closed."""

    metadata: dict = {}

    def __init__(self, env_fn: Callable, first: int, count: int, rows: int, spec, masked: bool,
                 max_agents: int | None, max_steps: int | None):
        self.args = (env_fn, count, max_agents, max_steps)
        self.first, self.count = first, count
        self.observation_space = spaces.Dict(_fields(spec, rows, masked))
        self.action_space = _actions(spec, rows)
        self.out = {k: np.zeros(s.shape, s.dtype) for k, s in self.observation_space.items()}
        self.group: ParallelEnvGroup | None = None

    def reset(self, seed=None, options=None):
        try:
            if self.group is None:
                # Ctrl-C, SIGTERM from a scheduler or `timeout`, and SIGHUP from a closed
                # terminal go to the whole process group: the trainer handles them (it saves),
                # then closes us; a worker that died of them first turned the stop into an env
                # worker's failure
                for sig in STOP_SIGNALS:
                    signal.signal(sig, signal.SIG_IGN)
                _die_with_the_trainer()
                if "torch" in sys.modules:  # forked from a process whose OpenMP threads ran:
                    # a parallel region here would wait for them forever (an env that uses
                    # torch hung at its first op); one thread per worker runs none
                    sys.modules["torch"].set_num_threads(1)
                env_fn, count, max_agents, max_steps = self.args
                self.group = ParallelEnvGroup(env_fn, count, max_agents, max_steps,
                                              first_copy=self.first)
            return self._out(self.group.reset(seed=seed)), self._info()
        except Exception as err:  # noqa: BLE001 -- sent to the trainer, which raises it
            return self.out, {"error": _error(err)}

    def step(self, action):
        try:
            n = self.count
            step = self.group.step({k: v[:n] for k, v in action.items()})
            return self._out(step), 0.0, False, False, self._info()
        except Exception as err:  # noqa: BLE001 -- sent to the trainer, which raises it
            return self.out, 0.0, False, False, {"error": _error(err)}

    def _info(self) -> dict:
        return {"pays_group_reward": bool(self.group.pays_group_reward)}

    def _out(self, step: GroupStep) -> dict:
        n, out = self.count, self.out
        for j, (o, f) in enumerate(zip(step.obs, step.final_obs, strict=True)):
            out[f"obs{j}"][:n] = o
            out[f"final{j}"][:n] = f
        for key in ("alive", "reward", "group_reward", "terminated", "truncated", "group_done"):
            out[key][:n] = getattr(step, key)
        if "action_mask" in out:
            out["action_mask"][:n] = step.action_mask
        return out

    def close(self):
        if self.group is not None:
            self.group.close()


def _die_with_the_trainer() -> None:
    """Linux: this worker is killed when the trainer's process dies, kill -9 included; a worker
    busy in a long env call would otherwise go on, holding the env's resources."""
    if sys.platform.startswith("linux"):
        import ctypes

        trainer = os.getppid()
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != trainer:  # it died before the line above took effect
            os._exit(1)


def _error(err: Exception) -> tuple[str, str, str, bool]:
    """(type name, message, traceback, raised by this package's own checks). What the env
    printed is flushed first: the worker may be stopped next, its buffers with it."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    frames = traceback.extract_tb(err.__traceback__)
    ours = bool(frames) and frames[-1].filename.startswith(PACKAGE_DIRS) and isinstance(
        err, (ValueError, TypeError))
    message = " ".join([str(err), *getattr(err, "__notes__", [])])  # the copy that raised
    return type(err).__name__, message, traceback.format_exc(), ours


class WorkerEnvGroup(GroupEnv):
    """`num_envs` copies of a PettingZoo ParallelEnv, split over `workers` processes.

    Behaves as `ParallelEnvGroup(env_fn, num_envs, max_agents, max_steps)` (same episodes for the
    same seed); call `close()` to stop the workers."""

    def __init__(self, env_fn: Callable, num_envs: int, workers: int,
                 max_agents: int | None = None, max_steps: int | None = None):
        E = check_int("num_envs", num_envs, 1)
        N = check_int("num_env_workers", workers, 1)
        if N > E:
            raise ValueError(f"num_env_workers ({N}) must not exceed num_envs ({E}): each "
                             "worker steps at least one copy")
        probe = ParallelEnvGroup(env_fn, 1, max_agents, max_steps)  # spaces and checks, here
        probe.close()
        super().__init__(probe.spec, E)
        self.slot_names = probe.slot_names  # as ParallelEnvGroup's (errors, checkpoints)
        self.pays_group_reward = False  # until a worker's copies show a group_reward
        shares = np.array_split(np.arange(E), N)
        self.shares = [(int(s[0]), len(s)) for s in shares]
        rows = max(n for _, n in self.shares)
        self._masked = bool(probe.spec.discrete_branches)
        fns = [partial(_Share, env_fn, first, n, rows, probe.spec, self._masked, max_agents,
                       max_steps) for first, n in self.shares]
        # Python's default start method (fork on Linux up to 3.13): where it is not fork, a script
        # that trains needs the usual `if __name__ == "__main__":` guard
        self._fns = fns
        self.vec = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False)
        self._in_call = False  # a call to the workers was cut short (Ctrl-C) if still set
        # padded [N * rows] -> the E copies in order (no gather when the shares are equal)
        self._take = None if all(n == rows for _, n in self.shares) else np.concatenate(
            [w * rows + np.arange(n) for w, (_, n) in enumerate(self.shares)])
        self._rows = rows

    # -- public API (the workers do the episode bookkeeping and auto-resets) --
    def reset(self, seed: int | None = None) -> GroupStep:
        self._check_open()
        if self._in_call:  # Ctrl-C cut a call short (some workers' answers may have been read,
            # or only some sent): the pipes are out of step, so the workers start over; reset's
            # seed gives the same episodes as fresh ones (the trainer resets after an interrupt)
            self._close_workers(wait=None)
            self.vec = gymnasium.vector.AsyncVectorEnv(self._fns, shared_memory=True, copy=False)
            self._in_call = False
        if seed is not None:
            self._seed = check_int("seed", seed, 0)
        elif self._seed is None:  # one draw here, so that every worker uses the same
            seed = self._seed = int(np.random.SeedSequence().entropy % 2**63)
        self._wait(lambda: self.vec.reset(seed=[seed] * len(self.shares)), "reset()")
        return self._gather(self._last)

    def step(self, actions: dict) -> GroupStep:
        self._check_open()
        if self._seed is None:
            raise RuntimeError("step() called before reset(): call reset() first")
        cont, disc = self._check_actions(actions)  # errors name the copy and agent
        batched = {}
        for key, x in (("continuous", cont), ("discrete", disc)):
            if x is not None:
                batched[key] = self._pad(x.astype(np.int64 if key == "discrete" else np.float32,
                                                  copy=False))
        self._wait(lambda: self.vec.step(batched), "step()")
        return self._gather(self._last)

    def _pad(self, x: np.ndarray) -> np.ndarray:
        if self._take is None:
            return x.reshape(len(self.shares), self._rows, *x.shape[1:])
        padded = np.zeros((len(self.shares) * self._rows, *x.shape[1:]), x.dtype)
        padded[self._take] = x
        return padded.reshape(len(self.shares), self._rows, *x.shape[1:])

    def _gather(self, obs: dict) -> GroupStep:
        def rows(key):
            x = obs[key]
            x = x.reshape(-1, *x.shape[2:])
            return x.copy() if self._take is None else x[self._take]

        k = len(self.spec.obs)
        step = GroupStep(obs=tuple(rows(f"obs{j}") for j in range(k)), alive=rows("alive"),
                         reward=rows("reward"), group_reward=rows("group_reward"),
                         terminated=rows("terminated"), truncated=rows("truncated"),
                         group_done=rows("group_done"),
                         final_obs=tuple(rows(f"final{j}") for j in range(k)),
                         action_mask=rows("action_mask") if self._masked else None)
        self.alive[:] = step.alive
        self._legal = step.action_mask  # checked here, with this batch's env numbers
        return step

    def _wait(self, call: Callable, what: str) -> None:
        self._in_call = True
        try:
            out = call()
        except (EOFError, OSError) as err:  # a worker died: its pipe broke
            processes = self.vec.processes
            # its pipe broke, so it is exiting: wait (generously, machines can be loaded) until
            # the process is gone, to name it and its exit code
            deadline, dead = time.monotonic() + 10.0, []
            while not dead and time.monotonic() < deadline:
                multiprocessing.connection.wait([p.sentinel for p in processes], timeout=0.1)
                dead = [(w, p.exitcode) for w, p in enumerate(processes) if not p.is_alive()]
            self._shut_down()
            who = ", ".join(f"env worker {w} ({self._copies(w)}, exit code {code})"
                            for w, code in dead) or "an env worker"
            raise EnvWorkerError(f"{who} stopped during {what} ({type(err).__name__}); the "
                                 "run stops here") from None
        self._in_call = False
        obs, infos = out[0], out[-1]
        if "error" in infos:
            w = int(np.flatnonzero(infos["_error"])[0])
            name, message, trace, ours = infos["error"][w]
            self._shut_down()
            if ours:  # the adapter's checks: the same one-line error as without workers
                raise {"ValueError": ValueError, "TypeError": TypeError}[name](
                    f"env worker {w}: {message}")
            raise EnvWorkerError(f"env worker {w} ({self._copies(w)}) raised {name} in "
                                 f"{what}: {message}\n\nthe worker's traceback:\n{trace}")
        self.pays_group_reward |= bool(np.any(infos.get("pays_group_reward", False)))
        self._last = obs

    def _copies(self, w: int) -> str:
        first, n = self.shares[w]
        return f"env copy {first}" if n == 1 else f"env copies {first}-{first + n - 1}"

    def _shut_down(self) -> None:
        """Stop every worker after a failure (the error is raised next), each given a moment
        to close its envs (and flush what they printed)."""
        self._close_workers(wait=1.0)
        self._closed = True

    def close(self) -> None:
        self._close_workers(wait=WAIT_ON_CLOSE_S)
        super().close()

    def _close_workers(self, wait: float | None) -> None:
        """Ask every worker to close its envs, and stop those still running after `wait`
        seconds in all (an env whose close() hangs): Gymnasium's own close waits for them
        without a limit, whatever its timeout says (that bounds only a pending call). `wait`
        None: stop them at once (their pipes are out of step)."""
        vec = self.vec
        if vec.closed:
            return
        if wait is not None and vec._state == AsyncState.DEFAULT:  # the pipes are in step
            for pipe in vec.parent_pipes:
                try:
                    pipe.send(("close", None))
                except OSError:  # that worker is gone
                    pass
            deadline = time.monotonic() + wait
            for process in vec.processes:
                process.join(max(0.0, deadline - time.monotonic()))
            stuck = [w for w, p in enumerate(vec.processes) if p.is_alive()]
            if stuck and wait >= WAIT_ON_CLOSE_S:
                warnings.warn(f"env worker(s) {stuck} did not close their envs within "
                              f"{wait:g} s (an env whose close() hangs?): stopped",
                              RuntimeWarning, stacklevel=3)
        # what is left (a call cut short, a worker stuck): killed (they ignore SIGTERM, which
        # is what Gymnasium's terminate sends); pipes closed
        for process in vec.processes:
            if process.is_alive():
                process.kill()
        vec._state = AsyncState.DEFAULT
        vec.close(terminate=True)

    # -- GroupEnv hooks: not used, the workers step their own ParallelEnvGroups --
    def _reset_envs(self, idx):
        raise NotImplementedError("WorkerEnvGroup's workers reset their own copies")

    def _step(self, cont, disc):
        raise NotImplementedError("WorkerEnvGroup's workers step their own copies")

    def _observe(self, rows=slice(None)):
        raise NotImplementedError("WorkerEnvGroup gathers its workers' observations")
