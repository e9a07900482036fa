-- tp.history._dashboard_page: the dashboard's HTML page around its charts: the style sheet and
-- the small script (hover or click on a run shows its metrics and software stack), both inline,
-- and the data the script reads, embedded as JSON that cannot end its <script> element.
local json = require('tp.json')

local M = {}

M.STYLE = [[
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 24px 40px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 18px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 4px; }
p.meta { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 10px 3px 0; text-align: left;
  vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.date { white-space: nowrap; }
.legend span { display: inline-block; margin-right: 16px; }
.legend i { display: inline-block; width: 22px; height: 3px; vertical-align: middle;
  margin-right: 6px; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .plot { fill: #fff; stroke: #bbb; }
svg .grid, svg .xgrid { stroke: #eee; }
svg .ytick { font-size: 11px; text-anchor: end; fill: #555; }
svg .xtick { font-size: 11px; text-anchor: middle; fill: #555; }
svg .ylabel { font-size: 12px; text-anchor: middle; fill: #333; }
svg .line { fill: none; stroke-width: 1.6; }
svg .run { cursor: pointer; stroke: #fff; stroke-width: 1; }
svg .run:hover, svg .run.sel { stroke: #000; stroke-width: 2; }
svg .change line { stroke-width: 1.5; stroke-dasharray: 5 3; }
svg .change text { font-size: 12px; font-weight: 600; }
svg .note line { stroke: #888; stroke-dasharray: 2 3; }
svg .note text { font-size: 10px; fill: #666; }
svg .empty { font-size: 14px; fill: #888; text-anchor: middle; }
ul.changes li.regression { color: #a40000; }
ul.changes li.improvement { color: #0a6b0a; }
#detail { position: fixed; right: 16px; bottom: 16px; width: 380px; max-height: 70vh;
  overflow: auto; background: #fffff4; border: 1px solid #999; padding: 8px 12px;
  box-shadow: 0 2px 8px rgba(0,0,0,.2); display: none; font-size: 13px; }
#detail.shown { display: block; }
#detail h3 { font-size: 14px; margin: 0 0 4px; }
#detail table { margin: 4px 0; }
]]

-- The script: reads the embedded data, shows a run's details on hover, focus or click (a click
-- pins them until the next click elsewhere), then marks the page ready (data-dashboard).
M.SCRIPT = [[
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('dashboard-data').textContent);
  var panel = document.getElementById('detail');
  var pinned = null;
  function text(tag, s, cls) {
    var e = document.createElement(tag);
    e.textContent = s;
    if (cls) { e.className = cls; }
    return e;
  }
  function fmt(v) {
    if (typeof v !== 'number') { return String(v); }
    var a = Math.abs(v);
    if (a >= 100) { return v.toFixed(1); }
    if (a >= 1) { return v.toFixed(3); }
    return v.toPrecision(4);
  }
  function rows(table, list) {
    list.forEach(function (r) {
      var tr = document.createElement('tr');
      tr.appendChild(text('th', r[0]));
      tr.appendChild(text('td', r[1], r[2]));
      table.appendChild(tr);
    });
  }
  function show(circle) {
    var s = data.series[Number(circle.getAttribute('data-s')) - 1];
    var p = s && s.points[Number(circle.getAttribute('data-i')) - 1];
    if (!p) { return; }
    while (panel.firstChild) { panel.removeChild(panel.firstChild); }
    panel.appendChild(text('h3', s.label));
    panel.appendChild(text('div', p.time + ' \u2014 run ' + p.run_id));
    var m = document.createElement('table');
    var list = [];
    data.metrics.forEach(function (name) {
      if (p.metrics[name] !== undefined) {
        list.push([data.labels[name] || name, fmt(p.metrics[name]), 'num']);
      }
    });
    rows(m, list);
    panel.appendChild(m);
    var stack = data.stacks[p.stack];
    if (stack && stack.length) {
      panel.appendChild(text('div', 'software stack'));
      var st = document.createElement('table');
      rows(st, stack.map(function (r) { return [r[0], r[1], '']; }));
      panel.appendChild(st);
    } else {
      panel.appendChild(text('div', 'software stack not recorded'));
    }
    panel.appendChild(text('div', 'record sha256 ' + p.sha256));
    panel.classList.add('shown');
  }
  function pin(c) {
    if (pinned) { pinned.classList.remove('sel'); }
    pinned = c;
    c.classList.add('sel');
    show(c);
  }
  function hide() {
    if (!pinned) { panel.classList.remove('shown'); }
  }
  var circles = document.querySelectorAll('circle.run');
  Array.prototype.forEach.call(circles, function (c) {
    c.addEventListener('mouseenter', function () { show(c); });
    c.addEventListener('focus', function () { show(c); });
    c.addEventListener('mouseleave', hide);
    c.addEventListener('click', function (ev) {
      ev.stopPropagation();
      pin(c);
      if (window.history && window.history.replaceState) {
        window.history.replaceState(null, '', '#' + c.id);
      }
    });
  });
  document.addEventListener('click', function () {
    if (pinned) { pinned.classList.remove('sel'); }
    pinned = null;
    hide();
  });
  // A link to a run (#run-S-I, S the series and I the run, from 1) opens with it pinned.
  var m = /^#(run-\d+-\d+)$/.exec(window.location.hash);
  var linked = m && document.getElementById(m[1]);
  if (linked) { pin(linked); }
  var first = document.querySelector('svg.chart');
  if (first) {
    var r = first.getBoundingClientRect();
    // Where the first chart lies on the page (CSS pixels): a check of a screenshot reads it.
    document.body.setAttribute('data-chart-box', [r.left + window.scrollX,
      r.top + window.scrollY, r.width, r.height].map(Math.round).join(','));
  }
  document.body.setAttribute('data-dashboard', 'ready');
  document.body.setAttribute('data-runs', String(circles.length));
}());
]]

--- JSON text safe inside a <script> element: '<', '>' and '&' as \u escapes (they only occur in
--- strings), so neither '</script>' nor '<!--' can appear.
---@param value any
---@return string
function M.embed_json(value)
  local text = assert(json.encode(value, { allow_nan = true }))
  return (text:gsub('[<>&]', { ['<'] = '\\u003c', ['>'] = '\\u003e', ['&'] = '\\u0026' }))
end

--- The whole page: `title`, `body` (HTML already escaped) and `data` (embedded for the script).
---@param title string escaped HTML
---@param body string
---@param data table
---@return string
function M.render(title, body, data)
  return table.concat({
    '<!DOCTYPE html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<title>' .. title .. '</title>',
    '<style>', M.STYLE, '</style>',
    '</head>',
    '<body data-dashboard="loading">',
    body,
    '<div id="detail" aria-live="polite"></div>',
    '<script type="application/json" id="dashboard-data">' .. M.embed_json(data) .. '</script>',
    '<script>', M.SCRIPT, '</script>',
    '</body>',
    '</html>',
    '',
  }, '\n')
end

return M
