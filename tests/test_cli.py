"""The commands behave like Unix tools: --help and --version, '-' for stdout, one spelling of the
output options (the old ones as aliases), one exit-code scheme (0 success, 1 runtime failure, 2 usage or bad
input), detokenized English for users and tokens for ROUGE, copied words spelled as the source spells them, and
quiet shell scripts (fairseq's noise in a log file)."""
import importlib
import importlib.util
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from conftest import ROOT, command_env, run, slice_corpus

sys.path.insert(0, str(ROOT))
from fairseq_plugins.cli import analyze, attention_stats, average_checkpoints, convert, files2rouge  # noqa: E402
from fairseq_plugins.cli import prepare, restore, rl_stats, rouge, rouge_significance, visualize_attention  # noqa: E402
from fairseq_plugins.text.tokenization import Tokenizer, display_text  # noqa: E402

VERSION = re.compile(r"^\S+ \(fairseq-summarization-plugins \d+\.\d+\.\d+\)$")
TRAIN_SRC = ["the town of Smallville has a mayor .", "a mayor of the press met the town ."]
TRAIN_TGT = ["the town has a mayor .", "the mayor met the press ."]


def write(path, rows):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(row + "\n" for row in rows), encoding="utf-8")


def main_status(module, argv, capsys):
    """(exit status, stdout, stderr) of a command's main() run in-process; argparse's exits included."""
    capsys.readouterr()
    try:
        status = module.main([str(arg) for arg in argv])
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def prepared(tmp_path, capsys, *options):
    """summ-prepare on a two-document corpus whose only capitalised word, Smallville, stays out of the vocabulary."""
    write(tmp_path / "raw" / "train.src", TRAIN_SRC)
    write(tmp_path / "raw" / "train.tgt", TRAIN_TGT)
    status, _, err = main_status(prepare, ["--raw-dir", tmp_path / "raw", "--output-dir", tmp_path / "out",
                                           "--splits", "train", "--min-count", "2", *options], capsys)
    assert status == 0, err
    return tmp_path / "out"


def generated(path, hypotheses):
    write(path, [f"H-{i}\t-0.5\t{hypothesis}" for i, hypothesis in enumerate(hypotheses)])
    return path


TOOLS = [average_checkpoints, rouge_significance, visualize_attention, attention_stats]


@pytest.mark.parametrize("module", [convert, prepare, restore, rouge, files2rouge, analyze, rl_stats, *TOOLS])
def test_version_everywhere(module, capsys):
    status, out, _ = main_status(module, ["--version"], capsys)
    assert status == 0 and VERSION.match(out.strip()), out


def project_scripts():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def call_entry_point(target, argv, capsys):
    """(exit status, stdout, stderr) of a ``module:function`` entry point called with ``argv``."""
    module_name, function = target.split(":")
    main = getattr(importlib.import_module(module_name), function)
    try:
        status = main(argv)
    except SystemExit as err:
        status = err.code
    captured = capsys.readouterr()
    return status or 0, captured.out, captured.err


@pytest.mark.parametrize("name", sorted(project_scripts()))
def test_every_command_takes_version_and_shows_plain_help(name, capsys):
    """Every [project.scripts] entry: --version exits 0 with the version line; --help is plain text (no reST
    backquotes or roles)."""
    target = project_scripts()[name]
    status, out, _ = call_entry_point(target, ["--version"], capsys)
    assert status == 0 and VERSION.match(out.strip()), (name, out)
    status, out, _ = call_entry_point(target, ["--help"], capsys)
    assert status == 0 and out.startswith("usage:"), (name, out[:200])
    assert "``" not in out and not re.search(r":(func|class|meth|mod|attr):", out), (name, out)
    assert not re.search(r"`[^`\s]+`", out), (name, re.findall(r"`[^`\s]+`", out)[:3])


