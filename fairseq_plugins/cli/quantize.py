"""``python -m fairseq_plugins.cli.quantize``:
a fairseq command with an int8 decoder (fairseq_plugins/inference/quantize.py).
"""
import argparse
import importlib
import sys

from fairseq_plugins.inference.quantize import CHOICES, COMMANDS, quantizing


def main(argv=None) -> int:
    """``python -m fairseq_plugins.cli.quantize int8 fairseq-generate|fairseq-interactive ARGS...``: the fairseq
    command, on the CPU, with the model quantized as it is loaded (generate.sh --quantize int8)."""
    parser = argparse.ArgumentParser(prog="python -m fairseq_plugins.cli.quantize", description=main.__doc__)
    parser.add_argument("quantize", choices=CHOICES)
    parser.add_argument("command", choices=sorted(COMMANDS))
    args, rest = parser.parse_known_args(argv)
    fp = [option for option in rest if option in ("--fp16", "--bf16", "--memory-efficient-fp16")]
    if fp:
        parser.error(f"--quantize {args.quantize} does not combine with {' '.join(fp)} (int8 on the CPU)")
    from fairseq import checkpoint_utils

    import fairseq_plugins

    fairseq_plugins.register()  # imported before fairseq: --user-dir finds it imported already
    checkpoint_utils.load_model_ensemble = quantizing(checkpoint_utils.load_model_ensemble, args.quantize)
    sys.argv = [args.command, *rest, "--cpu"]
    importlib.import_module(COMMANDS[args.command]).cli_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
