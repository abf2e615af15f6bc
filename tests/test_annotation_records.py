"""Every wrong type in an annotation record makes a bad record: dropped, counted under the name that says
what was wrong (docs/data.md §2), never a crash and never read as something else.

The records are real ones (tests/fixtures/annotations/README.md). The fuzz tests break one field at a time
and work out what must be kept and counted from the rules written here, not from the code under test:
each broken record takes exactly its own queries with it, under exactly one name."""
import json
import math
import os
from collections import Counter

import pytest

from tan.data.formats import load_annotations
from tan.errors import TanError

from conftest import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures", "annotations")
JSON_FIXTURES = [("tacos.json", "tacos"), ("activitynet.json", "seconds"), ("charades.json", "seconds")]

CLIPPED, REVERSED = "moment clipped to the video", "start >= end"
LENGTHS = "timestamps and sentences of different lengths"
NOT_AN_OBJECT, MISSING = "video entry not an object", "video without duration, timestamps or sentences"
NON_POSITIVE = "video with a non-positive duration"
NOT_TWO_NUMBERS, NOT_FINITE = "timestamp not two numbers", "timestamp not finite"
NOT_A_STRING, EMPTY = "sentence not a string", "empty sentence"
NO_CSV_DURATION, MALFORMED_LINE = "video without a duration in the CSV", "malformed line"

# What a JSON value can be, wrong or right depending on the field it lands in.
VALUES = {
    "int": 7, "zero": 0, "negative": -3, "float": 2.5, "huge int": 10 ** 400,
    "NaN": math.nan, "inf": math.inf, "-inf": -math.inf,
    "number string": "1.5", "string": "one string", "empty string": "", "blank string": " \t",
    "null": None, "true": True, "false": False,
    "empty list": [], "one number": [1.0], "two numbers": [1.0, 2.0], "three numbers": [1.0, 2.0, 3.0],
    "two number strings": ["1.5", "3"], "two booleans": [False, True], "nested list": [[1.0, 2.0]],
    "nested garbage": [[None], {"a": []}], "empty object": {}, "object": {"0": 1.0, "1": 2.0},
}


def is_number(value):
    return type(value) in (int, float)  # type(True) is bool: a boolean is no number here


def is_finite(value):
    return is_number(value) and value == value and abs(value) < 1e308  # NaN != NaN; 10 ** 400 > 1e308


# --- the reason each kind of field gives for a value; None: the value is valid there -------------------------

def video_number_reason(value, not_a_number):
    if not is_number(value):
        return not_a_number
    return None if is_finite(value) and value > 0 else NON_POSITIVE


def stamp_value_reason(value):
    if not is_number(value):
        return NOT_TWO_NUMBERS
    return None if is_finite(value) else NOT_FINITE


def stamp_reason(value):
    if not (isinstance(value, list) and len(value) == 2 and all(is_number(x) for x in value)):
        return NOT_TWO_NUMBERS
    return None if all(is_finite(x) for x in value) else NOT_FINITE


def sentence_reason(value):
    if not isinstance(value, str):
        return NOT_A_STRING
    return None if value.strip() else EMPTY


# --- what the untouched records give -------------------------------------------------------------------------

def read_fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def base_outcomes(data, fmt):
    """{(video, i): (query or None, reasons)} for valid records: times in seconds (frames / fps for TACoS),
    clipped to [0, duration] when they reach outside it, dropped when start >= end after that."""
    outcomes = {}
    for video, info in data.items():
        duration = info["num_frames"] / info["fps"] if fmt == "tacos" else info["duration"]
        per_unit = 1 / info["fps"] if fmt == "tacos" else 1
        for i, ((start, end), sentence) in enumerate(zip(info["timestamps"], info["sentences"])):
            start, end, reasons = start * per_unit, end * per_unit, []
            if start < 0 or end > duration:
                start, end = max(start, 0), min(end, duration)
                reasons.append(CLIPPED)
            if start >= end:
                reasons.append(REVERSED)
            query = None if start >= end else (video, sentence.strip(), duration, start, end)
            outcomes[(video, i)] = (query, reasons)
    return outcomes


