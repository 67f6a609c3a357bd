/*
 * app.js — the sluice web UI: a single page over the JobManager's REST API
 * (Flink's paths and shapes), hash-routed, refreshed every REFRESH_MS.
 *
 *   #/overview                    jobs, TaskManagers, slots (GET /overview, /jobs/overview)
 *   #/job/:id                     the job graph with per-vertex figures (GET /jobs/:id
 *                                 "plan", and the vertex metric paths when they answer)
 *   #/job/:id/checkpoints         counts and history (GET /jobs/:id/checkpoints)
 *   #/job/:id/checkpoints/:ckid   per task: alignment, sync, async, sizes
 *   #/job/:id/exceptions          failures and restarts (GET /jobs/:id/exceptions)
 *   #/taskmanagers                GET /taskmanagers
 *
 * Every figure shown carries its value in an id or a data- attribute
 * (tests/test_web_ui.c reads them); a figure whose path does not answer
 * shows "—".  With SLUICE_REST_TOKEN set on the JobManager, a 401 shows
 * the login box; the token is kept in sessionStorage and sent as
 * "Authorization: Bearer".  No framework, no build step, nothing fetched
 * from elsewhere.
 */
'use strict';

var REFRESH_MS = 1500;
var DASH = '\u2014';
var main, busy = false, timer = null, lastHash = null, cancelArmed = {};

/* ---- helpers --------------------------------------------------------------- */

