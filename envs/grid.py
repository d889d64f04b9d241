"""Grid-world pieces shared by the MA-POCA paper's tasks (Dungeon Escape, Baton Pass, Push Block).

Cells are `(row, col)` int64 pairs on a `size x size` board, batched as `[E, K, 2]` for K things
per env. Agents pick one of five moves. Observations are egocentric: each agent sees a square
window of feature layers centred on itself, with a wall layer that is 1 outside the board, so the
same policy works from every cell and what lies beyond the window is unknown to it (the critic,
which sees every agent's window, knows more). A scripted policy finds its way with
`navigate`, a breadth-first distance map computed for every env at once.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from envs import render
from envs.core import GroupEnv, GroupSpec, ObsSpec, check_int

STAY, UP, DOWN, LEFT, RIGHT = range(5)
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)  # by action
_FAR = np.int64(1 << 20)


def move(pos: np.ndarray, action: np.ndarray, size: int) -> np.ndarray:
    """int [..., 2]: `pos` moved by `action` (int [...]), kept on the board."""
    return np.clip(pos + MOVES[action], 0, size - 1)


def rotate(pos: np.ndarray, turns: np.ndarray, size: int) -> np.ndarray:
    """int [n, K, 2]: cells `pos` turned by `turns[n]` quarter turns about the board's centre."""
    r, c = pos[..., 0], pos[..., 1]
    m, k = size - 1, np.asarray(turns)[:, None]
    rows = np.select([k == 0, k == 1, k == 2], [r, c, m - r], m - c)
    cols = np.select([k == 0, k == 1, k == 2], [c, m - r, m - c], r)
    return np.stack([rows, cols], axis=-1)


