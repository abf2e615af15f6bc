"""Ask a trained model about one video: sentences in, top moments (seconds) out.

The inputs (a video's features and duration, sentences as word vectors) come
from tan.data (VideoSource, SentenceEncoder); this module runs the model on
them and keeps the top moments as the evaluation does. The video's 2D map is
computed once and shared by every sentence asked about it."""
import numpy as np
import torch

from ..config.architecture import feature_size
from ..data.collate import pad_sentences
from ..errors import TanError
from ..modeling import build_model
from ..utils.checkpoint_file import load_model_weights, model_state_from, read_checkpoint
from ..evaluation.selection import top_candidates
from .precision import autocast
from .long_videos.relevance_stage import check_top_k, relevance_stage
from .long_videos.windows import ground_in_windows
from .wrappers import prepare_model, unwrap

# Sentences scored against one video per forward pass: bounds the memory of the
# fused maps ([S, H, N, N]: 32 MB per sentence for the TACoS model in float32).
SENTENCE_BATCH = 32


def load_trained_model(cfg, checkpoint, device):
    """The model of ``cfg`` with the weights of ``checkpoint``, on ``device``, in eval mode."""
    model = build_model(cfg)
    load_model_weights(model, model_state_from(read_checkpoint(checkpoint), checkpoint), checkpoint)
    return prepare_model(cfg, model.to(device)).eval()


def checked_features(model, cfg, feats):
    """Raw clip features [T, D_in] (array or tensor) as float32 numpy, refused with what ``model``
    expects when their shape or values cannot be a video's."""
    feats = feats.detach().cpu().numpy() if torch.is_tensor(feats) else np.asarray(feats)
    expected, expected_key = feature_size(cfg, unwrap(model))
    if feats.ndim != 2 or feats.shape[1] != expected or feats.shape[0] == 0:
        raise TanError(f"features of shape {tuple(feats.shape)}; expected [T, {expected}] "
                       f"({expected_key}) with T >= 1")
    feats = feats.astype(np.float32, copy=False)
    bad = np.flatnonzero(~np.isfinite(feats).all(axis=1))
    if len(bad):
        raise TanError(f"the video's features hold NaN or infinite values in {len(bad)} of their {len(feats)} rows "
                       f"(first: row {bad[0]}); make them again")
    return feats


def prepare_features(model, cfg, feats):
    """Raw clip features [T, D_in] (array or tensor) -> (the model's input [P, D_in], its real
    rows), as the datasets prepare an evaluation item (the clip input ``model`` declares: by
    default L2-normalised rows resampled to NUM_PRE_CLIPS)."""
    feats = checked_features(model, cfg, feats)
    clips = unwrap(model).clip_input(cfg)
    rows, _, count = clips.take(clips.base(feats))
    return torch.from_numpy(np.ascontiguousarray(rows)), count


def clip_lengths(model, cfg, counts, device):
    """{"clip_counts": [V]} for a model whose clip input has a variable length, else {}."""
    if not unwrap(model).clip_input(cfg).variable_length:
        return {}
    return {"clip_counts": torch.as_tensor(counts, dtype=torch.long, device=device)}


def check_sentences(sentences):
    """Sentences to ground: each a string with at least one letter or digit. An empty or blank one
    is refused the same way by every tool (tan-predict, the API, the demo): a model that reads
    sentence features would otherwise score it as any sentence, and answer confidently."""
    for number, sentence in enumerate(sentences, 1):
        if not isinstance(sentence, str):
            raise TanError(f"sentence {number}: expected a string, got {type(sentence).__name__}")
        if not has_a_word(sentence):
            raise TanError(empty_sentence_message(sentence, f"sentence {number}"))
    return sentences


def has_a_word(sentence):
    """Whether ``sentence`` holds a letter or a digit (of any script)."""
    return any(c.isalnum() for c in sentence)


def empty_sentence_message(sentence, where):
    """What every tool says of a sentence without a word (``where``: which sentence it is)."""
    return f"{where} {sentence!r} has no word: give a sentence to ground, with at least one word"


