"""tan-demo: what it finds to offer, its HTTP calls against the API's own answers (uploads,
byte ranges, bad requests), the command itself, and the page in a real headless browser."""
import http.client
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch

pytest.importorskip("av")
pytest.importorskip("transformers")

import tan  # noqa: E402
from tan_apps.demo.offer import VideoShelf, find_checkpoints  # noqa: E402
from tan_apps.demo.server import DemoServer  # noqa: E402
from tan_apps.demo.session import DemoSession  # noqa: E402
from tan.errors import TanError  # noqa: E402
from tan.utils.checkpoint_file import EXTRACTORS_FIELD  # noqa: E402
from tan_apps.synthetic.videos import write_video  # noqa: E402

from conftest import REPO  # noqa: E402

EMPTY_SENTENCE = "has no word: give a sentence to ground, with at least one word"  # every tool's words

SENTENCES = ["the red circle moves left.", "the blue square grows."]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def demo_files(trained_tan, video_dataset, tmp_path_factory):
    """Two runs (one with a checkpoint that records no extractors), test videos and a corrupt one."""
    root = tmp_path_factory.mktemp("demo")
    runs = root / "outputs"
    shutil.copytree(trained_tan, runs / "tan", ignore=shutil.ignore_patterns("*.txt", "*.jsonl"))
    checkpoint = torch.load(runs / "tan" / "model_final.pth", map_location="cpu", weights_only=False)
    checkpoint.pop(EXTRACTORS_FIELD)
    (runs / "older" / "nested").mkdir(parents=True)
    torch.save(checkpoint, runs / "older" / "nested" / "model_final.pth")
    videos = root / "videos"
    videos.mkdir()
    for name in ("synvid_test_0001.mp4", "synvid_test_0002.mp4"):
        shutil.copy(os.path.join(video_dataset, "videos", name), videos / name)
    (videos / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x17" * 500)
    return {"runs": str(runs), "videos": str(videos), "trained": str(runs / "tan" / "model_final.pth"),
            "no_records": str(runs / "older" / "nested" / "model_final.pth"), "uploads": str(root / "uploads")}


@pytest.fixture(scope="module")
def server(demo_files):
    os.makedirs(demo_files["uploads"], exist_ok=True)
    session = DemoSession(find_checkpoints([demo_files["runs"]]),
                          VideoShelf([demo_files["videos"]], demo_files["uploads"], max_upload_bytes=1_500_000), "cpu")
    httpd = DemoServer("127.0.0.1", 0, session)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def request(server_or_url, path, body=None, headers=None, method=None):
    """(status, headers, body: parsed JSON where it is JSON)."""
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.url
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    headers = dict({"Content-Type": "application/json"} if isinstance(body, (dict, list)) else {}, **(headers or {}))
    try:
        with urllib.request.urlopen(urllib.request.Request(url.rstrip("/") + path, data, headers, method=method),
                                    timeout=120) as response:
            status, got, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        status, got, raw = e.code, e.headers, e.read()
    return status, got, json.loads(raw) if got.get_content_type() == "application/json" else raw


def ids(server):
    _, _, offer = request(server, "/api/offer")
    checkpoints = {f"{c['run']}/{c['name']}": c["id"] for c in offer["checkpoints"]}
    videos = {v["name"]: v["id"] for v in offer["videos"]}
    return checkpoints, videos


def test_checkpoints_are_found_run_by_run_newest_first(tmp_path):
    for run, names in (("b", ["model_1e.pth", "model_2e.pth", "model_final.pth"]), ("a/deep", ["model_best.pth"])):
        (tmp_path / run).mkdir(parents=True)
        for name in names:
            (tmp_path / run / name).write_bytes(b"")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "model_final.pth").write_bytes(b"")
    found = find_checkpoints([str(tmp_path), str(tmp_path / "b" / "model_1e.pth")])
    assert [(os.path.basename(c.run), c.name) for c in found] == [
        ("deep", "model_best.pth"), ("b", "model_final.pth"), ("b", "model_2e.pth"), ("b", "model_1e.pth")]
    assert [c.id for c in found] == ["c0", "c1", "c2", "c3"]
    with pytest.raises(TanError, match="no such checkpoint or folder"):
        find_checkpoints([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TanError, match="no checkpoint"):
        find_checkpoints([str(tmp_path / "empty")])


@pytest.mark.slow
def test_grounding_over_http_is_the_apis_answer(server, demo_files):
    checkpoints, videos = ids(server)
    assert set(videos) == {"broken.mp4", "synvid_test_0001.mp4", "synvid_test_0002.mp4"}
    trained = next(cid for label, cid in checkpoints.items() if label.endswith("tan/model_final.pth"))
    status, _, info = request(server, f"/api/checkpoints/{trained}")
    assert status == 200 and info["reads_video_files"] and info["architecture"] == "TAN"
    assert [d.split(" ")[0] for d in info["video_features"]] == ["clip", "video_transformer"]

    question = {"checkpoint": trained, "video": videos["synvid_test_0001.mp4"], "sentences": SENTENCES, "topk": 4}
    status, _, answer = request(server, "/api/ground", question)
    assert status == 200, answer
    model = tan.load_model(demo_files["trained"], device="cpu")
    video = model.encode_video_file(os.path.join(demo_files["videos"], "synvid_test_0001.mp4"))
    expected = model.ground(video, SENTENCES, topk=4)
    maps = model.score_maps(video, SENTENCES)
    assert answer["video"]["duration"] == pytest.approx(video.duration)
    assert [a["sentence"] for a in answer["answers"]] == SENTENCES
    cells = answer["map"]
    assert (cells["rows"], cells["cols"]) == tuple(maps.shape[1:])
    for got, want, score_map in zip(answer["answers"], expected, maps):
        assert [(m["start"], m["end"], m["score"]) for m in got["moments"]] == [(m.start, m.end, m.score) for m in want]
        scores = np.array([np.nan if v is None else v for v in got["scores"]]).reshape(score_map.shape)
        valid = ~np.isnan(scores)
        assert valid.sum() > 0 and np.all(score_map.numpy()[~valid] == 0)
        np.testing.assert_allclose(scores[valid], score_map.numpy()[valid], atol=1e-5)
    # each top moment is a cell of the map whose moment the page can play
    starts, ends = np.array(cells["starts"]), np.array(cells["ends"])
    for m in answer["answers"][0]["moments"]:
        assert np.min(np.abs(starts - m["start"]) + np.abs(ends - m["end"])) < 0.01
    assert answer["cached"] is False
    status, _, again = request(server, "/api/ground", dict(question, sentences=SENTENCES[:1]))
    assert status == 200 and again["cached"] is True
    first, alone = answer["answers"][0], again["answers"][0]  # a batch of one: the same up to the last bits
    assert [(m["start"], m["end"]) for m in alone["moments"]] == [(m["start"], m["end"]) for m in first["moments"]]
    assert [m["score"] for m in alone["moments"]] == pytest.approx([m["score"] for m in first["moments"]], rel=1e-5)
    # a video file replaced on disk (here: its time moved) is encoded again, not answered from the cache
    path = os.path.join(demo_files["videos"], "synvid_test_0001.mp4")
    info = os.stat(path)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10 ** 9))
    status, _, replaced = request(server, "/api/ground", dict(question, sentences=SENTENCES[:1]))
    assert status == 200 and replaced["cached"] is False


