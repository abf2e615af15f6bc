// tan-demo's page: choose a checkpoint and a video, ask sentences, then show each sentence's
// top moments (timeline and table; a click plays the moment) and its score map.
"use strict";

const COLORS = ["#2f6fde", "#e8710a", "#1e8e3e", "#c5221f", "#9334e6", "#12a4af", "#b06000", "#5f6368"];
// viridis, sampled at nine even steps: dark blue for low scores, yellow for high ones
const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#fde725"]
  .map(hex => [1, 3, 5].map(i => parseInt(hex.slice(i, i + 2), 16)));
const INVALID_CELL = "#e6e8ec";

const $ = id => document.getElementById(id);
// generation: bumped whenever the model or the video changes, so that an answer to an older
// question is dropped instead of being drawn over another video
const state = { offer: null, result: null, selected: 0, stopAt: null, busy: false, ready: "ready", generation: 0 };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "style") Object.assign(node.style, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) node.append(child);
  return node;
}

function seconds(t) {  // 8.63, or 1:42.5 from 100 s on
  if (t < 100) return t.toFixed(2);
  const tenths = Math.round(t * 10), m = Math.floor(tenths / 600);
  return `${m}:${((tenths - 600 * m) / 10).toFixed(1).padStart(4, "0")}`;
}

function span(start, end) {  // "6.74–9.19 s", or "1:40.5–1:52.0"
  return `${seconds(start)}–${seconds(end)}${end < 100 ? " s" : ""}`;
}

