"""What config made a data or model directory: ``config.json``, written by preprocess.sh and train.sh.

A config (``configs/NAME.conf``) is a bash file with the arrays PREP_ARGS, TRAIN_ARGS and GEN_ARGS.  The record
lets ``generate.sh DATA MODEL`` decode a model with the lengths and blocking of the config that trained it:
  * preprocess.sh writes DATA/config.json, train.sh (and the launchers) SAVE_DIR/config.json:
    {"name", "file", "text" (the config file's text), "prep_args", "train_args", "gen_args" (the arrays as
    resolved), "extra_args" (the options given after the directories), "role" ("data" or "model")};
  * without ``-c``, train.sh uses SAVE_DIR's record (a resumed run), else DATA's, and generate.sh, the Slurm
    generation array and ``Summarizer.from_pretrained`` decode with the model's recorded GEN_ARGS;
  * an explicit ``-c`` that disagrees with the record is an error unless ``--force-config``: for generate.sh a
    config other than the model's; for train.sh a config whose PREP_ARGS differ from the data's, or another
    config than the one a resumed SAVE_DIR was trained with.
Directories made before this record exist keep working: the default config, with a warning.

    python -m fairseq_plugins.cli.run_config write FILE NAME CONFIG_FILE ROLE N_PREP PREP... N_TRAIN TRAIN...
                                              N_GEN GEN... [EXTRA...]
    python -m fairseq_plugins.cli.run_config get FILE KEY        # a string, or an array NUL-separated
Exit codes: 0, 2 for bad input (a missing or unreadable record names the file).
"""
import json
from pathlib import Path
from typing import Dict, List, Optional

FILE_NAME = "config.json"
ARRAYS = ("prep_args", "train_args", "gen_args", "extra_args")


class RecordError(ValueError):
    pass


def write(path: str, name: str, config_file: str, role: str, prep: List[str], train: List[str],
          gen: List[str], extra: List[str]) -> Dict:
    text = Path(config_file).read_text(encoding="utf-8") if Path(config_file).is_file() else None
    record = {"name": name, "file": config_file, "text": text, "role": role, "prep_args": prep,
              "train_args": train, "gen_args": gen, "extra_args": extra}
    Path(path).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def read(path) -> Optional[Dict]:
    """The record in ``path`` (a config.json or the directory holding it); None when there is none."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecordError(f"{path}: not a readable config record ({err})") from None
    missing = [key for key in ("name", *ARRAYS) if key not in record]
    if missing:
        raise RecordError(f"{path}: config record without {', '.join(missing)}")
    return record


def split_counted(values: List[str]) -> List[List[str]]:
    """'2 a b 1 c 0 d e' -> [['a', 'b'], ['c'], [], ['d', 'e']]: three counted arrays, then the rest."""
    arrays, rest = [], list(values)
    for _ in range(3):
        if not rest or not rest[0].isdigit() or int(rest[0]) > len(rest) - 1:
            raise RecordError("write: expected N_PREP PREP... N_TRAIN TRAIN... N_GEN GEN... [EXTRA...]")
        count = int(rest[0])
        arrays.append(rest[1:1 + count])
        rest = rest[1 + count:]
    return arrays + [rest]
