"""Extract clip features from video files, or sentence features from a query file.

Videos: every video file in the folders given (by extension), or the files
given, or those listed in --video-list, become {video}.npz in --output
(array "features" [T, D], one row per clip, and "duration" in seconds): the
layout of a feature folder that a catalog entry names (docs/data.md §3, §9).
A clip is --clip-seconds long; its frames are sampled at --frame-rate (by
default what the backbone takes: one frame per clip for CLIP, the model's
frame count for a video transformer). Run it again after a stop and only the
videos without a file, or whose file has changed since, are done. Videos
that cannot be read (a truncated download among them) are listed by file
with the reason at the end, and the exit status is 1.

Queries: --queries FILE... (JSON lines with "qid" and "query", such as a
Moment-DETR / lighthouse annotation file) become qid{qid}.npz holding
"last_hidden_state" [L, E] and "pooler_output" [P] (docs/data.md §9.3).

--output gets an extractor.json saying how its files were made; a folder
made by another extractor is refused.

--model is a folder written by save_pretrained or a hub name (downloaded
once into the Hugging Face cache where the network allows). --write-tiny
writes a tiny randomly initialised model of --backbone into a folder, for a
first run or a test with no download.

--plugins imports plug-ins first, named as a config's PLUGINS names them
(module names, or paths of a .py file or a package folder): --backbone then
runs a backbone one of them registers (docs/video.md §5). Its records name
the plug-in, so that a model trained on its features makes them again from
a video file.

--preset NAME makes a release's streams as HERO's extractor made them
(qvhighlights, charades, tacos, activitynet; docs/video.md §7): with
--videos, CLIP ViT-B/32 rows (--clip-model) and SlowFast R50 8x8 rows
(--slowfast-model) from one decode of each video, into --output/clip and
--output/slowfast; with --queries, CLIP's token features into
--output/clip_text. Files are float16, as the releases store them. With
--records-only, the records of those three folders are written into a
downloaded release (--output: its folder of clip/, slowfast/, clip_text/),
so that a model trained on it can ground video files.

Examples:
  tan-extract-features --videos videos/ --preset qvhighlights --clip-model ViT-B-32.pt \\
      --slowfast-model SLOWFAST_8x8_R50.pkl --output features/
  tan-extract-features --queries data/train.jsonl --preset qvhighlights --clip-model ViT-B-32.pt \\
      --output features/
  tan-extract-features --videos videos/ --backbone clip --model openai/clip-vit-base-patch32 --output features/clip
  tan-extract-features --videos videos/ --backbone video_transformer \\
      --model MCG-NJU/videomae-base-finetuned-kinetics --output features/videomae --workers 4
  tan-extract-features --queries data/train.jsonl --backbone clip --model openai/clip-vit-base-patch32 \\
      --output features/clip_text
  tan-extract-features --write-tiny models/tiny_clip --backbone clip
  tan-extract-features --videos videos/ --plugins my_backbones.py --backbone my_backbone \\
      --model models/my_backbone.pt --output features/my_backbone
"""
import argparse
import sys

from tan.config.plugins import import_plugin
from tan.errors import TanError
from tan.utils.logger import setup_logger
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli
from tan.engine.setup import resolve_device


