"""The MA-POCA loop: collect a batched rollout, compute returns, update, log, checkpoint.

Read top to bottom, in the order it runs: `run` loops until `max_steps` agent-steps; each pass
`collect`s a rollout (every env stepped with the shared actor until the buffer holds more than
`buffer_size` agent-steps), then `update`s on it: the critic's `_estimates`, per-agent
lambda-returns and counterfactual advantages, and `num_epoch` epochs of minibatch Adam steps at
the `schedules`' learning rate, epsilon and beta. Checkpoints are `poca.checkpoint`'s.
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import os
import time
import traceback
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from envs.core import GroupEnv
from poca import checkpoint, guards, runfolder
from poca.acting import Acting, blank_absent, torch_settings
from poca.adam import Adam
from poca.config import POCAConfig
from poca.curves import LAST, mean_of_last
from poca.loss import (
    clipped_value_loss,
    explained_variance,
    linear_decay,
    masked_mean,
    policy_diagnostics,
    policy_loss,
)
from poca.networks import Actor, Critic, zero_memory
from poca.rollout import (
    Estimates,
    Rollout,
    lambda_returns,
    next_values,
    normalized,
    posthumous_bootstrap,
    team_reward,
    to_units,
)

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """An env reward or observation, a loss, a parameter or a normaliser statistic became
    NaN/inf; the message names the first and the last good checkpoint."""


@dataclass
class TrainResult:
    """What `Trainer.run` (and `train`) hand back: counters, the episode curves, where the last
    checkpoint is."""

    agent_steps: int
    episodes: int
    episode_log: list[tuple[int, float]]  # (agent-steps when it ended, group return)
    team_log: list[float]  # each episode's team return: group + all individual rewards
    wall_seconds: float
    checkpoint: Path | None
    interrupted: bool = False
    pays_group_reward: bool = True  # the env's: False makes the team return the headline

    def finished(self, what: str) -> TrainResult:
        """This result, for callers that judge a whole run (compare, the benchmark); a run cut
        short by Ctrl-C (saved, as always) is raised again as KeyboardInterrupt, not scored."""
        if self.interrupted:
            raise KeyboardInterrupt(f"{what} interrupted at {self.agent_steps:,} agent-steps")
        return self

    def mean_return(self, last: int = LAST) -> float:
        return mean_of_last([r for _, r in self.episode_log[-last:]], last)

    def mean_team_return(self, last: int = LAST) -> float:
        return mean_of_last(self.team_log, last)


def _adam(params, lr: float) -> Adam:
    # not torch.optim.Adam: building any torch.optim optimizer imports torch._dynamo (0.7-1.7 s
    # of every start, measured in poca/adam.py); the same update (checkpoints load either way)
    return Adam(params, lr=lr)


# The joint loss, as ML-Agents' POCA optimizer weighs it (poca/optimizer_torch.py):
# policy + 0.5 * (value + 0.5 * baseline) - beta * entropy.
VALUE_COEF = 0.5
BASELINE_COEF = 0.5


def in_units(estimate: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """An estimate or return in the critic head's units (see `Critic.return_stats`)."""
    return (estimate - mean) / std


def _per_agent(value: Tensor, like: Tensor) -> Tensor:
    """The group value V [*] broadcast to every agent [*, A]; per-agent values as they are."""
    return value if value.dim() == like.dim() else value[..., None].expand_as(like)


