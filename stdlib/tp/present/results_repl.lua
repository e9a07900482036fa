-- tp.results_repl: result sets at the interactive prompt. `wrap(set)` gives a set whose methods
-- live in a plain `__index` table (the prompt completes `R:<Tab>` from it) and whose runs are
-- also its integer keys (`R[1]`, `#R`); methods that filter or sort return wrapped sets again.
-- Adds text plots (gnuplot's dumb terminal), and comparison, audit and loss-check results that
-- print as readable text at the prompt while keeping their fields.
local results = require('tp.analyse.results')
local compare_mod = require('tp.analyse.compare')
local audit_mod = require('tp.analyse.audit')
local convergence_mod = require('tp.analyse.convergence')
local profiled = require('tp.analyse.profiled')
local report = require('tp.present.report')
local plot = require('tp.present.plot')
require('tp.present.ops')  -- R[1]:ops() prints as its table
require('tp.present.memory')  -- R[1]:memory() prints as tplua trace --memory

local M = {}

---@class tp.results_repl.Set
---@field runs table[] the runs (tp.results runs), also at R[1], R[2], ...
---@field errors table[] files that could not be read {path, message, code}
---@field skipped table[] JSON files that are not results {path, reason}
local Set = {}

local SET_MT = {
  __name = 'tp.results_repl.Set',
  __index = Set,
  __tostring = function(self)
    local counts, names = {}, {}
    for _, r in ipairs(self.runs) do
      local p = tostring(r.platform or '(none)')
      if not counts[p] then
        counts[p] = 0
        names[#names + 1] = p
      end
      counts[p] = counts[p] + 1
    end
    table.sort(names)
    local parts = {}
    for i, p in ipairs(names) do
      parts[i] = string.format('%s %d', p, counts[p])
    end
    return string.format('result set: %d run%s (%s)%s; R:table() lists them', #self.runs,
      #self.runs == 1 and '' or 's', #parts > 0 and table.concat(parts, ', ') or 'none',
      #self.errors > 0 and string.format(', %d unreadable file%s', #self.errors,
        #self.errors == 1 and '' or 's') or '')
  end,
}

--- Wraps a tp.results ResultSet (or a list of runs) for the prompt.
---```lua
---R = tp.results_repl.wrap(assert(tp.results.load('output')))
---R:where({ platform = 'amd' }):table()
---```
---@param set table
---@return tp.results_repl.Set
function M.wrap(set)
  if type(set) ~= 'table' then
    error('tp.results_repl.wrap: result set expected, got ' .. type(set), 2)
  end
  local runs = set.runs
  if runs == nil then
    runs = set  -- a plain list of runs
  end
  if type(runs) ~= 'table' then
    error('tp.results_repl.wrap: result set expected (no runs)', 2)
  end
  local w = { runs = {}, errors = set.errors or {}, skipped = set.skipped or {} }
  for i, r in ipairs(runs) do
    if not results.is_run(r) then
      error(string.format('tp.results_repl.wrap: runs[%d] is not a loaded run', i), 2)
    end
    w.runs[i] = r
    w[i] = r
  end
  return setmetatable(w, SET_MT)
end

--- Returns true when `v` is a wrapped set.
---@param v any
---@return boolean
function M.is_set(v)
  return type(v) == 'table' and getmetatable(v) == SET_MT
end

-- A tp.results ResultSet over the same runs, for the methods of tp.results.
local function native(self)
  local s = results.from_runs(self.runs)
  s.errors, s.skipped = self.errors, self.skipped
  return s
end

local function check_self(self, name)
  if not M.is_set(self) then
    error(string.format('R:%s: call it with a colon (R:%s(...))', name, name), 3)
  end
end

--- Keeps the runs that match (see tp.results ResultSet:where): `R:where{platform = 'amd'}`.
---@param filter table|fun(run: table): boolean
---@return tp.results_repl.Set
function Set:where(filter)
  check_self(self, 'where')
  return M.wrap(native(self):where(filter))
end

--- Returns a new set sorted by `key` (`R:sort('tokens_per_s_per_gpu', {desc = true})`).
---@return tp.results_repl.Set
function Set:sort(key, opts)
  check_self(self, 'sort')
  return M.wrap(native(self):sort(key, opts))
end

--- Splits the set by `key`: {value = set}.
---@return table<any, tp.results_repl.Set>
function Set:group(key)
  check_self(self, 'group')
  local out = {}
  for k, g in pairs(native(self):group(key)) do
    out[k] = M.wrap(g)
  end
  return out
end

--- The distinct values of `key`, sorted.
function Set:group_keys(key)
  check_self(self, 'group_keys')
  return native(self):group_keys(key)
end

--- Iterates over the runs: `for i, run in R:iter() do`.
function Set:iter()
  check_self(self, 'iter')
  return ipairs(self.runs)
end

--- Applies `fn(run)` to every run; returns the non-nil results.
function Set:map(fn)
  check_self(self, 'map')
  return native(self):map(fn)
end

--- The values of `key` over the runs that have one (numbers only when `numeric`).
function Set:values(key, numeric)
  check_self(self, 'values')
  return native(self):values(key, numeric)
end

-- Calls a ResultSet method; its misuse errors are re-raised as the prompt's own ('R:table: ...'),
-- without a position (a line typed at the prompt is a tail call: there is no line to blame).
local function as_prompt_call(self, name, ...)
  local set = native(self)
  local ok, res = pcall(set[name], set, ...)
  if not ok then
    error((tostring(res):gsub('^.-ResultSet:', 'R:')), 0)
  end
  return res
end

--- The runs as an aligned text table (columns as in tp.results ResultSet:table). A column no run
--- has raises, naming it and the known ones.
---@return string
function Set:table(opts)
  check_self(self, 'table')
  return as_prompt_call(self, 'table', opts)
end

--- The runs as CSV.
function Set:to_csv(opts)
  check_self(self, 'to_csv')
  return as_prompt_call(self, 'to_csv', opts)
end

--- The runs as JSON.
function Set:to_json(opts)
  check_self(self, 'to_json')
  return native(self):to_json(opts)
end

--- The ids of the runs, in order.
---@return string[]
function Set:ids()
  check_self(self, 'ids')
  local out = {}
  for i, r in ipairs(self.runs) do
    out[i] = r.id
  end
  return out
end

--- The run with this id (or at this position); nil when there is none.
---@param id string|integer
---@return table|nil run
function Set:run(id)
  check_self(self, 'run')
  if math.type(id) == 'integer' then
    return self.runs[id]
  end
  for _, r in ipairs(self.runs) do
    if r.id == id then
      return r
    end
  end
  return nil
end

-- ---------------------------------------------------------------------------------------------
-- Printable results: the tables of tp.compare, tp.audit and tp.convergence, with a __tostring
-- that the prompt's printer uses, fields untouched.

local function findings_text(head, findings)
  local lines = { head }
  if #findings == 0 then
    lines[#lines + 1] = '  no findings'
  end
  for _, f in ipairs(findings) do
    lines[#lines + 1] = string.format('  %-7s %s: %s', f.severity, tostring(f.kind),
      tostring(f.message))
  end
  return table.concat(lines, '\n') .. '\n'
end

local COMPARISON_MT = { __name = 'tp.compare.Result', __tostring = function(r)
  return compare_mod.format(r)
end }

local AUDIT_MT = { __name = 'tp.audit.Result', __tostring = function(a)
  return findings_text(string.format('audit under %s (%s): %s — %d errors, %d warnings, %d notes',
    tostring(a.methodology), tostring(a.methodology_source), a.valid and 'valid' or 'NOT VALID',
    a.counts.error or 0, a.counts.warning or 0, a.counts.info or 0), a.findings)
end }

local CONVERGENCE_MT = { __name = 'tp.convergence.Result', __tostring = function(c)
  return findings_text(string.format('loss checks: %d findings', #c.findings), c.findings)
end }

local PROFILE_MT = { __name = 'tp.analyse.profiled.Section', __tostring = function(p)
  return require('tp.present.trace').section_text(p)
end }

local function printable(t, mt)
  if getmetatable(t) == nil then
    setmetatable(t, mt)
  end
  return t
end

local function set_of(subject, fname)
  if M.is_set(subject) then
    return native(subject)
  end
  if type(subject) == 'table' and type(subject.runs) == 'table' then
    return subject
  end
  error(string.format('%s: result set expected (R), got %s', fname, type(subject)), 3)
end

-- `by` may be given as a string or inside an option table.
local function by_opts(by, opts, fname)
  if type(by) == 'table' and opts == nil then
    return by
  end
  if by ~= nil and type(by) ~= 'string' then
    error(string.format('%s: key (string) or options table expected, got %s', fname, type(by)), 3)
  end
  local o = {}
  for k, v in pairs(opts or {}) do
    o[k] = v
  end
  o.by = by or o.by
  return o
end

--- Compares the groups of `set` by `by` (tp.compare.compare); the result prints as the
--- comparison table. Fails with nil, message, code as tp.compare does.
---```lua
---compare(R, 'platform')
---compare(R:where{framework = {'megatron', 'primus'}}, 'framework', { metrics = {'mfu'} })
---```
---@param set table
---@param by? string|table
---@param opts? table tp.compare options
---@return table|nil result, string? err, string? code
function M.compare(set, by, opts)
  local s = set_of(set, 'compare')
  local r, err, code = compare_mod.compare(s, by_opts(by, opts, 'compare'))
  if not r then
    return nil, err, code
  end
  return printable(r, COMPARISON_MT)
end

--- Audits the runs of `set` (tp.audit.compare); the result prints as its findings.
---@param set table
---@param opts? table|string tp.audit options, or the key that separates the sides
---@return table result
function M.audit(set, opts)
  local s = set_of(set, 'audit')
  if type(opts) == 'string' then
    opts = { by = opts }
  end
  return printable(audit_mod.compare(s, opts), AUDIT_MT)
end

--- Runs the loss-curve checks on `set` (tp.convergence.check_set); prints as its findings.
---@param set table
---@param opts? table|string tp.convergence options, or the key that groups the curves
---@return table result
function M.convergence(set, opts)
  local s = set_of(set, 'convergence')
  if type(opts) == 'string' then
    opts = { by = opts }
  end
  return printable(convergence_mod.check_set(s, opts), CONVERGENCE_MT)
end

--- Writes a report of `set` into `out` (tp.report.write) and returns the list of files.
---@param set table
---@param out string
---@param opts? table
---@return string[]|nil files, string? err, string? code
function M.report(set, out, opts)
  local s = set_of(set, 'report')
  local r, err, code = report.write(s, out, opts)
  if not r then
    return nil, err, code
  end
  for _, w in ipairs(r.warnings) do
    io.stderr:write('warning: ', w, '\n')
  end
  return r.files
end

--- Compares the groups of this set: `R:compare('framework')`.
function Set:compare(by, opts)
  check_self(self, 'compare')
  return M.compare(self, by, opts)
end

--- Audits this set: `R:audit()`.
function Set:audit(opts)
  check_self(self, 'audit')
  return M.audit(self, opts)
end

--- Runs the loss-curve checks on this set: `R:convergence()`.
function Set:convergence(opts)
  check_self(self, 'convergence')
  return M.convergence(self, opts)
end

--- Writes a report of this set into `out`: `R:report('out/report')`.
function Set:report(out, opts)
  check_self(self, 'report')
  return M.report(self, out, opts)
end

--- The profile analysis of this set's profiled runs (tp.analyse.profiled.section): each
--- group's mean step on the GPU from the runs' profiler traces and, between the baseline and
--- each other group, the explanation of the gap in step time; it prints as text. `by` splits
--- the runs (default 'platform'), `opts.baseline` names the baseline (default nvd, else the
--- first group). Returns nil and a message when no run was profiled. A single run's:
--- `R[1]:profile_analysis()` (its summary), `R[1]:trace()` (every rank and step).
---```lua
---R:profile()
---R:profile('framework', { baseline = 'megatron' }).explanations[1].explanation.rows
---```
---@param by? string
---@param opts? {baseline?: any}
---@return table|nil section, string? err
function Set:profile(by, opts)
  check_self(self, 'profile')
  local o = by_opts(by, opts, 'R:profile')
  for k in pairs(o) do
    if k ~= 'by' and k ~= 'baseline' then
      error(string.format("R:profile: unknown option '%s'", tostring(k)), 2)
    end
  end
  local sec = profiled.section(native(self), o)
  if not sec then
    return nil, 'R:profile: no run of this set was profiled (no profile member in its records)'
  end
  return printable(sec, PROFILE_MT)
end

--- Draws a chart of this set as text with gnuplot's dumb terminal and returns it (the prompt
--- prints it). `what`: 'loss', 'lr', 'step_time', 'throughput', 'memory', 'mfu', 'profile'
--- (where the profiled runs' step goes, from their traces) or 'roofline' (their ops against
--- each GPU's limits); `opts.by`
--- splits the runs (default 'platform'), `opts.width`/`opts.height` in characters (default
--- 100 x 30). Returns nil, message, code when there is nothing to draw or gnuplot fails.
---```lua
---R:plot('loss')
---R:where{platform = 'amd'}:plot('step_time', { width = 120 })
---```
---@param what string
---@param opts? {by?: string, width?: integer, height?: integer}
---@return string|nil text, string? err, string? code
function Set:plot(what, opts)
  check_self(self, 'plot')
  if type(what) ~= 'string' then
    error(string.format('R:plot: chart name expected (%s), got %s',
      table.concat(report.CHARTS, ', '), type(what)), 2)
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('R:plot: options must be a table, got ' .. type(opts), 2)
  end
  for k in pairs(opts) do
    if k ~= 'by' and k ~= 'width' and k ~= 'height' then
      error(string.format("R:plot: unknown option '%s'", tostring(k)), 2)
    end
  end
  local known = false
  for _, n in ipairs(report.CHARTS) do
    known = known or n == what
  end
  if not known then
    error(string.format("R:plot: unknown chart '%s' (known: %s)", what,
      table.concat(report.CHARTS, ', ')), 2)
  end
  local c = report.chart(native(self), what, { by = opts.by })
  if c.missing then
    return nil, string.format('plot %s: %s', what, c.missing), 'ENODATA'
  end
  local r, err, code = plot.render(c.chart, { format = 'dumb', width = opts.width,
    height = opts.height })
  if not r then
    return nil, err, code
  end
  return r.text
end

--- What `tplua repl DIR...` prints before the prompt.
---@param set tp.results_repl.Set
---@param sources string[]
---@return string
function M.banner(set, sources)
  local lines = { string.format('R = %s', tostring(set)) }
  if #sources > 0 then
    lines[#lines + 1] = '    loaded from ' .. table.concat(sources, ', ')
  end
  for i, e in ipairs(set.errors) do
    if i > 5 then
      lines[#lines + 1] = string.format('    ... and %d more unreadable files', #set.errors - 5)
      break
    end
    lines[#lines + 1] = '    left out: ' .. tostring(e.message)
  end
  local profiled_runs = false
  for _, r in ipairs(set.runs) do
    profiled_runs = profiled_runs or type(r.profile) == 'table'
  end
  lines[#lines + 1] = "try: R:table()  R:where{platform = 'amd'}:table()  R:plot('loss')  " ..
    "compare(R, 'platform')  audit(R)  convergence(R)  R:report('out')" ..
    (profiled_runs and '  R:profile()' or '')
  return table.concat(lines, '\n') .. '\n'
end

--- Installs the prompt's globals: `R` (the wrapped set) and the helpers `compare`, `audit`,
--- `convergence` and `report` (each takes a set first). Returns the wrapped set.
---@param set table a ResultSet or a wrapped set
---@param env? table where to install them (default _G)
---@return tp.results_repl.Set
function M.install(set, env)
  env = env or _G
  local w = M.is_set(set) and set or M.wrap(set)
  rawset(env, 'R', w)
  rawset(env, 'compare', M.compare)
  rawset(env, 'audit', M.audit)
  rawset(env, 'convergence', M.convergence)
  rawset(env, 'report', M.report)
  return w
end

return M
