"""A local model folder, checked before transformers reads it.

A folder is data until it is validated: `check_model_folder(path)` reads `config.json` as JSON,
finds its `model_type` (or infers it from `architectures`), builds the library's config class,
checks that the sizes are positive and fit together, and reads the safetensors headers (never
the tensors) to check every tensor's name and shape against a model built from the config on the
meta device (no memory). Any problem is one `InputError` naming the folder, the file, what was
wrong and how to fix it. Only safetensors are read: a folder with only `pytorch_model.bin`
(pickle) is refused.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankcollapse.errors import InputError
from rankcollapse.reading import MiB, checked_size, is_utf8, read_json, safetensors_header, shown
from rankcollapse.sizes import SIZES as SIZE_BOUNDS

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
MAX_JSON_BYTES = 32 * MiB  # a config or shard index is kilobytes; more is not one
MAX_TOKENIZER_BYTES = 512 * MiB  # a tokenizer.json of a large vocabulary is tens of MB
MAX_HEADER_FILE = 2**62  # a weights file's size is the model's; only its header is read
# Weights in formats that are never read (pickle, or frameworks other than torch).
UNSAFE_WEIGHTS = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.ckpt.index")
# Sizes that must be positive integers wherever a config has them (attribute_map resolves
# aliases such as GPT-2's n_layer).
SIZES = (
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "hidden_size",
    "intermediate_size",
    "embedding_size",
    "head_dim",
    "d_kv",
    "d_ff",
    "vocab_size",
    "num_channels",
    "image_size",
    "patch_size",
)
TOKENIZER_JSON = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
)
# The one base-model part no hidden state passes through: saved without it by *For... heads.
OPTIONAL_PARTS = ("pooler.",)
FIX = "save the model with save_pretrained(DIR) or fix the file"


def _error(folder: Path, problem: str, fix: str = FIX) -> InputError:
    return InputError(f"model folder '{shown(folder)}' {problem}; {fix}.")


def _read_json(folder: Path, name: str, limit: int = MAX_JSON_BYTES) -> Any:
    """The parsed JSON of `folder/name`, or an error saying why it is not usable."""
    return read_json(
        folder / name,
        limit,
        error=lambda problem: _error(folder, f"has no usable {name} ({problem})"),
    )


def _missing_config(folder: Path) -> InputError:
    present = sorted(p.name for p in folder.iterdir())
    if not present:
        return _error(folder, "is empty", "pass a folder saved with save_pretrained(DIR)")
    weights = [n for n in present if n.endswith((".safetensors", ".bin", ".gguf"))]
    what = "weights" if weights else "files"
    return _error(
        folder,
        f"has {what} ({', '.join(present[:5])}{', ...' if len(present) > 5 else ''}) but no "
        f"{CONFIG}",
        "a model folder needs config.json and model.safetensors; save the model with "
        "save_pretrained(DIR)",
    )


def _model_type(folder: Path, values: dict) -> str:
    """The config's `model_type`, known to transformers (the fix names the family of the class
    its `architectures` names, when it has none)."""
    from transformers import CONFIG_MAPPING

    model_type = values.get("model_type")
    if model_type is None:
        guess = _inferred_type(values.get("architectures"))
        raise _error(
            folder,
            f"has a {CONFIG} with no model_type",
            f'add "model_type": "{guess or "bert"}" (the family it is) to config.json',
        )
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        from rankcollapse.hf.architectures import supported_model_types

        remote = (
            " (its config asks for remote code, which never runs)" if "auto_map" in values else ""
        )
        raise _error(
            folder,
            f"has model_type {model_type!r}, which transformers does not know{remote}",
            "use a folder of a known family: " + ", ".join(supported_model_types()),
        )
    return model_type


def _inferred_type(architectures: object) -> str | None:
    import transformers

    if not isinstance(architectures, list):
        return None
    for name in architectures:
        if not (isinstance(name, str) and name.isidentifier()):
            continue
        try:
            config_class = getattr(getattr(transformers, name, None), "config_class", None)
        except Exception:  # noqa: BLE001, S112 - a class whose optional backend is missing
            continue
        model_type = getattr(config_class, "model_type", None)
        if isinstance(model_type, str) and model_type:
            return model_type
    return None


def _sizes(folder: Path, config: Any, values: dict) -> None:
    """Positive sizes that fit together: heads divide the width, key-value heads the heads."""
    for key in SIZES:
        value = getattr(config, key, None)
        if value is None:
            continue
        items = value if isinstance(value, list | tuple) else [value]
        if not items or not all(type(v) is int and v >= 1 for v in items):
            raise _error(
                folder, f"has {key} = {value!r} in {CONFIG}; it must be a positive integer"
            )
    depth = SIZE_BOUNDS["n_layers"]  # deeper than any published model: a damaged config
    if config.num_hidden_layers > depth.high:
        raise _error(
            folder,
            f"has num_hidden_layers = {config.num_hidden_layers} in {CONFIG} (at most "
            f"{depth.high})",
        )
    heads = getattr(config, "num_attention_heads", None)
    width = getattr(config, "hidden_size", None)
    own_head_size = any(values.get(k) is not None for k in ("head_dim", "d_kv"))
    if heads and width and not own_head_size and width % heads:
        raise _error(
            folder,
            f"has hidden_size = {width}, not a multiple of num_attention_heads = {heads}, "
            f"in {CONFIG}; each head takes hidden_size / num_attention_heads features",
        )
    kv_heads = getattr(config, "num_key_value_heads", None)
    if heads and kv_heads and heads % kv_heads:
        raise _error(
            folder,
            f"has num_attention_heads = {heads}, not a multiple of num_key_value_heads = "
            f"{kv_heads}, in {CONFIG}",
        )
    vocab, pad = getattr(config, "vocab_size", None), getattr(config, "pad_token_id", None)
    if vocab and type(pad) is int and not 0 <= pad < vocab:
        raise _error(
            folder, f"has pad_token_id = {pad} outside the vocabulary of {vocab} ids in {CONFIG}"
        )


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' warnings off: the checks below report what is wrong, once."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def read_model_config(path: str | Path) -> Any:
    """The transformers config of a model folder, after every check of its config.json.

    Raises:
        InputError: no folder, no or unreadable config.json, no known model_type, values of
            the wrong type, or sizes that are not positive or do not fit together.
    """
    from transformers import CONFIG_MAPPING

    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"model folder '{folder}' does not exist; pass a local model folder.")
    if not (folder / CONFIG).exists():
        raise _missing_config(folder)
    values = _read_json(folder, CONFIG)
    if not isinstance(values, dict):
        raise _error(folder, f"has a {CONFIG} holding a {type(values).__name__}, not an object")
    model_type = _model_type(folder, values)
    try:
        with _quiet_transformers():
            config = CONFIG_MAPPING[model_type].from_dict(values)
    except Exception as err:  # noqa: BLE001 - transformers' own checks raise many kinds
        reason = " ".join(str(err).split())[:300]
        raise _error(
            folder, f"has a {CONFIG} that is not a valid {model_type} config ({reason})"
        ) from None
    _sizes(folder, config, values)
    return config


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a folder: one file, or the shards its index names."""
    single, index = folder / WEIGHTS, folder / WEIGHTS_INDEX
    if single.exists():
        return [single]
    if index.exists():
        weight_map = _read_json(folder, WEIGHTS_INDEX)
        weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
        if not isinstance(weight_map, dict) or not all(
            isinstance(f, str) and Path(f).name == f and f.endswith(".safetensors")
            for f in weight_map.values()
        ):
            raise _error(folder, f"has a {WEIGHTS_INDEX} without a weight_map of shard file names")
        return [folder / name for name in sorted(set(weight_map.values()))]
    unsafe = [n for n in UNSAFE_WEIGHTS if (folder / n).exists()]
    if unsafe:
        raise _error(
            folder,
            f"holds {unsafe[0]} but no {WEIGHTS}; only safetensors are loaded (a .bin file is "
            "a pickle, which can run code)",
            "convert it once where you trust it: load it and save_pretrained(DIR) again, "
            "which writes model.safetensors",
        )
    raise _error(folder, f"has a {CONFIG} but no weights ({WEIGHTS})")