function size(bytes) {
  if (bytes === null || bytes === undefined) return "missing";
  return bytes >= 1e5 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e3).toFixed(1)} kB`;
}

async function call(url, options = {}) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (e) {
    throw new Error(`the demo server did not answer (${e.message}); is tan-demo still running?`);
  }
  const body = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function setStatus(text, busy = false) {
  $("status").textContent = text;
  $("status").classList.toggle("busy", busy);
}

function showError(message) {
  $("error").textContent = message || "";
}

// ---- choices ------------------------------------------------------------------------------

function fillCheckpoints(checkpoints) {
  const select = $("checkpoint");
  select.replaceChildren();
  const runs = new Map();
  for (const c of checkpoints) {
    if (!runs.has(c.run)) runs.set(c.run, el("optgroup", { label: c.run }));
    runs.get(c.run).append(el("option", { value: c.id, textContent: c.name }));
  }
  select.append(...runs.values());
}

function fillVideos(videos, chosen) {
  const select = $("video");
  select.replaceChildren();
  if (!videos.length) select.append(el("option", { value: "", textContent: "(no video yet: upload one)" }));
  for (const v of videos) {
    const label = `${v.name}${v.uploaded ? " (uploaded)" : ""}, ${size(v.bytes)}`;
    select.append(el("option", { value: v.id, textContent: label }));
  }
  if (chosen) select.value = chosen;
}

async function describeCheckpoint() {
  const info = $("model-info"), chosen = $("checkpoint").value;
  info.textContent = "loading the model…";
  info.classList.remove("warning");
  try {
    const c = await call(`/api/checkpoints/${chosen}`);
    if (chosen !== $("checkpoint").value) return;  // another was chosen meanwhile: its own answer follows
    const lines = [`${c.run}/${c.name}: ${c.architecture}`];
    if (c.video_features.length) lines.push(`video features: ${c.video_features.join(" + ")}`);
    if (c.text_features) lines.push(`sentences: ${c.text_features}`);
    info.textContent = lines.join(" · ");
    if (!c.reads_video_files) {
      info.textContent = c.why_not;
      info.classList.add("warning");
    }
  } catch (e) {
    if (chosen !== $("checkpoint").value) return;
    info.textContent = e.message;
    info.classList.add("warning");
  }
}

function chooseVideo() {
  const id = $("video").value;
  const player = $("player");
  $("player-note").textContent = "";
  state.stopAt = null;
  if (id) player.src = `/videos/${id}`;
  else player.removeAttribute("src");
  clearResult();
}

async function upload(file) {
  const limit = state.offer.max_upload_bytes, dot = file.name.lastIndexOf(".");
  const extension = dot < 0 ? "" : file.name.slice(dot).toLowerCase();
  if (!state.offer.video_extensions.includes(extension)) {
    $("upload").value = "";
    return showError(`${file.name} is not a video file by its name: expected one of ${state.offer.video_extensions.join(" ")}`);
  }
  if (file.size > limit) {
    $("upload").value = "";
    return showError(`${file.name} is ${size(file.size)}; this page takes uploads of up to ${size(limit)}`);
  }
  $("upload-status").textContent = `uploading ${file.name}…`;
  setStatus("uploading", true);
  try {
    const { video } = await call("/api/upload", {
      method: "POST", body: file,
      headers: { "X-File-Name": encodeURIComponent(file.name), "Content-Type": "application/octet-stream" },
    });
    state.offer.videos.push(video);
    fillVideos(state.offer.videos, video.id);
    chooseVideo();
    $("upload-status").textContent = `uploaded ${video.name}`;
    showError("");
  } catch (e) {
    $("upload-status").textContent = "";
    showError(e.message);
  } finally {
    setStatus(state.ready);
    $("upload").value = "";
  }
}

// ---- asking -------------------------------------------------------------------------------

async function ask() {
  if (state.busy) return;
  const sentences = $("sentences").value.split("\n").map(s => s.trim()).filter(Boolean);
  const question = { checkpoint: $("checkpoint").value, video: $("video").value, sentences,
                     topk: Number($("topk").value) };
  if (!question.video) return showError("choose or upload a video first");
  // an empty or blank sentence is refused by the server, in the words every tool uses
  state.busy = true;
  $("ask").disabled = true;
  showError("");
  setStatus("making the video's features and grounding the sentences", true);
  const generation = state.generation;
  try {
    const result = await call("/api/ground", { method: "POST", body: JSON.stringify(question),
                                                headers: { "Content-Type": "application/json" } });
    if (generation !== state.generation) return;  // the model or the video changed meanwhile
    state.result = result;
    state.selected = 0;
    render();
    const s = result.seconds;
    $("timing").textContent = `${result.cached ? "features kept from before" : `features made in ${s.features.toFixed(2)} s`}`
      + `, grounded in ${s.grounding.toFixed(2)} s; video ${seconds(result.video.duration)}${result.video.duration < 100 ? " s" : ""} long`;
  } catch (e) {
    if (generation === state.generation) showError(e.message);
  } finally {
    state.busy = false;
    $("ask").disabled = false;
    setStatus(state.ready);
  }
}

function clearResult() {
  state.generation += 1;
  state.result = null;
  for (const id of ["map-rows", "map-cols", "legend-low", "legend-high"]) $(id).textContent = "";
  $("timeline").replaceChildren();
  $("answers").replaceChildren();
  $("timing").textContent = "";
  $("map-hover").textContent = "";
  $("map-sentence").textContent = "Ask a question to see the model's map of candidate moments.";
  const canvas = $("map");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
}

// ---- playing ------------------------------------------------------------------------------

function playMoment(start, end) {
  const player = $("player");
  state.stopAt = end;
  player.currentTime = start;
  const playing = player.play();
  if (playing) playing.catch(() => {});  // a file the browser cannot play: the seek still shows where
  markCurrent(start, end);
}

function markCurrent(start, end) {  // the moment playing, in the selected sentence's lane and table
  for (const node of document.querySelectorAll(".moment, .moment-row")) {
    node.classList.toggle("current", Number(node.dataset.answer) === state.selected
      && Number(node.dataset.start) === start && Number(node.dataset.end) === end);
  }
}

function onTime() {
  const player = $("player");
  if (state.stopAt !== null && player.currentTime >= state.stopAt) {
    player.pause();
    state.stopAt = null;
  }
  const duration = state.result && state.result.video.duration;
  const head = document.querySelector(".playhead");
  if (head && duration) head.style.left = `${Math.min(player.currentTime / duration, 1) * 100}%`;
}

function animate() {
  onTime();
  if (!$("player").paused) requestAnimationFrame(animate);
}

// ---- drawing ------------------------------------------------------------------------------

function niceStep(duration) {
  const raw = Math.max(duration, 0.01) / 8, power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map(f => f * power).find(step => step >= raw);
}

function render() {
  const { result } = state;
  const duration = result.video.duration;
  const timeline = $("timeline");
  const axis = el("div", { className: "axis" });
  for (let t = 0, step = niceStep(duration); t <= duration + 1e-9; t += step) {
    axis.append(el("span", { className: "tick", textContent: seconds(t), style: { left: `${(t / duration) * 100}%` } }));
  }
  const lanes = el("div", { className: "tracks" });
  const answers = [];
  result.answers.forEach((answer, index) => {
    const color = COLORS[index % COLORS.length];
    const best = Math.max(...answer.moments.map(m => m.score), 1e-9);
    const track = el("div", { className: "track", title: "click: go to this time",
                              onclick: e => { if (e.target === track) seekTo(e, track, duration); } });
    answer.moments.forEach((m, rank) => {
      track.append(el("div", {
        className: "moment", textContent: `${rank + 1}`, title: `#${rank + 1}: ${span(m.start, m.end)}, score ${m.score.toFixed(3)}`,
        "data-start": m.start, "data-end": m.end, "data-score": m.score, "data-rank": rank + 1, "data-answer": index,
        style: { left: `${(m.start / duration) * 100}%`, width: `${Math.max((m.end - m.start) / duration * 100, 0.4)}%`,
                 background: color, opacity: 0.35 + 0.65 * (m.score / best), zIndex: 1 + answer.moments.length - rank },
        onclick: () => { select(index); playMoment(m.start, m.end); },
      }));
    });
    lanes.append(el("div", { className: "lane", "data-answer": index },
      el("div", { className: "lane-label", textContent: answer.sentence, title: answer.sentence, onclick: () => select(index) }),
      track));
    answers.push(renderAnswer(answer, index, color));
  });
  const overlay = el("div", { style: { position: "absolute", left: "130px", right: "0", top: "0", bottom: "0", pointerEvents: "none" } },
                     el("div", { className: "playhead" }));
  lanes.append(overlay);
  timeline.replaceChildren(axis, lanes);
  $("answers").replaceChildren(...answers);
  select(state.selected);
  onTime();
}