def test_the_moved_scripts_are_installed_commands_and_their_old_paths_shims():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for module in TOOLS:
        name = module.__name__.rsplit(".", 1)[1]
        assert scripts[f"summ-{name.replace('_', '-')}"] == f"{module.__name__}:main"
        spec = importlib.util.spec_from_file_location(f"old_{name}", ROOT / "scripts" / f"{name}.py")
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)  # the old path: the same names, the same command
        public = [key for key in vars(module) if not key.startswith("_")]
        assert all(getattr(old, key) is getattr(module, key) for key in public) and old.main is module.main
        if name == "rouge_significance":  # and the library's names, which the experiment scripts import from there
            from fairseq_plugins.scoring import significance
            assert old.paired_bootstrap is significance.paired_bootstrap
    assert scripts["summ-files2rouge"] == scripts["files2rouge"]  # a name that shadows no other tool


def test_rl_stats_names_a_missing_checkpoint_and_wants_one(tmp_path, capsys):
    status, _, err = main_status(rl_stats, [tmp_path / "none.pt", "--data", tmp_path], capsys)
    assert status == 2 and f"{tmp_path / 'none.pt'}: no such checkpoint" in err
    status, _, err = main_status(rl_stats, ["--data", tmp_path], capsys)
    assert status == 2 and "CHECKPOINT" in err  # argparse: at least one checkpoint


def checkpoint(path, updates, config, **tensors):
    torch.save({"model": tensors, "cfg": config, "optimizer_history": [{"num_updates": updates}],
                "last_optimizer_state": {"step": updates}}, path)
    return path


def test_average_refuses_tensors_of_different_shapes(tmp_path, capsys):
    a = checkpoint(tmp_path / "a.pt", 5, "A", w=torch.ones(512))
    b = checkpoint(tmp_path / "b.pt", 6, "B", w=torch.ones(1))  # broadcastable: it must not be averaged anyway
    status, _, err = main_status(average_checkpoints, ["--inputs", a, b, "--output", tmp_path / "avg.pt"], capsys)
    assert status == 2 and "w has shape (1,)" in err and "(512,)" in err
    assert not (tmp_path / "avg.pt").exists()


def test_average_keeps_the_config_of_the_input_with_the_most_updates(tmp_path, capsys):
    paths = [checkpoint(tmp_path / "b.pt", 20, "B", w=torch.full((2,), 2.0)),
             checkpoint(tmp_path / "a.pt", 10, "A", w=torch.full((2,), 1.0)),
             checkpoint(tmp_path / "c.pt", 15, "C", w=torch.full((2,), 6.0))]
    status, _, err = main_status(average_checkpoints, ["--inputs", *paths, "-o", tmp_path / "avg.pt"], capsys)
    assert status == 0, err
    averaged = torch.load(tmp_path / "avg.pt", weights_only=True)
    assert averaged["cfg"] == "B" and averaged["optimizer_history"][-1]["num_updates"] == 20  # not the last, C
    assert torch.equal(averaged["model"]["w"], torch.full((2,), 3.0)) and "last_optimizer_state" not in averaged


@pytest.mark.parametrize("resamples", ["0", "-5"])
def test_rouge_significance_resamples_below_one_is_a_usage_error(tmp_path, capsys, resamples):
    status, _, err = main_status(rouge_significance, ["a.tsv", "b.tsv", "--resamples", resamples], capsys)
    assert status == 2 and "--resamples: must be at least 1" in err


def test_rouge_significance_missing_table_is_bad_input(tmp_path, capsys):
    status, _, err = main_status(rouge_significance, [tmp_path / "a.tsv", tmp_path / "b.tsv"], capsys)
    assert status == 2 and f"{tmp_path / 'a.tsv'}: no such file" in err


def test_restore_dash_is_stdout_and_old_spelling_still_works(tmp_path, capsys, monkeypatch):
    out = prepared(tmp_path, capsys, "--unit", "word")
    gen = generated(tmp_path / "gen.txt", ["the mayor of <oov-0> met the press .", ""])
    monkeypatch.chdir(tmp_path)
    common = ["--prep", out / "prep.json", "--oov", out / "tok" / "train.oov", "--generate-output", gen]
    for spelling in ("-o", "--output", "--out"):
        status, stdout, err = main_status(restore, [*common, spelling, "-"], capsys)
        assert status == 0, err
        assert stdout == "the mayor of Smallville met the press.\n\n" and "to stdout" in err
        assert not (tmp_path / "-").exists()  # not a file named '-'


