"""Gymnasium spaces for a `GroupSpec`, and the action conversions the views share.

One agent acts with a `Box(-1, 1, (C,))` for continuous actions, `Discrete(n)` for a single
discrete branch, `MultiDiscrete` for several, and a `Dict(continuous=..., discrete=...)` for hybrid
actions. The joint (whole-group) spaces stack those over the `A` agent slots; with `flat=True` they
are the 1-D spaces single-agent libraries expect: the observation one float32 `Box` (every
component of every slot, flattened, then the `alive` mask), the action a `Box(A*C)` or a 1-D
`MultiDiscrete(A*B)`, agent-major (hybrid: a `Dict` of those two).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from envs.core import GroupSpec, ObsSpec


def _obs_box(o: ObsSpec, lead: tuple[int, ...] = ()) -> spaces.Box:
    if o.kind == "image":
        return spaces.Box(int(o.low), int(o.high), lead + o.shape, dtype=np.uint8)
    return spaces.Box(o.low, o.high, lead + o.shape, dtype=np.float32)


def _check_names(spec: GroupSpec) -> None:
    """The views key their dict spaces by component name, and Gymnasium sorts the keys."""
    for o in spec.obs:
        if not isinstance(o.name, str):
            raise ValueError(f"an observation component's name must be a str for the views, "
                             f"which key their dict spaces by it, got {o.name!r}")


def agent_observation_space(spec: GroupSpec) -> spaces.Space:
    """One component: its Box; several: a Dict keyed by component name."""
    if len(spec.obs) == 1:
        return _obs_box(spec.obs[0])
    _check_names(spec)
    if any(o.name == "action_mask" for o in spec.obs):
        raise ValueError("an observation component is named 'action_mask': PettingZoo's tools "
                         "(api_test) and learners read that key of a dict observation as the "
                         "legal actions; rename it (this view gives masks in "
                         "infos[agent]['action_mask'])")
    return spaces.Dict({o.name: _obs_box(o) for o in spec.obs})


def joint_observation_space(spec: GroupSpec, flat: bool = False) -> spaces.Space:
    """Every component stacked over agent slots, plus the `alive` mask of the slots."""
    A = spec.num_agents
    _check_names(spec)
    if any(o.name == "alive" for o in spec.obs):
        raise ValueError("an observation component is named 'alive', the key the joint views "
                         "give the alive mask: rename it")
    if flat:
        sizes = [A * int(np.prod(o.shape)) for o in spec.obs] + [A]
        bounds = [(o.low, o.high) for o in spec.obs]
        low = np.concatenate([np.full(n, lo, np.float32) for n, (lo, _) in
                              zip(sizes, bounds + [(0.0, 1.0)], strict=True)])
        high = np.concatenate([np.full(n, hi, np.float32) for n, (_, hi) in
                               zip(sizes, bounds + [(0.0, 1.0)], strict=True)])
        return spaces.Box(low, high, dtype=np.float32)
    return spaces.Dict({**{o.name: _obs_box(o, (A,)) for o in spec.obs},
                        "alive": spaces.MultiBinary(A)})


def agent_action_space(spec: GroupSpec) -> spaces.Space:
    """One agent's action space: `Box` for continuous dims, `Discrete` for one branch or
    `MultiDiscrete` for several, a `Dict` of both for hybrid actions.

    >>> spec = GroupSpec(2, (ObsSpec("vector", "vector", (3,)),), 1, (2, 3), 100)
    >>> agent_action_space(spec)
    Dict('continuous': Box(-1.0, 1.0, (1,), float32), 'discrete': MultiDiscrete([2 3]))
    >>> joint_action_space(spec, flat=True)  # agent-major: agent 0's entries, then agent 1's
    Dict('continuous': Box(-1.0, 1.0, (2,), float32), 'discrete': MultiDiscrete([2 3 2 3]))
    """
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


def agent_mask(spec: GroupSpec, row: np.ndarray) -> np.ndarray | tuple | dict:
    """One agent's legal discrete actions (bool [sum(branches)]) in the form its action space's
    `sample(mask=...)` takes: an int8 array for one branch (`Discrete`), a tuple of them (one per
    branch) for several (`MultiDiscrete`); for hybrid actions (a `Dict`) a dict with None for
    the continuous part (a `Box` takes no mask) and that form for the discrete part.

    >>> spec = GroupSpec(1, (ObsSpec("vector", "vector", (3,)),), 0, (2, 3), 100)
    >>> agent_mask(spec, np.array([0, 1, 1, 0, 1], bool))
    (array([0, 1], dtype=int8), array([1, 0, 1], dtype=int8))
    """
    flat = row.astype(np.int8)
    branches = spec.discrete_branches
    discrete = flat if len(branches) == 1 else tuple(split_branches(flat, branches))
    return {"continuous": None, "discrete": discrete} if spec.continuous_size else discrete


def split_branches(mask: np.ndarray, branches: tuple[int, ...]) -> list[np.ndarray]:
    """A mask [..., sum(branches)] cut into one part [..., n] per discrete branch."""
    return np.split(mask, np.cumsum(branches)[:-1], axis=-1)


def one_line(space: spaces.Space) -> str:
    """A space's repr on one line (a 2-D MultiDiscrete's nvec prints over several)."""
    return " ".join(str(space).split())


def first_allowed(mask: np.ndarray, branches: tuple[int, ...]) -> np.ndarray:
    """[..., sum(branches)] bool -> [..., len(branches)]: each branch's first allowed action (0
    where none is, which the core then takes as any)."""
    return np.stack([part.argmax(-1) for part in split_branches(mask, branches)], -1)


def joint_action_space(spec: GroupSpec, flat: bool = False) -> spaces.Space:
    A, (C, branches) = spec.num_agents, spec.action_sizes
    parts = {}
    if C:
        parts["continuous"] = spaces.Box(-1.0, 1.0, (A * C,) if flat else (A, C), dtype=np.float32)
    if branches:
        parts["discrete"] = spaces.MultiDiscrete(np.tile(branches, A if flat else (A, 1)))
    return spaces.Dict(parts) if len(parts) == 2 else next(iter(parts.values()))


def joint_to_core(spec: GroupSpec, action, flat: bool = False) -> dict:
    """A joint-space action (with a leading env axis) -> the core's action dict."""
    C, branches = spec.action_sizes
    if C and branches:
        if not isinstance(action, dict):
            raise TypeError("hybrid actions must be a dict with 'continuous' and 'discrete', "
                            f"got {type(action).__name__}")
        if action.keys() != {"continuous", "discrete"}:
            raise ValueError("hybrid actions must have exactly the keys 'continuous' and "
                             f"'discrete', got {sorted(action)}")
        out = {"continuous": np.asarray(action["continuous"]),
               "discrete": np.asarray(action["discrete"])}
    else:
        out = {"continuous" if C else "discrete": np.asarray(action)}
    if flat:  # [E, A * n] -> [E, A, n]
        A = spec.num_agents
        for key, n in (("continuous", C), ("discrete", len(branches))):
            if key in out:
                x = out[key]
                if x.ndim != 2 or x.shape[1] != A * n:
                    raise ValueError(f"flat {key} actions must have {A * n} entries per env "
                                     f"({A} agents x {n}, agent-major), got shape "
                                     f"{list(x.shape[1:])}")
                out[key] = x.reshape(len(x), A, n)
    return out


