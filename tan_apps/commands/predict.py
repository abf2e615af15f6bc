"""Top moments of sentences in videos, from a trained model.

Either sentences about one video (--query, repeatable), or a file of
unlabelled queries (--queries: JSON lines with "vid" and "query", optional
"qid" and "duration"; "video" and "sentence" are read too, so a
Moment-DETR / lighthouse annotation file works as it is).

A video's features come from --video-file (a video file, its features made
as the training features were: the checkpoint records the extractors of
tan-extract-features), from --features (an HDF5 file or a folder of
per-video .npy/.npz files holding the videos, or for one video a .npy or
.npz array [T, D_in]) or else from the configured datasets' features; its duration from --duration, the query line, or
the configured annotations. A checkpoint saved by tan carries its config,
so --ckpt alone suffices; --config-file alone uses the latest checkpoint of
its OUTPUT_DIR.

Output: text (one video), --json, or JSON lines (--output FILE, or stdout for
--queries) in our format ("tan": qid, video, sentence, duration, moments,
scores) or the Moment-DETR / lighthouse one ("lighthouse": qid, query, vid,
pred_relevant_windows as [start, end, score]).

Examples:
  tan-predict --ckpt outputs/synthetic/model_final.pth --video syn_test_0003 --query "the person closes the box."
  tan-predict --ckpt outputs/tacos/model_final.pth --video s13-d21.avi \\
      --query "the person rinses the knife" --query "he cuts the onion" --topk 3
  tan-predict --ckpt outputs/synthetic/model_final.pth --features clip.npy --duration 61.5 \\
      --query "person opens door" --json
  tan-predict --ckpt outputs/2dtan_synthetic_videos/model_final.pth --video-file cooking.mp4 \\
      --query "the red circle moves left."
  tan-predict --ckpt outputs/synthetic/model_final.pth --queries queries.jsonl --topk 10 \\
      --format lighthouse --output predictions.jsonl
"""
import argparse
import json
import os
import sys
from collections import OrderedDict

from tan.api import Grounder
from tan.data import ALL_SPLITS, RunData, VideoSource
from tan.engine.precision import amp_is_emulated, slow_amp_warning
from tan.engine.prediction import empty_sentence_message, has_a_word, load_trained_model
from tan.evaluation.moment_detr import submission_record
from tan.errors import TanError, UnknownVideoError
from tan.utils.checkpoint_file import read_checkpoint, stored_extractors, stored_trained_span
from tan.utils.io import atomic_write_text
from tan.utils.logger import get_logger, setup_logger
from tan_apps.cli.arguments import ConfigArgumentParser, add_overrides
from tan_apps.cli.checkpoints import one_checkpoint
from tan_apps.cli import signal_exits
from tan_apps.cli.exit_codes import run_cli
from tan.engine.setup import resolve_device

FORMATS = ("tan", "lighthouse")


def build_parser():
    parser = ConfigArgumentParser(description="Find the moments that sentences describe in videos.",
                                  epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", default="", metavar="PATH",
                        help="checkpoint (default: the latest in --config-file's OUTPUT_DIR, else MODEL.WEIGHT)")
    parser.add_argument("--config-file", default=None, metavar="FILE",
                        help="the config the model was trained with (default: the one stored in --ckpt)")
    asked = parser.add_mutually_exclusive_group(required=True)
    asked.add_argument("--query", action="append", metavar="SENTENCE",
                       help="a sentence to ground in --video / --features; repeat for several")
    asked.add_argument("--queries", metavar="FILE",
                       help='JSON lines of unlabelled queries: {"vid": ..., "query": ..., "qid": ..., "duration": ...}')
    parser.add_argument("--video", default="", metavar="ID", help="video id in the configured (or --features) file")
    parser.add_argument("--features", default="", metavar="FILE",
                        help="features given directly: an HDF5 file or a folder of per-video .npy/.npz holding "
                             "the videos (with --video), or a .npy/.npz holding one video's [T, D_in]")
    parser.add_argument("--video-file", default="", metavar="VIDEO",
                        help="a video file: its features are made by the extractors the training features came "
                             "from (recorded in the checkpoint by tan-extract-features; the video extra)")
    parser.add_argument("--extractor-model", action="append", default=[], metavar="NAME=FOLDER",
                        help="with --video-file (or new sentences for a model trained on sentence features): "
                             "where a recorded extractor model (its recorded name or folder name) is now")
    parser.add_argument("--feature-key", default=None, metavar="KEY",
                        help="the array's name: in a group-per-video HDF5 (default c3d_features) or in .npz "
                             "files (default features)")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="video duration (default: from the query line or the configured annotations)")
    parser.add_argument("--topk", type=int, default=5, help="moments per sentence after NMS (default 5)")
    parser.add_argument("--json", action="store_true", help="one video: print JSON instead of text")
    parser.add_argument("--output", default="", metavar="FILE", help="write JSON lines to FILE (atomically)")
    parser.add_argument("--format", choices=FORMATS, default="tan",
                        help="JSON-lines format of --output / --queries output (default tan)")
    add_overrides(parser, "MODEL.DEVICE cpu TEST.NMS_THRESH 0.5")
    return parser


