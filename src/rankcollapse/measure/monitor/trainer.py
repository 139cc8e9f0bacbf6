"""The monitor as a Hugging Face `TrainerCallback`.

    from rankcollapse.measure.monitor import CsvLog, watch
    from rankcollapse.measure.monitor.trainer import MonitorCallback
    trainer = Trainer(model, args, train_dataset=data,
                      callbacks=[MonitorCallback(watch(model, tokenizer=tok, logs=[CsvLog(path)]))])

It measures at the start of training (step 0, or the checkpoint's step when the trainer
resumes: make its logs with `resume=True`, e.g. `CsvLog(path, resume=True)`, else a log
holding those steps is refused) and after every optimiser step the monitor's `every` divides;
on several processes the monitor measures on its rank (rank 0 by default, `watch(...,
ranks=)`), and closes its logs when training ends.
"""

from __future__ import annotations

from transformers import TrainerCallback

from rankcollapse.measure.monitor.watch import Monitor


class MonitorCallback(TrainerCallback):
    """Calls `monitor.step(state.global_step)` when training starts and after each step on
    every process (the monitor picks its rank), and `monitor.close()` when it ends."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def on_train_begin(self, args, state, control, **kwargs):
        self.monitor.step(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        self.monitor.step(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self.monitor.close()
