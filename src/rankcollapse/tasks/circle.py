"""Circle task (Dong et al. 2021, Sec. 6 toy): map a pair of points on a circle to the next pair.

`n_points` points are spaced evenly on a circle of radius `radius` around the origin. Sample i
(i = 0..n_points-1) is the pair (point i, point i + n_points/2), two opposite points: two tokens
in the plane; its targets are the next `n_ahead` pairs round the circle, (point i+t, point
i+t + n_points/2) for t = 1..n_ahead (indices mod n_points). A model of the step applied to its
own output then walks both tokens round the circle; rank collapse shows as the two trajectories
merging.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError


@dataclass(frozen=True)
class CircleData:
    """Pairs of points and their successors.

    Attributes:
        inputs: float32 (b, 2, 2): sample, token (the two points), coordinate.
        targets: float32 (b, n_ahead, 2, 2): the same pairs 1..n_ahead steps further round.
        radius: the circle's radius.
    """

    inputs: Tensor
    targets: Tensor
    radius: float

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def baselines(self) -> dict[str, float]:
        """Mean squared error of the two trivial predictors, measured on this data.

        - "stay": predict the input pair unchanged at every step ahead.
        - "centre": predict both points at the circle's centre (the origin).
        """
        return {
            "stay": float(((self.inputs[:, None] - self.targets) ** 2).double().mean()),
            "centre": float((self.targets**2).double().mean()),
        }


def circle_data(n_points: int = 1000, *, radius: float = 0.3, n_ahead: int = 1) -> CircleData:
    """Every pair of opposite points of an evenly spaced circle and its next `n_ahead` pairs.

    Deterministic (no seed): the points are evenly spaced, as in the authors' code.

    Example:
        >>> data = circle_data(8, radius=1.0, n_ahead=2)
        >>> len(data), data.inputs[0].tolist(), tuple(data.targets.shape)
        (8, [[1.0, 0.0], [-1.0, 0.0]], (8, 2, 2, 2))
    """
    if n_points < 4 or n_points % 2:
        raise ConfigError(
            f"circle: n_points must be even and >= 4 (pairs of opposite points), got {n_points}."
        )
    if not radius > 0:
        raise ConfigError(f"circle: radius must be > 0, got {radius}.")
    if n_ahead < 1:
        raise ConfigError(f"circle: n_ahead must be >= 1, got {n_ahead}.")
    angles = torch.arange(n_points, dtype=torch.float64) * (2 * math.pi / n_points)
    points = radius * torch.stack([angles.cos(), angles.sin()], dim=-1)  # (n_points, 2)
    points = torch.where(points.abs() < 1e-12, torch.zeros_like(points), points)

    def pairs(first: torch.Tensor) -> torch.Tensor:  # (b, 2 tokens, 2 coordinates)
        return torch.stack(
            [points[first % n_points], points[(first + n_points // 2) % n_points]], 1
        )

    first = torch.arange(n_points)
    targets = torch.stack([pairs(first + t) for t in range(1, n_ahead + 1)], dim=1)
    return CircleData(pairs(first).float(), targets.float(), radius)