def build_parser():
    from tan.video.backbones import backbone_names

    parser = argparse.ArgumentParser(description="Extract clip features from videos, or sentence features from "
                                                 "queries, into per-video / per-query .npz files.",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--videos", nargs="+", metavar="PATH", help="video files and folders of them")
    what.add_argument("--video-list", metavar="FILE", help="a text file of video paths, one a line")
    what.add_argument("--queries", nargs="+", metavar="FILE",
                      help='JSON-lines files with "qid" and "query": sentence features')
    what.add_argument("--write-tiny", metavar="DIR", help="write a tiny random model of --backbone into DIR")
    what.add_argument("--records-only", action="store_true",
                      help="with --preset: write the extractor records into a downloaded release's folders "
                           "(--output: the folder holding clip/, slowfast/ and clip_text/); no file is made")
    parser.add_argument("--backbone", metavar="NAME",
                        help=f"a registered backbone: {', '.join(backbone_names())}, or one a plug-in of --plugins "
                             f"registers (not with --preset)")
    parser.add_argument("--plugins", nargs="+", default=[], metavar="MODULE_OR_PATH",
                        help="plug-ins to import before --backbone is looked up, as a config's PLUGINS names them: "
                             "module names, or paths of a .py file or a package folder")
    parser.add_argument("--preset", metavar="NAME", help="a release's streams: qvhighlights, charades, tacos, "
                                                         "activitynet")
    parser.add_argument("--clip-model", metavar="PATH", help="--preset: openai's ViT-B-32.pt, or a CLIP folder")
    parser.add_argument("--slowfast-model", metavar="FILE", help="--preset: SLOWFAST_8x8_R50.pkl")
    parser.add_argument("--scaler", choices=("bilinear", "bicubic"), default="bilinear",
                        help="--preset: FFmpeg's scaler (default bilinear, the releases'; bicubic: HERO's code "
                             "run with FFmpeg 5 or newer)")
    parser.add_argument("--resolution", type=int, default=224,
                        help="--preset: SlowFast's frame size (default 224, HERO's; CLIP takes its model's)")
    parser.add_argument("--model", metavar="NAME", help="model folder or hub name (not with --write-tiny)")
    parser.add_argument("--output", metavar="DIR", help="folder of the feature files")
    parser.add_argument("--clip-seconds", type=float, default=2.0, help="seconds per clip, one row each (default 2)")
    parser.add_argument("--frame-rate", type=float, default=None,
                        help="frames sampled per second (default: the backbone's frames per clip / clip length)")
    parser.add_argument("--batch-clips", type=int, default=16, help="clips per backbone batch (default 16)")
    parser.add_argument("--batch-queries", type=int, default=64, help="sentences per backbone batch (default 64)")
    parser.add_argument("--workers", type=int, default=0,
                        help="decoding processes (default 0: in this one); not with --preset, which decodes each "
                             "video once in this process")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: a GPU if any)")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="float32",
                        help="the backbone's dtype (default float32; files are float32 whatever it is)")
    parser.add_argument("--overwrite", action="store_true", help="extract again the videos / queries that have a file")
    parser.add_argument("--seed", type=int, default=0, help="--write-tiny: the seed of the random weights")
    return parser


# What an unknown --backbone's error ends with, after the registered names.
PLUGINS_HINT = "a plug-in's backbone needs --plugins MODULE_OR_PATH (its module, or its .py file or package folder)"

# torch.manual_seed's range: a larger seed ends in "Overflow when unpacking long long"
LARGEST_SEED = 2 ** 64 - 1


def _check(args):
    if args.write_tiny and not args.preset:
        if not args.backbone:
            raise TanError("--write-tiny needs --backbone")
        if not 0 <= args.seed <= LARGEST_SEED:
            raise TanError(f"--seed {args.seed}: expected a whole number of 0 to {LARGEST_SEED}")
        return
    if args.preset:
        if args.backbone or args.model or args.write_tiny:
            raise TanError("--preset chooses the backbones: give --clip-model and --slowfast-model, not --backbone, "
                           "--model or --write-tiny")
        needed = ["clip_model", "output"] + (["slowfast_model"] if not args.queries else [])
        if args.workers:
            raise TanError("--workers: not with --preset, which decodes each video once in this process")
        missing = [f"--{n.replace('_', '-')}" for n in needed if not getattr(args, n)]
        if missing:
            raise TanError(f"--preset {args.preset} needs {' and '.join(missing)}")
        if args.resolution < 1:
            raise TanError(f"--resolution {args.resolution}: expected a positive number of pixels")
    elif args.records_only:
        raise TanError("--records-only goes with --preset")
    elif not args.backbone:
        raise TanError("--backbone (or --preset) is needed")
    elif not args.model or not args.output:
        raise TanError("--model and --output are needed (only --write-tiny goes without)")
    for name in ("batch_clips", "batch_queries"):
        if getattr(args, name) < 1:
            raise TanError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected at least 1")
    if args.workers < 0:
        raise TanError(f"--workers {args.workers}: expected 0 or more")


