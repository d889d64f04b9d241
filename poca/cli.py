"""`poca train | eval | play | compare`: MA-POCA from the command line.

    poca train groupenvs/Goal-v0 --config goal
    poca eval groupenvs/Goal-v0 --checkpoint runs/.../checkpoints/latest.pt --episodes 100
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import sys
import sysconfig
import time
from pathlib import Path

import yaml

from poca.config import POCAConfig, _UniqueKeyLoader

# torch and the envs are imported by the commands that use them, so --help starts at once

ENV_HELP = ("groupenvs/Goal-v0, Goal-v0, or module:factory: a PettingZoo ParallelEnv factory, "
            "or a GroupEnv factory taking num_envs. A module:factory ID imports that module "
            "(the current directory is searched too) and calls factory(**env_kwargs): it runs "
            "that code, so use only modules you trust")
PACKAGE_DIRS = tuple(str(Path(__file__).resolve().parent.parent / d) + os.sep
                     for d in ("poca", "envs"))
STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


def _json_dict(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"num_agents\": 3}'")
    return value


def _positive(text: str) -> int:
    value = int(text)  # argparse turns a ValueError into "invalid _positive value"
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _assignment(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("must look like key=value, e.g. "
                                         "hyperparameters.learning_rate=1e-3")
    try:  # a key twice in a mapping is refused, as in config files
        return key, yaml.load(value, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as err:
        raise argparse.ArgumentTypeError(f"{key}: the value {value!r} is not valid YAML ("
                                         f"{str(err).splitlines()[0]})") from None


def settings(pairs: list[tuple[str, object]], args=None,
             flags: tuple[tuple[str, str], ...] = ()) -> dict:
    """--set's KEY=VALUE pairs as a dict, with the `flags` given in `args` ((flag, config
    key) pairs); a key given twice, or as a flag and with --set, is an error (the last would win
    silently)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"--set {key} is given twice ({out[key]!r} and {value!r}): give it "
                             "once")
        out[key] = value
    for flag, key in flags:
        if getattr(args, flag) is not None:
            if key in out:
                raise ValueError(f"both --{flag.replace('_', '-')} and --set {key}=... given; "
                                 "give one")
            out[key] = getattr(args, flag)
    return out


def _config_source(text: str) -> str:
    """--config's value: an empty one (an unset shell variable) is an error, not the defaults."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a YAML file or a preset name, or leave "
                                         "--config out for the defaults")
    return text


def path_argument(text: str) -> Path:
    """A path option's value: an empty one (an unset shell variable) would be the current
    folder, where a run would write its files among the user's."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a path")
    return Path(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="poca", description="MA-POCA for groupenvs' tasks, "
                                     "any PettingZoo ParallelEnv and any GroupEnv.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a group policy")
    train.add_argument("env_id", help=ENV_HELP)
    train.add_argument("--env-kwargs", type=_json_dict, help="task arguments (JSON); on "
                       "--resume, default: the run's")
    train.add_argument("--config", type=_config_source, help="YAML file (ML-Agents layout) or "
                       "a bundled preset: goal, grid (the paper's tasks), pettingzoo (PettingZoo "
                       "tasks), "
                       "mlagents_test; without it, the defaults (README: Defaults)")
    train.add_argument("--num-envs", type=int, help="groups stepped at once")
    train.add_argument("--max-steps", type=int, help="agent-steps to train for")
    train.add_argument("--seed", type=int)
    train.add_argument("--run-dir", type=path_argument, help="default: runs/<env>/<time>")
    train.add_argument("--resume", action="store_true", help="continue the run in --run-dir "
                       "with its saved config; only --max-steps, --threads, --device, "
                       "--env-workers and --no-progress may differ")
    train.add_argument("--force", action="store_true", help="with --resume: allow changing "
                       "other settings of the run")
    train.add_argument("--device", help="cpu, cuda or cuda:N")
    train.add_argument("--threads", type=int, help="torch CPU threads (default 1)")
    train.add_argument("--env-workers", type=int, help="processes stepping a PettingZoo env's "
                       "copies in parallel (default 0: in this process)")
    train.add_argument("--set", type=_assignment, action="append", default=[],
                       metavar="KEY=VALUE", help="any config key, e.g. network_settings."
                       "hidden_units=64 (repeatable)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--max-agents", type=int, help="agent slots, for PettingZoo envs that "
                       "add agents under new names")

    ev = _checkpoint_parser(sub, "eval", "mean and spread of a checkpoint's return (the group "
                            "return; the team return for envs that pay no group reward)",
                            episodes=100, seed=12345)
    ev.add_argument("--deterministic", action="store_true", help="most likely actions")
    ev.add_argument("--json", action="store_true", help="print one JSON object")

    pl = _checkpoint_parser(sub, "play", "watch or record a trained group", episodes=3, seed=0)
    pl.add_argument("--render", choices=["human"], help="show a window")
    pl.add_argument("--record", type=path_argument,
                    help="write a .gif (needs Pillow) or .mp4 (imageio)")
    pl.add_argument("--deterministic", action="store_true", help="most likely actions")
    from poca import compare  # poca compare: the paper's critic comparison (poca/compare.py)

    compare.add_parser(sub)
    return parser


