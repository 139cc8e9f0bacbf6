"""Named random streams of one seed: weights and data never share random numbers.

A config's `seed` draws the network's weights; the inputs come from another stream of the
same seed, so changing the data (more tokens, more samples) never changes the weights. Sampled
paths (Dong et al. 2021, Sec. 5) and the circle toy's rollout starts off its training arcs
(Sec. 6) have their own streams.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

Stream = Literal["weights", "data", "paths", "starts"]
STREAM_OFFSETS: dict[str, int] = {"weights": 0, "data": 10_000, "paths": 20_000, "starts": 30_000}
MAX_SEED = 2**63 - 1 - max(STREAM_OFFSETS.values())  # every stream's seed fits torch's int64
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
"""A config's seed: 0 to MAX_SEED, so that no generator of any stream overflows in a unit."""


def stream_seed(seed: int, stream: Stream) -> int:
    """The generator seed of `stream` for a config's `seed`.

    Example:
        >>> stream_seed(3, "weights"), stream_seed(3, "data")
        (3, 10003)
    """
    return seed + STREAM_OFFSETS[stream]
