"""Baton Pass: each agent eats once, presses a button that brings in the next agent, and leaves.

A grid version of the Baton Pass task of the MA-POCA paper (Cohen et al., "On the Use and Misuse
of Absorbing States in Multi-agent Reinforcement Learning", arXiv 2111.05992), where agents join
the group in the middle of an episode and should leave it once they are of no more use.
"""

from __future__ import annotations

import numpy as np

from envs import grid, render
from envs.core import agent_any, agent_sum, check_int, check_number

_FOOD, _READY, _USED, _EXIT, _SPENT = ((90, 200, 90), (240, 200, 60), (110, 100, 70),
                                       (160, 90, 220), (130, 130, 150))


def can_still_press(can_press, joined, max_agents: int) -> np.ndarray:
    """bool [..., A]: agents that have not pressed the button yet where a slot is left to bring
    in (`joined` [...]: slots taken so far); the last agent, and any left unpressed once every
    slot has joined, cannot."""
    return can_press & (np.asarray(joined) < max_agents)[..., None]


class BatonPassGroup(grid.GridGroup):
    """A relay: one agent at the start, and every meal plus button press brings in the next.

    ## Description
    A `size x size` court has food on one side of the centre, a button on the other (which side is
    drawn per episode), and an exit in the middle of each edge. The episode starts with one agent
    on the centre cell. Each agent may eat once and press the button once. Eating (stepping on the
    food while it is there) pays the group +1, removes the food and makes the button ready.
    Pressing the ready button (stepping on it) uses it up, brings the food back and spawns a new
    agent on the centre cell, in the next free slot: it acts from the next step on. Slots are
    never reused, so at most `max_agents` agents take part and the last one has nobody to hand
    over to. Each living agent costs the group `living_cost` per step, so an agent that has done
    its part should walk out through an exit, which removes it from the episode.

    ## Action Space
    One discrete branch of 5: 0 stay, 1 up, 2 down, 3 left, 4 right (moves off the court stay).
    Agents may share cells.

    ## Observation Space
    float32 vector per agent: an egocentric `(2 r + 1) x (2 r + 1)` window (`r = view_radius`,
    default 3) centred on the agent, 6 layers per cell (cells row by row, each cell's layers
    together): wall (1 off the court), agents (living agents there, including the viewer at the
    centre, divided by `max_agents`; an agent's final observation, once it has left, no longer
    counts it), the food (while it is there), the button when ready, the button when used up,
    the exits; then 2 own features: it can still eat, it can still press (it has not pressed,
    and a slot is left to bring in).

    ## Rewards
    Group reward +1 per meal, and `-living_cost` for every living agent every step (counted before
    the step's exits and spawns). No individual rewards. The best return with the defaults is
    `4 - 0.01 * 23 = 3.77` (the scripted `reference_policy`: every agent walks 2 cells to eat, 4 to
    press, 1 out, and the last ends the episode with its meal); a random policy about 0.03 (the
    first episode of 1000 envs, seed 0: agent 0 often eats, rarely presses, soon walks out).

    ## Starting State
    One agent (slot 0) on the centre cell, able to eat and press; food present, button not ready.

    ## Episode End
    Each step: living agents move; agents on an exit leave (terminated); one agent on the food
    eats (the lowest index if several); then one agent on the ready button presses it and the new
    agent appears. The episode terminates for every living agent once none of them can still eat
    or press (the last slot has eaten, or everyone left is spent), and when no agent is left.
    After `max_steps` the living agents are truncated, an agent that appears on that very step
    too (it is in the final observation without having acted). (The paper's version interrupts the
    episode at its food cap; here nothing can be earned after the last meal, so it ends.)

    ## Arguments
    >>> import gymnasium, envs
    >>> env = gymnasium.make("groupenvs/BatonPass-v0", max_agents=6)
    >>> env.reset(seed=0)[0]["alive"]  # six slots; one agent on the court at the start
    array([1, 0, 0, 0, 0, 0], dtype=int8)

    | argument | default | meaning |
    |---|---|---|
    | `num_envs` | 1 | courts stepped at once (native core only) |
    | `max_agents` | 4 | agent slots, 2..32: the most agents (and meals) an episode can have |
    | `size` | 7 | the court is `size x size` cells, 5..32 |
    | `view_radius` | 3 | the window is `2 * view_radius + 1` cells wide |
    | `living_cost` | 0.01 | group penalty per living agent and step, >= 0 |
    | `max_steps` | 60 | steps before the group is truncated |

    ## Version History
    - v0: initial release.
    """

    LAYERS = ("agent", "food", "button_ready", "button_used", "exit")
    STATE = ("agent_pos", "left", "joined", "can_eat", "can_press", "food", "button", "food_on",
             "ready")

    def __init__(self, num_envs: int = 1, max_agents: int = 4, size: int = 7,
                 view_radius: int = 3, living_cost: float = 0.01, max_steps: int = 60):
        A = check_int("max_agents", max_agents, 2, 32)
        self.living_cost = check_number("living_cost", living_cost, 0)
        self._grid_init(size, view_radius, min_size=5)
        super().__init__(self.grid_spec(A, 2, max_steps), num_envs)
        self._grid_state()
        E, N = self.num_envs, self.size
        c = N // 2
        self.centre = np.array([c, c])
        self.exits = np.array([[0, c], [N - 1, c], [c, 0], [c, N - 1]])
        self._sides = np.array([[c, 1], [c, N - 2]])  # food and button, in either order
        self.agent_pos = np.zeros((E, A, 2), np.int64)
        self.can_eat = np.zeros((E, A), bool)
        self.can_press = np.zeros((E, A), bool)
        self.food = np.zeros((E, 2), np.int64)
        self.button = np.zeros((E, 2), np.int64)
        self.food_on = np.zeros(E, bool)
        self.ready = np.zeros(E, bool)  # the button can be pressed
        self.joined = np.zeros(E, np.int64)  # slots used so far this episode
        self.left = np.zeros((E, A), bool)  # walked out through an exit (for drawing)
        self._slot = np.arange(A)
        self._on_exit = np.zeros((N, N), bool)
        self._on_exit[self.exits[:, 0], self.exits[:, 1]] = True

    # -- GroupEnv hooks --
    def _reset_envs(self, idx):
        self._keep_final(idx)
        flip = (self.random_bits(idx) & np.uint64(1)).astype(np.int64)
        self.food[idx] = self._sides[flip]
        self.button[idx] = self._sides[1 - flip]
        self.agent_pos[idx] = self.centre
        self.can_eat[idx] = self.can_press[idx] = False
        self.can_eat[idx, 0] = self.can_press[idx, 0] = True
        self.food_on[idx], self.ready[idx] = True, False
        self.joined[idx] = 1
        self.left[idx] = False
        self.alive[idx] = False
        self.alive[idx, 0] = True

    def _step(self, cont, disc):
        E, A = self.num_envs, self.max_agents
        rows = np.arange(E)
        acting = self.alive.copy()
        group_reward = -np.float32(self.living_cost) * agent_sum(acting.astype(np.float32))
        self.agent_pos = grid.move(self.agent_pos, self._moves(disc), self.size)
        at = self.agent_pos[..., 0], self.agent_pos[..., 1]
        terminated = self.alive & self._on_exit[at]
        self.alive &= ~terminated
        self.left |= terminated
        eaters = self.alive & self.can_eat & self.food_on[:, None] & (
            self.agent_pos == self.food[:, None]).all(2)
        ate = agent_any(eaters)
        first = np.argmax(eaters, axis=1)
        self.can_eat[rows[ate], first[ate]] = False
        self.food_on &= ~ate
        self.ready |= ate
        group_reward = group_reward + ate
        pressers = (self.alive & can_still_press(self.can_press, self.joined, A)
                    & self.ready[:, None] & (self.agent_pos == self.button[:, None]).all(2))
        pressed = agent_any(pressers)
        if pressed.any():
            e = rows[pressed]
            self.can_press[e, np.argmax(pressers[e], axis=1)] = False
            self.ready[e], self.food_on[e] = False, True
            new = self.joined[e]
            self.agent_pos[e, new] = self.centre
            self.alive[e, new] = self.can_eat[e, new] = self.can_press[e, new] = True
            self.joined[e] += 1
        useful = self.alive & (self.can_eat | can_still_press(self.can_press, self.joined, A))
        finished = ~agent_any(useful)
        terminated |= self.alive & finished[:, None]
        self.alive &= ~finished[:, None]
        no_truncation = np.zeros((E, A), bool)
        return (np.zeros((E, A), np.float32), group_reward.astype(np.float32), terminated,
                no_truncation)

    def _observe(self, rows=slice(None)):
        ids = self.env_ids[rows]
        can_press = can_still_press(self.can_press[ids], self.joined[ids], self.max_agents)
        extras = np.stack([self.can_eat[ids], can_press], axis=2)
        return self._window_obs(rows, self.agent_pos[ids], extras)

    def _paint(self, ids, layers):
        n = len(ids)
        grid.count(layers, 0, self.agent_pos[ids], self.alive[ids], self.max_agents)
        grid.paint(layers, 1, self.food[ids, None], self.food_on[ids, None])
        ready = self.ready[ids, None]
        grid.paint(layers, 2, self.button[ids, None], ready)
        grid.paint(layers, 3, self.button[ids, None], ~ready)
        grid.paint(layers, 4, np.broadcast_to(self.exits, (n, 4, 2)), np.ones((n, 4), bool))

    # -- the scripted policy --
    def reference_policy(self) -> dict:
        """A scripted relay: an agent that can eat goes to the food, then presses the button,
        then walks out through the nearest exit; exits are avoided on the way.

        With the defaults it gets the best return, 3.77, in every episode.
        """
        E, A, N = self.num_envs, self.max_agents, self.size
        presses = can_still_press(self.can_press, self.joined, A)
        to_food = self.can_eat & self.food_on[:, None]
        to_button = ~self.can_eat & presses & self.ready[:, None]
        spent = ~self.can_eat & ~presses
        gap = np.abs(self.agent_pos[:, :, None] - self.exits).sum(-1)  # [E, A, 4]
        exit_cell = self.exits[np.argmin(gap, axis=2)]
        target = np.where(to_food[..., None], self.food[:, None],
                          np.where(to_button[..., None], self.button[:, None],
                                   np.where(spent[..., None], exit_cell, self.agent_pos)))
        blocked = np.broadcast_to(self._on_exit, (E, 1, N, N))
        return {"discrete": grid.navigate(self.agent_pos, target, blocked)[:, :, None]}

    # -- rendering --
    def _draw(self, pygame, surface, snap, corner, cell):
        for r, c in self.exits:
            x, y = corner(r, c)
            pygame.draw.rect(surface, _EXIT, (x + 3, y + 3, cell - 6, cell - 6), 3)
        x, y = corner(*snap["button"])
        pygame.draw.rect(surface, _READY if snap["ready"] else _USED,
                         (x + 10, y + 10, cell - 20, cell - 20))
        if snap["food_on"]:
            x, y = corner(*snap["food"])
            pygame.draw.circle(surface, _FOOD, (x + cell // 2, y + cell // 2), cell // 4)
        present = (np.arange(self.max_agents) < snap["joined"]) & ~snap["left"]
        for a in np.flatnonzero(present):  # alive, or still there when the episode ended
            x, y = corner(*snap["agent_pos"][a])
            useful = snap["can_eat"][a] or can_still_press(
                snap["can_press"], snap["joined"], self.max_agents)[a]
            centre = (x + cell // 2 + 3 * (a % 3 - 1), y + cell // 2 + 3 * (a // 3 % 3 - 1))
            pygame.draw.circle(surface, render.ACTING if useful else _SPENT, centre, cell // 3)
            render.text(pygame, surface, str(a), (centre[0] - 4, centre[1] - 6), 20)
