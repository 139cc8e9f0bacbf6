"""Convex-hull task (Dong et al. 2021, Sec. 5): which points of a planar set are hull vertices.

Each set has `n_points` points drawn uniformly in [0, 10]^2 and moved by one Gaussian shift
shared by the whole set (standard normal per coordinate), so absolute position carries no label
information. The label of a point is 1 when it is a vertex of the set's convex hull, computed
exactly by Qhull (`scipy.spatial.ConvexHull`).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial import ConvexHull
from torch import Tensor

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.tasks._baselines import TaskData


def hull_vertex_labels(points: Tensor) -> Tensor:
    """1 for the points that are vertices of their set's convex hull, else 0.

    Args:
        points: coordinates, shape (b, n, 2), n >= 3, in general position (no three
            collinear hull points; true with probability 1 for continuous random points).

    Returns:
        long tensor of shape (b, n).

    Example:
        >>> square_and_centre = torch.tensor([[[0., 0.], [1., 0.], [1., 1.], [0., 1.], [.5, .5]]])
        >>> hull_vertex_labels(square_and_centre)
        tensor([[1, 1, 1, 1, 0]])
    """
    if points.ndim != 3 or points.shape[-1] != 2 or points.shape[1] < 3:
        raise InputError(
            f"points must have shape (b, n, 2) with n >= 3, got {tuple(points.shape)}; "
            "pass one set of planar points per row."
        )
    coords = points.detach().double().cpu().numpy()
    labels = np.zeros(coords.shape[:2], dtype=np.int64)
    for i, one_set in enumerate(coords):  # Qhull takes one set at a time; data generation only
        labels[i, ConvexHull(one_set).vertices] = 1
    return torch.from_numpy(labels)


def convex_hull_data(n_samples: int, *, seed: int, n_points: int = 10) -> TaskData:
    """`n_samples` sets of `n_points` points (float32, shape (b, n, 2)) with hull-vertex labels.

    Example:
        >>> data = convex_hull_data(3, seed=0)
        >>> data.inputs.shape, int(data.targets.sum(dim=1).min()) >= 3
        (torch.Size([3, 10, 2]), True)
    """
    if n_samples < 1:
        raise ConfigError(f"convex hull: n_samples must be >= 1, got {n_samples}.")
    if n_points < 3:
        raise ConfigError(f"convex hull: n_points must be >= 3 (a hull needs 3), got {n_points}.")
    generator = torch.Generator().manual_seed(seed)
    points = 10 * torch.rand(n_samples, n_points, 2, generator=generator, dtype=torch.float64)
    points = points + torch.randn(n_samples, 1, 2, generator=generator, dtype=torch.float64)
    return TaskData("convex-hull", points.float(), hull_vertex_labels(points), 2)