def test_english_is_detokenized_for_users_and_kept_as_tokens_for_rouge(tmp_path, capsys):
    tokens = "the model ( a gru ) didn't win , sadly".split()
    assert display_text(tokens, "en", "keep") == "the model (a gru) didn't win, sadly"
    assert display_text(tokens, "zh", "char") == "the model(a gru)didn't win,sadly"  # Chinese: its own rule
    out = prepared(tmp_path, capsys)
    gen = generated(tmp_path / "gen.txt", [" ".join(tokens)])
    argv = ["--prep", out / "prep.json", "--num-docs", 1, "--generate-output", gen, "--output", "-"]
    assert main_status(restore, argv, capsys)[1] == "the model (a gru) didn't win, sadly\n"
    assert main_status(restore, argv + ["--no-detok"], capsys)[1] == " ".join(tokens) + "\n"


@pytest.mark.parametrize("options", [["--unit", "word"], ["--unit", "keep", "--lowercase"]])
def test_copied_word_keeps_the_source_spelling_in_a_lower_cased_model(tmp_path, capsys, options):
    out = prepared(tmp_path, capsys, *options)
    assert (out / "tok" / "train.src").read_text().split("\n")[0] == "the town of <oov-0> has a mayor ."
    assert (out / "tok" / "train.oov").read_text().split("\n")[0] == "Smallville"  # not smallville
    # generation time: raw text through --apply, "SMALLVILLE" and "smallville" share the first spelling's marker
    write(tmp_path / "new.txt", ["Smallville . SMALLVILLE and smallville ."])
    status, _, err = main_status(prepare, ["--apply", out / "prep.json", "--input", tmp_path / "new.txt",
                                           "--output-prefix", tmp_path / "new"], capsys)
    assert status == 0, err
    assert (tmp_path / "new.src").read_text() == "<oov-0> . <oov-0> <oov-1> <oov-0> .\n"
    assert (tmp_path / "new.oov").read_text() == "Smallville\tand\n"


def test_surface_falls_back_to_the_tokens_when_lower_casing_changes_them():
    tokenizer = Tokenizer("en", "word")
    text = "A \u0130stanbul B"  # 'İ'.lower() is 'i' + a combining dot, which the word pattern splits off
    tokens = tokenizer(text)
    assert len(tokens) > 3 and tokenizer.surface(text, tokens) == tokens
    assert tokenizer.surface("A Bc-De", tokenizer("A Bc-De")) == ["A", "Bc-De"]
    assert Tokenizer("en", "keep").surface("A B", ["A", "B"]) == ["A", "B"]  # no lower-casing: the tokens


