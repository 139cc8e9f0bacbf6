"""Named random streams of one seed: weights and data never share random numbers.

A config's `seed` draws the network's weights; the inputs come from another stream of the
same seed, so changing the data (more tokens, more samples) never changes the weights. Sampled
paths (Dong et al. 2021, Sec. 5) have their own stream.
"""

from __future__ import annotations

from typing import Literal

Stream = Literal["weights", "data", "paths"]
STREAM_OFFSETS: dict[str, int] = {"weights": 0, "data": 10_000, "paths": 20_000}


def stream_seed(seed: int, stream: Stream) -> int:
    """The generator seed of `stream` for a config's `seed`.

    Example:
        >>> stream_seed(3, "weights"), stream_seed(3, "data")
        (3, 10003)
    """
    return seed + STREAM_OFFSETS[stream]
