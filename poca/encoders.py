"""Observation encoders: every component of one agent's observation -> one feature vector.

vector: identity (or running normalization); image (HWC uint8, any C, scaled to [0, 1] here): a CNN
chosen by `vis_encode_type`; entity lists: each present row embedded together with the agent's
fixed-size encoding, residual self-attention over the rows, masked mean (as ML-Agents'
ml-agents/mlagents/trainers/torch_entities/networks.py ObservationEncoder does).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from envs.core import ObsSpec
from poca.attention import ResidualSelfAttention, entity_embedding

# smallest image side each encoder accepts (ML-Agents' values)
MIN_IMAGE_SIZE = {"simple": 20, "nature_cnn": 36, "resnet": 15, "match3": 5,
                  "fully_connected": 1}
PRESENT = 0.01  # an entity row with a smaller sum of squares is padding
# most weights an image encoder's dense layer may hold: 1 GiB of float32, about 4 GiB in training
# (gradients, Adam's two moments), in the actor and again in the critic. match3 keeps every pixel
# and on a 457x120 frame would need 969M; 84x84 at 128 hidden units needs 118M
MAX_DENSE_WEIGHTS = 2**28


def _module_names(names: list) -> list[str]:
    """A submodule name for each observation component: its own name where torch allows it (so
    checkpoints keep readable keys), else `obs_<index>`. Gymnasium's Dict takes any key, but a
    module name must be a string without dots that is not already an attribute (`type`,
    `training`, `keys`, ...)."""
    taken = nn.ModuleDict()
    allowed = [isinstance(n, str) and n != "" and "." not in n and not hasattr(taken, n)
               for n in names]
    used = {n for n, ok in zip(names, allowed, strict=True) if ok}
    keys = []
    for index, (name, ok) in enumerate(zip(names, allowed, strict=True)):
        key = name if ok else f"obs_{index}"
        while not ok and (key in used or hasattr(taken, key)):
            key += "_"
        used.add(key)
        keys.append(key)
    return keys


class RunningNorm(nn.Module):
    """Running mean/variance of a vector observation (or of the returns); normalizes and clips
    to [-5, 5].

    The statistics are float64: the sum of squared deviations grows with the count and the
    square of the values, which in float32 overflowed after a few thousand steps of values
    near 1e17 (a timestamp in nanoseconds), and a float32 count stops counting single steps
    past 2**24. The network still reads float32."""

    def __init__(self, size: int):
        super().__init__()
        self.register_buffer("count", torch.ones((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("m2", torch.ones(size, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Chan et al.'s parallel update with a batch `x` [n, size]."""
        n = x.shape[0]
        if n == 0:
            return
        x = x.double()
        total = self.count + n
        delta = x.mean(0) - self.mean
        self.m2 += ((x - x.mean(0)) ** 2).sum(0) + delta**2 * self.count * n / total
        self.mean += delta * n / total
        self.count.copy_(total)

    def std(self) -> Tensor:
        return torch.sqrt(self.m2 / self.count)

    def forward(self, x: Tensor) -> Tensor:
        return ((x - self.mean.to(x.dtype)) / self.std().to(x.dtype)).clamp(-5, 5)


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(nn.SiLU(), nn.Conv2d(channels, channels, 3, padding=1),
                                  nn.SiLU(), nn.Conv2d(channels, channels, 3, padding=1))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.body(x)


def _conv_stack(kind: str, channels: int) -> nn.Sequential:
    if kind == "simple":
        return nn.Sequential(nn.Conv2d(channels, 16, 8, 4), nn.LeakyReLU(),
                             nn.Conv2d(16, 32, 4, 2), nn.LeakyReLU())
    if kind == "nature_cnn":
        return nn.Sequential(nn.Conv2d(channels, 32, 8, 4), nn.LeakyReLU(),
                             nn.Conv2d(32, 64, 4, 2), nn.LeakyReLU(),
                             nn.Conv2d(64, 64, 3, 1), nn.LeakyReLU())
    if kind == "match3":
        return nn.Sequential(nn.Conv2d(channels, 35, 3, 1), nn.LeakyReLU(),
                             nn.Conv2d(35, 144, 3, 1), nn.LeakyReLU())
    if kind == "resnet":
        layers, prev = [], channels
        for out in (16, 32, 32):
            layers += [nn.Conv2d(prev, out, 3, padding=1), nn.MaxPool2d(3, 2, padding=1),
                       _ResidualBlock(out), _ResidualBlock(out)]
            prev = out
        return nn.Sequential(*layers, nn.SiLU())
    return nn.Sequential()  # fully_connected


@torch.no_grad()
def _features(convs: nn.Sequential, shape: tuple[int, int, int]) -> int:
    """How many features `convs` leave of one (H, W, C) image."""
    H, W, C = shape
    return convs(torch.zeros(1, C, H, W)).numel()


