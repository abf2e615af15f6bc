"""NEAR: a benchmark of its own, as a plug-in (docs/code-map.md, "Where to add things").

A benchmark brings three things, and this package brings each without a line of tan/ changed:

* its annotation format, ``near_jsonl`` (annotations.py): one JSON object per line with the query's id,
  video, duration, moment and sentence;
* its figures and its submission file, the evaluator ``near_moments`` (evaluator.py), which the
  format declares, so that every dataset of the format is tested with it: R@1 within k seconds
  (the top moment's start and end each within k seconds of the annotated ones, k = 0.5, 1, 2) and
  ``{dataset}_near_submission.csv``;
* its data, ``near_synthetic_{train,val,test}`` (data.py): the built-in synthetic dataset's queries
  in the format, written on first use.

Loaded by ``PLUGINS: ["projects/near_moments"]`` (near_synthetic.yaml).
"""
from . import annotations, data, evaluator  # noqa: F401  (each registers what it adds)
