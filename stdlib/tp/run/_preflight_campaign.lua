-- tp.run._preflight_campaign: the preflight of a campaign file's runs (tp.preflight
-- .check_campaign). Each run's command is read back (tp.launch.unwrap: the launcher, the
-- per-process command inside) and put through the checks of a recipe's preflight, which
-- tp.run.preflight hands over (`checks`: gpus, data, output, slurm, checkpoint_bytes, and the
-- report's new/close), so that both share one implementation; one report per run.
local M = {}

-- Findings that `fn(add)` makes once per key, added again (with fn's results) for each later run
-- with the same key: a campaign's runs share an interpreter, a parser's verdict on the same
-- flags, datasets, the results directory, the cluster's partitions, the GPU probe.
local function once(memo, key, add, fn)
  local saved = memo[key]
  if not saved then
    saved = { findings = {} }
    saved.results = table.pack(fn(function(...)
      saved.findings[#saved.findings + 1] = table.pack(...)
    end))
    memo[key] = saved
  end
  for _, f in ipairs(saved.findings) do
    add(table.unpack(f, 1, f.n))
  end
  return table.unpack(saved.results, 1, saved.results.n)
end

local function is_python(program)
  return type(program) == 'string' and program:match('[^/]*$'):match('^python[%d.]*$') ~= nil
end

local function has_adapter(framework)
  return type(framework) == 'string' and require('tp.frameworks').get(framework) ~= nil
end

-- What an adapter's command does on a machine without GPUs (its `cpu_fallback`: the reference
-- trainer trains on the CPU, the peaks microbenchmark measures it), or nil when it needs GPUs.
local function cpu_fallback(framework)
  local a = type(framework) == 'string' and require('tp.frameworks').get(framework)
  return a and type(a.cpu_fallback) == 'string' and a.cpu_fallback or nil
end

-- The interpreter that runs a launcher's Python script: the one of its #! line (torchrun's).
local function interpreter_of(runner, env)
  local path = require('tp.plan.profile').which(runner, env and env.PATH or nil)
  local f = path and io.open(path, 'rb')
  local line = f and f:read('l') or ''
  if f then
    f:close()
  end
  local interp, arg = line:match('^#!%s*(%S+)%s*(%S*)')
  if interp and interp:match('/env$') and arg ~= '' then
    return arg
  end
  return interp
end

-- The script a Python command starts (absolute), nil for `-m module`, `-c` or another program.
local function script_of(argv, cwd)
  local script = is_python(argv[1]) and argv[2]
  if not script or script:sub(1, 1) == '-' then
    return nil
  end
  if script:sub(1, 1) ~= '/' then
    script = (cwd or require('tp.fs').realpath('.') or '.') .. '/' .. script
  end
  return script
end

-- The value of a command's --device (the reference trainer's: auto, cpu, cuda).
local function device_of(argv)
  for i, a in ipairs(argv or {}) do
    if a == '--device' then
      return argv[i + 1]
    end
    local v = a:match('^%-%-device=(.*)$')
    if v then
      return v
    end
  end
  return 'auto'
end