function seekTo(event, track, duration) {
  const box = track.getBoundingClientRect();
  state.stopAt = null;
  $("player").currentTime = ((event.clientX - box.left) / box.width) * duration;
}

function renderAnswer(answer, index, color) {
  const rows = answer.moments.map((m, rank) => el("tr", {
    className: "moment-row", "data-start": m.start, "data-end": m.end, "data-score": m.score, "data-rank": rank + 1,
    "data-answer": index,
    onclick: () => { select(index); playMoment(m.start, m.end); },
  }, el("td", { textContent: `#${rank + 1}` }), el("td", { className: "start", textContent: seconds(m.start) }),
     el("td", { className: "end", textContent: seconds(m.end) }),
     el("td", {}, el("span", { className: "scorebar", style: { width: `${Math.round(m.score * 60)}px` } }),
        el("span", { className: "score", textContent: m.score.toFixed(3) })),
     el("td", { textContent: "▶", title: "play this moment" })));
  const body = rows.length ? rows : [el("tr", {}, el("td", { colSpan: 5, textContent: "no candidate scored above zero" }))];
  return el("div", { className: "answer", "data-index": index },
    el("h3", { onclick: () => select(index) }, el("span", { className: "swatch", style: { background: color } }), answer.sentence),
    el("table", { className: "moments" },
      el("thead", {}, el("tr", {}, ...["rank", "start", "end", "score", ""].map(t => el("th", { textContent: t })))),
      el("tbody", {}, ...body)));
}

function select(index) {
  state.selected = index;
  for (const lane of document.querySelectorAll(".lane")) lane.classList.toggle("selected", Number(lane.dataset.answer) === index);
  drawMap();
}

function viridis(x) {
  const t = Math.min(Math.max(x, 0), 1) * (VIRIDIS.length - 1), i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i;
  const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
  return `rgb(${a.map((v, k) => Math.round(v + f * (b[k] - v))).join(",")})`;
}