@pytest.mark.parametrize("argv, message", [
    (["--prep", "nope.json", "--num-docs", 1, "--generate-output", "gen", "--output", "x"], "nope.json"),
    (["--prep", "p.json"], "required"),  # argparse's usage error
])
def test_restore_bad_input_and_usage_exit_2(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    status, _, err = main_status(restore, argv, capsys)
    assert status == 2 and message in err


def test_rouge_exit_codes(tmp_path, capsys):
    write(tmp_path / "refs", ["a b c ."])
    status, _, err = main_status(rouge, ["--refs", tmp_path / "refs", "--hyps", tmp_path / "missing"], capsys)
    assert status == 2 and "missing" in err
    write(tmp_path / "two", ["a .", "b ."])
    status, _, err = main_status(files2rouge, [tmp_path / "refs", tmp_path / "two"], capsys)
    assert status == 2 and "error" in err


def test_prefix_outputs_refuse_stdout(tmp_path, capsys):
    write(tmp_path / "in.tsv", ["a\tb"])
    status, _, err = main_status(convert, ["tsv", tmp_path / "in.tsv", "--src-col", 0, "--tgt-col", 1,
                                           "--output-prefix", "-"], capsys)
    assert status == 2 and "--output-prefix -" in err


def test_convert_tsv_warns_when_the_target_column_is_longer(tmp_path, capsys):
    write(tmp_path / "in.tsv", ["short\ta much longer summary", "tiny\tanother long summary", "a long text\tsum"])
    argv = ["tsv", tmp_path / "in.tsv", "--output-prefix", tmp_path / "out"]
    status, _, err = main_status(convert, argv + ["--src-col", 0, "--tgt-col", 1], capsys)
    assert status == 0 and "longer than the source column 0 on 2 of 3 lines" in err and "swapped" in err
    status, _, err = main_status(convert, argv + ["--src-col", 1, "--tgt-col", 0], capsys)
    assert status == 0 and "swapped" not in err
    assert (tmp_path / "out.src").read_text().split("\n")[:3] == ["a much longer summary", "another long summary",
                                                                 "sum"]  # all lines, in order


def test_analyze_json_to_stdout(tmp_path, capsys):
    write(tmp_path / "src", ["the cat sat on the mat ."])
    write(tmp_path / "hyp", ["the cat sat ."])
    status, out, err = main_status(analyze, ["--source", tmp_path / "src", "--hyp", tmp_path / "hyp",
                                                     "--json", "-"], capsys)
    assert status == 0 and out.lstrip().startswith("{") and "novel" in err


# ---------------------------------------------------------------------------------------------- shell scripts
SCRIPTS = ["preprocess.sh", "train.sh", "generate.sh"]


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_help_version_and_usage_errors(script):
    for flag in ("-h", "--help"):
        result = run([f"./{script}", flag])
        assert result.returncode == 0 and result.stdout.startswith(("Tokenize", "Train", "Summarize"))
        assert f"{script} -h|--help" in result.stdout and "Exit status" in result.stdout
    assert VERSION.match(run([f"./{script}", "--version"]).stdout.strip())
    for argv in (["--no-such-option", "a", "b"], [], ["-c"]):
        result = run([f"./{script}", *argv], check=False)
        assert result.returncode == 2 and f"{script}: error:" in result.stderr, result.stderr


@pytest.mark.slow
def test_scripts_take_c_anywhere_before_the_directories(tmp_path):
    """-c after another option of the script is read as the config (here a missing one: exit 2, named)."""
    (tmp_path / "raw").mkdir()
    (tmp_path / "data" / "bin").mkdir(parents=True)
    (tmp_path / "data" / "bin" / "dict.src.txt").write_text("")
    (tmp_path / "data" / "prep.json").write_text("{}")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "checkpoint_best.pt").write_text("")
    for argv in (["./preprocess.sh", "--", tmp_path / "raw", tmp_path / "out"],
                 ["./train.sh", "--force-config", "-c", "no_such_config", tmp_path / "data", tmp_path / "model"],
                 ["./generate.sh", "--score", "-c", "no_such_config", tmp_path / "data", tmp_path / "model"]):
        result = run(argv, check=False)
        assert result.returncode == 2, result.stderr
    assert "config not found: no_such_config" in result.stderr


