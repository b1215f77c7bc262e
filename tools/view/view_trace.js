// The trace view: a Chrome trace-event file (tools/cli/view.cc keeps its
// complete, instant and flow events) as a timeline, one row per (pid, tid),
// nested slices stacked, flow events as arrows. Drawn on a canvas: text
// there is painted, never parsed.
cfView.trace = (function (view) {
  'use strict';
  var LABEL = 180, LEVEL = 18, ROW_GAP = 6, AXIS = 22;
  var data, rows, flows, canvas, ctx, state;

  function rowKey(e) { return e.pid + '\u0000' + e.tid; }

  function compare(a, b) {
    return typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b));
  }

  // Rows with their events sorted and stacked: a slice inside another goes
  // one level down, as Chrome's own viewer draws them.
  function buildRows(events) {
    var byKey = new Map();
    events.forEach(function (e, n) {
      e.n = n;
      var key = rowKey(e), row = byKey.get(key);
      if (!row) {
        row = { pid: e.pid, tid: e.tid, events: [], levels: 1 };
        byKey.set(key, row);
      }
      row.events.push(e);
    });
    var list = Array.from(byKey.values());
    list.sort(function (a, b) { return compare(a.pid, b.pid) || compare(a.tid, b.tid); });
    var y = AXIS;
    list.forEach(function (row) {
      row.events.sort(function (a, b) { return a.ts - b.ts || b.dur - a.dur; });
      var open = [];
      row.events.forEach(function (e) {
        while (open.length && open[open.length - 1] <= e.ts) open.pop();
        e.level = open.length;
        open.push(e.ts + e.dur);
        row.levels = Math.max(row.levels, e.level + 1);
      });
      var pname = data.processes[e2s(row.pid)], tname = data.threads[e2s(row.pid) + ':' + e2s(row.tid)];
      row.label = (pname || 'pid ' + row.pid) + ' / ' + (tname || 'tid ' + row.tid);
      row.y = y;
      y += row.levels * LEVEL + ROW_GAP;
    });
    return list;
  }

  function e2s(v) { return String(v); }

  function hue(text) {
    var h = 0;
    for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
    return Math.abs(h) % 360;
  }

  function x(ts) { return LABEL + (ts - state.t0) * state.scale; }

  function draw() {
    var w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    var tRight = state.t0 + (w - LABEL) / state.scale, q = state.query;
    rows.forEach(function (row) {
      if (!state.visible(row.pid)) return;
      var top = row.y - state.dy;
      if (top > h || top + row.levels * LEVEL < AXIS) return;
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL, AXIS, w - LABEL, h - AXIS);
      ctx.clip();
      row.events.forEach(function (e) {
        if (e.ts > tRight || e.ts + e.dur < state.t0) return;
        var left = x(e.ts), width = Math.max(1, e.dur * state.scale), y = top + e.level * LEVEL;
        var hit = q !== '' && e.name.toLowerCase().indexOf(q) >= 0;
        ctx.globalAlpha = q !== '' && !hit ? 0.3 : 1;
        ctx.fillStyle = 'hsl(' + hue(e.name) + ',55%,' + (e.ph === 'X' ? '62%' : '35%') + ')';
        ctx.fillRect(left, y + 1, e.ph === 'X' ? width : 3, LEVEL - 2);
        if (hit || e === state.hover) {
          ctx.strokeStyle = hit ? '#f9a825' : '#000';
          ctx.lineWidth = 2;
          ctx.strokeRect(left, y + 1, Math.max(width, 3), LEVEL - 2);
        }
        if (width > 30 && ctx.measureText(e.name).width < width - 6) {
          ctx.fillStyle = '#111';
          ctx.fillText(e.name, Math.max(left, LABEL) + 3, y + LEVEL / 2);
        }
      });
      ctx.restore();
      ctx.globalAlpha = 1;
      ctx.fillStyle = '#37474f';
      ctx.fillText(row.label, 4, top + LEVEL / 2, LABEL - 8);
    });
    drawFlows(w, h);
    drawAxis(w);
  }

  function drawFlows(w, h) {
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL, AXIS, w - LABEL, h - AXIS);
    ctx.clip();
    ctx.strokeStyle = '#3949ab';
    ctx.lineWidth = 1.2;
    flows.forEach(function (chain) {
      for (var k = 1; k < chain.length; k++) {
        var a = chain[k - 1], b = chain[k], ra = state.rowOf.get(rowKey(a)), rb = state.rowOf.get(rowKey(b));
        if (!state.visible(a.pid) || !state.visible(b.pid)) continue;
        var x0 = x(a.ts), y0 = ra.y - state.dy + LEVEL / 2, x1 = x(b.ts), y1 = rb.y - state.dy + LEVEL / 2;
        ctx.beginPath();
        ctx.moveTo(x0, y0);
        ctx.lineTo(x1, y1);
        ctx.stroke();
        var angle = Math.atan2(y1 - y0, x1 - x0);
        ctx.beginPath();
        ctx.moveTo(x1, y1);
        ctx.lineTo(x1 - 7 * Math.cos(angle - 0.4), y1 - 7 * Math.sin(angle - 0.4));
        ctx.lineTo(x1 - 7 * Math.cos(angle + 0.4), y1 - 7 * Math.sin(angle + 0.4));
        ctx.closePath();
        ctx.fillStyle = '#3949ab';
        ctx.fill();
      }
    });
    ctx.restore();
  }

  function drawAxis(w) {
    ctx.fillStyle = '#eceff1';
    ctx.fillRect(0, 0, w, AXIS);
    ctx.fillStyle = '#37474f';
    ctx.fillText('time (\u00b5s)', 4, AXIS / 2);
    var span = (w - LABEL) / state.scale, step = Math.pow(10, Math.floor(Math.log10(span / 5 || 1)));
    if (span / step > 10) step *= 2;
    if (span / step > 10) step *= 2.5;
    for (var t = Math.ceil(state.t0 / step) * step; t < state.t0 + span; t += step) {
      ctx.fillRect(x(t), AXIS - 6, 1, 6);
      ctx.fillText(String(Math.round((t - state.tmin) * 1000) / 1000), x(t) + 2, AXIS / 2);
    }
  }

  function eventAt(px, py) {
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r], top = row.y - state.dy;
      if (!state.visible(row.pid) || py < top || py >= top + row.levels * LEVEL) continue;
      var level = Math.floor((py - top) / LEVEL), t = state.t0 + (px - LABEL) / state.scale;
      var slack = 3 / state.scale, found = null;
      row.events.forEach(function (e) {
        if (e.level === level && e.ts - slack <= t && t <= e.ts + e.dur + slack) found = e;
      });
      return found;
    }
    return null;
  }

  function showEvent(e) {
    view.showDetails(e.name, [
      ['phase', e.ph === 'X' ? 'complete (X)' : 'instant (i)'], ['category', e.cat],
      ['pid', e.pid], ['tid', e.tid], ['ts', e.ts + ' \u00b5s'], ['dur', e.ph === 'X' ? e.dur + ' \u00b5s' : undefined],
      ['args', e.args === undefined ? undefined : JSON.stringify(e.args, null, 1)],
    ]);
  }

  function fit() {
    var w = canvas.clientWidth || 800;
    state.t0 = state.tmin;
    state.scale = (w - LABEL - 10) / Math.max(state.tmax - state.tmin, 1e-3);
    state.dy = 0;
    draw();
  }

  function bindEvents() {
    var drag = null;
    canvas.addEventListener('wheel', function (e) {
      e.preventDefault();
      var t = state.t0 + (e.offsetX - LABEL) / state.scale;
      state.scale *= e.deltaY < 0 ? 1.25 : 0.8;
      state.t0 = t - (e.offsetX - LABEL) / state.scale;
      draw();
    }, { passive: false });
    canvas.addEventListener('mousedown', function (e) { drag = { x: e.offsetX, y: e.offsetY, moved: false }; });
    window.addEventListener('mouseup', function () { drag = null; });
    canvas.addEventListener('mousemove', function (e) {
      if (drag) {
        state.t0 -= (e.offsetX - drag.x) / state.scale;
        state.dy = Math.max(0, state.dy - (e.offsetY - drag.y));
        drag.x = e.offsetX;
        drag.y = e.offsetY;
        draw();
        return;
      }
      var hit = eventAt(e.offsetX, e.offsetY);
      if (hit !== state.hover) {
        state.hover = hit;
        if (hit) showEvent(hit);
        draw();
      }
    });
    view.$('search').addEventListener('input', function (e) {
      state.query = e.target.value.trim().toLowerCase();
      draw();
    });
    view.$('images').addEventListener('change', function (e) {
      var set = view.parseRanges(e.target.value, Infinity);
      state.visible = set ? function (pid) { return set.has(Number(pid)); } : function () { return true; };
      draw();
    });
    view.$('fit').addEventListener('click', fit);
    window.addEventListener('resize', draw);
  }

  function start(input, t0) {
    data = input;
    ['kinds', 'critical', 'layout', 'expand-all', 'collapse-all', 'graph'].forEach(function (id) {
      var node = view.$(id);
      (node.closest('label') || node).hidden = true;
    });
    view.$('images').closest('label').firstChild.textContent = 'pids ';
    view.$('search').placeholder = 'event name';
    view.$('details').firstChild.textContent = 'Hover over an event to see its fields.';
    canvas = view.$('timeline');
    canvas.hidden = false;
    ctx = canvas.getContext('2d');
    rows = buildRows(data.events);
    var chains = new Map();
    data.flows.forEach(function (f) {
      var key = f.cat + '\u0000' + f.id;
      if (!chains.has(key)) chains.set(key, []);
      chains.get(key).push(f);
    });
    flows = [];
    state = { t0: 0, scale: 1, dy: 0, query: '', hover: null, visible: function () { return true; },
              tmin: Infinity, tmax: -Infinity, rowOf: new Map() };
    rows.forEach(function (row) { state.rowOf.set(rowKey(row), row); });
    chains.forEach(function (chain) {
      chain.sort(function (a, b) { return a.ts - b.ts; });
      // A flow point on a thread without slices has no row to sit on.
      if (chain.every(function (f) { return state.rowOf.has(rowKey(f)); })) flows.push(chain);
    });
    data.events.forEach(function (e) {
      state.tmin = Math.min(state.tmin, e.ts);
      state.tmax = Math.max(state.tmax, e.ts + e.dur);
    });
    if (!data.events.length) { state.tmin = 0; state.tmax = 1; }
    view.$('title').textContent = 'trace';
    view.$('summary').textContent = data.events.length + ' events, ' + flows.length + ' flows, ' +
        rows.length + ' threads \u00b7 ' + data.file;
    view.$('legend').appendChild(view.el('span', {}, 'one row per pid / tid; nested slices below their parent'));
    view.$('legend').appendChild(view.el('span', {}, 'blue arrows: flow events'));
    view.$('legend').appendChild(view.el('span', {}, 'wheel: zoom; drag: pan'));
    bindEvents();
    fit();
    view.setStatus({ mode: 'trace', events: data.events.length, flows: flows.length, rows: rows.length,
                     build_ms: Math.round(performance.now() - t0) });
  }

  return { start: start };
})(cfView);
