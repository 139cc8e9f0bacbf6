"""Measuring networks: one room for the probe, the curves and the monitor.

- `probe(model, **options)` -> tidy DataFrame of a real model's per-layer metrics, composed of
  three typed parts: `ModelSource` (which model, how it loads), `ProbeInputs` (text windows,
  padded paragraphs, random ids from the tokenizer or the config's vocabulary, random pixels,
  a folder of images, or the caller's `tokens`) and `ProbeRequest` (`measure.request.
  resolve_probe`: variants, mask, temperature, metrics, checked before any model loads), run
  by `run_probe(model, inputs, request)` (`prepare_probe` checks, then `PreparedProbe.run`).
- `Measured` (`measure.kinds`): one interface per kind of model (Hugging Face,
  TransformerLens `HookedTransformer` and `TransformerBridge`, any module with declared
  blocks; nnsight wrappers as the model they wrap), `as_measured(model)`, `register_kind`.
- `real_curves(loaded, variants, mask, ...)` and `toy_curves(variants, mask, ...)`: Wu et
  al.'s mu curves of a real model (`load_cached(source)` keeps the last model loaded) and of
  the toy network, per variant and mode; `CURVE_METRICS`.
- `save_activations(path, states, mask)` writes the file `rankcollapse measure` reads, and
  `measure_file(path)` measures one from Python (`measure_activations` an opened one).
- `rankcollapse.measure.monitor`: `watch(model, ...)` -> a `Monitor` measuring a held-out
  batch while a model trains, its logs, and the Trainer and Lightning callbacks
  (`measure.monitor.trainer`, `measure.monitor.lightning`).

Real models are reached through `rankcollapse.hf` (adapters, loading, hooks, attention), the
toy network through `rankcollapse.nets`; every layer is measured by `rankcollapse.metrics`.
"""

from rankcollapse.measure.activations import (
    measure_activations,
    measure_file,
    save_activations,
)
from rankcollapse.measure.curves import (
    CURVE_METRICS,
    head_dim,
    load_cached,
    real_curves,
    toy_curves,
)
from rankcollapse.measure.kinds import Measured, as_measured, register_kind
from rankcollapse.measure.probe import (
    CPU,
    ModelSource,
    PreparedProbe,
    ProbeInputs,
    prepare_probe,
    probe,
    run_probe,
)
from rankcollapse.measure.request import ProbeRequest, resolve_probe

__all__ = [
    "CPU",
    "CURVE_METRICS",
    "Measured",
    "ModelSource",
    "PreparedProbe",
    "ProbeInputs",
    "ProbeRequest",
    "as_measured",
    "head_dim",
    "load_cached",
    "measure_activations",
    "measure_file",
    "prepare_probe",
    "probe",
    "real_curves",
    "register_kind",
    "resolve_probe",
    "run_probe",
    "save_activations",
    "toy_curves",
]
