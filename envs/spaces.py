"""Gymnasium spaces for a `GroupSpec`, and the action conversions the views share.

One agent acts with a `Box(-1, 1, (C,))` for continuous actions, `Discrete(n)` for a single
discrete branch, `MultiDiscrete` for several, and a `Dict(continuous=..., discrete=...)` for hybrid
actions. The joint (whole-group) spaces stack those over the `A` agent slots.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from envs.core import GroupSpec, ObsSpec


def _obs_box(o: ObsSpec, lead: tuple[int, ...] = ()) -> spaces.Box:
    if o.kind == "image":
        return spaces.Box(0, 255, lead + o.shape, dtype=np.uint8)
    return spaces.Box(o.low, o.high, lead + o.shape, dtype=np.float32)


def agent_observation_space(spec: GroupSpec) -> spaces.Space:
    """One component: its Box; several: a Dict keyed by component name."""
    if len(spec.obs) == 1:
        return _obs_box(spec.obs[0])
    return spaces.Dict({o.name: _obs_box(o) for o in spec.obs})


def joint_observation_space(spec: GroupSpec) -> spaces.Dict:
    """Every component stacked over agent slots, plus the `alive` mask of the slots."""
    A = spec.num_agents
    return spaces.Dict({**{o.name: _obs_box(o, (A,)) for o in spec.obs},
                        "alive": spaces.MultiBinary(A)})


def agent_action_space(spec: GroupSpec) -> spaces.Space:
    C, branches = spec.action_sizes
    cont = spaces.Box(-1.0, 1.0, (C,), dtype=np.float32) if C else None
    if not branches:
        disc = None
    elif len(branches) == 1:
        disc = spaces.Discrete(branches[0])
    else:
        disc = spaces.MultiDiscrete(branches)
    if cont is not None and disc is not None:
        return spaces.Dict({"continuous": cont, "discrete": disc})
    return cont if cont is not None else disc


def joint_action_space(spec: GroupSpec) -> spaces.Space:
    A, (C, branches) = spec.num_agents, spec.action_sizes
    parts = {}
    if C:
        parts["continuous"] = spaces.Box(-1.0, 1.0, (A, C), dtype=np.float32)
    if branches:
        parts["discrete"] = spaces.MultiDiscrete(np.tile(branches, (A, 1)))
    return spaces.Dict(parts) if len(parts) == 2 else next(iter(parts.values()))


def joint_to_core(spec: GroupSpec, action, num_envs: int) -> dict:
    """A joint-space action (with a leading env axis) -> the core's action dict."""
    C, branches = spec.action_sizes
    if C and branches:
        if not isinstance(action, dict):
            raise TypeError("hybrid actions must be a dict with 'continuous' and 'discrete'")
        return {"continuous": np.asarray(action["continuous"]),
                "discrete": np.asarray(action["discrete"])}
    key = "continuous" if C else "discrete"
    return {key: np.asarray(action)}


def agent_to_core(spec: GroupSpec, actions: dict[int, object]) -> dict:
    """Per-slot actions {slot: agent-space action} -> the core's action dict for one env."""
    A, (C, branches) = spec.num_agents, spec.action_sizes
    out = {}
    if C:
        out["continuous"] = np.zeros((1, A, C), dtype=np.float32)
    if branches:
        out["discrete"] = np.zeros((1, A, len(branches)), dtype=np.int64)
    for slot, act in actions.items():
        if C and branches:
            if not isinstance(act, dict) or set(act) != {"continuous", "discrete"}:
                raise ValueError(f"agent_{slot}: hybrid action must be a dict with keys "
                                 f"'continuous' and 'discrete', got {act!r}")
            cont, disc = act["continuous"], act["discrete"]
        else:
            cont, disc = (act, None) if C else (None, act)
        if cont is not None:
            cont = np.asarray(cont)
            if cont.shape != (C,) or cont.dtype.kind != "f":
                raise ValueError(f"agent_{slot}: continuous action must be float of shape ({C},),"
                                 f" got {cont.dtype} {cont.shape}")
            out["continuous"][0, slot] = cont
        if disc is not None:
            disc = np.asarray(disc)
            if disc.dtype.kind not in "iu" or disc.size != len(branches) or disc.ndim > 1:
                raise ValueError(f"agent_{slot}: discrete action must be int with "
                                 f"{len(branches)} entries, got {disc.dtype} {disc.shape}")
            out["discrete"][0, slot] = disc.reshape(-1)
    return out