def expected(base, gone, added):
    """The queries and counts once the pairs in ``gone`` are dropped, counted as ``added``."""
    queries = [query for key, (query, _) in base.items() if key not in gone and query]
    counts = Counter(reason for key, (_, reasons) in base.items() if key not in gone for reason in reasons)
    return queries, dict(counts + Counter(added))  # + drops the names counted zero times


def same_queries(queries, want):
    got = sorted((q.video, q.sentence, q.duration, q.start, q.end) for q in queries)
    want = sorted(want)
    return ([g[:2] for g in got] == [w[:2] for w in want]
            and all(math.isclose(x, y, rel_tol=1e-12) for g, w in zip(got, want) for x, y in zip(g[2:], w[2:])))


def check_all(cases, base, load):
    """Runs every (label, content, gone, added) case through ``load``; returns what went wrong, one line each."""
    failures = []
    for label, content, gone, added in cases:
        want_queries, want_counts = expected(base, gone, added)
        try:
            queries, counts = load(content)
        except Exception as e:  # any exception is a failure, and the others' results are still wanted
            failures.append(f"{label}: raised {type(e).__name__}: {e}")
            continue
        if dict(counts) != want_counts or not same_queries(queries, want_queries):
            failures.append(f"{label}: counted {dict(counts)}, expected {want_counts}; "
                            f"kept {len(queries)} queries, expected {len(want_queries)}")
    return failures


# --- JSON formats --------------------------------------------------------------------------------------------

def replaced(data, video, path, value):
    """A copy of ``data`` with data[video][path...] = value (a whole entry when ``path`` is empty)."""
    data = json.loads(json.dumps(data))
    if not path:
        data[video] = value
        return data
    target = data[video]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def list_reasons(value, element_reason, others):
    """A list put in place of a timestamps or sentences list of a video with ``others`` entries on the other
    side: the pairs made from its elements, and the surplus. None when an element is valid there."""
    reasons = [element_reason(x) for x in value[:others]]
    return None if None in reasons else Counter(reasons) + Counter({LENGTHS: abs(len(value) - others)})


def field_reasons(fmt, value, n):
    """(path in a video entry, pairs of the video dropped: "all" or index, {reason: count}) for every field
    that ``value`` is wrong in, in a video entry with ``n`` timestamps and ``n`` sentences."""
    yield (), "all", {MISSING if isinstance(value, dict) else NOT_AN_OBJECT: 1}
    not_a_number = "num_frames or fps not a number" if fmt == "tacos" else "duration not a number"
    for field in ("num_frames", "fps") if fmt == "tacos" else ("duration",):
        reason = video_number_reason(value, not_a_number)
        if reason:
            yield (field,), "all", {reason: n}
    if not isinstance(value, list):
        yield ("timestamps",), "all", {"timestamps not a list": n}
        yield ("sentences",), "all", {"sentences not a list": 1}
    else:
        for field, element_reason in (("timestamps", stamp_reason), ("sentences", sentence_reason)):
            reasons = list_reasons(value, element_reason, n)
            if reasons is not None:
                yield (field,), "all", reasons
    for i in range(n):
        for path, reason in ((("timestamps", i), stamp_reason(value)),
                             (("timestamps", i, 0), stamp_value_reason(value)),
                             (("timestamps", i, 1), stamp_value_reason(value)),
                             (("sentences", i), sentence_reason(value))):
            if reason:
                yield path, i, {reason: 1}


def value_cases(data, fmt):
    """Every field of every record replaced by every value that is wrong there."""
    for video, info in data.items():
        n = len(info["sentences"])  # the fixtures have as many timestamps as sentences
        for name, value in VALUES.items():
            for path, dropped, added in field_reasons(fmt, value, n):
                gone = {(video, i) for i in range(n)} if dropped == "all" else {(video, dropped)}
                label = f"{video}.{'.'.join(map(str, path)) or '(entry)'} = {name}"
                yield label, replaced(data, video, path, value), gone, added


