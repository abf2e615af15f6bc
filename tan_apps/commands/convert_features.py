"""Convert clip features between an HDF5 file and a folder of per-video files.

SRC is an HDF5 file (a dataset per video, or a group per video holding a
dataset named --key) or a folder of {video}.npy / {video}.npz files (the
array of each .npz named --key). DST is written as an HDF5 file when its name
ends in .h5, .hdf5 or .hdf, else as a folder; --to says otherwise. HDF5 to
HDF5 re-lays a file out, folder to folder changes the file format or dtype.

What is not given follows SRC where it can (an HDF5 file keeps its layout and
group key, a folder its file format and .npz key), else: flat HDF5, .npy
files, keys c3d_features (HDF5 groups) and features (.npz). Values are
copied bit for bit unless --dtype says otherwise. DST appears complete or not
at all: it is written under a temporary name beside it and renamed when
done; an existing DST is replaced only with --overwrite, and is left as it
was if the conversion fails or is stopped (Ctrl-C, SIGTERM). The copy that a
conversion killed outright (SIGKILL) leaves is removed by the next conversion
to the same DST, which says so.

Examples:
  tan-convert-features features.hdf5 features/
  tan-convert-features features.hdf5 features_npz/ --format npz
  tan-convert-features clip/ clip.hdf5 --layout grouped --out-key c3d_features
  tan-convert-features activitynet.hdf5 activitynet_flat.hdf5 --layout flat --dtype float16
  tan-convert-features features.hdf5 val_features/ --videos val_videos.txt
"""
import argparse
import os

from tan_apps.converters.features import DTYPES, FILE_FORMATS, LAYOUTS, TARGETS, convert_features, read_video_list
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli


def _choices(values):
    return "{" + ",".join(values) + "}"


def build_parser():
    # The choices are checked by tan_apps.converters.features, so that Python callers get the same errors.
    parser = argparse.ArgumentParser(description="Convert clip features between HDF5 files (either layout) and "
                                                 "folders of per-video .npy/.npz files.",
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", metavar="SRC", help="HDF5 file or folder of per-video .npy/.npz files")
    parser.add_argument("dst", metavar="DST", help="HDF5 file (.h5/.hdf5/.hdf) or folder to write")
    parser.add_argument("--to", metavar=_choices(TARGETS), help="write DST as this kind (default: from DST's name)")
    parser.add_argument("--layout", metavar=_choices(LAYOUTS),
                        help="HDF5 output: a dataset per video (flat) or a group per video holding --out-key "
                             "(grouped); default: SRC's layout, else flat")
    parser.add_argument("--key", metavar="KEY",
                        help="the array's name in SRC's groups (default c3d_features) or .npz files (default "
                             "features)")
    parser.add_argument("--out-key", metavar="KEY",
                        help="the array's name in DST's groups or .npz files (default: SRC's key where SRC has "
                             "one of the same kind, else c3d_features / features)")
    parser.add_argument("--format", dest="file_format", metavar=_choices(FILE_FORMATS),
                        help="folder output: one .npy or .npz per video (default: SRC folder's format, else npy)")
    parser.add_argument("--dtype", default="keep", metavar=_choices(DTYPES),
                        help="dtype written (default keep: as stored, bit for bit)")
    parser.add_argument("--videos", metavar="FILE", help="convert only the video ids of FILE, one a line")
    parser.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    kept = (f"{args.dst} is untouched" if os.path.lexists(args.dst) else f"nothing was written to {args.dst}")
    signal_exits.now_doing("converting features", f"{kept} and the partial copy is removed")
    videos = read_video_list(args.videos) if args.videos else None
    summary = convert_features(args.src, args.dst, to=args.to, layout=args.layout, key=args.key,
                               out_key=args.out_key, file_format=args.file_format, dtype=args.dtype, videos=videos,
                               overwrite=args.overwrite)
    print(summary.text(), flush=True)
    return summary


def cli():
    run_cli(main)
