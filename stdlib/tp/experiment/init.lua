-- tp.experiment: the recipe entry point. `tp.experiment{...}` checks an experiment definition
-- (model x platforms x frameworks x methodology x sweep x repeats), and when the recipe is the
-- main script (`tplua recipe.lua [flags]`) it runs itself: it plans, runs what this machine
-- can run (its own platform, found by tp.gpu.probe) through tp.campaign, then compares with the
-- results the results directory holds. `tplua plan RECIPE` and `tplua run RECIPE` load the same
-- file through tp.experiment.load and do one phase each. docs/recipes.md is the guide.
local config = require('tp.plan.config')
local methodology = require('tp.plan.methodology')
local sweep = require('tp.plan.sweep')

local M = {}

local Experiment = {}
Experiment.__index = Experiment

--- Platform names and the GPU each uses unless the recipe says otherwise.
M.PLATFORMS = { 'amd', 'nvd' }
M.DEFAULT_HARDWARE = require('tp.analyse.efficiency').PLATFORM_HARDWARE
local VENDOR = { amd = 'amd', nvd = 'nvidia' }

--- Launchers a run can start under (--launcher).
M.LAUNCHERS = { 'local', 'torchrun', 'ranks', 'container', 'slurm' }

--- The flags every experiment has, besides its own `options`.
M.STANDARD_OPTIONS = {
  iters = { type = 'integer', key = 'training.iters',
            desc = 'training iterations of every run (training.iters)' },
  repeats = { type = 'integer', desc = 'runs of each configuration' },
  results = { type = 'string', desc = 'results directory (runs are written and read there)' },
  only = { type = 'string', desc = 'plan and run one platform only (amd or nvd)' },
  launcher = { type = 'string',
               desc = 'how runs start: local, torchrun, ranks, container or slurm' },
  dry_run = { type = 'boolean', desc = 'print the plan and start nothing' },
  no_prune = { type = 'boolean',
               desc = 'keep sweep points whose memory estimate exceeds the GPU memory' },
  concurrency = { type = 'integer',
                  desc = 'runs at once (default 1; with --launcher slurm: jobs in the queue)' },
  skip_preflight = { type = 'boolean',
                     desc = 'start without the preflight checks (the records say so)' },
  profile = { type = 'string',
              desc = 'profile every run: TOOL[:FIRST-LAST] (torch, nsys, rocprofv3) or none' },
}
local STANDARD_ORDER = { 'iters', 'repeats', 'results', 'only', 'launcher', 'concurrency',
                         'profile', 'dry_run',
                         'no_prune', 'skip_preflight' }

-- Depth of tp.experiment.load calls in progress: while > 0, experiments never run themselves.
local loading = 0

-- ---------------------------------------------------------------------------------------------
-- Paths.

local function cwd()
  local pwd = os.getenv('PWD')
  local fs = require('tp.fs')
  local real = fs.realpath('.')
  if pwd and real and fs.realpath(pwd) == real then
    return pwd
  end
  return real or pwd or '.'
end