def shape_cases(data, fmt):
    """Fields missing or extra, and values missing or extra at the end of a list."""
    for video, info in data.items():
        n = len(info["sentences"])
        pairs = {(video, i) for i in range(n)}
        for field in info:
            entry = {k: v for k, v in info.items() if k != field}
            count = 1 if field == "sentences" else n
            yield f"{video} without {field}", {**data, video: entry}, pairs, {MISSING: count}
        yield f"{video} with an extra field", {**data, video: {**info, "comment": [None, {}]}}, set(), {}
        for field, extra in (("timestamps", [0, 1]), ("sentences", "one more sentence")):
            yield f"{video}.{field} + 1", {**data, video: {**info, field: info[field] + [extra]}}, set(), {LENGTHS: 1}
            yield f"{video}.{field} - 1", {**data, video: {**info, field: info[field][:-1]}}, {(video, n - 1)}, \
                {LENGTHS: 1}


@pytest.mark.parametrize("name,fmt", JSON_FIXTURES)
def test_the_real_records_load_as_written(name, fmt):
    data = json.loads(read_fixture(name))
    queries, counts = load_annotations(os.path.join(FIXTURES, name), fmt)
    want_queries, want_counts = expected(base_outcomes(data, fmt), set(), {})
    assert dict(counts) == want_counts and same_queries(queries, want_queries)


def test_the_fixtures_hold_clipped_and_reversed_moments():
    """So that the fuzz tests also check that a dropped pair no longer counts as clipped or reversed."""
    counts = Counter(reason for name, fmt in JSON_FIXTURES
                     for _, reasons in base_outcomes(json.loads(read_fixture(name)), fmt).values()
                     for reason in reasons)
    assert counts == {CLIPPED: 2, REVERSED: 1}


@pytest.mark.parametrize("name,fmt", JSON_FIXTURES)
def test_every_wrong_value_in_every_field_drops_exactly_its_queries(name, fmt, tmp_path):
    data = json.loads(read_fixture(name))
    path = tmp_path / name

    def load(content):
        path.write_text(json.dumps(content))
        return load_annotations(str(path), fmt)

    cases = list(value_cases(data, fmt)) + list(shape_cases(data, fmt))
    assert len(cases) > 500
    failures = check_all(cases, base_outcomes(data, fmt), load)
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures[:40])


# --- charades_txt ------------------------------------------------------------------------------------------

# Text in a start or end column: None where it is a valid number (left out), else the reason.
TEXT_TIMES = {"7": None, "0": None, "-3": None, "2.5": None, ".5": None, "1e1": None, "1e400": NOT_FINITE,
              "nan": NOT_TWO_NUMBERS, "inf": NOT_TWO_NUMBERS, "-inf": NOT_TWO_NUMBERS, "Infinity": NOT_TWO_NUMBERS,
              "1_000": NOT_TWO_NUMBERS, "1.5.2": NOT_TWO_NUMBERS, "1,5": NOT_TWO_NUMBERS, "0x10": NOT_TWO_NUMBERS,
              "abc": NOT_TWO_NUMBERS, "None": NOT_TWO_NUMBERS, "True": NOT_TWO_NUMBERS, "[1]": NOT_TWO_NUMBERS,
              "\u22123": NOT_TWO_NUMBERS, "\u0967": NOT_TWO_NUMBERS, "#1": NOT_TWO_NUMBERS,
              # a column that is empty or holds two words leaves a line with other than three fields
              "": MALFORMED_LINE, " ": MALFORMED_LINE, "1 2": MALFORMED_LINE}
# Text in the CSV's length column; every one is wrong.
CSV_LENGTHS = {"": NO_CSV_DURATION, " ": NO_CSV_DURATION, "abc": NO_CSV_DURATION, "nan": NO_CSV_DURATION,
               "inf": NO_CSV_DURATION, "1_000": NO_CSV_DURATION, "True": NO_CSV_DURATION, "30 s": NO_CSV_DURATION,
               "0": NON_POSITIVE, "-0.0": NON_POSITIVE, "-30.5": NON_POSITIVE, "1e400": NON_POSITIVE}