def _checkpoint_parser(sub, name: str, summary: str, episodes: int, seed: int):
    """The arguments `eval` and `play` share: which env, which checkpoint, how many episodes."""
    parser = sub.add_parser(name, help=summary)
    parser.add_argument("env_id", help=ENV_HELP)
    parser.add_argument("--checkpoint", type=path_argument, required=True)
    parser.add_argument("--episodes", type=int, default=episodes)
    parser.add_argument("--env-kwargs", type=_json_dict,
                        help="default: those it was trained with; given, they replace those "
                        "whole")
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--max-agents", type=int, help="default: as it was trained with")
    parser.add_argument("--max-episode-steps", type=_positive, help="truncate each episode after N "
                        "steps: for PettingZoo envs with no time limit of their own, whose "
                        "episodes would otherwise never end")
    return parser


def _play(args) -> int:
    from envs.core import check_int
    from poca import checkpoint
    from poca.adapters import make_env
    from poca.evaluate import load_actor, play

    check_int("--episodes", args.episodes, 1)
    check_int("--seed", args.seed, 0, 2**32 - 1)
    if args.render is None and args.record is None:
        raise ValueError("give --render human and/or --record FILE.gif (or .mp4)")
    state = checkpoint.load(args.checkpoint)
    # module:factory envs are made with render_mode="rgb_array"; copy 0 is shown
    env = make_env(args.env_id, 1, _env_kwargs(args, state), _max_agents(args, state),
                   render_mode="rgb_array", max_episode_steps=args.max_episode_steps)
    def episode_done(i: int, group: float, team: float) -> None:  # as each ends
        # a PettingZoo env shows whether it pays a group reward in its infos: known by now
        name, other = _scores(env.pays_group_reward)
        scores = {"group return": group, "team return": team}
        print(f"episode {i}: {name} {scores[name]:+.3f}; {_named(other)} {scores[other]:+.3f}",
              flush=True)

    try:
        play(load_actor(args.checkpoint, env, state), env, args.episodes, args.seed,
             args.render, args.record, episode_done=episode_done,
             deterministic=args.deterministic)
    except KeyboardInterrupt:
        if args.record and Path(args.record).exists():  # written by play: say where
            print(f"recorded what was played before the interrupt: {args.record}")
        raise
    if args.record:
        print(f"recorded {args.record}")
    return 0


def _env_kwargs(args, state: dict) -> dict:
    """--env-kwargs, or those the checkpoint was trained with. Given ones replace the trained
    ones whole (another env takes other arguments); the trained arguments this leaves out are
    named on stderr, so that none is dropped unseen."""
    trained = state["env_kwargs"]
    if args.env_kwargs is None:
        return trained
    left_out = {k: v for k, v in trained.items() if k not in args.env_kwargs}
    if left_out:
        print(f"note: --env-kwargs replaces the arguments it was trained with; not given now: "
              f"{left_out}", file=sys.stderr)
    return args.env_kwargs


def _max_agents(args, state: dict) -> int | None:
    """--max-agents, or the agent slots the checkpoint was trained with."""
    return state.get("max_agents") if args.max_agents is None else args.max_agents