def as_a_user_runs_it():
    """command_env() without TRAIN_VERBOSE: train.sh's quiet default."""
    env = command_env()
    env.pop("TRAIN_VERBOSE")
    return env


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 3-update model on a slice of data/scitldr, through preprocess.sh and train.sh as a user runs them."""
    work = tmp_path_factory.mktemp("cli")
    raw = slice_corpus("scitldr", work / "raw", (("train", 60), ("valid", 8), ("test", 6)))
    run(["./preprocess.sh", raw, work / "data"])
    trained = run(["./train.sh", "-c", "scitldr_small", work / "data", work / "model", "--max-update", "3",
                   "--max-tokens", "3000", "--no-save-optimizer-state", "--log-interval", "1"], env=as_a_user_runs_it())
    return work, trained


@pytest.mark.slow
def test_train_is_quiet_on_the_terminal_with_fairseqs_whole_log_in_the_model_folder(tiny_run):
    work, trained = tiny_run
    log = work / "model" / "train.log"
    assert trained.stdout == ""
    assert len(trained.stderr.splitlines()) < 30, trained.stderr
    assert f"==> fairseq's log: {log} (--verbose shows it here)" in trained.stderr
    assert "    budget: --max-update 3\n" in trained.stderr
    assert re.search(r"^    model PGNLSTMModel: [\d,]+ parameters", trained.stderr, flags=re.M)
    progress = r"^    update 3/3 \(100%\), epoch \d+ \(\d+/\d+\)  loss [\d.]+  nll_loss [\d.]+  [\d.]+ updates/s  ETA 0:00$"
    assert re.search(progress, trained.stderr, flags=re.M), trained.stderr
    assert re.search(r"^    validation at update 3: loss [\d.]+  nll_loss [\d.]+  rouge_l [\d.]+", trained.stderr,
                     flags=re.M), trained.stderr
    for noise in ("UserWarning", "hydra", "{'_name'", "PGNLSTMModel(", "| INFO |"):
        assert noise not in trained.stderr
    text = log.read_text()
    assert re.search(r"num_updates=3\b", text) and "hydra" in text and "{'_name'" in text


@pytest.mark.slow
def test_train_verbose_shows_the_whole_log_and_a_failure_shows_its_error(tiny_run):
    work, _ = tiny_run
    common = ["-c", "scitldr_small", work / "data"]
    verbose = run(["./train.sh", "--verbose", *common, work / "verbose", "--max-update", "1", "--max-tokens",
                   "3000", "--no-save-optimizer-state"], env=as_a_user_runs_it())
    assert verbose.stdout == "" and re.search(r"num_updates[ =]1\b", verbose.stderr)
    header, *logged = (work / "verbose" / "train.log").read_text().splitlines()
    assert header.startswith("==> ") and f"fairseq-train {work / 'data' / 'bin'} " in header
    assert "\n".join(logged) in verbose.stderr
    failed = run(["./train.sh", *common, work / "failed", "--arch", "no_such_arch"], check=False,
                 env=as_a_user_runs_it())
    assert failed.returncode == 2, failed.stderr
    assert "fairseq-train: error: argument --arch/-a: invalid choice: 'no_such_arch'" in failed.stderr
    assert f"train.sh: error: fairseq-train failed (exit status 2); its whole log: {work / 'failed' / 'train.log'}" \
        in failed.stderr
    assert "usage:" not in failed.stderr  # the error, not fairseq's 300 lines of usage


@pytest.mark.slow
def test_train_ends_with_its_best_and_last_checkpoints_and_generate_names_its_own(tiny_run):
    work, trained = tiny_run
    end = trained.stderr[trained.stderr.index("==> Checkpoints in"):]
    assert re.search(r"best: checkpoint_best\.pt: update 3, validation rouge_l [\d.]+ \(the highest rouge_l", end)
    assert re.search(r"last: checkpoint_last\.pt: update 3, validation rouge_l [\d.]+", end), end
    decoded = run(["./generate.sh", "--split", "test", "--output", work / "named.sum", work / "data", work / "model",
                   "--max-len-b", "5"])
    assert re.search(r"==> Checkpoint checkpoint_best\.pt: update 3, validation rouge_l", decoded.stderr)


@pytest.mark.slow
def test_summ_analyze_with_prep_agrees_with_generate_score_on_its_detokenized_output(tiny_run):
    """The raw test split, the raw references and generate.sh's default (detokenized) summaries through
    summ-analyze --prep give the figures generate.sh --score prints."""
    work, _ = tiny_run
    summaries = work / "analysed.sum"
    scored = run(["./generate.sh", "--split", "test", "--score", "--output", summaries, work / "data",
                  work / "model", "--max-len-b", "8"])
    analysed = run(["summ-analyze", "--prep", work / "data" / "prep.json", "--source", work / "raw" / "test.src",
                    "--hyp", summaries, "--name", "summaries", "--ref", work / "raw" / "test.tgt"])
    table = analysed.stdout.strip()
    assert "novel 1-grams %" in table and table in scored.stderr, (table, scored.stderr[-3000:])


@pytest.mark.slow
def test_generate_is_quiet_with_a_log_file_and_verbose_brings_it_back(tiny_run):
    work, _ = tiny_run
    docs = work / "docs.txt"
    write(docs, ["The town of Smallville ( a small place ) did not win .", ""])
    output = work / "summaries.txt"
    quiet = run(["./generate.sh", "--input", docs, "--output", output, work / "data", work / "model",
                 "--max-len-b", "5"])
    assert len(output.read_text().split("\n")) == 3  # one line per document
    log = Path(f"{output}.log")
    assert f"fairseq's messages go to {log}" in quiet.stderr
    for noise in ("INFO", "hydra", "pin_memory", "UserWarning"):
        assert noise not in quiet.stderr, quiet.stderr
    assert "==> Generating with fairseq-interactive" in quiet.stderr and "summ-restore: wrote 2" in quiet.stderr
    assert "'beam': 5" in log.read_text()  # the config dump went to the log
    verbose = run(["./generate.sh", "--verbose", "--input", docs, work / "data", work / "model", "--max-len-b", "5"])
    assert "INFO" in verbose.stderr and "'beam': 5" in verbose.stderr
    assert len(verbose.stdout.split("\n")) == 3


@pytest.mark.slow
def test_generate_creates_a_missing_output_folder_and_an_empty_line_gets_an_empty_summary(tiny_run):
    work, _ = tiny_run
    docs = work / "docs_with_blank.txt"
    write(docs, ["", "The town of Smallville did not win .", "   "])
    output = work / "not" / "yet" / "there" / "test.sum"
    result = run(["./generate.sh", "--input", docs, "--output", output, work / "data", work / "model",
                  "--max-len-b", "5"])
    lines = output.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[0] == lines[2] == "" and lines[1].strip() and lines[3] == ""
    assert "2 empty documents: each gets an empty summary" in result.stderr


@pytest.mark.slow
def test_generate_into_a_folder_that_cannot_be_made_is_a_clean_usage_error(tiny_run, tmp_path):
    work, _ = tiny_run
    (tmp_path / "a_file").write_text("x")
    result = run(["./generate.sh", "--split", "test", "--output", tmp_path / "a_file" / "out.sum", work / "data",
                  work / "model"], check=False)
    assert result.returncode == 2
    assert "generate.sh: error: --output" in result.stderr and "cannot create its folder" in result.stderr
    assert "line " not in result.stderr  # no bash error message


def test_checkpoint_facts_say_the_update_the_figure_and_the_measure(tmp_path, capsys):
    from fairseq_plugins.cli import checkpoint_info

    def save(name, metric, maximize, value, updates):
        torch.save({"cfg": {"checkpoint": {"best_checkpoint_metric": metric,
                                           "maximize_best_checkpoint_metric": maximize}},
                    "optimizer_history": [{"num_updates": updates}], "extra_state": {"val_loss": value}},
                   tmp_path / name)

    save("checkpoint_best.pt", "loss", False, 7.25, 434)
    save("checkpoint_last.pt", "loss", False, 7.434, 600)
    assert checkpoint_info.run_summary(tmp_path).split("\n") == [
        "best: checkpoint_best.pt: update 434, validation loss 7.25 (the lowest loss of the run's validations); the "
        "loss includes the criterion's auxiliary terms (coverage, focal weighting)",
        "last: checkpoint_last.pt: update 600, validation loss 7.434; the loss includes the criterion's auxiliary "
        "terms (coverage, focal weighting)"]
    save("checkpoint_best.pt", "rouge_l", True, 31.5, 300)
    assert checkpoint_info.read_facts(tmp_path / "checkpoint_best.pt").describe() == \
        "checkpoint_best.pt: update 300, validation rouge_l 31.5 (the highest rouge_l of the run's validations)"
    save("checkpoint_last.pt", "rouge_l", True, None, 3)
    assert checkpoint_info.read_facts(tmp_path / "checkpoint_last.pt").describe() == \
        "checkpoint_last.pt: update 3, not validated"
    assert checkpoint_info.main([str(tmp_path / "missing.pt")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err


@pytest.mark.parametrize("options, budget", [
    ("--max-update 600", True), ("--max-update 0", False), ("--lr 0.1", False), ("--max-update=5", True),
    ("--stop-time-hours 0.5", True), ("--max-update 3 --max-update 0", False), ("--max-epoch 3 --max-update 0", True),
])
def test_train_sh_knows_when_a_run_has_no_budget(options, budget):
    result = run(["bash", "-c", f'source scripts/lib.sh; has_budget {options}'], check=False)
    assert (result.returncode == 0) == budget


@pytest.mark.parametrize("options, value", [
    ("--max-epoch 10 --lr 1", "10"), ("--max-epoch 10 --max-epoch=3", "3"), ("--lr 1", ""), ("--max-epoch", ""),
])
def test_train_sh_reads_an_options_last_value(options, value):
    assert run(["bash", "-c", f'source scripts/lib.sh; last_value --max-epoch {options}']).stdout == value


@pytest.mark.parametrize("load, threads, warned", [("3.90", "", True), ("0.40", "", False), ("3.90", "1", False)])
def test_train_sh_warns_on_a_busy_machine_without_a_thread_count(tmp_path, load, threads, warned):
    (tmp_path / "loadavg").write_text(f"{load} 1.00 1.00 2/100 12345\n")
    env = command_env()
    env.pop("OMP_NUM_THREADS")
    if threads:
        env["OMP_NUM_THREADS"] = threads
    result = run(["bash", "-c", f'source scripts/lib.sh; warn_busy_machine {tmp_path / "loadavg"}'], env=env)
    assert ("set OMP_NUM_THREADS=1" in result.stderr) == (warned and float(load) > os.cpu_count() / 2)


@pytest.mark.parametrize("config", sorted(p.stem for p in (ROOT / "configs").glob("*.conf")))
def test_every_shipped_config_loads_as_the_scripts_load_it(config):
    """Each config is valid bash and sets TRAIN_ARGS (scripts/lib.sh load_config, as train.sh runs it), given the
    variables some configs ask for (PHASE1: a first-phase checkpoint; W2V: a word2vec file)."""
    script = 'source scripts/lib.sh; load_config "$1"; (( ${#TRAIN_ARGS[@]} > 0 ))'
    env = command_env(PHASE1="phase1/checkpoint_best.pt", W2V="w2v.txt")
    result = run(["bash", "-c", script, "load", config], check=False, env=env)
    assert result.returncode == 0, result.stderr


def last_value(words, option, default=None):
    values = [words[i + 1] for i, word in enumerate(words[:-1]) if word == option]
    return values[-1] if values else default


@pytest.mark.parametrize("config", sorted(p.stem for p in (ROOT / "configs").glob("*.conf")))
def test_every_shipped_config_has_a_budget_and_keeps_its_best_checkpoint_by_quality(config):
    """A finite budget (has_budget, as train.sh checks it), and a best checkpoint chosen by a decoding measure
    (validation ROUGE, the RL reward of greedy summaries, Shi et al.'s summary accuracy) or by a loss with no
    auxiliary term (no coverage, focal or cohesion term: the reference NLL)."""
    script = 'source scripts/lib.sh; load_config "$1"; has_budget "${TRAIN_ARGS[@]}"; printf "%s\\0" "${TRAIN_ARGS[@]}"'
    env = command_env(PHASE1="phase1/checkpoint_best.pt", W2V="w2v.txt")
    result = run(["bash", "-c", script, "load", config], check=False, env=env)
    assert result.returncode == 0, f"{config}: no --max-update, --max-epoch or --stop-time-hours"
    words = result.stdout.split("\0")[:-1]
    metric = last_value(words, "--best-checkpoint-metric", "loss")
    if metric in ("rouge_l", "reward_greedy", "accuracy"):
        assert "--maximize-best-checkpoint-metric" in words
        assert metric == "reward_greedy" or f"--eval-{'accuracy' if metric == 'accuracy' else 'rouge'}" in words
        return
    assert metric == "loss", f"{config}: best checkpoint by {metric}"
    criterion = last_value(words, "--criterion")
    plain = tuple(float(last_value(words, option, default)) for option, default in (  # the criterion's defaults
        ("--focal-alpha", 0.25), ("--focal-gamma", 1.0), ("--coverage-lambda", 1.0))) == (1.0, 0.0, 0.0)
    assert criterion == "cross_entropy" or (criterion == "focal_copy_coverage" and plain), \
        f"{config}: best checkpoint by a loss with auxiliary terms ({criterion})"