def text_form(lines, lengths):
    text = "".join(f"{video} {start} {end}{sep}{sentence}\n" for video, start, end, sep, sentence in lines)
    return text, "id,length\n" + "".join(f"{video},{length}\n" for video, length in lengths)


def text_rows(data):
    """The records of ``data`` as text-form lines (video, start, end, separator, sentence), the (video, index)
    of each line, and the CSV rows (video, length)."""
    lines = [[video, str(start), str(end), "##", sentence] for video, info in data.items()
             for (start, end), sentence in zip(info["timestamps"], info["sentences"])]
    keys = [(video, i) for video, info in data.items() for i in range(len(info["sentences"]))]
    return lines, keys, [(video, str(info["duration"])) for video, info in data.items()]


def text_cases(data):
    lines, keys, lengths = text_rows(data)

    def with_column(row, column, value):
        return [line if r != row else line[:column] + [value] + line[column + 1:] for r, line in enumerate(lines)]

    for row, key in enumerate(keys):
        for text in list(TEXT_TIMES) + ["V0", "3msza"]:
            video_reason = MALFORMED_LINE if len(text.split()) != 1 else NO_CSV_DURATION
            for column, reason in ((0, video_reason), (1, TEXT_TIMES.get(text)), (2, TEXT_TIMES.get(text))):
                if reason:
                    yield f"line {row} column {column} = {text!r}", text_form(with_column(row, column, text),
                                                                                lengths), {key}, {reason: 1}
        for sentence in ("", " ", "\t"):
            yield f"line {row} sentence {sentence!r}", text_form(with_column(row, 4, sentence), lengths), {key}, \
                {EMPTY: 1}
        yield f"line {row} without ##", text_form(with_column(row, 3, " "), lengths), {key}, {MALFORMED_LINE: 1}
    for video, _ in lengths:
        gone = {key for key in keys if key[0] == video}
        for text, reason in CSV_LENGTHS.items():
            changed = [(v, text if v == video else length) for v, length in lengths]
            yield f"length of {video} = {text!r}", text_form(lines, changed), gone, {reason: len(gone)}
        yield f"{video} not in the CSV", text_form(lines, [x for x in lengths if x[0] != video]), gone, \
            {NO_CSV_DURATION: len(gone)}
    yield "an extra line of one word", text_form(lines + [["broken", "", "", "", ""]], lengths), set(), \
        {MALFORMED_LINE: 1}


def test_the_text_form_fixture_holds_the_json_records_and_reads_as_them():
    data = json.loads(read_fixture("charades.json"))
    lines, _, lengths = text_rows(data)
    assert text_form(lines, lengths) == (read_fixture("charades.txt"), read_fixture("charades.csv"))
    queries, counts = load_annotations(os.path.join(FIXTURES, "charades.txt"), "charades_txt",
                                       os.path.join(FIXTURES, "charades.csv"))
    want_queries, _ = expected(base_outcomes(data, "seconds"), set(), {})
    assert not counts and same_queries(queries, want_queries)


def test_every_wrong_column_and_length_in_the_text_form_drops_exactly_its_queries(tmp_path):
    data = json.loads(read_fixture("charades.json"))

    def load(content):
        (tmp_path / "a.txt").write_text(content[0], encoding="utf-8")
        (tmp_path / "a.csv").write_text(content[1], encoding="utf-8")
        return load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "a.csv"))

    cases = list(text_cases(data))
    assert len(cases) > 200
    failures = check_all(cases, base_outcomes(data, "seconds"), load)
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures[:40])


# --- single cases: those that crashed or passed silently before, and the counting rules ------------------

def load_json(tmp_path, data, fmt="seconds"):
    (tmp_path / "a.json").write_text(json.dumps(data))
    queries, counts = load_annotations(str(tmp_path / "a.json"), fmt)
    return [(q.start, q.end, q.sentence) for q in queries], dict(counts)


