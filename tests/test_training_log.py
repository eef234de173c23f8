"""train.sh's terminal: fairseq-train's log read line by line (fairseq_plugins/runtime/training_log.py), in both of
fairseq's line formats, with a clock the test moves."""
import io
import logging
import subprocess
import sys
from types import SimpleNamespace

from conftest import ROOT

from fairseq_plugins.runtime import training_time
from fairseq_plugins.runtime.training_log import (Progress, clock_time, failure_excerpt, follow, read_settings,
                                                   read_stats)

STAMP = "2026-11-27 21:43:27 | INFO | "
CONFIG = (STAMP + "fairseq_cli.train | {'_name': None, 'common': {'log_interval': 5}, 'optimization': {"
          "'max_epoch': 0, 'max_update': 30, 'stop_time_hours': 0.0, 'clip_norm': 2.0}, 'checkpoint': {"
          "'best_checkpoint_metric': 'rouge_l', 'maximize_best_checkpoint_metric': True}}\n")


def inner(update, loss=9.5, wall=0, step=None, steps=62):
    return (STAMP + f"train_inner | epoch 001:{step or update:>7} / {steps} loss={loss}, nll_loss=8.1, ppl=286.38, "
            f"num_updates={update}, lr=0.002, gnorm=0.9, train_wall=3, wall={wall}\n")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_settings_are_read_from_fairseqs_configuration_line():
    settings = read_settings(CONFIG)
    assert settings == {"max_update": 30, "max_epoch": 0, "stop_time_hours": 0.0, "log_interval": 5,
                        "best_checkpoint_metric": "rouge_l", "maximize_best_checkpoint_metric": True}


def test_simple_and_json_records_give_the_same_statistics():
    simple = read_stats("epoch 002 | valid on 'valid' subset | loss 9.382 | rouge_l 2.43 | num_updates 15 | "
                        "best_rouge_l 2.43")
    json_form = read_stats('{"epoch": 2, "valid_loss": "9.382", "valid_rouge_l": "2.43", "valid_num_updates": "15",'
                           ' "valid_best_rouge_l": "2.43"}')
    assert simple == json_form == {"epoch": "2", "loss": "9.382", "rouge_l": "2.43", "num_updates": "15",
                                   "best_rouge_l": "2.43"}
    assert read_stats("{not json") is None


def test_progress_counts_updates_per_second_since_training_began_and_estimates_the_rest():
    clock = Clock()
    progress = Progress(clock=clock)
    assert progress.line(CONFIG) == ["budget: --max-update 30"]
    progress.line(STAMP + "fairseq_cli.train | Start iterating over samples\n")
    clock.now += 10  # 5 updates in 10 s: 0.5 updates/s, 25 left
    assert progress.line(inner(5, loss=10.48)) == [
        "update 5/30 (17%), epoch 1 (5/62)  loss 10.48  nll_loss 8.1  0.5 updates/s  ETA 0:50"]
    clock.now += 30  # a validation took 20 of these: 10 updates in 40 s
    assert progress.line(inner(10)).pop().endswith("0.25 updates/s  ETA 1:20")


def test_a_resumed_run_counts_only_its_own_updates():
    clock = Clock()
    progress = Progress(clock=clock)
    progress.line(CONFIG)
    resumed = progress.line(STAMP + "fairseq.trainer | Loaded checkpoint m/checkpoint_last.pt (epoch 1 @ 20 updates)")
    assert resumed == ["resuming from update 20 (m/checkpoint_last.pt)"]
    progress.line(STAMP + "fairseq.trainer | begin training epoch 1\n")
    clock.now += 5
    assert progress.line(inner(25)).pop().endswith("1 updates/s  ETA 0:05")


def test_the_nearest_budget_wins_epochs_and_stop_time_included():
    clock = Clock()
    progress = Progress(clock=clock)
    progress.line(CONFIG.replace("'max_epoch': 0", "'max_epoch': 2").replace("'max_update': 30", "'max_update': 0")
                  .replace("'stop_time_hours': 0.0", "'stop_time_hours': 0.5"))
    assert progress.budget.describe() == "--max-epoch 2, --stop-time-hours 0.5"
    progress.line(STAMP + "fairseq_cli.train | Start iterating over samples\n")
    clock.now += 10  # 10 updates/s; 2 epochs of 62 updates: 114 left (11.4 s); stop time: 1800 - 60 s of wall
    assert progress.line(inner(100, step=10, wall=60)).pop().endswith("10 updates/s  ETA 0:11")
    progress.budget.max_epoch = 1000  # 61,989 updates left at 10.1/s: the stop time (1,740 s) comes first
    assert progress.line(inner(101, step=11, wall=60)).pop().endswith("ETA 29:00")


