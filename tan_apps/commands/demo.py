"""A local web page over trained models: pick a checkpoint and a video, type sentences, and see
their top moments on a timeline with their scores, play each moment, and read the score map.

PATH: checkpoints, run folders (OUTPUT_DIRs) or folders of them (default: outputs); each run's
checkpoints are listed, newest first. Videos: those of --videos (files and folders), and any
file uploaded from the page (kept in --upload-dir, else in a temporary folder removed at the
end). A video file's features are made by the extractors the checkpoint records
(tan-extract-features; the video extra), so a checkpoint trained on features made elsewhere
can be listed but not asked.

The page is served from this machine (--host 127.0.0.1 by default: this machine only) and
fetches nothing from the internet. Stop with Ctrl-C.

Examples:
  tan-demo outputs/ --videos datasets/synthetic_videos/videos
  tan-demo outputs/mmn_synthetic_videos/model_final.pth --port 8080 --device cuda
  tan-demo runs/ --videos my_videos/ --extractor-model clip-vit-base-patch32=/models/clip
"""
import argparse
import os
import shutil
import sys
import tempfile

from tan.errors import TanError
from tan.utils.logger import get_logger, setup_logger
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli
from tan_apps.commands.predict import extractor_models
from tan.engine.setup import resolve_device

DEFAULT_PORT = 7860  # the port this field's demo pages usually take


def build_parser():
    parser = argparse.ArgumentParser(description="Serve a local web page that grounds sentences in video files "
                                                 "with trained checkpoints.",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=["outputs"], metavar="PATH",
                        help="checkpoints, run folders or folders of runs (default: outputs)")
    parser.add_argument("--videos", nargs="+", default=[], metavar="PATH", help="video files and folders of them")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every network)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0: any free one, printed)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: a GPU if any)")
    parser.add_argument("--extractor-model", action="append", default=[], metavar="NAME=FOLDER",
                        help="where a recorded extractor model (its recorded name or folder name) is now")
    parser.add_argument("--upload-dir", default="", metavar="DIR",
                        help="keep uploaded videos in DIR (default: a temporary folder, removed at the end)")
    parser.add_argument("--max-upload-mb", type=float, default=2000, help="largest upload in MB (default 2000)")
    return parser


def main(argv=None):
    from tan_apps.demo.offer import VideoShelf, find_checkpoints
    from tan_apps.demo.server import DemoServer
    from tan_apps.demo.session import DemoSession

    args = build_parser().parse_args(argv)
    setup_logger(None, stream=sys.stderr)
    if not 0 <= args.port <= 65535:
        raise TanError(f"--port {args.port}: expected 0 to 65535")
    if args.max_upload_mb <= 0:
        raise TanError(f"--max-upload-mb {args.max_upload_mb:g}: expected a positive number")
    checkpoints = find_checkpoints(args.paths)
    device = resolve_device(args.device)
    upload_dir = args.upload_dir or tempfile.mkdtemp(prefix="tan-demo-uploads-")
    try:
        os.makedirs(upload_dir, exist_ok=True)
        videos = VideoShelf(args.videos, upload_dir, int(args.max_upload_mb * 1e6))
        session = DemoSession(checkpoints, videos, device, extractor_models(args.extractor_model))
        try:
            server = DemoServer(args.host, args.port, session)
        except OSError as e:
            raise TanError(f"cannot listen on {args.host}:{args.port} ({e.strerror or e}); "
                           f"choose another --port (0: any free one)") from None
        with server:
            if args.host not in ("127.0.0.1", "localhost", "::1"):
                get_logger("demo").warning("listening on %s: anyone who can reach this machine can use the page "
                                           "and upload files to it", args.host)
            signal_exits.now_doing("serving the demo page", "uploaded videos are kept" if args.upload_dir
                                   else "uploaded videos are deleted")
            print(f"tan-demo: {len(checkpoints)} checkpoint(s), {len(videos.all())} video(s), on {device}; "
                  f"open {server.url} (Ctrl-C to stop)", flush=True)
            server.serve_forever()
    finally:
        if not args.upload_dir:
            shutil.rmtree(upload_dir, ignore_errors=True)


def cli():
    run_cli(main)
