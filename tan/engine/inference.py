"""Run a model over test loaders, gather predictions and report metrics."""
import json
import os
import time
from typing import Callable, NamedTuple

import torch

from ..data.formats import NOT_DROPPED
from ..data.formats.common import SCORED_AS_MISSES
from ..data.formats.ego4d_nlq import FORMAT as NLQ_FORMAT, NOT_ASKED as NLQ_NOT_ASKED
from ..data.formats.mad import FORMAT as MAD_FORMAT, NOT_ASKED as MAD_NOT_ASKED
from ..data.loaders import loader_without
from ..errors import TanError
from ..utils import comm
from ..utils.io import atomic_write_text
from ..utils.logger import get_logger
from ..utils.progress import progress
from ..utils.held_signals import signals_held
from ..structures.moments import best_window_iou
from ..config.choices import (DETR_METRIC_NAMES, DETR_METRICS, HIGHLIGHT_METRIC_NAMES, MAD_METRIC_NAMES, MAD_PREDICTED,
                              NLQ_METRIC_NAMES, RECALL_AT, metric_names)
from .evaluation import clip_saliency, evaluate_moments, format_table, top_candidates
from .long_video_metrics import mad_metrics, nlq_metrics
from .precision import autocast
from .step import forward_batch, move_batch
from .submission import nlq_submission_name, submission_name, write_nlq_submission, write_submission
from .window_metrics import (CLIP_SECONDS, MAX_WINDOWS, buckets_with_queries, clip_labels, detr_metrics,
                             highlight_metrics)
from .wrappers import unwrap


@torch.no_grad()
def compute_predictions(model, data_loader, device, nms_thresh, topk=5, amp="off", nms_units="seconds",
                        saliency=False):
    """Top moments of every query of this process's shard: {index: (moments, filled, scores, saliency)}
    on CPU; ``saliency`` [clips] (each 2-second clip's score, :func:`clip_saliency`) when asked, else None.

    ``nms_units``: TEST.NMS_UNITS, what the NMS measures IoU on (docs/metric.md §2)."""
    was_training = model.training
    model.eval()
    core = unwrap(model)
    outputs = {}
    for batch in progress(data_loader, total=len(data_loader), desc="evaluating", unit="batch"):
        batch = move_batch(batch, device)
        with autocast(amp, device):
            output = forward_batch(model, batch)
        durations = batch["durations"].to(device)
        candidates = core.candidates(output, durations)  # one row per query
        kept = top_candidates(candidates, nms_thresh, topk, units=nms_units)
        moments, kept_scores, filled = (t.cpu() for t in kept)  # one copy per batch
        clips = clip_saliency(candidates, durations, CLIP_SECONDS).cpu() if saliency else None
        counts = torch.ceil(durations / CLIP_SECONDS).long().clamp(min=1).tolist() if saliency else None
        for row, index in enumerate(batch["indices"].tolist()):
            outputs[index] = (moments[row], filled[row], kept_scores[row],
                              clips[row, :counts[row]] if saliency else None)
    model.train(was_training)
    return outputs


def _gather(predictions):
    """Merge every rank's predictions on rank 0; the sampler's padding repeats indices and drops out."""
    merged = {}
    for part in comm.all_gather(predictions):
        merged.update(part)
    return merged


def wants_detr_metrics(mode, dataset):
    """TEST.DETR_METRICS ``mode`` for ``dataset``: "on", "off", or "auto" (on for JSON-lines annotations)."""
    if mode not in DETR_METRICS:
        raise ValueError(f"TEST.DETR_METRICS must be one of {DETR_METRICS}, got {mode!r}")
    return mode == "on" or (mode == "auto" and dataset.annotation_format == "jsonl")


def _query_windows(dataset, indices):
    """Each query's own ground-truth windows [W_q, 2] (the dataset pads them to the most of any query)."""
    return [dataset.windows[i, :dataset.window_counts[i]] for i in indices]


def reported_metrics(mode, dataset):
    """The names of the metrics :func:`inference` reports on ``dataset`` with TEST.DETR_METRICS ``mode``."""
    names = metric_names()
    if wants_detr_metrics(mode, dataset) and dataset.labeled:
        buckets = buckets_with_queries(_query_windows(dataset, range(len(dataset))))  # an empty bucket has no figure
        names += [n for n in DETR_METRIC_NAMES if n.split("-")[1] in buckets]
        names += list(HIGHLIGHT_METRIC_NAMES) if dataset.saliency is not None else []
    if dataset.annotation_format == NLQ_FORMAT and dataset.labeled:
        names += list(NLQ_METRIC_NAMES)
    if dataset.annotation_format == MAD_FORMAT and dataset.labeled:
        names += list(MAD_METRIC_NAMES)
    return names


