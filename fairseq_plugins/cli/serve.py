"""``summ-serve``: its options and entry point (the service is fairseq_plugins/serve/)."""
import argparse
import asyncio
import logging
import sys
from pathlib import Path

from fairseq_plugins.cli.common import finish_parser
from fairseq_plugins.runtime.checkpoint_info import read_facts
from fairseq_plugins.serve import app as _library
from fairseq_plugins.serve.app import PROG, Service, logger, make_app, serve
from fairseq_plugins.serve.requests import Limits


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=_library.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="a train.sh SAVE_DIR or a summ-package directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0: any free port (the log line names it)")
    parser.add_argument("--checkpoint", default="checkpoint_best.pt")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: CUDA when available)")
    parser.add_argument("--quantize", choices=["int8"],
                        help="int8: the decoder's large matrices in int8, on the CPU "
                             "(fairseq_plugins/inference/quantize.py)")
    limits = Limits()
    parser.add_argument("--max-documents", type=int, default=limits.max_documents, help="per request")
    parser.add_argument("--max-document-chars", type=int, default=limits.max_document_chars,
                        help="longer documents are refused (413), never truncated")
    parser.add_argument("--max-body-bytes", type=int, default=limits.max_body_bytes)
    parser.add_argument("--max-beam", type=int, default=limits.max_beam)
    parser.add_argument("--max-len", type=int, default=limits.max_len, help="largest max_len_b a request may ask")
    parser.add_argument("--max-batch-documents", type=int, default=64, help="documents decoded together")
    parser.add_argument("--max-wait-ms", type=float, default=10.0,
                        help="how long the first request of a batch waits for others")
    parser.add_argument("--max-queue-documents", type=int, default=256,
                        help="documents waiting at most; beyond, 503 with Retry-After")
    parser.add_argument("--drain-timeout", type=float, default=60.0,
                        help="on SIGTERM, seconds to answer the accepted requests")
    return finish_parser(parser)


def check_args(parser, args) -> None:
    for name in ("port", "max_documents", "max_document_chars", "max_body_bytes", "max_beam", "max_len",
                 "max_batch_documents", "max_queue_documents"):
        low = 0 if name == "port" else 1
        if getattr(args, name) < low:
            parser.error(f"--{name.replace('_', '-')} must be at least {low}")
    if args.max_wait_ms < 0 or args.drain_timeout < 0:
        parser.error("--max-wait-ms and --drain-timeout must not be negative")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=f"{PROG}: %(levelname)s: %(message)s")
    logger.setLevel(logging.INFO)
    from fairseq_plugins.inference import package

    try:
        package.check_if_package(args.model_dir)  # a broken package is refused before torch is even imported
        from fairseq_plugins.inference.hub import Summarizer

        summarizer = Summarizer.from_pretrained(args.model_dir, checkpoint_file=args.checkpoint, device=args.device,
                                                quantize=args.quantize)
    except (FileNotFoundError, ValueError) as err:  # a package refused is a ValueError too
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    logger.info("model %s loaded on %s; %s", args.model_dir, summarizer.device,
                read_facts(Path(args.model_dir) / args.checkpoint).describe())
    limits = Limits(max_documents=args.max_documents, max_document_chars=args.max_document_chars,
                    max_body_bytes=args.max_body_bytes, max_beam=args.max_beam, max_len=args.max_len)
    service = Service(summarizer, limits, package.model_title(args.model_dir), args.max_batch_documents,
                      args.max_wait_ms / 1000, args.max_queue_documents)
    asyncio.run(serve(make_app(service), args.host, args.port, args.drain_timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
