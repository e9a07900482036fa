-- tp.experiment._plan: Experiment:plan, the runs of every platform with their exact commands
-- (framework adapter, profiler, launcher), ids and output directories; starts nothing.
local config = require('tp.plan.config')
local methodology = require('tp.plan.methodology')
local sweep = require('tp.plan.sweep')
local define = require('tp.experiment._define')
local paths = require('tp.experiment._paths')

-- The method this part gives experiments (tp.experiment sets it on their class).
local Experiment = {}

-- The effective config of one platform with the option values applied.
local function effective(self, p, opts)
  local pd = self.platforms[p]
  local cfg = config.merge(self.common, pd.overrides)
  if opts.iters then
    config.set(cfg, 'training.iters', opts.iters)
  end
  for _, k in ipairs(config.sorted_keys(self.options)) do
    local o = self.options[k]
    local v = opts[k]
    if v == nil then
      v = o.default
    end
    if v ~= nil then
      if o.key then
        config.set(cfg, o.key, v)
      end
      if o.apply then
        local r = o.apply(cfg, v, p)
        if type(r) == 'table' then
          cfg = r
        end
      end
    end
  end
  return cfg
end

local function launch_command(self, p, pd, cmd, cfg, launcher, findings, dir)
  local launch = require('tp.launch')
  local nodes = cfg.nodes or 1
  local gpn = cfg.gpus_per_node or config.DEFAULT_GPUS_PER_NODE
  local function bad(fmt, ...)
    findings[#findings + 1] = { severity = 'error', key = 'launcher', platform = p,
                                message = string.format(fmt, ...) }
    return nil
  end
  -- The command wrapped by the launcher `name` of tp.launch, or nil and a finding.
  local function wrap(name, c, o)
    local ok, w = pcall(launch.get(name).wrap, c, o)
    if not ok then
      return bad('%s: %s: %s', p, name, tostring(w):gsub('^.-launch%.' .. name .. ': ', ''))
    end
    return w
  end
  if launcher == 'slurm' then
    local sopts = config.merge({ nodes = nodes, gpus_per_node = gpn, dir = dir,
      vendor = define.VENDOR[p] }, config.merge(self.slurm or {}, pd.slurm or {}))
    return wrap('slurm', cmd, sopts)
  end
  if nodes > 1 then
    -- tplua starts processes on this machine only: several nodes need a scheduler.
    return bad('%s: nodes = %d: --launcher %s starts the processes of this machine only, which '
      .. 'would run node 0 of %d alone: use --launcher slurm (one job across the nodes)', p,
      nodes, launcher, nodes)
  end
  if launcher == 'local' then
    if cmd.launcher == 'torchrun' and nodes * gpn > 1 then
      return bad("%s: --launcher local starts one process, but %s needs one per GPU (%d GPUs): "
        .. 'use torchrun', p, pd.framework, nodes * gpn)
    end
    return cmd
  end
  if launcher == 'ranks' then
    return wrap('ranks', cmd, { nproc_per_node = gpn })
  end
  local topts = config.merge({ nproc_per_node = gpn, nnodes = nodes },
    config.merge(self.torchrun or {}, pd.torchrun or {}))
  local wrapped = wrap('torchrun', cmd, topts)
  if not wrapped then
    return nil
  end
  if launcher == 'container' then
    local copts = config.merge(self.container or {}, pd.container or {})
    if type(copts.image) ~= 'string' then
      return bad('platforms.%s.container.image: required with --launcher container (the image '
        .. 'that holds %s)', p, pd.framework)
    end
    copts.vendor = copts.vendor or define.VENDOR[p]
    -- The run directory holds the configs the framework reads (Primus, NeMo) and its output.
    local mounts = {}
    for i, m in ipairs(copts.mounts or {}) do
      mounts[i] = m
    end
    mounts[#mounts + 1] = dir .. ':' .. dir
    copts.mounts = mounts
    wrapped = wrap('container', wrapped, copts)
  end
  return wrapped
end

-- The profiling of a platform's runs: the --profile flag's (false: none), else the platform's
-- `profile`, else the recipe's; nil when none.
local function platform_profile(self, pd, flag)
  local p = flag
  if p == nil then
    p = pd.profile
  end
  if p == nil then
    p = self.profile
  end
  return p or nil
end

local function errors_in(findings)
  local n = 0
  for _, f in ipairs(findings) do
    if f.severity == 'error' then
      n = n + 1
    end
  end
  return n
end

---@class tp.experiment.PlanOpts
---@field iters? integer override training.iters
---@field repeats? integer runs per configuration
---@field results? string results directory
---@field only? string one platform
---@field launcher? string 'local'|'torchrun'|'container'
---@field no_prune? boolean keep sweep points that do not fit in memory
---@field profile? string 'TOOL[:FIRST-LAST]' or 'none': profile every run (tp.profile.parse)
---@field [string] any values of the recipe's own options

--- Plans the experiment: for each platform, its effective config, the validation findings,
--- the methodology check across platforms, the memory estimate, and the runs with their exact
--- commands (framework adapter + launcher), ids and output directories. Never starts anything.
--- `plan.ok` is false when any finding is an error.
---@param opts? tp.experiment.PlanOpts
---@return table plan
function Experiment:plan(opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('Experiment:plan: options table expected, got ' .. type(opts), 2)
  end
  for k in pairs(opts) do
    if not (define.STANDARD_OPTIONS[k] or self.options[k] or k == 'help' or k == 'json') then
      error(string.format("Experiment:plan: unknown option '%s'", tostring(k)), 2)
    end
  end
  local plan = {
    experiment = self.name,
    description = self.description,
    methodology = self.methodology,
    results = opts.results or self.results or ('output/' .. paths.slug(self.name)),
    launcher = opts.launcher or self.launcher or 'torchrun',
    platforms = {},
    order = {},
    findings = {},
    runs = {},
    source = self.source,
  }
  plan.results_abs = paths.absolute(plan.results)
  local findings = plan.findings
  local function add(severity, key, platform, msg)
    findings[#findings + 1] = { severity = severity, key = key, platform = platform,
                                message = msg }
  end
  if not define.is_launcher(plan.launcher) then
    add('error', 'launcher', nil, string.format("--launcher: '%s' is not one of %s",
      plan.launcher, table.concat(define.LAUNCHERS, ', ')))
  end
  local names = config.sorted_keys(self.platforms)
  if opts.only then
    if not self.platforms[opts.only] then
      add('error', 'only', nil, string.format("--only: no platform '%s' in this experiment "
        .. '(it has: %s)', opts.only, table.concat(names, ', ')))
      names = {}
    else
      names = { opts.only }
    end
  end
  if opts.repeats ~= nil and (math.type(opts.repeats) ~= 'integer' or opts.repeats < 1) then
    add('error', 'repeats', nil, '--repeats: must be a positive integer')
  end
  if opts.concurrency ~= nil and (math.type(opts.concurrency) ~= 'integer'
    or opts.concurrency < 1) then
    add('error', 'concurrency', nil, '--concurrency: must be a positive integer')
  end
  if opts.iters ~= nil and (math.type(opts.iters) ~= 'integer' or opts.iters < 1) then
    add('error', 'training.iters', nil, '--iters: must be a positive integer')
  end
  local profile = require('tp.plan.profile')
  local flag_profile
  if opts.profile ~= nil then
    local perr
    flag_profile, perr = profile.parse(tostring(opts.profile))
    if flag_profile == nil then
      add('error', 'profile', nil, '--profile: ' .. perr)
    end
  end

  local effective_by_platform = {}
  for _, p in ipairs(names) do
    local pd = self.platforms[p]
    local cfg = effective(self, p, opts)
    local entry = {
      name = p, framework = pd.framework, hardware = pd.hardware, config = cfg, runs = {},
      dropped = {}, findings = {},
    }
    plan.platforms[p] = entry
    plan.order[#plan.order + 1] = p
    local r = config.validate(cfg, { hardware = pd.hardware, platform = p })
    entry.memory = r.memory
    entry.ga = r.ga
    for _, f in ipairs(r.findings) do
      add(f.severity, f.key, p, f.message)
    end
    if r.ok then
      entry.config = r.config
      effective_by_platform[p] = r.config
    end
  end
  -- The methodology across platforms (on validated configs: dp and ga derived).
  if #names > 1 then
    local all = true
    for _, p in ipairs(names) do
      all = all and effective_by_platform[p] ~= nil
    end
    if all then
      for _, f in ipairs(methodology.check(self.methodology, effective_by_platform)) do
        add(f.severity, f.key, nil, f.message)
      end
    end
  end

  local repeats = opts.repeats or self.repeats
  local adapters = require('tp.frameworks')
  local launch = require('tp.launch')
  for _, p in ipairs(names) do
    local entry = plan.platforms[p]
    local pd = self.platforms[p]
    if effective_by_platform[p] then
      local base = config.copy(entry.config)
      local out_dir = plan.results_abs .. '/' .. p
      config.set(base, 'paths.output', out_dir .. '/_plan')
      local sw = pd.sweep or self.sweep
      local candidates
      if sw then
        local sp = sw:plan(base, { hardware = pd.hardware, platform = p,
                                   framework = pd.framework, no_prune = opts.no_prune,
                                   repeats = repeats })
        candidates = sp.runs
        entry.dropped = sp.dropped
        entry.sweep = { points = sp.points, keys = sw:keys() }
        if #candidates == 0 then
          add('error', 'sweep', p, string.format('%s: the sweep leaves no runnable point (%d '
            .. 'points: invalid, filtered or pruned; see the list)', p, sp.points))
        end
      else
        local hash = sweep.hash(sweep.identity(base, p, pd.framework))
        candidates = {}
        for rep = 1, repeats or 1 do
          candidates[#candidates + 1] = { id = sweep.run_id(hash, rep, p, pd.framework),
                                          hash = hash, config = base, ['repeat'] = rep,
                                          memory = entry.memory }
        end
      end
      local adapter = adapters.get(pd.framework)
      entry.slurm = config.merge(self.slurm or {}, pd.slurm or {})
      local prof = platform_profile(self, pd, flag_profile)
      if prof then
        for _, f in ipairs(profile.plan_findings(prof, { launcher = plan.launcher,
          path = pd.env and pd.env.PATH, iters = config.get(base, 'training.iters') })) do
          add(f.severity, 'profile', p, string.format('%s: %s', p, f.message))
        end
      end
      for _, c in ipairs(candidates) do
        local cfg = config.copy(c.config)
        local dir = out_dir .. '/' .. c.id
        config.set(cfg, 'paths.output', dir)
        local ok, cmd = pcall(adapter.build, config.for_framework(cfg))
        if not ok then
          add('error', 'framework', p, string.format('%s: %s', p,
            tostring(cmd):gsub('^config%.', '')))
          break
        end
        -- The profiler applies to each process's command, before the launcher starts them.
        local run_profile, unprofiled = nil, cmd
        if prof then
          local pcmd, info = profile.for_run(pd.framework, cmd, prof, dir .. '/profile')
          if not pcmd then
            add('error', 'profile', p, string.format('%s: %s', p, info))
            break
          end
          cmd, run_profile = pcmd, info
        end
        for k, v in pairs(pd.env or {}) do
          cmd.env[k] = v
        end
        local wrapped = launch_command(self, p, pd, cmd, cfg, plan.launcher, findings, dir)
        if not wrapped then
          break
        end
        local model = type(cfg.model) == 'table' and cfg.model.id or cfg.model
        local run = {
          id = c.id,
          hash = c.hash,
          platform = p,
          framework = pd.framework,
          hardware = pd.hardware.id,
          model = model,
          methodology = self.methodology.name,
          ['repeat'] = c['repeat'],
          point = c.point,
          config = cfg,
          argv = wrapped.argv,
          env = wrapped.env,
          cwd = wrapped.cwd,
          parser = cmd.parser,
          files = wrapped.files or cmd.files,
          launcher = wrapped.launcher,
          output = dir,
          timeout = pd.timeout or self.timeout,
          stop = pd.stop or self.stop,
          gbs = cfg.training.gbs,
          seq_len = cfg.training.seq_len,
          gpus = (cfg.nodes or 1) * (cfg.gpus_per_node or config.DEFAULT_GPUS_PER_NODE),
          memory = c.memory,
          notes = cmd.notes,
          command = launch.describe(wrapped),
          -- The adapter's per-process command, before a launcher wraps it (tp.preflight runs
          -- the framework's parser on it).
          process = { argv = cmd.argv, env = cmd.env, cwd = cmd.cwd, entry = cmd.entry },
          profile = run_profile,
        }
        if run_profile then
          run.notes = table.move(cmd.notes or {}, 1, #(cmd.notes or {}), 1, {})
          run.notes[#run.notes + 1] = string.format('profile %s: traces %s',
            profile.format(run_profile), table.concat(run_profile.patterns, ', '))
          if run.process and unprofiled.argv[1] ~= cmd.argv[1] then
            -- A system profiler wraps the process: the preflight checks the trainer's command.
            run.process.argv = unprofiled.argv
          end
        end
        entry.runs[#entry.runs + 1] = run
        plan.runs[#plan.runs + 1] = run
      end
    end
  end
  plan.ok = errors_in(findings) == 0
  return plan
end

return Experiment