def predicted_per_query(dataset, detr):
    """How many moments inference keeps for each query of ``dataset``: as many as its figures read
    (MAD's R@100, Moment-DETR's mAP over up to MAX_WINDOWS, else R@5)."""
    if dataset.annotation_format == MAD_FORMAT:
        return MAD_PREDICTED
    return MAX_WINDOWS if detr else max(RECALL_AT)


def inference(model, data_loader, dataset_name, nms_thresh, device, output_folder=None, checkpoint=None, amp="off",
              nms_units="seconds", detr="off", windows=None, evaluations=None):
    """Evaluate one test loader (``nms_units``: TEST.NMS_UNITS; ``detr``: TEST.DETR_METRICS, Moment-DETR's
    metrics besides ours; ``windows``: a tan.engine.windowed_evaluation.WindowedEvaluation, which
    grounds the queries of the videos it selects by windows, or None). Returns the metrics dict on
    rank 0, None elsewhere. ``evaluations``: a dict that gets {dataset_name: :class:`Evaluation`} (None on
    other ranks), to write this evaluation's files again under another checkpoint's name."""
    logger = get_logger("inference")
    dataset = data_loader.dataset.by_query  # a loader of videos holds the queries' dataset
    detr = wants_detr_metrics(detr, dataset)
    # held-back labels: the submission gets clip saliency too, as the server scores highlights as well
    highlights = detr and (dataset.saliency is not None or not dataset.labeled)
    logger.info("evaluating on %s (%d queries)", dataset_name, len(dataset))
    start = time.perf_counter()
    topk = predicted_per_query(dataset, detr)
    chosen = windows.long_videos(dataset) if windows is not None else {}
    # the queries grounded by windows skip the whole-video pass, but for the clip saliency of highlights
    whole = data_loader if highlights or not chosen else loader_without(
        data_loader, [q for queries in chosen.values() for q in queries])
    predictions = _gather(compute_predictions(model, whole, device, nms_thresh, amp=amp, nms_units=nms_units,
                                              topk=topk, saliency=highlights)) if whole is not None else {}
    windowed = _windowed(model, dataset, dataset_name, windows, chosen, device, topk, predictions)
    if not comm.is_main_process():
        if evaluations is not None:
            evaluations[dataset_name] = None
        return None
    order = sorted(predictions)
    if order != list(range(len(dataset))):
        raise RuntimeError(f"predictions cover {len(order)} of {len(dataset)} queries of {dataset_name}")
    if not dataset.labeled:
        return _unlabeled(dataset, dataset_name, predictions, output_folder, checkpoint, detr, windowed,
                          evaluations)
    kept = torch.stack([predictions[i][0] for i in order])
    filled = torch.stack([predictions[i][1] for i in order])
    gt = torch.from_numpy(dataset.windows)  # [Q, W, 2]: every ground-truth window
    results = evaluate_moments(kept, filled, gt)
    if dataset.annotation_format == NLQ_FORMAT:
        results.update(nlq_results(dataset, predictions, order))
    if dataset.annotation_format == MAD_FORMAT:
        results.update(mad_results(dataset, predictions, order))
    buckets = {}
    if detr:
        results.update(detr_results(dataset, predictions, order, highlights))
        buckets = results.pop("MR-buckets")
    logger.info("%s: %d queries evaluated in %.1f s\n%s", dataset_name, len(order), time.perf_counter() - start,
                format_table(results, f"results on {dataset_name}:"))

    def write(folder, weights):
        record = dict(results, checkpoint=weights or "", num_queries=len(order))
        if windowed:
            record["windows"] = windowed
        if buckets:
            record["MR-buckets"] = buckets
        _write_results(folder, record, dataset, dataset_name, predictions, gt, detr)

    if output_folder:
        write(output_folder, checkpoint)
    if evaluations is not None:
        evaluations[dataset_name] = Evaluation(results, write)
    return results


class Evaluation(NamedTuple):
    """One evaluation of a model's weights on a dataset, on rank 0: its metrics and how to write its
    files (``write(output folder, checkpoint path)``) for any checkpoint holding those weights."""
    results: dict
    write: Callable[[str, str], None]


