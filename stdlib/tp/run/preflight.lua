-- tp.preflight: checks before a GPU-hour is spent (`tplua preflight RECIPE`, and `tplua run`
-- unless --skip-preflight). Each finding has a severity (error: the runs would fail or measure
-- the wrong thing, so nothing starts; warning; info), the check it comes from, one line of why
-- and one of how to fix it:
--   gpus       the planned GPUs are here, of the planned model, and idle (no other process
--              holds one: NVML / ROCm SMI process lists);
--   framework  the checkout, entry script and interpreter exist, at a version tplua's adapter
--              supports;
--   arguments  the framework's own parser accepts the generated arguments (tp.preflight_framework);
--   data       dataset files exist and verify; the tokenizer is on local disk (runs are offline);
--   output     the results directory is writable, with room for the logs and checkpoints;
--   slurm      the partition exists and is up, with the nodes and GPUs per node requested.
local M = {}

local VENDOR = { amd = 'amd', nvd = 'nvidia' }
local RANK = { error = 1, warning = 2, info = 3 }

--- Bytes a checkpoint takes per parameter: bf16 weights (2) plus fp32 main weights and Adam's
--- two moments (12), as Megatron's distributed checkpoints and torchtitan's DCP store them.
M.CHECKPOINT_BYTES_PER_PARAM = 14
--- Room the logs, records and traces of the runs need besides checkpoints.
M.MIN_FREE_BYTES = 1 << 30

local function gib(bytes)
  return string.format('%.1f GiB', bytes / 2 ^ 30)
end

-- ---------------------------------------------------------------------------------------------
-- GPUs.

