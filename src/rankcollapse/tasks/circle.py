"""Circle task (Dong et al. 2021, Sec. 6 toy): map a pair of points on two arcs to the next pair.

As in the authors' code (`run_circle.py`): `n_points` points p_0 .. p_{n-1} are spaced evenly,
counter-clockwise, on a circle of radius `radius` around the origin, p_k at angle 2 pi k / n.
They form two arcs of m = n/2 - 1 steps: the upper arc p_0 .. p_m, from (radius, 0), and the
lower arc p_m .. p_{2m}, from p_m (one step short of (-radius, 0)). Sample i (i = 0..m-1) is
the pair (p_i, p_{i+m}), one point of each arc: two tokens in the plane. Its target, "the next
pair", is (p_{i+1}, p_{i+1+m}): both points one step further along their arcs (teacher forcing:
the model always sees the true current pair). A model of the step applied to its own output then
walks both tokens along the arcs; rank collapse shows as the two trajectories merging
(`rollout`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from rankcollapse.errors import ConfigError


@dataclass(frozen=True)
class CircleData:
    """Pairs of points and their successors.

    Attributes:
        inputs: float32 (m, 2, 2): sample, token (the two points), coordinate.
        targets: float32 (m, 2, 2): the same pairs one step further along the arcs.
        radius: the circle's radius.
    """

    inputs: Tensor
    targets: Tensor
    radius: float

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def baselines(self) -> dict[str, float]:
        """Mean squared error of the two trivial predictors, measured on this data.

        - "stay": predict the input pair unchanged.
        - "centre": predict both points at the circle's centre (the origin).
        """
        return {
            "stay": float(((self.inputs - self.targets) ** 2).double().mean()),
            "centre": float((self.targets**2).double().mean()),
        }


def circle_data(n_points: int = 1000, *, radius: float = 0.3) -> CircleData:
    """The n_points / 2 - 1 pairs of the two arcs and their next pairs (the authors' data).

    Deterministic (no seed): the points are evenly spaced, as in the authors' code.

    Example:
        >>> data = circle_data(8, radius=1.0)
        >>> len(data), data.inputs[0].double().round(decimals=3).tolist()
        (3, [[1.0, 0.0], [-0.707, 0.707]])
        >>> data.targets[0].double().round(decimals=3).tolist()
        [[0.707, 0.707], [-1.0, 0.0]]
    """
    if n_points < 6 or n_points % 2:
        raise ConfigError(
            f"circle: n_points must be even and >= 6 (two arcs of n_points / 2 - 1 >= 2 steps), "
            f"got {n_points}."
        )
    if not radius > 0:
        raise ConfigError(f"circle: radius must be > 0, got {radius}.")
    angles = torch.arange(n_points, dtype=torch.float64) * (2 * math.pi / n_points)
    points = radius * torch.stack([angles.cos(), angles.sin()], dim=-1)  # (n_points, 2)
    points = torch.where(points.abs() < 1e-12, torch.zeros_like(points), points)
    m = n_points // 2 - 1  # steps per arc; the authors' len(dataset)
    first = torch.arange(m)

    def pairs(index: Tensor) -> Tensor:  # (m, 2 tokens, 2 coordinates)
        return torch.stack([points[index], points[index + m]], dim=1)

    return CircleData(pairs(first).float(), pairs(first + 1).float(), radius)


def previous_pair_inputs(data: CircleData, batch_size: int) -> CircleData:
    """The authors' skip-variant training data: input X_i + X_{i-B} (B = batch_size), target
    X_{i+1}.

    In run_circle.py the skip arm feeds the model the current mini-batch plus the previous one
    (unshuffled batches of B consecutive pairs; zeros before the first), so pair i is added to
    pair i - B, and to nothing for i < B. The rollout that goes with it is
    `rollout(..., accumulate=True)`.

    Example:
        >>> data = previous_pair_inputs(circle_data(8, radius=1.0), 2)
        >>> data.inputs[2].double().round(decimals=3).tolist()  # pair 2 plus pair 0
        [[1.0, 1.0], [-1.414, 0.0]]
    """
    if batch_size < 1:
        raise ConfigError(f"circle: batch_size must be >= 1, got {batch_size}.")
    previous = torch.zeros_like(data.inputs)
    if batch_size < len(data):
        previous[batch_size:] = data.inputs[:-batch_size]
    return CircleData(data.inputs + previous, data.targets, data.radius)


def off_arc_starts(n_starts: int, *, radius: float, seed: int) -> Tensor:
    """`n_starts` pairs (n_starts, 2, 2) off the training arcs, float32, deterministic by seed.

    Each token is a point at an independent uniform angle and a radius uniform in
    [radius / 2, 3 radius / 2]: pairs the training data never show (there the two tokens sit
    one step short of opposite on the circle), so a rollout from them reads the layer's bias,
    not the fitted arcs.

    Example:
        >>> starts = off_arc_starts(3, radius=1.0, seed=0)
        >>> starts.shape, bool((starts.norm(dim=-1) <= 1.5).all())
        (torch.Size([3, 2, 2]), True)
    """
    generator = torch.Generator().manual_seed(seed)
    angles = torch.rand(n_starts, 2, generator=generator, dtype=torch.float64) * 2 * math.pi
    radii = radius * (0.5 + torch.rand(n_starts, 2, generator=generator, dtype=torch.float64))
    points = radii[..., None] * torch.stack([angles.cos(), angles.sin()], dim=-1)
    return points.float()


DIVERGED = 100.0
"""A trajectory leaving the disc of DIVERGED radii (or turning non-finite) has diverged."""


def rollout(
    step: Callable[[Tensor], Tensor],
    pairs: Tensor,
    n_steps: int,
    *,
    radius: float,
    accumulate: bool = False,
) -> np.ndarray:
    """Apply `step` to its own output `n_steps` times from `pairs` (s, 2, 2), batched.

    Returns float64 (n_steps + 1, s, 2, 2): sample's points at every step, the start first.
    Once a start's points leave the disc of radius `DIVERGED * radius` (or turn non-finite)
    that start has diverged: its later steps are NaN, while the other starts go on.
    `accumulate`: the authors' skip rollout (run_circle.py): a running state s_0 = pairs,
    s_{t+1} = s_t + step(s_t), and the recorded points are the outputs step(s_t).

    Example:
        >>> path = rollout(lambda x: 2 * x, torch.ones(1, 2, 2), 8, radius=1.0)
        >>> path[3, 0, 0].tolist(), bool(np.isnan(path[7, 0]).all())
        ([8.0, 8.0], True)
    """
    trajectory = np.full((n_steps + 1, *pairs.shape), np.nan)
    trajectory[0] = pairs.double().cpu().numpy()
    alive = torch.ones(len(pairs), dtype=torch.bool, device=pairs.device)
    current = state = pairs
    with torch.no_grad():
        for index in range(1, n_steps + 1):
            current = step(state)
            state = state + current if accumulate else current
            outside = (current.abs() > DIVERGED * radius).flatten(1).any(dim=1)
            alive &= torch.isfinite(current).flatten(1).all(dim=1) & ~outside
            if not alive.any():
                break
            current = torch.where(alive[:, None, None], current, torch.zeros_like(current))
            state = torch.where(alive[:, None, None], state, torch.zeros_like(state))
            kept = alive.cpu().numpy()
            trajectory[index, kept] = current[alive].double().cpu().numpy()
    return trajectory


def rollout_frame(trajectory: np.ndarray) -> pd.DataFrame:
    """Tidy rows of one rollout (n_steps + 1, 2 tokens, 2 coordinates), from `rollout`.

    Rows (step, token, metric, value): the points ("x", "y") of both tokens at every step; the
    distance between the tokens at every step ("distance", token NaN); then, step NaN: the last
    distance before any divergence over the first ("relative_final_distance") and whether the
    rollout diverged ("diverged", 0 or 1).

    Example:
        >>> frame = rollout_frame(rollout(lambda x: 0.5 * x, torch.eye(2)[None], 2, radius=1.0)[:, 0])
        >>> frame.set_index("metric").loc["relative_final_distance", "value"]
        np.float64(0.25)
    """
    n_steps = len(trajectory) - 1
    rows: list[tuple[float, float, str, float]] = [  # step and token NaN on the summary rows
        (step, token, axis, float(trajectory[step, token, i]))
        for step in range(n_steps + 1)
        for token in range(2)
        for i, axis in enumerate(("x", "y"))
    ]
    distance = np.linalg.norm(trajectory[:, 0] - trajectory[:, 1], axis=-1)  # (n_steps + 1,)
    last = int((~np.isnan(distance)).sum()) - 1  # last step before any divergence
    rows += [(step, np.nan, "distance", float(d)) for step, d in enumerate(distance)]
    rows += [
        (np.nan, np.nan, "relative_final_distance", float(distance[last] / distance[0])),
        (np.nan, np.nan, "diverged", float(last < n_steps)),
    ]
    return pd.DataFrame(rows, columns=["step", "token", "metric", "value"])
