-- tp.live: the live view of running trainings. On a terminal: one status line per active run
-- (id, iteration/total, tokens/s/GPU of the latest record, loss, ETA) redrawn in place with ANSI
-- cursor movement, each frame written at once (no flicker); events (started, finished, stopping)
-- scroll above the block; a finished run's line gives its steady state's mean and no ETA.
-- Elsewhere (a pipe, a file, CI): plain lines every `interval` seconds and/or every `every`
-- iterations. tp.run and tp.campaign feed it; docs/campaign.md shows the output.
local M = {}

--- Default seconds between plain progress lines when the output is not a terminal.
M.DEFAULT_INTERVAL = 10

--- Default seconds between two redraws on a terminal (at most this often).
M.REDRAW_S = 0.1

local ESC = string.char(27)

local clock = require('tp.gpu').now

local function check(name, value, kind, optional)
  if value == nil and optional then
    return
  end
  if type(value) ~= kind then
    error(string.format('%s: %s expected, got %s', name, kind, type(value)), 3)
  end
end

--- Whether standard output is a terminal: /proc/self/fd/1 resolves to a tty device (proc(5);
--- Lua has no isatty). TERM=dumb counts as no terminal.
---@return boolean
function M.stdout_is_tty()
  if os.getenv('TERM') == 'dumb' then
    return false
  end
  local ok, fs = pcall(require, 'tp.fs')
  if not ok then
    return false
  end
  local target = fs.realpath('/proc/self/fd/1')
  return target ~= nil and (target:match('^/dev/pts/%d+$') ~= nil
    or target:match('^/dev/tty') ~= nil or target == '/dev/console')
end