def random_cells(uniform: np.ndarray, taken: np.ndarray, k: int) -> np.ndarray:
    """int [n, k, 2]: `k` distinct cells per env, uniformly among those not `taken` [n, N, N].

    `uniform` [n, N * N] are the env's random draws: the `k` smallest of the free cells win.
    """
    n, N = taken.shape[0], taken.shape[1]
    keys = np.where(taken.reshape(n, -1), 2.0, uniform)
    flat = np.argsort(keys, axis=1, kind="stable")[:, :k]
    return np.stack([flat // N, flat % N], axis=-1)


def paint(layers: np.ndarray, channel: int, pos: np.ndarray, mask: np.ndarray,
          value: float = 1.0) -> None:
    """Set `layers[e, row, col, channel]` at the cells `pos[e, k]` of the things with `mask`."""
    e, k = np.nonzero(mask)
    layers[e, pos[e, k, 0], pos[e, k, 1], channel] = value


def count(layers: np.ndarray, channel: int, pos: np.ndarray, mask: np.ndarray,
          total: int) -> None:
    """Write at each cell the number of things there with `mask[e, k]`, divided by `total`,
    into a `channel` that holds zeros.

    One vectorized add per thing index `k` (each env appears once in it, so nothing collides);
    `np.add.at` would do it in one call but costs several times more. Whole counts are added and
    divided once, so `total` things on one cell give exactly 1.0: adding float32 `1 / total`
    that many times can round past 1 (to 1.0000001 for 10), out of the declared Box.
    """
    rows = np.arange(len(pos))
    for k in range(pos.shape[1]):
        layers[rows, pos[:, k, 0], pos[:, k, 1], channel] += mask[:, k]
    layers[..., channel] /= total


class Window:
    """Egocentric views: the `(2r + 1)^2` cells around each agent, every layer plus a wall layer.

    Layers are kept channel-last on a board padded by `r` cells, so a view is a gather of whole
    cells (`L + 1` contiguous floats each): cheap, and in the observation each cell's layers come
    together, the cells row by row.
    """

    def __init__(self, layers: int, size: int, radius: int):
        self.r, self.size, self.side = radius, size, 2 * radius + 1
        self.padded_size = size + 2 * radius
        self.channels = layers + 1
        self._empty = np.zeros((self.padded_size, self.padded_size, self.channels), np.float32)
        self._empty[..., 0] = 1.0  # the wall layer: 1 off the board
        self._empty[radius:radius + size, radius:radius + size, 0] = 0.0
        offsets = np.arange(self.side)
        self._offsets = (offsets[:, None] * self.padded_size + offsets).ravel()  # [side^2]
        self.width = self.side * self.side * self.channels

    def board(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """A fresh padded board for `n` envs and the view of its feature layers [n, N, N, L]."""
        padded = np.empty((n,) + self._empty.shape, np.float32)
        padded[:] = self._empty
        r = self.r
        return padded, padded[:, r:r + self.size, r:r + self.size, 1:]

    def __call__(self, padded: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """float32 [n, K, width]: the windows of the things at `pos` [n, K, 2] on `padded`."""
        n, K, P = len(pos), pos.shape[1], self.padded_size
        corner = (np.arange(n)[:, None] * P + pos[..., 0]) * P + pos[..., 1]  # [n, K]
        cells = np.take(padded.reshape(n * P * P, self.channels), corner[..., None] + self._offsets,
                        axis=0)  # several times faster than fancy indexing
        return cells.reshape(n, K, self.width)


def distance_map(target: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """int [E, K, N, N]: steps from each cell to `target[e, k]` avoiding `blocked` [E, K|1, N, N].

    Breadth-first search for every (env, thing) at once: relax all cells until nothing changes.
    Unreachable cells keep a huge value. The target itself is never blocked.
    """
    E, K = target.shape[:2]
    N = blocked.shape[-1]
    dist = np.full((E, K, N + 2, N + 2), _FAR, dtype=np.int64)  # a frame of unreachable cells
    free = np.zeros((E, K, N + 2, N + 2), dtype=bool)
    free[:, :, 1:-1, 1:-1] = ~blocked
    e, k = np.meshgrid(np.arange(E), np.arange(K), indexing="ij")
    dist[e, k, target[..., 0] + 1, target[..., 1] + 1] = 0
    free[e, k, target[..., 0] + 1, target[..., 1] + 1] = True
    for _ in range(N * N):
        inner = dist[:, :, 1:-1, 1:-1]
        near = np.minimum(np.minimum(dist[:, :, :-2, 1:-1], dist[:, :, 2:, 1:-1]),
                          np.minimum(dist[:, :, 1:-1, :-2], dist[:, :, 1:-1, 2:])) + 1
        better = free[:, :, 1:-1, 1:-1] & (near < inner)
        if not better.any():
            break
        inner[better] = near[better]
    return dist[:, :, 1:-1, 1:-1]


def navigate(pos: np.ndarray, target: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """int64 [E, K]: the move that brings `pos` one step closer to `target` around `blocked`.

    Stays when already there or when the target cannot be reached.
    """
    dist = distance_map(target, blocked)
    padded = np.pad(dist, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=_FAR)
    E, K = pos.shape[:2]
    e, k = np.meshgrid(np.arange(E), np.arange(K), indexing="ij")
    options = np.stack([padded[e, k, pos[..., 0] + 1 + dr, pos[..., 1] + 1 + dc]
                        for dr, dc in MOVES], axis=-1)  # [E, K, 5]: distance after each move
    options[..., 0] = np.minimum(options[..., 0], _FAR - 1)  # staying beats the unreachable
    return np.argmin(options, axis=-1).astype(np.int64)


class GridGroup(GroupEnv):
    """What the grid tasks share: the board, five moves, egocentric windows, snapshots to render.

    A subclass names its feature layers (`LAYERS`), the state arrays a frame needs
    (`STATE`), builds its spec with `grid_spec`, fills the layers in `_paint` and draws a snapshot
    in `_draw`.
    """

    # `python -m envs.play --keyboard`: each arrow key's move (pygame key names); none: stay
    ARROW_MOVES = {"K_UP": UP, "K_DOWN": DOWN, "K_LEFT": LEFT, "K_RIGHT": RIGHT}

    LAYERS: tuple[str, ...] = ()
    STATE: tuple[str, ...] = ()
    ACTIONS = ("stay", "up", "down", "left", "right")

    def _grid_init(self, size: int, view_radius: int, min_size: int) -> None:
        self.size = check_int("size", size, min_size, 32)
        self.view_radius = check_int("view_radius", view_radius, 1, 32)

    def grid_spec(self, num_agents: int, extras: int, max_steps: int) -> GroupSpec:
        """A vector observation of the window plus `extras` own features; one branch of 5."""
        side = 2 * self.view_radius + 1
        width = side * side * (len(self.LAYERS) + 1) + extras
        return GroupSpec(num_agents=num_agents, obs=(ObsSpec("vector", "vector", (width,)),),
                         continuous_size=0, discrete_branches=(len(self.ACTIONS),),
                         max_steps=check_int("max_steps", max_steps, 1))

    def _grid_state(self) -> None:
        """Call after `super().__init__`: sets up the window and the render snapshots."""
        self.window = Window(len(self.LAYERS), self.size, self.view_radius)
        self._final: dict[int, dict] = {}

    def _moves(self, disc: np.ndarray) -> np.ndarray:
        """int64 [E, A]: each agent's move, STAY for slots that are not alive."""
        return np.where(self.alive, disc[:, :, 0], STAY)

    def _window_obs(self, rows, pos: np.ndarray, extras: np.ndarray) -> tuple[np.ndarray]:
        """The vector observation: each agent's window, then its own features [n, A, extras]."""
        ids = self.env_ids[rows]
        padded, layers = self.window.board(len(ids))
        self._paint(ids, layers)
        view = self.window(padded, pos)
        return (np.concatenate([view, extras.astype(np.float32)], axis=2),)

    @abstractmethod
    def _paint(self, ids: np.ndarray, layers: np.ndarray) -> None:
        """Fill `layers` [n, N, N, len(LAYERS)] (zeroed; row, column, layer) for envs `ids`."""

    def _keep_final(self, idx: np.ndarray) -> None:
        """Before a reset: keep the ended episodes' state when a rendering view asks for it."""
        if self.record_final:
            for e in idx.tolist():
                self._final[e] = self._snapshot(e)

    def _snapshot(self, env: int) -> dict:
        snap = {name: np.copy(getattr(self, name)[env]) for name in self.STATE}
        snap["t"] = int(self.t[env])
        return snap

    # -- rendering --
    CELL = 56

    def frame(self, env: int, group_return: float, final: bool = False):
        snap = self._final[env] if final else self._snapshot(env)
        cell, top = self.CELL, 40
        width = height = self.size * cell
        height += top

        def draw(pygame, surface):
            render.text(pygame, surface, f"step {snap['t']}   group return {group_return:+.2f}",
                        (10, 10), 24)
            for i in range(self.size + 1):
                pygame.draw.line(surface, render.TRACK, (0, top + i * cell),
                                 (width, top + i * cell), 1)
                pygame.draw.line(surface, render.TRACK, (i * cell, top),
                                 (i * cell, top + width), 1)
            self._draw(pygame, surface, snap, lambda r, c: (c * cell, top + r * cell), cell)

        return (width, height), draw

    @abstractmethod
    def _draw(self, pygame, surface, snap: dict, corner, cell: int) -> None:
        """Draw the snapshot; `corner(row, col)` gives a cell's top-left pixel."""