function drawMap() {
  const { result } = state;
  if (!result) return;
  const cells = result.map, answer = result.answers[state.selected];
  const canvas = $("map"), ratio = window.devicePixelRatio || 1, side = 360;
  canvas.width = side * ratio;
  canvas.height = side * ratio;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  const cell = side / Math.max(cells.rows, cells.cols);
  // colours span the sentence's own scores, lowest to highest: a map's contrast is in its differences
  const valid = answer.scores.filter(v => v !== null);
  const low = Math.min(...valid), high = Math.max(...valid), span = Math.max(high - low, 1e-9);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, side, side);
  answer.scores.forEach((v, k) => {
    ctx.fillStyle = v === null ? INVALID_CELL : viridis((v - low) / span);
    ctx.fillRect((k % cells.cols) * cell, Math.floor(k / cells.cols) * cell, Math.ceil(cell), Math.ceil(cell));
  });
  answer.moments.forEach((m, rank) => {
    const k = nearestCell(answer, cells, m);
    const x = (k % cells.cols + 0.5) * cell, y = (Math.floor(k / cells.cols) + 0.5) * cell, r = Math.max(7, cell * 0.45);
    ctx.beginPath();
    ctx.arc(x, y, r, 0, 2 * Math.PI);
    ctx.fillStyle = "rgba(0,0,0,0.72)";
    ctx.fill();
    ctx.fillStyle = "#fff";
    ctx.font = `bold ${Math.round(r * 1.2)}px system-ui, sans-serif`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(String(rank + 1), x, y + 0.5);
  });
  $("map-rows").textContent = `rows: ${cells.row_label}`;
  $("map-cols").textContent = `columns: ${cells.col_label}`;
  $("map-sentence").textContent = `“${answer.sentence}”: ${cells.rows} × ${cells.cols} cells, numbers mark the top moments; click a cell to play it`;
  $("legend-low").textContent = low.toFixed(3);
  $("legend-high").textContent = high.toFixed(3);
  drawLegend();
}

function nearestCell(answer, cells, moment) {
  let best = -1, distance = Infinity;
  answer.scores.forEach((v, k) => {
    if (v === null) return;
    const d = Math.abs(cells.starts[k] - moment.start) + Math.abs(cells.ends[k] - moment.end);
    if (d < distance) { best = k; distance = d; }
  });
  return best;
}

function drawLegend() {
  const canvas = $("legend"), ctx = canvas.getContext("2d");
  for (let x = 0; x < canvas.width; x++) {
    ctx.fillStyle = viridis(x / (canvas.width - 1));
    ctx.fillRect(x, 0, 1, canvas.height);
  }
}

function cellAt(event) {
  const { result } = state;
  if (!result) return -1;
  const canvas = $("map"), box = canvas.getBoundingClientRect(), cells = result.map;
  const cell = canvas.clientWidth / Math.max(cells.rows, cells.cols);  // inside the border
  const col = Math.floor((event.clientX - box.left - canvas.clientLeft) / cell);
  const row = Math.floor((event.clientY - box.top - canvas.clientTop) / cell);
  if (row < 0 || col < 0 || row >= cells.rows || col >= cells.cols) return -1;
  return row * cells.cols + col;
}

function hoverMap(event) {
  const k = cellAt(event);
  if (k < 0) return;
  const { map: cells, answers } = state.result, v = answers[state.selected].scores[k];
  $("map-hover").textContent = `row ${Math.floor(k / cells.cols)}, column ${k % cells.cols}: ` + (v === null
    ? "not a candidate" : `${span(cells.starts[k], cells.ends[k])}, score ${v.toFixed(3)}`);
}

function clickMap(event) {
  const k = cellAt(event);
  if (k < 0 || state.result.answers[state.selected].scores[k] === null) return;
  playMoment(state.result.map.starts[k], state.result.map.ends[k]);
}

// ---- start --------------------------------------------------------------------------------

async function start() {
  const player = $("player");
  player.addEventListener("timeupdate", onTime);
  player.addEventListener("seeked", onTime);
  player.addEventListener("play", () => requestAnimationFrame(animate));
  player.addEventListener("error", () => {
    $("player-note").textContent = "This browser cannot play this file (its format or codec); the moments below are still the model's.";
  });
  $("checkpoint").addEventListener("change", () => { clearResult(); describeCheckpoint(); });
  $("video").addEventListener("change", chooseVideo);
  $("upload").addEventListener("change", e => { if (e.target.files.length) upload(e.target.files[0]); });
  $("ask").addEventListener("click", ask);
  $("sentences").addEventListener("keydown", e => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) ask(); });
  $("map").addEventListener("mousemove", hoverMap);
  $("map").addEventListener("click", clickMap);
  setStatus("loading", true);
  try {
    state.offer = await call("/api/offer");
    $("topk").max = state.offer.max_topk;
    fillCheckpoints(state.offer.checkpoints);
    fillVideos(state.offer.videos);
    chooseVideo();
    state.ready = `ready · models run on ${state.offer.device}`;
    setStatus(state.ready);
    await describeCheckpoint();
  } catch (e) {
    showError(e.message);
    setStatus("");
  }
}

start();
