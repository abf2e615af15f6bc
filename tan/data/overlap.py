"""Split hygiene: what a run's training datasets share with the datasets it is evaluated on
(``tan-check-data`` reports it, training warns once at start; docs/data.md §10.3).

Three findings per (training, evaluation) pair of datasets:

* the same annotation file on both sides (a split trained on and evaluated on);
* videos in both: an evaluation video seen in training, whatever its sentences;
* identical queries: the same sentence on the same video.

These are overlaps, and the warning names them. A fourth figure is given as
information only: evaluation sentences that also occur in training on other
videos. Short generic sentences recur across the real splits ("person opens the
door": a quarter of Charades-STA's test sentences are also training sentences),
so by itself this is no leak and never warns.

Sentences are compared after lower-casing, collapsing white space and dropping
a final full stop.
"""
import re
from dataclasses import dataclass, field


EXAMPLES = 5


def sentence_key(sentence):
    """A sentence as the comparison sees it."""
    return re.sub(r"\s+", " ", sentence.lower()).strip().rstrip(".").strip()


@dataclass
class SplitOverlap:
    trained: str  # the training dataset's name
    evaluated: str  # the evaluation dataset's name
    same_file: bool = False
    videos: list = field(default_factory=list)  # shared videos, sorted
    queries: int = 0  # evaluation queries whose video and sentence are a training query's
    query_examples: list = field(default_factory=list)  # (video, sentence)
    sentences: int = 0  # distinct evaluation sentences also trained on, on other videos (information)
    evaluated_sentences: int = 0  # distinct evaluation sentences

    @property
    def overlaps(self):
        return self.same_file or bool(self.videos) or self.queries > 0

    def describe(self):
        """One line per finding, for the report and the warning."""
        if self.same_file:
            return [f"{self.evaluated} is read from the same annotation file as training dataset {self.trained}"]
        lines = []
        if self.videos:
            lines.append(f"{len(self.videos)} videos of {self.evaluated} are also in {self.trained}: "
                         f"{', '.join(self.videos[:EXAMPLES])}{' ...' if len(self.videos) > EXAMPLES else ''}")
        if self.queries:
            shown = "; ".join(f"{v}: {s!r}" for v, s in self.query_examples)
            lines.append(f"{self.queries} queries of {self.evaluated} (same video, same sentence) are training "
                         f"queries of {self.trained}: {shown}{' ...' if self.queries > len(self.query_examples) else ''}")
        return lines


class QuerySet:
    """What the comparison reads of one dataset's queries, each sentence keyed once: its videos, its
    (video, sentence) pairs and its distinct sentences."""

    def __init__(self, queries):
        self.keyed = [(q, (q.video, sentence_key(q.sentence))) for q in queries]
        self.videos = {q.video for q in queries}
        self.pairs = {pair for _, pair in self.keyed}
        self.sentences = {sentence for _, (_, sentence) in self.keyed}


def split_overlap(trained, evaluated, trained_queries, evaluated_queries, same_file=False):
    """The :class:`SplitOverlap` of two datasets' queries (tan.data.formats.Query lists, or the
    :class:`QuerySet` of each)."""
    train = trained_queries if isinstance(trained_queries, QuerySet) else QuerySet(trained_queries)
    test = evaluated_queries if isinstance(evaluated_queries, QuerySet) else QuerySet(evaluated_queries)
    found = SplitOverlap(trained, evaluated, same_file=same_file)
    found.videos = sorted(train.videos & test.videos)
    shared = [q for q, pair in test.keyed if pair in train.pairs]
    found.queries = len(shared)
    found.query_examples = [(q.video, q.sentence) for q in shared[:EXAMPLES]]
    found.evaluated_sentences = len(test.sentences)
    found.sentences = len(test.sentences & train.sentences)
    return found


def run_overlaps(run_data):
    """:class:`SplitOverlap` of every training dataset with every evaluation dataset (DATASETS.VAL and
    TEST) of ``run_data`` (a :class:`~tan.data.RunData` holding the training split); each annotation
    file's queries are keyed once, however many pairs it is in."""
    cfg = run_data.cfg
    evaluated = list(dict.fromkeys(list(cfg.DATASETS.VAL) + list(cfg.DATASETS.TEST)))
    sets = {}

    def query_set(name):
        key = run_data.annotation_key(name)
        if key not in sets:
            sets[key] = QuerySet(run_data.queries(name)[0])
        return sets[key]

    found = []
    for t in cfg.DATASETS.TRAIN:
        for e in evaluated:
            same = t == e or run_data.annotation_key(t) == run_data.annotation_key(e)
            found.append(split_overlap(t, e, query_set(t), query_set(e), same_file=same))
    return found


def overlap_warnings(found):
    """The warning naming every overlap among ``found`` (:func:`run_overlaps`), as a one-item
    list; [] when there is none."""
    lines = [line for o in found if o.overlaps for line in o.describe()]
    if not lines:
        return []
    return ["training and evaluation data overlap, so the evaluation figures are not those of unseen data "
            "(tan-check-data lists it all):\n  - " + "\n  - ".join(lines)]
