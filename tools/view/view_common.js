// What both views share: the data, DOM helpers that only ever set text
// (never markup built from data), the details panel and the status line a
// headless run reads.
var cfView = (function () {
  'use strict';
  var view = {};

  view.$ = function (id) { return document.getElementById(id); };

  // An element with attributes and children; strings become text nodes, so
  // data is never parsed as markup.
  view.el = function (tag, attrs) {
    var node = document.createElement(tag);
    var key;
    for (key in attrs || {}) node.setAttribute(key, attrs[key]);
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
    }
    return node;
  };

  view.clear = function (node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  };

  // Shows `rows` ([field, value] pairs) under `title` in the side panel;
  // `actions` are buttons ([label, handler]).
  view.showDetails = function (title, rows, actions) {
    var panel = view.clear(view.$('details'));
    panel.appendChild(view.el('h2', {}, title));
    var table = view.el('table');
    rows.forEach(function (row) {
      if (row[1] === undefined || row[1] === null || row[1] === '') return;
      table.appendChild(view.el('tr', {}, view.el('th', {}, row[0]), view.el('td', {}, row[1])));
    });
    panel.appendChild(table);
    (actions || []).forEach(function (action) {
      var button = view.el('button', { type: 'button' }, action[0]);
      button.addEventListener('click', action[1]);
      panel.appendChild(button);
    });
  };

  view.bytes = function (n) {
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB';
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
    if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
    return n + ' B';
  };

  // "0-3,7" as a set of numbers below `limit`; null for "all" (empty).
  view.parseRanges = function (text, limit) {
    text = text.trim();
    if (text === '' || text === 'all') return null;
    var set = new Set();
    text.split(',').forEach(function (part) {
      var m = /^\s*(\d+)\s*(?:-\s*(\d+))?\s*$/.exec(part);
      if (!m) return;
      var lo = Number(m[1]), hi = m[2] === undefined ? lo : Number(m[2]);
      for (var i = lo; i <= Math.min(hi, limit - 1); i++) set.add(i);
    });
    return set;
  };

  // The status line: `fields` merged into what is shown, errors appended.
  var statusFields = {};
  view.setStatus = function (fields) {
    for (var key in fields) statusFields[key] = fields[key];
    var parts = [];
    for (key in statusFields) parts.push(key + '=' + statusFields[key]);
    parts.push('errors=' + window.cfErrors.length);
    var lines = [parts.join(' ')].concat(window.cfErrors);
    view.$('status').textContent = lines.join('\n');
  };

  view.start = function () {
    var t0 = performance.now();
    var data = JSON.parse(view.$('cf-data').textContent);
    document.title = 'carflow view: ' + data.file;
    if (data.format === 'trace') view.trace.start(data, t0);
    else view.graph.start(data, t0);
    // Errors raised later (while drawing, on events) reach the status too.
    window.addEventListener('error', function () { view.setStatus({}); });
  };

  return view;
})();