def read_queries(path):
    """The queries of a JSON-lines file: [{qid, vid, query, duration or None, line}], in file order.
    qid defaults to the query's 0-based position in the file."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        raise TanError(f"--queries file {path!r} not found") from None
    except UnicodeDecodeError as e:
        raise TanError(f"--queries file {path!r} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    queries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as e:
            raise TanError(f"{where}: not a JSON object ({e})") from None
        if not isinstance(record, dict):
            raise TanError(f"{where}: expected a JSON object, got {type(record).__name__}")
        video = record.get("vid", record.get("video"))
        sentence = record.get("query", record.get("sentence"))
        if not isinstance(video, str) or not video:
            raise TanError(f'{where}: expected a video id as "vid" (or "video"), a non-empty string')
        if not isinstance(sentence, str):
            raise TanError(f'{where}: expected a sentence as "query" (or "sentence"), a string')
        if not has_a_word(sentence):
            raise TanError(f'{where}: {empty_sentence_message(sentence, "the query")}')
        duration = record.get("duration")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                     or not duration > 0):
            raise TanError(f'{where}: "duration" must be a positive number of seconds, got {duration!r}')
        qid = record.get("qid", len(queries))
        if isinstance(qid, bool) or not isinstance(qid, (int, str)):
            raise TanError(f'{where}: "qid" must be a number or a string, got {qid!r}')
        queries.append({"qid": qid, "vid": video, "query": sentence,
                        "duration": duration, "line": where})
    if not queries:
        raise TanError(f"--queries file {path!r} holds no query")
    return queries


def extractor_models(pairs):
    """{recorded name: folder} of --extractor-model NAME=FOLDER options."""
    models = {}
    for pair in pairs:
        name, sep, folder = pair.partition("=")
        if not sep or not name or not folder:
            raise TanError(f"--extractor-model {pair!r}: expected NAME=FOLDER (the recorded model name, or its "
                           f"folder's name, and where that model is now)")
        models[name] = folder
    return models


def prediction_record(fmt, qid, video, sentence, duration, moments):
    """One JSON-lines record; ``moments``: [(start, end, score)] in seconds, best first."""
    if fmt == "lighthouse":  # Moment-DETR's submission line, rounded for reading
        return submission_record(qid, sentence, video, [(round(s, 4), round(e, 4), round(p, 6)) for s, e, p in moments])
    return {"qid": qid, "video": video, "sentence": sentence, "duration": round(duration, 4),
            "moments": [[round(s, 4), round(e, 4)] for s, e, _ in moments],
            "scores": [round(p, 6) for _, _, p in moments]}


class Videos:
    """Features and durations of the videos asked about: --features and given durations
    first; the configured datasets are read only for what those do not give."""

    def __init__(self, cfg, args):
        self.cfg, self.args = cfg, args
        self._configured = None

    @property
    def configured(self):
        if self._configured is None:
            self._configured = VideoSource(RunData(self.cfg, splits=ALL_SPLITS))
        return self._configured

    def features(self, video):
        """[T, D_in] of ``video`` ("" for the one video of a .npy or .npz file)."""
        if self.args.features:
            return VideoSource(None).features(video, self.args.features, self.args.feature_key)
        return self.configured.features(video)

    def encoded(self, model, video, duration, where):
        """``video`` encoded by ``model``: the --video-file, or the features and duration found for it."""
        if self.args.video_file:
            return model.encode_video_file(self.args.video_file)
        try:
            features = self.features(video)
        except UnknownVideoError as e:  # name the line that asked for it
            raise TanError(f"{where}: {e}" if where else str(e)) from None
        return model.encode_video(features, self.duration(video, duration, where))

    def duration(self, video, given, where):
        """Seconds: ``given`` (--duration or the query line's), else the configured annotations."""
        if given is not None:
            return given
        found = self.configured.duration(video) if video else None
        if found is None:
            how = 'add a "duration" field' if where else "pass --duration SECONDS"
            raise TanError(f"{where + ': ' if where else ''}no duration for video {video or self.args.features!r} "
                           f"in the configured annotations; {how}")
        return found


def check_arguments(args):
    """The combinations of options that make no sense, each refused with what to give instead."""
    if args.topk < 1:
        raise TanError(f"--topk must be at least 1, got {args.topk}")
    for number, sentence in enumerate(args.query or (), 1):
        if not has_a_word(sentence):
            raise TanError(empty_sentence_message(sentence, f"--query {number}"))
    if args.queries and args.features.endswith((".npy", ".npz")) and not os.path.isdir(args.features):
        raise TanError(f"--features {args.features} holds one video; with --queries give an HDF5 file or a folder "
                       f"holding the videos, or none to read the configured datasets")
    if args.queries and (args.video or args.duration is not None):
        raise TanError('--video and --duration are for --query sentences; --queries lines name their own video '
                       '("vid") and may give its "duration"')
    if args.video_file and (args.queries or args.video or args.features or args.duration is not None):
        raise TanError("--video-file takes --query sentences and reads the video's duration itself; it goes "
                       "without --queries, --video, --features and --duration")
    if args.query and not (args.video or args.features or args.video_file):
        raise TanError("give --video ID (a video of the configured datasets), --features FILE or --video-file VIDEO")
    if args.video_file and not os.path.isfile(args.video_file):
        raise TanError(f"--video-file {args.video_file!r} not found")


def main(argv=None):
    args = build_parser().parse_args(argv)
    signal_exits.now_doing("predicting", "no output was written")
    check_arguments(args)
    models = extractor_models(args.extractor_model)
    setup_logger(None, stream=sys.stderr)  # stdout carries the answer
    cfg, checkpoint, _ = one_checkpoint(args.ckpt, args.config_file, args.opts)
    device = resolve_device(cfg.MODEL.DEVICE)
    if amp_is_emulated(cfg.SOLVER.AMP, device):
        get_logger("predict").warning("%s", slow_amp_warning(cfg.SOLVER.AMP))
    if args.queries:
        asked = read_queries(args.queries)
    else:
        asked = [{"qid": q, "vid": args.video, "query": s, "duration": args.duration, "line": ""}
                 for q, s in enumerate(args.query)]
    stored = read_checkpoint(checkpoint)
    model = Grounder(load_trained_model(cfg, checkpoint, device), cfg, device, checkpoint, stored_extractors(stored),
                     models, stored_trained_span(stored))
    videos = Videos(cfg, args)
    for query in asked if args.queries else ():  # a sentence with no known word stops the run, naming its line
        try:
            model.encode_sentences([query["query"]])
        except TanError as e:
            raise TanError(f"{query['line']}: {e}") from None
    by_video = OrderedDict()  # a video with a duration of its own per line is encoded per duration
    for query in asked:
        by_video.setdefault((query["vid"], query["duration"]), []).append(query)
    answers = ground_all(model, videos, by_video, args.topk)
    get_logger("predict").info("%d queries over %d videos, checkpoint %s", len(asked),
                               len({video for video, _ in by_video}), checkpoint)
    name = args.video or args.features or args.video_file
    records = [prediction_record(args.format, q["qid"], q["vid"] or name, q["query"], *answers[id(q)]) for q in asked]
    if args.output:
        atomic_write_text(args.output, "".join(json.dumps(r) + "\n" for r in records))
        get_logger("predict").info("wrote %d predictions (%s format) to %s", len(records), args.format, args.output)
    if args.queries:
        if not args.output:
            sys.stdout.write("".join(json.dumps(r) + "\n" for r in records))
        return records
    report = {"video": name, "duration": answers[id(asked[0])][0], "checkpoint": checkpoint, "queries": [
        {"sentence": q["query"],
         "moments": [{"start": round(s, 3), "end": round(e, 3), "score": round(p, 6)} for s, e, p in answers[id(q)][1]]}
        for q in asked]}
    if not args.output:
        print(json.dumps(report, indent=2) if args.json else format_text(report))
    return report


def ground_all(model, videos, by_video, topk):
    """{id(query): (duration, [(start, end, score)])}: each video encoded once, its sentences in batches."""
    answers = {}
    for (video, duration), queries in by_video.items():
        encoded = videos.encoded(model, video, duration, queries[0]["line"])
        for query, moments in zip(queries, model.ground(encoded, [q["query"] for q in queries], topk)):
            answers[id(query)] = (encoded.duration, [(m.start, m.end, m.score) for m in moments])
    return answers


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