function esc(s) {
  return String(s === undefined || s === null ? '' : s).replace(/[&<>"']/g, function (c) {
    return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
  });
}
function $(id) { return document.getElementById(id); }
function fmtBytes(n) {
  if (n === undefined || n === null || n < 0) return DASH;
  var u = ['B', 'KB', 'MB', 'GB', 'TB'], i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
function fmtMs(ms) {
  if (ms === undefined || ms === null || ms < 0) return DASH;
  if (ms < 1000) return ms + ' ms';
  var s = ms / 1000;
  if (s < 60) return s.toFixed(1) + ' s';
  var m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + Math.floor(s % 60) + 's';
  return Math.floor(m / 60) + 'h ' + (m % 60) + 'm';
}
function fmtTime(t) { return t > 0 ? new Date(t).toLocaleString() : DASH; }
function st(s) { return '<span class="st ' + esc(s) + '">' + esc(s) + '</span>'; }
function pct(x) { return x === null || x === undefined || isNaN(x) ? DASH : Math.round(x * 100) + '%'; }
function num(x, d) { return x === null || x === undefined || isNaN(x) ? DASH : Number(x).toFixed(d || 0); }

/* ---- REST with the token --------------------------------------------------- */

function Unauthorized() {}

/* GET (or another method) path: the parsed JSON, null on 404 (a path that
 * does not exist yet), throws Unauthorized on 401 and an Error otherwise. */
function api(path, opts) {
  opts = opts || {};
  var headers = { 'Accept': 'application/json' };
  var tok = sessionStorage.getItem('sluice-token');
  if (tok) headers['Authorization'] = 'Bearer ' + tok;
  if (opts.body) headers['Content-Type'] = 'application/json';
  return fetch(path, { method: opts.method || 'GET', headers: headers, body: opts.body, cache: 'no-store' })
    .then(function (r) {
      if (r.status === 401) throw new Unauthorized();
      if (r.status === 404 && !opts.strict) return null;
      return r.text().then(function (t) {
        var j = null;
        try { j = t ? JSON.parse(t) : null; } catch (e) { j = null; }
        if (!r.ok) throw new Error((j && j.errors && j.errors.join('; ')) || ('HTTP ' + r.status));
        return j;
      });
    });
}

function showLogin(msg) {
  $('login').hidden = false;
  main.hidden = true;
  $('login-error').textContent = msg || '';
  $('login-token').focus();
}

/* ---- pages ----------------------------------------------------------------- */

function card(id, label, value) {
  return '<div class="card"><div class="k">' + esc(label) + '</div><div class="v" id="' + id + '" data-value="' +
    esc(value) + '">' + esc(value) + '</div></div>';
}

function pageOverview() {
  return Promise.all([api('/overview'), api('/jobs/overview')]).then(function (r) {
    var o = r[0] || {}, jobs = (r[1] && r[1].jobs) || [];
    var h = '<h1>Overview</h1><div class="sub">the cluster and its jobs</div><div class="cards">' +
      card('ov-taskmanagers', 'TaskManagers', o.taskmanagers) +
      card('ov-slots-total', 'Slots', o['slots-total']) +
      card('ov-slots-available', 'Available slots', o['slots-available']) +
      card('ov-jobs-running', 'Running jobs', o['jobs-running']) +
      card('ov-jobs-finished', 'Finished', o['jobs-finished']) +
      card('ov-jobs-cancelled', 'Cancelled', o['jobs-cancelled']) +
      card('ov-jobs-failed', 'Failed', o['jobs-failed']) + '</div>';
    var running = jobs.filter(function (j) { return !j['end-time'] || j['end-time'] < 0; });
    var ended = jobs.filter(function (j) { return j['end-time'] > 0; });
    function table(list, id) {
      if (!list.length) return '<p class="dash" id="' + id + '" data-count="0">none</p>';
      var t = '<table id="' + id + '" data-count="' + list.length + '"><tr><th>Job</th><th>State</th><th>Start</th>' +
        '<th class="num">Duration</th><th class="num">Tasks</th><th>ID</th></tr>';
      list.forEach(function (j) {
        t += '<tr class="job-row" data-job-id="' + esc(j.jid) + '" data-name="' + esc(j.name) + '" data-state="' +
          esc(j.state) + '"><td><a href="#/job/' + esc(j.jid) + '">' + esc(j.name) + '</a></td><td>' + st(j.state) +
          '</td><td>' + fmtTime(j['start-time']) + '</td><td class="num">' + fmtMs(j.duration) +
          '</td><td class="num">' + esc(j.tasks ? j.tasks.total : '') + '</td><td><code>' + esc(j.jid) +
          '</code></td></tr>';
      });
      return t + '</table>';
    }
    h += '<h2>Running jobs</h2>' + table(running, 'jobs-running') + '<h2>Completed jobs</h2>' + table(ended, 'jobs-ended');
    return h;
  });
}

function pageTaskManagers() {
  return api('/taskmanagers').then(function (r) {
    var tms = (r && r.taskmanagers) || [];
    var slots = 0;
    tms.forEach(function (t) { slots += t.slotsNumber || 0; });
    var h = '<h1>TaskManagers</h1><div class="cards">' + card('tm-count', 'TaskManagers', tms.length) +
      card('tm-slots', 'Slots', slots) + '</div><h2>Registered</h2><table><tr><th>ID</th><th>Address</th>' +
      '<th class="num">Data port</th><th class="num">Slots</th><th class="num">Free slots</th>' +
      '<th class="num">Last heartbeat</th></tr>';
    tms.forEach(function (t) {
      h += '<tr class="tm-row" data-tm-id="' + esc(t.id) + '" data-slots="' + esc(t.slotsNumber) + '"><td>' +
        esc(t.id) + '</td><td>' + esc(t.path) + '</td><td class="num">' + esc(t.dataPort) + '</td><td class="num">' +
        esc(t.slotsNumber) + '</td><td class="num">' + esc(t.freeSlots) + '</td><td class="num">' +
        fmtMs(t.timeSinceLastHeartbeat) + ' ago</td></tr>';
    });
    return h + '</table>';
  });
}

function jobHeader(job, id, tab) {
  var ended = job['end-time'] > 0;
  var h = '<div class="actions">' +
    (ended ? '' : '<button id="btn-savepoint" class="primary" data-job="' + esc(id) + '">Trigger savepoint</button>' +
      (cancelArmed[id] > Date.now() ? '<button id="btn-cancel" class="danger" data-armed="1" data-job="' + esc(id) +
        '">Click again to cancel</button>' : '<button id="btn-cancel" class="danger" data-job="' + esc(id) +
        '">Cancel job</button>')) + '</div>' +
    '<h1 id="job-name" data-value="' + esc(job.name) + '">' + esc(job.name) + '</h1>' +
    '<div class="sub"><span id="job-state" data-value="' + esc(job.state) + '">' + st(job.state) + '</span> &nbsp; ' +
    '<code>' + esc(id) + '</code> &nbsp; started ' + fmtTime(job['start-time']) + ', running ' + fmtMs(job.duration) +
    '</div><div class="tabs">';
  [['', 'Overview'], ['/checkpoints', 'Checkpoints'], ['/exceptions', 'Exceptions']].forEach(function (t) {
    h += '<a href="#/job/' + esc(id) + t[0] + '"' + (tab === t[0] ? ' class="on"' : '') + '>' + t[1] + '</a>';
  });
  return h + '</div>';
}

/* The vertex metric paths (another part of the REST API): whatever answers. */
function vertexFigures(id, v) {
  var base = '/jobs/' + encodeURIComponent(id) + '/vertices/' + encodeURIComponent(v.id);
  function soft(p) { return api(p).catch(function (e) { if (e instanceof Unauthorized) throw e; return null; }); }
  return Promise.all([soft(base + '/metrics?get=numRecordsInPerSecond,numRecordsOutPerSecond'),
    soft(base + '/backpressure'), soft(base + '/watermarks')]).then(function (r) {
    var f = { inRate: null, outRate: null, busy: null, bp: null, idle: null, wm: null, level: null };
    if (Array.isArray(r[0])) {
      r[0].forEach(function (m) {
        var x = parseFloat(m.value);
        if (isNaN(x)) return;
        if (/numRecordsInPerSecond$/.test(m.id)) f.inRate = (f.inRate || 0) + x;
        if (/numRecordsOutPerSecond$/.test(m.id)) f.outRate = (f.outRate || 0) + x;
      });
    }
    if (r[1] && Array.isArray(r[1].subtasks) && r[1].subtasks.length) {
      var n = r[1].subtasks.length, b = 0, p = 0, i = 0;
      r[1].subtasks.forEach(function (s) { b += +s.busyRatio || 0; p += +s.ratio || 0; i += +s.idleRatio || 0; });
      f.busy = b / n; f.bp = p / n; f.idle = i / n; f.level = r[1].backpressureLevel || null;
    }
    if (Array.isArray(r[2]) && r[2].length) {
      var w = null;
      r[2].forEach(function (m) {
        var x = Number(m.value);
        if (!isNaN(x) && x > -9e18 && (w === null || x < w)) w = x;
      });
      f.wm = w;
    }
    return f;
  });
}

/* Vertices in topological order, each with its column (longest path from a source). */
function layout(job) {
  var nodes = (job.plan && job.plan.nodes) || job.vertices.map(function (v) { return { id: v.id, inputs: [] }; });
  var byId = {}, level = {}, done = {}, order = [];
  nodes.forEach(function (n) { byId[n.id] = n; });
  function visit(n, depth) {
    if (done[n.id]) return level[n.id];
    if (depth > nodes.length) return 0; /* a cycle: cannot be, stay finite */
    var l = 0;
    (n.inputs || []).forEach(function (e) { if (byId[e.id]) l = Math.max(l, visit(byId[e.id], depth + 1) + 1); });
    done[n.id] = true;
    level[n.id] = l;
    order.push(n.id);
    return l;
  }
  nodes.forEach(function (n) { visit(n, 0); });
  return { nodes: nodes, order: order, level: level };
}

function pageJob(id) {
  var jp = '/jobs/' + encodeURIComponent(id);
  return api(jp).then(function (job) {
    if (!job) return '<h1>Job not found</h1><p><code>' + esc(id) + '</code></p>';
    return Promise.all(job.vertices.map(function (v) { return vertexFigures(id, v); })).then(function (figs) {
      var L = layout(job), W = 250, H = 96, GX = 90, GY = 24, cols = {}, pos = {};
      var vById = {}, fById = {};
      job.vertices.forEach(function (v, i) { vById[v.id] = v; fById[v.id] = figs[i]; });
      L.order.forEach(function (vid) {
        var c = L.level[vid];
        cols[c] = (cols[c] || 0) + 1;
        pos[vid] = { x: 20 + c * (W + GX), y: 20 + (cols[c] - 1) * (H + GY) };
      });
      var ncols = 0, nrows = 0;
      Object.keys(cols).forEach(function (c) { ncols = Math.max(ncols, +c + 1); nrows = Math.max(nrows, cols[c]); });
      var svg = '<svg id="job-graph" width="' + (40 + ncols * (W + GX) - GX) + '" height="' + (40 + nrows * (H + GY) - GY) +
        '"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" ' +
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8a9bb0"/></marker></defs>';
      var nedges = 0;
      L.nodes.forEach(function (n) {
        (n.inputs || []).forEach(function (e) {
          var a = pos[e.id], b = pos[n.id];
          if (!a || !b) return;
          nedges++;
          var x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
          svg += '<path class="edge" data-edge-from="' + esc(e.id) + '" data-edge-to="' + esc(n.id) + '" d="M' + x1 +
            ',' + y1 + ' C' + mx + ',' + y1 + ' ' + mx + ',' + y2 + ' ' + x2 + ',' + y2 + '"/>' +
            '<text class="edge-label" x="' + (mx - 24) + '" y="' + ((y1 + y2) / 2 - 6) + '">' + esc(e.ship_strategy) +
            '</text>';
        });
      });
      L.order.forEach(function (vid) {
        var v = vById[vid], f = fById[vid] || {}, p = pos[vid];
        if (!v) return;
        var name = v.name.length > 34 ? v.name.slice(0, 32) + '\u2026' : v.name;
        var bw = W - 20, bx = p.x + 10, by = p.y + H - 14;
        var bars = '';
        if (f.busy !== null && f.busy !== undefined) {
          var x = bx;
          [[f.busy, 'bar-busy'], [f.bp, 'bar-bp'], [f.idle, 'bar-idle']].forEach(function (s) {
            var w = Math.max(0, Math.min(1, s[0] || 0)) * bw;
            bars += '<rect class="' + s[1] + '" x="' + x + '" y="' + by + '" width="' + w + '" height="6"/>';
            x += w;
          });
        }
        svg += '<g class="vbox" data-vertex-id="' + esc(v.id) + '" data-parallelism="' + esc(v.parallelism) +
          '" data-status="' + esc(v.status) + '" data-name="' + esc(v.name) + '" data-in-rate="' + esc(num(f.inRate, 1)) +
          '" data-out-rate="' + esc(num(f.outRate, 1)) + '" data-busy="' + esc(pct(f.busy)) + '" data-backpressure="' +
          esc(pct(f.bp)) + '" data-idle="' + esc(pct(f.idle)) + '" data-watermark="' +
          esc(f.wm === null || f.wm === undefined ? DASH : f.wm) + '"><title>' + esc(v.name) + '</title>' +
          '<rect x="' + p.x + '" y="' + p.y + '" width="' + W + '" height="' + H + '"/>' +
          '<text x="' + (p.x + 10) + '" y="' + (p.y + 18) + '" font-weight="600">' + esc(name) + '</text>' +
          '<text class="m" x="' + (p.x + 10) + '" y="' + (p.y + 36) + '">parallelism ' + esc(v.parallelism) + ' \u00b7 ' +
          esc(v.status) + ' \u00b7 wm ' + (f.wm === null || f.wm === undefined ? DASH : esc(f.wm)) + '</text>' +
          '<text class="m" x="' + (p.x + 10) + '" y="' + (p.y + 52) + '">in ' + num(f.inRate, 1) + '/s \u00b7 out ' +
          num(f.outRate, 1) + '/s</text>' +
          '<text class="m" x="' + (p.x + 10) + '" y="' + (p.y + 68) + '">busy ' + pct(f.busy) + ' \u00b7 bp ' + pct(f.bp) +
          ' \u00b7 idle ' + pct(f.idle) + '</text>' + bars + '</g>';
      });
      svg += '</svg>';
      var h = jobHeader(job, id, '') + '<div id="graph" data-vertex-count="' + job.vertices.length + '" data-edge-count="' +
        nedges + '">' + svg + '</div><h2>Vertices</h2><table id="vertex-table"><tr><th>Name</th><th>Status</th>' +
        '<th class="num">Parallelism</th><th class="num">Records in/s</th><th class="num">Records out/s</th>' +
        '<th class="num">Busy</th><th class="num">Backpressured</th><th class="num">Idle</th><th class="num">Watermark</th></tr>';
      L.order.forEach(function (vid) {
        var v = vById[vid], f = fById[vid] || {};
        if (!v) return;
        h += '<tr><td class="wrap">' + esc(v.name) + '</td><td>' + st(v.status) + '</td><td class="num">' + esc(v.parallelism) +
          '</td><td class="num">' + num(f.inRate, 1) + '</td><td class="num">' + num(f.outRate, 1) + '</td><td class="num">' +
          pct(f.busy) + '</td><td class="num">' + pct(f.bp) + '</td><td class="num">' + pct(f.idle) + '</td><td class="num">' +
          (f.wm === null || f.wm === undefined ? DASH : esc(f.wm)) + '</td></tr>';
      });
      return h + '</table>';
    });
  });
}

function pageCheckpoints(id) {
  var jp = '/jobs/' + encodeURIComponent(id);
  return Promise.all([api(jp), api(jp + '/checkpoints')]).then(function (r) {
    var job = r[0], c = r[1];
    if (!job) return '<h1>Job not found</h1>';
    var h = jobHeader(job, id, '/checkpoints');
    if (!c) return h + '<p class="dash" id="ck-none">Checkpointing is not enabled for this job.</p>';
    var k = c.counts || {};
    h += '<div class="cards">' + card('ck-total', 'Triggered', k.total) + card('ck-completed', 'Completed', k.completed) +
      card('ck-failed', 'Failed', k.failed) + card('ck-in-progress', 'In progress', k.in_progress) +
      card('ck-restored', 'Restored', k.restored) + '</div>';
    var lc = c.latest && c.latest.completed;
    if (lc) h += '<p>Latest completed: <a href="#/job/' + esc(id) + '/checkpoints/' + lc.id + '" id="ck-latest" data-id="' +
      lc.id + '">#' + lc.id + '</a> ' + esc(lc.external_path || '') + '</p>';
    h += '<h2>History</h2><table id="ck-history"><tr><th class="num">ID</th><th>Status</th><th>Type</th><th>Triggered</th>' +
      '<th class="num">End to end</th><th class="num">Checkpointed</th><th class="num">State size</th>' +
      '<th class="num">Acknowledged</th></tr>';
    var hist = c.history || [], MAX_ROWS = 30;
    hist.slice(0, MAX_ROWS).forEach(function (x) {
      h += '<tr class="ck-row" data-ck-id="' + x.id + '" data-status="' + esc(x.status) + '" data-duration="' +
        esc(x.end_to_end_duration) + '" data-size="' + esc(x.checkpointed_size) + '"><td class="num"><a href="#/job/' +
        esc(id) + '/checkpoints/' + x.id + '">' + x.id + '</a></td><td>' + st(x.status) + '</td><td>' +
        (x.is_savepoint ? 'savepoint' : esc((x.checkpoint_type || 'checkpoint').toLowerCase())) + '</td><td>' +
        fmtTime(x.trigger_timestamp) + '</td><td class="num">' + fmtMs(x.end_to_end_duration) + '</td><td class="num">' +
        fmtBytes(x.checkpointed_size) + '</td><td class="num">' + fmtBytes(x.state_size) + '</td><td class="num">' +
        esc(x.num_acknowledged_subtasks) + '/' + esc(x.num_subtasks) + '</td></tr>';
    });
    h += '</table>';
    if (hist.length > MAX_ROWS) h += '<p class="dash">the ' + MAX_ROWS + ' newest of ' + hist.length + ' kept</p>';
    return h;
  });
}

function pageCheckpoint(id, ckid) {
  var jp = '/jobs/' + encodeURIComponent(id), dp = jp + '/checkpoints/details/' + encodeURIComponent(ckid);
  return Promise.all([api(jp), api(dp)]).then(function (r) {
    var job = r[0], d = r[1];
    if (!job) return '<h1>Job not found</h1>';
    var h = jobHeader(job, id, '/checkpoints');
    if (!d) return h + '<p class="dash" id="ck-gone">Checkpoint ' + esc(ckid) + ' is no longer in the history.</p>';
    var vids = job.vertices.map(function (v) { return v.id; }).filter(function (v) { return d.tasks && d.tasks[v]; });
    return Promise.all(vids.map(function (v) { return api(dp + '/subtasks/' + encodeURIComponent(v)); })).then(function (subs) {
      h += '<h2 id="ck-detail" data-ck-id="' + esc(d.id) + '" data-status="' + esc(d.status) + '">Checkpoint #' +
        esc(d.id) + ' ' + st(d.status) + '</h2><div class="sub">end to end ' + fmtMs(d.end_to_end_duration) + ', ' +
        fmtBytes(d.checkpointed_size) + ' checkpointed, ' + fmtBytes(d.state_size) + ' state' +
        (d.external_path ? ', at <code>' + esc(d.external_path) + '</code>' : '') + '</div>';
      var names = {};
      job.vertices.forEach(function (v) { names[v.id] = v.name; });
      vids.forEach(function (vid, i) {
        var s = subs[i] || { subtasks: [] }, align = 0, snap = 0;
        s.subtasks.forEach(function (t) {
          if (!t.checkpoint) return;
          align = Math.max(align, (t.alignment && t.alignment.duration) || 0);
          snap = Math.max(snap, t.checkpoint.sync + t.checkpoint.async);
        });
        var verdict = align + snap === 0 ? '' : align > snap ? 'mostly alignment time' : 'mostly snapshot time';
        h += '<h2>' + esc(names[vid]) + ' <span class="dash ck-verdict" data-vertex-id="' + esc(vid) + '">' + verdict +
          ' (alignment ' + fmtMs(align) + ', sync+async ' + fmtMs(snap) + ')</span></h2>' +
          '<table class="ck-subtasks" data-vertex-id="' + esc(vid) + '"><tr><th class="num">Subtask</th><th>Status</th>' +
          '<th class="num">End to end</th><th class="num">Start delay</th><th class="num">Alignment</th>' +
          '<th class="num">Sync</th><th class="num">Async</th><th class="num">Checkpointed</th>' +
          '<th class="num">State size</th><th class="num">Processed in alignment</th></tr>';
        s.subtasks.forEach(function (t) {
          var ok = !!t.checkpoint;
          h += '<tr class="ck-sub" data-vertex-id="' + esc(vid) + '" data-subtask="' + t.index + '" data-status="' +
            esc(t.status) + '"' + (ok ? ' data-sync="' + t.checkpoint.sync + '" data-async="' + t.checkpoint.async +
            '" data-align="' + t.alignment.duration + '" data-state-size="' + t.state_size +
            '" data-checkpointed-size="' + t.checkpointed_size + '" data-e2e="' + t.end_to_end_duration +
            '" data-start-delay="' + t.start_delay + '"' : '') + '><td class="num">' + t.index + '</td><td>' +
            esc(t.status) + '</td>' + (ok ? '<td class="num">' + fmtMs(t.end_to_end_duration) + '</td><td class="num">' +
            fmtMs(t.start_delay) + '</td><td class="num">' + fmtMs(t.alignment.duration) + '</td><td class="num">' +
            fmtMs(t.checkpoint.sync) + '</td><td class="num">' + fmtMs(t.checkpoint.async) + '</td><td class="num">' +
            fmtBytes(t.checkpointed_size) + '</td><td class="num">' + fmtBytes(t.state_size) + '</td><td class="num">' +
            fmtBytes(t.alignment.processed) + '</td>' : '<td colspan="8" class="dash">' + DASH + '</td>') + '</tr>';
        });
        h += '</table>';
      });
      return h;
    });
  });
}

function pageExceptions(id) {
  var jp = '/jobs/' + encodeURIComponent(id);
  return Promise.all([api(jp), api(jp + '/exceptions'), api(jp + '/config')]).then(function (r) {
    var job = r[0], e = r[1] || {}, cfg = r[2] || {};
    if (!job) return '<h1>Job not found</h1>';
    var entries = (e.exceptionHistory && e.exceptionHistory.entries) || [];
    var rs = cfg['execution-config'] && cfg['execution-config']['restart-strategy'];
    var h = jobHeader(job, id, '/exceptions') + '<div class="cards">' + card('ex-count', 'Failures', entries.length) +
      '</div>' + (rs ? '<p>Restart strategy: <span id="ex-restart-strategy">' + esc(rs) + '</span></p>' : '');
    if (e['root-exception']) h += '<h2>Root exception</h2><pre id="ex-root">' + esc(e['root-exception']) + '</pre>';
    h += '<h2>History (newest first)</h2>';
    if (!entries.length) return h + '<p class="dash">No failure.</p>';
    h += '<table id="ex-history"><tr><th>Time</th><th>Exception</th><th>Task</th><th>Location</th></tr>';
    entries.forEach(function (x) {
      h += '<tr class="ex-row" data-name="' + esc(x.exceptionName) + '"><td>' + fmtTime(x.timestamp) + '</td><td>' +
        esc(x.exceptionName) + '</td><td>' + esc(x.taskName || DASH) + '</td><td>' + esc(x.location || DASH) +
        '</td></tr><tr><td colspan="4"><pre>' + esc(x.stacktrace) + '</pre></td></tr>';
    });
    return h + '</table>';
  });
}

/* ---- routing and refresh --------------------------------------------------- */

function route() {
  var p = (location.hash || '#/overview').replace(/^#\/?/, '').split('/');
  document.querySelectorAll('[data-nav]').forEach(function (a) {
    a.classList.toggle('on', a.getAttribute('data-nav') === (p[0] || 'overview'));
  });
  if (p[0] === 'taskmanagers') return pageTaskManagers();
  if (p[0] === 'job' && p[1]) {
    if (p[2] === 'checkpoints' && p[3]) return pageCheckpoint(p[1], p[3]);
    if (p[2] === 'checkpoints') return pageCheckpoints(p[1]);
    if (p[2] === 'exceptions') return pageExceptions(p[1]);
    return pageJob(p[1]);
  }
  return pageOverview();
}

function refresh() {
  if (busy || !$('login').hidden) return;
  busy = true;
  var hash = location.hash;
  route().then(function (html) {
    if (hash !== location.hash) return; /* the user moved on: the next refresh draws that */
    var y = window.scrollY;
    main.innerHTML = html;
    main.hidden = false;
    if (hash === lastHash) window.scrollTo(0, y);
    lastHash = hash;
    if (!$('version').textContent) {
      api('/config').then(function (c) { if (c) $('version').textContent = c['flink-version'] || ''; })
        .catch(function () {});
    }
    var now = new Date();
    $('refreshed').textContent = 'refreshed ' + now.toLocaleTimeString();
    $('refreshed').setAttribute('data-ts', String(now.getTime()));
  }).catch(function (e) {
    if (e instanceof Unauthorized) {
      showLogin(sessionStorage.getItem('sluice-token') ? 'The token was refused.' : '');
      return;
    }
    main.innerHTML = '<p class="error" id="error">' + esc(e.message || e) + '</p>';
  }).then(function () { busy = false; });
}

/* ---- actions --------------------------------------------------------------- */

function savepointDialog(id) {
  $('dialog').hidden = false;
  $('dialog').setAttribute('data-job', id);
  $('sp-result').textContent = '';
  $('sp-result').setAttribute('data-status', '');
  $('sp-dir').focus();
}

function triggerSavepoint(e) {
  e.preventDefault();
  var id = $('dialog').getAttribute('data-job'), dir = $('sp-dir').value.trim(), out = $('sp-result');
  var jp = '/jobs/' + encodeURIComponent(id) + '/savepoints';
  function show(status, text, loc) {
    out.setAttribute('data-status', status);
    if (loc) out.setAttribute('data-location', loc);
    out.className = status === 'FAILED' ? 'error' : '';
    out.textContent = text;
  }
  show('IN_PROGRESS', 'Triggering\u2026');
  api(jp, { method: 'POST', strict: true, body: JSON.stringify({ 'target-directory': dir || null, 'cancel-job': false }) })
    .then(function (r) {
      var tid = r['request-id'], t0 = Date.now();
      (function poll() {
        api(jp + '/' + encodeURIComponent(tid), { strict: true }).then(function (s) {
          if (s.status && s.status.id === 'COMPLETED') {
            var op = s.operation || {};
            if (op['failure-cause']) show('FAILED', 'Failed: ' + op['failure-cause']['stack-trace']);
            else show('COMPLETED', 'Savepoint at ' + op.location, op.location);
          } else if (Date.now() - t0 > 120000) show('FAILED', 'No answer after 2 minutes (trigger ' + tid + ')');
          else { show('IN_PROGRESS', 'In progress\u2026 (trigger ' + tid + ')'); setTimeout(poll, 400); }
        }).catch(function (err) { show('FAILED', 'Failed: ' + (err.message || err)); });
      })();
    }).catch(function (err) {
      if (err instanceof Unauthorized) { $('dialog').hidden = true; showLogin('The token was refused.'); return; }
      show('FAILED', 'Failed: ' + (err.message || err));
    });
}

function cancelJob(btn) {
  var id = btn.getAttribute('data-job');
  if (btn.getAttribute('data-armed') !== '1') { /* two clicks, no blocking confirm() */
    cancelArmed[id] = Date.now() + 4000;
    btn.setAttribute('data-armed', '1');
    btn.textContent = 'Click again to cancel';
    return;
  }
  delete cancelArmed[id];
  api('/jobs/' + encodeURIComponent(id) + '?mode=cancel', { method: 'PATCH', strict: true }).then(refresh)
    .catch(function (err) { if (err instanceof Unauthorized) showLogin('The token was refused.'); else alert(err.message); });
}

document.addEventListener('DOMContentLoaded', function () {
  main = $('main');
  $('login-form').addEventListener('submit', function (e) {
    e.preventDefault();
    sessionStorage.setItem('sluice-token', $('login-token').value);
    $('login').hidden = true;
    refresh();
  });
  $('sp-form').addEventListener('submit', triggerSavepoint);
  $('sp-close').addEventListener('click', function () { $('dialog').hidden = true; });
  /* the buttons are redrawn on every refresh: one delegated listener */
  main.addEventListener('click', function (e) {
    var b = e.target.closest('button');
    if (!b) return;
    if (b.id === 'btn-savepoint') savepointDialog(b.getAttribute('data-job'));
    if (b.id === 'btn-cancel') cancelJob(b);
  });
  window.addEventListener('hashchange', refresh);
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
});
