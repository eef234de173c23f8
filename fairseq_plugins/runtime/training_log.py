"""What ``train.sh`` shows of a fairseq-train run: every line to a log file, a few lines on the terminal.

    fairseq-train ... 2>&1 | python -m fairseq_plugins.cli.training_log --log SAVE_DIR/train.log
    fairseq-train ... 2>&1 | python -m fairseq_plugins.cli.training_log --log SAVE_DIR/train.log --echo   # everything

fairseq-train writes hydra's deprecation notices, the whole configuration, the model's printout and one line per
``--log-interval`` updates.  This reader appends all of it to the log and writes to stderr only: the model and
its size, a resumed run's starting point, one progress line per logged interval (updates done against the
budget, the losses, updates per second and an estimate of the time left; an epoch's end stands in for it when
epochs are shorter), the validations with the best value so far (one per interval, and the last), fairseq's
warnings and errors, and why and when training stopped.  With ``--echo`` every line goes to
stderr as well (``train.sh --verbose``).  fairseq's ``simple`` and ``json`` log formats are read.

The budget is read from fairseq's configuration line: ``--max-update``, ``--max-epoch`` (updates per epoch are
known from the first progress line) and ``--stop-time-hours``, against the training time fairseq's stop test
counts (``Progress.training_time``: a resumed run's earlier time included); the estimate takes the nearest.
Updates per second count wall time since this run began training, validations included, so the estimate includes
them too.  The reader ignores SIGINT, SIGTERM and the Slurm signals: it runs
until fairseq-train closes the pipe, so that what fairseq logs while it stops is kept.
"""
import json
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, TextIO


PROG = "training_log"
RECORD = re.compile(r"^\S+ \S+ \| (?P<level>[A-Z]+) \| (?P<name>[\w.]+) \| (?P<message>.*)$")
SETTINGS = {"max_update": int, "max_epoch": int, "stop_time_hours": float, "log_interval": int,
            "best_checkpoint_metric": str,
            "maximize_best_checkpoint_metric": lambda text: text == "True"}
SHOWN_LEVELS = ("WARNING", "ERROR", "CRITICAL")
# What runtime/training_time.py logs when a checkpoint is loaded: the training time fairseq goes on from.
TIME_CONTINUES = re.compile(r"training time continues from the ([\d.]+) h recorded in ")
TIME_FROM_ZERO = "training time counts from 0 in this run"


@dataclass
class Budget:
    """What ends the run (0: not set), as fairseq's configuration line gives it."""
    max_update: int = 0
    max_epoch: int = 0
    stop_time_hours: float = 0.0

    def planned_updates(self, updates_per_epoch: int) -> int:
        """The updates the budget allows once an epoch's length is known (0: no update or epoch budget)."""
        by_epoch = self.max_epoch * updates_per_epoch
        return min(filter(None, (self.max_update, by_epoch)), default=0)

    def describe(self) -> str:
        parts = [f"--max-update {self.max_update}" if self.max_update else "",
                 f"--max-epoch {self.max_epoch}" if self.max_epoch else "",
                 f"--stop-time-hours {self.stop_time_hours:g}" if self.stop_time_hours else ""]
        return ", ".join(filter(None, parts)) or "none: the run trains until it is stopped"


def read_settings(message: str) -> Dict[str, object]:
    """The settings this reader needs from fairseq's configuration dump (a Python dict's text on one line)."""
    found = {}
    for key, convert in SETTINGS.items():
        match = re.search(rf"'{key}': '?([^,'}}]+)'?", message)
        if match:
            found[key] = convert(match.group(1))
    return found


def read_stats(message: str) -> Optional[Dict[str, str]]:
    """The statistics of a ``train_inner``/``valid``/``train`` record, simple or json format: name -> text.
    The json format's ``valid_`` prefixes are dropped; the simple format's ``epoch 001: 5 / 62`` becomes
    ``epoch``, ``step`` and ``steps``."""
    message = message.strip()
    if message.startswith("{"):
        try:
            record = json.loads(message)
        except ValueError:
            return None
        return {re.sub(r"^valid_", "", key): str(value) for key, value in record.items()}
    stats = {}
    head = re.match(r"epoch (\d+):\s+(\d+) / (\d+) ", message)
    if head:
        stats.update(epoch=head.group(1), step=head.group(2), steps=head.group(3))
        message = message[head.end():]
    for part in re.split(r", | \| ", message):
        pair = re.match(r"^([\w]+)[= ](\S+)$", part.strip())
        if pair:
            stats[pair.group(1)] = pair.group(2)
    if "epoch" in stats:
        stats["epoch"] = str(int(float(stats["epoch"])))
    return stats