-- The devices a run here would use: those of the platform's vendor that a compute runtime
-- lists (it honours CUDA_/HIP_VISIBLE_DEVICES), else those a management library lists.
local function usable_devices(probe, vendor)
  local compute, managed = {}, {}
  for _, d in ipairs(probe and probe.devices or {}) do
    if d.vendor == vendor then
      if d.api == 'nvml' or d.api == 'rsmi' then
        managed[#managed + 1] = d
      else
        compute[#compute + 1] = d
      end
    end
  end
  return #compute > 0 and compute or managed
end

local function process_list(d)
  local parts = {}
  for i, p in ipairs(d.processes) do
    if i > 4 then
      parts[#parts + 1] = string.format('and %d more', d.process_count - 4)
      break
    end
    parts[#parts + 1] = p.memory and string.format('pid %d (%s)', p.pid, gib(p.memory))
      or string.format('pid %d', p.pid)
  end
  if #parts == 0 then
    parts[1] = string.format('%d process(es)', d.process_count)
  end
  return table.concat(parts, ', ')
end

-- The GPUs of a plan's platform (`entry`: its name, config, hardware), or of a campaign run
-- (`entry.label` names it in the messages; without a platform, `entry.name` is nil and the
-- GPUs are the probe's, of whichever vendor).
local function check_gpus(entry, probe, add)
  local vendor = VENDOR[entry.name]
  if not vendor and entry.name ~= nil then
    add('info', 'gpus', string.format("platform '%s' names no GPU vendor (amd, nvd): GPUs not "
      .. 'checked', entry.name), '')
    return
  end
  local who = entry.label or entry.name
  local cfg = entry.config
  local want = cfg.gpus_per_node or require('tp.plan.config').DEFAULT_GPUS_PER_NODE
  local devices = usable_devices(probe, vendor
    or (probe and probe.devices[1] and probe.devices[1].vendor))
  if #devices < want then
    add('error', 'gpus', string.format('%s%s %d %sGPU(s) on this machine, the probe finds %d',
      who, entry.label and ' needs' or ': the runs need', want, vendor and (vendor .. ' ') or '',
      #devices),
      entry.label and 'run it on a machine with those GPUs, or lower its gpus'
        or 'run on a machine with the planned GPUs, or lower gpus_per_node')
  end
  local hw = entry.hardware
  if hw and hw.id then
    local seen = {}
    for _, d in ipairs(devices) do
      local row = require('tp.catalog.hardware').match(d)
      if row and row.id ~= hw.id and not seen[row.id] then
        seen[row.id] = true
        add('error', 'gpus', string.format("%s: the %s says hardware '%s', this machine has "
          .. '%s (%s)', who, entry.label and 'run' or 'recipe', hw.id, d.name or '?', row.id),
          (entry.label and 'set its hardware to ' or 'set the platform\'s hardware to ')
            .. row.id .. ', or run on ' .. hw.id)
      end
    end
  end
  local busy = 0
  for i, d in ipairs(devices) do
    if i > want then
      break
    end
    busy = busy + ((d.process_count or 0) > 0 and 1 or 0)
    local label = string.format('GPU %d (%s%s)', i - 1, d.name or '?',
      d.pci_bus_id and (', ' .. d.pci_bus_id) or '')
    if (d.process_count or 0) > 0 then
      add('error', 'gpus', string.format('%s is in use: %s', label, process_list(d)),
        'wait for those processes to end, or choose other GPUs (CUDA_VISIBLE_DEVICES / '
        .. 'HIP_VISIBLE_DEVICES); a shared GPU measures both jobs')
    elseif not d.process_count and d.memory_used_bytes and d.memory_bytes
      and d.memory_used_bytes > 0.1 * d.memory_bytes then
      add('warning', 'gpus', string.format('%s has %s of memory in use and its processes cannot '
        .. 'be listed', label, gib(d.memory_used_bytes)),
        'check with nvidia-smi / amd-smi that no other job runs on it')
    end
  end
  if #devices >= want and busy == 0 then
    add('info', 'gpus', string.format('%s: %d of %d %s GPU(s) used, %s', who, want,
      #devices, devices[1].name or vendor, devices[1].process_count and 'no other process on them'
        or 'their processes cannot be listed'), '')
  end
end

-- ---------------------------------------------------------------------------------------------
-- Data and tokenizer.

local function hf_cache_dirs()
  local env = os.getenv
  local home = env('HOME') or ''
  local dirs = {}
  local function add(d)
    if d and d ~= '' then
      dirs[#dirs + 1] = d
    end
  end
  add(env('HF_HUB_CACHE'))
  add(env('HUGGINGFACE_HUB_CACHE'))
  add(env('HF_HOME') and env('HF_HOME') .. '/hub')
  add(home ~= '' and home .. '/.cache/huggingface/hub')
  return dirs
end

local function check_tokenizer(tok, add, remote)
  local fs = require('tp.fs')
  local sev = remote and 'warning' or 'error'
  if tok == 'bytes' then
    -- tp.data's own tokenizer (one token per byte): no files.
    add('info', 'tokenizer', "tokenizer 'bytes' is built into tplua (one token per byte)", '')
    return
  end
  if tok:match('^[/.~]') then
    if not fs.exists(tok) then
      add(sev, 'tokenizer', string.format('tokenizer %s does not exist', tok),
        'point training.tokenizer at the tokenizer directory or file')
    end
    return
  end
  -- A hub name: its files must already be in the cache (runs are offline).
  local cached = 'models--' .. tok:gsub('/', '--')
  for _, d in ipairs(hf_cache_dirs()) do
    if fs.is_dir(d .. '/' .. cached) then
      add('info', 'tokenizer', string.format('tokenizer %s is cached in %s', tok, d), '')
      return
    end
  end
  add(sev, 'tokenizer', string.format("tokenizer '%s' is neither a local path nor in the "
    .. 'Hugging Face cache (%s); the run cannot download it', tok,
    table.concat(hf_cache_dirs(), ', ')),
    'download it beforehand (huggingface-cli download ' .. tok .. ') or set training.tokenizer '
      .. 'to a local directory')
end

local function check_data(runs, add, remote)
  local seen = {}
  for _, run in ipairs(runs) do
    local prefix, tok = require('tp.frameworks').dataset_prefix(run.config)
    if prefix and run.framework == 'torchtitan' then
      -- torchtitan reads a named text dataset from <paths.data>/<name>, not an indexed one.
      local dir = prefix:match('^(.*)/[^/]+$')
      if not seen[dir] then
        seen[dir] = true
        if not require('tp.fs').is_dir(dir) then
          add(remote and 'warning' or 'error', 'data', string.format('dataset directory %s does '
            .. 'not exist (torchtitan reads the named dataset from it)', dir),
            'put the dataset there (runs are offline), or set paths.data')
        end
      end
    elseif prefix and not seen[prefix] then
      seen[prefix] = true
      local info, err = require('tp.data').verify(prefix)
      if info then
        add('info', 'data', string.format('%s: %d documents, %d tokens, verified', prefix,
          info.documents or info.sequences or 0, info.tokens or 0), '')
      else
        add(remote and 'warning' or 'error', 'data', string.format('dataset %s: %s', prefix,
          tostring(err)), 'prepare it (tplua data prepare) or fix the dataset path')
      end
    end
    tok = tok or (type(run.config.training) == 'table' and run.config.training.tokenizer)
    if prefix and type(tok) == 'string' and not seen['tok:' .. tok] then
      seen['tok:' .. tok] = true
      check_tokenizer(tok, add, remote)
    end
  end
end

-- ---------------------------------------------------------------------------------------------
-- Output space.

-- The nearest existing directory at or above `path`.
local function existing_parent(path)
  local fs = require('tp.fs')
  local p = path
  while p ~= '' and not fs.is_dir(p) do
    p = p:match('^(.*)/[^/]*$') or ''
  end
  return p ~= '' and p or '/'
end

local function checkpoint_bytes(runs)
  local total = 0
  for _, run in ipairs(runs) do
    local paths = run.config.paths
    if type(paths) == 'table' and paths.checkpoints then
      local ok, n = pcall(require('tp.catalog.models').params, run.config.model)
      if ok and type(n) == 'number' then
        total = total + n * M.CHECKPOINT_BYTES_PER_PARAM
      end
    end
  end
  return total
end

local function check_output(plan, runs, add)
  local fs = require('tp.fs')
  local dir = plan.results_abs
  local ok, err = fs.mkdir_p(dir)
  if not ok then
    add('error', 'output', string.format('results directory %s cannot be made: %s', dir,
      tostring(err)), 'choose another --results directory')
    return
  end
  -- A real write, as the runs will make (write_atomic's own temporary file keeps concurrent
  -- preflights apart).
  local probe = dir .. '/.tplua-preflight-write-check'
  local wok, werr = fs.write_atomic(probe, 'preflight\n')
  os.remove(probe)
  if not wok then
    add('error', 'output', string.format('results directory %s is not writable: %s', dir,
      tostring(werr)), 'fix its permissions or choose another --results directory')
    return
  end
  local need = M.MIN_FREE_BYTES + checkpoint_bytes(runs)
  local sp = fs.space(existing_parent(dir))
  if sp and sp.available < need then
    add('error', 'output', string.format('%s has %s free; the runs need about %s (logs%s)', dir,
      gib(sp.available), gib(need), need > M.MIN_FREE_BYTES and ' and checkpoints at '
        .. M.CHECKPOINT_BYTES_PER_PARAM .. ' bytes per parameter' or ''),
      'free space, or choose another --results directory')
  elseif sp then
    add('info', 'output', string.format('%s: writable, %s free', dir, gib(sp.available)), '')
  end
end

-- ---------------------------------------------------------------------------------------------
-- Slurm.

-- sinfo's partitions: {name = {up =, nodes =, gpus = max GPUs per node, default =}}.
local function partitions(add)
  -- The jobs are submitted with sbatch (tplua slurm job); sinfo describes the partitions.
  for _, tool in ipairs({ 'sbatch', 'sinfo' }) do
    if not require('tp.plan.profile').which(tool) then
      add('error', 'slurm', tool .. ' is not found in PATH: the jobs cannot be submitted from '
        .. 'this machine', 'install the Slurm client (sbatch, sinfo, squeue, scontrol), or run '
        .. 'tplua on a machine of the cluster')
      return nil
    end
  end
  local r, err = require('tp.proc').run({ 'sinfo', '-h', '-o', '%P|%a|%D|%G' }, { timeout = 60 })
  if not r or r.code ~= 0 then
    -- Its last line says why (sinfo's own "fatal: ..." after the attempts it made).
    local why = r and r.stderr:gsub('%s+$', ''):match('([^\n]*)$') or err
    add('error', 'slurm', 'sinfo failed: ' .. tostring(why ~= '' and why or
      ('exit status ' .. tostring(r and r.code))),
      'check that the Slurm client is installed and the controller answers (SLURM_CONF)')
    return nil
  end
  local out = {}
  for line in r.stdout:gmatch('[^\n]+') do
    local name, avail, nodes, gres = line:match('^([^|]+)|([^|]*)|(%d+)|(.*)$')
    if name then
      local default = name:sub(-1) == '*'
      name = default and name:sub(1, -2) or name
      local p = out[name] or { nodes = 0, gpus = 0, up = false }
      p.default = p.default or default
      p.up = p.up or avail == 'up'
      p.nodes = p.nodes + tonumber(nodes)
      for item in gres:gmatch('[^,]+') do
        local n = item:match('^gpu:[^(]-(%d+)')
        if n then
          p.gpus = math.max(p.gpus, tonumber(n))
        end
      end
      out[name] = p
    end
  end
  return out
end

local function check_slurm(entry, add)
  local parts = partitions(add)
  if not parts then
    return
  end
  local o = entry.slurm or {}
  local name = o.partition
  if not name then
    for n, p in pairs(parts) do
      if p.default then
        name = n
      end
    end
  end
  local p = name and parts[name]
  if not p then
    local names = {}
    for n in pairs(parts) do
      names[#names + 1] = n
    end
    table.sort(names)
    add('error', 'slurm', string.format("partition '%s' does not exist (the cluster has: %s)",
      tostring(name), table.concat(names, ', ')), 'set slurm.partition to one of them')
    return
  end
  if not p.up then
    add('error', 'slurm', string.format("partition '%s' is not up", name),
      'ask the cluster administrators, or choose another partition')
  end
  local nodes = entry.config.nodes or 1
  if p.nodes < nodes then
    add('error', 'slurm', string.format("partition '%s' has %d node(s); the runs need %d", name,
      p.nodes, nodes), 'lower nodes, or choose a larger partition')
  end
  local gpn = entry.config.gpus_per_node or require('tp.plan.config').DEFAULT_GPUS_PER_NODE
  if o.gpus ~= false and not o.gres and p.gpus < gpn then
    add('error', 'slurm', string.format("partition '%s' offers %d GPU(s) per node (GRES); the "
      .. 'runs request %d', name, p.gpus, gpn),
      'choose a GPU partition, or lower gpus_per_node')
  end
  if #(entry.runs or {}) > 0 then
    add('info', 'slurm', string.format("partition '%s': %d node(s), up to %d GPU(s) per node",
      name, p.nodes, p.gpus), '')
  end
end

-- ---------------------------------------------------------------------------------------------
-- Reports.

-- A report with `fields`, and the `add(severity, check, message, fix)` that fills it.
local function new_report(fields)
  local report = fields
  report.findings = {}
  report.at = os.date('!%Y-%m-%dT%H:%M:%SZ')
  report.t0 = require('tp.gpu').now()
  local function add(severity, check, message, fix)
    report.findings[#report.findings + 1] = { severity = severity, check = check,
      message = message, fix = fix ~= '' and fix or nil, order = #report.findings }
  end
  return report, add
end

-- Sorts the findings (errors first, each kind in the order found), counts them, says ok.
local function close_report(report)
  table.sort(report.findings, function(a, b)
    if RANK[a.severity] ~= RANK[b.severity] then
      return RANK[a.severity] < RANK[b.severity]
    end
    return a.order < b.order
  end)
  local n = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(report.findings) do
    n[f.severity] = n[f.severity] + 1
    f.order = nil
  end
  report.errors, report.warnings = n.error, n.warning
  report.ok = n.error == 0
  report.elapsed_s = require('tp.gpu').now() - report.t0
  report.t0 = nil
  return report
end

-- ---------------------------------------------------------------------------------------------
-- The whole preflight.

--- Checks the runs of one platform of a plan before they start. `opts.probe` is a tp.gpu.probe
--- result (probed when absent, except for Slurm launches, whose GPUs are on other machines).
---```lua
---local report = tp.preflight.check(plan, { platform = 'nvd' })
---tp.preflight.print(report)
---if not report.ok then os.exit(1) end
---```
---@param plan table Experiment:plan's result
---@param opts table {platform: string, probe?: table}
---@return table report {platform, launcher, ok, errors, warnings, findings = {{severity,
---  check, message, fix}}, at, elapsed_s}
function M.check(plan, opts)
  local entry = plan.platforms[opts.platform]
  if not entry then
    error("tp.preflight.check: the plan has no platform '" .. tostring(opts.platform) .. "'", 2)
  end
  local report, add = new_report({ platform = opts.platform, launcher = plan.launcher })
  local remote = plan.launcher == 'slurm'
  -- In a container, the framework and the paths the runs see are the image's and its mounts':
  -- what this machine cannot see there is a warning, and the parser is not run from here.
  local container = plan.launcher == 'container'
  local runs = entry.runs
  if remote then
    check_slurm(entry, add)
  else
    local probe = opts.probe
    if not probe then
      local perr
      probe, perr = require('tp.gpu').probe({ timeout = 60 })
      if not probe then
        add('error', 'gpus', 'GPU probe failed: ' .. tostring(perr), 'see tplua probe')
      end
    end
    if probe then
      check_gpus(entry, probe, add)
    end
  end
  local pf = require('tp.run.preflight_framework')
  local dirs, flagsets = {}, {}
  for _, run in ipairs(runs) do
    local key = run.framework .. '\0' .. tostring(run.config.paths
      and run.config.paths.framework_dir)
    if dirs[key] == nil then
      local ok, dir = pf.install(run, add, { remote = remote or container,
        where = container and ' (from this machine; the container image may hold it)' or nil })
      dirs[key] = ok and { dir = dir } or false
    end
    -- One parser run per distinct set of flags (sweep points change values, not names).
    local names = {}
    for _, a in ipairs(run.process and run.process.argv or {}) do
      if type(a) == 'string' and a:match('^%-%-') then
        names[#names + 1] = a
      end
    end
    local fkey = key .. '\0' .. table.concat(names, ' ')
    if dirs[key] and not flagsets[fkey] then
      flagsets[fkey] = true
      if container then
        add('info', 'arguments', string.format("%s: the framework's parser runs in the container "
          .. 'image, not here; the arguments are checked when the run starts', run.framework), '')
      else
        pf.arguments(run, dirs[key].dir, add)
      end
    end
  end
  check_data(runs, add, remote or container)
  check_output(plan, runs, add)
  return close_report(report)
end

--- Checks the runs of a campaign (tp.campaign; a campaign file `tplua run` takes) before they
--- start, each as a recipe's runs are checked: the launcher and the interpreter of its command
--- are found, the framework's checkout and its parser accept the arguments (for the frameworks
--- of tp.frameworks), its data is there and verifies, the results directory is writable with
--- room, its GPUs are here and idle (when it asks for them), and for a Slurm run the partition
--- of its job script. One report per run, in M.check's shape with `run` for `platform`.
---```lua
---local c = dofile('examples/smoke.lua')
---local report = tp.preflight.check_campaign(c, { results = 'out/smoke' })
---tp.preflight.print(report)
---```
---@param c table a campaign (tp.campaign)
---@param opts? table {results?: string (default the campaign's), runs?: string[] (the ids to
---  check; default all), probe?: table (a tp.gpu.probe result)}
---@return table report {campaign, results, ok, errors, warnings, runs = {report...}, at,
---  elapsed_s}
function M.check_campaign(c, opts)
  return require('tp.run._preflight_campaign').check(c, opts, {
    gpus = check_gpus, data = check_data, output = check_output, slurm = check_slurm,
    checkpoint_bytes = checkpoint_bytes, new_report = new_report, close_report = close_report,
  })
end

--- What a run record keeps of a preflight (docs/record.md): ok, counts, the errors and
--- warnings, when; or `{skipped = true}` for --skip-preflight.
---@param report table|nil M.check's result; nil: skipped
---@return table
function M.summary(report)
  if not report then
    return { skipped = true, reason = '--skip-preflight' }
  end
  local kept = {}
  for _, f in ipairs(report.findings) do
    if f.severity ~= 'info' then
      kept[#kept + 1] = { severity = f.severity, check = f.check, message = f.message }
    end
  end
  return { ok = report.ok, errors = report.errors, warnings = report.warnings, at = report.at,
    findings = kept }
end

--- Prints a report: one line per finding (severity, check, message) and its fix indented
--- below, then a verdict. A campaign's report (M.check_campaign) is printed run by run, then,
--- for more than one run, a line for the whole.
---@param report table
---@param out? file* default io.stdout
function M.print(report, out)
  out = out or io.stdout
  if report.runs then
    for _, r in ipairs(report.runs) do
      M.print(r, out)
    end
    if #report.runs ~= 1 then
      local failed = 0
      for _, r in ipairs(report.runs) do
        failed = failed + (r.ok and 0 or 1)
      end
      out:write(string.format('preflight: campaign: %d of %d run(s) passed%s (%.1f s)\n',
        #report.runs - failed, #report.runs, report.ok and '' or '; FAILED: nothing starts',
        report.elapsed_s or 0))
    end
    return
  end
  if report.run then
    out:write(string.format('preflight: run %s (%s)\n', report.run, report.launcher))
  else
    out:write(string.format('preflight: platform %s (%s)\n', report.platform, report.launcher))
  end
  for _, f in ipairs(report.findings) do
    out:write(string.format('  %-7s %-9s %s\n', f.severity, f.check, f.message))
    if f.fix then
      out:write(string.format('  %-7s %-9s   fix: %s\n', '', '', f.fix))
    end
  end
  out:write(string.format('preflight: %s (%d error(s), %d warning(s), %.1f s)\n',
    report.ok and 'passed' or 'FAILED: nothing starts', report.errors, report.warnings,
    report.elapsed_s or 0))
end

return M