class ImageEncoder(nn.Module):
    """uint8 [B, H, W, C] -> [B, hidden]. Pixels are divided by `high`, the image's largest
    value (255 for a full-range image; 1 for a 0/1 occupancy grid, which /255 would all but
    blank out)."""

    def __init__(self, shape: tuple[int, int, int], hidden: int, kind: str, high: float = 255.0,
                 name: str = "image"):
        super().__init__()
        if kind not in MIN_IMAGE_SIZE:
            raise ValueError(f"vis_encode_type must be one of {list(MIN_IMAGE_SIZE)}, "
                             f"got {kind!r}")
        H, W, C = shape
        if min(H, W) < MIN_IMAGE_SIZE[kind]:
            fits = [k for k, m in MIN_IMAGE_SIZE.items() if min(H, W) >= m]
            hint = (f"; images are read as (height, width, channels): if {H} is its channels, "
                    "move them last (numpy.moveaxis(obs, 0, -1) in a wrapper)"
                    if H <= 4 < min(W, C) else "")
            raise ValueError(f"observation {name!r}: vis_encode_type {kind!r} needs images of at "
                             f"least {MIN_IMAGE_SIZE[kind]}x{MIN_IMAGE_SIZE[kind]} pixels, got "
                             f"{H}x{W} (shape {tuple(shape)}){hint}; encoders that fit: {fits} "
                             "(--set network_settings.vis_encode_type=NAME)")
        self.register_buffer("high", torch.tensor(float(high)), persistent=False)
        self.convs = _conv_stack(kind, C)
        flat = _features(self.convs, shape)
        if flat * hidden > MAX_DENSE_WEIGHTS:
            fits = [k for k, m in MIN_IMAGE_SIZE.items() if k != kind and min(H, W) >= m
                    and _features(_conv_stack(k, C), shape) * hidden <= MAX_DENSE_WEIGHTS]
            weights = flat * hidden
            raise ValueError(f"observation {name!r}: vis_encode_type {kind!r} leaves {flat:,} "
                             f"features of a {H}x{W} image, a dense layer of {weights:,} weights "
                             f"({weights * 4 / 2**30:.1f} GiB of float32, about 4x that in "
                             "training, in the actor and again in the critic; more than "
                             f"{MAX_DENSE_WEIGHTS:,} are refused); encoders that fit: {fits} "
                             "(--set network_settings.vis_encode_type=NAME), fewer hidden_units, "
                             "or a smaller image")
        self.out = nn.Sequential(nn.Linear(flat, hidden),
                                 nn.ReLU() if kind == "resnet" else nn.LeakyReLU())

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 3, 1, 2).float() / self.high
        return self.out(self.convs(x).flatten(1))


class EntityEncoder(nn.Module):
    """Entity lists [B, n_i, d_i] (+ the agent's own encoding [B, s]) -> [B, hidden]."""

    def __init__(self, entity_sizes: list[int], self_size: int, hidden: int):
        super().__init__()
        self.self_embed = entity_embedding(self_size, hidden) if self_size else None
        extra = hidden if self_size else 0
        self.embeds = nn.ModuleList(entity_embedding(d + extra, hidden) for d in entity_sizes)
        self.attention = ResidualSelfAttention(hidden)

    def forward(self, lists: list[Tensor], own: Tensor | None) -> Tensor:
        xs, present = [], []
        me = None if self.self_embed is None else self.self_embed(own)
        for rows, embed in zip(lists, self.embeds, strict=False):
            rows = rows.float()
            present.append((rows**2).sum(-1) > PRESENT)
            if me is not None:
                rows = torch.cat([me[:, None].expand(-1, rows.shape[1], -1), rows], -1)
            xs.append(embed(rows))
        return self.attention(torch.cat(xs, 1), torch.cat(present, 1))


class ObservationEncoder(nn.Module):
    """All components of one agent's observation -> `size` features. Inputs may carry any
    leading dims (e.g. [N, A, ...]); they are kept in the output."""

    def __init__(self, specs: tuple[ObsSpec, ...], hidden: int, normalize: bool,
                 vis_encode_type: str = "simple"):
        super().__init__()
        self.specs = specs
        self.keys = _module_names([o.name for o in specs])  # spec index -> submodule name
        self.norms = nn.ModuleDict({key: RunningNorm(o.shape[0])
                                    for key, o in zip(self.keys, specs, strict=True)
                                    if o.kind == "vector" and normalize})
        self.images = nn.ModuleDict({key: ImageEncoder(o.shape, hidden, vis_encode_type, o.high,
                                                       o.name)
                                     for key, o in zip(self.keys, specs, strict=True)
                                     if o.kind == "image"})
        fixed = sum(o.shape[0] for o in specs if o.kind == "vector") + hidden * len(self.images)
        lists = [o.shape[1] for o in specs if o.kind == "entities"]
        self.entities = EntityEncoder(lists, fixed, hidden) if lists else None
        self.size = fixed + (hidden if lists else 0)

    def forward(self, obs: list[Tensor]) -> Tensor:
        lead = obs[0].shape[:obs[0].dim() - len(self.specs[0].shape)]
        flat = [o.reshape(-1, *spec.shape) for o, spec in zip(obs, self.specs, strict=False)]
        fixed, lists = [], []
        for o, spec, key in zip(flat, self.specs, self.keys, strict=False):
            if spec.kind == "vector":
                o = o.float()
                fixed.append(self.norms[key](o) if key in self.norms else o)
            elif spec.kind == "image":
                fixed.append(self.images[key](o))
            else:
                lists.append(o)
        own = torch.cat(fixed, -1) if fixed else None
        parts = fixed + ([self.entities(lists, own)] if lists else [])
        return torch.cat(parts, -1).reshape(*lead, self.size)

    def update_normalizers(self, obs: list[Tensor], present: Tensor) -> None:
        for o, key in zip(obs, self.keys, strict=False):
            if key in self.norms:
                self.norms[key].update(o[present].float())
