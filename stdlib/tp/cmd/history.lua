-- tplua history: every run kept in a database (tp.history, docs/history.md): add records, list
-- the series, show one, note events, find regressions and improvements, write the dashboard.
local cli = require('tp.cli')

local M = {}

M.summary = 'keep every run in a database; find regressions over time (add, check, dashboard)'

M.usage = [[
usage: tplua history add DIR|RECORD... [--db PATH|URL]
       tplua history list [--metric M] [--last N] [--db PATH|URL]
       tplua history show SERIES [--metric M] [--since DATE] [--last N] [--db PATH|URL]
       tplua history note SERIES|'*' DATE TEXT... [--db PATH|URL]
       tplua history check [SERIES...] [--since DATE] [--metric M] [--fail-on PCT] [--json]
                           [--db PATH|URL]
       tplua history dashboard --out DIR [--since DATE] [--metric M] [--db PATH|URL]

The history is a SQLite file ($TPLUA_HISTORY, else $XDG_DATA_HOME/tplua/history.db, else
~/.local/share/tplua/history.db) or a PostgreSQL database (a postgresql:// URL); --db chooses.
Only add and note create a history; the others refuse one that does not exist (a file that is
not there or is empty, a database without the history's tables).
Runs are grouped in series of comparable runs: platform/GPU/framework@version/model/config
hash/methodology (docs/history.md says how each part is read from a record).

  add        stores run records: record files, tprimat-era result files, results directories
             (searched recursively for *.json). A record stored already is not added again.
  list       each series: its runs, the last value of the metric, the trend over the last N
             runs (the newer half's mean against the older half's), first and last date
  show       one series' runs (date, run, value and CI, the software stack where it changes)
             with a sparkline and the notes; SERIES is a key, a series id, or part of a key
  note       notes an event at a date on a series ('*': on every series); shown beside changes
  check      finds the changes in each series, or in those whose key matches a SERIES
             (E-divisive means with a significance test, and the latest runs against the
             baseline window), with what changed in the software stack at each
  dashboard  writes a self-contained HTML page (DIR/index.html): a table of the series, then
             one chart per group of comparable series (same model, config hash and
             methodology: a line per platform, GPU and framework) with the change points
             and notes marked, and each run's metrics and software stack on hover

options:
  --db PATH|URL   the history (default: $TPLUA_HISTORY, else the file above)
  --metric M      tokens_per_s_per_gpu (default), tokens_per_s, step_time_s, mfu,
                  joules_per_token, final_loss, peak_memory_gb
  --since DATE    only runs from DATE on (YYYY-MM-DD or an ISO-8601 time)
  --last N        list: runs the trend covers (default 10); show: the last N runs only
  --fail-on PCT   check: exit 4 when a regression larger than PCT percent is found, 1 when no
                  series could be checked (none, or too few runs in each)
  --json          check: print one JSON document instead of the text
  --out DIR       dashboard: the directory to write
  -h, --help      show this help

exit status: 0 on success; 4 when check finds a regression beyond --fail-on; 1 on an error (a
file that is not a run record, a history that does not exist, cannot be opened or is of a newer
schema, an unknown series, a check --fail-on that checked no series); 2 on a usage error.

examples:
  tplua history add output/nightly-2026-11-27
  tplua history list
  tplua history show mi300x/primus
  tplua history note '*' 2026-11-20 'cluster moved to the new cooling loop'
  tplua history check --since 2026-10-01 --fail-on 3
  tplua history dashboard --out public/perf
  TPLUA_HISTORY=postgresql://perf@db.example.org/tplua tplua history list
]]

local SPEC = { db = 'string', metric = 'string', since = 'string', last = 'integer',
  fail_on = 'number', json = 'boolean', out = 'string', help = 'boolean' }

-- The options each subcommand takes (besides --db and --help).
local TAKES = {
  add = {}, list = { metric = true, last = true },
  show = { metric = true, since = true, last = true }, note = {},
  check = { since = true, metric = true, fail_on = true, json = true },
  dashboard = { out = true, since = true, metric = true },
}

local function usage_error(msg)
  return cli.usage_error('history', msg, M.usage)
end

local function fail(msg)
  io.stderr:write('tplua history: ', tostring(msg), '\n')
  return 1
end

-- Only the subcommands that write create a history that is not there.
local CREATES = { add = true, note = true }

local function open(opts, sub)
  local history = require('tp.history')
  local h, err = history.open(opts.db, { create = CREATES[sub] == true })
  if not h then
    return nil, err
  end
  return h
end

local function run_add(h, rest)
  local history = require('tp.history')
  local res, err, _, so_far = h:add(rest)
  if not res then
    io.stderr:write('tplua history: ', tostring(err), '\n')
    if so_far and so_far.added > 0 then
      io.stderr:write(string.format('tplua history: the %d run%s added before it stay stored\n',
        so_far.added, so_far.added == 1 and '' or 's'))
    end
    return 1
  end
  for _, f in ipairs(res.failed) do
    local msg = tostring(f.error)
    if not msg:find(f.path, 1, true) then
      msg = f.path .. ': ' .. msg
    end
    io.stderr:write('tplua history: skipped ', msg, '\n')
  end
  for _, f in ipairs(res.ignored) do
    io.stdout:write('history: not added: ', f.reason, '\n')
  end
  io.stdout:write(string.format('history: %d run%s added, %d already stored, %d skipped (%s)\n',
    res.added, res.added == 1 and '' or 's', res.skipped, #res.failed + #res.ignored,
    history.display(h.target)))
  return #res.failed > 0 and 1 or 0
end

local function check_metric(opts)
  if opts.metric then
    local ok, err = require('tp.history').check_metric(opts.metric)
    if not ok then
      return nil, err
    end
  end
  return opts.metric or require('tp.history').DEFAULT_METRIC
end

local function check_since(opts)
  if opts.since then
    local ok, err = require('tp.history').parse_time(opts.since)
    if not ok then
      return nil, '--since: ' .. err
    end
  end
  return true
end

-- Writes `text` to stdout (0), or the error when there is none (1).
local function print_text(text, err)
  if not text then
    return fail(err)
  end
  io.stdout:write(text)
  return 0
end

local function run_list(h, _rest, opts)
  return print_text(require('tp.history').list_text(h, { metric = opts.metric,
    last = opts.last }))
end

local function run_show(h, rest, opts)
  local s, err = h:resolve(rest[1])
  if not s then
    return fail(err)
  end
  return print_text(require('tp.history').show_text(h, s, { metric = opts.metric,
    since = opts.since, last = opts.last }))
end

local function run_note(h, rest)
  local key = rest[1]
  if key ~= '*' then
    local s, err = h:resolve(key)
    if not s then
      return fail(err)
    end
    key = s.key
  end
  local text = table.concat(rest, ' ', 3)
  local ok, err = h:note(key, rest[2], text)
  if not ok then
    return fail(err)
  end
  io.stdout:write(string.format('history: noted on %s at %s: %s\n',
    key == '*' and 'every series' or key, rest[2], text))
  return 0
end

local function run_check(h, rest, opts)
  -- Each SERIES is a key, or a part or Lua pattern of keys: every series it matches is checked.
  local series = #rest > 0 and rest or nil
  local history = require('tp.history')
  local report, err = h:check({ series = series, since = opts.since, metric = opts.metric,
    fail_on = opts.fail_on, seed = 1 })
  if not report then
    return fail(err)
  end
  if opts.json then
    local json = require('tp.json')
    io.stdout:write(assert(json.encode(history.check_json(report), { pretty = true,
      allow_nan = true })), '\n')
  else
    io.stdout:write(history.check_text(report))
  end
  if report.nothing_checked then
    -- A gate that tested nothing has not passed: an empty or mistyped history, a filter or a
    -- --since that leaves too few runs.
    return fail(string.format('check --fail-on %g: %s', opts.fail_on, report.nothing_checked))
  end
  return report.failed and 4 or 0
end

local function run_dashboard(h, _rest, opts)
  local path, err = require('tp.history.dashboard').write(h, opts.out,
    { since = opts.since, metric = opts.metric })
  if not path then
    return fail(err)
  end
  io.stdout:write(string.format('history: dashboard written to %s\n', path))
  return 0
end

-- The arguments each subcommand takes: nil when `n` is right, else the usage error.
local ARITY = {
  add = function(n)
    return n == 0 and 'add: no DIR or RECORD given' or nil
  end,
  list = function(n)
    return n > 0 and 'list takes no arguments' or nil
  end,
  show = function(n)
    return n ~= 1 and 'show takes one SERIES' or nil
  end,
  note = function(n)
    return n < 3 and 'note takes SERIES DATE TEXT' or nil
  end,
  check = function()
    return nil
  end,
  dashboard = function(n, opts)
    if n > 0 then
      return 'dashboard takes no arguments (--out DIR)'
    end
    return not opts.out and 'dashboard: --out DIR is required' or nil
  end,
}

local RUN = { add = run_add, list = run_list, show = run_show, note = run_note,
  check = run_check, dashboard = run_dashboard }

function M.run(args)
  local opts, rest = cli.parse(args, SPEC)
  if not opts then
    return usage_error(rest)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  local sub = table.remove(rest, 1)
  if not sub then
    return usage_error('no subcommand given (add, list, show, note, check, dashboard)')
  end
  local fn = RUN[sub]
  if not fn then
    local near = cli.suggest(sub, { 'add', 'list', 'show', 'note', 'check', 'dashboard' })
    return usage_error(string.format("unknown subcommand '%s' (%s)", sub, near
      and string.format("did you mean '%s'?", near) or 'add, list, show, note, check, dashboard'))
  end
  for k in pairs(opts) do
    if k ~= 'db' and not TAKES[sub][k] then
      return usage_error(string.format("%s does not take '--%s'", sub, k:gsub('_', '-')))
    end
  end
  local metric, merr = check_metric(opts)
  if not metric then
    return usage_error(merr)
  end
  opts.metric = metric
  local sok, serr = check_since(opts)
  if not sok then
    return usage_error(serr)
  end
  if opts.last and opts.last < (sub == 'list' and 2 or 1) then
    return usage_error(string.format('--last: %d runs at least', sub == 'list' and 2 or 1))
  end
  if opts.fail_on and opts.fail_on < 0 then
    return usage_error('--fail-on: a percentage >= 0 expected')
  end
  local aerr = ARITY[sub](#rest, opts)
  if aerr then
    return usage_error(aerr)
  end
  local h, err = open(opts, sub)
  if not h then
    return fail(err)
  end
  local ok, code = pcall(fn, h, rest, opts)
  h:close()
  if not ok then
    error(code, 0)
  end
  return code
end

return M
