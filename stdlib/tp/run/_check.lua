-- tp.run._check: the run table: its fields and their checks, the config hash that says what a
-- run computes, and the early-abort rules.
local json = require('tp.json')
local secrets = require('tp.secrets')
local digest = require('tp._digest')

local M = {}

--- Early-abort rules, each on by default: a NaN/Inf loss, an OOM or NCCL failure signature in the
--- parser's diagnostics, no new iteration for `stall_minutes`.
M.ABORT_DEFAULTS = { nan = true, oom = true, nccl = true, stall_minutes = 30 }

--- Version of the hashed view of a run (changes when the hash would change for the same run).
M.HASH_SCHEMA = 'tplua.campaign.run/1'

-- Fields of a run table and their Lua types ('integer' = a positive whole number).
local RUN_TYPES = {
  id = 'string', argv = 'table', env = 'table', cwd = 'string', parser = 'string',
  timeout = 'number', kill_grace = 'number', gbs = 'integer', seq_len = 'integer',
  gpus = 'integer', platform = 'string', framework = 'string', model = 'string',
  dataset = 'string', methodology = 'string', ['repeat'] = 'integer', config = 'table',
  files = 'table', files_dir = 'string', total_iters = 'integer', experiment = 'string',
  hardware = 'string', launcher = 'string', profile = 'table', preflight = 'table',
  stop = 'table', on_record = 'function', outputs = 'table', iterations = 'boolean',
}

-- The fields that define what a run computes: they make up its config hash. Supervision
-- settings (timeout, kill_grace, stop, on_record) and where generated files go are left out.
local HASHED = { 'id', 'argv', 'env', 'cwd', 'parser', 'gbs', 'seq_len', 'gpus', 'platform',
  'framework', 'model', 'dataset', 'methodology', 'repeat', 'config', 'files', 'total_iters',
  'experiment', 'hardware', 'outputs', 'iterations' }

local function fail_check(level, fmt, ...)
  error(string.format(fmt, ...), level + 1)
end

local function check_relpath(level, id, rel, what)
  what = what or 'files'
  if type(rel) ~= 'string' or rel == '' or rel:sub(1, 1) == '/' then
    fail_check(level, "run '%s': %s: a relative path expected, got %s", id, what, tostring(rel))
  end
  for part in rel:gmatch('[^/]+') do
    if part == '..' then
      fail_check(level, "run '%s': %s: '%s' leaves its directory ('..')", id, what, rel)
    end
  end
end

