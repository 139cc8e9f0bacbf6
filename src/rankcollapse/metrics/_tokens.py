"""Checked hidden states and the quantities several metrics share, each computed once.

Every state metric is a function of a `Tokens`; its public form `fn(x, mask)` builds one (via
`evaluate`), and `measure_states` builds a single one for all metrics, so they share one Gram
matrix per sequence: X X^T (n x n) when n <= d, else X^T X (d x d).

How the shared quantities stay accurate (see the numerics spec):
- Squaring: Gram eigenvalues carry an absolute error of about eps x lambda_max, so a singular
  value sigma_i from them has a relative error of about eps (sigma_max / sigma_i)^2 (measured:
  2 x eps x that). The spectrum is taken from the Gram matrix when lambda_min / lambda_max >=
  GRAM_EIG_RCOND, i.e. sigma_min / sigma_max >= 3.2e-4 (relative error then at most about
  1e-8); ill-conditioned sequences (collapsed, rank-deficient, or with a few huge tokens)
  get a float64 SVD of their own instead.
- Cancellation: ||X - X_1||_F = sqrt(||X||_F^2 - sigma_1^2) loses every digit when the state
  is nearly rank 1. Below RANK1_EXPLICIT (relative) the residual X - u_1 u_1^T X is formed
  explicitly from the Gram matrix's top eigenvector, and its norm taken.
- Centring: residuals from the mean are formed as X - 1 m^T, never as a difference of norms.
- Range: squares of states near 1e300 overflow and of states near 1e-300 underflow, so a
  sequence whose ||X||_F^2 is not finite or lies outside 2^(+-2 SAFE_EXPONENT) is first
  divided by a power of two (exact) that brings its largest entry into [1, 2); absolute
  metrics are scaled back by `Tokens.scale`, relative ones are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, Generic, TypeVar

import torch
from torch import Tensor

from rankcollapse._validation import check_token_shapes, check_tokens
from rankcollapse.errors import InputError
from rankcollapse.metrics._norms import (
    composite_of,
    composite_of_magnitude,
    frobenius,
    masked_mean,
    safe_div,
)

GRAM_EIG_RCOND = 1e-7  # lambda_min / lambda_max below this: an SVD for that sequence
RANK1_EXPLICIT = 1e-3
SAFE_EXPONENT = 100  # |x| up to 2^100: n d x^2 stays far from float64 overflow and underflow
MIN_RUN_ELEMENTS = 2**16  # smaller runs are not worth a thread (start-up ~0.1 ms)
CHUNK_BYTES = 2**22  # sequences per memory-bound pass (measured best of 1, 2, 4, 8 MB)
DEVICE_CHUNK_BYTES = 2**28  # on an accelerator: few kernel launches and host syncs per layer


T = TypeVar("T")


def chunk_rows(n: int, d: int, device: torch.device) -> int:
    """Sequences of (n, d) float64 per chunk: a core's cache on the CPU (`CHUNK_BYTES`); on an
    accelerator, which has no such cache and pays a kernel launch and a host sync per chunk,
    up to `DEVICE_CHUNK_BYTES` (a 32 x 512 x 896 batch in one chunk, not 32).

    Example:
        >>> chunk_rows(512, 896, torch.device("cpu")), chunk_rows(512, 896, torch.device("cuda"))
        (1, 73)
    """
    budget = CHUNK_BYTES if device.type == "cpu" else DEVICE_CHUNK_BYTES
    return max(1, budget // (n * d * 8))


class computed_once(Generic[T]):
    """`functools.cached_property` without Python 3.11's class-wide lock: that lock let only
    one thread at a time compute any instance's value, so the metric suite's threads (one
    `Tokens` each) ran their eigenvalue work one after another. Each instance is used by one
    thread here, so no lock is needed.
    """

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute, self.__doc__ = compute, compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]
        value = instance.__dict__[self.name] = self.compute(instance)  # later reads skip this
        return value


@contextmanager
def single_thread() -> Iterator[int]:
    """Run torch on one intra-op thread inside the block, then restore the thread count.

    Yields the thread count from before, for callers that spread independent work over that
    many Python threads instead (no barriers between them; see `measure_states`).

    Metric work is batched small eigenproblems and memory-bound passes, for which OpenMP's
    barriers cost more than a second core gains on a shared 2-core machine. Measured under
    load (load average about 4, same process, medians of 7): the default suite over 13 layers
    of 32 x 128 x 768 took 0.94 s on one thread and 7.9 s on two (3.8 to 24 s); over MiniLM's
    7 layers of 32 x 128 x 384, 0.37 s and 5.6 s. Eigvalsh of 32 Gram matrices alone: 24 ms
    and 140 ms.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield threads
    finally:
        torch.set_num_threads(threads)