def test_timestamps_that_are_a_number_drop_the_video_counted_per_sentence(tmp_path):
    data = {"v": {"duration": 10, "timestamps": 5, "sentences": ["a", "b"]}, "w": {"duration": 10, "timestamps": 5}}
    assert load_json(tmp_path, data) == ([], {"timestamps not a list": 2, MISSING: 1})


def test_sentences_as_one_string_are_not_paired_character_by_character(tmp_path):
    data = {"v": {"duration": 10, "timestamps": [[1, 2], [3, 4]], "sentences": "one sentence, not a list"}}
    assert load_json(tmp_path, data) == ([], {"sentences not a list": 1})


def test_number_strings_in_json_are_not_numbers(tmp_path):
    data = {"v": {"duration": "10", "timestamps": [[1, 2]], "sentences": ["a"]},
            "w": {"duration": 10, "timestamps": [["1.5", "3"], [1.5, 3]], "sentences": ["a", "b"]}}
    assert load_json(tmp_path, data) == ([(1.5, 3.0, "b")], {"duration not a number": 1, NOT_TWO_NUMBERS: 1})


def test_a_timestamp_of_three_or_one_values_is_dropped_not_cut(tmp_path):
    data = {"v": {"duration": 10, "timestamps": [[1, 2, 3], [1], [4, 5]], "sentences": ["a", "b", "c"]}}
    assert load_json(tmp_path, data) == ([(4.0, 5.0, "c")], {NOT_TWO_NUMBERS: 2})


def test_booleans_are_not_numbers(tmp_path):
    data = {"v": {"duration": True, "timestamps": [[0, 1]], "sentences": ["a"]},
            "w": {"duration": 10, "timestamps": [[False, True], [0, 1]], "sentences": ["a", "b"]}}
    assert load_json(tmp_path, data) == ([(0.0, 1.0, "b")], {"duration not a number": 1, NOT_TWO_NUMBERS: 1})
    tacos = {"v": {"num_frames": 300, "fps": True, "timestamps": [[0, 30]], "sentences": ["a"]}}
    assert load_json(tmp_path, tacos, "tacos") == ([], {"num_frames or fps not a number": 1})


def test_a_null_duration_is_not_a_missing_one(tmp_path):
    data = {"v": {"duration": None, "timestamps": [[1, 2]], "sentences": ["a", "b"]},
            "w": {"timestamps": [[1, 2]], "sentences": ["a"]}}
    assert load_json(tmp_path, data) == ([], {"duration not a number": 2, MISSING: 1})


def test_non_finite_and_oversized_numbers(tmp_path):
    data = {"v": {"duration": 10, "timestamps": [[1, 10 ** 400], [math.nan, 2], [1, 2]], "sentences": ["a", "b", "c"]},
            "w": {"duration": math.inf, "timestamps": [[1, 2]], "sentences": ["a"]},
            "x": {"duration": 10 ** 400, "timestamps": [], "sentences": []}}
    assert load_json(tmp_path, data) == ([(1.0, 2.0, "c")], {NOT_FINITE: 2, NON_POSITIVE: 2})


def test_tacos_frames_and_fps_must_each_be_positive(tmp_path):
    data = {"v": {"num_frames": -300, "fps": -30.0, "timestamps": [[-30, -60]], "sentences": ["a"]},
            "w": {"num_frames": 300, "fps": 0, "timestamps": [[30, 60]], "sentences": ["a"]},
            "x": {"num_frames": 300, "fps": 30.0, "timestamps": [[30, 60]], "sentences": ["a"]}}
    assert load_json(tmp_path, data, "tacos") == ([(1.0, 2.0, "a")], {NON_POSITIVE: 2})


