"""The queries of an annotation file that a test could not predict, for the benchmarks whose figures
are over every query of the file (Ego4D NLQ's, MAD's)."""
from ..data.formats import NOT_DROPPED
from ..data.formats.common import SCORED_AS_MISSES
from ..utils.logger import get_logger


def left_out_misses(dataset, not_asked, figures):
    """(queries the benchmark's evaluator itself scores as misses, queries that could not be evaluated)
    of ``dataset``'s annotation file: every query the reader or the dataset left out but those that ask
    nothing (``not_asked``: the format's reasons for a record without a sentence), so that the
    ``figures`` ("NLQ", "MAD") are over every query of the file, as their docs define them. The second
    kind (a clip without features, a sentence without a known word) are misses of tan's, not of the
    model's: a warning names the file and how many."""
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