@pytest.mark.slow
def test_what_the_model_cannot_answer_is_said_in_the_page(server):
    checkpoints, videos = ids(server)
    trained = next(cid for label, cid in checkpoints.items() if label.endswith("tan/model_final.pth"))
    no_records = next(cid for label, cid in checkpoints.items() if label.endswith("nested/model_final.pth"))
    status, _, info = request(server, f"/api/checkpoints/{no_records}")
    assert status == 200 and not info["reads_video_files"] and "tan-extract-features" in info["why_not"]
    good = {"checkpoint": trained, "video": videos["synvid_test_0002.mp4"], "sentences": SENTENCES, "topk": 3}
    cases = [
        (dict(good, checkpoint=no_records), "does not say how its training features were made"),
        (dict(good, video=videos["broken.mp4"]), "broken.mp4"),
        (dict(good, checkpoint="c99"), "checkpoint 'c99': not one of the page's checkpoints"),
        (dict(good, video="v99"), "video 'v99': not one of the page's videos"),
        (dict(good, sentences=["  ", ""]), "sentence 1 '' " + EMPTY_SENTENCE),
        (dict(good, sentences=[]), "the sentence '' " + EMPTY_SENTENCE),
        (dict(good, sentences=["the red circle", ""]), "sentence 2 '' " + EMPTY_SENTENCE),
        (dict(good, sentences=["the red circle", "..."]), "sentence 2 '...' " + EMPTY_SENTENCE),
        (dict(good, sentences="the red circle"), "sentences: expected a list of strings"),
        (dict(good, topk=0), "topk 0: expected a whole number from 1 to 20"),
        (dict(good, topk=2.5), "topk 2.5"),
        (dict(good, sentences=["x" * 501]), "at most 500"),
    ]
    for question, message in cases:
        status, _, body = request(server, "/api/ground", question)
        assert status == 400 and message in body["error"], (question, body)
    status, _, body = request(server, "/api/ground", b"checkpoint=c0", {"Content-Type": "text/plain"})
    assert status == 400 and "JSON body" in body["error"]  # what another site's form could send
    status, _, body = request(server, "/api/ground", b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and "not JSON" in body["error"]
    status, _, body = request(server, "/api/checkpoints/c99")
    assert status == 400 and "c99" in body["error"]


@pytest.mark.slow
def test_videos_are_served_in_byte_ranges_and_the_page_only_from_its_files(server, demo_files):
    _, videos = ids(server)
    data = open(os.path.join(demo_files["videos"], "synvid_test_0001.mp4"), "rb").read()
    path = f"/videos/{videos['synvid_test_0001.mp4']}"
    status, headers, body = request(server, path)
    assert status == 200 and body == data and headers["Content-Type"] == "video/mp4"
    assert headers["Accept-Ranges"] == "bytes"
    for asked, start, end in (("bytes=100-199", 100, 199), ("bytes=1000-", 1000, len(data) - 1),
                              ("bytes=-300", len(data) - 300, len(data) - 1),
                              (f"bytes=10-{len(data) + 50}", 10, len(data) - 1)):
        status, headers, body = request(server, path, headers={"Range": asked})
        assert status == 206 and body == data[start:end + 1], asked
        assert headers["Content-Range"] == f"bytes {start}-{end}/{len(data)}"
    for asked in (f"bytes={len(data)}-", "bytes=-0"):  # nothing of the file: unsatisfiable
        status, headers, _ = request(server, path, headers={"Range": asked})
        assert status == 416 and headers["Content-Range"] == f"bytes */{len(data)}", asked
    for asked in ("bytes=50-10", "pages=1-2", "bytes=-", "bytes=0-5,10-20"):  # to ignore: the whole file
        status, headers, body = request(server, path, headers={"Range": asked})
        assert status == 200 and body == data, asked
    status, headers, body = request(server, path, method="HEAD")
    assert status == 200 and headers["Content-Length"] == str(len(data)) and body == b""

    status, headers, page = request(server, "/")
    assert status == 200 and b'<script src="/page/demo.js">' in page
    for name, kind in (("demo.js", "text/javascript"), ("demo.css", "text/css")):
        status, headers, _ = request(server, f"/page/{name}")
        assert status == 200 and headers.get_content_type() == kind
    for path in ("/page/../offer.py", "/page/%2e%2e/server.py", "/page/offer.py", "/nothing", "/videos/../../etc"):
        status, _, _ = request(server, path)
        assert status in (400, 404), path


@pytest.mark.slow
def test_uploads_appear_whole_or_not_at_all(server, demo_files, tmp_path):
    frames = np.zeros((30, 48, 48, 3), np.uint8)
    frames[:, 10:30, 10:30, 0] = 220
    write_video(str(tmp_path / "my clip (1).mp4"), frames, 10)
    data = (tmp_path / "my clip (1).mp4").read_bytes()
    status, _, body = request(server, "/api/upload", data, {"X-File-Name": "my%20clip%20(1).mp4",
                                                            "Content-Type": "application/octet-stream"})
    assert status == 200 and body["video"]["name"] == "my clip (1).mp4" and body["video"]["uploaded"]
    uploaded = [n for n in os.listdir(demo_files["uploads"]) if n.endswith(".mp4")]
    assert len(uploaded) == 1 and re.fullmatch(r"\d{3}-my_clip_1_\.mp4", uploaded[0]), uploaded
    assert open(os.path.join(demo_files["uploads"], uploaded[0]), "rb").read() == data
    _, videos = ids(server)
    assert videos["my clip (1).mp4"] == body["video"]["id"]
    checkpoints, _ = ids(server)
    trained = next(cid for label, cid in checkpoints.items() if label.endswith("tan/model_final.pth"))
    status, _, answer = request(server, "/api/ground", {"checkpoint": trained, "video": body["video"]["id"],
                                                        "sentences": SENTENCES[:1], "topk": 2})
    assert status == 200 and answer["video"]["duration"] == pytest.approx(3.0) and answer["answers"][0]["moments"]

    status, _, body = request(server, "/api/upload", b"hello", {"X-File-Name": "notes.txt"})
    assert status == 400 and "'notes.txt' is not a video file by its name" in body["error"]
    # too big: refused from its headers, before its body is read (the page checks the size before sending)
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=30) as connection:
        connection.sendall(b"POST /api/upload HTTP/1.1\r\nHost: localhost\r\nX-File-Name: big.mp4\r\n"
                           b"Content-Length: 2000001\r\n\r\n")
        reply = read_until_closed(connection).decode()
    assert reply.startswith("HTTP/1.1 400") and "'big.mp4' is 2.0 MB; this page takes uploads of up to 1.5 MB" in reply
    status, _, body = request(server, "/api/upload", data)
    assert status == 400 and "X-File-Name" in body["error"]
    # a client that goes away halfway: no file, and the shelf does not list it
    with socket.create_connection((host, port), timeout=30) as connection:
        connection.sendall(b"POST /api/upload HTTP/1.1\r\nHost: localhost\r\nX-File-Name: cut.mp4\r\n"
                           b"Content-Length: 100000\r\n\r\n" + data[:1000])
        connection.shutdown(socket.SHUT_WR)
        assert read_until_closed(connection).startswith(b"HTTP/1.1 400")
    assert sorted(os.listdir(demo_files["uploads"])) == uploaded
    assert "cut.mp4" not in ids(server)[1]