def test_a_dropped_pair_is_counted_once(tmp_path):
    # A pair is checked whole before it is clipped: a blank sentence on a moment past the end is one drop.
    data = {"v": {"duration": 10, "timestamps": [[5, 20], [4, 2], [5, 20]], "sentences": [" ", "a", "b"]}}
    assert load_json(tmp_path, data) == ([(5.0, 10.0, "b")], {EMPTY: 1, REVERSED: 1, CLIPPED: 1})


def test_lengths_that_differ_use_the_pairs_and_count_the_surplus(tmp_path):
    data = {"v": {"duration": 10, "timestamps": [[1, 2], [3, 4], [5, 6]], "sentences": ["a"]},
            "w": {"duration": 10, "timestamps": [], "sentences": ["a", "b"]}}
    assert load_json(tmp_path, data) == ([(1.0, 2.0, "a")], {LENGTHS: 4})


def test_a_dropped_video_always_counts(tmp_path):
    data = {"v": {"duration": 0, "timestamps": [], "sentences": []}, "w": [], "x": "v_abc"}
    assert load_json(tmp_path, data) == ([], {NON_POSITIVE: 1, NOT_AN_OBJECT: 2})


def test_text_times_are_parsed_when_the_line_is_read(tmp_path):
    (tmp_path / "a.txt").write_text("V 1.5 3##kept\nV nan 3##not a number\nV 1 1e400##too large\nV 1 2 3##four\n")
    (tmp_path / "a.csv").write_text("id,length\nV,10\nW,nan\n")
    (tmp_path / "b.txt").write_text("W 1 2##a\n")
    queries, counts = load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "a.csv"))
    assert [(q.start, q.end, q.sentence) for q in queries] == [(1.5, 3.0, "kept")]
    assert dict(counts) == {NOT_TWO_NUMBERS: 1, NOT_FINITE: 1, MALFORMED_LINE: 1}
    _, counts = load_annotations(str(tmp_path / "b.txt"), "charades_txt", str(tmp_path / "a.csv"))
    assert dict(counts) == {NO_CSV_DURATION: 1}


# --- whole-file problems stop the run with a TanError --------------------------------------------------------

@pytest.mark.parametrize("content,message", [
    ('{"v": {"duration": 1', "not valid JSON"), ("", "not valid JSON"),
    ('{"v": {"duration": ' + "1" * 5000 + "}}", "not valid JSON"),  # more digits than Python reads
    ("[" * 100000, "not valid JSON"),  # deeper than the parser goes
    (b'{"v\xff": {}}', "cannot be read"),
])
def test_a_file_that_cannot_be_read_as_a_whole_is_an_error(tmp_path, content, message):
    path = tmp_path / "a.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(TanError, match=message):
        load_annotations(str(path), "seconds")


def test_a_file_of_any_other_json_value_than_an_object_is_an_error(tmp_path):
    path = tmp_path / "a.json"
    for name, value in VALUES.items():
        path.write_text(json.dumps(value))
        if isinstance(value, dict):  # an object of videos: each that is not an object is counted
            queries, counts = load_annotations(str(path), "seconds")
            assert (queries, dict(counts)) == ([], {NOT_AN_OBJECT: len(value)} if value else {}), name
        else:
            with pytest.raises(TanError, match="expected an object mapping video ids"):
                load_annotations(str(path), "seconds")


@pytest.mark.parametrize("text,csv,message", [
    (b"V 1 2##a\n", b"id,duration\nV,10\n", "expected the columns 'id' and 'length'"),
    (b"V 1 2##a\n", b"", "expected the columns 'id' and 'length'"),
    (b"V 1 2##a\n", b"id,length\nV\xff,10\n", "Charades CSV file .* cannot be read"),
    (b"V 1 2##caf\xe9\n", b"id,length\nV,10\n", "annotation file .* cannot be read"),
])
def test_a_text_form_that_cannot_be_read_as_a_whole_is_an_error(tmp_path, text, csv, message):
    (tmp_path / "a.txt").write_bytes(text)
    (tmp_path / "a.csv").write_bytes(csv)
    with pytest.raises(TanError, match=message):
        load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "a.csv"))