def _tensor_shapes(folder: Path, files: list[Path]) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape, from the safetensors headers only (no tensor is read)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for path in files:

        def damaged(problem: str, name: str = path.name) -> InputError:
            if problem in ("missing", "a folder where a file belongs"):
                return _error(folder, f"has no readable {name} ({problem})")
            return _error(
                folder,
                f"has a damaged {name} ({problem})",
                "save the model again with save_pretrained(DIR), or copy the file again",
            )

        header = safetensors_header(path, MAX_HEADER_FILE, error=damaged)
        shapes.update((name, shape) for name, (_dtype, shape) in header.items())
    if not shapes:
        raise _error(folder, f"has weights with no tensors in {files[0].name}")
    return shapes


def _meta_model(config: Any) -> Any:
    """The base model the loader would build, on the meta device (no memory)."""
    import torch

    from rankcollapse.hf.architectures import model_class_of

    cls = model_class_of(config)
    with torch.device("meta"), _quiet_transformers():
        return cls.from_config(config) if hasattr(cls, "from_config") else cls(config)


def _renamer(model: Any) -> Any:
    """checkpoint key -> (model key, converted): transformers' own renaming of old names."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, rename_source_key
    except ImportError:  # another transformers: names as saved, base prefix stripped
        prefix = f"{model.base_model_prefix}."
        return lambda key: (key.removeprefix(prefix), False)
    transforms = get_model_conversion_mapping(model)
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    renamings: list[Any] = [t for t in transforms if not isinstance(t, WeightConverter)]
    expected = model.state_dict()

    def rename(key: str) -> tuple[str, bool]:
        name, converter = rename_source_key(
            key, renamings, converters, model.base_model_prefix, expected
        )
        return name, converter is not None

    return rename


def _check_weights(folder: Path, config: Any, shapes: dict[str, tuple[int, ...]]) -> None:
    try:
        model = _meta_model(config)
    except Exception as err:  # noqa: BLE001 - a config transformers cannot build a model of
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        raise _error(folder, f"has a {CONFIG} no model can be built from ({reason})") from None
    expected = model.state_dict(keep_vars=True)
    rename = _renamer(model)
    found: set[str] = set()
    # A tensor under one of the model's own parts that the model has no place for: the config
    # is smaller than the weights (a task head's tensors are under other names and pass).
    parts = tuple(f"{part}." for part, _ in model.named_children())
    buffers = {name for name, _ in model.named_buffers()}  # e.g. position ids, not persistent
    for key, shape in shapes.items():
        name, converted = rename(key)
        bare = name.removeprefix(f"{model.base_model_prefix}.")  # saved with a task head
        if name not in expected and bare not in buffers and bare.startswith(parts):
            raise _error(
                folder,
                f"has tensor '{key}' in its weights, which a model of its {CONFIG} has "
                "no place for; the config does not describe these weights",
                "pass the config.json saved with these weights",
            )
        if name in expected:
            found.add(name)
            want = tuple(expected[name].shape)
            if not converted and shape != want:
                raise _error(
                    folder,
                    f"has tensor '{key}' of shape {shape} in its weights, but its "
                    f"{CONFIG} makes it {want}; the config does not describe these weights",
                    "pass the config.json saved with these weights",
                )
    # Tied tensors (one parameter under two names) are saved once.
    names_of: dict[int, list[str]] = {}
    for name, tensor in expected.items():
        names_of.setdefault(id(tensor), []).append(name)
    missing = [
        names[0]
        for names in names_of.values()
        if not found.intersection(names) and not names[0].startswith(OPTIONAL_PARTS)
    ]
    if missing:
        raise _error(
            folder,
            f"has weights without {len(missing)} of the {len(names_of)} tensors its "
            f"{CONFIG} asks for (first: '{missing[0]}'); the config does not describe these "
            "weights",
            "pass the config.json saved with these weights",
        )


def _check_tokenizer_files(folder: Path) -> None:
    """The tokenizer's JSON files, where present, are JSON objects (transformers reads them
    without checking)."""
    for name in TOKENIZER_JSON:
        if (folder / name).exists():
            values = _read_json(folder, name, MAX_TOKENIZER_BYTES)
            if not isinstance(values, dict):
                raise _error(
                    folder,
                    f"has a {name} holding a {type(values).__name__}, not an object",
                    "save the tokenizer with tokenizer.save_pretrained(DIR), or remove its files "
                    "and pass --random-tokens or --tokenizer DIR",
                )


@functools.lru_cache(maxsize=16)
def _checked(folder: Path, stamp: tuple) -> None:
    config = read_model_config(folder)
    shapes = _tensor_shapes(folder, _weight_files(folder))
    _check_weights(folder, config, shapes)
    _check_tokenizer_files(folder)


def check_model_folder(path: str | Path) -> None:
    """Check a model folder's config.json and weights before transformers reads them.

    Checked once per process while the folder's files are unchanged (`folder_stamp`).

    Raises:
        InputError: one clear line for a missing, empty or damaged config.json, an unknown
            model_type, sizes that are not positive or do not fit together, weights missing,
            only in an unsafe format, damaged, or of shapes the config does not describe.
    """
    folder = Path(path)
    _checked(folder.resolve(), folder_stamp(folder))


def folder_stamp(path: str | Path) -> tuple[tuple[str, int, int, int, int], ...]:
    """What identifies the contents of a model folder: each file's name, size, modification and
    change times and inode (a file replaced by a rename gets a new inode). The folder check and
    the loader's cache are keyed by it, so weights saved again into the folder are read again.

    Raises:
        InputError: no such folder, or a file in it that is not a regular file.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(
            f"model folder '{shown(folder)}' does not exist; pass a local model folder."
        )
    if not is_utf8(folder.absolute()):  # safetensors (Rust) takes UTF-8 paths only
        raise _error(
            folder,
            "has a path that is not UTF-8 text, which the safetensors loader cannot open",
            "rename the folder (or link it under a UTF-8 name)",
        )
    stats = [(p.name, p.stat()) for p in _regular_files(folder)]
    return tuple((n, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino) for n, s in stats)


def _regular_files(folder: Path) -> list[Path]:
    """The files of `folder`, each a regular file (transformers opens what it finds: a FIFO or
    device would wait forever or never end), else an error naming it."""
    files = sorted(p for p in folder.iterdir() if not p.is_dir())
    for file in files:

        def refused(problem: str, name: str = file.name) -> InputError:
            return _error(
                folder, f"holds {name}, {problem}", "remove it or replace it with the file"
            )

        checked_size(file, MAX_HEADER_FILE, error=refused)
    return files


def check_tokenizer_folder(path: str | Path) -> None:
    """A tokenizer folder's files before transformers reads them: regular files only, the
    JSON ones JSON objects within their bound."""
    folder = Path(path)
    _regular_files(folder)
    _check_tokenizer_files(folder)