def agent_to_core(spec: GroupSpec, slots: list[int], actions: list) -> dict:
    """Actions of the agents in `slots` (agent-space values) -> the core's action dict, 1 env.

    Stacks them into one array per kind and checks shape and dtype once; only when that fails
    does it look for the agent at fault, so the error names it.
    """
    A, (C, branches) = spec.num_agents, spec.action_sizes
    out = {}
    parts = []
    if C and branches:
        if not all(isinstance(a, dict) and a.keys() == {"continuous", "discrete"}
                   for a in actions):
            bad = next(s for s, a in zip(slots, actions, strict=True) if not isinstance(a, dict)
                       or a.keys() != {"continuous", "discrete"})
            raise ValueError(f"agent_{bad}: hybrid actions must be dicts with keys "
                             "'continuous' and 'discrete'")
        parts = [("continuous", [a["continuous"] for a in actions], (C,), "f"),
                 ("discrete", [a["discrete"] for a in actions], (len(branches),), "iu")]
    elif C:
        parts = [("continuous", actions, (C,), "f")]
    else:
        parts = [("discrete", actions, (len(branches),), "iu")]
    for key, values, shape, kinds in parts:
        dtype = np.float32 if key == "continuous" else np.int64
        if not values:  # nobody acts
            out[key] = np.zeros((1, A) + shape, dtype=dtype)
            continue
        try:
            stacked = np.asarray(values)
        except ValueError:  # ragged: agents sent different shapes (checked one by one below)
            stacked = None
        # values of different types are checked one by one: stacking promotes them (a bool
        # beside an int becomes an int), so an agent's value would pass or fail by its partners'
        mixed = len({(type(v), getattr(v, "dtype", None)) for v in values}) > 1
        if mixed or stacked is None or stacked.dtype.kind not in kinds or stacked.ndim > 2 or \
                stacked.reshape(len(values), -1).shape[1:] != shape:
            for slot, v in zip(slots, values, strict=True):
                v = np.asarray(v)
                if v.dtype.kind not in kinds or v.size != shape[0] or v.ndim > 1:
                    raise ValueError(f"agent_{slot}: {key} action must be "
                                     f"{'float' if kinds == 'f' else 'int'} with {shape[0]} "
                                     f"entries, got {v.dtype} {v.shape}")
            # each is fine, in different forms (a scalar beside a one-entry array)
            stacked = np.stack([np.asarray(v).reshape(shape) for v in values])
        if len(values) == A and slots == list(range(A)):  # every slot acts: no scatter
            out[key] = stacked.astype(dtype, copy=False).reshape((1, A) + shape)
        else:
            out[key] = np.zeros((1, A) + shape, dtype=dtype)
            out[key][0, slots] = stacked.reshape((len(values),) + shape)
    return out
