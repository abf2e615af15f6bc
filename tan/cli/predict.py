"""Top moments of one or more sentences in one video, from a trained model.

The video's features come from the configured datasets (--video ID) or from
a file (--features: HDF5 with --video, or a .npy array [T, D_in]); its
duration from --duration, else from the configured annotations.

Examples:
  tan-predict --config-file configs/2dtan_synthetic.yaml --video syn_test_0003 --query "the cook holds the pan."
  tan-predict --config-file configs/2dtan_128x128_pool_k5l8_tacos.yaml --ckpt outputs/tacos/model_best.pth \\
      --video s13-d21.avi --query "the person rinses the knife" --query "he cuts the onion" --topk 3
  tan-predict --config-file configs/2dtan_synthetic.yaml --features clip.npy --duration 61.5 \\
      --query "person opens door" --json
"""
import argparse
import json
import sys

from ..config import load_config
from ..data import RunData, SentenceEncoder, VideoSource
from ..engine.prediction import default_checkpoint, load_trained_model, predict
from ..errors import TanError
from ..utils.logger import setup_logger
from .arguments import ConfigArgumentParser, add_overrides
from . import interrupts
from .exits import run_cli
from .setup import resolve_device


def build_parser():
    parser = ConfigArgumentParser(description="Find the moments that sentences describe in a video.",
                             epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True, metavar="FILE", help="the config the model was trained with")
    parser.add_argument("--ckpt", default="", metavar="PATH",
                        help="checkpoint (default: OUTPUT_DIR/model_best.pth, else the latest in OUTPUT_DIR)")
    parser.add_argument("--video", default="", metavar="ID", help="video id in the configured (or --features) file")
    parser.add_argument("--features", default="", metavar="FILE",
                        help="feature file: HDF5 (with --video) or .npy holding [T, D_in]")
    parser.add_argument("--feature-key", default="c3d_features", metavar="KEY",
                        help="group key of a group-per-video HDF5 (default c3d_features)")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="video duration (default: from the configured annotations)")
    parser.add_argument("--query", action="append", required=True, metavar="SENTENCE",
                        help="a sentence to ground; repeat for several")
    parser.add_argument("--topk", type=int, default=5, help="moments per sentence after NMS (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_overrides(parser, "MODEL.DEVICE cpu TEST.NMS_THRESH 0.5")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    interrupts.now_doing("predicting", "no output was written")
    if args.topk < 1:
        raise TanError(f"--topk must be at least 1, got {args.topk}")
    cfg = load_config(args.config_file, args.opts)
    setup_logger(None, stream=sys.stderr)  # stdout carries the answer
    device = resolve_device(cfg.MODEL.DEVICE)
    checkpoint = args.ckpt or default_checkpoint(cfg)
    data = RunData(cfg)
    source = VideoSource(data)
    feats = source.features(args.video, args.features, args.feature_key)
    duration = args.duration if args.duration is not None else source.duration(args.video)
    if duration is None:
        raise TanError(f"no duration for video {args.video or args.features!r} in the configured annotations; "
                       f"pass --duration SECONDS")
    encoded = SentenceEncoder.from_config(cfg)(args.query)
    model = load_trained_model(cfg, checkpoint, device)
    moments, scores, filled, _ = predict(model, cfg, feats, duration, encoded, device, args.topk)
    report = {"video": args.video or args.features, "duration": duration, "checkpoint": checkpoint, "queries": [
        {"sentence": sentence,
         "moments": [{"start": round(float(m[0]), 3), "end": round(float(m[1]), 3), "score": round(float(s), 6)}
                     for m, s, f in zip(moments[q], scores[q], filled[q]) if f]}
        for q, sentence in enumerate(args.query)]}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_text(report))
    return report


def format_text(report):
    lines = [f"video {report['video']} ({report['duration']:.2f} s), checkpoint {report['checkpoint']}"]
    for query in report["queries"]:
        lines.append(f'"{query["sentence"]}"')
        for rank, m in enumerate(query["moments"], 1):
            lines.append(f"  {rank}. {m['start']:8.2f} - {m['end']:8.2f} s   score {m['score']:.4f}")
        if not query["moments"]:
            lines.append("  (no candidate scored above zero)")
    return "\n".join(lines)


def cli():
    run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())
