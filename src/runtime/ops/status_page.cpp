// The status page at GET /: static HTML and JavaScript on the JSON API (no build toolchain).
// The bearer token, when the API has one, comes from the page's URL fragment (#token=...) or a
// prompt, and stays in the tab's sessionStorage.
#include "runtime/ops/api_server.h"

namespace picomq::runtime {

const char* const kStatusPageHtml = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>picomq-connect</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:.4em .6em;text-align:left;vertical-align:middle}
.state{font-weight:600}.running{color:#18794e}.error,.invalid{color:#c62828}.stopped,.disabled{color:#777}
.err{color:#c62828;font-size:.85em;white-space:pre-wrap;max-width:40em}
canvas{border:1px solid #eee;background:#fafafa}
button{margin-right:.3em}
#msg{color:#555;margin:.5em 0}
tr.dead td{border-bottom:1px solid #ddd;font-size:.85em;color:#555;padding-top:0}
tr.dead .reasons span{display:inline-block;margin-right:1.2em}
tr.dead .latest div{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:70em}
</style></head><body>
<h1>picomq-connect</h1>
<div id="msg">loading…</div>
<table><thead><tr><th>sink</th><th>state</th><th>lag</th><th>lag (last minutes)</th><th>written / s (last minutes)</th><th></th></tr></thead>
<tbody id="sinks"></tbody></table>
<script>
const m = location.hash.match(/token=([^&]+)/);
if (m) sessionStorage.setItem('picomq-token', decodeURIComponent(m[1]));
const token = () => sessionStorage.getItem('picomq-token');
const history = {};  // key -> [{t, lag, written}]
const KEEP = 150;    // samples (2 s apart: 5 minutes)
async function api(method, path) {
  const headers = token() ? {Authorization: 'Bearer ' + token()} : {};
  const r = await fetch(path, {method, headers});
  if (r.status === 401) {
    const t = prompt('API token');
    if (t) { sessionStorage.setItem('picomq-token', t); return api(method, path); }
  }
  return r.json();
}
function spark(canvas, values) {
  const c = canvas.getContext('2d'), w = canvas.width, h = canvas.height;
  c.clearRect(0, 0, w, h);
  if (values.length < 2) return;
  const max = Math.max(1, ...values);
  c.strokeStyle = '#1565c0'; c.beginPath();
  values.forEach((v, i) => { const x = i * w / (KEEP - 1), y = h - 2 - v / max * (h - 4); i ? c.lineTo(x, y) : c.moveTo(x, y); });
  c.stroke(); c.fillStyle = '#555'; c.font = '10px sans-serif'; c.fillText(String(Math.round(values[values.length - 1])), 2, 10);
}
async function act(key, action) {
  document.getElementById('msg').textContent = action + ' ' + key + '…';
  const r = await api('POST', '/sinks/' + encodeURIComponent(key) + '/' + action);
  document.getElementById('msg').textContent = r.message || r.error;
  refresh();
}
async function refresh() {
  let data;
  try { data = await api('GET', '/sinks'); } catch (e) { document.getElementById('msg').textContent = 'API unreachable: ' + e; return; }
  if (!data.sinks) { document.getElementById('msg').textContent = data.error || 'no data'; return; }
  const body = document.getElementById('sinks'), now = Date.now();
  for (const s of data.sinks) {
    // The group's lag as the broker has it (right for a paused or stopped sink too); the consumer's
    // position only until the first reading.
    const parts = s.group_lag ? s.group_lag.flat() : [];
    const lag = s.group_lag ? parts.reduce((x, p) => x + Math.max(0, p.lag), 0)
                            : s.blocks.reduce((a, b) => a + b.lag.reduce((x, p) => x + Math.max(0, p.lag), 0), 0);
    const age = parts.reduce((x, p) => Math.max(x, p.lag_seconds || 0), 0);
    const written = s.blocks.reduce((a, b) => a + b.counters.written_records, 0);
    const h = history[s.key] = history[s.key] || [];
    h.push({t: now, lag, written}); if (h.length > KEEP) h.shift();
    let row = document.getElementById('sink-' + s.key);
    if (!row) {
      row = document.createElement('tr'); row.id = 'sink-' + s.key; row.className = 'sink';
      row.innerHTML = '<td class="key"></td><td><span class="state"></span><div class="err"></div></td><td class="lag"></td>' +
        '<td><canvas class="lagc" width="200" height="36"></canvas></td><td><canvas class="ratec" width="200" height="36"></canvas></td>' +
        '<td><button data-a="stop">stop</button><button data-a="start">start</button><button data-a="restart">restart</button></td>';
      row.querySelector('.key').textContent = s.key;
      row.querySelectorAll('button').forEach(b => b.onclick = () => act(s.key, b.dataset.a));
      body.appendChild(row);
    }
    const st = row.querySelector('.state'); st.textContent = s.state; st.className = 'state ' + s.state;
    row.dataset.state = s.state;
    row.querySelector('.err').textContent = s.error || s.reload_error || '';
    row.querySelector('.lag').textContent = lag + (age > 0 ? ' (' + age.toFixed(0) + ' s)' : '');
    spark(row.querySelector('.lagc'), h.map(x => x.lag));
    spark(row.querySelector('.ratec'), h.slice(1).map((x, i) => Math.max(0, (x.written - h[i].written) * 1000 / Math.max(1, x.t - h[i].t))));
  }
  for (const row of [...body.children])
    if (!data.sinks.some(s => 'sink-' + s.key === row.id || 'dead-' + s.key === row.id)) row.remove();
  document.getElementById('msg').textContent = data.sinks.length + ' sinks, updated ' + new Date().toLocaleTimeString();
}
// Dead letters of each sink that has a dead-letter topic: counts by stage and reason and the
// newest few, read from the topic every 30 s (a scan of it: not on every refresh).
const deadSeen = {};
async function refreshDead() {
  let data;
  try { data = await api('GET', '/sinks'); } catch (e) { return; }
  for (const s of data.sinks || []) {
    const topics = ((s.definition || {}).topics || []).filter(t => t.dead_letter_topic);
    const row = document.getElementById('sink-' + s.key);
    if (!topics.length || !row) continue;
    const k = encodeURIComponent(s.key);
    const [counts, latest] = await Promise.all([api('GET', '/sinks/' + k + '/dead-letters/counts'),
                                                api('GET', '/sinks/' + k + '/dead-letters?latest=3')]);
    let dead = document.getElementById('dead-' + s.key);
    if (!dead) {
      dead = document.createElement('tr'); dead.id = 'dead-' + s.key; dead.className = 'dead';
      dead.innerHTML = '<td></td><td colspan="5"><div class="reasons"></div><div class="latest"></div>' +
                       '<div><button class="redrive">redrive all</button> <span class="redrive-state"></span></div></td>';
      dead.querySelector('button.redrive').onclick = () => redrive(s.key, dead);
      row.after(dead);
    }
    dead.dataset.count = counts.matched === undefined ? '' : String(counts.matched);
    const reasons = dead.querySelector('.reasons'), newest = dead.querySelector('.latest');
    reasons.textContent = ''; newest.textContent = '';
    const head = document.createElement('span');
    head.textContent = counts.error ? 'dead letters: ' + counts.error
                                    : 'dead letters in ' + counts.topic + ': ' + counts.matched;
    reasons.appendChild(head);
    for (const c of counts.counts || []) {
      const e = document.createElement('span'); e.className = 'reason';
      e.textContent = c.count + ' × ' + c.stage + ': ' + c.reason.slice(0, 80);
      reasons.appendChild(e);
    }
    for (const r of latest.records || []) {
      const d = document.createElement('div'); d.className = 'letter';
      d.textContent = r.dead_lettered_at + '  ' + r.source.topic + '[' + r.source.partition + ']@' + r.source.offset +
                      '  ' + r.stage + ': ' + r.reason;
      newest.appendChild(d);
    }
  }
}
// Sends every dead letter of the sink back through it (docs/operations.md, "Dead letters"),
// then follows the redrive's progress until it ends.
async function redrive(key, dead) {
  if (!confirm('Redrive every dead letter of ' + key + ' through its definition as it is now?')) return;
  const state = dead.querySelector('.redrive-state');
  const k = encodeURIComponent(key);
  let p = await api('POST', '/sinks/' + k + '/dead-letters/redrive');
  while (p.id && p.state === 'running') {
    state.textContent = 'redrive ' + p.id + ' running: ' + p.written + ' written, ' + p.bad_again + ' bad again';
    await new Promise(r => setTimeout(r, 1000));
    p = await api('GET', '/sinks/' + k + '/redrives/' + encodeURIComponent(p.id));
  }
  state.textContent = p.id ? 'redrive ' + p.id + ' ' + p.state + ': ' + p.written + ' written, ' + p.bad_again +
                             ' bad again' + (p.error ? ' (' + p.error + ')' : '')
                           : 'redrive refused: ' + p.error;
  setTimeout(refreshDead, 500);
}
refresh(); setInterval(refresh, 2000);
setTimeout(refreshDead, 500); setInterval(refreshDead, 30000);
</script></body></html>
)HTML";

}  // namespace picomq::runtime