@cache
def first_linalg_call(device: torch.device) -> None:
    """Make the process's first `torch.linalg` call on `device` here, on the calling thread.

    torch loads its linear-algebra backend lazily on some devices (CUDA's: a "lazy wrapper"
    that must run at most once); worker threads that make that first call at the same time
    race it. Call this before starting threads that use `torch.linalg`.
    """
    torch.linalg.eigvalsh(torch.eye(2, dtype=torch.float64, device=device))


def check_batch(shape: tuple[int, ...], name: str) -> None:
    """An empty batch (a leading dimension of 0) is an error, not an empty result."""
    if 0 in shape[:-2]:
        raise InputError(
            f"{name} has no sequences ({name}.shape={shape}: a batch dimension is 0); "
            "pass at least one sequence."
        )


def squared_norms(x: Tensor) -> Tensor:
    """||X||_F^2 of (..., n, d) states, shape (...): on the CPU one batched BLAS dot product per
    sequence (measured 5 x faster than a fused reduction over the last two dims); elsewhere the
    fused reduction (on an H200, 0.14 ms for 8 x 2048 x 4096 float64 where the product took 7 ms:
    cuBLAS runs a dot product of 8M terms as a matrix-vector product)."""
    if x.device.type != "cpu":
        return torch.linalg.vector_norm(x, dim=(-2, -1)).square()
    n, d = x.shape[-2:]
    flat = x.reshape(-1, 1, n * d)
    return (flat @ flat.mT).reshape(x.shape[:-2])


def range_scale(x: Tensor, norm_sq: Tensor) -> Tensor:
    """Per-sequence power of two s (shape (...)): X / s is safe to square, s = 1 when it already is.

    A sequence is safe when its ||X||_F^2 (`norm_sq`, which lies between max |x|^2 and
    n d max |x|^2) is finite and within 2^(+-2 SAFE_EXPONENT); for the others (overflowed,
    underflowed or all zero, rare) s = 2^(e - 1) with max |x| = f 2^e, f in [0.5, 1), so max
    |x / s| lies in [1, 2) and s itself never overflows; s = 1 for an all-zero sequence.
    """
    bound = 2.0 ** (2 * SAFE_EXPONENT)
    unsafe = ~torch.isfinite(norm_sq) | (norm_sq > bound) | (norm_sq < 1 / bound)
    scale = torch.ones_like(norm_sq)
    if bool(unsafe.any()):
        largest = x[unsafe].abs().amax((-2, -1))  # (m,)
        exponent = torch.frexp(largest).exponent.to(x.dtype)
        scale[unsafe] = torch.where(largest > 0, torch.exp2(exponent - 1), 1.0)
    return scale


def evaluate(kernel: Callable[..., Tensor], x: Tensor, mask: Tensor | None, **options) -> Tensor:
    """kernel(Tokens(x, mask), **options) on one torch thread: a metric's public form."""
    with single_thread():
        return kernel(Tokens(x, mask), **options)


def singular_values_of(x: Tensor) -> Tensor:
    """Singular values of (..., n, d) float64 matrices, descending: (..., min(n, d)).

    A wide matrix (n < d, as tokens x features usually is) costs 2.6 x more in torch's SVD
    than its transpose (measured on 32 x 128 x 768: 144 vs 56 ms), which has the same singular
    values and is already tall in memory (no copy); LAPACK first reduces a tall matrix to a
    square triangular factor by a QR, so an explicit thin QR then an SVD of the factor gains
    nothing more (59 ms), and is as accurate.
    """
    n, d = x.shape[-2:]
    return torch.linalg.svdvals(x.mT if n < d else x)


