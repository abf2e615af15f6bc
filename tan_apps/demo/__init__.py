"""tan-demo: a local web page over trained models. Pick a checkpoint and a video file,
type sentences, and see their top moments on a timeline, play them and read the score map.

offer.py says what the page can choose from (checkpoints, videos, uploads), session.py
does the model work (loading, encoding, grounding, with caches), server.py speaks HTTP,
and page/ holds the page itself (plain HTML, CSS and JavaScript: nothing is fetched from
the internet, so it works offline)."""
