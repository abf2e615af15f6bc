"""What the data of a run looks like, and whether training could start on it
(``tan-check-data``, docs/data.md §10).

For each configured dataset: the files found, the queries read, kept and
dropped by reason, the videos without features, each feature stream's
widths and lengths, and how much of the sentences the text input covers.
Problems that would stop training are collected, not raised, so that one
run of the checker lists them all; the dataset is then built exactly as
training builds it, so the kept and dropped counts are training's own.
"""
import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..config.architecture import feature_size
from ..errors import TanError
from ..utils.logger import get_logger
from .formats import NOT_DROPPED
from .dataset import MISSING_VIDEO, named
from .loaders import unlabeled_message
from .overlap import run_overlaps
from .features.provenance import describe_extractor, read_extractor
from .features.sources import open_source, stream_lengths_agree, streams_of

EXAMPLES = 5  # videos named per finding


@dataclass
class StreamReport:
    path: str
    kind: str
    videos: int = 0  # of the annotations' videos, those the stream holds
    widths: dict = field(default_factory=dict)  # width: videos
    lengths: tuple = ()  # (min, median, max) rows
    missing: list = field(default_factory=list)  # the annotations' videos it lacks
    not_2d: list = field(default_factory=list)  # videos whose array is not [T, D]
    made_by: str = ""  # the extractor that its record (extractor.json) names, if it has one


@dataclass
class DatasetReport:
    name: str
    files: list = field(default_factory=list)  # (what, path, found)
    records: int = 0  # queries read from the annotations (before the dataset's own checks)
    kept: int = None
    dropped: dict = field(default_factory=dict)  # reason: queries
    videos: int = 0
    streams: list = field(default_factory=list)
    without_features: list = field(default_factory=list)
    unusable_features: dict = field(default_factory=dict)  # reason (NaN, no rows): videos left out for it
    text: str = ""
    labeled: bool = True  # False: a split released without labels (evaluated into a submission file only)
    problems: list = field(default_factory=list)  # what would stop training
    annotations_read: bool = False  # its annotation file was found and parsed
    not_built: str = ""  # why the dataset was not built although its own files are fine


def _stream_report(path, key, videos):
    source = open_source(path, key)
    shapes = source.shapes(sorted(videos))
    lengths = sorted(shape[0] for shape in shapes.values() if len(shape) == 2)
    return StreamReport(path=path, kind=source.kind, videos=len(shapes),
                        widths=dict(Counter(shape[1] for shape in shapes.values() if len(shape) == 2)),
                        not_2d=sorted(v for v, shape in shapes.items() if len(shape) != 2),
                        lengths=(lengths[0], float(np.median(lengths)), lengths[-1]) if lengths else (),
                        missing=sorted(set(videos) - set(shapes)), made_by=_made_by(path)), shapes


def _made_by(path):
    record = read_extractor(path)
    return describe_extractor(record) if record else ""