def clock_time(seconds: float) -> str:
    """h:mm:ss, or m:ss under an hour."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def figure(stats: Dict[str, str], name: str) -> str:
    value = stats.get(name)
    return f"{name} {value}" if value is not None else ""


@dataclass
class Progress:
    """The state of the run as its log goes by; ``line`` turns one log line into the terminal's lines."""
    clock: Callable[[], float] = time.monotonic
    budget: Budget = field(default_factory=Budget)
    metric: str = "loss"
    maximize: bool = False
    start_time: Optional[float] = None  # when this run began training
    start_update: int = 0  # the update it resumed from
    earlier_training_time: float = 0.0  # seconds of training the loaded checkpoint recorded, as fairseq counts them
    loaded_at: Optional[float] = None  # when fairseq loaded that checkpoint and restarted its training clock
    updates_per_epoch: int = 0
    model: Dict[str, str] = field(default_factory=dict)
    log_interval: int = 100  # fairseq's default
    shown_progress: Optional[int] = None  # the update of the last progress line shown
    shown_validation: Optional[int] = None
    stopping: bool = False  # fairseq said why it stops: what follows is the end of the run
    epoch: int = 0  # the epoch of the last progress record
    tuned_epochs: int = 0  # the epochs the config's budget is (its --max-epoch), to say when a run ends short of it
    config_name: str = "the config"

    def line(self, text: str) -> List[str]:
        record = RECORD.match(text.rstrip("\n"))
        if not record:
            return []
        level, name, message = record.group("level", "name", "message")
        if level in SHOWN_LEVELS:
            return [f"{level.lower()}: {name}: {message}"]
        if name in ("train_inner", "train"):  # every --log-interval updates; the end of an epoch
            return self.training_record(name, read_stats(message))
        if name == "valid":
            return self.validation_record(read_stats(message))
        return self.event(message)

    def training_record(self, name: str, stats: Optional[Dict[str, str]]) -> List[str]:
        if not stats or "num_updates" not in stats:
            return []
        if name == "train" and not self.due(self.shown_progress, stats):
            return []  # short epochs: at most one progress line per --log-interval updates
        self.shown_progress = int(float(stats["num_updates"]))
        if name == "train_inner":
            return [self.progress(stats)]
        epoch = stats.pop("epoch", "?")
        return [f"end of epoch {epoch}: {self.progress(stats)}"]

    def validation_record(self, stats: Optional[Dict[str, str]]) -> List[str]:
        if not stats or not (self.stopping or self.due(self.shown_validation, stats)):
            return []  # at most one validation line per --log-interval updates, and the last
        self.shown_validation = int(float(stats.get("num_updates", 0)))
        return [self.validation(stats)]

    def due(self, shown: Optional[int], stats: Dict[str, str]) -> bool:
        """Are --log-interval updates done since the update ``shown`` (None: nothing shown yet)?"""
        return shown is None or int(float(stats.get("num_updates", 0))) - shown >= self.log_interval

    def event(self, message: str) -> List[str]:
        """The lines of fairseq_cli.train's and the trainer's messages that matter to a user."""
        if message.startswith("{'_name'"):
            self.configure(read_settings(message))
            return [f"budget: {self.budget.describe()}"]
        for key in ("model", "criterion"):
            if message.startswith(f"{key}: "):
                self.model[key] = message[len(key) + 2:]
        params = re.match(r"num\. shared model params: ([\d,]+) \(num\. trained: ([\d,]+)\)", message)
        if params:
            return [f"model {self.model.get('model', '?')}: {params.group(1)} parameters ({params.group(2)} "
                    f"trained), criterion {self.model.get('criterion', '?')}"]
        loaded = re.match(r"Loaded checkpoint (\S+) \(epoch (\d+) @ (\d+) updates\)", message)
        if loaded:
            self.start_update = int(loaded.group(3))
            return [f"resuming from update {self.start_update} ({loaded.group(1)})"]
        self.training_clock(message)
        begins = re.match(r"begin training epoch (\d+)", message)
        if begins:
            self.epoch = int(begins.group(1))
        if self.start_time is None and (message.startswith("Start iterating") or message.startswith("begin training")):
            self.start_time = self.clock()
        if message.startswith("Stopping training due to") or message.startswith("done training in"):
            self.stopping = True
            return [message] + self.short_of_the_tuned_epochs(message)
        return []

    def short_of_the_tuned_epochs(self, message: str) -> List[str]:
        """Once, at the end: a run that trained fewer epochs than its config's budget says so."""
        if not message.startswith("done training in") or not self.epoch or self.epoch >= self.tuned_epochs:
            return []
        return [f"note: this run stopped in epoch {self.epoch}; {self.config_name} is tuned for {self.tuned_epochs} "
                f"epochs (its --max-epoch), so its model may be undertrained (this run's budget: "
                f"{self.budget.describe()})"]

    def training_clock(self, message: str) -> None:
        """Notes the training time a loaded checkpoint recorded, and when fairseq's clock went on from it."""
        continues = TIME_CONTINUES.match(message)
        if continues or message.startswith(TIME_FROM_ZERO):
            self.earlier_training_time = float(continues.group(1)) * 3600 if continues else 0.0
            self.loaded_at = self.clock()

    def training_time(self, stats: Dict[str, str]) -> Optional[float]:
        """The seconds of training fairseq's --stop-time-hours test counts (``Trainer.cumulative_training_time``:
        the time the loaded checkpoint recorded plus the time since it was loaded).  Without a loaded checkpoint's
        time, fairseq's ``wall``, which starts with the trainer as its clock does; ``wall`` cannot serve after a
        resume (0 on every line after a mid-epoch checkpoint, from 0 again after an epoch's end)."""
        if self.loaded_at is not None:
            return self.earlier_training_time + self.clock() - self.loaded_at
        return float(stats["wall"]) if "wall" in stats else None

    def configure(self, settings: Dict[str, object]) -> None:
        self.budget = Budget(max_update=settings.get("max_update", 0), max_epoch=settings.get("max_epoch", 0),
                             stop_time_hours=settings.get("stop_time_hours", 0.0))
        self.metric = settings.get("best_checkpoint_metric", "loss")
        self.log_interval = max(1, settings.get("log_interval", self.log_interval))
        self.maximize = settings.get("maximize_best_checkpoint_metric", False)

    def progress(self, stats: Dict[str, str]) -> str:
        update = int(float(stats["num_updates"]))
        if "steps" in stats:
            self.updates_per_epoch = int(stats["steps"])
        planned = self.budget.planned_updates(self.updates_per_epoch)
        done = f"update {update}/{planned} ({100 * update / planned:.0f}%)" if planned else f"update {update}"
        if "epoch" in stats:
            self.epoch = int(stats["epoch"])
            done += f", epoch {stats['epoch']}" + (f" ({stats['step']}/{stats['steps']})" if "steps" in stats else "")
        parts = [done, figure(stats, "loss"), figure(stats, "nll_loss")]
        if self.start_time is None:
            self.start_time = self.clock()
        elapsed = self.clock() - self.start_time
        if update > self.start_update and elapsed > 0:
            rate = (update - self.start_update) / elapsed
            parts.append(f"{rate:.3g} updates/s")
            left = self.seconds_left(update, stats, rate)
            parts.append(f"ETA {clock_time(left)}" if left is not None else "no budget")
        return "  ".join(filter(None, parts))

    def seconds_left(self, update: int, stats: Dict[str, str], rate: float) -> Optional[float]:
        """The nearest end of the budget at ``rate`` updates per second (None: no budget)."""
        estimates = []
        if self.budget.max_update:
            estimates.append((self.budget.max_update - update) / rate)
        if self.budget.max_epoch and self.updates_per_epoch and "epoch" in stats and "step" in stats:
            left = (self.budget.max_epoch - int(stats["epoch"])) * self.updates_per_epoch
            estimates.append((left + self.updates_per_epoch - int(stats["step"])) / rate)
        spent = self.training_time(stats) if self.budget.stop_time_hours else None
        if spent is not None:
            estimates.append(self.budget.stop_time_hours * 3600 - spent)
        return max(0.0, min(estimates)) if estimates else None

    def validation(self, stats: Dict[str, str]) -> str:
        update = stats.get("num_updates", "?")
        parts = [figure(stats, "loss"), figure(stats, "nll_loss")]
        if self.metric not in ("loss", "nll_loss"):
            parts.append(figure(stats, self.metric))
        best = stats.get(f"best_{self.metric}")
        if best is not None:
            parts.append(f"(best {self.metric} so far {best}, {'highest' if self.maximize else 'lowest'} wins)")
        return f"validation at update {update}: " + "  ".join(filter(None, parts))


def follow(source: TextIO, log: TextIO, terminal: TextIO, echo: bool = False, progress: Progress = None) -> None:
    """Copies ``source`` to ``log`` line by line (flushed, so the log is complete whenever it is read) and writes
    to ``terminal`` each line (``echo``, with the notes ``progress`` adds) or what ``progress`` makes of it."""
    progress = progress or Progress()
    for text in source:
        log.write(text)
        log.flush()
        lines = progress.line(text)
        # echo: fairseq's own lines, and the notes that are this reader's alone
        shown = [text.rstrip("\n")] + [line for line in lines if line.startswith("note: ")] if echo else \
            ["    " + line for line in lines]
        for line in shown:
            print(line, file=terminal, flush=True)


def failure_excerpt(lines: List[str], most: int = 40) -> List[str]:
    """What explains a failed run, from its part of the log: the last traceback, else its lines with an argparse
    ``error:``, else its last lines; at most ``most`` lines (the last ones)."""
    starts = [i for i, text in enumerate(lines) if text.startswith("Traceback (most recent call last)")]
    if starts:
        return lines[starts[-1]:][-most:]
    errors = [text for text in lines if re.match(r"^\S+: error: ", text)]
    return (errors or lines)[-most:]


def ignore_stop_signals() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