def check_duration(duration):
    """A video duration in seconds: a positive finite number."""
    try:
        value = float(duration)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value > 0):
        raise TanError(f"the video's duration must be a positive number of seconds, got {duration!r}")
    return value


@torch.no_grad()
def encode_video(model, cfg, feats, device):
    """The video's 2D map of candidate moments [1, H, N, N] on ``device``: computed once, asked many times."""
    rows, count = prepare_features(model, cfg, feats)
    with autocast(cfg.SOLVER.AMP, device):
        return model.encode_video(rows[None].to(device), **clip_lengths(model, cfg, [count], device))


@torch.no_grad()
def ground_sentences(model, cfg, map2d, duration, encoded_sentences, device, topk=5, batch_size=SENTENCE_BATCH):
    """Top moments of each sentence over one encoded video (``map2d`` from :func:`encode_video`).

    encoded_sentences: list of [L, E] word vectors (or [L] word-piece ids). Returns (moments [S, topk, 2]
    seconds, scores [S, topk], filled [S, topk], score maps [S, R, C] as the model draws them), all on the CPU."""
    parts = [(*kept, picture.values.cpu()) for kept, picture in
             _grounded_batches(model, cfg, map2d, duration, encoded_sentences, device, topk, batch_size)]
    return tuple(torch.cat(column) for column in zip(*parts))


@torch.no_grad()
def ground_and_draw(model, cfg, map2d, duration, encoded_sentences, device, topk=5, batch_size=SENTENCE_BATCH):
    """:func:`ground_sentences`, with each sentence's whole score map as drawn (a ScoreMap of one
    sentence on the CPU: values and valid [R, C], each cell's moment in seconds, what rows and
    columns are) in place of the bare values."""
    kept, pictures = [], []
    for part, picture in _grounded_batches(model, cfg, map2d, duration, encoded_sentences, device, topk, batch_size):
        kept.append(part)
        picture = picture._replace(**{k: v.cpu() for k, v in picture._asdict().items() if torch.is_tensor(v)})
        pictures.extend(one_picture(picture, i) for i in range(len(picture.values)))  # one copy a batch, then views
    return (*(torch.cat(column) for column in zip(*kept)), pictures)


def _grounded_batches(model, cfg, map2d, duration, encoded_sentences, device, topk, batch_size):
    """Per batch of sentences: (their kept moments, scores and filled slots on the CPU, their
    ScoreMap on the device); the callers take of the map what they need."""
    if topk < 1:
        raise TanError(f"topk must be at least 1, got {topk}")
    if not encoded_sentences:
        raise TanError("no sentence to ground")
    duration = check_duration(duration)
    for start in range(0, len(encoded_sentences), batch_size):
        queries, lengths = pad_sentences(encoded_sentences[start:start + batch_size], cfg.INPUT.PRE_QUERY_SIZE)
        with autocast(cfg.SOLVER.AMP, device):
            output = model.ground(map2d, queries.to(device), lengths)
        durations = torch.full((len(queries),), duration, device=device)
        kept = top_candidates(model.candidates(output, durations), cfg.TEST.NMS_THRESH, topk, units=cfg.TEST.NMS_UNITS)
        yield [t.cpu() for t in kept], model.score_map(output, durations)


def one_picture(picture, index):
    """Sentence ``index``'s part of a batch's ScoreMap, on the CPU (fields of one map [R, C] are shared)."""
    return picture._replace(**{k: (v[index] if v.dim() == 3 else v).cpu()
                               for k, v in picture._asdict().items() if torch.is_tensor(v)})


def predict(model, cfg, feats, duration, encoded_sentences, device, topk=5):
    """:func:`ground_sentences` over the video of raw features ``feats`` [T, D_in]."""
    duration = check_duration(duration)
    return ground_sentences(model, cfg, encode_video(model, cfg, feats, device), duration, encoded_sentences,
                            device, topk)