def _check_streams(report, entry, videos, run_data):
    """Per stream: widths and lengths; then the widths against the config and the streams' lengths
    against each other."""
    cfg = run_data.cfg
    stream_shapes = []
    for path, key in streams_of(entry["features"], entry.get("feature_key")):
        stream, shapes = _stream_report(path, key, videos)
        report.streams.append(stream)
        stream_shapes.append(shapes)
        if len(stream.widths) > 1:
            report.problems.append(f"{stream.kind} {path!r}: videos of different widths {dict(stream.widths)} "
                                   f"(width: videos)")
        if stream.not_2d:
            report.problems.append(f"{stream.kind} {path!r}: {len(stream.not_2d)} videos whose array is not "
                                   f"[T, D]: {', '.join(stream.not_2d[:EXAMPLES])}")
    report.without_features = sorted(set().union(*(s.missing for s in report.streams)))
    expected, expected_key = feature_size(cfg, run_data.declared.model)
    widths = [next(iter(s.widths)) if len(s.widths) == 1 and not s.not_2d else None for s in report.streams]
    if None not in widths and report.streams and sum(widths) != expected:
        parts = " + ".join(f"{w} ({os.path.basename(s.path)})" for w, s in zip(widths, report.streams))
        report.problems.append(f"feature width {parts}{' = ' + str(sum(widths)) if len(widths) > 1 else ''}; the "
                               f"config expects {expected} ({expected_key})")
    if len(stream_shapes) > 1:
        tolerance = cfg.INPUT.FEATURE_LENGTH_TOLERANCE
        common = set.intersection(*(set(s) for s in stream_shapes))
        lengths = {v: [s[v][0] for s in stream_shapes] for v in common}
        # a stream without rows drops the video (counted), it does not stop the run
        off = sorted(v for v, ls in lengths.items() if min(ls) > 0 and not stream_lengths_agree(ls, tolerance))
        if off:
            examples = ", ".join(f"{v} ({'/'.join(str(s[v][0]) for s in stream_shapes)} rows)" for v in off[:EXAMPLES])
            report.problems.append(f"{len(off)} videos whose streams' lengths differ by more than "
                                   f"INPUT.FEATURE_LENGTH_TOLERANCE = {cfg.INPUT.FEATURE_LENGTH_TOLERANCE}: {examples}")


def check_dataset(run_data, name, build=True):
    """The :class:`DatasetReport` of dataset ``name`` of ``run_data`` (a :class:`~tan.data.RunData`);
    ``build`` False stops before the dataset is built (its sentences cannot be encoded)."""
    report = DatasetReport(name)
    try:
        entry = run_data.entry(name)
        if entry.get("generator"):
            run_data.prepare()
        report.files = [(key, path, os.path.exists(path)) for key, path in run_data.named_files(entry)]
        missing = [f"{what} {path!r} not found" for what, path, found in report.files if not found]
        if missing:
            report.problems += missing
            return report
        queries, _ = run_data.queries(name)
        report.records = len(queries)
        report.annotations_read = True
        videos = {q.video for q in queries}
        report.videos = len(videos)
        _check_streams(report, entry, videos, run_data)
    except TanError as e:
        report.problems.append(str(e))
    if build and not report.problems:
        build_dataset(run_data, report)
    return report


def build_dataset(run_data, report):
    """Build ``report``'s dataset exactly as training builds it, so that its kept and dropped counts
    are training's own; what stops it goes into the report's problems."""
    name = report.name
    try:
        dataset = run_data.dataset(name)
        report.kept, report.dropped = len(dataset), dict(dataset.dropped)
        report.unusable_features = {reason: videos for reason, videos in dataset.videos_left_out.items()
                                    if reason != MISSING_VIDEO}  # those are listed as without features
        report.text = run_data.text_input.summary(dataset)
        report.labeled = dataset.labeled
        trained_on = [key for key in ("TRAIN", "VAL") if name in run_data.cfg.DATASETS[key]]
        if not dataset.labeled and trained_on:
            report.problems.append(unlabeled_message(name, f"DATASETS.{trained_on[0]}", "trained or validated on"))
    except TanError as e:
        report.problems.append(str(e))


def check_run(run_data):
    """([DatasetReport] of every configured dataset, [problems of the run as a whole])."""
    problems = list(run_data.text_input.problems())
    if not run_data.names:
        problems.append("no dataset configured (DATASETS.TRAIN / VAL / TEST)")
    # Every dataset's files and annotations first: a text input may encode each dataset with what it
    # read from all of them (the vocabulary of the word vectors), so one unreadable annotation file
    # keeps every dataset from being built, and is reported under its own dataset only.
    reports = [check_dataset(run_data, name, build=False) for name in run_data.names]
    unread = [r.name for r in reports if not r.annotations_read]
    for report in reports:
        if report.problems:
            continue
        if problems:  # without the word vectors the datasets cannot be built
            report.not_built = "the run's problems below"
        elif unread:
            report.not_built = f"the annotations of {', '.join(unread)} could not be read (above)"
        else:
            build_dataset(run_data, report)
    if not problems:
        for warning in run_data.extractor_warnings():
            get_logger("data").warning("%s", warning)
    return reports, problems


