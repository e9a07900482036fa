-- tp.stack: each group's software stack side by side, from the run records' `environment`
-- (written by tp.provenance): GPU driver, CUDA/ROCm runtime, NCCL/RCCL, Python, torch, the
-- framework's commit and the container image, one column per group (platform). Records without
-- an environment (written before tplua kept one) show '-'. tplua compare and reports print it.
local results = require('tp.analyse.results')

local M = {}

local function str(v)
  if type(v) == 'number' then
    return tostring(v)
  end
  return type(v) == 'string' and v ~= '' and v or nil
end

local function tbl(v)
  return type(v) == 'table' and v or nil
end

-- Joins the labelled values that are present: {{'NVIDIA', '550.54'}, ...} -> 'NVIDIA 550.54'.
local function labelled(pairs_list)
  local out = {}
  for _, p in ipairs(pairs_list) do
    local v = str(p[2])
    if v then
      out[#out + 1] = p[1] and (p[1] .. ' ' .. v) or v
    end
  end
  return #out > 0 and table.concat(out, ' / ') or nil
end

--- The rows of the table: a label and the text of one environment (nil when it says nothing).
M.ROWS = {
  { label = 'GPU driver', get = function(e)
    local gs = tbl(e.gpu_stack) or {}
    return labelled({ { 'NVIDIA', gs.nvidia_driver }, { 'amdgpu', gs.amdgpu_driver } })
  end },
  { label = 'CUDA / ROCm runtime', get = function(e)
    local gs = tbl(e.gpu_stack) or {}
    local c = tbl(e.container) or {}
    return labelled({ { 'CUDA', gs.cuda_runtime }, { 'HIP', gs.hip_runtime } })
      or labelled({ { 'ROCm', c.rocm_version } })
  end },
  { label = 'NCCL / RCCL', get = function(e)
    local gs = tbl(e.gpu_stack) or {}
    local py = tbl(e.python) or {}
    return labelled({ { 'NCCL', gs.nccl }, { 'RCCL', gs.rccl } })
      or (str(py.torch_nccl) and ('NCCL ' .. py.torch_nccl .. ' (torch)'))
  end },
  { label = 'Python', get = function(e)
    return str((tbl(e.python) or {}).python)
  end },
  { label = 'torch', get = function(e)
    local py = tbl(e.python) or {}
    local v = str(py.torch)
    local build = labelled({ { 'CUDA', py.torch_cuda }, { 'HIP', py.torch_hip } })
    return v and (build and string.format('%s (%s)', v, build) or v)
  end },
  { label = 'framework', get = function(e)
    local fw = tbl(e.framework) or {}
    local rev = str(fw.describe) or (str(fw.commit) and fw.commit:sub(1, 12)) or str(fw.version)
    if not rev then
      return nil
    end
    return str(fw.name) and (fw.name .. ' ' .. rev) or rev
  end },
  { label = 'container image', get = function(e)
    local c = tbl(e.container)
    if not c then
      return nil
    end
    return str(c.image) or labelled({ { 'NGC PyTorch', c.nvidia_pytorch_version },
      { 'ROCm', c.rocm_version } }) or (str(c.runtime) and (c.runtime .. ', image unknown'))
  end },
}

--- The software stack of each group of `set` split by `opts.by` (default 'platform'), in
--- `opts.order` (default: the sorted group values). Each cell lists the distinct values of the
--- group's runs ('a | b' when they differ, '-' for runs that do not say, alone when none does).
--- `any` is false when no run carries an environment.
---```lua
---local t = tp.stack.table(set, { by = 'platform' })
---print(tp.stack.format(t))
---```
---@param set table a tp.results ResultSet
---@param opts? {by?: string, order?: any[]}
---@return table t {by, groups = {value...}, rows = {{label, values = {text...}}}, any, missing}
function M.table(set, opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' then
    error('tp.stack.table: result set expected, got ' .. type(set), 2)
  end
  opts = opts or {}
  local by = opts.by or 'platform'
  local runs_of, order = {}, {}
  for _, r in ipairs(set.runs) do
    local g = results.get(r, by)
    if g == nil then
      g = '(none)'
    end
    if not runs_of[g] then
      runs_of[g] = {}
      order[#order + 1] = g
    end
    table.insert(runs_of[g], r)
  end
  if opts.order then
    order = opts.order
  else
    table.sort(order, function(a, b)
      return tostring(a) < tostring(b)
    end)
  end
  local t = { by = by, groups = {}, rows = {}, any = false, missing = 0 }
  for i, g in ipairs(order) do
    t.groups[i] = tostring(g)
  end
  for _, r in ipairs(set.runs) do
    if tbl(r.environment) then
      t.any = true
    else
      t.missing = t.missing + 1
    end
  end
  for _, row in ipairs(M.ROWS) do
    local values = {}
    for i, g in ipairs(order) do
      local seen, list, unknown = {}, {}, false
      for _, r in ipairs(runs_of[g] or {}) do
        local env = tbl(r.environment)
        local v = env and row.get(env)
        if v == nil then
          unknown = true
        elseif not seen[v] then
          seen[v] = true
          list[#list + 1] = v
        end
      end
      table.sort(list)
      if unknown or #list == 0 then
        list[#list + 1] = '-'
      end
      values[i] = table.concat(list, ' | ')
    end
    t.rows[#t.rows + 1] = { label = row.label, values = values }
  end
  return t
end

--- Renders the table as aligned text, a title line first.
---@param t table from M.table
---@return string
function M.format(t)
  local widths = { 0 }
  local lines = { { '' } }
  for i, g in ipairs(t.groups) do
    lines[1][i + 1] = g
  end
  for _, row in ipairs(t.rows) do
    local cells = { row.label }
    for i, v in ipairs(row.values) do
      cells[i + 1] = v
    end
    lines[#lines + 1] = cells
  end
  for _, cells in ipairs(lines) do
    for j, c in ipairs(cells) do
      widths[j] = math.max(widths[j] or 0, utf8.len(c) or #c)
    end
  end
  local out = { string.format("software stack by %s (the records' environment)%s", t.by,
    not t.any and ': the records carry none (written before tplua recorded it)' or '') }
  for _, cells in ipairs(lines) do
    local parts = {}
    for j, c in ipairs(cells) do
      parts[j] = c .. string.rep(' ', widths[j] - (utf8.len(c) or #c))
    end
    out[#out + 1] = ('  ' .. table.concat(parts, '  ')):gsub('%s+$', '')
  end
  return table.concat(out, '\n') .. '\n'
end

return M