--- '0.4s', '42s', '5m12s', '2h05m', '3d04h'.
---@param s number seconds
---@return string
function M.fmt_duration(s)
  if type(s) ~= 'number' or s ~= s or s < 0 or s == math.huge then
    return '?'
  end
  if s < 9.95 then
    return string.format('%.1fs', s)
  end
  s = math.floor(s + 0.5)
  if s < 60 then
    return string.format('%ds', s)
  elseif s < 3600 then
    return string.format('%dm%02ds', s // 60, s % 60)
  elseif s < 86400 then
    return string.format('%dh%02dm', s // 3600, (s % 3600) // 60)
  end
  return string.format('%dd%02dh', s // 86400, (s % 86400) // 3600)
end

local function fmt_loss(v)
  if type(v) ~= 'number' then
    return nil
  end
  if v ~= v then
    return 'nan'
  end
  return string.format('%.4f', v)
end

--- The status text of one run: 'iter 120/500 (24%) | 3456 tok/s/GPU now | loss 4.1230 |
--- ETA 5m12s'. The rate is the latest record's (`now`); a finished run (`st.finished`) shows no
--- ETA and, when its record gave it, the mean of its steady state instead: '3401 tok/s/GPU
--- steady mean (iterations 21-500)' (`st.steady`: {tokens_per_s_per_gpu=, step_time_s=,
--- first_iteration=, last_iteration=}).
---@param st table live state {iteration=, total=, tokens_per_s_per_gpu=, loss=, eta_s=, line=,
---  finished=, steady=}
---@return string
function M.fmt_state(st)
  local parts = {}
  if st.iteration then
    if st.total then
      parts[#parts + 1] = string.format('iter %d/%d (%d%%)', st.iteration, st.total,
        math.floor(100 * st.iteration / math.max(st.total, 1)))
    else
      parts[#parts + 1] = string.format('iter %d', st.iteration)
    end
  elseif st.line then
    -- A command that prints no iteration (tp.run's `iterations = false`): its last line.
    parts[#parts + 1] = st.line
  else
    parts[#parts + 1] = st.queue and ('queued: ' .. st.queue) or 'starting'
  end
  local steady = type(st.steady) == 'table' and st.steady or nil
  if st.finished and steady then
    local span = (math.type(steady.first_iteration) == 'integer'
      and math.type(steady.last_iteration) == 'integer')
      and string.format(' (iterations %d-%d)', steady.first_iteration, steady.last_iteration) or ''
    if type(steady.tokens_per_s_per_gpu) == 'number' then
      parts[#parts + 1] = string.format('%.0f tok/s/GPU steady mean%s',
        steady.tokens_per_s_per_gpu, span)
    elseif type(steady.step_time_s) == 'number' then
      parts[#parts + 1] = string.format('%.4g s/step steady mean%s', steady.step_time_s, span)
    end
  elseif type(st.tokens_per_s_per_gpu) == 'number' then
    parts[#parts + 1] = string.format('%.0f tok/s/GPU %s', st.tokens_per_s_per_gpu,
      st.finished and 'last' or 'now')
  end
  local loss = fmt_loss(st.loss)
  if loss then
    parts[#parts + 1] = 'loss ' .. loss
  end
  if st.eta_s and not st.finished then
    parts[#parts + 1] = 'ETA ' .. M.fmt_duration(st.eta_s)
  end
  return table.concat(parts, ' | ')
end

-- The steady-state figures of a run's record (performance_metrics over its MSER-5 window), for
-- the line of a finished run; nil when the record has none.
local function steady_of(record)
  local pm = type(record) == 'table' and type(record.performance_metrics) == 'table'
    and record.performance_metrics
  if not pm or type(pm.avg_step_time_seconds) ~= 'number' then
    return nil
  end
  local w = type(pm.steady_state) == 'table' and pm.steady_state or {}
  return { step_time_s = pm.avg_step_time_seconds,
    tokens_per_s_per_gpu = type(pm.tokens_per_second_per_gpu) == 'number'
      and pm.tokens_per_second_per_gpu or nil,
    first_iteration = math.tointeger(w.first_iteration),
    last_iteration = math.tointeger(w.last_iteration) }
end

local OPTS = { out = true, tty = true, quiet = true, interval = true, every = true,
  width = true, scrub = true }

---@class tp.live.View
local View = {}
View.__index = View

---@class tp.live.Opts
---@field out? file* where to write (default io.stdout)
---@field tty? boolean redraw in place (default: whether stdout is a terminal; false for other
---  files)
---@field quiet? boolean write nothing at all (default false)
---@field interval? number plain mode: seconds between progress lines (default 10; 0: never)
---@field every? integer plain mode: also a line every this many iterations of a run
---@field width? integer terminal columns (default $COLUMNS, else 100)
---@field scrub? fun(text: string): string applied to every line before it is written

--- Creates a view.
---```lua
---local view = tp.live.new({ interval = 30 })
---view:started('run-1', state); view:progress('run-1', state); view:finished('run-1', outcome)
---view:close('1 finished')
---```
---@param opts? tp.live.Opts
---@return tp.live.View
function M.new(opts)
  check('opts', opts, 'table', true)
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTS[k] then
      error(string.format("tp.live.new: unknown option '%s'", tostring(k)), 2)
    end
  end
  check('interval', opts.interval, 'number', true)
  check('every', opts.every, 'number', true)
  check('width', opts.width, 'number', true)
  check('scrub', opts.scrub, 'function', true)
  local out = opts.out or io.stdout
  local tty = opts.tty
  if tty == nil then
    tty = out == io.stdout and M.stdout_is_tty()
  end
  return setmetatable({
    out = out,
    tty = tty and true or false,
    quiet = opts.quiet and true or false,
    interval = opts.interval or M.DEFAULT_INTERVAL,
    every = opts.every and math.tointeger(opts.every) or nil,
    width = math.tointeger(opts.width) or math.tointeger(tonumber(os.getenv('COLUMNS'))) or 100,
    scrub = opts.scrub or function(text)
      return text
    end,
    order = {},      -- ids of active runs, in start order
    runs = {},       -- id -> {state=, t_start=, last_iter=, t_line=}
    drawn = 0,       -- status lines currently on screen (tty)
    dirty = false,
    t_draw = -math.huge,
    t_plain = clock(),
    closed = false,
  }, View)
end

local function stamp()
  return os.date('%H:%M:%S')
end

-- Cuts a line to the terminal width (a wrapped line would break the cursor arithmetic).
function View:fit(s)
  s = self.scrub(s)
  local w = math.max(self.width - 1, 20)
  if #s > w then
    return s:sub(1, w - 1) .. '~'
  end
  return s
end

function View:status_line(id, width)
  local r = self.runs[id]
  return self:fit(string.format('  %-' .. width .. 's  %s  (%s)', id, M.fmt_state(r.state),
    M.fmt_duration(clock() - r.t_start)))
end

-- Writes one frame: moves up over the old block, prints `events` (scrolling), redraws the block.
function View:draw(events)
  local buf = {}
  if self.drawn > 0 then
    buf[#buf + 1] = string.format('\r%s[%dA', ESC, self.drawn)
  end
  for _, e in ipairs(events or {}) do
    buf[#buf + 1] = ESC .. '[2K' .. self:fit(e) .. '\n'
  end
  local width = 0
  for _, id in ipairs(self.order) do
    width = math.max(width, #id)
  end
  for _, id in ipairs(self.order) do
    buf[#buf + 1] = ESC .. '[2K' .. self:status_line(id, width) .. '\n'
  end
  buf[#buf + 1] = ESC .. '[J'  -- clear what the previous, longer block left below
  self.drawn = #self.order
  self.out:write(table.concat(buf))
  self.out:flush()
  self.dirty = false
  self.t_draw = clock()
end

function View:emit(line)
  if self.quiet or self.closed then
    return
  end
  if self.tty then
    self:draw({ line })
  else
    self.out:write(string.format('[%s] %s\n', stamp(), self.scrub(line)))
    self.out:flush()
  end
end

--- A run started.
---@param id string
---@param state table live state
function View:started(id, state)
  if self.runs[id] == nil then
    self.order[#self.order + 1] = id
  end
  self.runs[id] = { state = state, t_start = clock(), last_iter = nil, t_line = clock() }
  self:emit(id .. ': started')
end

--- New records arrived for a run (state updated in place).
---@param id string
---@param state table
function View:progress(id, state)
  local r = self.runs[id]
  if not r or self.quiet or self.closed then
    return
  end
  r.state = state
  if self.tty then
    self.dirty = true
    if clock() - self.t_draw >= M.REDRAW_S then
      self:draw()
    end
  elseif self.every and state.iteration
    and (r.last_iter == nil or state.iteration >= r.last_iter + self.every) then
    r.last_iter = state.iteration
    r.t_line = clock()
    self:emit(id .. ': ' .. M.fmt_state(state))
  end
end

--- A run ended: its status line goes, a summary line stays.
---@param id string
---@param outcome table {status=, reason=, stopped_by=}
---@param state? table last live state
function View:finished(id, outcome, state)
  local r = self.runs[id]
  self.runs[id] = nil
  for i, x in ipairs(self.order) do
    if x == id then
      table.remove(self.order, i)
      break
    end
  end
  state = state or (r and r.state) or {}
  local took = r and (' in ' .. M.fmt_duration(clock() - r.t_start)) or ''
  local text
  if outcome.status == 'finished' then
    -- A run its stop rule ended (docs/stopping.md) says so. Nothing is left to wait for: no
    -- ETA; the rate is the steady state's mean from the record, else the last record's.
    local final = {}
    for k, v in pairs(state) do
      final[k] = v
    end
    final.finished, final.steady = true, steady_of(outcome.record)
    text = string.format('%s: finished%s%s | %s', id, took,
      outcome.stopped_by and (' (stopped: ' .. outcome.stopped_by .. ')') or '', M.fmt_state(final))
  elseif outcome.status == 'interrupted' then
    text = string.format('%s: interrupted%s at %s', id, took,
      state.iteration and ('iteration ' .. state.iteration) or 'start-up')
  else
    text = string.format('%s: FAILED%s%s: %s', id, took,
      outcome.stopped_by and (' (' .. outcome.stopped_by .. ')') or '', tostring(outcome.reason))
  end
  self:emit(text)
end

--- A message line (scrolls above the status block on a terminal).
---@param text string
function View:note(text)
  self:emit(text)
end

--- Called periodically by the owner's timer: redraws a changed terminal block, or prints the
--- plain progress lines that are due.
function View:tick()
  if self.quiet or self.closed then
    return
  end
  local now = clock()
  if self.tty then
    if self.dirty or (#self.order > 0 and now - self.t_draw >= 1) then
      self:draw()
    end
    return
  end
  -- 5% slack: the owner's timer may fire a hair before a whole interval has passed.
  if self.interval <= 0 or now - self.t_plain < self.interval * 0.95 then
    return
  end
  self.t_plain = now
  for _, id in ipairs(self.order) do
    local r = self.runs[id]
    r.t_line = now
    local line = self.scrub(id .. ': ' .. M.fmt_state(r.state))
    self.out:write(string.format('[%s] %s\n', stamp(), line))
  end
  self.out:flush()
end

--- Ends the view: clears the status block (terminal) and prints `summary` when given.
---@param summary? string
function View:close(summary)
  if self.closed then
    return
  end
  if not self.quiet then
    if self.tty and self.drawn > 0 then
      self.order = {}
      self:draw()
    end
    if summary then
      self.out:write(self.scrub(summary), '\n')
      self.out:flush()
    end
  end
  self.closed = true
end

View.__close = View.close

M.View = View

return M