def test_a_budget_in_epochs_shows_its_updates_and_a_run_short_of_the_tuned_epochs_says_so():
    clock = Clock()
    epochs = CONFIG.replace("'max_epoch': 0", "'max_epoch': 10").replace("'max_update': 30", "'max_update': 0")
    progress = Progress(clock=clock, tuned_epochs=10, config_name="scitldr_small")
    assert progress.line(epochs) == ["budget: --max-epoch 10"]
    progress.line(STAMP + "fairseq_cli.train | Start iterating over samples\n")
    clock.now += 10
    assert progress.line(inner(5)).pop().startswith("update 5/620 (1%), epoch 1 (5/62)")
    overridden = Progress(clock=clock, tuned_epochs=10, config_name="scitldr_small")
    overridden.line(CONFIG)  # the command line's --max-update 30 (train.sh adds --max-epoch 0)
    overridden.line(STAMP + "fairseq.trainer | begin training epoch 1\n")  # no progress line in a short run
    assert overridden.line(STAMP + "fairseq_cli.train | done training in 31.8 seconds\n") == [
        "done training in 31.8 seconds",
        "note: this run stopped in epoch 1; scitldr_small is tuned for 10 epochs (its --max-epoch), so its model "
        "may be undertrained (this run's budget: --max-update 30)"]
    assert Progress(clock=clock).line(STAMP + "fairseq_cli.train | done training in 1 seconds\n") == [
        "done training in 1 seconds"]  # no tuned epochs given: nothing to say


def loaded_clock_message(caplog, reset_meters: bool) -> str:
    """The line runtime/training_time.py logs when a checkpoint that recorded 900 s of training is loaded."""
    trainer = SimpleNamespace(_previous_training_time=900.0, _start_time=0.0, _cumulative_training_time=None)
    with caplog.at_level(logging.INFO, logger=training_time.__name__):
        training_time.restart_clock(trainer, "m/checkpoint_last.pt", reset_meters)
    return STAMP + f"{training_time.__name__} | {caplog.records[-1].getMessage()}\n"


def test_the_stop_time_counts_the_training_time_a_resumed_run_continues_from(caplog):
    """fairseq's stop test counts the time the loaded checkpoint recorded (none for a fine-tuning start) plus the
    time since it was loaded; its ``wall`` is 0 after a mid-epoch checkpoint and from 0 again after an epoch's
    end, so it cannot serve."""
    half_hour = CONFIG.replace("'max_update': 30", "'max_update': 0").replace("'stop_time_hours': 0.0",
                                                                          "'stop_time_hours': 0.5")
    loaded = STAMP + "fairseq.trainer | Loaded checkpoint m/checkpoint_last.pt (epoch 1 @ 20 updates)\n"
    for reset_meters, earlier in ((False, 900), (True, 0)):
        clock = Clock()
        progress = Progress(clock=clock)
        progress.line(half_hour)
        progress.line(loaded)
        progress.line(loaded_clock_message(caplog, reset_meters))
        clock.now += 2  # fairseq's clock restarted at the load: 2 s before training began
        progress.line(STAMP + "fairseq.trainer | begin training epoch 1\n")
        etas = []
        for update, wall in ((25, 0), (30, 0), (35, 7)):  # wall frozen at 0, then restarted at an epoch's end
            clock.now += 10
            etas.append(progress.line(inner(update, wall=wall)).pop().split("ETA ")[1])
        assert etas == [clock_time(1800 - earlier - 2 - 10 * n) for n in (1, 2, 3)], reset_meters


def test_a_run_without_a_budget_says_so():
    clock = Clock()
    progress = Progress(clock=clock)
    progress.line(CONFIG.replace("'max_update': 30", "'max_update': 0"))
    progress.line(STAMP + "fairseq_cli.train | Start iterating over samples\n")
    clock.now += 1
    line = progress.line(inner(5)).pop()
    assert line.startswith("update 5, epoch 1 (5/62)  loss") and line.endswith("5 updates/s  no budget")