def read_until_closed(connection):
    return b"".join(iter(lambda: connection.recv(65536), b""))


@pytest.mark.slow
def test_a_refused_call_closes_its_connection_and_other_hosts_are_refused(server):
    """A body left unread must not be taken for the next request of a kept-alive connection."""
    host, port = server.server_address[:2]
    smuggled = b"GET /api/offer HTTP/1.1\r\nHost: localhost\r\n\r\n"
    for request_line, headers in ((b"POST /api/upload", b""), (b"POST /api/nothing", b"")):
        with socket.create_connection((host, port), timeout=30) as connection:
            connection.sendall(request_line + b" HTTP/1.1\r\nHost: localhost\r\n" + headers +
                               b"Content-Length: %d\r\n\r\n" % len(smuggled) + smuggled)
            reply = read_until_closed(connection)
        assert reply.count(b"HTTP/1.1 ") == 1 and reply.split(b" ")[1] in (b"400", b"404"), reply
    # a page of another site whose name was pointed at this machine (DNS rebinding)
    for name in (f"evil.example:{port}", "evil.example", "localhost.evil.example"):
        status, _, body = request(server, "/api/offer", headers={"Host": name})
        assert status == 403 and "localhost or to an IP address only" in body["error"], name
    for name in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}", "127.0.1.1",
                 f"app.localhost:{port}"):
        assert request(server, "/api/offer", headers={"Host": name})[0] == 200, name


