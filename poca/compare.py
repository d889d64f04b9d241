"""`poca compare TASK --critics attention,absorbing,independent --seeds 3 --max-steps N`: the
MA-POCA paper's comparison (Cohen et al., arXiv 2111.05992, §6) on any task.

Every critic is trained on the same seeds with the same config and budget; each final policy is
evaluated on fresh episodes (env seeds disjoint from training). Writes one JSON per run
(`<critic>-seed<s>.json`: training curve, final return, wall time), a PNG of the curves (mean and
min-max over seeds; matplotlib, `pip install "groupenvs[plot]"`), and the table it prints
(`table.md`). Runs go
one after another, in `--workers` processes, or as Ray tasks with `--ray [ADDRESS]` (poca.sweep);
the records are the same either way.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from poca.config import CRITICS, POCAConfig
from poca.curves import LAST, smoothed, steps_to_threshold
from poca.runfolder import holds_run
from poca.sweep import map_runs

EVAL_SEED = 1_000_003  # + the training seed: evaluation episodes never seen in training


def add_parser(sub) -> None:
    from poca.cli import _assignment, _config_source, _json_dict, _positive, path_argument

    p = sub.add_parser("compare", help="train several critics on the same seeds and compare")
    p.add_argument("env_id", help="as for train")
    p.add_argument("--critics", default=",".join(CRITICS),
                   help=f"comma-separated, from {', '.join(CRITICS)}")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    p.add_argument("--max-steps", type=int, help="agent-steps per run")
    p.add_argument("--config", type=_config_source,
                   help="YAML file or bundled preset, shared by every critic")
    p.add_argument("--env-kwargs", type=_json_dict, default={}, help="task arguments (JSON)")
    p.add_argument("--set", type=_assignment, action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--threshold", type=float, help="report agent-steps until the mean of the "
                   "last 20 training episodes reaches it")
    p.add_argument("--workers", type=int, default=1, help="processes (default: one after "
                   "another)")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run as Ray tasks (pip install \"groupenvs[ray]\"): on this machine, "
                   "the cluster in RAY_ADDRESS, or ray.init(address=ADDRESS)")
    p.add_argument("--max-agents", type=int, help="as for train")
    p.add_argument("--max-episode-steps", type=_positive, help="as for eval: truncates the "
                   "evaluation episodes of a PettingZoo env with no time limit of its own")
    p.add_argument("--out", type=path_argument, help="default: runs/compare/<env>/<time>")


def run(args) -> int:
    from envs.core import check_int
    from poca.adapters import make_env
    from poca.cli import settings

    critics = [c for c in args.critics.split(",") if c]
    unknown = [c for c in critics if c not in CRITICS]
    if unknown or not critics:
        raise ValueError(f"--critics: unknown {unknown}; choose from {list(CRITICS)}")
    if len(set(critics)) < len(critics):
        raise ValueError(f"--critics: each critic once, got {args.critics!r}")
    for flag in ("seeds", "workers", "eval_episodes"):
        check_int(f"--{flag.replace('_', '-')}", getattr(args, flag), 1)
    if args.threshold is not None and math.isnan(args.threshold):
        raise ValueError("--threshold must be a number, got nan")
    base = POCAConfig.load(args.config) if args.config else POCAConfig()
    chosen = settings(args.set, args, (("max_steps", "max_steps"),))
    fixed = [key for key in ("critic", "seed") if key in chosen]
    if fixed:  # compare sets these itself, per run
        raise ValueError(f"--set {', '.join(fixed)}: compare trains every critic in --critics "
                         "on seeds 0..--seeds-1; use those instead")
    replaced = {k: v for k, v in (("seed", base.seed), ("critic", base.critic))
                if v != getattr(POCAConfig(), k)}
    if replaced:
        print(f"note: --config {args.config} sets {replaced}; compare replaces them with each "
              "critic in --critics and seeds 0..--seeds-1", file=sys.stderr)
    base = base.override(chosen)
    probe = make_env(args.env_id, 1, args.env_kwargs, args.max_agents,  # bad IDs fail here
                     max_episode_steps=args.max_episode_steps)
    try:  # and networks the env's observations do not fit (an image too small for the encoder)
        from poca.networks import Actor, Critic

        Actor(probe.spec, base.network_settings)
        for critic in critics:
            Critic(probe.spec, base.network_settings, critic)
    finally:
        probe.close()
    out = args.out or Path("runs") / "compare" / args.env_id.replace("/", "_").replace(
        ":", "_") / time.strftime("%Y%m%d-%H%M%S")
    jobs = [(args.env_id, base.override({"critic": c, "seed": s}).to_dict(), args.env_kwargs,
             args.max_agents, args.eval_episodes, args.max_episode_steps,
             str(out / f"{c}-seed{s}"))
            for c in critics for s in range(args.seeds)]
    taken = [Path(job[-1]).name for job in jobs if holds_run(Path(job[-1]))]
    if taken:  # before any training, not after the first runs
        raise ValueError(f"--out {out} already holds the runs {taken}; choose another --out")
    print(f"comparing {', '.join(critics)} on {args.env_id}: {args.seeds} "
          f"seed{'s' if args.seeds > 1 else ''} x "
          f"{base.max_steps:,} agent-steps -> {out}", flush=True)

    written = []

    def write(record: dict) -> None:  # as each run finishes: a Ctrl-C later keeps it
        written.append(f"{record['critic']}-seed{record['seed']}")
        record["steps_to_threshold"] = steps_to_threshold(record["curve"], args.threshold)
        out.mkdir(parents=True, exist_ok=True)  # made by a result, not before (Ray may fail)
        (out / f"{written[-1]}.json").write_text(json.dumps(record, indent=1))

    try:
        records = map_runs(_one_run, jobs, args.workers, args.ray, done=write)
    except KeyboardInterrupt:
        print(f"stopped before the comparison was complete; records of the finished runs "
              f"{written} are in {out} (no table, no plot)", file=sys.stderr)
        raise
    summary = table(records, args.threshold)
    print(summary)
    (out / "table.md").write_text(summary + "\n")
    curves = plot(records, out / "curves.png")
    print(f"runs, records and table.md in {out}" + (f"; curves: {curves}" if curves else
                                                     " (no matplotlib: no plot)"))
    return 0


def _one_run(env_id, config: dict, env_kwargs, max_agents, eval_episodes, max_episode_steps,
             run_dir) -> dict:
    from poca.adapters import make_env
    from poca.evaluate import checkpoint_returns
    from poca.trainer import train

    config = POCAConfig.from_dict(config)
    result = train(env_id, config, env_kwargs, run_dir, progress=False,
                   max_agents=max_agents).finished(run_dir)
    group, team_returns, _ = checkpoint_returns(
        result.checkpoint, lambda n: make_env(env_id, n, env_kwargs, max_agents,
                                              max_episode_steps=max_episode_steps),
        eval_episodes, EVAL_SEED + config.seed)
    team = not result.pays_group_reward  # the headline score of the env
    returns = team_returns if team else group
    scores = result.episode_log if not team else [
        (steps, t) for (steps, _), t in zip(result.episode_log, result.team_log, strict=True)]
    return {"env_id": env_id, "critic": config.critic, "seed": config.seed,
            "score": "team return" if team else "group return",
            "agent_steps": result.agent_steps, "wall_s": result.wall_seconds,
            "final_return": float(returns.mean()), "final_return_std": float(returns.std()),
            "eval_episodes": len(returns), "curve": scores, "config": config.to_dict(),
            "run_dir": run_dir}


def table(records: list[dict], threshold: float | None = None) -> str:
    """Markdown: per critic, final (evaluated) return per seed and mean, steps to threshold."""
    lines = [f"| critic | final {records[0]['score']} per seed | mean | steps to threshold "
             f"({threshold if threshold is not None else 'none given'}) | wall s per seed |",
             "|---|---|---|---|---|"]
    for critic in dict.fromkeys(r["critic"] for r in records):
        rs = sorted((r for r in records if r["critic"] == critic), key=lambda r: r["seed"])
        finals = [r["final_return"] for r in rs]
        steps = " / ".join("-" if r["steps_to_threshold"] is None else
                           f"{r['steps_to_threshold']:,}" for r in rs)
        lines.append(f"| {critic} | " + " / ".join(f"{f:+.3f}" for f in finals)
                     + f" | {np.mean(finals):+.3f} | {steps} | "
                     + " / ".join(f"{r['wall_s']:.0f}" for r in rs) + " |")
    return "\n".join(lines)


def plot(records: list[dict], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    top = max(r["agent_steps"] for r in records)
    grid = np.linspace(0, top, 50)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for critic in dict.fromkeys(r["critic"] for r in records):
        curves = np.array([smoothed(r["curve"], grid) for r in records
                           if r["critic"] == critic])
        with warnings.catch_warnings():  # grid points before any episode ended: NaN, not drawn
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, low, high = (f(curves, 0) for f in (np.nanmean, np.nanmin, np.nanmax))
        line, = ax.plot(grid, mean, label=f"{critic} ({len(curves)} seeds)")
        ax.fill_between(grid, low, high, alpha=0.2, color=line.get_color())
    ax.set(xlabel="agent-steps", ylabel=f"{records[0]['score']} (last {LAST} episodes)",
           title=records[0]["env_id"])
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path