def _train(args) -> int:
    from poca import checkpoint
    from poca.curves import LAST
    from poca.trainer import TrainingDiverged, train

    overrides = settings(args.set, args, (
        ("num_envs", "num_envs"), ("max_steps", "max_steps"), ("seed", "seed"),
        ("device", "device"), ("threads", "threads"), ("env_workers", "num_env_workers")))
    state, resumed_from = None, 0
    if args.resume:
        if args.run_dir is None:
            raise ValueError("--resume needs the --run-dir of the run to continue")
        from poca import runfolder

        latest = runfolder.latest_checkpoint(args.run_dir)
        try:
            state = checkpoint.load(latest)
        except checkpoint.CheckpointError as err:  # damaged from outside: saves are atomic
            older = [p.name for p in runfolder.step_checkpoints(latest.parent)]
            raise checkpoint.CheckpointError(
                f"{err}" + (f"; the run also keeps {older}: copy one over {latest.name} to "
                            "resume from it" if older else "")) from None
        resumed_from = state["agent_steps"]
        if args.config:  # the run's own max_steps, threads, workers unless flags say otherwise
            own = state["config"]
            config = POCAConfig.load(args.config).override(
                {key: own[key] for key in runfolder.RESUMABLE if key in own})
        else:
            try:
                config = POCAConfig.from_dict(state["config"])
            except ValueError as err:
                raise checkpoint.CheckpointError(f"the run's saved config is invalid: {err}"
                                                 ) from None
    else:
        if args.force:
            raise ValueError("--force only applies with --resume")
        config = POCAConfig.load(args.config) if args.config else POCAConfig()
    config = config.override(overrides)
    run_dir = args.run_dir or _new_run_dir(args.env_id)
    try:
        result = train(args.env_id, config, args.env_kwargs, run_dir, state or False,
                       progress=not args.no_progress, max_agents=args.max_agents,
                       force=args.force, starting=lambda trainer: print(
                           f"training MA-POCA on {args.env_id} -> {run_dir}"
                           + (f" (resuming at {resumed_from:,} agent-steps)" if state else ""),
                           flush=True))
    except TrainingDiverged as err:
        print(f"poca train: training diverged: {err}", file=sys.stderr)
        return 1
    steps = result.agent_steps - resumed_from
    episodes = result.episodes - (state["episodes"] if state else 0)
    rate = steps / max(result.wall_seconds, 1e-9)
    verb = "interrupted after" if result.interrupted else "trained"
    print(f"{verb} {steps:,} agent-steps ({result.agent_steps:,} in all), "
          f"{_counted(episodes, 'episode')} ({result.episodes:,} in all) in "
          f"{result.wall_seconds:.1f} s "
          f"({rate:,.0f} agent-steps/s)")
    if state and not steps and not result.interrupted:
        print(f"the run had already reached max_steps {config.max_steps:,}; to train it "
              "further, resume with a larger --max-steps")
    if not result.episode_log:  # the means of no episodes would print as +nan
        print("no episode has ended yet" + ("" if result.interrupted else
              " (an episode is longer than this run; raise --max-steps)"))
    else:
        means = {"group return": result.mean_return(),
                 "team return": result.mean_team_return()}
        name, other = _scores(result.pays_group_reward)
        last = _counted(min(LAST, len(result.episode_log)), "episode")
        print(f"last {last}: mean {_named(name)} {means[name]:+.3f}; mean {_named(other)} "
              f"{means[other]:+.3f}")
    print(f"checkpoint: {result.checkpoint}")
    return 130 if result.interrupted else 0


def _new_run_dir(env_id: str) -> Path:
    """runs/<env>/<time>, with a suffix when a run started in the same second."""
    base = Path("runs") / env_id.replace("/", "_").replace(":", "_") / time.strftime(
        "%Y%m%d-%H%M%S")
    path, n = base, 2
    while path.exists():
        path, n = base.with_name(f"{base.name}-{n}"), n + 1
    return path


