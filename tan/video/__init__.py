"""Video in: decoding video files (decode.py), feature backbones (backbones/),
extraction over folders of videos (extract.py) and query files (queries.py),
and the built-in synthetic videos (synthetic.py). Everything here needs the
``video`` extra (PyAV, transformers), imported only when used."""
