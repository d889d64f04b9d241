"""Push Block: blocks that only move when enough agents push them together.

A grid version of the Collaborative Push Block task of the MA-POCA paper (Cohen et al., "On the Use
and Misuse of Absorbing States in Multi-agent Reinforcement Learning", arXiv 2111.05992): the
heavier blocks pay more and need more of the group pushing the same way at the same time.
"""

from __future__ import annotations

import numpy as np

from envs import grid, render
from envs.core import check_int, check_number

_GOAL, _BLOCK = (40, 80, 50), ((200, 200, 120), (220, 150, 70), (220, 90, 60))


class PushBlockGroup(grid.GridGroup):
    """Agents push blocks of weight 1, 2 and 3 into the goal row at the top.

    ## Description
    A `size x size` board has a goal zone along its top row and blocks of the given `weights`
    below it. An agent pushes a block by moving into its cell. A block of weight `w` moves one cell
    only when at least `w` agents push it the same way in the same step (agents may share a cell,
    so they can stack up behind it), and only into a free cell on the board: not off the board,
    not onto another block, not onto an agent standing there, and not where another block moves.
    Agents whose move is blocked (by a block that does not move) stay. A block that reaches the
    top row is scored: it pays its weight to the group and leaves the board.

    ## Action Space
    One discrete branch of 5: 0 stay, 1 up, 2 down, 3 left, 4 right (moves off the board stay).

    ## Observation Space
    float32 vector per agent: an egocentric `(2 r + 1) x (2 r + 1)` window (`r = view_radius`,
    default 3) centred on the agent, 6 layers per cell (cells row by row, each cell's layers
    together): wall (1 off the board), agents (how many stand there, including the viewer at the
    centre, divided by `num_agents`; the final observation of an episode that terminated counts
    none, as the agents have left), blocks of weight 1, 2 and 3, and the goal row.

    ## Rewards
    Group reward: a block's weight when it is scored, and `-time_penalty` every step. No
    individual rewards. With the default blocks (1, 2, 3) the most is 6 minus the penalties; the
    scripted `reference_policy` (the whole group pushes one block at a time straight up) gets
    about 5.89 (every block in, in about 22 steps), a random policy about -0.18 (the first
    episode of 1000 envs, seed 0: now and then it scores the light block).

    ## Starting State
    Blocks on distinct random columns, in rows 2 to `size - 2` (so each can be pushed straight
    up); agents on distinct random cells without a block.

    ## Episode End
    Terminated when every block is scored; after `max_steps` the agents are truncated. Agents never
    leave early in this task: it is the paper's control for credit assignment among agents that
    stay.

    ## Arguments
    >>> import gymnasium, envs
    >>> env = gymnasium.make("groupenvs/PushBlock-v0", weights=(1, 1, 2, 2, 3, 3), size=8)

    | argument | default | meaning |
    |---|---|---|
    | `num_envs` | 1 | boards stepped at once (native core only) |
    | `num_agents` | 3 | agents, at least the heaviest weight, up to 8 |
    | `weights` | (1, 2, 3) | one block per entry, each weight 1..3; at most `size` blocks |
    | `size` | 6 | the board is `size x size` cells, 4..32 |
    | `view_radius` | 3 | the window is `2 * view_radius + 1` cells wide |
    | `time_penalty` | 0.005 | group penalty per step, >= 0 |
    | `max_steps` | 60 | steps before the group is truncated |

    ## Version History
    - v0: initial release.
    """

    LAYERS = ("agent", "block_1", "block_2", "block_3", "goal")
    STATE = ("agent_pos", "block_pos", "block_on")

    def __init__(self, num_envs: int = 1, num_agents: int = 3, weights=(1, 2, 3), size: int = 6,
                 view_radius: int = 3, time_penalty: float = 0.005, max_steps: int = 60):
        self._grid_init(size, view_radius, min_size=4)
        if (not isinstance(weights, (tuple, list)) or not weights or any(
                isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 1 <= w <= 3
                for w in weights)):
            raise ValueError(f"weights must be a non-empty tuple of ints in 1..3, got {weights!r}")
        if len(weights) > self.size:
            raise ValueError(f"{len(weights)} blocks need distinct columns: at most size="
                             f"{self.size}, got weights={tuple(weights)!r}")
        A = check_int("num_agents", num_agents, max(weights), 8)
        self.time_penalty = check_number("time_penalty", time_penalty, 0)
        self.weights = np.array(weights, np.int64)
        super().__init__(self.grid_spec(A, 0, max_steps), num_envs)
        self._grid_state()
        E, K = self.num_envs, len(weights)
        self.agent_pos = np.zeros((E, A, 2), np.int64)
        self.block_pos = np.zeros((E, K, 2), np.int64)
        self.block_on = np.zeros((E, K), bool)

    # -- GroupEnv hooks --
    def _reset_envs(self, idx):
        self._keep_final(idx)
        n, N, K = len(idx), self.size, len(self.weights)
        u = self.uniform(idx, 2 * N, step=1)
        cols = np.argsort(u[:, :N], axis=1)[:, :K]
        rows = 2 + (u[:, N:N + K] * (N - 3)).astype(np.int64)  # 2 .. N - 2
        self.block_pos[idx] = np.stack([rows, cols], axis=-1)
        taken = np.zeros((n, N, N), bool)
        taken[np.arange(n)[:, None], rows, cols] = True
        self.agent_pos[idx] = grid.random_cells(self.uniform(idx, N * N, step=2), taken,
                                                self.max_agents)
        self.block_on[idx] = True
        self.alive[idx] = True

    def _step(self, cont, disc):
        E, A = self.num_envs, self.max_agents
        action = self._moves(disc)
        wanted = grid.move(self.agent_pos, action, self.size)
        block_pos, on = self.block_pos, self.block_on
        # pushes[e, k, d]: agents moving into block k with move d
        into = (wanted[:, :, None] == block_pos[:, None]).all(-1) & on[:, None]  # [E, A, K]
        pushes = np.einsum("eak,ead->ekd", into.astype(np.int64), np.eye(5, dtype=np.int64)[action])
        enough = pushes[:, :, 1:] >= self.weights[:, None]  # [E, K, 4]: moves up/down/left/right
        one_way = enough.sum(-1) == 1
        way = 1 + np.argmax(enough, axis=-1)
        dest = block_pos + grid.MOVES[way]
        on_board = ((dest >= 0) & (dest < self.size)).all(-1)
        dest = np.clip(dest, 0, self.size - 1)
        hits_block = ((dest[:, :, None] == block_pos[:, None]).all(-1) & on[:, None]).any(2)
        hits_agent = ((dest[:, :, None] == self.agent_pos[:, None]).all(-1)
                      & self.alive[:, None]).any(2)
        moves = on & one_way & on_board & ~hits_block & ~hits_agent
        same = (dest[:, :, None] == dest[:, None]).all(-1) & moves[:, None] & moves[:, :, None]
        moves &= same.sum(2) == 1  # two blocks heading for one cell: neither moves
        self.block_pos = np.where(moves[..., None], dest, block_pos)
        stopped = ((wanted[:, :, None] == self.block_pos[:, None]).all(-1) & on[:, None]).any(2)
        self.agent_pos = np.where(stopped[..., None], self.agent_pos, wanted)
        scored = on & (self.block_pos[..., 0] == 0)
        self.block_on = on & ~scored
        group_reward = scored @ self.weights.astype(np.float32) - np.float32(self.time_penalty)
        done = ~self.block_on.any(1)
        terminated = self.alive & done[:, None]
        self.alive &= ~done[:, None]
        return (np.zeros((E, A), np.float32), group_reward.astype(np.float32), terminated,
                np.zeros((E, A), bool))

    def _observe(self, rows=slice(None)):
        ids = self.env_ids[rows]
        return self._window_obs(rows, self.agent_pos[ids], np.zeros((len(ids), self.max_agents, 0)))

    def _paint(self, ids, layers):
        grid.count(layers, 0, self.agent_pos[ids], self.alive[ids], self.max_agents)
        for w in (1, 2, 3):
            grid.paint(layers, w, self.block_pos[ids], self.block_on[ids] & (self.weights == w))
        layers[:, 0, :, 4] = 1.0  # the top row

    # -- the scripted policy --
    def reference_policy(self) -> dict:
        """The whole group pushes one block (the first left) at a time straight up.

        Every agent walks around the blocks to the cell below that block; when enough of them
        stand there they push up together, the others wait. Solves every start with the
        defaults (blocks on distinct columns, so nothing stands in a block's way up).
        """
        E, A, N = self.num_envs, self.max_agents, self.size
        rows = np.arange(E)
        first = np.argmax(self.block_on, axis=1)  # [E]
        below = self.block_pos[rows, first] + grid.MOVES[grid.DOWN]
        blocked = np.zeros((E, 1, N, N), bool)
        e, k = np.nonzero(self.block_on)
        blocked[e, 0, self.block_pos[e, k, 0], self.block_pos[e, k, 1]] = True
        there = (self.agent_pos == below[:, None]).all(-1) & self.alive  # [E, A]
        enough = there.sum(1) >= self.weights[first]
        walk = grid.navigate(self.agent_pos, np.broadcast_to(below[:, None], (E, A, 2)), blocked)
        act = np.where(there, np.where(enough[:, None], grid.UP, grid.STAY), walk)
        return {"discrete": act[:, :, None]}

    # -- rendering --
    def _draw(self, pygame, surface, snap, corner, cell):
        for c in range(self.size):
            x, y = corner(0, c)
            pygame.draw.rect(surface, _GOAL, (x + 1, y + 1, cell - 2, cell - 2))
        for (r, c), on, w in zip(snap["block_pos"], snap["block_on"], self.weights, strict=True):
            if on:
                x, y = corner(r, c)
                pygame.draw.rect(surface, _BLOCK[w - 1], (x + 5, y + 5, cell - 10, cell - 10))
                render.text(pygame, surface, str(w), (x + cell // 2 - 5, y + cell // 2 - 8), 26)
        cells: dict[tuple[int, int], list[int]] = {}
        for a in range(self.max_agents):  # agents stay to the end in this task
            cells.setdefault(tuple(snap["agent_pos"][a]), []).append(int(a))
        for (r, c), agents in cells.items():
            x, y = corner(r, c)
            centre = (x + cell // 2, y + cell // 2)
            pygame.draw.circle(surface, render.ACTING, centre, cell // 3)
            render.text(pygame, surface, ",".join(map(str, agents)),
                        (centre[0] - 4 * len(agents), centre[1] - 6), 20)