def test_a_kept_upload_folder_is_listed_again_and_never_overwritten(tmp_path, monkeypatch):
    folder = tmp_path / "uploads"
    folder.mkdir()
    (folder / "001-first.mp4").write_bytes(b"earlier session")
    (folder / "notes.txt").write_bytes(b"not an upload")
    shelf = VideoShelf([], str(folder), max_upload_bytes=1000)
    assert [(v.id, v.name, v.uploaded) for v in shelf.all()] == [("u1", "first.mp4", True)]
    (folder / "002-first.mp4").write_bytes(b"another session's, meanwhile")

    class Body:
        def __init__(self, data):
            self.data = data

        def read(self, n):
            chunk, self.data = self.data[:n], self.data[n:]
            return chunk

    video = shelf.receive("first.mp4", Body(b"new"), 3)
    assert (video.id, os.path.basename(video.path)) == ("u2", "003-first.mp4")  # ids: this session's count
    assert [(folder / n).read_bytes() for n in ("001-first.mp4", "002-first.mp4", "003-first.mp4")] == [
        b"earlier session", b"another session's, meanwhile", b"new"]
    with pytest.raises(TanError, match="stopped after 2 of 5 bytes"):
        shelf.receive("cut.mp4", Body(b"ab"), 5)
    assert sorted(os.listdir(folder)) == ["001-first.mp4", "002-first.mp4", "003-first.mp4", "notes.txt"]

    def no_hard_links(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)  # a FAT or network folder: the name is reserved instead
    video = shelf.receive("second.mp4", Body(b"other"), 5)
    assert os.path.basename(video.path) == "004-second.mp4" and (folder / "004-second.mp4").read_bytes() == b"other"
    assert [v.id for v in VideoShelf([], str(folder), 1000).all()] == ["u1", "u2", "u3", "u4"]


