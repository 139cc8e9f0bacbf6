"""Images for vision models: a folder of PNG or JPEG files as the model's pixel values.

Each image is converted to the model's channels (RGB, or greyscale for one channel), resized to
the config's image_size x image_size (bilinear unless the preprocessor config says otherwise,
as ViT's image processor does), scaled to [0, 1] and normalised per channel, (x - mean) / std.
Mean, std, scale and resampling come from the model directory's `preprocessor_config.json` when
it has one (read as JSON, nothing executed), else from ViT's image processor defaults: mean and
std 0.5, so pixels lie in [-1, 1].

Example:
    >>> norm = image_normalisation(None, channels=3)
    >>> norm.mean, norm.std, norm.rescale
    ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5), 0.00392156862745098)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.hf.capture import n_patch_tokens
from rankcollapse.hf.models import LoadedModel
from rankcollapse.hf.text import random_pixels
from rankcollapse.reading import MiB, checked_size, read_json

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
PREPROCESSOR_CONFIG = "preprocessor_config.json"
BILINEAR = 2  # PIL's Image.Resampling.BILINEAR, ViT's image processor default
_MODES = {1: "L", 3: "RGB"}


@dataclass(frozen=True)
class ImageNorm:
    """How raw pixels become model inputs: x * rescale, then (x - mean) / std per channel."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    rescale: float = 1 / 255
    resample: int = BILINEAR


def _per_channel(value, channels: int, key: str, where: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in (value if isinstance(value, list) else [value] * channels))
    if len(values) != channels:
        raise InputError(
            f"{where} gives {key} = {value} for {len(values)} channels but the model has "
            f"{channels}; fix {key} there, or remove the file to use 0.5 per channel."
        )
    return values


def image_normalisation(model_dir: Path | None, *, channels: int) -> ImageNorm:
    """The normalisation of `model_dir`'s preprocessor config, or ViT's defaults without one."""
    path = None if model_dir is None else Path(model_dir) / PREPROCESSOR_CONFIG
    if path is None or not path.exists():
        return ImageNorm(mean=(0.5,) * channels, std=(0.5,) * channels)
    data = read_json(
        path,
        MAX_PREPROCESSOR_BYTES,
        error=lambda problem: InputError(
            f"{str(path)!r} is not a readable JSON file ({problem}); fix it, or remove it to use "
            "ViT's defaults (mean and std 0.5)."
        ),
    )
    if not isinstance(data, dict):
        raise InputError(f"{str(path)!r} holds no JSON object; fix it or remove it.")
    normalise = data.get("do_normalize", True)
    return ImageNorm(
        mean=_per_channel(
            data.get("image_mean", 0.5) if normalise else 0.0, channels, "image_mean", str(path)
        ),
        std=_per_channel(
            data.get("image_std", 0.5) if normalise else 1.0, channels, "image_std", str(path)
        ),
        rescale=float(data.get("rescale_factor", 1 / 255)) if data.get("do_rescale", True) else 1.0,
        resample=int(data.get("resample", BILINEAR)),
    )


