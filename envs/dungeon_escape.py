"""Dungeon Escape: one agent must die on purpose so that another can carry the key out.

A grid version of the Dungeon Escape task of the MA-POCA paper (Cohen et al., "On the Use and
Misuse of Absorbing States in Multi-agent Reinforcement Learning", arXiv 2111.05992), where it
shows why an agent that leaves the episode still needs credit for what the group does later.
"""

from __future__ import annotations

import numpy as np

from envs import grid, render
from envs.core import agent_any, check_int

HELD_BY_DRAGON, ON_GROUND, HELD_BY_AGENT = 0, 1, 2
_KEY, _DOOR, _PORTAL, _DRAGON, _DEAD = ((240, 200, 60), (150, 100, 60), (160, 90, 220),
                                        (220, 60, 50), (90, 90, 100))


class DungeonEscapeGroup(grid.GridGroup):
    """Agents in a dungeon; a dragon carries the key to the door toward its portal.

    ## Description
    A `size x size` dungeon holds `num_agents` agents, a door, a portal and a key dragon that
    carries the key and walks toward the portal, one cell every `dragon_period` steps. An agent
    that touches a dragon (they share a cell) dies: it leaves the episode for good. If that was
    the key dragon, the dragon vanishes too and drops the key on its cell. The portal is a hazard
    as well: an agent that steps on it dies (as in ML-Agents' version). A surviving agent that
    picks up the key (steps on it) and carries it to the door wins for the group. So the group can
    only win if one of its agents dies on purpose, and that agent's only credit for the win is the
    group reward that comes after it has gone. `num_dragons` > 1 adds dragons without a key that
    chase the nearest living agent at the same pace (the paper's hard variant: 5 agents, 3
    dragons; `DungeonEscapeHard-v0`).

    ## Action Space
    One discrete branch of 5: 0 stay, 1 up, 2 down, 3 left, 4 right (moves off the board stay).
    Agents may share cells.

    ## Observation Space
    float32 vector per agent: an egocentric `(2 r + 1) x (2 r + 1)` window (`r = view_radius`,
    default 2) centred on the agent, 7 layers per cell (cells row by row, each cell's layers
    together): wall (1 off the board), agents (how many living agents stand there, including the
    viewer at the centre, divided by `num_agents`; an agent's final observation, once it has
    died or the episode has ended, no longer counts it), the key dragon, other dragons, the key on
    the ground, the door, the portal; then 4 own features: it holds the key, a groupmate holds
    the key, and the door's offset from the agent (rows, columns) in board widths, -1..1 (the
    paper's agents see the door across the room with their ray sensors). Nothing else outside
    the window is seen: dragons, the key and groupmates only when they are near.

    ## Rewards
    Group reward +1 when a living agent holding the key stands on the door; nothing else (no
    individual rewards). Maximum return 1: the scripted `reference_policy` gets it in every episode
    with the defaults (in 12 steps on average), a random policy about 0.045 (the first episode of
    1000 envs, seed 0). Hard variant: scripted about 0.98, random about 0.003.

    ## Starting State
    The key dragon starts in a corner and its portal is in the opposite corner, the door in a third
    corner, chasing dragons in the fourth corner and the middle of an edge; the layout is turned by
    a random multiple of 90 degrees. Agents start on distinct random free cells.

    ## Episode End
    Each step: the living agents move; agents on a dragon's cell or on the portal die (a slain
    key dragon drops the key); on every `dragon_period`-th step the dragons move (the key dragon
    toward its portal, chasers toward the nearest living agent) and agents they walk onto die
    the same way; a living agent on the key picks it up (the lowest index if several); the key
    holder on the door wins.
    The episode terminates (every living agent at once) with the win, when the key dragon reaches
    the portal (it escapes: 0), when the key holder dies (the key is lost: 0), or when every agent
    is dead. After `max_steps` the living agents are truncated.

    ## Arguments
    >>> import gymnasium, envs
    >>> env = gymnasium.make("groupenvs/DungeonEscape-v0", num_agents=3)
>>> env.observation_space["vector"].shape  # 7 layers x 5 x 5 cells + 4 own features
(3, 179)

    | argument | default | meaning |
    |---|---|---|
    | `num_envs` | 1 | dungeons stepped at once (native core only) |
    | `num_agents` | 3 | agents, 2..8 (hard variant: 5): one must die for another to win |
    | `num_dragons` | 1 | the key dragon plus 0-2 chasing dragons (hard variant: 3) |
    | `size` | 6 | the board is `size x size` cells, 4..32 |
    | `view_radius` | 2 | the window is `2 * view_radius + 1` cells wide |
    | `dragon_period` | 2 | dragons move once every this many steps, 1..8 |
    | `max_steps` | 50 | steps before the group is truncated |

    ## Version History
    - v0: initial release.
    """

    LAYERS = ("agent", "key_dragon", "dragon", "key", "door", "portal")
    STATE = ("agent_pos", "dead", "dragon_pos", "dragon_on", "key_pos", "key_state", "holder",
             "door", "portal")

    def __init__(self, num_envs: int = 1, num_agents: int = 3, num_dragons: int = 1,
                 size: int = 6, view_radius: int = 2, dragon_period: int = 2,
                 max_steps: int = 50):
        A = check_int("num_agents", num_agents, 2, 8)  # one to die, one to carry the key
        self.num_dragons = check_int("num_dragons", num_dragons, 1, 3)
        self.dragon_period = check_int("dragon_period", dragon_period, 1, 8)
        self._grid_init(size, view_radius, min_size=4)
        super().__init__(self.grid_spec(A, 4, max_steps), num_envs)
        self._grid_state()
        E, D = self.num_envs, self.num_dragons
        self.agent_pos = np.zeros((E, A, 2), np.int64)
        self.dead = np.zeros((E, A), bool)  # killed by a dragon (for drawing)
        self.dragon_pos = np.zeros((E, D, 2), np.int64)
        self.dragon_on = np.zeros((E, D), bool)  # dragon 0 carries the key while it is on
        self.key_pos = np.zeros((E, 2), np.int64)
        self.key_state = np.zeros(E, np.int64)
        self.holder = np.zeros(E, np.int64)  # the agent holding the key (when HELD_BY_AGENT)
        self.door = np.zeros((E, 2), np.int64)
        self.portal = np.zeros((E, 2), np.int64)
        m = self.size - 1
        # the layout before turning: key dragon, portal, door, chasers
        self._layout = np.array([[0, 0], [m, m], [m, 0], [0, m], [m // 2, m]][:3 + D - 1])

    # -- GroupEnv hooks --
    def _reset_envs(self, idx):
        self._keep_final(idx)
        n, N = len(idx), self.size
        turns = (self.random_bits(idx) % np.uint64(4)).astype(np.int64)
        layout = grid.rotate(np.broadcast_to(self._layout, (n,) + self._layout.shape), turns, N)
        self.dragon_pos[idx, 0] = layout[:, 0]
        self.portal[idx], self.door[idx] = layout[:, 1], layout[:, 2]
        self.dragon_pos[idx, 1:] = layout[:, 3:]
        taken = np.zeros((n, N, N), bool)
        rows = np.arange(n)[:, None]
        taken[rows, layout[..., 0], layout[..., 1]] = True
        self.agent_pos[idx] = grid.random_cells(self.uniform(idx, N * N, step=1), taken,
                                                self.max_agents)
        self.dead[idx] = False
        self.dragon_on[idx] = True
        self.key_state[idx] = HELD_BY_DRAGON
        self.key_pos[idx] = self.dragon_pos[idx, 0]
        self.holder[idx] = 0
        self.alive[idx] = True

    def _step(self, cont, disc):
        E, A = self.num_envs, self.max_agents
        terminated = np.zeros((E, A), bool)
        self.agent_pos = grid.move(self.agent_pos, self._moves(disc), self.size)
        self._touch(terminated)
        dragons_move = (self.t + 1) % self.dragon_period == 0  # [E]: each env's own clock
        if dragons_move.any():
            self._dragons_move(dragons_move)
            self._touch(terminated)
        escaped = self.dragon_on[:, 0] & (self.dragon_pos[:, 0] == self.portal).all(1)
        rows = np.arange(E)
        ground = self.key_state == ON_GROUND
        on_key = self.alive & (self.agent_pos == self.key_pos[:, None]).all(2) & ground[:, None]
        picked = agent_any(on_key)
        self.holder = np.where(picked, np.argmax(on_key, axis=1), self.holder)
        self.key_state = np.where(picked, HELD_BY_AGENT, self.key_state)
        held = self.key_state == HELD_BY_AGENT
        self.key_pos = np.where(held[:, None], self.agent_pos[rows, self.holder], self.key_pos)
        won = held & self.alive[rows, self.holder] & (self.key_pos == self.door).all(1)
        over = won | escaped
        terminated |= self.alive & over[:, None]
        self.alive &= ~over[:, None]
        no_truncation = np.zeros((E, A), bool)
        return np.zeros((E, A), np.float32), won.astype(np.float32), terminated, no_truncation

    def _touch(self, terminated):
        """Agents sharing a cell with a dragon, or standing on the portal, die; a slain key dragon
        drops the key."""
        same = (self.agent_pos[:, :, None] == self.dragon_pos[:, None]).all(-1)  # [E, A, D]
        contact = same & self.alive[:, :, None] & self.dragon_on[:, None]
        on_portal = self.alive & (self.agent_pos == self.portal[:, None]).all(-1)
        dies = contact.any(2) | on_portal
        if not dies.any():
            return
        slain = contact[:, :, 0].any(1)  # the key dragon
        self.dragon_on[:, 0] &= ~slain
        self.key_state = np.where(slain, ON_GROUND, self.key_state)
        self.key_pos = np.where(slain[:, None], self.dragon_pos[:, 0], self.key_pos)
        rows = np.arange(self.num_envs)
        lost = (self.key_state == HELD_BY_AGENT) & dies[rows, self.holder]
        self.dead |= dies
        ends = dies | (self.alive & lost[:, None])  # the key is gone: so is the group's chance
        terminated |= ends
        self.alive &= ~ends

    def _dragons_move(self, now):
        on = self.dragon_on & now[:, None]
        target = np.empty_like(self.dragon_pos)
        target[:, 0] = self.portal
        if self.num_dragons > 1:  # chasers: toward the nearest living agent
            far = np.abs(self.dragon_pos[:, 1:, None] - self.agent_pos[:, None]).sum(-1)
            far = np.where(self.alive[:, None], far, 1 << 20)  # [E, D - 1, A]
            nearest = np.argmin(far, axis=2)
            rows = np.arange(self.num_envs)[:, None]
            target[:, 1:] = self.agent_pos[rows, nearest]
            on[:, 1:] &= agent_any(self.alive)[:, None]
        self.dragon_pos = np.where(on[..., None], _greedy_step(self.dragon_pos, target),
                                   self.dragon_pos)

    def _observe(self, rows=slice(None)):
        ids = self.env_ids[rows]
        held = self.key_state[ids] == HELD_BY_AGENT
        mine = held[:, None] & (np.arange(self.max_agents) == self.holder[ids][:, None])
        # the door's offset from the agent in board widths (-1..1), as the paper's ray sensors
        # see the door from across the room: which way to carry the key is then part of what
        # each agent sees, and the task stays about who dies for it, not about searching.
        door = (self.door[ids, None] - self.agent_pos[ids]) / (self.size - 1)
        extras = np.concatenate([np.stack([mine, held[:, None] & ~mine], axis=2), door], axis=2)
        return self._window_obs(rows, self.agent_pos[ids], extras)

    def _paint(self, ids, layers):
        n = len(ids)
        grid.count(layers, 0, self.agent_pos[ids], self.alive[ids], self.max_agents)
        on = self.dragon_on[ids]
        grid.paint(layers, 1, self.dragon_pos[ids, :1], on[:, :1])
        grid.paint(layers, 2, self.dragon_pos[ids, 1:], on[:, 1:])
        ground = (self.key_state[ids] == ON_GROUND)[:, None]
        grid.paint(layers, 3, self.key_pos[ids, None], ground)
        every = np.ones((n, 1), bool)
        grid.paint(layers, 4, self.door[ids, None], every)
        grid.paint(layers, 5, self.portal[ids, None], every)

    # -- the scripted policy --
    def reference_policy(self) -> dict:
        """A scripted group: the agent nearest the key dragon runs into it, the others wait;
        once the key is down the nearest survivor fetches it and carries it to the door.

        The portal, chasing dragons and the cells next to them are avoided. With the defaults
        the group wins every episode (return 1).
        """
        E, N = self.num_envs, self.size
        rows = np.arange(E)
        target = self.agent_pos.copy()  # waiting: stay
        with_dragon = self.dragon_on[:, 0]
        ground = self.key_state == ON_GROUND
        goal = np.where(with_dragon[:, None], self.dragon_pos[:, 0],
                        np.where(ground[:, None], self.key_pos, self.door))
        far = np.abs(self.agent_pos - goal[:, None]).sum(-1)
        chosen = np.argmin(np.where(self.alive, far, 1 << 20), axis=1)
        chosen = np.where(self.key_state == HELD_BY_AGENT, self.holder, chosen)
        target[rows, chosen] = goal
        blocked = np.zeros((E, 1, N, N), bool)
        blocked[rows, 0, self.portal[:, 0], self.portal[:, 1]] = True  # the portal kills
        if self.num_dragons > 1:
            near = self.dragon_pos[:, 1:, None] + grid.MOVES  # [E, D - 1, 5, 2]
            inside = ((near >= 0) & (near < N)).all(-1) & self.dragon_on[:, 1:, None]
            e = np.broadcast_to(rows[:, None, None], inside.shape)[inside]
            blocked[e, 0, near[inside][:, 0], near[inside][:, 1]] = True
        waiting = (self.agent_pos == target).all(-1)
        moves = grid.navigate(self.agent_pos, target, blocked)
        return {"discrete": np.where(waiting, grid.STAY, moves)[:, :, None]}

    # -- rendering --
    def _draw(self, pygame, surface, snap, corner, cell):
        def box(pos, color, inset):
            x, y = corner(*pos)
            pygame.draw.rect(surface, color, (x + inset, y + inset, cell - 2 * inset,
                                              cell - 2 * inset))

        box(snap["door"], _DOOR, 4)
        x, y = corner(*snap["portal"])
        pygame.draw.circle(surface, _PORTAL, (x + cell // 2, y + cell // 2), cell // 2 - 4, 4)
        for d, (pos, on) in enumerate(zip(snap["dragon_pos"], snap["dragon_on"], strict=True)):
            if on:
                x, y = corner(*pos)
                pygame.draw.polygon(surface, _DRAGON, [(x + cell // 2, y + 6),
                                                       (x + 6, y + cell - 6),
                                                       (x + cell - 6, y + cell - 6)])
                if d == 0:
                    box(pos, _KEY, cell // 2 - 5)
        if snap["key_state"] == ON_GROUND:
            box(snap["key_pos"], _KEY, cell // 3)
        for a, (pos, dead) in enumerate(zip(snap["agent_pos"], snap["dead"], strict=True)):
            x, y = corner(*pos)
            centre = (x + cell // 2, y + cell // 2)
            if not dead:  # alive, or still there when the episode ended
                pygame.draw.circle(surface, render.ACTING, centre, cell // 3)
                if snap["key_state"] == HELD_BY_AGENT and snap["holder"] == a:
                    pygame.draw.circle(surface, _KEY, centre, cell // 3, 4)
                render.text(pygame, surface, str(a), (centre[0] - 4, centre[1] - 6), 20)
            else:
                a, b = 12, cell - 12
                pygame.draw.line(surface, _DEAD, (x + a, y + a), (x + b, y + b), 3)
                pygame.draw.line(surface, _DEAD, (x + b, y + a), (x + a, y + b), 3)


def _greedy_step(pos: np.ndarray, target: np.ndarray) -> np.ndarray:
    """One cell from `pos` toward `target` along the axis with the larger gap (rows on a tie)."""
    gap = target - pos
    rows_first = np.abs(gap[..., 0]) >= np.abs(gap[..., 1])
    step = np.sign(gap)
    step[..., 1] = np.where(rows_first, 0, step[..., 1])
    step[..., 0] = np.where(rows_first, step[..., 0], 0)
    return pos + step
