"""``python -m fairseq_plugins.cli.run_config``:
the shell scripts' access to config.json (fairseq_plugins/runtime/run_config.py).
"""
import sys

from fairseq_plugins.runtime import run_config as _library
from fairseq_plugins.runtime.run_config import RecordError, read, split_counted, write


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["write"] and len(argv) >= 5:
            path, name, config_file, role = argv[1:5]
            prep, train, gen, extra = split_counted(argv[5:])
            write(path, name, config_file, role, prep, train, gen, extra)
            return 0
        if argv[:1] == ["get"] and len(argv) == 3:
            record = read(argv[1])
            if record is None:
                raise RecordError(f"{argv[1]}: no config record")
            value = record.get(argv[2])
            if isinstance(value, list):
                sys.stdout.write("".join(item + "\0" for item in value))
            else:
                sys.stdout.write("" if value is None else str(value))
            return 0
        print(_library.__doc__, file=sys.stderr)
        return 2
    except RecordError as err:
        print(f"run_config: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
