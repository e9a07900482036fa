-- tp.history._stackdiff: what changed in the software stack between two runs, read from their
-- records' `environment` (tp.run.provenance's inventory): the rows tp.analyse.stack shows (GPU
-- driver, CUDA/ROCm runtime, NCCL/RCCL, Python, torch, framework, container image), then the
-- other settings the audit compares (framework packages, the container's ROCm or NGC release,
-- the GPUs' power limit and clocks) and the NCCL_/RCCL_/HSA_/TORCH_ variables.
local stack = require('tp.analyse.stack')
local provenance = require('tp.run.provenance')

local M = {}

-- The order the rows of tp.analyse.stack are listed in a change: what moves performance most
-- often first.
local ROW_ORDER = { 'CUDA / ROCm runtime', 'torch', 'NCCL / RCCL', 'GPU driver', 'framework',
  'Python', 'container image' }

-- Keys of provenance.comparable that a row of tp.analyse.stack already shows.
local SHOWN_BY_ROWS = {
  ['gpu_stack.nvidia_driver'] = true, ['gpu_stack.amdgpu_driver'] = true,
  ['gpu_stack.cuda_runtime'] = true, ['gpu_stack.hip_runtime'] = true,
  ['gpu_stack.nccl'] = true, ['gpu_stack.rccl'] = true,
  ['python.python'] = true, ['python.torch'] = true, ['python.torch_cuda'] = true,
  ['python.torch_hip'] = true, ['python.torch_nccl'] = true,
  ['framework.commit'] = true, ['framework.version'] = true, ['container.image'] = true,
}

local GPU_STACK_NAMES = { cuda_driver = 'CUDA driver', rocm_smi = 'ROCm SMI' }
local CONTAINER_NAMES = { rocm_version = 'ROCm', nvidia_pytorch_version = 'NGC PyTorch',
  image_digest = 'image digest' }
-- The releases users name a stack by come first ('ROCm 6.2.4 -> 6.3.1').
local RELEASES = { ['container.rocm_version'] = true, ['container.nvidia_pytorch_version'] = true }
local GPU_STATE_NAMES = { power_limit_w = 'GPU power limit (W)',
  app_clock_mhz = 'GPU applications clock (MHz)', ecc = 'GPU ECC',
  persistence = 'GPU persistence mode' }

-- The name of a comparable key outside the rows, and its rank among the extras.
local function extra_name(key)
  local group, rest = key:match('^([%w_]+)%.(.+)$')
  if RELEASES[key] then
    return CONTAINER_NAMES[rest], 0
  elseif group == 'container' then
    return CONTAINER_NAMES[rest] or ('container ' .. rest), 1
  elseif group == 'package' then
    return rest, 2
  elseif group == 'gpu_stack' then
    return GPU_STACK_NAMES[rest] or rest, 3
  elseif group == 'gpu_state' then
    local i, k = rest:match('^(%d+)%.(.+)$')
    local name = GPU_STATE_NAMES[k] or ('GPU ' .. tostring(k))
    if i ~= '1' then
      name = string.format('%s, GPU group %s', name, i)
    end
    return name, 4
  end
  return key, 5
end

-- 'HIP 6.2.41134' and 'HIP 6.3.42131' share their first word: that word names the change
-- ('GPU driver' rows name the vendor's driver); otherwise the row's label does.
local function row_item(label, a, b)
  local wa, ra, wb, rb
  if a and not a:find(' / ', 1, true) then
    wa, ra = a:match('^(%S+) (.+)$')
  end
  if b and not b:find(' / ', 1, true) then
    wb, rb = b:match('^(%S+) (.+)$')
  end
  local word = wa or wb
  if word and (a == nil or wa == word) and (b == nil or wb == word) then
    if label == 'GPU driver' then
      word = word .. ' driver'
    end
    return { what = word, from = a and ra, to = b and rb }
  end
  return { what = label, from = a, to = b }
end

local function env_vars(inv)
  return type(inv) == 'table' and type(inv.env) == 'table' and inv.env or {}
end

local function sorted_keys(...)
  local seen, out = {}, {}
  for _, t in ipairs({ ... }) do
    for k in pairs(t) do
      if not seen[k] then
        seen[k] = true
        out[#out + 1] = k
      end
    end
  end
  table.sort(out)
  return out
end

local function has_environment(inv)
  return type(inv) == 'table' and next(inv) ~= nil
end

--- Says what differs between two environments (records' `environment`, tp.provenance): a list
--- of `{what =, from =, to =}` (`from` or `to` nil when one side does not say): the container's
--- ROCm or NGC release, tp.analyse.stack's rows (runtime, torch, NCCL/RCCL, driver, framework,
--- Python, image), then framework packages, other GPU libraries, GPU settings and the recorded
--- environment variables. Returns nil when either side has no environment.
---```lua
---local items = diff(before.environment, after.environment)
---print(format(items))   --> 'HIP 6.2.41134 -> 6.3.42131, torch 2.4.1 -> 2.5.0'
---```
---@param a table|nil environment of the earlier run
---@param b table|nil environment of the later run
---@return table|nil items
function M.diff(a, b)
  if not has_environment(a) or not has_environment(b) then
    return nil
  end
  local items, seen = {}, {}
  local function add(item)
    local id = string.format('%s\0%s\0%s', item.what, tostring(item.from), tostring(item.to))
    if not seen[id] then
      seen[id] = true
      items[#items + 1] = item
    end
  end
  local ca, cb = provenance.comparable(a), provenance.comparable(b)
  local extras = {}
  for _, k in ipairs(sorted_keys(ca, cb)) do
    if not SHOWN_BY_ROWS[k] and ca[k] ~= cb[k] then
      local name, rank = extra_name(k)
      extras[#extras + 1] = { rank = rank, key = k,
        item = { what = name, from = ca[k], to = cb[k] } }
    end
  end
  table.sort(extras, function(x, y)
    if x.rank ~= y.rank then
      return x.rank < y.rank
    end
    return x.key < y.key
  end)
  for _, e in ipairs(extras) do
    if e.rank == 0 then
      add(e.item)
    end
  end
  local rows = {}
  for _, row in ipairs(stack.ROWS) do
    rows[row.label] = row
  end
  for _, label in ipairs(ROW_ORDER) do
    local row = rows[label]
    if row then
      local va, vb = row.get(a), row.get(b)
      if va ~= vb then
        if label == 'torch' and va and vb then
          -- torch's build ('(HIP 6.2.41134)') repeats the runtime row: only the versions then.
          local sa, sb = va:gsub(' %(.-%)$', ''), vb:gsub(' %(.-%)$', '')
          if sa ~= sb then
            va, vb = sa, sb
          end
        end
        add(row_item(label, va, vb))
      end
    end
  end
  for _, e in ipairs(extras) do
    if e.rank > 0 then
      add(e.item)
    end
  end
  local ea, eb = env_vars(a), env_vars(b)
  for _, k in ipairs(sorted_keys(ea, eb)) do
    local va = ea[k] ~= nil and tostring(ea[k]) or nil
    local vb = eb[k] ~= nil and tostring(eb[k]) or nil
    if va ~= vb then
      add({ what = k, from = va, to = vb })
    end
  end
  return items
end

--- One change as text: 'torch 2.4.1 -> 2.5.0'; a side that does not say reads '(none)'.
---@param item table {what, from, to}
---@return string
function M.format_item(item)
  return string.format('%s %s -> %s', item.what, item.from or '(none)', item.to or '(none)')
end

--- The changes as one line, comma-separated: 'ROCm 6.2.4 -> 6.3.1, torch 2.4.1 -> 2.5.0'.
---@param items table from diff
---@return string
function M.format(items)
  local parts = {}
  for i, item in ipairs(items) do
    parts[i] = M.format_item(item)
  end
  return table.concat(parts, ', ')
end

return M