class Trainer:
    """MA-POCA on one batched `GroupEnv`: the shared actor, the critic (group value V and the
    counterfactual baselines b_i), one Adam over both, and what persists between updates (the
    env's current step, the actor's and critic's LSTM memories, counters and episode logs).
    `run` trains; `load` continues from a checkpoint."""

    def __init__(self, env: GroupEnv, config: POCAConfig | dict | str | Path,
                 run_dir: str | Path | None = None,
                 env_id: str = "", env_kwargs: dict | None = None, progress: bool = True,
                 max_agents: int | None = None):
        # checked as a file's config is (numpy numbers made plain); num_envs is the env's
        config = POCAConfig.from_dict({**POCAConfig.of(config).to_dict(),
                                       "num_envs": env.num_envs})
        if config.threaded:
            warnings.warn("threaded: true (an ML-Agents setting) does nothing here: collection "
                          "and updates take turns, each update on the newest policy",
                          stacklevel=2)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)  # the CPUs this process may use
        if config.threads > cpus:
            warnings.warn(f"threads: {config.threads} torch threads on {cpus} CPUs wait on "
                          "each other (1000 on 2 CPUs trained about 150x slower); use at most "
                          f"{cpus}", RuntimeWarning, stacklevel=2)
        _check_device(config.device)
        self.env, self.spec, self.config = env, env.spec, config
        self.buffer_size, self.batch_size = config.rollout_sizes(env.spec.num_agents)
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.max_agents = max_agents  # as made (saved, so that eval, play and resume make it so)
        self.device = torch.device(config.device)
        net = config.network_settings
        if isinstance(run_dir, str) and not run_dir.strip():  # an unset variable, not "none"
            raise ValueError("run_dir is empty: give a folder, or None for no run folder")
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.progress = progress
        self.agent_steps = self.updates = self.episodes = 0
        self.episode_log: list[tuple[int, float]] = []
        self.team_log: list[float] = []
        self.last_checkpoint: Path | None = None
        self._saved_at = 0
        self._config_unsaved = False  # resumed with a config its checkpoint does not hold
        self._env_restart: int | None = None  # the seed the envs start over from at the next run
        # [|individual rewards| summed, episodes ended with a team return of 0] until an
        # episode's is not 0 (see `_warn_if_rewards_cancel`); None once decided
        self._cancel_watch: list | None = [0.0, 0]
        self._peak_reward = 0.0
        # the seed's initial weights, drawn without touching the caller's global generator
        with torch_settings(config.threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            self.actor = Actor(self.spec, net).to(self.device)
            self.critic = Critic(self.spec, net, config.critic).to(self.device)
            self.params = list(self.actor.parameters()) + list(self.critic.parameters())
            self.optimizer = _adam(self.params, config.hyperparameters.learning_rate)
            self.generator = torch.Generator(self.device).manual_seed(config.seed)
            self.acting = Acting(self.actor, env.num_envs, self.spec.num_agents, self.device,
                                 self.generator)
            self._start_env(seed=config.seed)

    def _start_env(self, seed: int) -> None:
        self._step = self.env.reset(seed=seed)
        self._group_return = np.zeros(self.env.num_envs)
        self._team_return = np.zeros(self.env.num_envs)
        self.acting.reset()
        # with memory: one LSTM state per env for V and each b_i (None without)
        self._critic_memory = zero_memory(self.critic.memory, self.env.num_envs,
                                          1 + self.spec.num_agents, device=self.device)

    # --- the loop -------------------------------------------------------------------------------
    def run(self, until=None, starting=None) -> TrainResult:
        """Train to `max_steps` agent-steps, or until `until(self)` is true after an update;
        `starting(self)` is called first, once the run folder is claimed.

        With a `run_dir`, the folder is held by this process while it trains (see
        `poca.runfolder.claim`), and a checkpoint is written every `checkpoint_interval`
        agent-steps, at least every `runfolder.SAVE_EVERY_SECONDS`, and on every way out: the end,
        Ctrl-C, SIGTERM or SIGHUP (then `interrupted` is set), and an exception from the env or
        the trainer (saved, then re-raised as it was). What is saved is always the state after a
        whole update: a rollout or an update cut short is dropped, never half-counted (and the
        envs start over at the next `run`). A run that diverges is not saved; its last good
        checkpoint stays. In the main thread, the handlers of those signals are replaced while
        it runs and put back after.
        """
        cfg, folder = self.config, self.run_dir
        if self._env_restart is not None:  # out of the folder's lock and the signal handlers:
            # env workers started over are new processes, which must inherit neither
            with torch_settings(cfg.threads):
                self._start_env(seed=self._env_restart)
            self._env_restart = None
        fresh = self.last_checkpoint is None and self.agent_steps == 0
        claim = (runfolder.claim(folder, fresh, self.agent_steps) if folder is not None
                 else contextlib.nullcontext())
        cut: dict = {}  # filled with the state to go back to when Ctrl-C cut an update short
        try:
            return self._run(cfg, folder, claim, until, starting, cut)
        finally:
            if cut:  # this object goes back too, so that run() again goes on from what was
                # saved, never from half an update; its envs start over, as after load, when
                # run() is called again (not now: a stopped run is mostly closed next, and
                # rebuilding every env copy first could take long, or fail, after Ctrl-C)
                with torch_settings(cfg.threads):
                    checkpoint.put_back(self, cut, "the state before the last update")
                self._env_restart = cfg.seed + 1_000_003 * self.updates

    def _run(self, cfg, folder, claim, until, starting, cut: dict) -> TrainResult:
        """`run` in its folder, with Ctrl-C, SIGTERM and SIGHUP caught; on an interrupt, `cut`
        gets the state saved before the update it cut short."""
        with claim, runfolder.Interrupts() as signals, torch_settings(cfg.threads):
            if folder is not None:
                # "config" as given (None: derived); "derived": what the run uses for those
                runfolder.write_atomically(folder / "config.json", json.dumps(
                    {"env_id": self.env_id, "env_kwargs": self.env_kwargs,
                     "max_agents": self.max_agents, "config": cfg.to_dict(),
                     "derived": {"buffer_size": self.buffer_size, "batch_size": self.batch_size,
                                 **cfg.hyperparameters.schedules()}},
                    indent=2, default=repr))
            if starting is not None:
                starting(self)
            writer = _MetricsWriter(folder, self.progress, cfg.max_steps, self.agent_steps)
            start, interrupted, diverged, safe = time.perf_counter(), False, False, None
            row = None  # the last update's metrics row, until written
            saved_time = time.monotonic()
            next_summary = (self.agent_steps // cfg.summary_freq + 1) * cfg.summary_freq
            try:
                while self.agent_steps < cfg.max_steps:
                    safe = runfolder.snapshot(self)
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
                    update_row = writer.row(self, stats)
                    # the live state is whole again, and this is its metrics row: both set in
                    # one statement, so that a stop saves and logs the same state
                    safe, row = None, update_row
                    guards.warn_reward_scale(self, stats)
                    writer.progress(self, stats)
                    if self.agent_steps >= next_summary or self.agent_steps >= cfg.max_steps:
                        with signals.held():  # a stop waits for the row (TensorBoard's too)
                            writer.write(row)
                            row = None
                        next_summary = ((self.agent_steps // cfg.summary_freq + 1)
                                        * cfg.summary_freq)
                    if folder is not None and (
                            self.agent_steps - self._saved_at >= cfg.checkpoint_interval
                            or time.monotonic() - saved_time >= runfolder.SAVE_EVERY_SECONDS):
                        with signals.held():
                            checkpoint.save_trainer(self)
                        saved_time = time.monotonic()
                    if until is not None and until(self):
                        break
            except KeyboardInterrupt:
                interrupted = True
                cut.update(safe or {})  # also when the save below fails
            except TrainingDiverged:
                diverged = True
                raise
            finally:
                try:  # a run stopped between summaries ends with the row of the state it saves
                    writer.close(last_row=None if diverged else row)
                finally:  # saved even when the metrics cannot be written (a full disk)
                    if folder is not None and not diverged:
                        with signals.held(then_raise=False):  # a second Ctrl-C waits for this
                            if safe is not None or self._saved_at != self.agent_steps \
                                    or self.last_checkpoint is None or self._config_unsaved:
                                checkpoint.save_trainer(self, safe)
        done = safe or {"agent_steps": self.agent_steps, "episodes": self.episodes,
                        "episode_log": self.episode_log, "team_log": self.team_log}
        return TrainResult(agent_steps=done["agent_steps"], episodes=done["episodes"],
                           episode_log=list(done["episode_log"]), team_log=list(done["team_log"]),
                           wall_seconds=time.perf_counter() - start,
                           checkpoint=self.last_checkpoint, interrupted=interrupted,
                           pays_group_reward=self.env.pays_group_reward)

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
            if self._cancel_watch is not None:
                self._cancel_watch[0] += float(np.abs(after.reward).sum())
            env_cols["group_done"].append(after.group_done)
            env_cols["group_truncated"].append(after.group_truncated)
            if after.group_truncated.any():
                rows = np.flatnonzero(after.group_truncated)
                final_obs.append([view[rows] for view in after.final_obs])
                final_alive.append(after.truncated[rows])
            collected += int(step.alive.sum())
            self._log_episodes(after, self.agent_steps + collected)
            step = after
        self._step = step
        self._warn_if_rewards_cancel()
        device = self.device
        final_alive = (torch.as_tensor(np.concatenate(final_alive), device=device) if final_alive
                       else torch.zeros((0, self.spec.num_agents), dtype=torch.bool,
                                        device=device))
        rollout = Rollout(
            obs=[torch.stack(component) for component in zip(*obs, strict=False)],
            **{name: None if col[0] is None else torch.stack(col)
               for name, col in acted_cols.items()},
            **{name: torch.as_tensor(np.stack(col), device=device)
               for name, col in env_cols.items()},
            next_obs=blank_absent(step.obs, torch.as_tensor(step.alive, device=device)),
            next_alive=torch.as_tensor(step.alive, device=device),
            next_group_start=~self.acting.group_continuing,
            final_obs=blank_absent([np.concatenate(component)
                                    for component in zip(*final_obs, strict=False)], final_alive),
            final_alive=final_alive)
        # the largest team reward in size, named if training diverges (huge rewards overflow)
        self._peak_reward = max(self._peak_reward, float(rollout.team_reward.abs().max()))
        return rollout

    def _warn_if_rewards_cancel(self) -> None:
        """Every agent learns from the team reward, the sum of all rewards: in a zero-sum game
        (tictactoe: +1 for the winner, -1 for the loser) every episode's sum is 0 and the run
        learns nothing. Logged once, after `LAST` episodes that all summed to 0 while the agents'
        rewards were not all 0; an episode whose team return is not 0 ends the watch.
        """
        watch = self._cancel_watch
        if watch is not None and watch[1] >= LAST and watch[0] > 0:
            self._cancel_watch = None
            # logged, not warned: nothing is wrong with the call, and a test suite that runs
            # warnings as errors must not fail on a game it trains on purpose
            log.warning(f"the agents' rewards are not all 0, but each of the {watch[1]} "
                        "episodes so far summed to 0: every agent learns from the team reward, "
                        "their sum, so until an episode sums to something else this run learns "
                        "nothing, and in a zero-sum game (one agent's win is another's loss) "
                        "none will. POCA trains agents that cooperate")

    def _log_episodes(self, step, agent_steps: int) -> None:
        """Add the step's rewards to each env's running returns; log the episodes it ended."""
        self._group_return += step.group_reward
        self._team_return += step.group_reward + step.reward.sum(axis=1)
        for env_index in np.flatnonzero(step.group_done):
            self.episode_log.append((agent_steps, float(self._group_return[env_index])))
            self.team_log.append(float(self._team_return[env_index]))
            if self._cancel_watch is not None:
                if self.team_log[-1] != 0:
                    self._cancel_watch = None
                else:
                    self._cancel_watch[1] += 1
            self._group_return[env_index] = self._team_return[env_index] = 0.0
            self.episodes += 1

    # --- learning -------------------------------------------------------------------------------
    @torch.no_grad()
    def _estimates(self, ro: Rollout) -> Estimates:
        """The critic over the whole rollout in one pass through time, carrying its memory over
        from the last rollout (see `Estimates`)."""
        stream_starts = torch.cat([ro.group_starts[..., None], ro.starts], -1)
        value, baseline, (memory_before, memory_after) = self.critic(
            ro.obs, ro.cont, ro.disc, ro.alive, self._critic_memory, stream_starts)
        last_memory = value_memory = None  # after the last step; the V stream's after each step
        if memory_after is not None:
            last_memory, value_memory = memory_after[-1], memory_after[..., 0, :]
        self._critic_memory = last_memory
        bootstrap, _ = self.critic.value(  # V after the last step, as a one-step sequence
            [view[None] for view in ro.next_obs], ro.next_alive[None],
            None if last_memory is None else last_memory[:, 0], ro.next_group_start[None])
        final_value = value.new_zeros((1, 0, *value.shape[2:]))  # [1, n] or per agent [1, n, A]
        if ro.final_obs:  # time-limit endings: V of the final view, from the memory that the
            # truncated step left behind (not the one zeroed for the next episode)
            final_value, _ = self.critic.value(
                [view[None] for view in ro.final_obs], ro.final_alive[None],
                None if value_memory is None else value_memory[ro.group_truncated],
                torch.zeros(1, len(ro.final_alive), dtype=torch.bool, device=self.device))
        next_value = next_values(value, bootstrap[0], final_value[0], ro.group_done,
                                 ro.group_truncated)
        return Estimates(value=value, baseline=baseline, next_value=next_value,
                         critic_memory=memory_before, stream_starts=stream_starts)

    def update(self, ro: Rollout) -> dict[str, float]:
        """One MA-POCA update on a rollout: returns, advantages, then `num_epoch` epochs of
        clipped-surrogate minibatch steps for the actor, V and the baselines together.
        Returns what metrics.csv logs: the losses averaged over minibatch steps, and PPO's
        diagnostics (approx. KL, clip fraction, ...) over every sample the update saw."""
        cfg, hp = self.config, self.config.hyperparameters
        # 1. Normalizer statistics see the new observations first (as in ML-Agents).
        if cfg.network_settings.normalize:
            for net in (self.actor, self.critic):
                net.encoder.update_normalizers(ro.obs, ro.alive)

        # 2. The critic's estimates, per-agent lambda-returns and counterfactual advantages.
        est = self._estimates(ro)
        reward = ro.team_reward * cfg.reward_signals.extrinsic.strength
        per_agent = est.next_value.dim() == ro.alive.dim()  # critic: independent, V_i [T, E, A]
        bootstrap = est.next_value if per_agent else posthumous_bootstrap(  # V_i = 0 once i left
            est.next_value, ro.alive, ro.group_done)
        returns = lambda_returns(reward, est.value, bootstrap, ro.alive, ro.group_done,
                                 cfg.reward_signals.extrinsic.gamma, hp.lambd, cfg.time_horizon)
        advantage = normalized(returns - est.baseline, ro.alive)
        # V and the baselines are fitted as the head sees them: in units of the returns' running
        # statistics (mean 0 and std 1 unless normalize_value), the old estimates in the units
        # they were made in, so that value clipping bounds how far the network moves.
        old_units = self.critic.return_stats()
        self.critic.update_return_stats(returns, ro.alive)
        new_units = self.critic.return_stats()

        # 3. Minibatch units: sequences of `length` steps of one env (single steps without
        # memory), each starting from the memories stored for its first step. A sequence longer
        # than the rollout would only add padding (masked, after the real steps): the same
        # update at up to sequence_length / T times the cost.
        memory = cfg.network_settings.memory
        length = min(memory.sequence_length, len(ro.alive)) if memory is not None else 1
        units = {name: to_units(tensor, length) for name, tensor in {
            "alive": ro.alive, "cont": ro.cont, "disc": ro.disc, "mask": ro.action_mask,
            "old_log_prob": ro.log_prob, "old_value": in_units(est.value, *old_units),
            "old_baseline": in_units(est.baseline, *old_units),
            "returns": in_units(returns, *new_units),
            "advantage": advantage, "starts": ro.starts,
            "stream_starts": est.stream_starts}.items()}
        obs_units = [to_units(view, length) for view in ro.obs]
        first_memory = {name: None if tensor is None else to_units(tensor, length)[:, 0]
                        for name, tensor in (("actor", ro.actor_memory),
                                             ("critic", est.critic_memory))}

        def time_major(tensor, idx):  # units [n, L, ...] -> minibatch [L, len(idx), ...]
            return None if tensor is None else tensor[idx].transpose(0, 1)

        # 4. Epochs of minibatch steps on the joint loss, at the scheduled lr, epsilon and beta.
        lr, epsilon, beta = self.schedules()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        n_batches = max(1, ro.agent_steps // self.batch_size)
        step_losses = []  # the four losses of each minibatch step, stacked
        seen = []  # (new log-prob, old log-prob, alive) of each step, for the diagnostics
        for _ in range(hp.num_epoch):
            order = torch.randperm(len(units["alive"]), generator=self.generator,
                                   device=self.device)
            for idx in order.chunk(n_batches):
                mb = {name: time_major(tensor, idx) for name, tensor in units.items()}
                mb_obs = [time_major(view, idx) for view in obs_units]
                mb_memory = {name: None if tensor is None else tensor[idx]
                             for name, tensor in first_memory.items()}
                alive, mb_returns = mb["alive"], mb["returns"]
                dist, _ = self.actor(mb_obs, mb["mask"], mb_memory["actor"], mb["starts"])
                new_value, new_baseline, _ = self.critic(
                    mb_obs, mb["cont"], mb["disc"], alive, mb_memory["critic"],
                    mb["stream_starts"])
                new_value, new_baseline = (in_units(new, *new_units)
                                           for new in (new_value, new_baseline))
                log_prob = dist.log_prob(mb["cont"], mb["disc"])
                losses = {
                    "policy_loss": policy_loss(log_prob, mb["old_log_prob"], mb["advantage"],
                                               alive, epsilon),
                    # V is the group's estimate, regressed on each agent's return
                    "value_loss": clipped_value_loss(
                        _per_agent(new_value, mb_returns), _per_agent(mb["old_value"], mb_returns),
                        mb_returns, alive, epsilon),
                    "entropy": masked_mean(dist.entropy(), alive),
                }
                if not per_agent:  # critic: independent has no b_i (V_i is its baseline)
                    losses["baseline_loss"] = clipped_value_loss(
                        new_baseline, mb["old_baseline"], mb_returns, alive, epsilon)
                loss = (losses["policy_loss"]
                        + VALUE_COEF * (losses["value_loss"]
                                        + BASELINE_COEF * losses.get("baseline_loss", 0.0))
                        - beta * losses["entropy"])
                if not torch.isfinite(loss):
                    raise TrainingDiverged(self._diverged_message("loss"))
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                step_losses.append(torch.stack(list(losses.values())).detach())
                seen.append((log_prob.detach(), mb["old_log_prob"], alive))

        # 5. Check the parameters; report the means and how well the critic explains returns.
        if not all(torch.isfinite(param).all() for param in self.params):
            raise TrainingDiverged(self._diverged_message("a parameter"))
        self.updates += 1
        # PPO's diagnostics over every sample of every step at once (one pass, not one per step)
        new_log_prob, old_log_prob, seen_alive = (torch.cat([t.flatten(0, 1) for t in parts])
                                                  for parts in zip(*seen, strict=True))
        diagnostics = policy_diagnostics(new_log_prob, old_log_prob, seen_alive, epsilon,
                                         self.spec.continuous_size)
        value, baseline = est.value, est.baseline
        # the mean over the steps taken (chunk() may give fewer than n_batches for few units)
        return {**dict(zip(losses, torch.stack(step_losses).mean(0).tolist(), strict=True)),
                **{name: float(metric) for name, metric in diagnostics.items()},
                "explained_variance_value": explained_variance(
                    _per_agent(value, returns), returns, ro.alive),
                **({} if per_agent else {"explained_variance_baseline": explained_variance(
                    baseline, returns, ro.alive)}),
                "learning_rate": lr, "epsilon": epsilon, "beta": beta,
                "value_estimate": float(value[ro.alive if per_agent else ro.alive.any(-1)].mean())}

    def schedules(self) -> tuple[float, float, float]:
        """(learning rate, epsilon, beta) at the current agent-step count: each constant or
        decaying linearly to its floor at `max_steps`, as ML-Agents schedules them
        (`Hyperparameters.schedules`)."""
        hp = self.config.hyperparameters

        def scheduled(kind: str, initial: float, floor: float) -> float:
            if kind == "constant":
                return initial
            return linear_decay(initial, floor, self.agent_steps, self.config.max_steps)

        kinds = hp.schedules()
        return (scheduled(kinds["learning_rate_schedule"], hp.learning_rate, 1e-10),
                scheduled(kinds["epsilon_schedule"], hp.epsilon, 0.1),
                scheduled(kinds["beta_schedule"], hp.beta, 1e-5))

    def _diverged_message(self, what: str) -> str:
        last = self.last_checkpoint or "none written yet"
        peak = self._peak_reward
        scale = "" if peak < 1e6 else (  # returns and squared errors overflow float32
            f"; the team rewards reached {peak:.3g} a step: scale them down (e.g. "
            "reward_signals.extrinsic.strength)")
        return (f"{what} became NaN/inf at agent-step {self.agent_steps} (update "
                f"{self.updates}); training stopped. Last good checkpoint: {last}{scale}")

    # --- checkpoints (the I/O is poca/checkpoint.py's) ----------------------------------------
    def load(self, path: str | Path, state: dict | None = None) -> None:
        """Continue from a checkpoint: networks, optimizer, counters and random streams.

        `state`: the checkpoint at `path` when it was already read with `checkpoint.load`."""
        with torch_settings(self.config.threads):
            checkpoint.restore(self, path, state)
            # Episodes in flight are not saved: the envs restart from a seed tied to the update
            # count.
            self._start_env(seed=self.config.seed + 1_000_003 * self.updates)
            self._env_restart = None


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
        # a resumed run's wall_s goes on from where metrics.csv (truncated to the checkpoint)
        # left off, so that its curves over wall time stay one curve
        self.wall_before = 0.0 if run_dir is None else runfolder.last_wall_seconds(
            run_dir / "metrics.csv")
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="agent-step", unit_scale=True,
                            dynamic_ncols=True)
        self.csv = self.tb = None
        if run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            path = run_dir / "metrics.csv"
            new = not path.exists() or path.stat().st_size == 0  # empty: killed before a row
            self.file = open(path, "a", newline="")
            self.csv = csv.DictWriter(self.file, fieldnames=self.FIELDS, restval="")
            if new:
                self.csv.writeheader()
                self.file.flush()  # a kill before the first row leaves a run's file, not ""
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # not installed: metrics.csv alone
                SummaryWriter = None
            except Exception as err:  # installed but broken (protobuf's TypeError, say): the
                SummaryWriter = None  # run must not die for its logs
                warnings.warn(f"TensorBoard logs are off: importing it failed ("
                              f"{type(err).__name__}: {err}); metrics.csv is written as usual",
                              RuntimeWarning, stacklevel=2)
            if SummaryWriter is not None:
                # events past the run's checkpoint (of a killed process, or of a run that died
                # before its first checkpoint) are hidden, as metrics.csv drops those rows
                self.tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=initial + 1)

    def _rate(self, trainer) -> float:
        return (trainer.agent_steps - self.start_steps) / max(time.perf_counter() - self.start,
                                                              1e-9)

    def progress(self, trainer, stats) -> None:
        if self.bar is not None:
            self.bar.update(min(trainer.agent_steps, self.bar.total) - self.bar.n)  # no overshoot
            scores = [("group_return", _shown(_mean_group_return(trainer))),
                      ("team_return", _shown(mean_of_last(trainer.team_log)))]
            if not trainer.env.pays_group_reward:  # lead with the score the env is about
                scores.reverse()
            # how well the baselines explain the returns (V_i's, for critic: independent)
            ev = stats.get("explained_variance_baseline", stats.get("explained_variance_value"))
            self.bar.set_postfix({"episodes": trainer.episodes, **dict(scores),  # in this order
                                  "kl": f"{stats['approx_kl']:.4f}", "ev": f"{ev:.2f}",
                                  "steps_per_s": f"{self._rate(trainer):,.0f}"})

    def row(self, trainer, stats) -> dict:
        """metrics.csv's row for the trainer's state after an update with these `stats`."""
        row = {"agent_steps": trainer.agent_steps, "episodes": trainer.episodes,
               "mean_group_return": _mean_group_return(trainer),
               "mean_team_return": mean_of_last(trainer.team_log),
               "agent_steps_per_s": self._rate(trainer),
               "wall_s": self.wall_before + time.perf_counter() - self.start, **stats}
        # a value that does not exist is an empty cell (and no TensorBoard point): a mean over
        # no episode yet, the explained variance of returns that do not vary (no reward yet)
        return {name: "" if isinstance(value, float) and math.isnan(value) else value
                for name, value in row.items()}

    def write(self, row: dict) -> None:
        if self.csv is not None:
            self.csv.writerow(row)
            self.file.flush()
        if self.tb is not None:
            for name, number in row.items():
                if name != "agent_steps" and number != "":
                    self.tb.add_scalar(name, number, row["agent_steps"])

    def close(self, last_row: dict | None = None) -> None:
        """Write `last_row` (if any), then close the outputs, also when that write fails."""
        try:
            if last_row is not None:
                self.write(last_row)
        finally:
            if self.bar is not None:
                self.bar.close()
            if self.csv is not None:
                self.file.close()
            if self.tb is not None:
                self.tb.close()


def _check_device(device: str) -> None:
    if device != "cpu":
        index = int(device.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r} is not available here (torch "
                             f"{torch.__version__}, {torch.cuda.device_count()} CUDA devices)")


def _mean_group_return(trainer) -> float:
    return mean_of_last([r for _, r in trainer.episode_log[-LAST:]])


def _shown(mean: float) -> str:
    return "n/a" if math.isnan(mean) else f"{mean:+.3f}"


def train(env_id, config: POCAConfig | dict | str | Path | None = None,
          env_kwargs: dict | None = None,
          run_dir: str | Path | None = None, resume: bool | dict = False, progress: bool = False,
          max_agents: int | None = None, until=None, force: bool = False,
          starting=None) -> TrainResult:
    """Train MA-POCA; the Python API.

    `env_id`: a registered task ("groupenvs/Goal-v0"), a "module:factory" path (imported and
    called: it runs that module's code), or a callable returning a PettingZoo ParallelEnv (or,
    taking `num_envs`, a GroupEnv). `config`: a `POCAConfig`, a dict of settings, a YAML file or
    bundled preset name ("goal"), or None for the defaults; on resume, None keeps the run's
    own, and a dict holds only the settings to change (`{"max_steps": 200_000}`), laid over
    the run's own. `max_agents`: slots for
    ParallelEnvs that add agents under new names. `until(trainer)`: stop early when true.
    `starting(trainer)`: called once the env, the networks and the run folder are made and
    checked, before training (the CLI says what it trains there, so that bad input is its only
    output). `run_dir` is held by this process while it trains; a new run refuses a folder that
    holds one. `resume`: continue the run in
    `run_dir` (True, or its latest checkpoint already read with `checkpoint.load`) with its own
    config, env arguments and `max_agents`; `config`/`env_kwargs`/`max_agents` may only change
    `runfolder.RESUMABLE` settings (max_steps, threads, num_env_workers, device) unless
    `force`.
    """
    from poca.adapters import env_name, make_env, recorded_as

    name = env_name(env_id)
    if isinstance(resume, np.bool_):
        resume = bool(resume)
    if not isinstance(resume, (bool, dict)):
        raise TypeError(f"resume must be True, False or a checkpoint's state (a dict), got "
                        f"{resume!r}")
    resuming = resume is not False
    if not (resuming and isinstance(config, dict)):  # on resume a dict is laid over the run's
        config = None if config is None else POCAConfig.of(config)  # None: the run's, on resume
    state, latest = None, None
    if resuming:
        if run_dir is None:
            raise ValueError("resume needs the run_dir of the run to continue")
        latest = runfolder.latest_checkpoint(run_dir)
        state = resume if isinstance(resume, dict) else checkpoint.load(latest)
        name = recorded_as(env_id, name, str(state.get("env_id")))
        config, env_kwargs, max_agents = runfolder.resumed_config(state, config, name, env_kwargs,
                                                                  max_agents, force)
    config = POCAConfig.from_dict((config or POCAConfig()).to_dict())  # checked as a file is
    checkpoint.check_plain(dict(env_kwargs or {}), "env_kwargs")
    _check_device(config.device)  # before any env worker starts
    env = make_env(env_id, config.num_envs, env_kwargs, max_agents,
                   workers=config.num_env_workers)
    try:  # closing stops env worker processes, also when the run fails
        trainer = Trainer(env, config, run_dir, name, env_kwargs, progress, max_agents)
        if state is not None:  # --force also takes agents in other slots than the run's
            trainer.load(latest, {k: v for k, v in state.items()
                                  if not (force and k == "slot_names")})
        return trainer.run(until, starting)
    finally:
        try:
            env.close()
        except Exception as err:  # the run is saved: its result (or its own error) comes first
            log.warning("closing the env failed after training: %s",
                        "".join(traceback.format_exception(err)).rstrip())
