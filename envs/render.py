"""pygame drawing shared by tasks: an off-screen frame, or a window opened on the first render().

pygame is imported lazily, so stepping never pays for it; `render_mode=None` costs nothing.
"""

from __future__ import annotations

import os

import numpy as np

RENDER_MODES = ("human", "rgb_array")
BACKGROUND = (24, 26, 32)
TEXT = (230, 230, 230)
TRACK = (90, 95, 110)
ACTING = (80, 160, 255)
SUCCESS = (70, 200, 110)
FAILURE = (230, 80, 70)
PARTIAL = (240, 170, 60)


def check_render_mode(mode) -> None:
    if mode is not None and mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be one of {list(RENDER_MODES)} or None, got {mode!r}")


def check_display(instead: str) -> None:
    """Fail if a window cannot be shown (Linux without DISPLAY/WAYLAND_DISPLAY, SDL told to
    draw off-screen, or no display server where they point: pygame is asked which driver it
    got) rather than silently drawing nowhere; `instead` says what to do then."""
    import sys

    driver = os.environ.get("SDL_VIDEODRIVER", "")
    if driver in ("dummy", "offscreen"):
        why = f"SDL_VIDEODRIVER={driver} draws off-screen"
    elif sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                   or os.environ.get("WAYLAND_DISPLAY")):
        why = "neither DISPLAY nor WAYLAND_DISPLAY is set"
    else:  # a DISPLAY with no server behind it (a stale ssh forward): pygame then falls back
        # to its off-screen driver without a word, so ask it which driver it got
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame

        where = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        where = f" on {where!r}" if where else ""
        try:
            pygame.display.init()
        except pygame.error as err:  # a driver asked for (SDL_VIDEODRIVER=x11) and not there
            why = f"no window could be opened{where} ({err})"
        else:
            if pygame.display.get_driver() not in ("dummy", "offscreen"):
                return
            pygame.display.quit()
            why = f"no window could be opened{where} (SDL fell back to drawing off-screen)"
    raise ValueError(f"--render human needs a display, but {why}; {instead}")


class Renderer:
    """Draws frames of `size` (width, height) with `draw(pygame, surface)`."""

    def __init__(self, mode: str, fps: int):
        check_render_mode(mode)
        self.mode, self.fps = mode, fps
        self.window = self.clock = None

    def render(self, draw, size: tuple[int, int]) -> np.ndarray | None:
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame

        if not pygame.font.get_init():
            pygame.font.init()
        surface = pygame.Surface(size)
        surface.fill(BACKGROUND)
        draw(pygame, surface)
        if self.mode == "rgb_array":
            return np.transpose(pygame.surfarray.array3d(surface), (1, 0, 2)).copy()
        if self.window is None or self.window.get_size() != size:
            pygame.display.init()
            self.window = pygame.display.set_mode(size)
            pygame.display.set_caption("groupenvs")
            self.clock = pygame.time.Clock()
        self.window.blit(surface, (0, 0))
        pygame.event.pump()
        pygame.display.flip()
        self.clock.tick(self.fps)
        return None

    def close(self) -> None:
        if self.window is not None:
            import pygame

            pygame.display.quit()
            self.window = None


def text(pygame, surface, message: str, pos: tuple[int, int], size: int = 16) -> None:
    font = pygame.font.Font(None, size)
    surface.blit(font.render(message, True, TEXT), pos)


class EpisodeRenderer:
    """Rendering for a view of one group: tracks its return and draws the task's frame."""

    def __init__(self, core, mode: str | None, fps: int):
        check_render_mode(mode)
        self.core, self.mode = core, mode
        self.renderer = Renderer(mode, fps) if mode else None
        if mode:
            core.record_final = True  # keep the last frame of an episode that ends
        self.group_return, self.ended = 0.0, False

    def start(self) -> None:
        self.group_return, self.ended = 0.0, False
        if self.mode == "human":
            self.render()

    def step(self, step) -> None:
        self.advance(float(step.group_reward[0]), bool(step.group_done[0]))

    def advance(self, group_reward: float, ended: bool) -> None:
        """After a step: its group reward and whether it ended the episode."""
        self.group_return += group_reward
        self.ended = ended
        if self.mode == "human":
            self.render()

    def render(self) -> np.ndarray | None:
        if self.renderer is None:
            import gymnasium

            gymnasium.logger.warn("render() called without a render_mode; pass "
                                  f"render_mode={list(RENDER_MODES)} when making the env")
            return None
        self.core._check_open()
        if not self.core.seeded:  # as step() and state(): there is no episode to draw yet
            raise RuntimeError("render() called before reset(): call reset() first")
        size, draw = self.core.frame(0, self.group_return, final=self.ended)
        return self.renderer.render(draw, size)

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