def test_validations_warnings_and_the_end_are_shown_and_the_noise_is_not():
    progress = Progress()
    progress.line(CONFIG)
    noise = ["/venv/hydra/experimental/initialize.py:43: UserWarning: hydra.experimental.initialize() ...\n",
             "  deprecation_warning(message=message)\n", STAMP + "fairseq_cli.train | PGNLSTMModel(\n",
             STAMP + "fairseq.tasks.fairseq_task | can_reuse_epoch_itr = True\n", "Traceback? no: a plain line\n"]
    assert [progress.line(text) for text in noise] == [[]] * len(noise)
    valid = (STAMP + "valid | epoch 001 | valid on 'valid' subset | loss 9.216 | nll_loss 7.909 | rouge_l 4.77 | "
             "num_updates 30 | best_rouge_l 4.77\n")
    assert progress.line(valid) == ["validation at update 30: loss 9.216  nll_loss 7.909  rouge_l 4.77  "
                                    "(best rouge_l so far 4.77, highest wins)"]
    warning = "2026-11-27 21:43:27 | WARNING | fairseq.trainer | NaN or Inf found in input tensor.\n"
    assert progress.line(warning) == ["warning: fairseq.trainer: NaN or Inf found in input tensor."]
    end = [STAMP + "fairseq_cli.train | Stopping training due to num_updates: 30 >= max_update: 30\n",
           STAMP + "fairseq_cli.train | done training in 31.8 seconds\n"]
    assert [progress.line(text) for text in end] == [["Stopping training due to num_updates: 30 >= max_update: 30"],
                                                     ["done training in 31.8 seconds"]]
    epoch = STAMP + "train | epoch 001 | loss 9.661 | nll_loss 8.308 | num_updates 30 | lr 0.002 | wall 32\n"
    assert progress.line(epoch).pop().startswith("end of epoch 1: update 30/30 (100%)  loss 9.661")


def test_every_line_reaches_the_log_and_echo_shows_them_all():
    lines = [CONFIG, "some hydra notice\n", inner(5)]
    log, terminal = io.StringIO(), io.StringIO()
    follow(io.StringIO("".join(lines)), log, terminal)
    assert log.getvalue() == "".join(lines)
    assert terminal.getvalue().splitlines()[0] == "    budget: --max-update 30"
    assert "hydra" not in terminal.getvalue()
    log, terminal = io.StringIO(), io.StringIO()
    follow(io.StringIO("".join(lines)), log, terminal, echo=True)
    assert log.getvalue() == terminal.getvalue() == "".join(lines)


def test_a_failure_shows_its_last_traceback_or_its_errors_or_its_end():
    traceback = ["Traceback (most recent call last):", '  File "x.py", line 1', "RuntimeError: first",
                 "Traceback (most recent call last):", '  File "y.py", line 2', "ValueError: second"]
    assert failure_excerpt(["noise"] + traceback) == traceback[3:]
    usage = ["usage: fairseq-train [-h]", "   [--arch ARCH]", "fairseq-train: error: argument --arch/-a: bad"]
    assert failure_excerpt(usage) == usage[-1:]
    assert failure_excerpt([str(n) for n in range(100)]) == [str(n) for n in range(60, 100)]


def test_a_log_that_cannot_be_written_is_a_clear_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "fairseq_plugins.cli.training_log", "--log",
                             str(tmp_path / "missing" / "train.log")], cwd=ROOT, input="", capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert result.stderr.startswith(f"training_log: error: cannot write the log {tmp_path}/missing/train.log")


def test_short_epochs_and_frequent_validations_show_one_line_per_log_interval():
    """Epochs of 2 updates, each validated, with --log-interval 5: an epoch's end and a validation every 5
    updates or more, and the last validation."""
    progress = Progress()
    progress.line(CONFIG)
    progress.line(STAMP + "fairseq_cli.train | Start iterating over samples\n")
    shown = []
    values = {2: 2.0, 4: 3.0, 6: 2.5, 8: 2.4, 10: 2.2, 12: 2.1}  # rouge_l (the highest wins)
    for update, value in values.items():
        epoch = STAMP + f"train | epoch {update // 2:03d} | loss 9.1 | num_updates {update} | wall 3\n"
        shown += [line.split(":")[0] for line in progress.line(epoch)]
        best = max(v for u, v in values.items() if u <= update)
        valid = (STAMP + f"valid | epoch {update // 2:03d} | valid on 'valid' subset | loss 9 | rouge_l {value} | "
                 f"num_updates {update} | best_rouge_l {best}\n")
        shown += [line.split(":")[0] for line in progress.line(valid)]
    assert shown == ["end of epoch 1", "validation at update 2", "end of epoch 4", "validation at update 8"]
    progress.line(STAMP + "fairseq_cli.train | Stopping training due to num_updates: 12 >= max_update: 12\n")
    last = STAMP + "valid | epoch 006 | valid on 'valid' subset | rouge_l 2.1 | num_updates 12 | best_rouge_l 3\n"
    assert progress.line(last)[0].startswith("validation at update 12")
