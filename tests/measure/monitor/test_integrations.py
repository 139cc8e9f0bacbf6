"""Each integration trains a tiny model a few steps and records the expected rows: the plain
`monitor.step(step)` (through the project's own training loop), the Hugging Face Trainer
callback and the PyTorch Lightning callback (where the `lightning` extra is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from rankcollapse.measure.monitor import MemoryLog, watch
from rankcollapse.nets import SAN, NetConfig, SANConfig, ToyNet, random_tokens
from rankcollapse.train import TrainConfig, train


def _check_rows(frame, steps, rows_per_step):
    counts = frame.groupby("step").size()
    assert counts.index.tolist() == steps
    assert (counts == rows_per_step).all()
    first, last = (frame[frame.step == s].set_index(["layer", "sample", "metric"]).value
                   for s in (steps[0], steps[-1]))  # fmt: skip
    assert not first.equals(last), "training changed the weights, so the numbers must move"


def test_the_project_training_loop_logs_through_the_monitor_with_one_switch():
    config = SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=6, n_layers=2,
                       d_model=8)  # fmt: skip
    model = SAN(config)
    ids = torch.randint(10, (16, 6), generator=torch.Generator().manual_seed(0))
    log = MemoryLog()
    monitor = watch(model, blocks="body.blocks", inputs=ids[:3], every=2, metrics=["mu_rel"],
                    logs=[log])  # fmt: skip
    losses = train(model, ids, ids, TrainConfig(steps=5, batch_size=4, lr=0.05), monitor=monitor)
    assert len(losses) == 5
    _check_rows(log.frame, [0, 2, 4], rows_per_step=3 * 3)


@pytest.mark.slow
def test_hugging_face_trainer_callback_records_the_expected_steps(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from rankcollapse.measure.monitor.trainer import MonitorCallback

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64,
                                       n_positions=16))  # fmt: skip
    ids = torch.randint(3, 64, (16, 12), generator=torch.Generator().manual_seed(1))
    data = [{"input_ids": row, "labels": row} for row in ids]
    log = MemoryLog()
    monitor = watch(model, random_tokens=True, n_samples=2, n_tokens=8, every=2,
                    metrics=["res_comp_rel", "mu_rel"], logs=[log])  # fmt: skip
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=4,
                             learning_rate=1e-2, save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, logging_strategy="no")  # fmt: skip
    Trainer(
        model=model, args=args, train_dataset=data, callbacks=[MonitorCallback(monitor)]
    ).train()
    _check_rows(log.frame, [0, 2, 4, 6], rows_per_step=3 * 2 * 2)


@pytest.mark.slow
def test_lightning_callback_records_the_expected_steps():
    pl = pytest.importorskip("lightning.pytorch", reason="the lightning extra is not installed")
    from rankcollapse.measure.monitor.lightning import MonitorCallback

    class Regression(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", dtype="float32"))

        def training_step(self, batch, batch_idx):
            return nn.functional.mse_loss(self.net(batch).output, batch.flip(-2))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.05)

    module = Regression()
    x = random_tokens(16, 5, 8, seed=0, dtype=torch.float32)
    log = MemoryLog()
    monitor = watch(module.net, blocks="blocks", inputs=x[:2], every=2, metrics=["mu_rel"],
                    logs=[log])  # fmt: skip
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[MonitorCallback(monitor)])  # fmt: skip
    trainer.fit(module, torch.utils.data.DataLoader(x, batch_size=4))
    _check_rows(log.frame, [0, 2, 4], rows_per_step=3 * 2)


@pytest.mark.slow
def test_the_monitor_imports_without_the_optional_extras():
    code = (
        "import sys, rankcollapse.measure.monitor, rankcollapse.lens, rankcollapse.tracking\n"
        "optional = ('lightning', 'tensorboard', 'transformer_lens', 'nnsight', 'wandb', 'mlflow')\n"
        "extras = [m for m in sys.modules if m.split('.')[0] in optional]\n"
        "assert not extras, extras\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
