"""Probe a real model: per-layer metrics of its residual stream, for several variants, as a
tidy DataFrame. The Python twin of `rankcollapse probe`.

A probe is three small typed parts, each built and checked once where the values enter (the
command line, a config, a Python call), before any model loads, then composed by `run_probe`:

- `ModelSource`: which model and how it loads (name, directory or model in memory; init,
  seed, device, dtype, depth of a random init) -> a `LoadedModel`, or a model in memory as
  its kind (`measure.kinds.as_measured`);
- `ProbeInputs`: what goes in (text windows, padded paragraphs, random token ids, images, or
  the caller's token ids; sizes and seed) -> token ids and the token mask;
- `ProbeRequest` (`measure.request`): what is measured (variants, attention mask, temperature,
  mode, metrics), from names by `resolve_probe`.

`probe(model, **options)` builds the three from plain values and runs them: `prepare_probe`
checks the model and builds the batch, `PreparedProbe.run` measures it
(`measure.layers.measure_batch`). Metrics stream:
each layer's states are copied as soon as the block has run, measured a few layers at a time
(float64, with the dtype-floor flag of the model's dtype; `measure.layers.LayerMeasure`) and
dropped unless `keep_states=True`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.devices import parse_device, resolve_device, resolve_dtype
from rankcollapse.errors import ConfigError, InputError, option
from rankcollapse.hf import (
    Init,
    LoadedModel,
    load_paragraphs,
    load_resolved,
    load_windows,
    random_token_ids,
)
from rankcollapse.masks import MaskSpec
from rankcollapse.measure.kinds import Measured, as_measured, is_in_memory
from rankcollapse.measure.layers import (
    Batch,
    Progress,
    check_model,
    measure_batch,
    prepare_batch,
)
from rankcollapse.measure.request import ProbeRequest, resolve_probe
from rankcollapse.sizes import check_memory, check_size
from rankcollapse.variants import Variant

__all__ = [
    "CPU",
    "ModelSource",
    "PreparedProbe",
    "ProbeInputs",
    "ProbeRequest",
    "prepare_probe",
    "probe",
    "resolve_probe",
    "run_probe",
]

CPU = torch.device("cpu")

ID_COLUMNS = ["model", "init", "variant", "mask", "temperature", "mode", "layer", "layer_kind"]


@dataclass(frozen=True)
class ModelSource:
    """Which model a probe measures and how it loads: a name of `MODELS`, a local model
    directory, a `LoadedModel`, or a Hugging Face model in memory (then `tokenizer` is its
    tokenizer and the loading options are ignored). Hashable when `model` is a name, so a
    loader can cache by it."""

    model: str | Path | LoadedModel | nn.Module
    init: Init = "pretrained"
    seed: int = 0
    device: torch.device = CPU
    """Resolved by the caller (`resolve_device`: the command line, `probe`; an experiment's
    config): `load` does not check it again."""
    dtype: torch.dtype = torch.float32
    n_layers: int | None = None
    """Depth of a random init (None: the model's own)."""
    tokenizer: Any = None
    """A tokenizer directory replacing a named model's own, or the tokenizer of a model in
    memory."""

    def load(self) -> LoadedModel | Measured:
        """A model given by name or directory loaded (a `LoadedModel`), one in memory as the
        kind that measures it (`as_measured`: checked that it can run)."""
        if is_in_memory(self.model):
            return as_measured(self.model, tokenizer=self.tokenizer)
        return load_resolved(
            str(self.model),  # a name or a directory: the loaded model's name is text
            init=self.init,
            seed=self.seed,
            device=self.device,
            dtype=self.dtype,
            n_layers=self.n_layers,
            tokenizer=self.tokenizer if isinstance(self.tokenizer, (str, Path)) else None,
        )


@dataclass(frozen=True)
class ProbeInputs:
    """What a probe feeds the model: text windows of exactly `n_tokens` real tokens (from
    `text`: None = the sample corpus, a Path to a file, or the text itself), one padded
    paragraph per sample (`padded`), random token ids (`random_tokens`), images (`images`:
    a folder, for vision models; random pixels without one), or the caller's own token ids
    (`tokens`, (b, n), with `token_mask`: True for real tokens; then `n_samples` and
    `n_tokens` are its shape). `seed` picks windows and random tokens."""

    text: str | Path | None = None
    random_tokens: bool = False
    padded: bool = False
    images: str | Path | None = None
    n_samples: int = 32
    n_tokens: int = 128
    seed: int = 0
    tokens: Tensor | None = field(default=None, compare=False)
    token_mask: Tensor | None = field(default=None, compare=False)
    tokens_name: str = field(default="tokens", compare=False)
    """The caller's name of `tokens` in its errors (`watch` calls them `inputs`)."""

    def __post_init__(self) -> None:
        """Each size within its bound (`rankcollapse.sizes`) and the token ids within this
        machine's memory, checked before anything is allocated; else a ConfigError naming the
        size, its bound and the memory it would need. Given `tokens`, they and their mask are
        checked (`checked_tokens`) and give the sizes."""
        if self.tokens is not None or self.token_mask is not None:
            tokens, mask = checked_tokens(self.tokens, self.token_mask, self.tokens_name)
            others = {
                "text": self.text,
                "random_tokens": self.random_tokens,
                "padded": self.padded,
                "images": self.images,
            }
            given = [name for name, value in others.items() if value not in (None, False)]
            if given:
                raise ConfigError(
                    f"{self.tokens_name}= are the inputs themselves; drop {', '.join(given)}."
                )
            for name, value in [
                ("tokens", tokens),
                ("token_mask", mask),
                ("n_samples", tokens.shape[0]),
                ("n_tokens", tokens.shape[1]),
            ]:
                object.__setattr__(self, name, value)
        ids = {"n_samples": self.n_samples, "n_tokens": self.n_tokens}
        sized = all(type(v) is int and v > 0 for v in ids.values())
        needed = 8 * self.n_samples * self.n_tokens if sized else None  # int64 token ids
        for name, value in ids.items():
            check_size(name, value, needs=needed)
        if needed is not None:  # else check_size refused a size
            check_memory("probe inputs", needed, ids, "lower n_samples or n_tokens")

    def check_fits(self, request: ProbeRequest) -> None:
        """A mask whose parameters do not fit the token count fails here, before loading (the
        mask built here is the one the probe injects)."""
        if not self.padded:
            request.mask_for(self.n_tokens)

    def build(self, model: LoadedModel | Measured | Any) -> tuple[Tensor, Tensor]:
        """(input ids or pixels, boolean token mask (b, n)) for this model (`as_measured`): the
        caller's tokens, text windows, padded paragraphs, random token ids (from the tokenizer,
        or the config's vocabulary when there is none), random pixels, or up to `n_samples`
        images of a folder; token ids checked to be below the model's embedding size."""
        measured = as_measured(model)
        if measured.takes_pixels:
            if self.tokens is not None:
                raise InputError(
                    f"'{measured.name}' takes pixels, not token ids: drop {self.tokens_name}=."
                )
            return measured.pixels(
                text=self.text,
                padded=self.padded,
                images=self.images,
                n_samples=self.n_samples,
                seed=self.seed,
            )
        if self.images is not None:
            raise InputError(
                f"model '{measured.name}' takes text, not images; drop "
                f"{option('images', 'DIR')}, or pass a vision model (vit)."
            )
        if self.tokens is not None and self.token_mask is not None:  # both, or neither
            ids, mask = self.tokens, self.token_mask
        elif self.random_tokens:
            vocabulary = measured.vocabulary  # no tokenizer is loaded for random ids
            _check_vocabulary(measured, vocabulary.size)
            ids, mask = random_token_ids(
                vocabulary.size,
                vocabulary.special,
                n_samples=self.n_samples,
                n_tokens=self.n_tokens,
                seed=self.seed,
            )
        else:
            ids, mask = self._text(measured)
        size = measured.embedding_size
        if size is not None and int(ids.max()) >= size:
            source = (
                f"the tokenizer of '{measured.name}' gives"
                if self.tokens is None
                else (f"{self.tokens_name} holds")
            )
            raise InputError(
                f"{source} token ids from {int(ids.min())} to {int(ids.max())} but "
                f"'{measured.name}' has a vocabulary of {size} (its embedding's rows, ids 0 to "
                f"{size - 1}); pass ids of the model's own tokenizer "
                f"({option('tokenizer', 'DIR')}) or {option('random_tokens')}."
            )
        return ids, mask

    def _text(self, measured: Measured) -> tuple[Tensor, Tensor]:
        """Padded paragraphs or text windows, from the model's tokenizer."""
        if not measured.has_tokenizer:
            raise _no_tokenizer(measured)
        if self.padded:
            return load_paragraphs(
                measured.tokenizer,
                text=self.text,
                n_samples=self.n_samples,
                max_tokens=self.n_tokens,
            )
        return load_windows(
            measured.tokenizer,
            text=self.text,
            n_samples=self.n_samples,
            n_tokens=self.n_tokens,
            seed=self.seed,
        )


def _check_vocabulary(measured: Measured, size: int) -> None:
    """Random ids drawn from a tokenizer larger than the model's embedding would overflow it."""
    rows = measured.embedding_size
    if measured.has_tokenizer and rows is not None and size > rows:
        raise InputError(
            f"the tokenizer of '{measured.name}' has {size} ids but the model's embedding has "
            f"{rows} rows, so random ids from it would overflow the embedding; pass the model's "
            f"own tokenizer, or none ({option('random_tokens')} then draws from the config's "
            f"vocabulary of {rows})."
        )


def checked_tokens(tokens: Any, token_mask: Any, name: str = "tokens") -> tuple[Tensor, Tensor]:
    """A caller's token ids (a (b, n) tensor of whole numbers >= 0, b >= 1, n >= 2, on the CPU)
    and their boolean mask (None: all real; every row at least 2 real tokens), or a clear
    error naming the argument (`name`)."""
    if not isinstance(tokens, Tensor) or tokens.ndim != 2 or min(tokens.shape) < 1:
        what = f"shape {tuple(tokens.shape)}" if isinstance(tokens, Tensor) else type(tokens)
        raise InputError(
            f"{name} must be token ids, a torch.Tensor of shape (b, n), got {what}; e.g. "
            "tokenizer(texts, return_tensors='pt')['input_ids']."
        )
    if tokens.dtype == torch.bool or tokens.is_floating_point() or tokens.is_complex():
        raise InputError(
            f"{name} holds {tokens.dtype} values, not token ids; pass whole numbers "
            f"(torch.long), e.g. {name}.long() if they are ids."
        )
    if int(tokens.min()) < 0:
        raise InputError(
            f"{name} holds token ids from {int(tokens.min())}; ids are whole numbers >= 0."
        )
    if token_mask is None:
        token_mask = torch.ones(tokens.shape, dtype=torch.bool)
    if (
        not isinstance(token_mask, Tensor)
        or token_mask.shape != tokens.shape
        or token_mask.dtype != torch.bool
    ):
        shape = tuple(token_mask.shape) if isinstance(token_mask, Tensor) else None
        raise InputError(
            f"token_mask has shape {shape} and dtype {getattr(token_mask, 'dtype', None)} but "
            f"{name} have shape {tuple(tokens.shape)}; pass a boolean mask of shape "
            f"{tuple(tokens.shape)} (True for real tokens) or none."
        )
    if int(token_mask.sum(dim=1).min()) < 2:
        raise InputError(
            f"token_mask leaves a sequence with fewer than 2 real tokens; every sequence of "
            f"{name} needs at least 2 (a metric compares tokens)."
        )
    return tokens.detach().long().cpu(), token_mask.detach().cpu()


def _no_tokenizer(measured: Measured) -> InputError:
    """Text asked of a model without a tokenizer: the fix in the caller's words."""
    vocabulary = f"random ids from the config's vocabulary of {measured.embedding_size}"
    if measured.init == "in-memory":
        return InputError(
            f"model '{measured.name}' is in memory without a tokenizer, so text cannot be "
            f"tokenized. Pass {option('random_tokens')} ({vocabulary}), its tokenizer "
            f"({option('tokenizer', 'tokenizer')}) or the token ids (tokens=ids)."
        )
    return InputError(
        f"model '{measured.name}' has no tokenizer (its directory holds no tokenizer files), so "
        f"text cannot be tokenized. Pass {option('random_tokens')} ({vocabulary}) or a "
        f"tokenizer directory ({option('tokenizer', 'DIR')})."
    )


def probe(
    model: str | Path | LoadedModel | nn.Module | Any,
    *,
    tokenizer: Any = None,
    init: Init = "pretrained",
    variants: str | Sequence[str | Variant] = ("transformer",),
    mask: str | MaskSpec | Tensor | None = None,
    temperature: float = 1.0,
    train_mode: bool = False,
    text: str | Path | None = None,
    random_tokens: bool = False,
    padded: bool = False,
    images: str | Path | None = None,
    tokens: Tensor | None = None,
    token_mask: Tensor | None = None,
    n_samples: int = 32,
    n_tokens: int = 128,
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    keep_states: bool = False,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
) -> pd.DataFrame:
    """Per-layer metrics of a model's residual stream, a row per (variant, layer, sample, metric).

    Args:
        model: a name of `MODELS`, a local model directory, or a model in memory (a Hugging
            Face model, a TransformerLens `HookedTransformer` or `TransformerBridge`, an nnsight
            wrapper of one; used as it is, not copied, hooks and modes put back).
        tokenizer, init: a model in memory's tokenizer (None: its own, if any); "pretrained" or
            "random" for a model given by name.
        variants: names of `VARIANTS` ("san", "san+mlp", "san+skip", "transformer", "wu:..."),
            as a list or "a,b", or resolved `Variant`s (see `resolve_probe`).
        mask: None (the model's own pattern), a spec of `rankcollapse.masks.mask_from_spec`
            ("causal", "window:1", ...) or its `MaskSpec`, or a boolean (n, n) tensor.
        temperature, train_mode: softmax temperature (logits / T, > 0); dropout on.
        text, random_tokens: None (the sample corpus), a text file's Path or the text itself;
            random token ids instead of text.
        padded: one paragraph per sample, truncated to `n_tokens`, right-padded (pads never
            enter attention as keys nor metrics).
        images: a folder of PNG or JPEG files for a vision model (ViT; up to `n_samples` in
            file-name order, see `load_images`). None: random pixels.
        tokens, token_mask: the ids to measure, (b, n) integers (its shape replaces
            `n_samples`, `n_tokens`), and True for real tokens (None: all real).
        n_samples, n_tokens: windows of exactly `n_tokens` real tokens.
        metrics: names of `METRICS` (default `DEFAULT_METRICS`; attention ones: head means).
        seed: seed of a random init, the windows and random tokens.
        batch_size: samples per forward pass (default: about 1024 tokens per pass on the CPU);
            rows and values do not depend on it.
        keep_states: also keep every layer's states in `frame.attrs["states"][variant][layer]`.
        device, dtype: where and in which dtype a model given by name runs ("auto", "cpu",
            "cuda"; "float32", "bfloat16"); metrics are float64.

    Example:
        >>> from transformers import BertConfig, BertModel
        >>> cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        ...                  intermediate_size=64, vocab_size=50)
        >>> model = BertModel(cfg).eval()
        >>> df = probe(model, random_tokens=True, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
        >>> sorted(df.layer.unique().tolist()), model.config._attn_implementation
        ([0, 1, 2], 'sdpa')
        >>> ids = torch.randint(50, (2, 6), generator=torch.Generator().manual_seed(0))
        >>> probe(model, tokens=ids, metrics=["res_comp_rel"]).shape[0]
        6

    Returns:
        Tidy DataFrame: model, init, variant, mask, temperature, mode, layer, layer_kind ("embedding"
        for layer 0, "block" after; no final norm), sample, metric, value, at_floor, quantized.
    """
    request = resolve_probe(variants, mask, metrics, temperature=temperature, train_mode=train_mode,
                            batch_size=batch_size, keep_states=keep_states)  # fmt: skip
    given = (text, random_tokens, padded, images, n_samples, n_tokens, seed, tokens, token_mask)
    inputs = ProbeInputs(*given)
    inputs.check_fits(request)
    # a model loaded by name needs its device visible (a model in memory stays where it is)
    where = parse_device(device) if is_in_memory(model) else resolve_device(device)
    source = ModelSource(model, init, seed, where, resolve_dtype(dtype), tokenizer=tokenizer)
    return run_probe(source.load(), inputs, request)


@dataclass(frozen=True)
class PreparedProbe:
    """A probe checked against its model and its batch built: `run()` measures it."""

    measured: Measured
    batch: Batch
    inputs: ProbeInputs
    request: ProbeRequest

    def run(self, progress: Progress | None = None) -> pd.DataFrame:
        """One row per (variant, layer, sample, metric); the columns of `probe`; `progress` is
        called per layer group and per forward pass (`measure.layers.Progress`)."""
        measured, request = self.measured, self.request
        ids = {
            "model": measured.name,
            "init": measured.init,
            "mask": self.batch.mask_label,
            "temperature": request.temperature,
            "mode": "train" if request.train_mode else "eval",
        }
        kept: dict[str, list[list[Tensor]]] | None = {} if request.keep_states else None
        frame = pd.concat(
            measure_batch(measured, self.batch, request, ids, kept, progress), ignore_index=True
        )
        frame["layer_kind"] = np.where(frame["layer"] == 0, "embedding", "block")
        frame["quantized"] = measured.info.get("quantized", "no")
        first = [c for c in ID_COLUMNS if c in frame.columns]
        frame = frame[first + [c for c in frame.columns if c not in first]]
        if kept is not None:
            frame.attrs["states"] = {
                name: [torch.cat(chunks) for chunks in layers] for name, layers in kept.items()
            }
        return frame


def prepare_probe(
    model: LoadedModel | Measured | Any, inputs: ProbeInputs, request: ProbeRequest
) -> PreparedProbe:
    """`request` checked against the model (`as_measured`: a model that can run; its variants,
    context, mask and temperature) and the inputs built for it, before any forward pass."""
    measured = as_measured(model)
    check_model(measured, request, inputs.n_tokens)
    batch = prepare_batch(measured, request, *inputs.build(measured))
    return PreparedProbe(measured, batch, inputs, request)


def run_probe(
    model: LoadedModel | Measured | Any,
    inputs: ProbeInputs,
    request: ProbeRequest,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """The probe of a loaded model: `request` measured on `inputs`, one row per (variant,
    layer, sample, metric); the columns of `probe`; `progress` as `PreparedProbe.run`."""
    return prepare_probe(model, inputs, request).run(progress)