def check_overlaps(run_data, reports):
    """(the training / evaluation :class:`~tan.data.overlap.SplitOverlap` pairs of the run, the names of the
    datasets whose annotations could not be read: then no pair is checked, their reports say why)."""
    unread = sorted({r.name for r in reports if not r.annotations_read})
    if unread:
        return [], unread
    return run_overlaps(run_data), []


def format_overlaps(overlaps, unread=()):
    """The split-hygiene section of the report: each pair's findings, or why it was not checked."""
    if unread:
        return ["", f"training / evaluation splits: not checked, the annotations of {', '.join(unread)} could "
                    f"not be read (above)"]
    if not overlaps:
        return []
    lines = ["", "training / evaluation splits:"]
    for o in overlaps:
        found = o.describe()
        lines.append(f"  {o.trained} / {o.evaluated}: {'OVERLAP' if found else 'no shared video or query'}")
        lines += [f"    - {line}" for line in found]
        if not o.same_file:
            lines.append(f"    ({o.sentences} of {o.evaluated_sentences} distinct sentences also occur in training, "
                         f"on other videos: information only, generic sentences recur across real splits)")
    return lines


def _lengths(stream):
    if not stream.lengths:
        return "no video"
    shortest, median, longest = stream.lengths
    return f"length {shortest} / {median:g} / {longest} rows (min / median / max)"


def format_report(reports, problems):
    """The report as text: one block per dataset, then every problem."""
    lines = []
    for r in reports:
        lines.append(f"dataset {r.name}")
        for what, path, found in r.files:
            lines.append(f"  {what:<14}{path}  {'found' if found else 'NOT FOUND'}")
        if r.records or r.videos:
            lines.append(f"  {'videos':<14}{r.videos} in the annotations; {len(r.without_features)} without "
                         f"features{': ' + ', '.join(r.without_features[:EXAMPLES]) if r.without_features else ''}"
                         f"{' ...' if len(r.without_features) > EXAMPLES else ''}")
        for reason, videos in r.unusable_features.items():
            lines.append(f"  {'':<14}{len(videos)} left out, {reason}: {named(videos, EXAMPLES)}")
        for s in r.streams:
            widths = ", ".join(str(w) for w in sorted(s.widths, key=str)) or "-"
            lines.append(f"  {'stream':<14}{os.path.basename(s.path.rstrip(os.sep))} ({s.kind}): {s.videos} videos, "
                         f"width {widths}, {_lengths(s)}"
                         f"{', missing ' + str(len(s.missing)) if s.missing else ''}")
            if s.made_by:
                lines.append(f"  {'':<14}made by {s.made_by}")
        if r.kept is not None:
            dropped = sum(n for k, n in r.dropped.items() if k not in NOT_DROPPED)
            lines.append(f"  {'queries':<14}{r.kept} kept, {dropped} dropped"
                         + ("" if r.labeled else "; no labels: evaluated into a submission file only"))
            for reason, count in sorted(r.dropped.items(), key=lambda kv: (-kv[1], kv[0])):
                note = "a window or moment, not a query" if reason in NOT_DROPPED else "dropped"
                lines.append(f"  {'':<14}  {count:>7}  {reason} ({note})")
        elif r.records:
            why = r.not_built or "see the problems"
            lines.append(f"  {'queries':<14}{r.records} read from the annotations (not built: {why})")
        if r.text:
            lines.append(f"  {'text':<14}{r.text}")
    all_problems = problems + [f"{r.name}: {p}" for r in reports for p in r.problems]
    lines.append("")
    if all_problems:
        lines.append(f"{len(all_problems)} problem(s) would stop training:")
        lines += [f"  - {p}" for p in all_problems]
    else:
        lines.append("no problem found: training can start on this data")
    return "\n".join(lines), all_problems