def image_files(folder: Path) -> list[Path]:
    """The PNG and JPEG files of `folder`, in file-name order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            f"image folder {str(folder)!r} does not exist; pass a folder of PNG or JPEG files."
        )
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        found = sorted(p.name for p in folder.iterdir())[:5]
        raise InputError(
            f"image folder {str(folder)!r} holds no {', '.join(IMAGE_SUFFIXES)} files"
            + (f" (found: {', '.join(found)}, ...)" if found else " (it is empty)")
            + "; add images or pass another folder."
        )
    return files


MAX_PIXELS = 50_000_000  # 7000 x 7000; a photo is at most tens of megapixels
MAX_IMAGE_BYTES = 1024 * MiB  # a photo file is megabytes (PIL reads only what it decodes)
MAX_PREPROCESSOR_BYTES = MiB  # a preprocessor config is a few lines


def _unreadable_image(path: Path, folder: Path) -> Callable[[str], InputError]:
    return lambda problem: InputError(
        f"image {path.name!r} in {str(folder)!r} cannot be read ({problem}); replace it with a "
        "PNG or JPEG file, or remove it."
    )


def _check_pixels(path: Path, width: int, height: int) -> None:
    """Refuse an image larger than MAX_PIXELS before decoding it (a decompression bomb: a small
    file that unpacks to gigabytes)."""
    if width * height > MAX_PIXELS:
        raise InputError(
            f"image {path.name!r} is {width} x {height} pixels, more than {MAX_PIXELS:,} "
            "(a decompression bomb, or a scan far beyond what a vision model reads); resize it "
            "below that or remove it."
        )


def load_images(
    folder: Path,
    *,
    size: int,
    channels: int = 3,
    norm: ImageNorm | None = None,
    n_samples: int | None = None,
) -> Tensor:
    """Up to `n_samples` images of `folder` (file-name order) as pixel values (n, c, size, size).

    Args:
        folder: a folder of PNG or JPEG files.
        size: the model's image_size; every image is resized to size x size.
        channels: the model's num_channels (1: greyscale, 3: RGB).
        norm: from `image_normalisation` (default: ViT's, mean and std 0.5).
        n_samples: at most this many images (None: all).

    Returns:
        float32 tensor (n_images, channels, size, size).
    """
    from PIL import Image, UnidentifiedImageError

    if channels not in _MODES:
        raise InputError(
            f"the model takes {channels} image channels; images can be read for 1 (greyscale) "
            "or 3 (RGB)."
        )
    norm = norm or image_normalisation(None, channels=channels)
    files = image_files(folder)[:n_samples]
    mean = torch.tensor(norm.mean)[:, None, None]
    std = torch.tensor(norm.std)[:, None, None]
    pixels = []
    for path in files:
        checked_size(path, MAX_IMAGE_BYTES, error=_unreadable_image(path, folder))
        try:
            with Image.open(path) as opened:  # reads the header only
                _check_pixels(path, opened.width, opened.height)
                image = opened.convert(_MODES[channels]).resize((size, size), norm.resample)
        except Image.DecompressionBombError as err:  # PIL's own refusal, beyond twice its limit
            raise InputError(
                f"image {path.name!r} in {str(folder)!r} is too large to decode safely ({err}); "
                "resize it or remove it."
            ) from None
        except (OSError, UnidentifiedImageError, ValueError) as err:
            raise InputError(
                f"image {path.name!r} in {str(folder)!r} cannot be read ({err}); replace it with "
                "a PNG or JPEG file or remove it."
            ) from err
        array = torch.from_numpy(np.asarray(image, dtype=np.float32).copy())
        array = array[..., None] if array.ndim == 2 else array  # (size, size, c)
        pixels.append((array.permute(2, 0, 1) * norm.rescale - mean) / std)
    return torch.stack(pixels)


def pixel_inputs(
    loaded: LoadedModel,
    *,
    text: str | Path | None = None,
    padded: bool = False,
    images: str | Path | None = None,
    n_samples: int = 32,
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """A vision model's pixel values and token mask: up to `n_samples` images of a folder,
    normalised as the model directory's preprocessor config says (ViT's defaults without one),
    or `n_samples` random pixel images; text is refused."""
    config: Any = loaded.model.config  # a transformers config (torch types it as a Module)
    if text is not None or padded:
        raise InputError(
            f"model '{loaded.name}' ({loaded.arch.name}) takes images, not text; pass a folder "
            "of PNG or JPEG files with --images DIR (Python: images=), or nothing for random "
            "pixels."
        )
    if images is None:
        pixels = random_pixels(
            n_samples, channels=config.num_channels, size=config.image_size, seed=seed
        )
    else:
        source = Path(loaded.info.get("source", ""))
        norm = image_normalisation(
            source if source.is_dir() else None, channels=config.num_channels
        )
        pixels = load_images(
            Path(images),
            size=config.image_size,
            channels=config.num_channels,
            norm=norm,
            n_samples=n_samples,
        )
    return pixels, torch.ones(len(pixels), n_patch_tokens(config), dtype=torch.bool)
