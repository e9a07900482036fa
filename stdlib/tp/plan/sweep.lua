-- tp.sweep: sets of runs over unified-config key paths. Cartesian axes and zipped groups,
-- filters, constraints (the validation rules of tp.config, memory fit, user functions),
-- ordering and repeats; `sweep:plan(base)` lists the runs, each with a stable id: the SHA-256 of
-- the canonical JSON of its effective config (sorted keys, fixed number formatting), so a
-- journal can recognise a run across invocations and resume.
local config = require('tp.plan.config')

local M = {}

local Sweep = {}
Sweep.__index = Sweep

-- ---------------------------------------------------------------------------------------------
-- Canonical JSON and ids.

local function canon_number(v)
  if math.type(v) == 'integer' then
    return string.format('%d', v)
  end
  if v ~= v or v == math.huge or v == -math.huge then
    error('tp.sweep.canonical: non-finite number', 0)
  end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
    return string.format('%.1f', v)
  end
  -- The shortest %g that reads back to the same double: stable across runs and platforms.
  for digits = 1, 17 do
    local s = string.format('%.' .. digits .. 'g', v)
    if tonumber(s) == v then
      return s
    end
  end
  return string.format('%.17g', v)
end

local function canon_string(s)
  return '"' .. s:gsub('[%c"\\]', function(ch)
    if ch == '"' then
      return '\\"'
    elseif ch == '\\' then
      return '\\\\'
    end
    return string.format('\\u%04x', ch:byte())
  end) .. '"'
end

local function canon(v, seen)
  local t = type(v)
  if t == 'string' then
    return canon_string(v)
  elseif t == 'number' then
    return canon_number(v)
  elseif t == 'boolean' then
    return v and 'true' or 'false'
  elseif t == 'nil' then
    return 'null'
  elseif t ~= 'table' then
    error('tp.sweep.canonical: cannot encode a ' .. t, 0)
  end
  if seen[v] then
    error('tp.sweep.canonical: cycle in table', 0)
  end
  seen[v] = true
  local n = #v
  local count = 0
  for _ in pairs(v) do
    count = count + 1
  end
  local out = {}
  if n > 0 and count == n then
    for i = 1, n do
      out[i] = canon(v[i], seen)
    end
    seen[v] = nil
    return '[' .. table.concat(out, ',') .. ']'
  end
  local keys = {}
  for k in pairs(v) do
    if type(k) ~= 'string' then
      error('tp.sweep.canonical: object keys must be strings, got ' .. type(k), 0)
    end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for i, k in ipairs(keys) do
    out[i] = canon_string(k) .. ':' .. canon(v[k], seen)
  end
  seen[v] = nil
  return '{' .. table.concat(out, ',') .. '}'
end

--- Encodes a value as canonical JSON: object keys sorted bytewise, no whitespace, integers as
--- integers, floats in the shortest form that reads back exactly (whole floats with '.0'). Two
--- equal configs always give the same bytes.
---```lua
---tp.sweep.canonical({ b = 1, a = { 0.1, 2 } })  --> '{"a":[0.1,2],"b":1}'
---```
---@param v any
---@return string
function M.canonical(v)
  local ok, s = pcall(canon, v, {})
  if not ok then
    error(s, 2)
  end
  return s
end

--- Returns the stable id of a config: the hex SHA-256 of its canonical JSON.
---@param v table
---@return string hex 64 hex digits
function M.hash(v)
  local ok, s = pcall(canon, v, {})
  if not ok then
    error(s, 2)
  end
  return require('tp._digest').sha256(s)
end

-- ---------------------------------------------------------------------------------------------
-- Construction.

local FIELDS = {
  axes = true, zip = true, filter = true, constraints = true, order = true, repeats = true,
  validate = true, prune = true, name = true,
}

