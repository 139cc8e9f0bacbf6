"""Distance of the tokens from collapse: residuals from the mean token and from rank 1.

Two families, not to be confused:
- mean-centred (res_comp, res_comp_rel, mu, mu_rel): X - 1 m^T with m the mean real token,
  i.e. every token minus the same vector. This is what Dong et al.'s code and figures use,
  and Wu et al.'s mu (the mean minimises the Frobenius distance to 1 x^T).
- best rank 1 (rank1_rel): X - X_1 with X_1 = sigma_1 u_1 v_1^T from the SVD; every token may
  keep its own scale along v_1. It is 0 whenever the tokens are parallel, and never larger
  than mu_rel, since 1 m^T is itself a rank-1 matrix.
"""

from __future__ import annotations

import torch  # noqa: F401 (the docstring examples use it)
from torch import Tensor

from rankcollapse.metrics._norms import safe_div
from rankcollapse.metrics._tokens import Tokens, evaluate


def res_comp_rel(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Relative composite residual: how far tokens are from their mean.

    Formula: ||X - 1 m^T||_{1,inf} / ||X||_{1,inf}, m = mean of real tokens,
        ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf).
    Reference: Dong, Cordonnier, Loukas 2021, Sec. 2 (mean-centred, Fig. 1).

    Mean-centred, unlike `rank1_rel`. Invariant to scaling, to adding one vector to every
    token and to token order.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...); 0 exactly when all real tokens agree.

    Example:
        >>> res_comp_rel(torch.ones(2, 5, 3))
        tensor([0., 0.], dtype=torch.float64)
    """
    return evaluate(_res_comp_rel, x, mask)


def _res_comp_rel(t: Tokens) -> Tensor:
    return safe_div(t.centred_composite, t.composite)


def res_comp(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Composite residual: the numerator of `res_comp_rel`, in the units of x.

    Formula: ||X - 1 m^T||_{1,inf}, m = mean of real tokens,
        ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf).
    Reference: Dong, Cordonnier, Loukas 2021, Sec. 2 (mean-centred residual res(X)).

    ||A||_1 is the largest absolute column sum (over tokens), ||A||_inf the largest absolute
    row sum (over features); not a true norm. Computed from the centred matrix.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...); 0 exactly when all real tokens agree.

    Example:
        >>> res_comp(torch.tensor([[0.0, 0.0], [2.0, 0.0]]))  # centred rows (-1, 0), (1, 0)
        tensor(1.4142, dtype=torch.float64)
    """
    return evaluate(_res_comp, x, mask)


def _res_comp(t: Tokens) -> Tensor:
    return t.centred_composite * t.scale


def mu(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Frobenius distance of the tokens from their mean token.

    Formula: ||X - 1 m^T||_F, m = mean of real tokens (= argmin_v ||X - 1 v^T||_F).
    Reference: Wu et al. 2024, mu(X).

    Mean-centred. Not scale-invariant: read it beside `mu_rel`, since without LayerNorm much
    of its decay can be the norm shrinking rather than a loss of rank.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...); 0 exactly when all real tokens agree.

    Example:
        >>> mu(torch.tensor([[0.0, 0.0], [2.0, 0.0]]))
        tensor(1.4142, dtype=torch.float64)
    """
    return evaluate(_mu, x, mask)


def _mu(t: Tokens) -> Tensor:
    return t.centred_frobenius * t.scale


def mu_rel(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Relative Frobenius distance of the tokens from their mean token.

    Formula: ||X - 1 m^T||_F / ||X||_F, m = mean of real tokens.
    Reference: Wu et al. 2024, mu(X) / ||X||_F.

    Mean-centred, in [0, 1]; scale-invariant.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...); 0 exactly when all real tokens agree.

    Example:
        >>> mu_rel(torch.tensor([[2.0, 0.0], [0.0, 0.0]]))  # sqrt(2) / 2
        tensor(0.7071, dtype=torch.float64)
    """
    return evaluate(_mu_rel, x, mask)


def _mu_rel(t: Tokens) -> Tensor:
    return safe_div(t.centred_frobenius, t.norm_sq.sqrt())


def rank1_rel(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Relative distance of the state from its best rank-1 approximation.

    Formula: ||X - X_1||_F / ||X||_F, X_1 = sigma_1 u_1 v_1^T (best rank-1 approximation).
    Reference: Dong, Cordonnier, Loukas 2021, Sec. 2 (SVD variant of res(X)).

    Unlike the mean-centred metrics, X_1 may give each token its own multiple of v_1, so
    parallel tokens of different lengths count as collapsed, and rank1_rel <= mu_rel.
    Equals sqrt(sigma_2^2 + ... ) / ||X||_F; near rank 1 the residual is formed explicitly
    (no cancellation), so a rank-1 state plus 1e-9 noise reads about 1e-9.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.

    Returns:
        float64 tensor of shape (...) in [0, 1]; 0 (to ~1e-16) when the real tokens are parallel.

    Example:
        >>> rank1_rel(torch.tensor([[1.0, 2.0], [2.0, 4.0]]))
        tensor(0., dtype=torch.float64)
    """
    return evaluate(_rank1_rel, x, mask)


def _rank1_rel(t: Tokens) -> Tensor:
    return safe_div(t.rank1_residual, t.norm_sq.sqrt())


__all__ = ["mu", "mu_rel", "rank1_rel", "res_comp", "res_comp_rel"]
