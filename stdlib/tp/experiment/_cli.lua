-- tp.experiment._cli: an experiment as a command: its flags (the standard ones and the recipe's
-- options), usage text, and Experiment:cli, which plans, runs and analyses in turn.
local config = require('tp.plan.config')
local define = require('tp.experiment._define')
local paths = require('tp.experiment._paths')
local run = require('tp.experiment._execute')

-- The methods this part gives experiments (tp.experiment sets them on their class).
local Experiment = {}

--- Returns the flag specification of this experiment for tp.cli.parse.
---@return table<string, string>
function Experiment:flag_spec()
  local spec = { help = 'boolean', json = 'boolean' }
  for k, o in pairs(define.STANDARD_OPTIONS) do
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
    results = self.results or ('output/' .. paths.slug(self.name)),
    launcher = self.launcher or 'torchrun',
    profile = self.profile and require('tp.plan.profile').format(self.profile) or nil,
  }
  for _, k in ipairs(define.STANDARD_ORDER) do
    local o = define.STANDARD_OPTIONS[k]
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
      platform, reason = run.slurm_platform(plan, opts)
    else
      platform, reason, probe = run.local_platform()
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
        local exec_opts = { concurrency = opts.concurrency }
        local extra = { preflight = preflight.summary(report),
          on_record = run.history_hook(self.history, io.stdout) }
        if plan.platforms[platform].search then
          -- A search runs rung after rung (tp.experiment._search; docs/search.md).
          result, rerr = require('tp.experiment._search').execute(self, plan, platform, opts,
            exec_opts, extra)
        else
          result, rerr = run.execute(plan, platform, exec_opts, extra)
        end
      end
      if not result then
        io.stdout:write(string.format('run: %s\n', rerr))
        status = 1
      elseif type(result) == 'table' and math.type(result.exit_code) == 'integer' then
        status = result.exit_code
      end
      -- Each finished run into the history, when one is configured (recipe or TPLUA_HISTORY).
      if result and not run.add_to_history(self.history, result, io.stdout) and status == 0 then
        status = 1
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

return Experiment