--- Checks a run table and returns a normalised copy: numbers in argv and env become strings,
--- gbs / seq_len / gpus / total_iters / model / dataset default from `config` (the unified
--- config: training.gbs, training.seq_len, nodes x gpus_per_node, training.iters, model,
--- training.dataset). Raises on misuse, naming the run.
---@param run table
---@param level? integer error level (default 2: the caller's caller)
---@return table run
function M.check(run, level)
  level = (level or 1) + 1
  if type(run) ~= 'table' then
    fail_check(level, 'run: table expected, got %s', type(run))
  end
  local id = run.id
  if type(id) ~= 'string' or not id:match('^[%w][%w%._%-]*$') or #id > 200 then
    fail_check(level, "run id: letters, digits, '.', '_' and '-' (not first) expected, got %s",
      type(id) == 'string' and ("'" .. id .. "'") or type(id))
  end
  local out = {}
  for k, v in pairs(run) do
    local want = RUN_TYPES[k]
    if not want then
      fail_check(level, "run '%s': unknown field '%s'", id, tostring(k))
    end
    if want == 'integer' then
      if math.type(v) ~= 'integer' and not (type(v) == 'number' and math.tointeger(v)) then
        fail_check(level, "run '%s': %s: a whole number expected, got %s", id, k, tostring(v))
      end
      v = math.tointeger(v)
      if v < 1 then
        fail_check(level, "run '%s': %s: a positive number expected, got %d", id, k, v)
      end
    elseif type(v) ~= want then
      fail_check(level, "run '%s': %s: %s expected, got %s", id, k, want, type(v))
    end
    out[k] = v
  end
  if type(run.argv) ~= 'table' or #run.argv == 0 then
    fail_check(level, "run '%s': argv: a non-empty list expected", id)
  end
  out.argv = {}
  for i, a in ipairs(run.argv) do
    if type(a) == 'number' then
      a = tostring(a)
    elseif type(a) ~= 'string' then
      fail_check(level, "run '%s': argv[%d]: string expected, got %s", id, i, type(a))
    end
    out.argv[i] = a
  end
  if run.env then
    out.env = {}
    for name, v in pairs(run.env) do
      if type(name) ~= 'string' or not name:match('^[^=]+$') then
        fail_check(level, "run '%s': env: invalid variable name %s", id, tostring(name))
      end
      if type(v) == 'number' then
        v = tostring(v)
      elseif type(v) ~= 'string' and v ~= false then
        fail_check(level, "run '%s': env.%s: string or false expected, got %s", id, name, type(v))
      end
      out.env[name] = v
    end
  end
  if run.parser then
    local ok, log_mod = pcall(require, 'tp.parse.log')
    if ok and type(log_mod.formats) == 'function' then
      local known = log_mod.formats()
      local found = false
      for _, f in ipairs(known) do
        found = found or f == run.parser
      end
      if not found then
        fail_check(level, "run '%s': parser: unknown log format '%s' (known: %s)", id, run.parser,
          table.concat(known, ', '))
      end
    end
  end
  for _, k in ipairs({ 'timeout', 'kill_grace' }) do
    local v = run[k]
    if v ~= nil and not (v >= 0 and v < 1e9) then
      fail_check(level, "run '%s': %s: seconds >= 0 expected, got %s", id, k, tostring(v))
    end
  end
  if run.stop then
    local ok, rule = pcall(require('tp.run._stop').check, run.stop, "run '" .. id .. "': ")
    if not ok then
      error(rule, level)
    end
    out.stop = rule
  end
  if run.files then
    for rel, content in pairs(run.files) do
      check_relpath(level + 1, id, rel)
      if type(content) ~= 'string' then
        fail_check(level, "run '%s': files['%s']: string expected, got %s", id, rel,
          type(content))
      end
    end
  end
  if run.outputs then
    -- JSON files the command leaves in its run's directory, each put in the record as the
    -- top-level member of its name (tp.run._record).
    for member, rel in pairs(run.outputs) do
      if type(member) ~= 'string' or not member:match('^[%a][%w_]*$') then
        fail_check(level, "run '%s': outputs: a member name (letters, digits, '_') expected, "
          .. 'got %s', id, tostring(member))
      end
      check_relpath(level + 1, id, rel, 'outputs.' .. member)
    end
  end
  local cfg = run.config
  if cfg then
    local training = cfg.training or {}
    out.gbs = out.gbs or math.tointeger(training.gbs)
    out.seq_len = out.seq_len or math.tointeger(training.seq_len)
    out.total_iters = out.total_iters or math.tointeger(training.iters)
    if out.gpus == nil and math.tointeger(cfg.gpus_per_node) then
      out.gpus = math.tointeger(cfg.gpus_per_node) * (math.tointeger(cfg.nodes) or 1)
    end
    if out.model == nil and type(cfg.model) == 'string' then
      out.model = cfg.model
    end
    if out.dataset == nil and type(training.dataset) == 'string' then
      out.dataset = training.dataset
    end
    local ok, err = pcall(json.encode, cfg, { sort_keys = true })
    if not ok then
      fail_check(level, "run '%s': config: not representable as JSON: %s", id, tostring(err))
    end
  end
  return out
end

--- The part of a checked run that its config hash covers, with secrets redacted (so that the
--- hash, which is written to the journal, reveals nothing, and a rotated token does not make a
--- finished run look changed).
---@param run table a checked run
---@param scrubber? tp.secrets.Scrubber
---@return table
function M.hashed_view(run, scrubber)
  scrubber = scrubber or secrets.new({ run.env or {} })
  local v = { schema = M.HASH_SCHEMA }
  for _, k in ipairs(HASHED) do
    v[k] = run[k]
  end
  if v.env then
    v.env = scrubber:env(v.env)
  end
  v.argv = scrubber:argv(v.argv)
  return scrubber:value(v)
end

--- Stable hash of a run's configuration: SHA-256 of its canonical JSON (sorted keys, see
--- `hashed_view`).
---```lua
---local h = tp.run.hash({ id = 'a', argv = { 'true' } })  --> 64 hex digits
---```
---@param run table
---@param scrubber? tp.secrets.Scrubber
---@return string hex
function M.hash(run, scrubber)
  local r = M.check(run, 2)
  local text = json.encode(M.hashed_view(r, scrubber), { sort_keys = true })
  return assert(digest.sha256(text))
end

--- Normalises the abort rules: `true`/nil fields take the defaults, `false` turns a rule off,
--- `stall_minutes = false` or 0 disables the stall rule.
---@param abort? {nan?: boolean, oom?: boolean, nccl?: boolean, stall_minutes?: number|false}
---@return table
function M.abort_rules(abort)
  if abort ~= nil and type(abort) ~= 'table' then
    error('abort: table expected, got ' .. type(abort), 2)
  end
  local out = {}
  for k, def in pairs(M.ABORT_DEFAULTS) do
    local v = abort and abort[k]
    if v == nil then
      v = def
    end
    out[k] = v
  end
  for k, v in pairs(abort or {}) do
    if M.ABORT_DEFAULTS[k] == nil then
      error(string.format("abort: unknown rule '%s' (nan, oom, nccl, stall_minutes)",
        tostring(k)), 2)
    end
    if k == 'stall_minutes' then
      if v ~= false and not (type(v) == 'number' and v >= 0) then
        error('abort.stall_minutes: minutes >= 0 or false expected, got ' .. tostring(v), 2)
      end
    elseif type(v) ~= 'boolean' then
      error(string.format('abort.%s: boolean expected, got %s', k, type(v)), 2)
    end
  end
  if out.stall_minutes == 0 then
    out.stall_minutes = false
  end
  return out
end

return M
