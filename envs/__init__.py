"""groupenvs: cooperative multi-agent test environments with group rewards and early termination.

Importing this package registers every task with Gymnasium (`groupenvs/<Task>-v0`, joint control
of one group, plus a native `make_vec` entry point) and with PettingZoo (`groupenvs/<task>-v0`,
one `ParallelEnv` per group). `make_group` builds the batched numpy core that learners use.
"""

from __future__ import annotations

import re

# bound under private names: `envs.gymnasium` and `envs.pettingzoo` are this package's views,
# and a public name here would shadow them (`from envs import pettingzoo` gave the library)
import gymnasium as _gymnasium
import pettingzoo as _pettingzoo

from envs.baton_pass import BatonPassGroup
from envs.core import GroupEnv, GroupSpec, GroupStep, ObsSpec, check_kwargs
from envs.dungeon_escape import DungeonEscapeGroup
from envs.goal import GoalGroup
from envs.push_block import PushBlockGroup

# Gymnasium name -> (class, the variant's default arguments)
TASKS: dict[str, tuple[type[GroupEnv], dict]] = {
    "Goal-v0": (GoalGroup, {}),
    "GoalMemory-v0": (GoalGroup, {"show_steps": 3}),
    "GoalVisual-v0": (GoalGroup, {"num_visual": 1}),
    "GoalEntities-v0": (GoalGroup, {"num_entity_lists": 1}),
    # the MA-POCA paper's tasks (arXiv 2111.05992), on a grid
    "DungeonEscape-v0": (DungeonEscapeGroup, {}),
    "DungeonEscapeHard-v0": (DungeonEscapeGroup, {"num_agents": 5, "num_dragons": 3}),
    "BatonPass-v0": (BatonPassGroup, {}),
    "PushBlock-v0": (PushBlockGroup, {}),
}

__all__ = ["TASKS", "GroupEnv", "GroupSpec", "GroupStep", "ObsSpec", "make_group",
           "pettingzoo_id"]


def _task(task: str) -> tuple[type[GroupEnv], dict]:
    name = task.removeprefix("groupenvs/")
    if name not in TASKS:
        raise KeyError(f"unknown task {task!r}; registered: {sorted(TASKS)}")
    return TASKS[name]


def make_group(task: str | type[GroupEnv], num_envs: int = 1, **kwargs) -> GroupEnv:
    """The batched core of `task` ("Goal-v0" or "groupenvs/Goal-v0", or a `GroupEnv` subclass of
    your own, so that the views wrap it too) stepping `num_envs` groups."""
    return _make_core(task, num_envs, kwargs)


def _make_core(task, num_envs: int, kwargs: dict, view_args: tuple[str, ...] = (),
               one_group: bool = False, hint: str = "") -> GroupEnv:
    """make_group for a view: an unknown argument's error lists the view's own arguments too
    (see `check_kwargs`)."""
    if isinstance(task, type) and issubclass(task, GroupEnv):
        cls, variant = task, {}
    elif isinstance(task, str):
        cls, variant = _task(task)
    else:
        raise TypeError(f"task must be a registered task's name or a GroupEnv subclass, got "
                        f"{task!r:.80}")
    check_kwargs(cls, kwargs, view_args, one_group, hint)
    return cls(num_envs=num_envs, **{**variant, **kwargs})


def pettingzoo_id(task: str) -> str:
    """PettingZoo's spelling of a task ID.

    >>> pettingzoo_id("GoalMemory-v0")
    'groupenvs/goal_memory-v0'
    """
    name, version = task.removeprefix("groupenvs/").rsplit("-", 1)
    return f"groupenvs/{re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()}-{version}"


def _register() -> None:
    for name in TASKS:
        gym_id = f"groupenvs/{name}"
        if gym_id not in _gymnasium.registry:
            _gymnasium.register(gym_id, entry_point="envs.gymnasium:GroupGymEnv",
                               vector_entry_point="envs.gymnasium:GroupVectorEnv",
                               kwargs={"task": name})
        pz_id = pettingzoo_id(name)
        if pz_id not in _pettingzoo.parallel_registry:
            _pettingzoo.register("parallel", pz_id, entry_point="envs.pettingzoo:GroupParallelEnv",
                                kwargs={"task": name})
        if pz_id not in _pettingzoo.aec_registry:
            _pettingzoo.register("aec", pz_id, entry_point="envs.pettingzoo:aec_env",
                                kwargs={"task": name})


_register()
