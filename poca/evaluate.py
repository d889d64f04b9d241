"""Run a trained policy: evaluation over many episodes at once, and watching one group play."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import torch

from envs.core import GroupEnv, check_int
from poca import checkpoint
from poca.acting import Acting, torch_settings
from poca.adapters import NEVER
from poca.config import POCAConfig
from poca.networks import Actor


def load_actor(path: str | Path, env: GroupEnv, state: dict | None = None) -> Actor:
    """The trained policy of a checkpoint, checked against `env`'s spec.

    `state`: the checkpoint at `path` when it was already read with `checkpoint.load`."""
    state = checkpoint.load(path, env.spec, state)  # read once, or only checked
    try:
        net = POCAConfig.from_dict(state["config"]).network_settings
        actor = Actor(env.spec, net)
        actor.load_state_dict(state["actor"])
    except (ValueError, TypeError, RuntimeError) as err:
        raise checkpoint.CheckpointError(f"{path} does not hold a policy for this environment "
                                         f"and its config: {checkpoint.one_line(err)}"
                                         ) from None
    return actor.eval()


EVAL_BATCH = 256  # env copies `poca eval` runs at once
# steps after which an evaluation that has not finished says why it may never finish
STILL_RUNNING_AFTER = 10_000


def checkpoint_returns(path: str | Path, make_env, episodes: int, seed: int = 0,
                       deterministic: bool = False, state: dict | None = None
                       ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(group returns, team returns, whether the env pays a group reward) of `episodes` fresh
    episodes of the policy saved at `path`, on envs made by `make_env(num_envs)`.

    At most `EVAL_BATCH` env copies run at once (a thousand copies of a big PettingZoo env do
    not fit in memory), in equal batches; batch k > 0 draws its episodes from (seed, k), so up
    to `EVAL_BATCH` episodes are exactly `episode_returns` on one env of that many copies."""
    batches = -(-check_int("episodes", episodes, 1) // EVAL_BATCH)
    returns, actor = [], None
    for k in range(batches):
        env = make_env(-(-episodes // batches))
        try:
            actor = load_actor(path, env, state) if actor is None else actor
            batch_seed = seed if k == 0 else int(np.random.SeedSequence([seed, k])
                                                 .generate_state(1)[0])
            returns.append(episode_returns(actor, env, batch_seed, deterministic))
            pays_group_reward = env.pays_group_reward
        finally:
            env.close()
    group, team = (np.concatenate(r)[:episodes] for r in zip(*returns, strict=True))
    return group, team, pays_group_reward


def evaluate(actor: Actor, env: GroupEnv, seed: int = 0, deterministic: bool = False,
             team: bool = False) -> np.ndarray:
    """Group return (with `team`: group + individual rewards) of the first episode of each of
    `env.num_envs` groups (one episode each, so short episodes are not over-counted)."""
    return episode_returns(actor, env, seed, deterministic)[int(team)]


@torch_settings(threads=1)  # more threads were measured 50x slower here (2 cores)
def episode_returns(actor: Actor, env: GroupEnv, seed: int = 0, deterministic: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(group returns, team returns) of the same episodes, as `evaluate`, in one pass."""
    acting = Acting(actor, 1, env.spec.num_agents, torch.device("cpu"),
                    torch.Generator().manual_seed(seed))
    step = env.reset(seed=seed)
    group, team = np.zeros(env.num_envs), np.zeros(env.num_envs)
    running = np.ones(env.num_envs, dtype=bool)
    t = 0
    while running.any():
        t += 1
        if t == STILL_RUNNING_AFTER and env.spec.max_steps >= NEVER:  # no time limit at all
            warnings.warn(f"{int(running.sum())} of {env.num_envs} evaluation episodes still "
                          f"running after {t:,} steps; an env with no time limit of its own "
                          "never ends them (for a PettingZoo env, give --max-episode-steps N)",
                          RuntimeWarning, stacklevel=2)
        after = env.step(acting.act(step, deterministic).actions)
        acting.observe(step, after)
        group += np.where(running, after.group_reward, 0.0)
        team += np.where(running, after.group_reward + after.reward.sum(axis=1), 0.0)
        running &= ~after.group_done
        step = after
    return group, team


def play(actor: Actor, env: GroupEnv, episodes: int, seed: int = 0, render: str | None = None,
         record=None, fps: int = 10, episode_done=None, deterministic: bool = False
         ) -> list[tuple[float, float]]:
    """Watch (render="human") and/or record (a .gif or .mp4 path) a trained group.

    Returns each episode's (group return, team return) (`deterministic`: the most likely
    actions, as `poca eval --deterministic`), and hands each to
    `episode_done(episode, group return, team return)` as it ends. An mp4 is written as the
    frames come; a GIF (Pillow writes it whole) when playing stops. Stopped with Ctrl-C, the
    recording holds what was played; after an error there is none. GIFs need Pillow (`pip install
    "groupenvs[gif]"`), mp4 imageio with ffmpeg (`pip install "groupenvs[video]"`).
    """
    from envs.render import EpisodeRenderer, check_display

    if env.num_envs != 1:
        raise ValueError("play() steps one group: make the env with num_envs=1")
    if record is not None:
        check_record_path(record)
    if render == "human":
        check_display("record instead with --record FILE.gif or FILE.mp4")
    views = [EpisodeRenderer(env, mode, fps) for mode in
             (render, "rgb_array" if record else None) if mode]
    recording = _Recording(Path(record), fps) if record is not None else None
    returns = []
    acting = Acting(actor, 1, env.spec.num_agents, torch.device("cpu"),
                    torch.Generator().manual_seed(seed))

    def record_frame(view, episode: int, t: int) -> None:
        if view.mode == "rgb_array":
            recording.add(view.render(), episode, t)

    keep = False  # the recording: kept when playing ends, or is stopped with Ctrl-C
    try:
        for episode in range(episodes):
            step = env.reset(seed=seed + episode)
            acting.reset()
            for view in views:
                view.start()
                record_frame(view, episode, 0)
            group = team = 0.0
            done, t = False, 0
            while not done:
                after = env.step(acting.act(step, deterministic).actions)
                acting.observe(step, after)
                group += float(after.group_reward[0])
                team += float(after.group_reward[0] + after.reward[0].sum())
                done, t = bool(after.group_done[0]), t + 1
                for view in views:
                    view.step(after)
                    record_frame(view, episode, t)
                step = after
            returns.append((group, team))
            if episode_done is not None:
                episode_done(episode, group, team)
        keep = True
    except KeyboardInterrupt:
        keep = True  # the user's stop: what was played is written
        raise
    finally:
        for view in views:
            view.close()
        if recording is not None:
            recording.close(keep)
    return returns


class _Recording:
    """A recording's frames, checked to keep one size, written to `path`: an mp4 as they come
    (memory stays flat over any number of episodes), a GIF on `close` (Pillow writes it whole).
    `close(keep)` writes what was recorded, or (not `keep`) leaves no file."""

    def __init__(self, path: Path, fps: int):
        self.path, self.fps = path, fps
        self.frames: list[np.ndarray] = []  # a GIF's
        self.first = self.writer = None

    def add(self, frame: np.ndarray, episode: int, t: int) -> None:
        if self.first is None:
            self.first = frame.shape
        elif frame.shape != self.first:  # now, not as a garbled file after playing
            (h, w), (h0, w0) = frame.shape[:2], self.first[:2]
            raise ValueError(f"episode {episode}, step {t}: the frame is {w}x{h}, the first "
                             f"was {w0}x{h0}; a recording needs frames of one size")
        if self.path.suffix.lower() != ".mp4":
            self.frames.append(frame)
            return
        if self.writer is None:  # into a file beside it, put in place when kept: an error or
            import imageio.v2 as imageio  # a kill leaves a file already there as it was

            self.partial = self.path.with_name(f".{self.path.stem}.partial{self.path.suffix}")
            self.writer = imageio.get_writer(self.partial, fps=self.fps, macro_block_size=1)
        h, w = frame.shape[:2]  # H.264 wants even sizes: pad by one row/column when odd
        self.writer.append_data(np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0))))

    def close(self, keep: bool) -> None:
        if self.writer is not None:
            self.writer.close()
            if keep:
                os.replace(self.partial, self.path)
            else:
                self.partial.unlink(missing_ok=True)
        elif self.frames and keep:
            from PIL import Image

            images = [Image.fromarray(f) for f in self.frames]
            images[0].save(self.path, save_all=True, append_images=images[1:],
                           duration=1000 // self.fps, loop=0)


RECORD_FORMATS = {".gif": ("PIL", 'Pillow: pip install "groupenvs[gif]"'),
                  ".mp4": ("imageio_ffmpeg", 'imageio with ffmpeg: pip install "groupenvs[video]"')}


def check_record_path(path) -> None:
    """Fail before playing if `path`'s format is unknown, its writer is not installed, its
    folder does not exist or is not a writable folder, or `path` itself is there but is not a
    file this process may overwrite (a folder, say)."""
    import importlib.util
    import os

    suffix = Path(path).suffix.lower()
    if suffix not in RECORD_FORMATS:
        raise ValueError(f"cannot record {str(path)!r}: the file name must end in "
                         f"{' or '.join(RECORD_FORMATS)}")
    folder = Path(path).parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise ValueError(f"cannot record {str(path)!r}: {str(folder)!r} is not a writable "
                         "folder (make it first)")
    if Path(path).exists() and not (Path(path).is_file() and os.access(path, os.W_OK)):
        raise ValueError(f"cannot record {str(path)!r}: it exists and is not a file that can be "
                         "overwritten")
    module, hint = RECORD_FORMATS[suffix]
    if importlib.util.find_spec(module) is None or (
            suffix == ".mp4" and importlib.util.find_spec("imageio") is None):
        raise ImportError(f"recording {suffix} needs {hint}")
