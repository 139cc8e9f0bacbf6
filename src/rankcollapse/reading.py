"""Every file from outside is read here, within a stated bound.

A path is checked with `os.stat` before it is opened: a missing path, a folder and a special
file (a FIFO, a device, a socket: opening one for reading can wait forever) are refused without
opening, and a file larger than the caller's bound is refused without reading. The file is then
opened without blocking, checked again on the open descriptor, and at most `limit` bytes are
read. Parsers on top: text (UTF-8), JSON, YAML (safe loader, with a nesting depth and an alias
expansion guard against "billion laughs"), CSV (line length, NUL bytes and field counts, read
in bounded pieces), safetensors headers (never the tensors) and saved activations (`.npy`,
`.pt` through `torch.load(weights_only=True)`, `.safetensors`), read a layer at a time after
their headers are checked.

Every refusal is one `RankCollapseError` naming the file, what is wrong and the fix: by default
`UnreadableFileError`; a caller with its own wording passes `error`, a function of the problem
(e.g. "a folder where a file belongs") that returns the exception to raise.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from rankcollapse.errors import InputError, RankCollapseError

MiB = 2**20
MAX_YAML_DEPTH = 64  # a config nests a few levels; deeper is not one
MAX_YAML_VALUES = 100_000  # values counted as written out (aliases repeat what they name)
MAX_CSV_LINE = 1_000_000  # bytes: a longer line is damage, not a row
MAX_SAFETENSORS_HEADER = 100 * MiB  # the format's own limit on its JSON header
FIX = "pass a regular file of the expected kind"

Error = Callable[[str], RankCollapseError]


class UnreadableFileError(InputError):
    """An outside file that is missing, not a regular file, too large, or not what it holds."""


class LinkInsideError(InputError):
    """A symbolic link inside a results folder (refused, never followed)."""


def _default_error(path: Path, fix: str) -> Error:
    return lambda problem: UnreadableFileError(f"{path} cannot be read ({problem}); {fix}.")


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder where a file belongs"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a file; it is never opened"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file; it is never opened"
    if stat.S_ISSOCK(mode):
        return "a socket, not a file; it is never opened"
    return "not a regular file; it is never opened"


def shown(path: str | os.PathLike) -> str:
    r"""A path as text every terminal, page and file can hold: bytes of a name that are not
    UTF-8 (a name made on another system) written as `\xff` escapes, never a traceback.

    Example:
        >>> shown(os.fsdecode(b"run-\xff\xfe"))
        'run-\\xff\\xfe'
    """
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_utf8(path: str | os.PathLike) -> bool:
    r"""True when every name in `path` is UTF-8 text (libraries such as safetensors take no
    other).

    Example:
        >>> is_utf8("run-1"), is_utf8(os.fsdecode(b"run-\xff"))
        (True, False)
    """
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def links_inside(folder: str | os.PathLike) -> Iterator[Path]:
    """Every symbolic link inside `folder` and its subfolders (`folder` itself may be one),
    found without following any link below `folder`."""
    for parent, dirs, files in os.walk(os.fspath(folder), followlinks=False):
        for name in sorted(dirs + files):
            if os.path.islink(os.path.join(parent, name)):
                yield Path(parent) / name


def refuse_links(folder: str | os.PathLike, what: str = "results folder") -> Path:
    """`folder`, refused when it holds a symbolic link anywhere below it: a results folder is
    a closed world, so a link (to a file, a folder or anywhere) is never followed, neither to
    read nor to write; the error names the link, never what it points to or holds."""
    for link in links_inside(folder):
        raise LinkInsideError(
            f"{shown(link)} is a symbolic link inside the {what} {shown(folder)}; links in a "
            f"{what} are refused, never followed (nothing was read or written through it). "
            "Replace the link with the file or folder itself, or pass another folder."
        )
    return Path(folder)


def checked_size(
    path: str | os.PathLike, limit: int, *, error: Error | None = None, follow: bool = True
) -> int:
    """The size in bytes of the regular file `path`, refused (without opening it) when missing,
    a folder, a special file or larger than `limit` bytes; with `follow=False` (a file of a
    results folder) a symbolic link is refused too, never followed."""
    path = Path(path)
    fail = error or _default_error(path, FIX)
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        raise fail("missing") from None
    except OSError as err:
        raise fail(f"unreadable: {err.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise fail("a symbolic link; links in a results folder are never followed")
    if not stat.S_ISREG(info.st_mode):
        raise fail(_kind(info.st_mode))
    if info.st_size > limit:
        raise fail(f"{info.st_size:,} bytes, more than the {limit:,} such a file holds")
    return info.st_size


@contextlib.contextmanager
def open_bounded(
    path: str | os.PathLike, limit: int, *, error: Error | None = None, follow: bool = True
) -> Iterator[IO[bytes]]:
    """The regular file `path` opened for reading in binary, after `checked_size`; opened
    without blocking and checked again on the descriptor (a file swapped for a FIFO between
    the two is refused too; with `follow=False`, one swapped for a link too)."""
    path = Path(path)
    fail = error or _default_error(path, FIX)
    checked_size(path, limit, error=fail, follow=follow)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise fail(f"unreadable: {err.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise fail(_kind(info.st_mode))
    with os.fdopen(fd, "rb") as f:
        yield f


def read_bytes(
    path: str | os.PathLike, limit: int, *, error: Error | None = None, follow: bool = True
) -> bytes:
    """At most `limit` bytes: the whole regular file, or a refusal (a file that grew past
    `limit` while read is refused too)."""
    fail = error or _default_error(Path(path), FIX)
    with open_bounded(path, limit, error=fail, follow=follow) as f:
        try:
            size = os.fstat(f.fileno()).st_size  # a buffer of the file's size, not of `limit`
            data = f.read(size + 1)
            if len(data) > size:  # it grew since
                data += f.read(limit + 1 - len(data))
        except OSError as err:
            raise fail(f"unreadable: {err.strerror}") from None
    if len(data) > limit:
        raise fail(f"more than the {limit:,} bytes such a file holds")
    return data


def read_text(
    path: str | os.PathLike, limit: int, *, error: Error | None = None, follow: bool = True
) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes."""
    fail = error or _default_error(Path(path), FIX)
    data = read_bytes(path, limit, error=fail, follow=follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise fail(f"not UTF-8 text at byte {err.start}") from None


def parse_json(text: str | bytes, *, error: Error, **options: Any) -> Any:
    """JSON text parsed, or `error` with the line and the parser's reason."""
    try:
        return json.loads(text, **options)
    except json.JSONDecodeError as err:
        raise error(f"not JSON: line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise error("JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as err:  # parse_constant's refusal, bad bytes
        raise error(f"not JSON: {err}") from None


def read_json(
    path: str | os.PathLike, limit: int, *, error: Error | None = None, follow: bool = True
) -> Any:
    """The JSON value of a regular UTF-8 file of at most `limit` bytes."""
    fail = error or _default_error(Path(path), FIX)
    return parse_json(read_text(path, limit, error=fail, follow=follow), error=fail)


@functools.cache
def _bounded_loader() -> type:
    """A safe YAML loader that refuses nesting deeper than MAX_YAML_DEPTH while composing
    (before Python's own recursion limit is near)."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_YAML_DEPTH:
                    raise _TooDeepError
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


class _TooDeepError(Exception):
    pass


def parse_yaml(text: str, *, error: Error) -> Any:
    """YAML text with the safe loader (a `!!python` tag is refused, never run), or `error` when
    it is not a small plain document: a syntax error, nesting deeper than MAX_YAML_DEPTH, or
    aliases that expand past MAX_YAML_VALUES values."""
    import yaml

    loader = _bounded_loader()(text)  # yaml.load's own steps, with the subclass of SafeLoader
    try:
        value = loader.get_single_data()
    except yaml.YAMLError as err:
        raise error(f"not valid YAML: {_yaml_problem(err)}") from None
    except (_TooDeepError, RecursionError):
        raise error(f"YAML nested more than {MAX_YAML_DEPTH} levels deep") from None
    finally:
        loader.dispose()
    if _expanded_size(value) > MAX_YAML_VALUES:
        raise error(f"YAML that expands to more than {MAX_YAML_VALUES:,} values (aliases)")
    return value


def _yaml_problem(err: Exception) -> str:
    """The parser's reason and position, without the snippet of the file it quotes (an error
    names where a file is wrong, never prints what it holds)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or type(err).__name__
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def _expanded_size(value: Any, budget: int = MAX_YAML_VALUES + 1) -> int:
    """Number of values in `value` written out, counting up to `budget` (then stopping)."""
    count, stack = 0, [value]
    while stack and count < budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def read_yaml(
    path: str | os.PathLike, limit: int, *, error: Error | None = None, follow: bool = True
) -> Any:
    """The YAML value (safe loader, depth and alias guards) of a regular UTF-8 file of at most
    `limit` bytes."""
    fail = error or _default_error(Path(path), FIX)
    return parse_yaml(read_text(path, limit, error=fail, follow=follow), error=fail)


def text_lines(
    path: str | os.PathLike,
    limit: int,
    *,
    max_line: int = MAX_CSV_LINE,
    error: Error | None = None,
    follow: bool = True,
) -> Iterator[bytes]:
    """The lines of a file of at most `limit` bytes, each read in a piece of at most `max_line`
    bytes (never one huge line): a longer line or a NUL byte is refused with its number."""
    fail = error or _default_error(Path(path), FIX)
    with open_bounded(path, limit, error=fail, follow=follow) as f:
        for number in range(1, 1 << 62):
            line = f.readline(max_line + 1)
            if not line:
                return
            if len(line) > max_line:
                raise fail(f"line {number} is longer than {max_line:,} bytes")
            if b"\x00" in line:
                raise fail(f"line {number} holds binary data (a NUL byte)")
            yield line


def check_csv(
    path: str | os.PathLike,
    limit: int,
    *,
    max_line: int = MAX_CSV_LINE,
    error: Error | None = None,
    follow: bool = True,
) -> None:
    """A CSV file of at most `limit` bytes, read in pieces of at most `max_line` bytes (never
    as one huge line): no line longer than `max_line`, no NUL byte, at least a header, and
    every unquoted line with the header's number of fields (pandas silently fills a truncated
    row with empty values)."""
    fail = error or _default_error(Path(path), FIX)
    n_fields = None
    for number, line in enumerate(
        text_lines(path, limit, max_line=max_line, error=fail, follow=follow), 1
    ):
        if b'"' in line or not line.strip():
            continue
        fields = line.count(b",") + 1
        if n_fields is None:
            n_fields = fields
        elif fields != n_fields:
            raise fail(f"line {number} has {fields} of {n_fields} columns")
    if n_fields is None:
        raise fail("empty")


DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def safetensors_header(
    path: str | os.PathLike, limit: int, *, error: Error | None = None
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) of every tensor in a safetensors file of at most `limit` bytes,
    from its header alone (no tensor is read): the header's length within the file and
    MAX_SAFETENSORS_HEADER, a JSON object of entries with a known dtype, a shape of whole
    numbers and data offsets that tile the data exactly, as the format requires."""
    fail = error or _default_error(Path(path), FIX)
    with open_bounded(path, limit, error=fail) as f:
        size = os.fstat(f.fileno()).st_size
        first = f.read(8)
        if len(first) < 8:
            raise fail("shorter than a safetensors header")
        (n_header,) = struct.unpack("<Q", first)
        if n_header > min(MAX_SAFETENSORS_HEADER, size - 8):
            raise fail(f"a header of {n_header:,} bytes in a file of {size:,}")
        header = parse_json(f.read(n_header), error=lambda p: fail(f"header {p}"))
    if not isinstance(header, dict):
        raise fail("a header that is not a JSON object")
    header.pop("__metadata__", None)
    return _tensor_entries(header, size - 8 - n_header, fail)


def _tensor_entries(header: dict, n_data: int, fail: Error) -> dict:
    """The checked entries of a safetensors header (see `safetensors_header`)."""
    found, spans = {}, []
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            ok = dtype in DTYPE_BYTES and all(type(n) is int and n >= 0 for n in shape)
            ok = ok and type(begin) is int and type(end) is int
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise fail(f"a header entry {str(name)[:80]!r} that is not a tensor's")
        if end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise fail(f"tensor {name!r}: its data offsets do not fit its shape and dtype")
        found[name] = (dtype, tuple(shape))
        spans.append((begin, end))
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise fail("data offsets that leave a gap or overlap")
        position = end
    if position != n_data:
        raise fail(f"{n_data:,} bytes of data where its header names {position:,}")
    return found


# Saved activations (`rankcollapse measure FILE`, `measure.measure_file`): tensors only, never
# pickle; every size checked against the file before anything is allocated.

ACTIVATION_SUFFIXES = (".npy", ".pt", ".safetensors")
STATE_KEYS = ("states", "hidden_states")  # the keys a dict file may hold the states under
MAX_STATES_BYTES = 2**62  # no cap on the file: what it would allocate is checked per format
_DIMS = ("layers", "sequences", "tokens", "features")
_SAVE_HINT = "save_activations(path, states, mask) from rankcollapse.measure"


@dataclass
class Layers:
    """Saved activations, read one layer at a time: `shape` as stored ((layers, batch, n, d) or
    (batch, n, d)), `dtype` (a torch dtype) and `read(l)`, layer l as a (batch, n, d) tensor."""

    shape: tuple[int, ...]
    dtype: Any
    read: Callable[[int], Any]

    @classmethod
    def of(cls, tensor: Any) -> Layers:
        """A tensor already in memory (a `.pt` file, memory-mapped)."""
        return cls(
            tuple(tensor.shape), tensor.dtype, lambda l: tensor[l] if tensor.dim() == 4 else tensor
        )

    def __len__(self) -> int:
        return self.shape[0] if len(self.shape) == 4 else 1

    def __iter__(self) -> Iterator[Any]:
        return (self.read(layer) for layer in range(len(self)))


class Activations(NamedTuple):
    """An activations file opened (`read_activations`): its layers, still unread, the shape
    (layers, batch, n, d) and the boolean token mask (None: every token is real)."""

    states: Layers
    shape: tuple[int, ...]
    mask: Any


def read_activations(path: str | os.PathLike, mask: str | os.PathLike | Any = None) -> Activations:
    """An activations file opened, every layer still unread: its format and header, dtype,
    rank and sizes checked (`load_activations`, `check_activations`), and one layer's
    measurement checked against the memory here (`sizes.check_memory`). `mask`: a (batch, n)
    tensor, the path of a file holding one, or None for the file's own `mask` (or none)."""
    from rankcollapse.sizes import check_memory, measure_bytes

    content = load_activations(path)
    if isinstance(mask, str | os.PathLike):
        try:
            mask = load_activations(mask)["states"].read(0)  # one small tensor, read whole
        except InputError as err:  # said of the mask, not of the states
            raise InputError(f"the mask file: {err}") from None
    states = content["states"]
    shape, mask = check_activations(states, content["mask"] if mask is None else mask)
    n_layers, n_samples, n_tokens, d_model = shape
    itemsize = states.dtype.itemsize
    needed = itemsize * n_samples * n_tokens * d_model + measure_bytes(n_samples, n_tokens, d_model)
    sizes = {"layers": n_layers, "n_samples": n_samples, "n_tokens": n_tokens, "d_model": d_model}
    check_memory(
        "measuring one layer", needed, sizes, "save fewer sequences per file (or split the file)"
    )
    return Activations(states, shape, mask)


def load_activations(path: str | os.PathLike) -> dict:
    """Open a file safely as {'states': Layers, 'mask': tensor | None}, reading no layer yet.
    No pickle is executed (`.pt`: torch.load with weights_only=True); a .npy or safetensors
    header is checked (dtype, rank, size against the file) before anything is allocated."""
    path = Path(path)
    fix = f"pass the path of a {', '.join(ACTIVATION_SUFFIXES)} file"
    checked_size(  # a folder, FIFO or device is refused unopened
        path,
        MAX_STATES_BYTES,
        error=lambda problem: InputError(
            f"no file at '{shown(path)}'; {fix}."
            if problem == "missing"
            else f"'{shown(path)}' is {problem}; {fix}."
        ),
    )
    suffix = path.suffix.lower()
    if suffix not in ACTIVATION_SUFFIXES:
        raise InputError(
            f"'{shown(path.name)}' has suffix '{suffix}'; supported: "
            f"{', '.join(ACTIVATION_SUFFIXES)}; write one with {_SAVE_HINT}."
        )
    readers = {".npy": _load_npy, ".pt": _load_pt, ".safetensors": _load_safetensors}
    content = readers[suffix](path)
    where = f"'{shown(path)}'"
    if not isinstance(content, dict):
        states = content if isinstance(content, Layers) else Layers.of(_dense(content, where))
        return {"states": states, "mask": None}
    key = next((k for k in STATE_KEYS if k in content), None)
    if key is None:
        raise InputError(
            f"{where} holds keys {sorted(map(str, content))}; expected one of "
            f"{list(STATE_KEYS)} (and optionally 'mask'); write it with {_SAVE_HINT}."
        )
    mask, states = content.get("mask"), content[key]
    if not isinstance(states, Layers):
        states = Layers.of(_dense(states, f"'{key}' in {where}"))
    return {"states": states, "mask": None if mask is None else _dense(mask, f"'mask' in {where}")}


def _load_pt(path: Path) -> Any:
    """torch.load with weights_only=True (never pickle's code), memory-mapped when the file is
    a zip archive (what torch.save writes); an old-format file is read whole."""
    import torch

    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # not a zip archive: mmap cannot map it
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - unsafe (refused), truncated or not torch
        raise InputError(
            f"'{shown(path)}' does not load safely as tensors (torch.load with weights_only=True "
            f"refused it: {type(err).__name__}). Save a tensor or a dict of tensors, e.g. "
            f"torch.save({{'states': x, 'mask': m}}, path), or use {_SAVE_HINT}."
        ) from None


def _load_safetensors(path: Path) -> dict:
    """The tensors of a safetensors file, its header checked first (`safetensors_header`):
    'states' / 'hidden_states' as `Layers` read by slice, the others (a mask) read whole."""
    fix = f"save it again with {_SAVE_HINT}"
    header = safetensors_header(
        path,
        MAX_STATES_BYTES,
        error=lambda p: InputError(
            f"'{shown(path)}' is not a readable safetensors file ({p}); {fix}."
        ),
    )
    if not is_utf8(path):
        raise InputError(
            f"'{shown(path)}' has a name that is not UTF-8, which the safetensors library cannot "
            "open; rename the file."
        )
    from safetensors import safe_open

    content: dict = {}
    with safe_open(path, framework="pt") as f:
        for key, (dtype, shape) in header.items():
            if key in STATE_KEYS:
                content[key] = Layers(shape, _torch_dtype(dtype), _slice_reader(path, key, shape))
            else:  # a mask is read whole (it is small); any other tensor is never read
                content[key] = f.get_tensor(key) if key == "mask" else None
    return content


def _torch_dtype(name: str) -> Any:
    import torch

    names = {
        "F16": torch.float16,
        "BF16": torch.bfloat16,
        "F32": torch.float32,
        "F64": torch.float64,
    }
    return names.get(name, torch.int64)  # anything else is refused as not floating point


def _slice_reader(path: Path, key: str, shape: tuple[int, ...]) -> Callable[[int], Any]:
    def read(layer: int) -> Any:
        from safetensors import safe_open

        with safe_open(path, framework="pt") as f:
            part = f.get_slice(key)
            return part[layer] if len(shape) == 4 else part[:]

    return read


def _dense(value: object, where: str) -> Any:
    """`value` if it is a dense tensor, else a clear error."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise InputError(
            f"{where} holds a {type(value).__name__}; save a tensor or a dict of tensors."
        )
    if value.layout != torch.strided:
        raise InputError(f"{where} holds a sparse tensor ({value.layout}); save x.to_dense().")
    return value


def _load_npy(path: Path) -> Layers:
    """A .npy array of numbers, its header checked first: a declared shape the file cannot hold,
    or strings, records and objects, fail before any memory is taken."""
    import numpy as np
    import torch

    readers = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }
    with open_bounded(path, MAX_STATES_BYTES) as f:
        try:
            shape, fortran, dtype = readers[np.lib.format.read_magic(f)](f)
        except Exception as err:  # noqa: BLE001 - empty, truncated or not a .npy header
            reason = " ".join(str(err).split())[:200] or type(err).__name__
            raise InputError(
                f"'{shown(path)}' is not a .npy file numpy wrote ({reason}); save it with np.save."
            ) from None
        data_start, size = f.tell(), os.fstat(f.fileno()).st_size
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise InputError(
            f"'{shown(path)}' holds an array of dtype {dtype} ({dtype.kind!r}); save "
            "floating-point states (float16, float32, float64) and a boolean or 0/1 mask."
        )
    needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if needed != size - data_start:
        raise InputError(
            f"'{shown(path)}' declares shape {shape} of {dtype} ({needed} bytes) but holds "
            f"{size - data_start} bytes of data; the file is damaged or was not fully written: "
            "save it again with np.save."
        )
    per_layer = int(np.prod(shape[1:], dtype=object))

    def read(layer: int) -> Any:
        if len(shape) != 4 or fortran:  # one layer (batch, n, d), or layers not contiguous
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            return torch.from_numpy(np.array(array[layer] if len(shape) == 4 else array))
        with open_bounded(path, MAX_STATES_BYTES) as f:
            f.seek(data_start + layer * per_layer * dtype.itemsize)
            values = np.fromfile(f, dtype=dtype, count=per_layer)
        return torch.from_numpy(values.reshape(shape[1:]))

    return Layers(tuple(shape), torch.from_numpy(np.zeros(0, dtype=dtype)).dtype, read)


def check_activations(states: Layers, mask: Any) -> tuple[tuple[int, ...], Any]:
    """The checked shape (layers, batch, n, d) of `states` plus a boolean (batch, n) mask or
    None; clear errors, before any layer is read."""
    from rankcollapse._validation import boolean_mask

    shape = tuple(states.shape)
    if len(shape) not in (3, 4):
        raise InputError(
            f"activations have shape {shape}; expected (layers, batch, n, d) or (batch, n, d)."
        )
    empty = [
        f"{size} {what}"
        for size, what in zip(shape, _DIMS[-len(shape) :], strict=True)
        if size == 0
    ]
    if empty:
        raise InputError(
            f"activations have shape {shape}, i.e. {' and '.join(empty)}; "
            "save at least one layer, one sequence, two tokens and one feature, "
            "shape (layers, batch, n, d)."
        )
    if not states.dtype.is_floating_point:
        raise InputError(f"activations have dtype {states.dtype}; save floating-point states.")
    shape = shape if len(shape) == 4 else (1, *shape)
    if mask is not None:
        if tuple(mask.shape) != shape[1:3]:
            raise InputError(
                f"mask has shape {tuple(mask.shape)} but the activations have "
                f"{shape[1]} sequences of {shape[2]} tokens; pass a mask of shape "
                f"({shape[1]}, {shape[2]})."
            )
        mask = boolean_mask(mask)
    return shape, mask


__all__ = [
    "ACTIVATION_SUFFIXES",
    "MAX_CSV_LINE",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "STATE_KEYS",
    "Activations",
    "Layers",
    "LinkInsideError",
    "MiB",
    "UnreadableFileError",
    "check_activations",
    "check_csv",
    "checked_size",
    "is_utf8",
    "links_inside",
    "load_activations",
    "open_bounded",
    "parse_json",
    "parse_yaml",
    "read_activations",
    "read_bytes",
    "read_json",
    "read_text",
    "read_yaml",
    "refuse_links",
    "safetensors_header",
    "shown",
]