def split_runs(x: Tensor, mask: Tensor | None, count: int) -> list[tuple[Tensor, Tensor | None]]:
    """The flattened batch of x (and mask) cut into at most `count` runs of whole sequences,
    each of at least MIN_RUN_ELEMENTS values (small batches stay whole).

    Unchecked input that cannot be cut (not a tensor, no batch, a mask of another shape, an
    empty batch) comes back whole, so that checking it gives the error about the whole.
    """
    whole = [(x, mask)]
    if count <= 1 or not isinstance(x, Tensor) or x.ndim < 3 or x.numel() == 0:
        return whole
    if mask is not None and (not isinstance(mask, Tensor) or mask.shape != x.shape[:-1]):
        return whole
    count = min(count, x.numel() // MIN_RUN_ELEMENTS)
    if count <= 1:
        return whole
    n, d = x.shape[-2:]
    xs = x.reshape(-1, n, d).tensor_split(count)
    masks = [None] * len(xs) if mask is None else mask.reshape(-1, n).tensor_split(count)
    runs = [(part, part_mask) for part, part_mask in zip(xs, masks, strict=True) if len(part)]
    return runs or whole


class Tokens:
    """Hidden states checked once, with lazily shared float64 quantities.

    The states are read once, chunk by chunk (each chunk small enough to stay in a core's
    cache, `CHUNK_BYTES`): a chunk is converted to float64 (pad rows 0), brought into a safe
    range, and every quantity asked for in `reads` is taken from it while it is in cache:
    ||X||_F^2 always (also the range and finiteness test), "norms" (`composite`,
    `centred_composite`, `centred_frobenius`, `unit_sum_sq`, `n_nonzero`) and "gram". A quantity not read in that pass is
    computed on first use by another pass. The whole batch is never held in float64.
    Measured on 13 layers of 32 x 128 x 768 float32 states (one thread, CPU time): 55 ms per
    layer for this single pass, against 84 ms with a float64 copy of the batch read per
    quantity.

    Every quantity is of `x / scale` (`scale` (...) a power of two, 1 unless the sequence's
    values are too large or too small to square; see `range_scale`): ratios need nothing,
    quantities in the units of x are multiplied back by `scale`.

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n); None = all real.
        reads: quantities to take in the first pass, of "norms" and "gram".
    """

    deferred = False
    """True in subclasses that read no value on the host while they work (`metrics._batched`):
    pads are zeroed whatever the mask (none when the mask given was None), and range and
    finiteness are their `_in_range`'s."""

    def __init__(
        self, x: Tensor, mask: Tensor | None = None, *, reads: tuple[str, ...] = ()
    ) -> None:
        x = x.detach() if isinstance(x, Tensor) else x  # no autograd graph over the copies
        self._input = (x, mask)  # for the whole-batch check when a chunk is not finite
        self.pads_possible = mask is not None  # None: no pads, known without reading the mask
        self.source, self.mask = check_token_shapes(x, mask, counts=not self.deferred)
        check_batch(tuple(x.shape), "x")
        self.dtype = x.dtype
        n, d = x.shape[-2:]
        self.batch = tuple(x.shape[:-2])
        self.n_real = self.mask.sum(-1)  # (...)
        self.n_sv = self.n_real.clamp(max=d)  # (...) number of singular values, min(n_real, d)
        self.gram_of_tokens = n <= d
        self.chunk_size = chunk_rows(n, d, x.device)
        self._gram: Tensor | None = None
        self._norms: tuple[Tensor, ...] | None = None
        self._read("norms" in reads, "gram" in reads)

    def _chunks(self, index: Tensor | None = None) -> Iterator[tuple[slice, Tensor, Tensor]]:
        """(rows, float64 states with pad rows 0, mask) per chunk of the flattened batch
        (of the sequences in `index` when given); unscaled. Every chunk is converted into the
        same buffer (a fresh one per chunk costs page faults): a chunk is only valid until
        the next one."""
        n, d = self.source.shape[-2:]
        x, mask = self.source.reshape(-1, n, d), self.mask.reshape(-1, n)
        if index is not None:
            x, mask = x[index], mask[index]
        rows = self.chunk_size
        buffer = torch.empty(min(rows, len(x)), n, d, dtype=torch.float64, device=x.device)
        for start in range(0, len(x), rows):
            part = slice(start, start + rows)
            chunk, chunk_mask = buffer[: len(x[part])].copy_(x[part]), mask[part]
            if self.pads_possible and (self.deferred or not bool(chunk_mask.all())):
                chunk.masked_fill_(~chunk_mask.unsqueeze(-1), 0.0)  # NaN in pads too
            yield part, chunk, chunk_mask

    def _read(self, norms: bool, gram: bool) -> None:
        """One pass over the states: ||X||_F^2 and scale, plus the norms and Gram if asked."""
        n, d = self.source.shape[-2:]
        k = n if self.gram_of_tokens else d
        count = len(self.source.reshape(-1, n, d))
        where: dict[str, Any] = {"dtype": torch.float64, "device": self.source.device}
        norm_sq, scale = torch.empty(count, **where), torch.ones(count, **where)
        parts = []
        gram_of = torch.empty(count, k, k, **where) if gram else None
        scratch = torch.empty(min(count, self.chunk_size), n, d, **where) if norms else None
        for rows, x, mask in self._chunks():
            x, sq = self._in_range(x, squared_norms(x), scale[rows])
            norm_sq[rows] = sq
            if scratch is not None:  # norms asked
                parts.append(_norms(x, mask, scratch[: len(x)], fused=self.deferred))
            if gram_of is not None:
                torch.matmul(*((x, x.mT) if self.gram_of_tokens else (x.mT, x)), out=gram_of[rows])
        self.norm_sq, self.scale = norm_sq.reshape(self.batch), scale.reshape(self.batch)
        if norms:
            joined = (
                parts[0]
                if len(parts) == 1
                else [torch.cat(values) for values in zip(*parts, strict=True)]
            )
            self._norms = tuple(values.reshape(self.batch) for values in joined)
        if gram_of is not None:
            self._gram = gram_of.reshape(*self.batch, k, k)

    def _in_range(self, x: Tensor, sq: Tensor, scale: Tensor) -> tuple[Tensor, Tensor]:
        """A chunk's states and ||X||_F^2 in a safe range: divided by `range_scale` (written
        into `scale`, a view) where the squares are too large or small; the error for NaN/Inf."""
        bound = 2.0 ** (2 * SAFE_EXPONENT)
        if bool(((sq < bound) & (sq > 1 / bound)).all()):  # NaN and Inf fail too
            return x, sq
        if not bool(torch.isfinite(sq).all()):
            check_tokens(*self._input)  # NaN or Inf in a real token: the error names it
        scale.copy_(range_scale(x, sq))  # else finite values too large or small to square
        x = x / scale[:, None, None]  # exact: powers of two
        return x, squared_norms(x)

    def states(self, index: Tensor | None = None) -> Tensor:
        """float64 states / scale with pad rows 0: (m, n, d) for the flat sequences in `index`,
        (..., n, d) for all when None. For the rare routes that need X itself."""
        scale = self.scale.reshape(-1)
        parts = [x.clone() for _, x, _ in self._chunks(index)]
        x = torch.cat(parts) / (scale if index is None else scale[index])[:, None, None]
        return x.reshape(self.source.shape) if index is None else x

    @property
    def rms(self) -> Tensor:
        """Root mean square of the real entries of X (in the units of x), shape (...)."""
        d = self.source.shape[-1]
        return self.norm_sq.sqrt() * self.scale / (self.n_real * d).to(self.norm_sq.dtype).sqrt()

    @property
    def composite(self) -> Tensor:
        """||X||_{1,inf}, shape (...)."""
        return self._all_norms[0]

    @property
    def centred_composite(self) -> Tensor:
        """||X - 1 m^T||_{1,inf} with m the mean real token, shape (...)."""
        return self._all_norms[1]

    @property
    def centred_frobenius(self) -> Tensor:
        """||X - 1 m^T||_F with m the mean real token, shape (...)."""
        return self._all_norms[2]

    @property
    def unit_sum_sq(self) -> Tensor:
        """|sum_i x_i / ||x_i|| |^2 over the real nonzero tokens, shape (...): the sum of every
        pairwise cosine, diagonal included, in O(n d)."""
        return self._all_norms[3]

    @property
    def n_nonzero(self) -> Tensor:
        """Number of real tokens that are not the zero vector, shape (...)."""
        return self._all_norms[4]

    @property
    def _all_norms(self) -> tuple[Tensor, ...]:
        if self._norms is None:
            self._read(norms=True, gram=False)
            assert self._norms is not None  # set by _read
        return self._norms

    @property
    def gram(self) -> Tensor:
        """X X^T (..., n, n) when n <= d, else X^T X (..., d, d): the same nonzero spectrum."""
        if self._gram is None:
            self._read(norms=False, gram=True)
            assert self._gram is not None  # set by _read
        return self._gram

    @computed_once
    def gram_eigenvalues(self) -> Tensor:
        """sigma_i^2 from the Gram matrix, descending, >= 0, exactly 0 past n_sv: (..., k).

        Accurate to about eps x sigma_max^2 in absolute terms only (the squaring trap).
        """
        lam = torch.linalg.eigvalsh(self._solvable(self.gram)).flip(-1).clamp(min=0)
        return lam * self._in_spectrum(lam)

    def _solvable(self, gram: Tensor) -> Tensor:
        """The Gram matrices given to the solver: this route has checked them finite."""
        return gram

    def smallest(self, values: Tensor) -> Tensor:
        """The last of each sequence's n_sv spectral values (..., k) -> (...): its smallest."""
        return values.gather(-1, (self.n_sv - 1).unsqueeze(-1)).squeeze(-1)

    def _in_spectrum(self, values: Tensor) -> Tensor:
        """True for the first n_sv entries of each sequence's spectrum, (..., k)."""
        index = torch.arange(values.shape[-1], device=values.device)
        return index < self.n_sv.unsqueeze(-1)

    @computed_once
    def singular_values(self) -> Tensor:
        """The min(n_real, d) singular values of each sequence, descending, 0 past them: (..., k).

        From the Gram eigenvalues when lambda_min / lambda_max >= GRAM_EIG_RCOND, else from a
        float64 SVD of that sequence (only those sequences, in one batched call).
        """
        lam = self.gram_eigenvalues
        sv = lam.sqrt()
        smallest = self.smallest(lam)
        ill = smallest < GRAM_EIG_RCOND * lam[..., 0]
        if bool(ill.any()):
            k = sv.shape[-1]
            flat_sv, flat_ill = sv.reshape(-1, k).clone(), ill.reshape(-1)
            flat_sv[flat_ill] = singular_values_of(self.states(flat_ill))
            sv = flat_sv.reshape(sv.shape)
            sv = sv * self._in_spectrum(sv)
        return sv

    @computed_once
    def rank1_residual(self) -> Tensor:
        """||X - X_1||_F with X_1 the best rank-1 approximation, shape (...)."""
        tail = (self.norm_sq - self.gram_eigenvalues[..., 0]).clamp(min=0)
        residual = tail.sqrt()
        near = tail < RANK1_EXPLICIT**2 * self.norm_sq  # nearly rank 1: the difference cancels
        if bool(near.any()):
            k = self.gram.shape[-1]
            flat, flat_near = residual.reshape(-1).clone(), near.reshape(-1)
            x = self.states(flat_near)  # (m, n, d)
            _, vectors = torch.linalg.eigh(self.gram.reshape(-1, k, k)[flat_near])
            top = vectors[..., -1:]  # (m, k, 1) top eigenvector
            if self.gram_of_tokens:
                explicit = x - top @ (top.mT @ x)  # u_1 u_1^T X
            else:
                explicit = x - (x @ top) @ top.mT  # X v_1 v_1^T
            flat[flat_near] = frobenius(explicit)
            residual = flat.reshape(residual.shape)
        return residual

    @computed_once
    def token_products(self) -> Tensor:
        """x_i . x_j for every pair of tokens, (..., n, n); 0 for pads.

        The shared Gram matrix when n <= d; when n > d the shared Gram is d x d, so the n x n
        token products are formed here.
        """
        if self.gram_of_tokens:
            return self.gram
        x = self.states()
        return x @ x.mT  # (..., n, n)


def _norms(x: Tensor, mask: Tensor, scratch: Tensor, *, fused: bool = False) -> tuple[Tensor, ...]:
    """||X||_{1,inf}, ||X - 1 m^T||_{1,inf}, ||X - 1 m^T||_F, |sum_i x_i / ||x_i|| |^2 and the
    number of nonzero tokens of (b, n, d) states (pad rows 0): (b,) each.

    One scratch buffer (b, n, d), the caller's, holds X - 1 m^T (formed directly; on the CPU
    first |X|, and the centred rows' magnitude in place): a fresh buffer per step costs as much
    as the pass that fills it. On the CPU sums over tokens and over features are BLAS products
    with a vector of ones (faster than torch's sums). `fused` (an accelerator, where every pass
    over memory counts and none is cached): the composites from ord-1 norms of X itself
    (`composite_of`), and the centring as one x - mask m^T that leaves pad rows 0 without
    asking the mask (a host read) whether there are any: 10 passes over the float64 states in
    place of 16.
    """
    if fused:
        composite = composite_of(x)
        mean, real = masked_mean(x, mask), mask.unsqueeze(-1).to(x.dtype)
        torch.addcmul(x, real, mean, value=-1, out=scratch)
    else:
        composite = composite_of_magnitude(torch.abs(x, out=scratch))
        torch.sub(x, masked_mean(x, mask), out=scratch)
        if not bool(mask.all()):
            scratch.masked_fill_(~mask.unsqueeze(-1), 0.0)  # pad rows stay 0
    centred_frobenius = squared_norms(scratch).sqrt()
    centred_composite = composite_of(scratch) if fused else composite_of_magnitude(scratch.abs_())
    token_norms = torch.linalg.vector_norm(x, dim=-1)  # (b, n): 0 for pads
    inverse = safe_div(torch.ones_like(token_norms), token_norms)  # 0 for pads and zero tokens
    unit_sum = (inverse.unsqueeze(-2) @ x).squeeze(-2)  # (b, d)
    unit_sum_sq = squared_norms(unit_sum.unsqueeze(-2))
    n_nonzero = (token_norms > 0).sum(-1).to(x.dtype)
    return composite, centred_composite, centred_frobenius, unit_sum_sq, n_nonzero
