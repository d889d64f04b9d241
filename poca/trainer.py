"""The MA-POCA loop: collect a batched rollout, compute returns, update, log, checkpoint.

Read top to bottom: `collect` steps every env with the shared actor until the buffer holds more
than `buffer_size` agent-steps; `update` evaluates the critic, computes per-agent lambda-returns
and counterfactual advantages, and runs `num_epoch` epochs of minibatch Adam steps; `run` loops
until `max_steps` agent-steps.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from envs.core import GroupEnv
from poca import checkpoint, guards, runfolder
from poca.acting import Acting
from poca.adam import Adam
from poca.config import POCAConfig
from poca.loss import (
    clipped_value_loss,
    explained_variance,
    linear_decay,
    masked_mean,
    policy_diagnostics,
    policy_loss,
)
from poca.networks import Actor, Critic
from poca.rollout import (
    Rollout,
    lambda_returns,
    next_values,
    normalized,
    posthumous_bootstrap,
    team_reward,
    to_units,
)


class TrainingDiverged(RuntimeError):
    """An env reward or observation, a loss, a parameter or a normaliser statistic became
    NaN/inf; the message names the first and the last good checkpoint."""


@dataclass
class TrainResult:
    agent_steps: int
    episodes: int
    episode_log: list[tuple[int, float]]  # (agent-steps when it ended, group return)
    team_log: list[float]  # each episode's team return: group + all individual rewards
    wall_seconds: float
    checkpoint: Path | None
    interrupted: bool = False
    pays_group_reward: bool = True  # the env's: False makes the team return the headline

    def mean_return(self, last: int = 20) -> float:
        returns = [r for _, r in self.episode_log[-last:]]
        return float(np.mean(returns)) if returns else math.nan

    def mean_team_return(self, last: int = 20) -> float:
        return float(np.mean(self.team_log[-last:])) if self.team_log else math.nan


def _adam(params, lr: float) -> Adam:
    # not torch.optim.Adam: building any torch.optim optimizer imports torch._dynamo (0.7-1.7 s
    # of every start, measured in poca/adam.py); the same update (checkpoints load either way)
    return Adam(params, lr=lr)


# The joint loss, as ML-Agents' POCA optimizer weighs it (poca/optimizer_torch.py):
# policy + 0.5 * (value + 0.5 * baseline) - beta * entropy.
VALUE_COEF = 0.5
BASELINE_COEF = 0.5


def _per_agent(value: Tensor, like: Tensor) -> Tensor:
    """The group value V [*] broadcast to every agent [*, A]; per-agent values as they are."""
    return value if value.dim() == like.dim() else value[..., None].expand_as(like)


class Trainer:
    def __init__(self, env: GroupEnv, config: POCAConfig, run_dir: str | Path | None = None,
                 env_id: str = "", env_kwargs: dict | None = None, progress: bool = True):
        torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.env, self.spec, self.config = env, env.spec, config
        self.buffer_size, self.batch_size = config.rollout_sizes(env.spec.num_agents)
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.device = torch.device(config.device)
        net = config.network_settings
        self.actor = Actor(self.spec, net).to(self.device)
        self.critic = Critic(self.spec, net, config.critic).to(self.device)
        self.params = list(self.actor.parameters()) + list(self.critic.parameters())
        self.optimizer = _adam(self.params, config.hyperparameters.learning_rate)
        self.generator = torch.Generator(self.device).manual_seed(config.seed)
        self.run_dir = Path(run_dir) if run_dir else None
        self.progress = progress
        self.agent_steps = self.updates = self.episodes = 0
        self.episode_log: list[tuple[int, float]] = []
        self.team_log: list[float] = []
        self.last_checkpoint: Path | None = None
        self._saved_at = 0
        self.acting = Acting(self.actor, env.num_envs, self.spec.num_agents, self.device,
                             self.generator)
        self._start_env(seed=config.seed)

    def _start_env(self, seed: int) -> None:
        self._step = self.env.reset(seed=seed)
        self._group_return = np.zeros(self.env.num_envs)
        self._team_return = np.zeros(self.env.num_envs)
        self.acting.reset()
        self._critic_memory = None  # with memory: one LSTM state per env for V and each b_i
        if self.critic.memory is not None:
            m = 2 * self.critic.memory.cell.hidden_size
            self._critic_memory = torch.zeros(self.env.num_envs, 1 + self.spec.num_agents, m,
                                              device=self.device)

    # --- collecting -----------------------------------------------------------------------------
    def collect(self) -> Rollout:
        """Step every env until the rollout holds more than `buffer_size` agent-steps."""
        buffer_size = self.buffer_size
        obs, acted_cols, env_cols = [], defaultdict(list), defaultdict(list)
        final_obs, final_alive = [], []
        collected, step = 0, self._step
        while collected <= buffer_size:
            acted = self.acting.act(step)
            after = self.env.step(acted.actions)
            self.acting.observe(step, after)
            obs.append(acted.obs)
            for name in ("alive", "cont", "disc", "log_prob", "action_mask", "starts",
                         "group_starts"):
                acted_cols[name].append(getattr(acted, name))
            acted_cols["actor_memory"].append(acted.memory)
            env_cols["team_reward"].append(team_reward(after.group_reward, after.reward))
            env_cols["group_done"].append(after.group_done)
            env_cols["group_truncated"].append(after.group_truncated)
            if after.group_truncated.any():
                rows = np.flatnonzero(after.group_truncated)
                final_obs.append([o[rows] for o in after.final_obs])
                final_alive.append(after.truncated[rows])
            collected += int(step.alive.sum())
            self._log_episodes(after, self.agent_steps + collected)
            step = after
        self._step = step
        dev, A = self.device, self.spec.num_agents
        return Rollout(
            obs=[torch.stack(component) for component in zip(*obs, strict=False)],
            **{name: None if col[0] is None else torch.stack(col)
               for name, col in acted_cols.items()},
            **{name: torch.as_tensor(np.stack(col), device=dev)
               for name, col in env_cols.items()},
            next_obs=[torch.as_tensor(o, device=dev) for o in step.obs],
            next_alive=torch.as_tensor(step.alive, device=dev),
            next_group_start=~self.acting.group_continuing,
            final_obs=[torch.as_tensor(np.concatenate(component), device=dev)
                       for component in zip(*final_obs, strict=False)],
            final_alive=torch.as_tensor(np.concatenate(final_alive), device=dev)
            if final_alive else torch.zeros((0, A), dtype=torch.bool, device=dev))

    def _log_episodes(self, step, agent_steps: int) -> None:
        self._group_return += step.group_reward
        self._team_return += step.group_reward + step.reward.sum(axis=1)
        for e in np.flatnonzero(step.group_done):
            self.episode_log.append((agent_steps, float(self._group_return[e])))
            self.team_log.append(float(self._team_return[e]))
            self._group_return[e] = self._team_return[e] = 0.0
            self.episodes += 1

    # --- learning -------------------------------------------------------------------------------
    def schedules(self) -> tuple[float, float, float]:
        """(learning rate, epsilon, beta) at the current agent-step count."""
        hp, t, T = self.config.hyperparameters, self.agent_steps, self.config.max_steps
        decay = {"linear": lambda v, floor: linear_decay(v, floor, t, T),
                 "constant": lambda v, floor: v}
        return (decay[hp.learning_rate_schedule](hp.learning_rate, 1e-10),
                decay[hp.epsilon_schedule](hp.epsilon, 0.1),
                decay[hp.beta_schedule](hp.beta, 1e-5))

    @torch.no_grad()
    def _estimates(self, ro: Rollout):
        """The critic over the whole rollout in one pass through time (carrying its memory over
        from the last rollout): V [T, E], baselines [T, E, A], the group value each step
        bootstraps from [T, E], the critic's memory before every step [T, E, 1 + A, m] (None
        without memory), and where each of the 1 + A streams starts an episode [T, E, 1 + A]."""
        stream_starts = torch.cat([ro.group_starts[..., None], ro.starts], -1)
        value, baseline, (memory_before, memory_after) = self.critic(
            ro.obs, ro.cont, ro.disc, ro.alive, self._critic_memory, stream_starts)
        last = v_stream = None
        if memory_after is not None:
            last, v_stream = memory_after[-1], memory_after[..., 0, :]
        self._critic_memory = last
        bootstrap = self.critic.value([o[None] for o in ro.next_obs], ro.next_alive[None],
                                      None if last is None else last[:, 0],
                                      ro.next_group_start[None])[0][0]
        final_value = value.new_zeros((0, *value.shape[2:]))  # [n] or, per agent, [n, A]
        if ro.final_obs:  # time-limit endings: V of the final view, from the memory that the
            # truncated step left behind (not the one zeroed for the next episode)
            n = len(ro.final_alive)
            final_value = self.critic.value(
                [o[None] for o in ro.final_obs], ro.final_alive[None],
                None if v_stream is None else v_stream[ro.group_truncated],
                torch.zeros(1, n, dtype=torch.bool, device=self.device))[0][0]
        next_value = next_values(value, bootstrap, final_value, ro.group_done,
                                 ro.group_truncated)
        return value, baseline, next_value, memory_before, stream_starts

    def update(self, ro: Rollout) -> dict[str, float]:
        """One MA-POCA update on a rollout: returns, advantages, then `num_epoch` epochs of
        clipped-surrogate minibatch steps for the actor, V and the baselines together."""
        cfg, hp = self.config, self.config.hyperparameters
        # 1. Normalizer statistics see the new observations first (as in ML-Agents).
        if cfg.network_settings.normalize:
            for net in (self.actor, self.critic):
                net.encoder.update_normalizers(ro.obs, ro.alive)
        # 2. The critic's estimates, per-agent lambda-returns and counterfactual advantages.
        value, baseline, next_value, critic_memory, stream_starts = self._estimates(ro)
        reward = ro.team_reward * cfg.reward_signals.extrinsic.strength
        per_agent = next_value.dim() == ro.alive.dim()  # critic: independent, V_i [T, E, A]
        bootstrap = next_value if per_agent else posthumous_bootstrap(  # V_i is 0 once i left
            next_value, ro.alive, ro.group_done)
        returns = lambda_returns(reward, value, bootstrap, ro.alive, ro.group_done,
                                 cfg.reward_signals.extrinsic.gamma, hp.lambd, cfg.time_horizon)
        advantage = normalized(returns - baseline, ro.alive)

        # 3. Minibatch units: sequences of `length` steps of one env (single steps without
        # memory), each starting from the memories stored for its first step.
        memory = cfg.network_settings.memory
        length = memory.sequence_length if memory is not None else 1
        units = {name: to_units(x, length) for name, x in {
            "alive": ro.alive, "cont": ro.cont, "disc": ro.disc, "mask": ro.action_mask,
            "old_log_prob": ro.log_prob, "old_value": value, "old_baseline": baseline,
            "returns": returns, "advantage": advantage, "starts": ro.starts,
            "stream_starts": stream_starts}.items()}
        obs_units = [to_units(o, length) for o in ro.obs]
        first_memory = {name: None if x is None else to_units(x, length)[:, 0]
                        for name, x in (("actor", ro.actor_memory), ("critic", critic_memory))}

        def time_major(x, idx):  # [n, L, ...] -> [L, n, ...]
            return None if x is None else x[idx].transpose(0, 1)

        # 4. Epochs of minibatch steps on the joint loss.
        lr, epsilon, beta = self.schedules()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        n_batches = max(1, ro.agent_steps // self.batch_size)
        sums: dict[str, Tensor] = defaultdict(float)
        for _ in range(hp.num_epoch):
            order = torch.randperm(len(units["alive"]), generator=self.generator,
                                   device=self.device)
            for idx in order.chunk(n_batches):
                mb = {name: time_major(x, idx) for name, x in units.items()}
                mb_obs = [time_major(x, idx) for x in obs_units]
                mb_memory = {name: None if x is None else x[idx]
                             for name, x in first_memory.items()}
                alive, returns_mb = mb["alive"], mb["returns"]
                dist, _ = self.actor(mb_obs, mb["mask"], mb_memory["actor"], mb["starts"])
                new_value, new_baseline, _ = self.critic(
                    mb_obs, mb["cont"], mb["disc"], alive, mb_memory["critic"],
                    mb["stream_starts"])
                log_prob = dist.log_prob(mb["cont"], mb["disc"])
                losses = {
                    "policy_loss": policy_loss(log_prob, mb["old_log_prob"], mb["advantage"],
                                               alive, epsilon),
                    # V is the group's estimate, regressed on each agent's return
                    "value_loss": clipped_value_loss(
                        _per_agent(new_value, returns_mb), _per_agent(mb["old_value"], returns_mb),
                        returns_mb, alive, epsilon),
                    "baseline_loss": clipped_value_loss(new_baseline, mb["old_baseline"],
                                                        returns_mb, alive, epsilon),
                    "entropy": masked_mean(dist.entropy(), alive),
                }
                loss = (losses["policy_loss"]
                        + VALUE_COEF * (losses["value_loss"]
                                        + BASELINE_COEF * losses["baseline_loss"])
                        - beta * losses["entropy"])
                if not torch.isfinite(loss):
                    raise TrainingDiverged(self._diverged_message("loss"))
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                diagnostics = policy_diagnostics(log_prob.detach(), mb["old_log_prob"], alive,
                                                 epsilon, self.spec.continuous_size)
                for name, val in {**losses, **diagnostics}.items():
                    sums[name] = sums[name] + val.detach()
        if not all(torch.isfinite(p).all() for p in self.params):
            raise TrainingDiverged(self._diverged_message("a parameter"))
        self.updates += 1
        n = hp.num_epoch * n_batches
        return {**{name: float(total) / n for name, total in sums.items()},
                "explained_variance_value": explained_variance(
                    _per_agent(value, returns), returns, ro.alive),
                "explained_variance_baseline": explained_variance(baseline, returns, ro.alive),
                "learning_rate": lr, "epsilon": epsilon, "beta": beta,
                "value_estimate": float(value[ro.alive if per_agent else ro.alive.any(-1)].mean())}

    def _diverged_message(self, what: str) -> str:
        last = self.last_checkpoint or "none written yet"
        return (f"{what} became NaN/inf at agent-step {self.agent_steps} (update "
                f"{self.updates}); training stopped. Last good checkpoint: {last}")

    # --- the loop -------------------------------------------------------------------------------
    def run(self, until=None) -> TrainResult:
        """Train to `max_steps` agent-steps, or until `until(self)` is true after an update.

        With a `run_dir`, the folder is held by this process while it trains (see
        `poca.runfolder.claim`), and a checkpoint is written every `checkpoint_interval`
        agent-steps, at least every `runfolder.SAVE_EVERY_SECONDS`, and on every way out: the end,
        Ctrl-C or SIGTERM (then `interrupted` is set), and an exception from the env or the
        trainer (saved, then re-raised as it was). What is saved is always the state after a
        whole update: a rollout or an update cut short is dropped, never half-counted. A run that
        diverges is not saved; its last good checkpoint stays. In the main thread, SIGINT and
        SIGTERM handlers are replaced while it runs and put back after.
        """
        cfg, folder = self.config, self.run_dir
        fresh = self.last_checkpoint is None and self.agent_steps == 0
        claim = (runfolder.claim(folder, fresh, self.agent_steps) if folder is not None
                 else contextlib.nullcontext())
        with claim, runfolder.Interrupts() as signals:
            if folder is not None:
                (folder / "config.json").write_text(json.dumps(
                    {"env_id": self.env_id, "env_kwargs": self.env_kwargs,
                     "config": cfg.to_dict()}, indent=2, default=repr))
            writer = _MetricsWriter(folder, self.progress, cfg.max_steps, self.agent_steps)
            start, interrupted, diverged, safe = time.perf_counter(), False, False, None
            saved_time = time.monotonic()
            next_summary = (self.agent_steps // cfg.summary_freq + 1) * cfg.summary_freq
            try:
                while self.agent_steps < cfg.max_steps:
                    safe = runfolder.snapshot(self) if folder is not None else None
                    rollout = self.collect()
                    guards.check_rollout(self, rollout)
                    self.agent_steps += rollout.agent_steps
                    try:
                        stats = self.update(rollout)
                    except TrainingDiverged as err:
                        source = guards.non_finite_tensor(self.actor, self.critic)
                        if source is None or source.startswith("a parameter"):
                            raise
                        raise TrainingDiverged(self._diverged_message(source)) from err
                    source = guards.non_finite_tensor(self.actor, self.critic)
                    if source is not None:
                        raise TrainingDiverged(self._diverged_message(source))
                    safe = None  # the live state is whole again
                    guards.warn_reward_scale(self, stats)
                    writer.progress(self, stats)
                    if self.agent_steps >= next_summary or self.agent_steps >= cfg.max_steps:
                        writer.summary(self, stats)
                        next_summary = ((self.agent_steps // cfg.summary_freq + 1)
                                        * cfg.summary_freq)
                    if folder is not None and (
                            self.agent_steps - self._saved_at >= cfg.checkpoint_interval
                            or time.monotonic() - saved_time >= runfolder.SAVE_EVERY_SECONDS):
                        with signals.held():
                            self.save()
                        saved_time = time.monotonic()
                    if until is not None and until(self):
                        break
            except KeyboardInterrupt:
                interrupted = True
            except TrainingDiverged:
                diverged = True
                raise
            finally:
                writer.close()
                if folder is not None and not diverged:
                    with signals.held(then_raise=False):  # a second Ctrl-C waits for this
                        if safe is not None or self._saved_at != self.agent_steps \
                                or self.last_checkpoint is None:
                            self.save(safe)
        done = safe or {"agent_steps": self.agent_steps, "episodes": self.episodes,
                        "episode_log": self.episode_log, "team_log": self.team_log}
        return TrainResult(done["agent_steps"], done["episodes"], list(done["episode_log"]),
                           list(done["team_log"]), time.perf_counter() - start,
                           self.last_checkpoint, interrupted, self.env.pays_group_reward)

    # --- checkpoints ----------------------------------------------------------------------------
    def state(self) -> dict:
        """Everything `load` needs to continue: only tensors and plain values (see
        `poca.checkpoint`)."""
        return {"config": self.config.to_dict(), "env_id": self.env_id,
                "env_kwargs": self.env_kwargs, "spec": checkpoint.spec_dict(self.spec),
                "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "optimizer": self.optimizer.state_dict(), "agent_steps": int(self.agent_steps),
                "updates": int(self.updates), "episodes": int(self.episodes),
                "episode_log": list(self.episode_log), "team_log": list(self.team_log),
                "torch_rng": torch.get_rng_state(), "generator": self.generator.get_state()}

    def save(self, state: dict | None = None) -> Path:
        """Write `state` (default: the current one) as step-N.pt and latest.pt."""
        if self.run_dir is None:
            raise ValueError("this trainer has no run_dir to save checkpoints in")
        state = self.state() if state is None else state
        folder = self.run_dir / "checkpoints"
        path = folder / f"step-{state['agent_steps']:09d}.pt"
        checkpoint.save(path, state)
        checkpoint.save(folder / "latest.pt", state)
        for old in sorted(folder.glob("step-*.pt"))[:-self.config.keep_checkpoints]:
            old.unlink()
        self.last_checkpoint, self._saved_at = path, state["agent_steps"]
        return path

    def load(self, path: str | Path, state: dict | None = None) -> None:
        """Continue from a checkpoint: networks, optimizer, counters and random streams.

        `state`: the checkpoint at `path` when it was already read with `checkpoint.load`."""
        state = checkpoint.load(path, self.spec, state)  # read once, or only checked
        try:
            self.actor.load_state_dict(state["actor"])
            self.critic.load_state_dict(state["critic"])
            self.optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"])
            self.generator.set_state(state["generator"])
        except (RuntimeError, ValueError, KeyError, TypeError) as err:
            raise checkpoint.CheckpointError(
                f"{path} does not fit this network configuration: {checkpoint.one_line(err)}"
            ) from None
        self.agent_steps, self.updates = state["agent_steps"], state["updates"]
        self.episodes, self.episode_log = state["episodes"], list(state["episode_log"])
        self.team_log = list(state["team_log"])
        self.last_checkpoint, self._saved_at = Path(path), self.agent_steps
        # Episodes in flight are not saved: the envs restart from a seed tied to the update count.
        self._start_env(seed=self.config.seed + 1_000_003 * self.updates)


class _MetricsWriter:
    """Progress bar, metrics.csv and (when installed) TensorBoard, from one place."""

    FIELDS = ["agent_steps", "episodes", "mean_group_return", "mean_team_return",
              "agent_steps_per_s", "wall_s",
              "policy_loss", "value_loss", "baseline_loss", "entropy", "value_estimate",
              "approx_kl", "clip_fraction_continuous", "clip_fraction_discrete",
              "explained_variance_value", "explained_variance_baseline",
              "learning_rate", "epsilon", "beta"]

    def __init__(self, run_dir: Path | None, progress: bool, total: int, initial: int):
        self.start, self.start_steps = time.perf_counter(), initial
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="agent-step", unit_scale=True,
                            dynamic_ncols=True)
        self.csv = self.tb = None
        if run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            new = not (run_dir / "metrics.csv").exists()
            self.file = open(run_dir / "metrics.csv", "a", newline="")
            self.csv = csv.DictWriter(self.file, fieldnames=self.FIELDS, restval="")
            if new:
                self.csv.writeheader()
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(run_dir / "tensorboard"))
            except ImportError:
                pass

    def _rate(self, trainer) -> float:
        return (trainer.agent_steps - self.start_steps) / max(time.perf_counter() - self.start,
                                                              1e-9)

    def progress(self, trainer, stats) -> None:
        if self.bar is not None:
            self.bar.update(min(trainer.agent_steps, self.bar.total) - self.bar.n)  # no overshoot
            recent = [r for _, r in trainer.episode_log[-20:]]
            team = trainer.team_log[-20:]
            scores = [("group_return", f"{np.mean(recent):+.3f}" if recent else "n/a"),
                      ("team_return", f"{np.mean(team):+.3f}" if team else "n/a")]
            if not trainer.env.pays_group_reward:  # lead with the score the env is about
                scores.reverse()
            self.bar.set_postfix({"episodes": trainer.episodes, **dict(scores),  # in this order
                                  "kl": f"{stats['approx_kl']:.4f}",
                                  "ev": f"{stats['explained_variance_baseline']:.2f}",
                                  "steps_per_s": f"{self._rate(trainer):,.0f}"})

    def summary(self, trainer, stats) -> None:
        recent = [r for _, r in trainer.episode_log[-20:]]
        row = {"agent_steps": trainer.agent_steps, "episodes": trainer.episodes,
               "mean_group_return": float(np.mean(recent)) if recent else math.nan,
               "mean_team_return": float(np.mean(trainer.team_log[-20:]))
               if trainer.team_log else math.nan,
               "agent_steps_per_s": self._rate(trainer),
               "wall_s": time.perf_counter() - self.start, **stats}
        if self.csv is not None:
            self.csv.writerow(row)
            self.file.flush()
        if self.tb is not None:
            for k, v in row.items():
                if k != "agent_steps":
                    self.tb.add_scalar(k, v, trainer.agent_steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.csv is not None:
            self.file.close()
        if self.tb is not None:
            self.tb.close()


def train(env_id, config: POCAConfig | None = None, env_kwargs: dict | None = None,
          run_dir: str | Path | None = None, resume: bool | dict = False, progress: bool = False,
          max_agents: int | None = None, until=None, force: bool = False) -> TrainResult:
    """Train MA-POCA; the Python API.

    `env_id`: a registered task ("groupenvs/Goal-v0"), a "module:factory" path (imported and
    called: it runs that module's code), or a callable returning a PettingZoo ParallelEnv (or,
    taking `num_envs`, a GroupEnv). `max_agents`: slots for ParallelEnvs that add agents under
    new names. `until(trainer)`: stop early when true. `run_dir` is held by this process while
    it trains; a new run refuses a folder that holds one. `resume`: continue the run in
    `run_dir` (True, or its latest checkpoint already read with `checkpoint.load`) with its own
    config and env arguments; `config`/`env_kwargs` may only change `max_steps` and `threads`
    unless `force`.
    """
    from poca.adapters import make_env

    name = env_id if isinstance(env_id, str) else getattr(env_id, "__qualname__", repr(env_id))
    state, latest = None, None
    if resume is not False:
        if run_dir is None:
            raise ValueError("resume needs the run_dir of the run to continue")
        latest = runfolder.latest_checkpoint(run_dir)
        state = resume if isinstance(resume, dict) else checkpoint.load(latest)
        config, env_kwargs = runfolder.resumed_config(state, config, name, env_kwargs, force)
    config = config or POCAConfig()
    checkpoint.check_plain(dict(env_kwargs or {}), "env_kwargs")
    if config.device != "cpu":
        index = int(config.device.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ValueError(f"device {config.device!r} is not available here (torch "
                             f"{torch.__version__}, {torch.cuda.device_count()} CUDA devices)")
    env = make_env(env_id, config.num_envs, env_kwargs, max_agents,
                   workers=config.num_env_workers)
    try:  # closing stops env worker processes, also when the run fails
        trainer = Trainer(env, config, run_dir, name, env_kwargs, progress)
        if state is not None:
            trainer.load(latest, state)
        return trainer.run(until)
    finally:
        env.close()