-- Normalises axes given as a map {path = values} or a list {{path, values}, ...} into a list.
local function axis_list(spec, what)
  local out = {}
  if spec == nil then
    return out
  end
  if type(spec) ~= 'table' then
    error(string.format('tp.sweep: %s must be a table, got %s', what, type(spec)), 4)
  end
  if #spec > 0 then
    for i, a in ipairs(spec) do
      if type(a) ~= 'table' or type(a[1]) ~= 'string' or type(a[2]) ~= 'table' then
        error(string.format("tp.sweep: %s[%d] must be { 'key.path', { values... } }", what, i), 4)
      end
      out[#out + 1] = { key = a[1], values = a[2] }
    end
  else
    for _, k in ipairs(config.sorted_keys(spec)) do
      if type(k) ~= 'string' or type(spec[k]) ~= 'table' then
        error(string.format('tp.sweep: %s: each entry must map a key path to a list of values',
          what), 4)
      end
      out[#out + 1] = { key = k, values = spec[k] }
    end
  end
  for _, a in ipairs(out) do
    if not config.KEYS[a.key] then
      error(string.format("tp.sweep: %s: '%s' is not a unified key path", what, a.key), 4)
    end
    if #a.values == 0 then
      error(string.format("tp.sweep: %s: '%s' has no values", what, a.key), 4)
    end
  end
  return out
end

--- Creates a sweep.
---
--- * `axes`: `{ ['parallelism.tp'] = {1, 2, 4}, ... }` (applied in sorted key order) or an
---   ordered list `{ {'parallelism.tp', {1, 2, 4}}, ... }`: the cartesian product.
--- * `zip`: a list of groups; each group maps key paths to lists of the same length and
---   contributes one axis whose i-th point sets every key to its i-th value.
--- * `filter`: `function(config, point) -> boolean`; false drops the point ('filtered').
--- * `constraints`: list of `function(config, point) -> ok, reason`; not ok drops the point
---   ('invalid', with the reason).
--- * `validate` (default true): apply tp.config.validate's rules ('invalid' on an error).
--- * `prune` (default true): drop points whose memory estimate exceeds the GPU ('pruned');
---   `plan{no_prune = true}` keeps them.
--- * `order`: list of key paths to sort by ('-key' for descending), or `function(a, b)` over
---   points; default: the order of the axes.
--- * `repeats` (default 1): runs per point.
---```lua
---local s = tp.sweep {
---  axes = { ['parallelism.tp'] = { 1, 2, 4, 8 }, ['training.mbs'] = { 1, 2, 4 } },
---  order = { 'parallelism.tp', '-training.mbs' },
---}
---for _, run in ipairs(s:plan(base, { hardware = 'h100-sxm' }).runs) do print(run.id) end
---```
---@param spec table
---@return table sweep
function M.new(spec)
  if type(spec) ~= 'table' then
    error('tp.sweep: spec table expected, got ' .. type(spec), 2)
  end
  for k in pairs(spec) do
    if not FIELDS[k] then
      error(string.format("tp.sweep: unknown field '%s'", tostring(k)), 2)
    end
  end
  local axes = axis_list(spec.axes, 'axes')
  local groups = {}
  if spec.zip ~= nil then
    if type(spec.zip) ~= 'table' then
      error('tp.sweep: zip must be a list of groups', 2)
    end
    local list = spec.zip
    -- A single group may be given directly: zip = { ['a.b'] = {...}, ['c.d'] = {...} }.
    if #list == 0 and next(list) ~= nil then
      list = { list }
    end
    for i, g in ipairs(list) do
      local members = axis_list(g, string.format('zip[%d]', i))
      local len = #members[1].values
      for _, a in ipairs(members) do
        if #a.values ~= len then
          error(string.format('tp.sweep: zip[%d]: lists of different lengths (%s has %d, %s has '
            .. '%d)', i, members[1].key, len, a.key, #a.values), 2)
        end
      end
      groups[#groups + 1] = members
    end
  end
  local seen = {}
  for _, a in ipairs(axes) do
    seen[a.key] = true
  end
  for i, g in ipairs(groups) do
    for _, a in ipairs(g) do
      if seen[a.key] then
        error(string.format("tp.sweep: zip[%d]: '%s' is swept twice", i, a.key), 2)
      end
      seen[a.key] = true
    end
  end
  if spec.filter ~= nil and type(spec.filter) ~= 'function' then
    error('tp.sweep: filter must be a function(config, point) -> boolean', 2)
  end
  local constraints = spec.constraints or {}
  if type(constraints) == 'function' then
    constraints = { constraints }
  end
  if type(constraints) ~= 'table' then
    error('tp.sweep: constraints must be a list of functions', 2)
  end
  for i, f in ipairs(constraints) do
    if type(f) ~= 'function' then
      error(string.format('tp.sweep: constraints[%d] must be a function(config, point) -> ok, '
        .. 'reason', i), 2)
    end
  end
  local order = spec.order
  if order ~= nil and type(order) ~= 'table' and type(order) ~= 'function' then
    error('tp.sweep: order must be a list of key paths or a comparison function', 2)
  end
  if type(order) == 'table' then
    for i, k in ipairs(order) do
      local key = type(k) == 'string' and k:gsub('^%-', '') or nil
      if not key or not config.KEYS[key] then
        error(string.format("tp.sweep: order[%d]: '%s' is not a key path", i, tostring(k)), 2)
      end
    end
  end
  local repeats = spec.repeats or 1
  if math.type(repeats) ~= 'integer' or repeats < 1 then
    error('tp.sweep: repeats must be a positive integer, got ' .. tostring(repeats), 2)
  end
  for _, k in ipairs({ 'validate', 'prune' }) do
    if spec[k] ~= nil and type(spec[k]) ~= 'boolean' then
      error(string.format('tp.sweep: %s must be a boolean', k), 2)
    end
  end
  return setmetatable({
    name = spec.name,
    axes = axes,
    groups = groups,
    filter = spec.filter,
    constraints = constraints,
    order = order,
    repeats = repeats,
    validate = spec.validate ~= false,
    prune = spec.prune ~= false,
  }, Sweep)
end

setmetatable(M, {
  __call = function(_, spec)
    return M.new(spec)
  end,
})

--- Returns true when `v` is a sweep made by tp.sweep.
---@param v any
---@return boolean
function M.is_sweep(v)
  return getmetatable(v) == Sweep
end

--- Returns the swept key paths, in axis order.
---@return string[]
function Sweep:keys()
  local out = {}
  for _, a in ipairs(self.axes) do
    out[#out + 1] = a.key
  end
  for _, g in ipairs(self.groups) do
    for _, a in ipairs(g) do
      out[#out + 1] = a.key
    end
  end
  return out
end

--- Lists the points of the sweep (before filters): `{ {['key.path'] = value, ...}, ... }` in
--- generation order (the last axis varies fastest).
---@return table[]
function Sweep:points()
  local dims = {}
  for _, a in ipairs(self.axes) do
    dims[#dims + 1] = { { key = a.key, values = a.values } }
  end
  for _, g in ipairs(self.groups) do
    dims[#dims + 1] = g
  end
  local out = {}
  local function rec(i, point)
    if i > #dims then
      local copy = {}
      for k, v in pairs(point) do
        copy[k] = v
      end
      out[#out + 1] = copy
      return
    end
    local dim = dims[i]
    for j = 1, #dim[1].values do
      for _, a in ipairs(dim) do
        point[a.key] = a.values[j]
      end
      rec(i + 1, point)
    end
    for _, a in ipairs(dim) do
      point[a.key] = nil
    end
  end
  rec(1, {})
  return out
end

local LAYOUT = { ['parallelism.tp'] = true, ['parallelism.pp'] = true, ['parallelism.cp'] = true }

-- The config of one point: the base with the point's values; dp (and ga) are derived again when
-- the point changes the layout (or the batch) without setting them.
local function apply(base, point)
  local cfg = config.copy(base)
  local touches_layout, touches_batch = false, false
  for k, v in pairs(point) do
    config.set(cfg, k, config.copy(v))
    if LAYOUT[k] or k == 'nodes' or k == 'gpus_per_node' then
      touches_layout = true
    end
    if k == 'training.mbs' or k == 'training.gbs' or LAYOUT[k] then
      touches_batch = true
    end
  end
  if touches_layout and point['parallelism.dp'] == nil and cfg.parallelism then
    cfg.parallelism.dp = nil
  end
  if touches_batch and point['training.ga'] == nil and cfg.training then
    cfg.training.ga = nil
  end
  return cfg
end

local function compare_values(a, b)
  if type(a) == type(b) and (type(a) == 'number' or type(a) == 'string') then
    if a < b then
      return -1
    elseif a > b then
      return 1
    end
    return 0
  end
  local sa, sb = tostring(a), tostring(b)
  if sa < sb then
    return -1
  elseif sa > sb then
    return 1
  end
  return 0
end

---@class tp.sweep.PlanOpts
---@field hardware? string|table GPU the runs use (memory fit, fp8 check)
---@field platform? string platform name (part of the run id and the hash)
---@field framework? string framework name (part of the run id and the hash; its adapter checks
---  every point)
---@field no_prune? boolean keep points whose memory estimate exceeds the GPU
---@field repeats? integer override the sweep's repeats

--- Expands the sweep over `base` (a unified config) into points with their configs and fate:
--- `{ {point =, config =, status = 'ok'|'filtered'|'invalid'|'pruned', reason =, memory =,
--- findings =}, ... }`, ordered.
---@param base table
---@param opts? tp.sweep.PlanOpts
---@return table[]
function Sweep:expand(base, opts)
  opts = opts or {}
  local out = {}
  for index, point in ipairs(self:points()) do
    local cfg = apply(base, point)
    local entry = { point = point, config = cfg, status = 'ok', index = index }
    if self.validate then
      local r = config.validate(cfg, { hardware = opts.hardware, platform = opts.platform,
                                       framework = opts.framework })
      entry.findings = r.findings
      entry.memory = r.memory
      if not r.ok then
        entry.status = 'invalid'
        for _, f in ipairs(r.findings) do
          if f.severity == 'error' then
            entry.reason = f.message
            break
          end
        end
      else
        entry.config = r.config
        cfg = r.config
      end
    end
    if entry.status == 'ok' and self.filter and not self.filter(cfg, point) then
      entry.status = 'filtered'
      entry.reason = 'filter'
    end
    if entry.status == 'ok' then
      for i, f in ipairs(self.constraints) do
        local ok, reason = f(cfg, point)
        if not ok then
          entry.status = 'invalid'
          entry.reason = reason or string.format('constraints[%d]', i)
          break
        end
      end
    end
    if entry.status == 'ok' and self.prune and not opts.no_prune and entry.memory
      and entry.memory.status == 'exceeds' then
      entry.status = 'pruned'
      entry.reason = 'memory: estimate ' .. require('tp.plan.memory').format(entry.memory)
    end
    out[#out + 1] = entry
  end
  local order = self.order
  if type(order) == 'function' then
    table.sort(out, function(a, b)
      if order(a.point, b.point) then
        return true
      elseif order(b.point, a.point) then
        return false
      end
      return a.index < b.index
    end)
  elseif type(order) == 'table' then
    table.sort(out, function(a, b)
      for _, k in ipairs(order) do
        local desc = k:sub(1, 1) == '-'
        local key = desc and k:sub(2) or k
        local c = compare_values(config.get(a.config, key), config.get(b.config, key))
        if c ~= 0 then
          if desc then
            return c > 0
          end
          return c < 0
        end
      end
      return a.index < b.index
    end)
  end
  return out
end

--- The identity of a run config: what its id hashes. Output paths are left out (they are made
--- from the id).
---@param cfg table unified config
---@param platform? string
---@param framework? string
---@return table
function M.identity(cfg, platform, framework)
  local c = config.copy(cfg)
  if c.paths then
    c.paths.output = nil
    if next(c.paths) == nil then
      c.paths = nil
    end
  end
  if type(c.model) == 'table' then
    c.model = c.model.id
  end
  return { config = c, platform = platform, framework = framework }
end

--- Makes a run id: `<platform>-<framework>-<first 12 hex of the config hash>-r<repeat>` (platform
--- and framework left out when unknown).
---@param hash string
---@param rep integer
---@param platform? string
---@param framework? string
---@return string
function M.run_id(hash, rep, platform, framework)
  local parts = {}
  if platform then
    parts[#parts + 1] = platform
  end
  if framework then
    parts[#parts + 1] = framework
  end
  parts[#parts + 1] = hash:sub(1, 12)
  return table.concat(parts, '-') .. '-r' .. rep
end

--- Plans the runs: every point that survives the filters, constraints and pruning, times the
--- repeats. Returns `{runs = {{id=, hash=, config=, point=, repeat=, memory=}}, dropped =
--- {{point=, status=, reason=}}, points = n}`. Ids depend only on the effective config, the
--- platform and the framework (and the repeat), so they are stable from one invocation to the
--- next.
---@param base table unified config
---@param opts? tp.sweep.PlanOpts
---@return table plan
function Sweep:plan(base, opts)
  if type(base) ~= 'table' then
    error('tp.sweep: plan needs a base config table', 2)
  end
  opts = opts or {}
  local repeats = opts.repeats or self.repeats
  local expanded = self:expand(base, opts)
  local plan = { runs = {}, dropped = {}, points = #expanded }
  for _, e in ipairs(expanded) do
    if e.status == 'ok' then
      local hash = M.hash(M.identity(e.config, opts.platform, opts.framework))
      for r = 1, repeats do
        plan.runs[#plan.runs + 1] = {
          id = M.run_id(hash, r, opts.platform, opts.framework),
          hash = hash,
          config = e.config,
          point = e.point,
          ['repeat'] = r,
          memory = e.memory,
          findings = e.findings,
        }
      end
    else
      plan.dropped[#plan.dropped + 1] = { point = e.point, status = e.status, reason = e.reason,
                                          memory = e.memory }
    end
  end
  return plan
end

--- Formats a point as 'key=value key=value' (short key names: the part after the last dot).
---@param point table
---@return string
function M.describe_point(point)
  local parts = {}
  for _, k in ipairs(config.sorted_keys(point)) do
    parts[#parts + 1] = string.format('%s=%s', k:match('[^.]+$'), tostring(point[k]))
  end
  return table.concat(parts, ' ')
end

return M