def _windowed(model, dataset, dataset_name, windows, chosen, device, topk, predictions):
    """Ground the queries of the ``chosen`` videos (``windows.long_videos``) by windows, into
    ``predictions`` (every rank holds the gathered ones; where the whole-video pass ran for them, for
    highlights' clip saliency, their moments are replaced and the saliency kept). Returns what was
    windowed (for metrics.json), or None when nothing was."""
    if not chosen:
        return None
    was_training = model.training
    model.eval()
    found = _gather(windows.predict(model, dataset, chosen, device, topk))
    model.train(was_training)
    for index, (moments, filled, scores, _) in found.items():
        predictions[index] = (moments, filled, scores, predictions[index][3] if index in predictions else None)
    described = windows.describe(chosen)
    get_logger("inference").info("%s: %d queries of %d videos longer than %.4g s grounded by windows of %.4g s "
                                 "every %.4g s", dataset_name, described["queries"], described["videos"],
                                 described["longer_than"], described["length"], described["stride"])
    return described


def _write_results(output_folder, record, dataset, dataset_name, predictions, gt, detr):
    """metrics.json (``record``), predictions.jsonl and, with Moment-DETR's metrics (``detr``) or for
    Ego4D NLQ, the submission file: every file new, or every one as it was."""
    with signals_held():
        atomic_write_text(os.path.join(output_folder, "metrics.json"), json.dumps(record, indent=2) + "\n")
        write_predictions(os.path.join(output_folder, "predictions.jsonl"), dataset, predictions, gt)
        if detr:
            write_submission(os.path.join(output_folder, submission_name(dataset_name)), dataset, predictions)
        if dataset.annotation_format == NLQ_FORMAT:
            write_nlq_submission(os.path.join(output_folder, nlq_submission_name(dataset_name)), dataset, predictions)


def _unlabeled(dataset, dataset_name, predictions, output_folder, checkpoint, detr, windowed=None,
               evaluations=None):
    """A split without labels: predictions and the submission file, no metric (an empty dict);
    ``windowed``: what was grounded by windows, recorded as for a labeled split."""
    logger = get_logger("inference")

    def write(folder, weights):
        record = {"labeled": False, "checkpoint": weights or "", "num_queries": len(predictions),
                  "note": "the annotation file has no labels: no metric; predictions and submission file only"}
        if windowed:
            record["windows"] = windowed
        _write_results(folder, record, dataset, dataset_name, predictions, None, detr)

    if output_folder:
        write(output_folder, checkpoint)
    if evaluations is not None:
        evaluations[dataset_name] = Evaluation({}, write)
    submission = (nlq_submission_name(dataset_name) if dataset.annotation_format == NLQ_FORMAT
                  else submission_name(dataset_name) if detr else "no submission file")
    logger.info("%s has no labels (%d queries): no metric; %s", dataset_name, len(predictions),
                f"predictions and {submission} written to {output_folder}" if output_folder else "nothing written")
    return {}


_PARTIAL_SALIENCY_WARNED = set()


def detr_results(dataset, predictions, order, highlights):
    """Moment-DETR's metrics of the kept moments (each query's filled slots, in rank order)."""
    listed = []
    for i in order:
        moments, filled, scores, _ = predictions[i]
        listed.append((moments[filled].double().numpy(), scores[filled].double().numpy()))
    results = detr_metrics(listed, _query_windows(dataset, order))
    if highlights:
        scored = [i for i in order if dataset.saliency[i] is not None]
        if len(scored) < len(order) and dataset.name not in _PARTIAL_SALIENCY_WARNED:  # once per dataset name
            _PARTIAL_SALIENCY_WARNED.add(dataset.name)
            get_logger("inference").warning(
                "%s: highlight detection is scored over the %d of %d queries that have saliency labels",
                dataset.name, len(scored), len(order))
        labels = [clip_labels(dataset.durations[i], *dataset.saliency[i]) for i in scored]
        results.update(highlight_metrics([predictions[i][3].double().numpy() for i in scored], labels))
    return results