@torch.no_grad()
def predict_dataset_queries(model, cfg, dataset, indices, device, topk=5):
    """For dataset queries: (the score map as drawn, a ScoreMap of one query on the CPU, kept
    moments [k, 2] s, their scores [k]) each."""
    for index in indices:
        item = dataset[index]
        with autocast(cfg.SOLVER.AMP, device):
            output = model(item["feats"][None].to(device), item["query"][None].to(device),
                           torch.tensor([len(item["query"])]),
                           **clip_lengths(model, cfg, [item.get("clip_count")], device))
        durations = torch.tensor([item["duration"]], device=device)
        moments, kept, filled = top_candidates(model.candidates(output, durations), cfg.TEST.NMS_THRESH, topk,
                                               units=cfg.TEST.NMS_UNITS)
        yield one_picture(model.score_map(output, durations), 0), moments[0][filled[0]].cpu(), kept[0][filled[0]].cpu()


@torch.no_grad()
def ground_windowed(model, cfg, video, encoded_sentences, device, topk=5, batch_size=SENTENCE_BATCH, strict_top_k=True):
    """:func:`ground_sentences` over a long video by windows (``video``: a
    tan.engine.long_videos.windows.WindowedVideo), with the relevance stage TEST.WINDOW.RELEVANCE asks for
    (tan.engine.long_videos.relevance_stage): (moments [S, topk, 2] in the video's seconds, scores, filled,
    the window of each sentence's best moment [S]), on the CPU. ``strict_top_k``: refuse a
    TEST.WINDOW.TOP_K above the video's windows (an evaluation over videos of many lengths lets a
    video with fewer keep them all)."""
    if topk < 1:
        raise TanError(f"topk must be at least 1, got {topk}")
    if not encoded_sentences:
        raise TanError("no sentence to ground")
    # each window's best after an NMS within it, or (TEST.WINDOW.CANDIDATES 0) every candidate of it
    per_window = max(video.settings.candidates, topk) if video.settings.candidates else 0
    stage = relevance_stage(cfg, model)
    if strict_top_k:
        check_top_k(stage, len(video.spans), f"this video ({video.duration:.1f} s in {video.settings.describe_windows()})")

    def ground_pairs(rows, counts, durations, pairs):
        with autocast(cfg.SOLVER.AMP, device):
            maps = model.encode_video(rows, **clip_lengths(model, cfg, counts, device))
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start:start + batch_size]
            queries, lengths = pad_sentences([encoded_sentences[s] for s, _ in chunk], cfg.INPUT.PRE_QUERY_SIZE)
            index = torch.tensor([w for _, w in chunk], dtype=torch.long)
            with autocast(cfg.SOLVER.AMP, device):
                output = model.ground(maps, queries.to(device), lengths, video_index=index.to(device))
            candidates = model.candidates(output, durations[index].to(device))
            if per_window:
                moments, scores, filled = top_candidates(candidates, cfg.TEST.NMS_THRESH, per_window,
                                                         units=cfg.TEST.NMS_UNITS)
            else:
                moments, scores = candidates.seconds, candidates.scores
                filled = candidates.scores > 0 if candidates.valid is None else candidates.valid
            yield from zip(moments.float().cpu(), scores.float().cpu(), filled.cpu())

    return ground_in_windows(cfg, video, encoded_sentences, device, topk,
                             lambda rows: prepare_features(model, cfg, rows), ground_pairs, stage)


@torch.no_grad()
def window_picture(model, cfg, video, window, encoded_sentence, device):
    """The score map (a ScoreMap of one sentence, on the CPU) of window ``window`` of a
    tan.engine.long_videos.windows.WindowedVideo, its cells at the video's seconds."""
    first, last, start, end = video.bounds(window)
    rows, count = prepare_features(model, cfg, video.features[first:last])
    with autocast(cfg.SOLVER.AMP, device):
        maps = model.encode_video(rows[None].to(device), **clip_lengths(model, cfg, [count], device))
        queries, lengths = pad_sentences([encoded_sentence], cfg.INPUT.PRE_QUERY_SIZE)
        output = model.ground(maps, queries.to(device), lengths)
    picture = one_picture(model.score_map(output, torch.tensor([end - start], device=device)), 0)
    return picture._replace(starts=video.seconds(picture.starts + start), ends=video.seconds(picture.ends + start))