def start_demo(*args, env=None, deadline=120):
    """tools/demo.py in the background; (process, its URL) once it listens."""
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tools", "demo.py"), "--port", "0", "--device", "cpu",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})), start_new_session=True)
    lines, found = [], threading.Event()

    def read():  # to the end, so that the server never blocks on a full pipe
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"open (http://\S+) ", line):
                found.set()

    proc.reader = threading.Thread(target=read, daemon=True)
    proc.reader.start()
    proc.lines = lines
    if not found.wait(deadline):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("tan-demo did not start:\n" + "".join(lines))
    return proc, next(re.search(r"open (http://\S+) ", line).group(1) for line in lines if "open http" in line)


def stop_demo(proc):
    """Ctrl-C, as a terminal sends it; (exit status, what it printed after starting)."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    proc.reader.join(30)
    return proc.returncode, "".join(proc.lines)


@pytest.mark.slow
def test_the_command_serves_until_ctrl_c_and_removes_its_uploads(demo_files, tmp_path):
    temporary = tmp_path / "tmp"  # the command's temporary folder, for its uploads
    temporary.mkdir()
    proc, url = start_demo(demo_files["runs"], "--videos", demo_files["videos"], env={"TMPDIR": str(temporary)})
    try:
        status, _, offer = request(url, "/api/offer")
        assert status == 200 and len(offer["checkpoints"]) == 2 and len(offer["videos"]) == 3
        status, _, body = request(url, "/api/upload", b"\x00" * 10, {"X-File-Name": "a.mp4"})
        assert status == 200
        [uploads] = os.listdir(temporary)
        assert uploads.startswith("tan-demo-uploads-") and len(os.listdir(temporary / uploads)) == 1
    finally:
        code, rest = stop_demo(proc)
    assert code == 130, rest
    assert "interrupted (Ctrl-C) while serving the demo page; uploaded videos are deleted" in rest
    assert "Traceback" not in rest
    assert os.listdir(temporary) == []



@pytest.fixture
def logging_as_it_was():
    """main() sets up the package's logger; the tests after this one expect it untouched."""
    logger = logging.getLogger("tan")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    for handler in [h for h in logger.handlers if h not in handlers]:
        logger.removeHandler(handler)
        handler.close()
    for handler in handlers:
        if handler not in logger.handlers:
            logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.mark.slow
