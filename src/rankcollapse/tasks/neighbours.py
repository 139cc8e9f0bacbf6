"""Nearest-neighbour targets on the sphere (Amsel, Yehudai, Bruna 2024, Sec. 3-4 and 7).

A sample is a set of points x_1..x_N on the unit sphere S^{d-1} and one or more queries:
- "nearest" (the theory, cross-attention): a separate uniform query y; the target is the
  vector x_{j*} with j* = argmax_j <x_j, y>.
- "farthest" (what the authors train, self-attention): every point is a query; the target
  of x_i is x_{argmin_j <x_i, x_j>}, the nearest neighbour of -x_i.

Point sets: "uniform" (i.i.d. uniform on the sphere), "orthogonal" (N orthonormal points,
QR of a Gaussian matrix, N <= d) and "doubled" (N/2 uniform points and their antipodes -x,
so every set is symmetric; our name for this hard case, N even).

Errors are relative MSE: sum ||f - f*||^2 / sum ||f*||^2 over the same samples, i.e. the
error divided by that of the trivial predictor 0 (exactly 1 per sample, targets being unit
vectors).

Not provided: the biased nearest-neighbour target of the paper's Sec. 5 ("Exponential
Separation for Biased Nearest Neighbors", Thm 3). What is known of it: the target is a sum of
2d^2 + 1 biased nearest-neighbour functions, with Gaussian-distributed queries y and bias terms
inside the softmax; a full-rank transformer represents it with O(d^2) heads, while rank-r
attention needs Omega(exp(d - r)) heads to do better than a constant error, under the
condition d H max_h ||V_h||^2 < exp(c (d - r)) on the value weights (Remark 4: with value
weights exponentially large in d - r the bound may not hold). What is not known: where the
bias enters and how it is drawn, the scale of y, how the 2d^2 + 1 functions are weighted, and
the constant c, so the target is not built here. Searched: the paper's stored public pages
(arXiv 2407.16153 and a markdown copy of v1, "On the Benefits of Rank in Attention Layers":
abstract and table of contents only), two public reviews of the paper (the statement above),
and the authors' repository NoahAmsel/attention-formers (task.py: nearest-point data sets
unif, ortho, doubled; theory_experiments/kernel_computations.py, find_a.py, bigN.py:
head-against-target kernels for the unbiased target): none defines the biased target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError

Target = Literal["nearest", "farthest"]
PointSet = Literal["uniform", "orthogonal", "doubled"]
TARGETS: tuple[str, ...] = ("nearest", "farthest")
POINT_SETS: tuple[str, ...] = ("uniform", "orthogonal", "doubled")


@dataclass(frozen=True)
class NeighbourBatch:
    """One batch: points `x` (b, n, d), `queries` (b, q, d) and `target` (b, q, d)."""

    x: Tensor
    queries: Tensor
    target: Tensor


def nearest_neighbour(x: Tensor, queries: Tensor) -> Tensor:
    """The point of `x` with the largest inner product with each query (the vector).

    Args:
        x: points, shape (..., n, d).
        queries: shape (..., q, d).

    Returns:
        shape (..., q, d): row i is x_{argmax_j <x_j, queries_i>}.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> nearest_neighbour(x, torch.tensor([[0.2, 0.9], [0.9, -0.1]]))
        tensor([[0., 1.],
                [1., 0.]])
    """
    index = (queries @ x.transpose(-1, -2)).argmax(-1)  # (..., q)
    return torch.take_along_dim(x, index.unsqueeze(-1), dim=-2)


def farthest_point(x: Tensor) -> Tensor:
    """For every point, the point of the same set with the smallest inner product with it.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-0.6, -0.8]])
        >>> farthest_point(x)
        tensor([[-0.6000, -0.8000],
                [-0.6000, -0.8000],
                [ 0.0000,  1.0000]])
    """
    return nearest_neighbour(x, -x)


def relative_mse(prediction: Tensor, target: Tensor) -> Tensor:
    """Error relative to the trivial predictor 0 on the same samples.

    Formula: sum ||f - f*||^2 / sum ||f*||^2 (sums over every sample, query and coordinate);
        1 for the zero predictor, 0 for an exact one.
    Reference: Amsel, Yehudai, Bruna 2024, Sec. 3 (mean squared error on unit targets).

    Example:
        >>> relative_mse(torch.zeros(4, 1, 3), torch.eye(3)[:1].expand(4, 1, 3))
        tensor(1., dtype=torch.float64)
    """
    difference = (prediction.double() - target.double()).square().sum()
    return difference / target.double().square().sum()


def layer_error(layer: Callable[[Tensor, Tensor], Tensor], batch: NeighbourBatch) -> float:
    """Relative MSE of a cross-attention layer `layer(queries, x)` on `batch` (no gradients).

    Example:
        >>> batch = NeighbourTask(3, 4).sample(8, torch.Generator().manual_seed(0))
        >>> layer_error(lambda queries, x: torch.zeros_like(queries), batch)
        1.0
    """
    with torch.no_grad():
        return float(relative_mse(layer(batch.queries, batch.x), batch.target))


def linear_baseline(fit: NeighbourBatch, held_out: NeighbourBatch) -> float:
    """Relative MSE of the best predictor that selects nothing: a y_i + b mean_j x_j.

    Formula: the two scalars (a, b) solve least squares on `fit` (by rotation invariance a
        scalar per feature is the best linear map of y_i and the set mean); scored on
        `held_out`. This is what attention with uniform weights and linear maps can do, the
        trivial bar a trained model must clear (the zero predictor scores 1).
    Reference: Amsel, Yehudai, Bruna 2024, Sec. 3 (errors as a fraction of the trivial one).

    Example:
        >>> task = NeighbourTask(4, 2, target="farthest")
        >>> fit, held_out = (task.sample(512, torch.Generator().manual_seed(s)) for s in (0, 1))
        >>> linear_baseline(fit, held_out) < 1e-12  # N = 2: the other point is 2 mean - x_i
        True
    """

    def features(batch: NeighbourBatch) -> Tensor:  # (..., q, d, 2): y_i and the set mean
        mean = batch.x.double().mean(-2, keepdim=True).expand_as(batch.queries)
        return torch.stack([batch.queries.double(), mean], -1)

    f = features(fit)
    gram = torch.einsum("...k,...l->kl", f, f)
    cross = torch.einsum("...k,...->k", f, fit.target.double())
    coef = torch.linalg.lstsq(gram, cross.unsqueeze(-1)).solution.squeeze(-1)
    return float(relative_mse(features(held_out) @ coef, held_out.target))


def _unit_rows(g: Tensor) -> Tensor:
    return g / g.norm(dim=-1, keepdim=True)


@dataclass(frozen=True)
class NeighbourTask:
    """A nearest-neighbour task on the sphere: what a sample is and how it is drawn.

    Example:
        >>> task = NeighbourTask(d_model=4, n_points=3)
        >>> batch = task.sample(5, torch.Generator().manual_seed(0))
        >>> batch.x.shape, batch.queries.shape, batch.target.shape
        (torch.Size([5, 3, 4]), torch.Size([5, 1, 4]), torch.Size([5, 1, 4]))
    """

    d_model: int
    n_points: int
    target: Target = "nearest"
    points: PointSet = "uniform"
    n_queries: int = 1  # queries per set for "nearest"; "farthest" queries every point

    def __post_init__(self) -> None:
        if self.d_model < 1:
            raise ConfigError(f"d_model={self.d_model} but points need d_model >= 1.")
        if self.n_points < 1:
            raise ConfigError(
                f"n_points={self.n_points} but a set needs at least one point (N >= 1); "
                "pass n_points >= 1."
            )
        if self.target not in TARGETS:
            raise ConfigError(f"unknown target '{self.target}'. Known: {', '.join(TARGETS)}.")
        if self.points not in POINT_SETS:
            raise ConfigError(f"unknown point set '{self.points}'. Known: {', '.join(POINT_SETS)}.")
        if self.points == "orthogonal" and self.n_points > self.d_model:
            raise ConfigError(
                f"orthogonal point sets need n_points <= d_model, got n_points={self.n_points}"
                f" > d_model={self.d_model}; lower n_points or use points='uniform'."
            )
        if self.points == "doubled" and self.n_points % 2:
            raise ConfigError(
                f"doubled point sets pair each point with its antipode, so n_points must be "
                f"even; got {self.n_points}."
            )
        if self.n_queries < 1:
            raise ConfigError(f"n_queries={self.n_queries}; pass n_queries >= 1.")

    def sample_points(
        self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float32
    ) -> Tensor:
        """Point sets of shape (batch_size, n_points, d_model), drawn in float64 then cast, on
        the generator's device."""
        b, n, d = batch_size, self.n_points, self.d_model
        draw: dict[str, Any] = {
            "generator": generator,
            "dtype": torch.float64,
            "device": generator.device,
        }
        if self.points == "orthogonal":
            gaussian = torch.randn(b, d, n, **draw)
            q, r = torch.linalg.qr(gaussian)  # (b, d, n): orthonormal columns
            q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar
            return q.transpose(-1, -2).to(dtype)
        if self.points == "doubled":
            half = _unit_rows(torch.randn(b, n // 2, d, **draw))
            return torch.cat([half, -half], dim=-2).to(dtype)
        return _unit_rows(torch.randn(b, n, d, **draw)).to(dtype)

    def sample(
        self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float32
    ) -> NeighbourBatch:
        """A batch of fresh samples with their targets (computed in float64), on the
        generator's device."""
        x = self.sample_points(batch_size, generator, torch.float64)
        if self.target == "farthest":
            queries, target = x, farthest_point(x)
        else:
            shape = (batch_size, self.n_queries, self.d_model)
            queries = _unit_rows(
                torch.randn(shape, generator=generator, dtype=torch.float64, device=x.device)
            )
            target = nearest_neighbour(x, queries)
        return NeighbourBatch(x.to(dtype), queries.to(dtype), target.to(dtype))

    def stream(
        self,
        batch_size: int,
        *,
        seed: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> Iterator[NeighbourBatch]:
        """An endless seeded stream of fresh batches drawn on `device` (no host work or copy
        per batch): same seed and device, same batches. An accelerator's generator draws other
        numbers than the CPU's, so batches differ between devices."""
        generator = torch.Generator(device=device).manual_seed(seed)
        while True:
            yield self.sample(batch_size, generator, dtype)