def _eval(args) -> int:
    from envs.core import check_int
    from poca import checkpoint
    from poca.adapters import make_env
    from poca.evaluate import checkpoint_returns

    check_int("--episodes", args.episodes, 1)
    check_int("--seed", args.seed, 0, 2**32 - 1)
    state = checkpoint.load(args.checkpoint)
    env_kwargs = _env_kwargs(args, state)
    group, team, pays_group_reward = checkpoint_returns(
        args.checkpoint, lambda n: make_env(args.env_id, n, env_kwargs, _max_agents(args, state),
                                            max_episode_steps=args.max_episode_steps),
        args.episodes, args.seed, args.deterministic, state)
    # the headline (mean, std, min, max) is the group return where the env pays one, else the
    # team return; both are reported as group_* and team_*
    name, other = _scores(pays_group_reward)
    returns = group if name == "group return" else team
    result = {"env_id": args.env_id, "episodes": len(returns), "score": name,
              "mean": float(returns.mean()), "std": float(returns.std()),
              "min": float(returns.min()), "max": float(returns.max()),
              "group_mean": float(group.mean()), "group_std": float(group.std()),
              "team_mean": float(team.mean()), "team_std": float(team.std()),
              # what the numbers came from, so that a record says how to measure it again
              "checkpoint": str(args.checkpoint), "agent_steps": state["agent_steps"],
              "env_kwargs": env_kwargs, "max_agents": _max_agents(args, state),
              "max_episode_steps": args.max_episode_steps, "seed": args.seed,
              "deterministic": args.deterministic,
              "returns": [float(r) for r in returns]}
    if args.json:
        print(json.dumps(result))
    else:
        key = other.split()[0]  # "group" or "team"
        print(f"{_named(name)} over {_counted(result['episodes'], 'episode')}: "
              f"{result['mean']:+.3f} "
              f"± {result['std']:.3f} (min {result['min']:+.3f}, max {result['max']:+.3f}); "
              f"{_named(other)} {result[key + '_mean']:+.3f} ± {result[key + '_std']:.3f}")
    return 0


def _scores(pays_group_reward: bool) -> tuple[str, str]:
    """(headline, second figure): the group return where the env pays one, else the team return."""
    return ("group return", "team return") if pays_group_reward else ("team return",
                                                                        "group return")


def _counted(n: int, noun: str) -> str:
    """'1 episode', '2 episodes', '1,000 episodes'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _named(score: str) -> str:
    return "team return (sum of all rewards)" if score == "team return" else score


def main(argv: list[str] | None = None) -> int:
    """Bad input (ours to check: arguments, configs, checkpoints, env values) is one line on
    stderr and exit status 2; an exception raised inside an environment's own code keeps its
    traceback."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # like `python -m`, for module:factory IDs (not first)
    args = _parser().parse_args(argv)
    try:
        _import_torch_and_freeze()
        from poca.compare import run as _compare

        return {"train": _train, "eval": _eval, "play": _play,
                "compare": _compare}[args.command](args)
    except Exception as err:
        if not isinstance(err, _handled()) or not _ours(err):
            raise
        print(f"poca {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"poca {args.command}: interrupted", file=sys.stderr)
        return 130


def _import_torch_and_freeze() -> None:
    """In a process that has not imported torch yet (the `poca` command): import torch and the
    trainer with the cyclic garbage collector paused, then `gc.freeze()`.

    Why: once torch is imported, each full collection walks its hundreds of thousands of
    long-lived objects (60-75 ms each on a 2-core machine), and the imports that follow (the
    envs, PettingZoo, the trainer) trigger two or three of them: 0.12-0.14 s of a 3,000-step
    `poca train`. Freezing moves every object tracked so far into a generation the collector
    never scans: the modules' objects, which live as long as the process anyway, and a few
    thousand cyclic leftovers of the imports, a small fixed cost. A caller that has imported
    torch already (a notebook, a script calling `main`) may hold garbage of its own that
    freezing would keep for good, so there nothing is frozen."""
    if "torch" in sys.modules:
        return
    gc.disable()
    try:
        import torch  # noqa: F401

        import envs  # noqa: F401
        import poca.trainer  # noqa: F401
    finally:
        gc.freeze()
        gc.enable()


def _handled() -> tuple[type, ...]:
    """The errors that are one line: a CheckpointError only exists once checkpoints are read."""
    loaded = sys.modules.get("poca.checkpoint")
    return (ValueError, TypeError, OSError, ImportError, NotImplementedError) + (
        (loaded.CheckpointError,) if loaded is not None else ())


def _ours(err: BaseException) -> bool:
    """Raised by this package's own checks (not from inside someone else's code), or a path
    the file system refuses as too long, where our code handed it to the standard library
    (pathlib raises it)."""
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
        frames = [f for f in frames if not f.startswith(STDLIB)]  # who handed the path over
    return bool(frames) and frames[-1].startswith(PACKAGE_DIRS)


if __name__ == "__main__":
    sys.exit(main())