def test_the_commands_mistakes_are_named(demo_files, tmp_path, logging_as_it_was):
    from tan_apps.commands.demo import main

    for args, message in (([str(tmp_path / "nowhere")], "no such checkpoint or folder"),
                          ([demo_files["runs"], "--videos", str(tmp_path / "none")], "none' not found"),
                          ([demo_files["runs"], "--port", "70000"], "--port 70000: expected 0 to 65535"),
                          ([demo_files["runs"], "--max-upload-mb", "0"], "--max-upload-mb 0")):
        with pytest.raises(TanError, match=re.escape(message)):
            main(args)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(TanError, match="choose another --port"):
            main([demo_files["runs"], "--port", str(taken.getsockname()[1]), "--upload-dir", str(tmp_path / "up")])


def browser():
    """A headless Chromium driven through its driver (Debian: apt-get install chromium chromium-driver)."""
    missing = [name for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER))
               if not path or not os.path.exists(path)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium")
    if missing:
        if os.environ.get("TAN_REQUIRE_BROWSER"):
            pytest.fail(f"the browser test needs {', '.join(missing)}")
        pytest.skip(f"no headless browser here ({', '.join(missing)} missing)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--autoplay-policy=no-user-gesture-required", "--mute-audio"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.mark.slow
def test_the_page_in_a_headless_browser(demo_files, video_dataset, tmp_path):
    """Choose a video of the folder and ask; upload one and ask two sentences; read the moments off
    the page against the API's; play one; look at the score map; save a screenshot."""
    upload = tmp_path / "uploaded_video.mp4"
    shutil.copy(os.path.join(video_dataset, "videos", "synvid_test_0003.mp4"), upload)
    driver = browser()  # first: a machine without one skips before anything starts
    proc = None
    try:
        proc, url = start_demo(demo_files["trained"], "--videos", demo_files["videos"])
        driver.get(url)
        page = Page(driver)
        page.wait_for("model-info", "video features: clip")
        model = tan.load_model(demo_files["trained"], device="cpu")

        page.choose_video("synvid_test_0002.mp4")
        page.ask([SENTENCES[0]])
        [want] = model.ground(model.encode_video_file(os.path.join(demo_files["videos"], "synvid_test_0002.mp4")),
                              SENTENCES[:1])
        assert [m[:2] for m in page.moments(0)] == [(m.start, m.end) for m in want]

        page.find("upload").send_keys(str(upload))
        page.wait_for("upload-status", "uploaded uploaded_video.mp4")
        page.ask(SENTENCES, topk=3)
        expected = model.ground(model.encode_video_file(str(upload)), SENTENCES, topk=3)
        for index, want in enumerate(expected):
            page.check_moments(index, want)
        page.check_playing(expected, upload)
        page.check_map()
        screenshot = tmp_path / "demo.png"
        driver.save_screenshot(str(screenshot))
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("TAN_DEMO_SCREENSHOT"):
            shutil.copy(screenshot, os.environ["TAN_DEMO_SCREENSHOT"])
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        driver.quit()
        if proc is not None:
            stop_demo(proc)


class Page:
    """The demo page in the browser, read and driven as a user would."""

    def __init__(self, driver):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.by, self.wait = driver, By, WebDriverWait(driver, 120)

    def find(self, element_id):
        return self.driver.find_element(self.by.ID, element_id)

    def all(self, selector):
        return self.driver.find_elements(self.by.CSS_SELECTOR, selector)

    def script(self, code):
        return self.driver.execute_script(code)

    def wait_for(self, element_id, text):
        self.wait.until(lambda d: text in self.find(element_id).text)

    def choose_video(self, name):
        from selenium.webdriver.support.ui import Select

        choices = Select(self.find("video"))
        choices.select_by_value(next(o.get_attribute("value") for o in choices.options if o.text.startswith(name)))

    def ask(self, sentences, topk=5):
        self.find("sentences").clear()
        self.find("sentences").send_keys("\n".join(sentences))
        self.find("topk").clear()
        self.find("topk").send_keys(str(topk))
        self.script("document.getElementById('answers').replaceChildren()")
        self.find("ask").click()
        self.wait.until(lambda d: len(self.all(".answer")) == len(sentences) or self.find("error").text)
        assert self.find("error").text == ""

    def moments(self, index):
        """(start, end, score) of sentence ``index``'s rows, from the page's data attributes."""
        return [tuple(float(r.get_attribute(f"data-{k}")) for k in ("start", "end", "score"))
                for r in self.all(f".answer[data-index='{index}'] tr.moment-row")]

    def check_moments(self, index, want):
        got = self.moments(index)
        assert [m[:2] for m in got] == [(m.start, m.end) for m in want]
        assert [m[2] for m in got] == pytest.approx([m.score for m in want], rel=1e-5)
        rows = self.all(f".answer[data-index='{index}'] tr.moment-row")
        shown = [r.text.split()[:4] for r in rows]  # what a reader sees: rank, start, end, score, rounded
        assert [s[0] for s in shown] == [f"#{k}" for k in range(1, len(want) + 1)]
        np.testing.assert_allclose([[float(v) for v in s[1:]] for s in shown],
                                   [(m.start, m.end, m.score) for m in want], atol=0.0051)
        bars = self.all(f".lane[data-answer='{index}'] .moment")
        assert [b.text for b in bars] == [str(k) for k in range(1, len(want) + 1)]

    def check_playing(self, expected, video):
        """A moment's bar or row: the player seeks to its start, plays, and pauses at its end."""
        self.seek_by_clicking(self.all(".lane[data-answer='0'] .moment")[0], expected[0][0].start)  # the top bar
        index, rank, moment = min(((i, r, m) for i, ms in enumerate(expected) for r, m in enumerate(ms)
                                   if m.start > 0.5), key=lambda t: t[2].end - t[2].start)
        row = self.all(f".answer[data-index='{index}'] tr.moment-row")[rank]
        self.seek_by_clicking(row, moment.start)
        assert "current" in row.get_attribute("class")
        assert SENTENCES[index] in self.find("map-sentence").text
        self.wait.until(lambda d: self.script("return document.getElementById('player').paused"))
        assert self.script("return document.getElementById('player').currentTime") == pytest.approx(
            moment.end, abs=0.3)
        player = self.script("const v = document.getElementById('player');"
                             "return {duration: v.duration, error: v.error && v.error.code}")
        assert player["error"] is None and player["duration"] == pytest.approx(expected_duration(video), abs=0.15)

    def seek_by_clicking(self, element, start):
        self.script("const v = document.getElementById('player'); v.pause(); window.seekedAt = null;"
                    "v.addEventListener('seeked', () => { if (window.seekedAt === null) window.seekedAt = v.currentTime; },"
                    " {once: true});")
        element.click()
        self.wait.until(lambda d: self.script("return window.seekedAt") is not None)
        assert self.script("return window.seekedAt") == pytest.approx(start, abs=0.05)

    def check_map(self):
        """Cells of many colours (the invalid ones grey), and the cell under the pointer described."""
        from selenium.webdriver.common.action_chains import ActionChains

        colours = self.script(
            "const c = document.getElementById('map'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            "const seen = new Set(); for (let i = 0; i < d.length; i += 4 * 7) seen.add(d[i] + ',' + d[i+1] + ',' + d[i+2]);"
            "return seen.size")
        assert colours > 10
        ActionChains(self.driver).move_to_element(self.find("map")).perform()
        assert re.fullmatch(r"row \d+, column \d+: (not a candidate|[\d.]+–[\d.]+ s, score [\d.]+)",
                            self.find("map-hover").text)


def expected_duration(path):
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return float(stream.duration * stream.time_base)


@pytest.mark.slow
def test_a_slow_client_does_not_hold_the_others(server):
    """Requests run in their own threads: a connection left open does not stop the page."""
    host, port = server.server_address[:2]
    idle = http.client.HTTPConnection(host, port, timeout=30)
    idle.connect()
    idle.sock.sendall(b"GET /api/offer HTTP/1.1\r\n")  # and never finishes its headers
    started = time.perf_counter()
    status, _, offer = request(server, "/api/offer")
    assert status == 200 and offer["checkpoints"] and time.perf_counter() - started < 10
    idle.close()