def long_video_misses(dataset, not_asked, figures):
    """(queries the benchmark's evaluator itself scores as misses, queries that could not be evaluated)
    of ``dataset``'s annotation file: every query the reader or the dataset left out but those that ask
    nothing (``not_asked``: no sentence), so that the ``figures`` ("NLQ", "MAD") are over every query of
    the file, as their docs define them. The second kind (a clip without features, a sentence without
    a known word) are misses of tan's, not of the model's: a warning names the file and how many."""
    left_out = {reason: n for reason, n in dataset.dropped.items()
                if n and reason not in NOT_DROPPED and reason not in not_asked}
    scored = sum(n for reason, n in left_out.items() if reason in SCORED_AS_MISSES)
    unevaluated = {reason: n for reason, n in left_out.items() if reason not in SCORED_AS_MISSES}
    if unevaluated:
        get_logger("inference").warning(
            "%s: %d of the %d queries of %r could not be evaluated (%s) and count as misses in the %s figures, "
            "which are over every query of the file; tan-check-data says what left them out", dataset.name,
            sum(unevaluated.values()), len(dataset) + sum(left_out.values()), dataset.source,
            ", ".join(f"{reason} {n}" for reason, n in sorted(unevaluated.items())), figures)
    return scored, sum(unevaluated.values())


def nlq_results(dataset, predictions, order):
    """Ego4D NLQ's figures (its evaluator's arithmetic, tan.engine.long_video_metrics) of the kept
    moments, named NLQ-*, over every query of the file with a sentence: those the reader or the
    dataset left out (a window of no length, which the evaluator scores as a miss; a clip without
    features) count as misses. NLQ-queries: how many queries the figures are over."""
    listed = []
    for i in order:
        moments, filled = predictions[i][0], predictions[i][1]
        if not filled.any():
            raise TanError(f"{dataset.name}: query {dataset.qids[i]!r} has no predicted moment; Ego4D NLQ's "
                           f"figures need one for every query")
        listed.append(moments[filled].double().numpy())
    empty, unevaluated = long_video_misses(dataset, NLQ_NOT_ASKED, "NLQ")
    figures = nlq_metrics(listed, [dataset.moments[i] for i in order], empty_windows=empty, misses=unevaluated)
    result = {f"NLQ-{name}": figures[name] for name in (n[len("NLQ-"):] for n in NLQ_METRIC_NAMES)}
    result["NLQ-queries"] = figures["evaluated"]
    return result


def mad_results(dataset, predictions, order):
    """MAD's figures (its baselines' evaluation arithmetic, tan.engine.long_video_metrics) of each
    query's top MAD_PREDICTED kept moments, named MAD-*, over every query of the file with a sentence
    and a movie: those the reader or the dataset left out (a window of no length, a movie without
    features) count as misses; MAD-queries: how many queries they are over."""
    listed = [predictions[i][0][predictions[i][1]].double().numpy() for i in order]
    figures = mad_metrics(listed, [dataset.moments[i] for i in order],
                          misses=sum(long_video_misses(dataset, MAD_NOT_ASKED, "MAD")))
    result = {name: figures[name[len("MAD-"):]] for name in MAD_METRIC_NAMES}
    result["MAD-queries"] = figures["evaluated"]
    return result


def write_predictions(path, dataset, predictions, gt=None):
    """One JSON line per query: video, sentence, duration, ground truth (``gt``, the first
    window; ``gt_windows`` too where a query has several), and the kept top moments
    (seconds) with their scores and IoU with the ground truth (its best window). Without
    ``gt`` (a split without labels) the lines have no ground truth and no IoU."""
    lines = []
    for index in sorted(predictions):
        moments, filled, scores, _ = predictions[index]
        moments, scores = moments[filled], scores[filled]
        record = {"index": index, "video": dataset.videos[dataset.video_ids[index]],
                  "sentence": dataset.sentences[index], "duration": round(float(dataset.durations[index]), 4)}
        if gt is not None:
            count = int(dataset.window_counts[index])
            record["gt"] = [round(float(x), 4) for x in gt[index][0]]
            if count > 1:
                record["gt_windows"] = [[round(float(x), 4) for x in w] for w in gt[index][:count]]
        record["moments"] = [[round(float(a), 4), round(float(b), 4)] for a, b in moments.tolist()]
        record["scores"] = [round(float(x), 6) for x in scores.tolist()]
        if gt is not None:
            ious = best_window_iou(moments, gt[index][None]) if len(moments) else torch.zeros(0)
            record["ious"] = [round(float(x), 4) for x in ious.tolist()]
        lines.append(json.dumps(record))
    atomic_write_text(path, "\n".join(lines) + "\n")