local function normalize_path(p)
  local parts = {}
  local absolute = p:sub(1, 1) == '/'
  for part in p:gmatch('[^/]+') do
    if part == '..' and #parts > 0 and parts[#parts] ~= '..' then
      parts[#parts] = nil
    elseif part ~= '.' and not (part == '..' and absolute and #parts == 0) then
      parts[#parts + 1] = part
    end
  end
  local s = table.concat(parts, '/')
  if absolute then
    return '/' .. s
  end
  return s == '' and '.' or s
end

--- Returns `path` made absolute against the current directory (or `base` when given), with
--- '.' and '..' folded.
---@param path string
---@param base? string
---@return string
function M.absolute(path, base)
  if path:sub(1, 1) == '/' then
    return normalize_path(path)
  end
  return normalize_path((base or cwd()) .. '/' .. path)
end

local function dirname(path)
  return path:match('^(.*)/[^/]*$') or '.'
end

local function slug(s)
  local out = s:lower():gsub('[^%w%.]+', '-'):gsub('^%-+', ''):gsub('%-+$', '')
  return out ~= '' and out or 'experiment'
end

-- ---------------------------------------------------------------------------------------------
-- Definition checks (misuse raises, naming the recipe field).

local DEF_FIELDS = {
  name = 'string', description = 'string', model = 'any', methodology = 'any',
  platforms = 'table', training = 'table', parallelism = 'table', system = 'table',
  paths = 'table', nodes = 'any', gpus_per_node = 'any', repeats = 'integer', sweep = 'any',
  options = 'table', results = 'string', recorded = 'string', launcher = 'string',
  timeout = 'number', torchrun = 'table', container = 'table', slurm = 'table',
  profile = 'any',
}

local PLATFORM_FIELDS = {
  framework = 'string', hardware = 'string', training = 'table', parallelism = 'table',
  system = 'table', paths = 'table', nodes = 'any', gpus_per_node = 'any', env = 'table',
  sweep = 'any', torchrun = 'table', container = 'table', timeout = 'number', slurm = 'table',
  profile = 'any',
}

local OPTION_TYPES = { integer = true, number = true, string = true, boolean = true }

local function fail(name, fmt, ...)
  local msg = string.format(fmt, ...)
  error(string.format("experiment '%s': %s", name or '?', msg), 0)
end

local function check_fields(name, t, fields, where)
  for _, k in ipairs(config.sorted_keys(t)) do
    local want = fields[k]
    if not want then
      local known = config.sorted_keys(fields)
      fail(name, "%s%s: unknown field (known: %s)", where, tostring(k), table.concat(known, ', '))
    end
    local v = t[k]
    if want == 'integer' then
      if math.type(v) ~= 'integer' or v < 1 then
        fail(name, '%s%s: positive integer expected, got %s', where, k, config.show(v))
      end
    elseif want ~= 'any' and type(v) ~= want then
      fail(name, '%s%s: %s expected, got %s %s', where, k, want, type(v), config.show(v))
    end
  end
end

local function as_sweep(name, v, where)
  if v == nil then
    return nil
  end
  if sweep.is_sweep(v) then
    return v
  end
  if type(v) == 'table' then
    local ok, s = pcall(sweep.new, v)
    if not ok then
      fail(name, '%ssweep: %s', where, tostring(s):gsub('^tp%.sweep: ', ''))
    end
    return s
  end
  fail(name, '%ssweep: tp.sweep{...} or a sweep spec table expected, got %s', where, type(v))
end

-- The `profile` field (tp.profile.normalize): {tool, steps?}, false, or nil when absent.
local function as_profile(name, v, where)
  if v == nil then
    return nil
  end
  local p, err = require('tp.plan.profile').normalize(v)
  if p == nil then
    fail(name, '%sprofile: %s', where, err)
  end
  return p
end

-- The unified-config part of a table (model, training, parallelism, system, paths, nodes,
-- gpus_per_node).
local function unified_part(t)
  local out = {}
  for _, k in ipairs({ 'model', 'training', 'parallelism', 'system', 'paths', 'nodes',
    'gpus_per_node' }) do
    if t[k] ~= nil then
      out[k] = config.copy(t[k])
    end
  end
  return out
end

local function check_options(name, options)
  local out = {}
  for _, k in ipairs(config.sorted_keys(options or {})) do
    local o = options[k]
    if type(k) ~= 'string' or not k:match('^[%a][%w_]*$') then
      fail(name, 'options: option names must be identifiers, got %s', config.show(k))
    end
    if M.STANDARD_OPTIONS[k] then
      fail(name, "options.%s: '--%s' is a standard flag; choose another name", k,
        k:gsub('_', '-'))
    end
    if type(o) ~= 'table' then
      fail(name, 'options.%s: table {desc =, default =, type =, key = | apply =} expected', k)
    end
    for f in pairs(o) do
      if f ~= 'desc' and f ~= 'default' and f ~= 'type' and f ~= 'key' and f ~= 'apply' then
        fail(name, "options.%s: unknown field '%s' (desc, default, type, key, apply)", k,
          tostring(f))
      end
    end
    if type(o.desc) ~= 'string' then
      fail(name, 'options.%s.desc: string expected', k)
    end
    local kind = o.type
    if kind == nil then
      kind = math.type(o.default) or type(o.default)
      if kind == 'float' then
        kind = 'number'
      end
    end
    if not OPTION_TYPES[kind] then
      fail(name, 'options.%s: give type (integer, number, string, boolean) or a default', k)
    end
    if o.key ~= nil and not config.KEYS[o.key] then
      fail(name, "options.%s.key: '%s' is not a unified key path", k, tostring(o.key))
    end
    if o.apply ~= nil and type(o.apply) ~= 'function' then
      fail(name, 'options.%s.apply: function(config, value, platform) expected', k)
    end
    if o.key == nil and o.apply == nil then
      fail(name, 'options.%s: give key (a unified key path) or apply (a function)', k)
    end
    out[k] = { desc = o.desc, default = o.default, type = kind, key = o.key, apply = o.apply }
  end
  return out
end

--- Creates an experiment from a definition without running it (tp.experiment{...} and
--- tp.experiment.main{...} run it when the recipe is the main script). Raises
--- "experiment '<name>': <key path>: <problem>" on a malformed definition, on config values of the
--- wrong type, and on a per-platform override of a key the methodology fixes (with both values).
---@param def table the experiment definition (docs/recipes.md)
---@param meta? {source?: string} the recipe file, for relative `recorded` paths
---@return table experiment
function M.new(def, meta)
  if type(def) ~= 'table' then
    error('tp.experiment: definition table expected, got ' .. type(def), 2)
  end
  if getmetatable(def) == Experiment then
    return def
  end
  local name = def.name
  if type(name) ~= 'string' or name == '' then
    error('tp.experiment: name: non-empty string expected', 2)
  end
  check_fields(name, def, DEF_FIELDS, '')
  if def.model == nil then
    fail(name, 'model: required (a tp.models id such as llama3.1-8b, or a model row)')
  end
  if type(def.platforms) ~= 'table' or next(def.platforms) == nil then
    fail(name, 'platforms: at least one platform expected (amd = { framework = ... }, nvd = ...)')
  end
  local m_spec = def.methodology or 'identical_config'
  local meth
  if type(m_spec) == 'string' then
    local err
    meth, err = methodology.get(m_spec)
    if not meth then
      fail(name, 'methodology: %s', err:gsub('^methodology: ', ''))
    end
  elseif type(m_spec) == 'table' and type(m_spec.fixed) == 'table' then
    meth = m_spec
  else
    fail(name, 'methodology: a name or a tp.methodology.define{...} result expected')
  end

  local common = unified_part(def)
  for _, f in ipairs(config.check_types(common)) do
    fail(name, '%s', f.message)
  end
  local platforms = {}
  for _, p in ipairs(config.sorted_keys(def.platforms)) do
    local pd = def.platforms[p]
    local where = string.format('platforms.%s.', tostring(p))
    if not (p == 'amd' or p == 'nvd') then
      fail(name, "platforms.%s: unknown platform (amd, nvd)", tostring(p))
    end
    if type(pd) ~= 'table' then
      fail(name, '%s: table expected', where:sub(1, -2))
    end
    check_fields(name, pd, PLATFORM_FIELDS, where)
    if type(pd.framework) ~= 'string' then
      fail(name, '%sframework: required (megatron, primus, nemo, torchtitan)', where)
    end
    local ok_fw, fw_err = require('tp.frameworks').get(pd.framework)
    if not ok_fw then
      fail(name, '%sframework: %s', where, fw_err:gsub('^frameworks: ', ''))
    end
    local hw = pd.hardware or M.DEFAULT_HARDWARE[p]
    local row, hw_err = require('tp.plan.hardware').get(hw)
    if not row then
      fail(name, '%shardware: %s', where, hw_err:gsub('^hardware: ', ''))
    end
    local over = unified_part(pd)
    over.model = nil
    for _, f in ipairs(config.check_types(over, { prefix = where:sub(1, -2) })) do
      fail(name, '%s', f.message)
    end
    for k, v in pairs(pd.env or {}) do
      if type(k) ~= 'string' or type(v) ~= 'string' then
        fail(name, '%senv: must map names to strings', where)
      end
    end
    platforms[p] = {
      framework = pd.framework,
      hardware = row,
      overrides = over,
      env = pd.env,
      sweep = as_sweep(name, pd.sweep, where),
      torchrun = pd.torchrun,
      container = pd.container,
      slurm = pd.slurm,
      timeout = pd.timeout,
      profile = as_profile(name, pd.profile, where),
    }
  end
  local overrides = {}
  for p, pd in pairs(platforms) do
    overrides[p] = pd.overrides
  end
  local errs = methodology.check_overrides(meth, common, overrides)
  if #errs > 0 then
    fail(name, '%s', table.concat(errs, '; '))
  end
  if def.launcher ~= nil then
    local okl = false
    for _, l in ipairs(M.LAUNCHERS) do
      okl = okl or l == def.launcher
    end
    if not okl then
      fail(name, "launcher: '%s' is not one of %s", def.launcher, table.concat(M.LAUNCHERS, ', '))
    end
  end
  local source = meta and meta.source
  return setmetatable({
    name = name,
    description = def.description,
    methodology = meth,
    common = common,
    platforms = platforms,
    repeats = def.repeats,
    sweep = as_sweep(name, def.sweep, ''),
    options = check_options(name, def.options),
    results = def.results,
    recorded = def.recorded,
    launcher = def.launcher,
    timeout = def.timeout,
    torchrun = def.torchrun,
    container = def.container,
    slurm = def.slurm,
    profile = as_profile(name, def.profile, ''),
    source = source,
  }, Experiment)
end

--- Returns true when `v` is an experiment object.
---@param v any
---@return boolean
function M.is_experiment(v)
  return getmetatable(v) == Experiment
end

-- ---------------------------------------------------------------------------------------------
-- Options and flags.

--- Returns the flag specification of this experiment for tp.cli.parse.
---@return table<string, string>
function Experiment:flag_spec()
  local spec = { help = 'boolean', json = 'boolean' }
  for k, o in pairs(M.STANDARD_OPTIONS) do
    spec[k] = o.type
  end
  for k, o in pairs(self.options) do
    spec[k] = o.type
  end
  return spec
end

local function flag_line(k, o)
  local flag = '--' .. k:gsub('_', '-')
  if o.type ~= 'boolean' then
    flag = flag .. ' ' .. (o.type == 'string' and 'S' or 'N')
  end
  local default = ''
  if o.default ~= nil then
    default = string.format(' (default %s)', tostring(o.default))
  end
  return string.format('  %-20s %s%s\n', flag, o.desc, default)
end

--- The usage text of the recipe: what it is, the flags with their defaults.
---@param program? string how the recipe is invoked (default 'tplua <recipe>')
---@return string
function Experiment:usage(program)
  program = program or ('tplua ' .. (self.source or 'RECIPE.lua'))
  local out = { string.format('usage: %s [flags]\n\n%s', program, self.name) }
  if self.description then
    out[#out + 1] = ': ' .. self.description
  end
  out[#out + 1] = string.format('\nmethodology: %s\n\n', self.methodology.name or '(custom)')
  out[#out + 1] = 'Plans the runs of every platform, runs those of this machine\'s platform, then '
    .. 'compares\nwith the results in the results directory. `tplua plan` only plans, `tplua run` '
    .. 'only runs.\n'
  local own = config.sorted_keys(self.options)
  if #own > 0 then
    out[#out + 1] = '\nrecipe options:\n'
    for _, k in ipairs(own) do
      out[#out + 1] = flag_line(k, self.options[k])
    end
  end
  out[#out + 1] = '\nstandard options:\n'
  local defaults = {
    iters = config.get(self.common, 'training.iters'),
    repeats = self.repeats or 1,
    results = self.results or ('output/' .. slug(self.name)),
    launcher = self.launcher or 'torchrun',
    profile = self.profile and require('tp.plan.profile').format(self.profile) or nil,
  }
  for _, k in ipairs(STANDARD_ORDER) do
    local o = M.STANDARD_OPTIONS[k]
    out[#out + 1] = flag_line(k, { type = o.type, desc = o.desc, default = defaults[k] })
  end
  out[#out + 1] = flag_line('help', { type = 'boolean', desc = 'show this help' })
  return table.concat(out)
end

--- Parses command-line flags into option values. Returns opts or nil, message.
---@param args string[]
---@return table|nil opts
---@return string? err
function Experiment:parse_args(args)
  local cli = require('tp.cli')
  local opts, rest = cli.parse(args, self:flag_spec())
  if not opts then
    return nil, rest
  end
  if #rest > 0 then
    return nil, string.format("unexpected argument '%s'", rest[1])
  end
  if opts.profile ~= nil then
    local p, perr = require('tp.plan.profile').parse(opts.profile)
    if p == nil then
      return nil, string.format("option '--profile': %s", perr)
    end
  end
  return opts
end

-- ---------------------------------------------------------------------------------------------
-- Planning.

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
  if launcher == 'slurm' then
    local sopts = config.merge({ nodes = nodes, gpus_per_node = gpn, dir = dir,
      vendor = VENDOR[p] }, config.merge(self.slurm or {}, pd.slurm or {}))
    local ok, c = pcall(launch.get('slurm').wrap, cmd, sopts)
    if not ok then
      return bad('%s: slurm: %s', p, tostring(c):gsub('^.-launch%.slurm: ', ''))
    end
    return c
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
    local ok, c = pcall(launch.get('ranks').wrap, cmd, { nproc_per_node = gpn })
    if not ok then
      return bad('%s: ranks: %s', p, tostring(c):gsub('^.-launch%.ranks: ', ''))
    end
    return c
  end
  local topts = config.merge({ nproc_per_node = gpn, nnodes = nodes },
    config.merge(self.torchrun or {}, pd.torchrun or {}))
  local ok, wrapped = pcall(launch.get('torchrun').wrap, cmd, topts)
  if not ok then
    return bad('%s: torchrun: %s', p, tostring(wrapped):gsub('^.-launch%.torchrun: ', ''))
  end
  if launcher == 'container' then
    local copts = config.merge(self.container or {}, pd.container or {})
    if type(copts.image) ~= 'string' then
      return bad('platforms.%s.container.image: required with --launcher container (the image '
        .. 'that holds %s)', p, pd.framework)
    end
    copts.vendor = copts.vendor or VENDOR[p]
    -- The run directory holds the configs the framework reads (Primus, NeMo) and its output.
    local mounts = {}
    for i, m in ipairs(copts.mounts or {}) do
      mounts[i] = m
    end
    mounts[#mounts + 1] = dir .. ':' .. dir
    copts.mounts = mounts
    local okc, c = pcall(launch.get('container').wrap, wrapped, copts)
    if not okc then
      return bad('%s: container: %s', p, tostring(c):gsub('^.-launch%.container: ', ''))
    end
    wrapped = c
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
    if not (M.STANDARD_OPTIONS[k] or self.options[k] or k == 'help' or k == 'json') then
      error(string.format("Experiment:plan: unknown option '%s'", tostring(k)), 2)
    end
  end
  local plan = {
    experiment = self.name,
    description = self.description,
    methodology = self.methodology,
    results = opts.results or self.results or ('output/' .. slug(self.name)),
    launcher = opts.launcher or self.launcher or 'torchrun',
    platforms = {},
    order = {},
    findings = {},
    runs = {},
    source = self.source,
  }
  plan.results_abs = M.absolute(plan.results)
  local findings = plan.findings
  local function add(severity, key, platform, msg)
    findings[#findings + 1] = { severity = severity, key = key, platform = platform,
                                message = msg }
  end
  local okl = false
  for _, l in ipairs(M.LAUNCHERS) do
    okl = okl or l == plan.launcher
  end
  if not okl then
    add('error', 'launcher', nil, string.format("--launcher: '%s' is not one of %s",
      plan.launcher, table.concat(M.LAUNCHERS, ', ')))
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

-- ---------------------------------------------------------------------------------------------
-- Running.

--- Finds this machine's platform with tp.gpu.probe: 'nvd' (NVIDIA), 'amd', or nil and a reason.
---@return string|nil platform
---@return string reason what the probe found
---@return table|nil probe
function M.local_platform()
  local ok, gpu = pcall(require, 'tp.gpu')
  if not ok then
    return nil, 'tp.gpu cannot be loaded: ' .. tostring(gpu)
  end
  local probe, err = gpu.probe({ timeout = 60 })
  if not probe then
    return nil, 'GPU probe failed: ' .. tostring(err)
  end
  local d = probe.devices[1]
  if not d then
    return nil, 'the NVIDIA and AMD libraries report no device', probe
  end
  local p = d.vendor == 'nvidia' and 'nvd' or (d.vendor == 'amd' and 'amd' or nil)
  local names = {}
  for _, dev in ipairs(probe.devices) do
    names[dev.name or '?'] = (names[dev.name or '?'] or 0) + 1
  end
  local parts = {}
  for _, n in ipairs(config.sorted_keys(names)) do
    parts[#parts + 1] = string.format('%d x %s', names[n], n)
  end
  return p, table.concat(parts, ', '), probe
end

--- The platform whose runs a Slurm plan submits: --only's, else the plan's only platform; the
--- machine tplua runs on (a login node) need not have its GPUs.
---@param plan table
---@param opts table the parsed flags
---@return string|nil platform
---@return string reason
function M.slurm_platform(plan, opts)
  if opts.only then
    return opts.only, 'submitted through Slurm (--only)'
  end
  if #plan.order == 1 then
    return plan.order[1], 'submitted through Slurm'
  end
  return nil, string.format('--launcher slurm: the plan has %d platforms (%s); choose the one '
    .. "this cluster has with --only", #plan.order, table.concat(plan.order, ', '))
end

--- The runs of a plan in the shape tp.campaign takes (docs/recipes.md, "Running").
---@param plan table
---@param platform? string only this platform's runs
---@param extra? table {preflight?} what every run's record carries besides (the preflight's
---  summary, tp.preflight.summary)
---@return table[]
function M.campaign_runs(plan, platform, extra)
  local out = {}
  for _, r in ipairs(plan.runs) do
    if platform == nil or r.platform == platform then
      local dataset = r.config.training and r.config.training.dataset
      out[#out + 1] = {
        id = r.id, argv = r.argv, env = r.env, cwd = r.cwd, parser = r.parser,
        timeout = r.timeout, gbs = r.gbs, seq_len = r.seq_len, gpus = r.gpus,
        platform = r.platform, framework = r.framework, model = r.model,
        methodology = r.methodology, ['repeat'] = r['repeat'], config = r.config,
        files = r.files, files_dir = r.output, hardware = r.hardware,
        launcher = r.launcher == 'slurm' and 'slurm' or nil,
        experiment = plan.experiment,
        dataset = type(dataset) == 'string' and dataset or nil,
        profile = r.profile,
        preflight = extra and extra.preflight,
      }
    end
  end
  return out
end

--- Runs the plan's runs of `platform` through tp.campaign. Returns the campaign's result, or
--- nil, message, code: 'ENOSYS' when tp.campaign is not available in this installation.
---@param plan table
---@param platform string
---@param opts? table passed to campaign:execute
---@param extra? table passed to M.campaign_runs
---@return any|nil result
---@return string? err
---@return string? code
function M.execute(plan, platform, opts, extra)
  local ok, campaign = pcall(require, 'tp.campaign')
  if not ok then
    if tostring(campaign):find("module 'tp.campaign' not found", 1, true) then
      return nil, 'tp.campaign is not available: runs cannot be started by this installation',
        'ENOSYS'
    end
    error(campaign, 0)
  end
  local spec = { results = plan.results_abs, runs = M.campaign_runs(plan, platform, extra) }
  local c
  local mt = getmetatable(campaign)
  if type(campaign) == 'function' or (mt and mt.__call) then
    c = campaign(spec)
  elseif type(campaign) == 'table' and type(campaign.new) == 'function' then
    c = campaign.new(spec)
  else
    return nil, 'tp.campaign: neither callable nor has new()', 'ENOSYS'
  end
  return c:execute(opts or {})
end

-- ---------------------------------------------------------------------------------------------
-- Analysis of the results directory.

local function walk(dir, depth, out)
  local fs = require('tp.fs')
  local entries = fs.list(dir)
  if not entries or depth > 8 then
    return out
  end
  for _, e in ipairs(entries) do
    local path = dir .. '/' .. e.name
    if e.type == 'directory' then
      if e.name ~= '.' and e.name ~= '..' then
        walk(path, depth + 1, out)
      end
    elseif e.type == 'file' or e.type == 'link' then
      out[#out + 1] = path
    end
  end
  return out
end

-- The platform of a record: its own field, else an ancestor directory or the file name, else
-- the GPU name it recorded.
local function infer_platform(rec, path)
  if type(rec.platform) == 'string' then
    return rec.platform
  end
  for part in path:gmatch('[^/]+') do
    if part == 'amd' or part == 'nvd' then
      return part
    end
  end
  local base = path:match('([^/]+)$') or path
  local prefix = base:match('^(%a+)[-_]')
  if prefix == 'amd' or prefix == 'nvd' then
    return prefix
  end
  local gi = type(rec.gpu_info) == 'table' and rec.gpu_info.device_name
  if type(gi) == 'string' then
    if gi:find('MI%d') or gi:find('AMD') then
      return 'amd'
    elseif gi:find('NVIDIA') or gi:find('H100') or gi:find('H200') then
      return 'nvd'
    end
  end
  return 'unknown'
end

local function is_record(t)
  return type(t) == 'table' and (require('tp.parse.record').readable(t.schema)
    or (t.performance_metrics ~= nil and (t.step_times ~= nil or t.training_config ~= nil)))
end

local function stem(path)
  local base = path:match('([^/]+)$') or path
  return base:match('^(.+)%.[^.]+$') or base
end

--- Loads the run records under a results directory: JSON run records (schema tplua.run/2 or /1, or
--- tprimat-era result files) and training logs that have no record yet, parsed with tp.log.
--- Returns `{records = {...}, notes = {...}}`; every record gets `_path` and `_platform`.
--- Files that are neither are skipped with a note; a damaged file never stops the analysis.
---@param dir string
---@return table result
function M.load_results(dir)
  local fs = require('tp.fs')
  local res = { records = {}, notes = {} }
  if not fs.is_dir(dir) then
    res.notes[#res.notes + 1] = string.format('%s: not a directory', dir)
    return res
  end
  local files = walk(dir, 0, {})
  table.sort(files)
  local json = require('tp.json')
  local covered = {}
  local logs = {}
  for _, path in ipairs(files) do
    if path:match('%.json$') and not require('tp.plan.profile').is_trace_name(path) then
      local t, err = json.load_file(path)
      if t == nil then
        res.notes[#res.notes + 1] = string.format('%s: skipped: %s', path, tostring(err))
      elseif is_record(t) then
        t._path = path
        t._platform = infer_platform(t, path)
        res.records[#res.records + 1] = t
        covered[stem(path)] = true
        local src = type(t.source) == 'table' and t.source.path
        if type(src) == 'string' then
          covered[stem(src)] = true
        end
      end
    elseif path:match('%.log$') then
      logs[#logs + 1] = path
    end
  end
  local pending = {}
  for _, path in ipairs(logs) do
    if not covered[stem(path)] then
      pending[#pending + 1] = path
    end
  end
  if #pending > 0 then
    local ok_log, log_mod = pcall(require, 'tp.log')
    if not ok_log then
      res.notes[#res.notes + 1] = string.format('%d log(s) without a run record not analysed: '
        .. 'tp.log is not available', #pending)
    else
      local record = require('tp.parse.record')
      for _, path in ipairs(pending) do
        local log, err = log_mod.parse(path)
        if not log then
          res.notes[#res.notes + 1] = string.format('%s: skipped: %s', path, tostring(err))
        else
          local platform = infer_platform({}, path)
          local rec = record.from_log(log, { path = path,
                                             platform = platform ~= 'unknown' and platform
                                               or nil })
          if #rec.records > 0 then
            rec._path = path
            rec._staged = true
            rec._platform = platform
            res.records[#res.records + 1] = rec
          else
            res.notes[#res.notes + 1] = string.format('%s: no iteration record', path)
          end
        end
      end
    end
  end
  return res
end

local function num(v)
  if type(v) == 'number' and v == v then
    return v
  end
  return nil
end

local function mean_sd(xs)
  local stats = require('tp.stats')
  if #xs == 0 then
    return nil
  end
  local m = stats.mean(xs)
  local sd = #xs > 1 and stats.stddev(xs) or nil
  return m, sd
end

-- Mean of the last k finite values of an array.
local function tail_mean(xs, k)
  local vals = {}
  for i = #xs, 1, -1 do
    if num(xs[i]) then
      vals[#vals + 1] = xs[i]
      if #vals == k then
        break
      end
    end
  end
  if #vals == 0 then
    return nil
  end
  local s = 0
  for _, v in ipairs(vals) do
    s = s + v
  end
  return s / #vals
end

-- A record's MFU and GPU energy per token (with its basis), computed as tp.compare does
-- (tp.efficiency): `hardware` is the catalog id given for its platform, if any.
local function record_efficiency(rec, model, hardware, platform)
  local efficiency = require('tp.analyse.efficiency')
  local run = efficiency.run_fields(rec, { model = model, platform = platform })
  local o = { hardware = hardware, group = platform }
  local joules, basis = efficiency.energy(run, o)
  return (efficiency.mfu(run, o)), joules, joules and basis
end

--- Summarises run records by platform: runs, framework, tokens/s/GPU (mean, stddev), step time,
--- MFU, GPU energy per token (measured, else the TDP estimate; tp.efficiency), final loss; with
--- two platforms, the ratio of tokens/s/GPU with a seeded bootstrap CI and Welch's test, and the
--- RMS difference of the mean loss curves.
---@param records table[] run records with `_platform`
---@param opts? {model?: string, hardware?: table<string, string>} model id and platform ->
---  catalog id, for MFU when a record lacks it
---@return table summary {platforms = {...}, order = {...}, ratio = ..., loss = ...}
function M.summarize(records, opts)
  opts = opts or {}
  local stats = require('tp.stats')
  local groups, order = {}, {}
  for _, rec in ipairs(records) do
    local p = rec._platform or 'unknown'
    if not groups[p] then
      groups[p] = { platform = p, records = {}, tps = {}, step = {}, mfu = {}, loss = {},
                    frameworks = {}, energy = {}, energy_bases = {} }
      order[#order + 1] = p
    end
    local g = groups[p]
    g.records[#g.records + 1] = rec
    local pm = rec.performance_metrics or {}
    local fw = type(rec.framework) == 'string' and rec.framework or nil
    if fw then
      g.frameworks[fw] = true
    end
    if num(pm.tokens_per_second_per_gpu) then
      g.tps[#g.tps + 1] = pm.tokens_per_second_per_gpu
    end
    if num(pm.avg_step_time_seconds) then
      g.step[#g.step + 1] = pm.avg_step_time_seconds
    end
    local model = type(rec.model) == 'string' and rec.model or opts.model
    local mfu, joules, basis = record_efficiency(rec, model,
      opts.hardware and opts.hardware[p], p)
    if mfu then
      g.mfu[#g.mfu + 1] = mfu
    end
    if joules then
      g.energy[#g.energy + 1] = joules
      g.energy_bases[basis] = true
    end
    local final = tail_mean(rec.loss_values or {}, 10)
    if final then
      g.loss[#g.loss + 1] = final
    end
  end
  table.sort(order)
  local summary = { platforms = groups, order = order }
  for _, p in ipairs(order) do
    local g = groups[p]
    g.tps_mean, g.tps_sd = mean_sd(g.tps)
    g.step_mean = mean_sd(g.step)
    g.mfu_mean = mean_sd(g.mfu)
    g.energy_mean = mean_sd(g.energy)
    g.energy_basis = table.concat(config.sorted_keys(g.energy_bases), '; ')
    g.loss_mean = mean_sd(g.loss)
    g.framework = table.concat(config.sorted_keys(g.frameworks), '+')
  end
  -- Two platforms: the ratio first / second (amd / nvd in name order).
  if #order == 2 then
    local a, b = groups[order[1]], groups[order[2]]
    if #a.tps > 0 and #b.tps > 0 then
      local ratio = { numerator = order[1], denominator = order[2],
                      estimate = a.tps_mean / b.tps_mean }
      if #a.tps >= 2 and #b.tps >= 2 then
        local ci = stats.bootstrap_ratio_ci(a.tps, b.tps, { seed = 1, resamples = 10000 })
        if ci then
          ratio.lo, ratio.hi = ci.lo, ci.hi
        end
        local w = stats.welch(a.tps, b.tps)
        if w then
          ratio.p = w.p
        end
      end
      summary.ratio = ratio
    end
    -- Loss curves: the mean curve of each platform over the iterations they all have.
    local function mean_curve(g)
      local sum, count = {}, {}
      for _, rec in ipairs(g.records) do
        local its = rec.iterations or {}
        local ls = rec.loss_values or {}
        if #its == #ls then
          for i, it in ipairs(its) do
            if num(ls[i]) then
              sum[it] = (sum[it] or 0) + ls[i]
              count[it] = (count[it] or 0) + 1
            end
          end
        end
      end
      local xs = {}
      for it, n in pairs(count) do
        if n == #g.records then
          xs[#xs + 1] = it
        end
      end
      table.sort(xs)
      local ys = {}
      for i, it in ipairs(xs) do
        ys[i] = sum[it] / count[it]
      end
      return { x = xs, y = ys }
    end
    local ca, cb = mean_curve(a), mean_curve(b)
    if #ca.x > 0 and #cb.x > 0 then
      local rms, common = stats.curve_distance(ca, cb)
      if rms then
        summary.loss = { rms = rms, common = common, numerator = order[1],
                         denominator = order[2] }
        -- The same over the last tenth of the common iterations.
        local lastx = {}
        local set = {}
        for _, x in ipairs(cb.x) do
          set[x] = true
        end
        for _, x in ipairs(ca.x) do
          if set[x] then
            lastx[#lastx + 1] = x
          end
        end
        local from = lastx[math.max(1, #lastx - #lastx // 10 + 1)]
        local function cut(c)
          local out = { x = {}, y = {} }
          for i, x in ipairs(c.x) do
            if x >= from then
              out.x[#out.x + 1] = x
              out.y[#out.y + 1] = c.y[i]
            end
          end
          return out
        end
        local rms_tail, n_tail = stats.curve_distance(cut(ca), cut(cb))
        if rms_tail then
          summary.loss.tail_rms, summary.loss.tail_common = rms_tail, n_tail
          summary.loss.tail_from = from
        end
      end
    end
  end
  return summary
end

local function fmt(v, spec)
  if v == nil then
    return '-'
  end
  return string.format(spec, v)
end

--- Prints a summary (M.summarize) as a table.
---@param summary table
---@param out? file* default io.stdout
function M.print_summary(summary, out)
  out = out or io.stdout
  if #summary.order > 0 then
    out:write(string.format('%-9s %-10s %5s  %-22s %-14s %-7s %-9s %s\n', 'platform',
      'framework', 'runs', 'tokens/s/GPU', 'step time (s)', 'MFU', 'J/token', 'final loss'))
  end
  for _, p in ipairs(summary.order) do
    local g = summary.platforms[p]
    local tps = '-'
    if g.tps_mean then
      tps = string.format('%.1f', g.tps_mean)
      if g.tps_sd then
        tps = tps .. string.format(' ± %.1f', g.tps_sd)
      end
    end
    out:write(string.format('%-9s %-10s %5d  %-22s %-14s %-7s %-9s %s\n', p,
      g.framework ~= '' and g.framework or '-', #g.records, tps, fmt(g.step_mean, '%.4f'),
      g.mfu_mean and string.format('%.1f%%', g.mfu_mean * 100) or '-',
      fmt(g.energy_mean, '%.4g'), fmt(g.loss_mean, '%.3f')))
  end
  local r = summary.ratio
  if r then
    local extra = {}
    if r.lo then
      extra[#extra + 1] = string.format('95%% bootstrap CI %.3f..%.3f', r.lo, r.hi)
    end
    if r.p then
      extra[#extra + 1] = string.format('Welch p = %.2g', r.p)
    end
    out:write(string.format('\n%s / %s tokens/s/GPU: %.3f%s\n', r.numerator, r.denominator,
      r.estimate, #extra > 0 and (' (' .. table.concat(extra, '; ') .. ')') or ''))
  end
  local l = summary.loss
  if l then
    out:write(string.format('loss curves %s vs %s: RMS difference %.4f over %d iterations',
      l.numerator, l.denominator, l.rms, l.common))
    if l.tail_rms then
      out:write(string.format(' (from iteration %d: %.4f)', l.tail_from, l.tail_rms))
    end
    out:write('\n')
  end
end

--- Where this experiment's results are read from: the results directory when it holds run
--- records, else the recorded runs the recipe ships (`recorded`, relative to the recipe file).
---@param plan table
---@return string dir
---@return boolean recorded true when the recorded runs are used
function Experiment:results_source(plan)
  local fs = require('tp.fs')
  if fs.is_dir(plan.results_abs) then
    local found = M.load_results(plan.results_abs)
    if #found.records > 0 then
      return plan.results, false, found
    end
  end
  if self.recorded then
    local dir = self.recorded
    if dir:sub(1, 1) ~= '/' and self.source then
      dir = normalize_path(dirname(self.source) .. '/' .. dir)
    end
    return dir, true
  end
  return plan.results, false
end

-- Writes records built on the fly (logs without a record) to a temporary directory so that
-- tp.results can load them beside the others; returns the directory or nil.
local function stage_records(records)
  local any = false
  for _, rec in ipairs(records) do
    any = any or rec._staged == true
  end
  if not any then
    return nil
  end
  local fs = require('tp.fs')
  local base = os.tmpname()
  os.remove(base)
  local dir = base .. '.tplua-records'
  if not fs.mkdir_p(dir) then
    return nil
  end
  local record = require('tp.parse.record')
  for i, rec in ipairs(records) do
    if rec._staged then
      local copy = {}
      for k, v in pairs(rec) do
        if type(k) ~= 'string' or k:sub(1, 1) ~= '_' then
          copy[k] = v
        end
      end
      copy.platform = rec._platform ~= 'unknown' and rec._platform or copy.platform
      record.save(copy, string.format('%s/%d-%s.json', dir, i, stem(rec._path)))
    end
  end
  return dir
end

local function remove_tree(dir)
  local fs = require('tp.fs')
  for _, e in ipairs(fs.list(dir) or {}) do
    os.remove(dir .. '/' .. e.name)
  end
  os.remove(dir)
end

-- The fairness audit of the compared runs (tp.audit.compare), in a few lines; '' without
-- tp.audit.
local function audit_text(set, methodology_name)
  local ok, audit = pcall(require, 'tp.audit')
  if not ok or type(audit.compare) ~= 'function' then
    return ''
  end
  local oka, r = pcall(audit.compare, set, { methodology = methodology_name })
  if not oka or type(r) ~= 'table' then
    return string.format('\nfairness audit: not run (%s)\n', tostring(r))
  end
  local counts = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(r.findings or {}) do
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end
  local lines = { string.format('\nfairness audit (%s): %s (%d error%s, %d warning%s)',
    r.methodology or methodology_name, r.valid and 'the comparison is fair'
    or 'the comparison is NOT fair', counts.error, counts.error == 1 and '' or 's',
    counts.warning, counts.warning == 1 and '' or 's') }
  local shown = 0
  for _, f in ipairs(r.findings or {}) do
    if f.severity ~= 'info' and shown < 8 then
      lines[#lines + 1] = string.format('  %s: %s', f.severity, f.message)
      shown = shown + 1
    end
  end
  return table.concat(lines, '\n') .. '\n', r.valid == true
end

-- Compares with tp.compare (rendered by tp.report when installed, else tp.compare.format).
-- Returns the rendered text, or nil and why it could not.
local function compare_text(dirs, found, self, keep)
  local ok_c, compare = pcall(require, 'tp.compare')
  local ok_r, results = pcall(require, 'tp.results')
  if not (ok_c and ok_r) then
    return nil, 'tp.compare or tp.results is not available'
  end
  local set, err = results.load(dirs)
  if not set then
    return nil, err
  end
  local by_path, staged_path = {}, {}
  for i, rec in ipairs(found.records) do
    by_path[rec._path] = rec._platform
    if rec._staged then
      staged_path[i] = rec._path
    end
  end
  local kept = {}
  for _, run in ipairs(set.runs) do
    local path = run:file()
    -- Records staged from logs are named '<n>-<log stem>.json': map them back to the log.
    local n = tostring(path):match('/(%d+)%-[^/]*%.json$')
    if n and staged_path[tonumber(n)] and tostring(path):find('.tplua-records/', 1, true) then
      path = staged_path[tonumber(n)]
    end
    if run.platform == nil then
      rawset(run, 'platform', by_path[path] or infer_platform({}, tostring(path)))
    end
    if keep == nil or keep[path] then
      kept[#kept + 1] = run
    end
  end
  if keep then
    set = results.from_runs(kept)
  end
  local hardware, baseline = {}, nil
  for p, pd in pairs(self.platforms) do
    hardware[p] = pd.hardware.id
  end
  local present = {}
  for _, run in ipairs(set.runs) do
    present[run.platform] = true
  end
  if present.nvd then
    baseline = 'nvd'
  end
  local ok, result, cerr = pcall(compare.compare, set, { by = 'platform', baseline = baseline,
    hardware = hardware, methodology = self.methodology.name })
  if not ok then
    return nil, tostring(result)
  end
  if not result then
    return nil, cerr
  end
  local text
  local ok_rep, report = pcall(require, 'tp.report')
  if ok_rep and type(report) == 'table' and type(report.terminal) == 'function' then
    local okt, t = pcall(report.terminal, result)
    if okt and type(t) == 'string' then
      text = t
    end
  end
  if not text and type(compare.format) == 'function' then
    text = compare.format(result)
  end
  if not text then
    return nil, 'tp.compare has no formatter'
  end
  local atext, valid = audit_text(set, self.methodology.name)
  return text .. atext, nil, valid
end

-- The configuration a record ran: its run id without the repeat suffix, else the file stem.
local function config_key(rec)
  local id = type(rec.run_id) == 'string' and rec.run_id or stem(rec._path or '')
  return (id:gsub('%-r%d+$', ''))
end

--- Picks each platform's best configuration: records are grouped by configuration (run id
--- without its repeat suffix), and the group with the highest mean tokens/s/GPU wins. Returns
--- `{ [platform] = {key =, records =, tps_mean =, configs = n} }`.
---@param records table[] records with `_platform`
---@return table best
function M.best_per_platform(records)
  local groups = {}
  for _, rec in ipairs(records) do
    local p = rec._platform or 'unknown'
    local key = config_key(rec)
    groups[p] = groups[p] or {}
    local g = groups[p][key]
    if not g then
      g = { key = key, records = {}, tps = {} }
      groups[p][key] = g
    end
    g.records[#g.records + 1] = rec
    local v = num((rec.performance_metrics or {}).tokens_per_second_per_gpu)
    if v then
      g.tps[#g.tps + 1] = v
    end
  end
  local best = {}
  for p, by_key in pairs(groups) do
    local n = 0
    for _, key in ipairs(config.sorted_keys(by_key)) do
      local g = by_key[key]
      n = n + 1
      g.tps_mean = #g.tps > 0 and mean_sd(g.tps) or nil
      local b = best[p]
      if b == nil or (g.tps_mean or -1) > (b.tps_mean or -1) then
        best[p] = g
      end
    end
    best[p].configs = n
  end
  return best
end

-- The settings of a configuration for a person: the sweep point of the planned run with that
-- id, else what the record says about its layout and batch.
local function settings_of(plan, g)
  for _, r in ipairs(plan.runs) do
    if r.id:gsub('%-r%d+$', '') == g.key and r.point then
      return sweep.describe_point(r.point)
    end
  end
  local tc = g.records[1].training_config or {}
  local parts = {}
  for _, k in ipairs({ { 'tp', 'tensor_parallel_size' }, { 'pp', 'pipeline_parallel_size' },
    { 'dp', 'data_parallel_size' }, { 'mbs', 'micro_batch_size' } }) do
    if num(tc[k[2]]) then
      parts[#parts + 1] = string.format('%s=%s', k[1], tostring(math.tointeger(tc[k[2]])
        or tc[k[2]]))
    end
  end
  local rg = (g.records[1].args or {}).recompute_granularity
  if type(rg) == 'string' and rg ~= 'None' then
    parts[#parts + 1] = 'recompute=' .. rg
  end
  return #parts > 0 and table.concat(parts, ' ') or g.key
end

--- Analyses the results: loads the run records (and builds records for logs that have none),
--- compares the platforms with tp.compare (rendered by tp.report when installed), else prints the
--- built-in summary, and reports how closely the loss curves agree. Returns the built-in summary
--- (or nil when there is nothing to compare), and whether the fairness audit passed (nil when
--- it did not run).
---@param plan table
---@param out? file*
---@return table|nil summary
---@return boolean|nil valid
function Experiment:analyse(plan, out)
  out = out or io.stdout
  local dir, recorded, found = self:results_source(plan)
  found = found or M.load_results(dir)
  out:write(string.format('\nanalysis: %s%s\n', dir, recorded
    and ' (the recorded runs shipped with the recipe: illustrations derived from published '
    .. 'figures, not measurements; see its README.md)' or ''))
  for _, n in ipairs(found.notes) do
    out:write('  note: ' .. n .. '\n')
  end
  if #found.records == 0 then
    out:write('  no run records yet: nothing to compare\n')
    return nil
  end
  local counts = {}
  for _, rec in ipairs(found.records) do
    counts[rec._platform] = (counts[rec._platform] or 0) + 1
  end
  local parts = {}
  for _, p in ipairs(config.sorted_keys(counts)) do
    parts[#parts + 1] = string.format('%d %s', counts[p], p)
  end
  out:write(string.format('  %d run records (%s)\n\n', #found.records, table.concat(parts,
    ', ')))
  local hardware = {}
  local sweeping = self.sweep ~= nil
  for p, pd in pairs(self.platforms) do
    hardware[p] = pd.hardware.id
    sweeping = sweeping or pd.sweep ~= nil
  end
  local records = found.records
  local keep
  if sweeping then
    -- Each platform's best configuration, reported with its settings; only those are compared.
    local best = M.best_per_platform(records)
    out:write('best configuration per platform (highest mean tokens/s/GPU of its sweep):\n')
    records, keep = {}, {}
    for _, p in ipairs(config.sorted_keys(best)) do
      local g = best[p]
      out:write(string.format('  %-4s %s  %s tokens/s/GPU over %d run(s); best of %d '
        .. 'configuration(s)\n', p, settings_of(plan, g), g.tps_mean and string.format('%.1f',
        g.tps_mean) or '-', #g.records, g.configs))
      for _, rec in ipairs(g.records) do
        records[#records + 1] = rec
        keep[rec._path] = true
      end
    end
    out:write('\n')
  end
  local model = type(self.common.model) == 'table' and self.common.model.id or self.common.model
  local summary = M.summarize(records, { model = model, hardware = hardware })
  local staged = stage_records(found.records)
  local text, why, valid = compare_text(staged and { dir, staged } or { dir }, found, self, keep)
  if staged then
    remove_tree(staged)
  end
  if text then
    out:write(text)
    if text:sub(-1) ~= '\n' then
      out:write('\n')
    end
    local l = summary.loss
    if l then
      out:write('\n')
      M.print_summary({ order = {}, platforms = {}, loss = l }, out)
    end
  else
    out:write(string.format('  note: %s; built-in summary follows\n\n', why))
    M.print_summary(summary, out)
  end
  return summary, valid
end

-- ---------------------------------------------------------------------------------------------
-- The command line.

--- Runs the experiment as a command: `mode` 'all' (plan, run this machine's platform, analyse),
--- 'plan' or 'run'. Returns the exit status (0 ok, 1 failure, 2 usage error).
---@param args string[] command-line flags
---@param mode? 'all'|'plan'|'run'
---@param program? string name for usage messages
---@return integer status
function Experiment:cli(args, mode, program)
  mode = mode or 'all'
  local cli = require('tp.cli')
  local label = program or (self.source or 'recipe')
  local opts, err = self:parse_args(args or {})
  if not opts then
    io.stderr:write(string.format('%s: %s\n', label, err))
    io.stderr:write(string.format("'%s --help' lists the flags\n", program and program
      or ('tplua ' .. label)))
    return 2
  end
  if opts.help then
    io.stdout:write(self:usage(program))
    return 0
  end
  if opts.json and mode ~= 'plan' then
    return cli.usage_error(label, "'--json' is only for 'tplua plan'", nil)
  end
  local plan = self:plan(opts)
  local printer = require('tp.plan')
  if opts.json then
    io.stdout:write(printer.json(plan), '\n')
    return plan.ok and 0 or 1
  end
  printer.print(plan, io.stdout, { brief = mode == 'run' })
  if mode == 'plan' then
    return plan.ok and 0 or 1
  end
  if not plan.ok then
    io.stdout:write('\nthe plan has errors: nothing runs\n')
    return 1
  end
  local status = 0
  io.stdout:write('\n')
  if opts.dry_run then
    io.stdout:write('run: --dry-run: nothing started\n')
  else
    local platform, reason, probe
    if plan.launcher == 'slurm' then
      -- The jobs run on the cluster's nodes, not here: the platform is the recipe's.
      platform, reason = M.slurm_platform(plan, opts)
    else
      platform, reason, probe = M.local_platform()
    end
    if not platform and plan.launcher == 'slurm' then
      io.stdout:write(string.format('run: %s\n', reason))
      status = 1
    elseif not platform then
      io.stdout:write(string.format('run: no GPU on this machine (%s): nothing runs here\n',
        reason))
      if mode == 'run' then
        status = 1
      end
    elseif not plan.platforms[platform] then
      io.stdout:write(string.format("run: this machine is '%s' (%s), which this plan does not "
        .. 'include: nothing runs here\n', platform, reason))
      if mode == 'run' then
        status = 1
      end
    else
      local line = plan.launcher == 'slurm' and 'run: platform %s (%s): %d run(s)\n'
        or 'run: this machine is %s (%s): %d run(s)\n'
      io.stdout:write(string.format(line, platform, reason, #plan.platforms[platform].runs))
      local preflight = require('tp.run.preflight')
      local report
      if opts.skip_preflight then
        io.stdout:write('run: --skip-preflight: the checks before launch are skipped (each '
          .. 'record says so)\n')
      else
        report = preflight.check(plan, { platform = platform, probe = probe })
        preflight.print(report, io.stdout)
      end
      local result, rerr
      if report and not report.ok then
        rerr = 'the preflight found errors: nothing started (--skip-preflight starts anyway)'
      else
        result, rerr = M.execute(plan, platform, { concurrency = opts.concurrency },
          { preflight = preflight.summary(report) })
      end
      if not result then
        io.stdout:write(string.format('run: %s\n', rerr))
        status = 1
      elseif type(result) == 'table' and math.type(result.exit_code) == 'integer' then
        status = result.exit_code
      end
    end
  end
  if mode == 'run' then
    return status
  end
  local _, valid = self:analyse(plan, io.stdout)
  if status == 0 and valid == false then
    -- As tplua compare: a comparison whose audit found errors is not a success.
    io.stdout:write('\nthe fairness audit found errors: exit status 3\n')
    status = 3
  end
  return status
end

-- ---------------------------------------------------------------------------------------------
-- Entry points.

local function same_file(a, b)
  if a == nil or b == nil then
    return false
  end
  if a == b then
    return true
  end
  local fs = require('tp.fs')
  local ra, rb = fs.realpath(a), fs.realpath(b)
  return ra ~= nil and ra == rb
end

local function script_args()
  local out = {}
  local a = rawget(_G, 'arg')
  if type(a) == 'table' then
    for i = 1, #a do
      out[i] = a[i]
    end
  end
  return out
end

-- Finds who called into this module: returns is_main (the caller is the main script, arg[0])
-- and the caller's file when known. A recipe usually ends with `return tp.experiment.main{...}`,
-- a tail call that removes its own frame: then the caller counts as the main script when
-- nothing but C frames (the host) lies below, and arg[0] names a .lua file.
local function caller()
  local a = rawget(_G, 'arg')
  local script = type(a) == 'table' and type(a[0]) == 'string' and a[0]:match('%.lua$')
    and a[0] or nil
  local this = debug.getinfo(1, 'S').source
  local level = 2
  local tail = false
  while true do
    local info = debug.getinfo(level, 'St')
    if not info then
      return tail and script ~= nil, tail and script or nil
    end
    if info.source == this then
      tail = info.istailcall
    elseif tail then
      -- Our outermost frame was tail-called, so the caller's frame is gone: it was the main
      -- chunk when nothing but C frames (the host) lies below.
      local l = level
      while true do
        local below = debug.getinfo(l, 'S')
        if not below then
          return script ~= nil, script
        end
        if below.what ~= 'C' then
          return false, nil
        end
        l = l + 1
      end
    elseif info.what == 'C' then
      return false, nil
    else
      local file = info.source:sub(1, 1) == '@' and info.source:sub(2) or nil
      return script ~= nil and same_file(file, script), file
    end
    level = level + 1
  end
end

-- The shared body of tp.experiment{...} and tp.experiment.main{...}.
local function main_at(def)
  local is_main, source = caller()
  local ok, exp = pcall(M.new, def, { source = source })
  if loading > 0 or not is_main then
    if not ok then
      error(exp, 0)
    end
    return exp
  end
  if not ok then
    io.stderr:write(string.format('%s: %s\n', source, tostring(exp)))
    io.stdout:flush()
    os.exit(1, true)
  end
  local code = exp:cli(script_args(), 'all', 'tplua ' .. source)
  io.stdout:flush()
  if code ~= 0 then
    os.exit(code, true)
  end
  return exp
end

--- Creates the experiment and, when the calling recipe is the main script (`tplua recipe.lua
--- [flags]`, i.e. the recipe file is `arg[0]`) and no tp.experiment.load is in progress, runs
--- it: plan, run this machine's platform, analyse; the process exits with the status when it is
--- not 0. Otherwise it only returns the experiment, so `tplua plan recipe.lua` and specs can
--- load the same file. `tp.experiment{...}` does the same.
---```lua
---local tp = require('tp')
---return tp.experiment.main {
---  name = 'llama3.1-8b, identical config', model = 'llama3.1-8b',
---  methodology = 'identical_config',
---  platforms = { amd = { framework = 'primus' }, nvd = { framework = 'megatron' } },
---  training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4 },
---  parallelism = { tp = 1, pp = 1, dp = 8 },
---  repeats = 3,
---}
---```
---@param def table
---@return table experiment
function M.main(def)
  local exp = main_at(def)  -- not a tail call: caller() needs this frame
  return exp
end

setmetatable(M, {
  __call = function(_, def)
    local exp = main_at(def)
    return exp
  end,
})

--- Loads a recipe file without running it: the file's chunk is executed with tp.experiment in
--- loading mode and must return an experiment (or an experiment definition table). Returns the
--- experiment, or nil, '<path>: <message>', code ('ENOENT', 'EPARSE', 'EINVAL').
---```lua
---local exp = assert(tp.experiment.load('recipes/llama_identical.lua'))
---local plan = exp:plan({ iters = 10 })
---```
---@param path string
---@return table|nil experiment
---@return string? err
---@return string? code
function M.load(path)
  if type(path) ~= 'string' then
    error('tp.experiment.load: path must be a string, got ' .. type(path), 2)
  end
  local fs = require('tp.fs')
  if not fs.exists(path) then
    return nil, string.format('%s: no such file', path), 'ENOENT'
  end
  if fs.is_dir(path) then
    return nil, string.format('%s: is a directory, a recipe file expected', path), 'EINVAL'
  end
  local chunk, err = loadfile(path)
  if not chunk then
    return nil, tostring(err), 'EPARSE'
  end
  loading = loading + 1
  local ok, result = pcall(chunk)
  loading = loading - 1
  if not ok then
    local msg = tostring(result)
    if not msg:find(path, 1, true) then
      msg = path .. ': ' .. msg
    end
    return nil, msg, 'EINVAL'
  end
  if require('tp.run.campaign').is_campaign(result) then
    return result  -- a campaign file: tplua run executes it as is
  end
  if M.is_experiment(result) then
    if result.source == nil then
      result.source = path
    end
    return result
  end
  if type(result) == 'table' and result.name then
    local okn, exp = pcall(M.new, result, { source = path })
    if not okn then
      return nil, path .. ': ' .. tostring(exp), 'EINVAL'
    end
    return exp
  end
  return nil, string.format('%s: the recipe must return tp.experiment{...} (it returned %s)',
    path, type(result)), 'EINVAL'
end

return M