def main(argv=None):
    from tan.video.backbones import tiny_writer
    from tan.video.backbones.base import DTYPES

    args = build_parser().parse_args(argv)
    setup_logger(None, stream=sys.stderr)
    _check(args)
    for plugin in args.plugins:  # its backbones are registered when it is imported; the models are not needed
        import_plugin(plugin, "--plugins")
    if args.write_tiny:
        tiny_writer(args.backbone, PLUGINS_HINT)(args.write_tiny, args.seed)
        print(f"wrote a tiny random {args.backbone} model to {args.write_tiny}")
        return None
    backbone_class = None if args.preset else _backbone_class(args)  # an unknown name, before any work
    device = resolve_device(args.device)
    signal_exits.now_doing("extracting features", f"the files finished are in {args.output}; run the same command "
                                                  f"again to do the rest")
    if args.preset:
        summary = _extract_release(args, device, DTYPES[args.dtype])
    elif args.queries:
        from tan.video.queries import extract_queries, read_query_file

        queries = [q for path in args.queries for q in read_query_file(path)]
        backbone = backbone_class(args.model, device, DTYPES[args.dtype])
        summary = extract_queries(queries, backbone, args.output, args.batch_queries, args.overwrite)
    else:
        from tan.video.extract import backbone_sampling, extract_videos, list_videos

        paths = _read_list(args.video_list) if args.video_list else args.videos
        videos = list_videos(paths)
        backbone = backbone_class(args.model, device, DTYPES[args.dtype])
        sampling = backbone_sampling(backbone, args.clip_seconds, args.frame_rate)
        summary = extract_videos(videos, backbone, sampling, args.output, args.batch_clips, args.workers,
                                 args.overwrite)
    if summary is None:  # --records-only
        return None
    print(summary.text(), flush=True)
    if summary.failed:
        sys.exit(1)
    return summary


def _backbone_class(args):
    """The class of --backbone: a text backbone for --queries, else a video one."""
    from tan.video.backbones import text_backbone, video_backbone

    return (text_backbone if args.queries else video_backbone)(args.backbone, PLUGINS_HINT)


def _extract_release(args, device, dtype):
    import os

    from tan.video.backbones import text_backbone, video_backbone
    from tan.video.presets import preset

    release = preset(args.preset)
    if args.records_only:
        return _label_release(args, release, device, dtype)
    if args.queries:
        from tan.video.queries import extract_queries, read_query_file

        queries = [q for path in args.queries for q in read_query_file(path)]
        backbone = text_backbone("clip")(args.clip_model, device, dtype, max_length=release.text_tokens)
        return extract_queries(queries, backbone, os.path.join(args.output, release.text_folder),
                               args.batch_queries, args.overwrite, storage=release.storage)
    from tan.video.extract import list_videos
    from tan.video.release import extract_release

    videos = list_videos(_read_list(args.video_list) if args.video_list else args.videos)
    streams = _release_streams(args, release, device, dtype)
    return extract_release(videos, streams, args.output, args.batch_clips, release.storage, args.overwrite)


def _release_streams(args, release, device, dtype):
    from tan.video.backbones import video_backbone

    streams = []
    for stream in release.streams:
        if stream.backbone == "slowfast":
            backbone = video_backbone("slowfast")(args.slowfast_model, device, dtype, resolution=args.resolution)
        else:
            backbone = video_backbone(stream.backbone)(args.clip_model, device, dtype)
        streams.append((stream.folder, backbone, release.sampling(stream, backbone.resolution, args.scaler)))
    return streams


def _label_release(args, release, device, dtype):
    from tan.video.backbones import text_backbone
    from tan.video.release import label_release

    if not args.slowfast_model:
        raise TanError("--records-only needs --slowfast-model as well: the records hold the weights' digests")
    text = text_backbone("clip")(args.clip_model, device, dtype, max_length=release.text_tokens)
    folders = label_release(args.output, _release_streams(args, release, device, dtype), text, release.text_folder,
                            release.storage)
    print(f"extractor records of --preset {release.name} written into {', '.join(folders)}")


def _read_list(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise TanError(f"--video-list {path!r} cannot be read ({e})") from None


def cli():
    run_cli(main)
