-- tp.plan: prints an experiment plan (tp.experiment's Experiment:plan) for people, and as JSON
-- for programs: the effective config, each platform's GPU, framework and memory estimate, every
-- run with its exact command, the sweep points left out and why, and the findings.
local config = require('tp.plan.config')

local M = {}

local function fmt_value(v)
  if type(v) == 'table' then
    if v.id then
      return v.id
    end
    if v.path then
      return 'path ' .. v.path
    end
    return config.show(v)
  end
  if math.type(v) == 'float' then
    return string.format('%.6g', v)
  end
  return tostring(v)
end

local SECTION_ORDER = {
  training = { 'seed', 'mbs', 'gbs', 'ga', 'seq_len', 'iters', 'lr', 'min_lr', 'warmup', 'decay',
               'weight_decay', 'beta1', 'beta2', 'eps', 'grad_clip', 'precision', 'fp8_recipe',
               'dataset', 'tokenizer', 'init_std', 'log_interval' },
  parallelism = { 'tp', 'pp', 'cp', 'dp', 'ep', 'sequence_parallel', 'distributed_optimizer' },
  system = { 'recompute', 'attention', 'fused_kernels', 'cuda_graphs' },
  paths = { 'framework_dir', 'data', 'checkpoints' },
}

-- "key value, key value" for the keys of a section that are set.
local function section_line(t, section)
  local parts = {}
  for _, k in ipairs(SECTION_ORDER[section]) do
    if t and t[k] ~= nil then
      parts[#parts + 1] = k .. ' ' .. fmt_value(t[k])
    end
  end
  return table.concat(parts, ', ')
end

local function wrap_words(text, width, indent)
  local lines, line = {}, ''
  for word in text:gmatch('%S+') do
    if #line > 0 and #line + 1 + #word > width then
      lines[#lines + 1] = line
      line = word
    else
      line = #line > 0 and (line .. ' ' .. word) or word
    end
  end
  if #line > 0 then
    lines[#lines + 1] = line
  end
  return indent .. table.concat(lines, '\n' .. indent)
end

local function model_line(cfg)
  local id = type(cfg.model) == 'table' and cfg.model.id or cfg.model
  local ok, total = pcall(require('tp.catalog.models').params, cfg.model)
  if ok then
    return string.format('%s (%.2f B parameters)', tostring(id), total / 1e9)
  end
  return tostring(id)
end

-- Keys whose value differs between the platforms of the plan.
local function differing(plan)
  local out = {}
  if #plan.order < 2 then
    return out
  end
  local equal = require('tp.plan.methodology').equal
  for path in pairs(config.KEYS) do
    local first = config.get(plan.platforms[plan.order[1]].config, path)
    for i = 2, #plan.order do
      if not equal(config.get(plan.platforms[plan.order[i]].config, path), first) then
        out[path] = true
      end
    end
  end
  return out
end

-- A config with the differing keys removed (the part all platforms share).
local function shared(cfg, diff)
  local c = config.copy(cfg)
  for path in pairs(diff) do
    config.set(c, path, nil)
  end
  return c
end

local function only(cfg, diff)
  local c = {}
  for path in pairs(diff) do
    local v = config.get(cfg, path)
    if v ~= nil then
      config.set(c, path, v)
    end
  end
  return c
end

-- Writes "section  key value, key value, ..." wrapped at 100 columns.
local function print_config(out, cfg, indent)
  for _, section in ipairs({ 'training', 'parallelism', 'system', 'paths' }) do
    local line = section_line(cfg[section], section)
    if line ~= '' then
      local head = string.format('%s%-12s ', indent, section)
      local pad = string.rep(' ', #head)
      local cur = head
      for item in line:gmatch('[^,]+') do
        item = item:gsub('^%s+', '')
        local piece = (cur == head and '' or ' ') .. item .. ','
        if #cur + #piece > 100 and cur ~= head then
          out:write(cur, '\n')
          cur = pad .. item .. ','
        else
          cur = cur .. piece
        end
      end
      out:write((cur:gsub(',$', '')), '\n')
    end
  end
end

-- The files of a run: one line each, a batch script (*.sbatch) shown whole.
local function print_files(out, dir, files, indent)
  for _, f in ipairs(config.sorted_keys(files or {})) do
    out:write(string.format('%sfile %s/%s (%d bytes)\n', indent, dir, f, #files[f]))
    if f:match('%.sbatch$') then
      for line in files[f]:gmatch('[^\n]+') do
        out:write(indent .. '  | ' .. line .. '\n')
      end
    end
  end
end

local function severity_rank(s)
  return s == 'error' and 1 or (s == 'warning' and 2 or 3)
end

---@class tp.plan.PrintOpts
---@field brief? boolean one line per run, without the commands (what `tplua run` prints)

--- Prints a plan to `out` (default io.stdout).
---@param plan table from Experiment:plan
---@param out? file*
---@param opts? tp.plan.PrintOpts
function M.print(plan, out, opts)
  out = out or io.stdout
  opts = opts or {}
  local m = plan.methodology or {}
  out:write(string.format('experiment: %s\n', plan.experiment))
  if plan.description then
    out:write(wrap_words(plan.description, 96, '  ') .. '\n')
  end
  out:write(string.format('methodology: %s\n', m.name or '(custom)'))
  if m.description and m.description ~= '' then
    out:write(wrap_words(m.description, 96, '  ') .. '\n')
  end
  local first = plan.order[1] and plan.platforms[plan.order[1]]
  if first then
    out:write(string.format('model: %s\n', model_line(first.config)))
  end
  out:write(string.format('results: %s\nlauncher: %s\n', plan.results, plan.launcher))
  local n_platforms = #plan.order
  out:write(string.format('runs: %d on %d platform%s\n', #plan.runs, n_platforms,
    n_platforms == 1 and '' or 's'))

  local diff = differing(plan)
  if first then
    out:write(n_platforms > 1 and '\nshared config\n' or '\nconfig\n')
    local c = shared(first.config, diff)
    out:write(string.format('  %-12s nodes %s x gpus_per_node %s\n', 'gpus',
      tostring(c.nodes or 1), tostring(c.gpus_per_node or config.DEFAULT_GPUS_PER_NODE)))
    print_config(out, c, '  ')
  end

  for _, p in ipairs(plan.order) do
    local e = plan.platforms[p]
    local hw = e.hardware
    out:write(string.format('\nplatform %s: %s (%s, %s GiB), framework %s\n', p, hw.name, hw.id,
      tostring(hw.memory_gb), e.framework))
    if n_platforms > 1 then
      local own = only(e.config, diff)
      if next(own) then
        out:write('  platform settings\n')
        print_config(out, own, '    ')
        if own.nodes or own.gpus_per_node then
          out:write(string.format('    %-12s nodes %s x gpus_per_node %s\n', 'gpus',
            tostring(e.config.nodes or 1), tostring(e.config.gpus_per_node)))
        end
      end
    end
    if e.memory then
      out:write(string.format('  memory per GPU (estimate): %s\n',
        require('tp.plan.memory').format(e.memory)))
    end
    local stop = e.runs[1] and e.runs[1].stop
    if type(stop) == 'table' and stop.ci then
      out:write(string.format('  stop: each run once the %g%% CI of its steady step time is '
        .. 'within %g%% of the mean (>= %s steady iterations%s; docs/stopping.md)\n',
        (stop.confidence or 0.95) * 100, stop.ci * 100, tostring(stop.min_iters or 50),
        stop.max_iters and (', at most ' .. stop.max_iters) or ''))
    end
    if e.sweep then
      out:write(string.format('  sweep over %s: %d points, %d planned, %d left out\n',
        table.concat(e.sweep.keys, ', '), e.sweep.points, e.sweep.points - #e.dropped,
        #e.dropped))
    end
    if e.search then
      for _, line in ipairs(require('tp.plan.search').plan_lines(e.search)) do
        out:write('  ', line, '\n')
      end
    end
    if #e.runs > 0 then
      out:write(string.format('  runs (%d):\n', #e.runs))
    end
    for _, r in ipairs(e.runs) do
      local label = r.id
      if r.point then
        label = label .. '  [' .. require('tp.plan.sweep').describe_point(r.point) .. ']'
      end
      if r.memory and r.point then
        label = label .. string.format('  mem %.1f GiB', r.memory.bytes.total
          / require('tp.plan.memory').GIB)
      end
      out:write('    ' .. label .. '\n')
      if not opts.brief then
        out:write('      $ ' .. r.command .. '\n')
        -- A Slurm run's batch script is its real command: shown whole.
        print_files(out, r.output, r.files, '      ')
        for _, note in ipairs(r.notes or {}) do
          out:write('      note: ' .. note .. '\n')
        end
      end
    end
    if #e.dropped > 0 then
      out:write('  left out:\n')
      for _, d in ipairs(e.dropped) do
        local sweep = require('tp.plan.sweep')
        out:write(string.format('    [%s] %s: %s\n', sweep.describe_point(d.point),
          d.status, d.reason or ''))
      end
    end
  end

  local sorted = {}
  do
    for i, f in ipairs(plan.findings) do
      -- The memory estimate is shown with each platform; only a warning is repeated here.
      if not (f.key == 'memory' and f.severity == 'info') then
        sorted[#sorted + 1] = { f = f, i = i }
      end
    end
    table.sort(sorted, function(a, b)
      local ra, rb = severity_rank(a.f.severity), severity_rank(b.f.severity)
      if ra ~= rb then
        return ra < rb
      end
      return a.i < b.i
    end)
    if #sorted > 0 then
      out:write('\nfindings:\n')
    end
    for _, s in ipairs(sorted) do
      local f = s.f
      local where = f.platform and (f.platform .. ': ') or ''
      local msg = f.message
      if f.platform and msg:sub(1, #f.platform + 2) == f.platform .. ': ' then
        where = ''
      end
      out:write(string.format('  %-7s %s%s\n', f.severity, where, msg))
    end
  end
  if not plan.ok then
    local n = 0
    for _, f in ipairs(plan.findings) do
      n = n + (f.severity == 'error' and 1 or 0)
    end
    out:write(string.format('\nplan: %d error%s\n', n, n == 1 and '' or 's'))
  end
end

--- Returns the plan as a string (what print writes).
---@param plan table
---@param opts? tp.plan.PrintOpts
---@return string
function M.format(plan, opts)
  local parts = {}
  local sink = {
    write = function(self, ...)
      for _, s in ipairs({ ... }) do
        parts[#parts + 1] = s
      end
      return self
    end,
  }
  M.print(plan, sink, opts)
  return table.concat(parts)
end

--- Prints what a campaign (tp.campaign{...}) would run: every run with its exact command, the
--- files written before it starts (a Slurm batch script in full), its timeout.
---@param c tp.Campaign
---@param out? file*
function M.print_campaign(c, out)
  out = out or io.stdout
  local launch = require('tp.launch')
  out:write(string.format('campaign: %s\n', c.name or '(unnamed)'))
  out:write(string.format('results: %s\n', c.results))
  out:write(string.format('runs (%d):\n', #c.runs))
  for _, r in ipairs(c.runs) do
    local label = r.id
    if r.framework then
      label = label .. '  [' .. r.framework .. (r.launcher and (', ' .. r.launcher) or '') .. ']'
    end
    out:write('  ' .. label .. '\n')
    out:write('    $ ' .. launch.describe({ argv = r.argv, env = r.env or {}, cwd = r.cwd })
      .. '\n')
    local dir = r.files_dir or (r.config and r.config.paths and r.config.paths.output)
      or r.cwd or (c.results .. '/' .. r.id .. '.files')
    print_files(out, dir, r.files, '    ')
    if r.outputs then
      if not r.cwd then
        out:write(string.format('    runs in %s\n', dir))
      end
      for _, member in ipairs(config.sorted_keys(r.outputs)) do
        out:write(string.format('    output %s/%s -> the record\'s %s\n', r.cwd or dir,
          r.outputs[member], member))
      end
    end
    if r.iterations == false then
      out:write('    prints no iteration: done when it exits 0 with its outputs\n')
    end
    if r.timeout then
      out:write(string.format('    timeout %s s\n', tostring(r.timeout)))
    end
    if type(r.stop) == 'table' and r.stop.ci then
      out:write(string.format('    stop at a %g%% CI of the steady step time within %g%% of its '
        .. 'mean (>= %s steady iterations%s)\n', (r.stop.confidence or 0.95) * 100,
        r.stop.ci * 100, tostring(r.stop.min_iters or 50),
        r.stop.max_iters and (', at most ' .. r.stop.max_iters) or ''))
    end
  end
end

--- Returns the plan as a JSON-ready table: plain data only (no functions, hardware as its id).
---@param plan table
---@return table
function M.data(plan)
  local json = require('tp.json')
  local function clean(v, seen)
    if type(v) ~= 'table' then
      if type(v) == 'function' or type(v) == 'userdata' then
        return nil
      end
      return v
    end
    if seen[v] then
      return nil
    end
    seen[v] = true
    local out = {}
    for k, x in pairs(v) do
      out[k] = clean(x, seen)
    end
    seen[v] = nil
    return out
  end
  local platforms = {}
  for _, p in ipairs(plan.order) do
    local e = plan.platforms[p]
    platforms[p] = {
      framework = e.framework,
      hardware = e.hardware.id,
      config = clean(e.config, {}),
      memory = clean(e.memory, {}),
      runs = {},
      dropped = json.array(clean(e.dropped, {})),
      search = e.search and require('tp.plan.search').plan_data(e.search) or nil,
    }
    for i, r in ipairs(e.runs) do
      local c = clean(r, {})
      c.memory = nil
      platforms[p].runs[i] = c
    end
    platforms[p].runs = json.array(platforms[p].runs)
  end
  return {
    schema = 'tplua.plan/1',
    experiment = plan.experiment,
    methodology = plan.methodology and plan.methodology.name,
    results = plan.results,
    launcher = plan.launcher,
    ok = plan.ok,
    order = json.array(clean(plan.order, {})),
    platforms = platforms,
    findings = json.array(clean(plan.findings, {})),
  }
end

--- Encodes the plan as pretty JSON with sorted keys.
---@param plan table
---@return string
function M.json(plan)
  return require('tp.json').encode(M.data(plan), { pretty = true, sort_keys = true })
end

-- The package's modules, loaded on first use: tp.plan.config, tp.plan.sweep, ...
return require('tp').package('tp.plan', {
  'config', 'config_env', 'methodology', 'sweep', 'memory', 'profile', 'search',
}, M)
