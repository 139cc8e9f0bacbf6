"""The monitor as a PyTorch Lightning `Callback` (needs the `lightning` extra).

    from rankcollapse.measure.monitor import CsvLog, watch
    from rankcollapse.measure.monitor.lightning import MonitorCallback
    monitor = watch(module.net, blocks="blocks", inputs=held_out, logs=[CsvLog("collapse.csv")])
    L.Trainer(callbacks=[MonitorCallback(monitor)]).fit(module, loader)

It measures when training starts (step 0, or the checkpoint's step when the trainer resumes:
make its logs with `resume=True`, else a log holding those steps is refused) and after every optimiser step the monitor's `every` divides; on several processes the monitor
measures on its rank (rank 0 by default, `watch(..., ranks=)`); its logs close when training
ends.
"""

from __future__ import annotations

from rankcollapse.errors import missing_extra

try:
    from lightning.pytorch import Callback
except ImportError:
    hint = "call monitor.step(step) from the training loop"
    raise ImportError(
        str(missing_extra("rankcollapse.measure.monitor.lightning", "lightning", hint))
    ) from None

from rankcollapse.measure.monitor.watch import Monitor


class MonitorCallback(Callback):
    """Calls `monitor.step(trainer.global_step)` when training starts and after each batch."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.last = None

    def on_train_start(self, trainer, pl_module) -> None:
        self._step(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._step(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        self.monitor.close()

    def _step(self, trainer) -> None:
        # with gradient accumulation several batches end at one optimiser step: measure once
        if trainer.global_step != self.last:
            self.last = trainer.global_step
            self.monitor.step(trainer.global_step)