-- What a run reads, in the shape check_data takes: its config's dataset, else the prefixes
-- after --data-path in its command (Megatron-LM's and the reference trainer's flag; Megatron's
-- blend weights skipped).
local function data_of(run, argv)
  local cfg = run.config or {}
  if require('tp.frameworks').dataset_prefix(cfg) then
    return { { framework = run.framework, config = cfg } }
  end
  local out = {}
  local function add(prefix)
    out[#out + 1] = { config = { training = { dataset = { path = prefix } } } }
  end
  for i, a in ipairs(argv or {}) do
    local inline = a:match('^%-%-data%-path=(.+)$')
    if inline then
      add(inline)
    elseif a == '--data-path' then
      for j = i + 1, #argv do
        if argv[j]:match('^%-%-') then
          break
        end
        if not tonumber(argv[j]) then
          add(argv[j])
        end
      end
    end
  end
  return out
end

local function probe_gpus(add)
  local probe, err = require('tp.gpu').probe({ timeout = 60 })
  if not probe then
    add('error', 'gpus', 'GPU probe failed: ' .. tostring(err), 'see tplua probe')
  end
  return probe
end

-- A local run's GPUs. It asks for `gpus` (per node: gpus / config.nodes) when it names a GPU
-- platform (nvd, amd) or runs a framework of tp.frameworks; one whose adapter runs on the CPU
-- too (`cpu_fallback`: the reference trainer, the peaks microbenchmark) only when it is forced
-- onto CUDA or this machine has GPUs, and so does a command no adapter knows (its gpus may only
-- count GPUs for the per-GPU figures).
local function check_run_gpus(run, argv, ctx, add)
  local label = 'run ' .. run.id
  if not run.gpus then
    add('info', 'gpus', label .. ': no gpus field: GPUs not checked', '')
    return
  end
  local on_cpu = cpu_fallback(run.framework)
  local device = on_cpu and device_of(argv) or nil
  if device == 'cpu' then
    add('info', 'gpus', string.format('%s: the %s runs on the CPU (--device cpu)', label,
      run.framework == 'reference' and 'reference trainer' or run.framework), '')
    return
  end
  local probe = once(ctx.memo, 'probe', add, probe_gpus)
  if not probe then
    return
  end
  local asks = run.platform ~= nil or device == 'cuda'
    or (has_adapter(run.framework) and not on_cpu)
  if not asks and #probe.devices == 0 then
    add('info', 'gpus', label .. (device and (': no GPU here: ' .. on_cpu)
      or ': no GPU here, and its command is none of the frameworks tplua knows: '
      .. 'GPUs not checked (its gpus counts them for the per-GPU figures)'), '')
    return
  end
  local nodes = math.tointeger(run.config and run.config.nodes) or 1
  ctx.checks.gpus({ name = run.platform, label = label,
    config = { gpus_per_node = math.max(1, run.gpus // math.max(nodes, 1)) },
    hardware = run.hardware and { id = run.hardware } }, probe, add)
end

-- A Slurm run's partition, from its job script's #SBATCH options.
local function check_run_slurm(run, options, ctx, add)
  local o = options or {}
  local gpn = math.tointeger(tonumber(o['gpus-per-node']))
  local entry = { slurm = { partition = o.partition, gres = o.gres, gpus = gpn ~= nil },
    config = { nodes = math.tointeger(tonumber(o.nodes)) or 1, gpus_per_node = gpn },
    runs = { run } }
  local key = table.concat({ 'slurm', tostring(o.partition), tostring(o.nodes), tostring(gpn),
    tostring(o.gres) }, '\0')
  once(ctx.memo, key, add, function(a)
    ctx.checks.slurm(entry, a)
  end)
end

-- One run of a campaign: its report.
local function check_run(run, ctx)
  local pf = require('tp.run.preflight_framework')
  local u = require('tp.launch').unwrap(run.argv, run.files)
  local C = ctx.checks
  local report, add = C.new_report({ run = run.id, launcher = u.launcher,
    platform = run.platform })
  local memo = ctx.memo
  local remote, container = u.launcher == 'slurm', u.launcher == 'container'
  local who = run.framework or run.id
  local path = run.env and run.env.PATH or nil
  if u.launcher ~= 'local' then
    -- The launcher's own program (tplua, torchrun, docker) runs here.
    once(memo, table.concat({ 'launcher', run.argv[1], tostring(path) }, '\0'), add,
      function(a)
        pf.program(who, 'launcher', run.argv[1], run.env, a)
      end)
  end
  local p = u.argv and #u.argv > 0 and { argv = u.argv, env = run.env, cwd = run.cwd } or nil
  if p and u.runner and not remote then
    p.argv[1] = interpreter_of(u.runner, run.env) or p.argv[1]
  end
  if p then
    p.entry = script_of(p.argv, run.cwd)
  end
  local prun = { id = run.id, framework = who, config = run.config or {}, process = p,
    files = run.files, output = require('tp.run._base').files_dir(run, ctx.results) }
  if p then
    local fdir = type(prun.config.paths) == 'table' and prun.config.paths.framework_dir
    local key = table.concat({ 'install', who, tostring(fdir), p.argv[1], tostring(p.entry),
      tostring(path), tostring(remote or container) }, '\0')
    local found, dir = once(memo, key, add, function(a)
      return pf.install(prun, a, { remote = remote or container })
    end)
    if found and has_adapter(run.framework) then
      -- One parser run per distinct set of flags, as for a recipe.
      local names = {}
      for _, a in ipairs(p.argv) do
        if a:match('^%-%-') then
          names[#names + 1] = a
        end
      end
      once(memo, key .. '\0' .. table.concat(names, ' '), add, function(a)
        pf.arguments(prun, dir, a)
      end)
    end
  else
    add('info', 'framework', string.format('%s: the command %s starts is not read here (%s): '
      .. 'its interpreter, framework and arguments are checked when it starts', who,
      u.launcher, container and 'it runs in a container image' or 'no job script among its files'),
      '')
  end
  if remote then
    check_run_slurm(run, u.slurm, ctx, add)
  else
    check_run_gpus(run, p and p.argv, ctx, add)
  end
  local data = data_of(run, p and p.argv)
  if #data > 0 then
    local parts = { 'data', tostring(remote or container) }
    for _, d in ipairs(data) do
      parts[#parts + 1] = tostring(d.framework) .. '|' .. require('tp.json').encode(d.config)
    end
    once(memo, table.concat(parts, '\0'), add, function(a)
      C.data(data, a, remote or container)
    end)
  end
  once(memo, 'output\0' .. C.checkpoint_bytes({ prun }), add, function(a)
    C.output({ results_abs = ctx.results }, { prun }, a)
  end)
  return C.close_report(report)
end

--- tp.preflight.check_campaign (its documentation is there), given the checks of a recipe's
--- preflight.
---@param c table a campaign (tp.campaign)
---@param opts? table
---@param checks table {gpus, data, output, slurm, checkpoint_bytes, new_report, close_report}
---@return table report
function M.check(c, opts, checks)
  opts = opts or {}
  if type(c) ~= 'table' or type(c.runs) ~= 'table' or type(c.results) ~= 'string' then
    error('tp.preflight.check_campaign: a campaign (tp.campaign) expected', 3)
  end
  local t0 = require('tp.gpu').now()
  local results = opts.results or c.results
  if results:sub(1, 1) ~= '/' then
    results = (require('tp.fs').realpath('.') or '.') .. '/' .. results
  end
  local ctx = { memo = {}, results = results, checks = checks }
  if opts.probe then
    ctx.memo.probe = { findings = {}, results = table.pack(opts.probe) }
  end
  local wanted
  if opts.runs then
    wanted = {}
    for _, id in ipairs(opts.runs) do
      wanted[id] = true
    end
  end
  local report = { campaign = c.name, results = results, runs = {}, errors = 0, warnings = 0,
    at = os.date('!%Y-%m-%dT%H:%M:%SZ') }
  for _, run in ipairs(c.runs) do
    if not wanted or wanted[run.id] then
      local r = check_run(run, ctx)
      report.runs[#report.runs + 1] = r
      report.errors, report.warnings = report.errors + r.errors, report.warnings + r.warnings
    end
  end
  report.ok = report.errors == 0
  report.elapsed_s = require('tp.gpu').now() - t0
  return report
end

return M
