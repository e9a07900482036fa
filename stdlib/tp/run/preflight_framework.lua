-- tp.preflight_framework: the framework checks of a preflight (tp.preflight). Is the framework
-- where the recipe says, at a version tplua has an adapter for, and does its own argument
-- parser accept the command tplua generated? The parser check runs the framework's parser in
-- the run's interpreter, without training: Megatron-LM's parse_args, torchtitan's
-- ConfigManager (JobConfig in older releases), the reference trainer's and the peaks
-- microbenchmark's parse_args. Primus and NeMo have no parser that runs apart from a launch;
-- they are said to be unchecked.
local M = {}

--- The oldest framework version each adapter generates arguments for: the layouts the adapters
--- and this check rely on (Megatron-LM megatron/training/ since core 0.6.0; NeMo 2's
--- nemo.collections.llm recipes since 2.0.0; torchtitan's `python -m torchtitan.train` entry
--- since 0.1.0). A checkout without a version file is not judged.
M.MIN_VERSION = { megatron = '0.6.0', nemo = '2.0.0', torchtitan = '0.1.0' }

-- Each framework's parser, as a Python program: argv[1] the framework directory, argv[2] the
-- script name (Megatron), argv[3..] the arguments. Exit 0: accepted; argparse's exit 2 with
-- its message: rejected; exit 3 with a TPLUA_IMPORT line: the parser could not be loaded.
local PROGRAMS = {
  megatron = [[
import sys
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
try:
    try:
        from megatron.training.arguments import parse_args
    except ImportError:
        from megatron.arguments import parse_args
except Exception as e:
    print("TPLUA_IMPORT " + (str(e).splitlines() or [type(e).__name__])[0], file=sys.stderr)
    sys.exit(3)
sys.argv = sys.argv[2:]
parse_args()
]],
  torchtitan = [[
import sys
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
args = sys.argv[3:]
try:
    try:
        from torchtitan.config import ConfigManager
        parse = ConfigManager().parse_args
    except ImportError:
        from torchtitan.config_manager import JobConfig
        parse = JobConfig().parse_args
except Exception as e:
    print("TPLUA_IMPORT " + (str(e).splitlines() or [type(e).__name__])[0], file=sys.stderr)
    sys.exit(3)
parse(args)
]],
  reference = [[
import sys
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
try:
    import reftrain
except Exception as e:
    print("TPLUA_IMPORT " + (str(e).splitlines() or [type(e).__name__])[0], file=sys.stderr)
    sys.exit(3)
reftrain.parse_args(sys.argv[3:])
]],
  peaks = [[
import sys
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
try:
    import peaks
except Exception as e:
    print("TPLUA_IMPORT " + (str(e).splitlines() or [type(e).__name__])[0], file=sys.stderr)
    sys.exit(3)
peaks.parse_args(sys.argv[3:])
]],
}

local function version_less(a, b)
  local function parts(v)
    local out = {}
    for n in tostring(v):gmatch('%d+') do
      out[#out + 1] = tonumber(n)
    end
    return out
  end
  local pa, pb = parts(a), parts(b)
  for i = 1, math.max(#pa, #pb) do
    local x, y = pa[i] or 0, pb[i] or 0
    if x ~= y then
      return x < y
    end
  end
  return false
end

-- A file the run writes itself before it starts (NeMo's generated script, torchtitan's TOML):
-- under its own directory, so absent before the run.
local function generated(run, path)
  return type(run.output) == 'string' and path:sub(1, #run.output + 1) == run.output .. '/'
end

-- The framework's directory of a run: paths.framework_dir, else the adapter's default: the
-- directory of its entry script (Megatron-LM, Primus), the checkout on PYTHONPATH
-- (torchtitan), the reference trainer's; nil for an installed package (NeMo).
local function framework_dir(run)
  local dir = type(run.config.paths) == 'table' and run.config.paths.framework_dir
  if dir then
    return dir
  end
  local p = run.process or {}
  -- A command of a campaign file that no adapter knows has no checkout to find.
  if type(run.framework) ~= 'string' or not require('tp.frameworks').get(run.framework) then
    return nil
  end
  if run.framework == 'reference' then
    return require('tp.frameworks.reference').trainer_dir()
  end
  if type(p.entry) == 'string' and p.entry:sub(1, 1) == '/' and not generated(run, p.entry) then
    local d = p.entry:match('^(.*)/[^/]+$')
    return run.framework == 'primus' and d:gsub('/runner$', '') or d
  end
  local pypath = p.env and p.env.PYTHONPATH
  if type(pypath) == 'string' and pypath:sub(1, 1) == '/' then
    return pypath:match('^[^:]+')
  end
  return nil
end

--- An error finding when a command's program (its argv[1]: an interpreter, a launcher) is not
--- found in PATH (the command's own PATH when its env sets one) or, given as a path, cannot be
--- executed.
---@param who string what the message names first (the framework, the run)
---@param what string 'interpreter', 'launcher', ...
---@param program string
---@param env? table the command's environment
---@param add fun(severity: string, check: string, message: string, fix: string)
---@return boolean found
function M.program(who, what, program, env, add)
  if require('tp.plan.profile').which(program, env and env.PATH or nil) then
    return true
  end
  local fmt = program:find('/', 1, true) and '%s: the %s %s does not exist or cannot be executed'
    or '%s: the %s %s is not found in PATH'
  add('error', 'framework', string.format(fmt, who, what, program),
    'install it, or put its directory first in PATH')
  return false
end

--- Where the framework is and which version it declares: findings for a missing checkout,
--- entry script or interpreter, and for a version older than the adapter's.
---@param run table a plan run (with `process`, the adapter's per-process command)
---@param add fun(severity: string, check: string, message: string, fix: string)
---@param opts table {remote?: boolean, where?: string} remote: the run starts elsewhere (Slurm,
---  a container), so what this machine cannot see is a warning; `where` says so in the message
---@return boolean ok false when the checkout is missing (nothing more to check there)
---@return string|nil dir the checkout, nil for an installed package
function M.install(run, add, opts)
  local fs = require('tp.fs')
  local p = run.process or {}
  local dir = framework_dir(run)
  local missing = opts.remote and 'warning' or 'error'
  local where = opts.where
    or (opts.remote and ' (from this machine; the compute nodes may see it)' or '')
  if dir and not fs.is_dir(dir) then
    add(missing, 'framework', string.format('%s: %s does not exist%s', run.framework, dir, where),
      'set paths.framework_dir to the checkout of ' .. run.framework)
    return false
  end
  if type(p.entry) == 'string' and p.entry:sub(1, 1) == '/' and not generated(run, p.entry)
    and not fs.exists(p.entry) then
    add(missing, 'framework', string.format('%s: the entry script %s is missing%s',
      run.framework, p.entry, where), dir and 'check paths.framework_dir: it must be the '
        .. 'checkout root' or 'fix the path of the script in the command (or its cwd)')
  end
  local interp = type(p.argv) == 'table' and p.argv[1]
  if interp and not opts.remote then
    M.program(run.framework, 'interpreter', interp, p.env, add)
  end
  if dir then
    local v, file = require('tp.run.provenance').framework_version(run.framework, dir)
    local min = M.MIN_VERSION[run.framework]
    if v and min and version_less(v, min) then
      add('error', 'framework', string.format('%s: version %s (%s) is older than %s, the oldest '
        .. "tplua's adapter generates arguments for", run.framework, v, file, min),
        'use a newer checkout of ' .. run.framework)
    elseif v then
      add('info', 'framework', string.format('%s: version %s (%s) in %s', run.framework, v,
        file, dir), '')
    end
  end
  return true, dir
end

-- The arguments of the per-process command after the program and script ('python3 x.py' or
-- 'python3 -m mod'), and the script.
local function script_args(argv)
  local i = 2
  if argv[i] == '-m' then
    return argv[i + 1], table.move(argv, i + 2, #argv, 1, {})
  end
  return argv[i], table.move(argv, i + 1, #argv, 1, {})
end

-- Writes the run's generated files (a torchtitan TOML...) into `tmp` and points the
-- arguments at them, since the run directory does not exist before the run.
local function stage_files(run, args, tmp)
  local fs = require('tp.fs')
  for rel, content in pairs(run.files or {}) do
    if type(rel) == 'string' and type(content) == 'string' then
      local real, staged = run.output .. '/' .. rel, tmp .. '/' .. rel
      fs.mkdir_p((staged:match('^(.*)/[^/]*$')))
      local f = assert(io.open(staged, 'wb'))
      f:write(content)
      f:close()
      for i, a in ipairs(args) do
        if a == real then
          args[i] = staged
        end
      end
    end
  end
end

--- Runs the framework's own argument parser on the run's generated arguments: an error finding
--- with the parser's message when it rejects them, a warning when the parser cannot be loaded
--- (the check could not be made), an info finding for frameworks without a standalone parser.
---@param run table a plan run
---@param dir string|nil the framework's checkout (nil: an installed package)
---@param add fun(severity: string, check: string, message: string, fix: string)
function M.arguments(run, dir, add)
  local program = PROGRAMS[run.framework]
  local p = run.process or {}
  if not program then
    add('info', 'arguments', string.format('%s: no argument parser runs apart from a launch; '
      .. 'the arguments are checked when the run starts', run.framework), '')
    return
  end
  if type(p.argv) ~= 'table' or #p.argv < 2 then
    return
  end
  local script, args = script_args(p.argv)
  local tmp = os.tmpname()
  os.remove(tmp)
  local fs = require('tp.fs')
  fs.mkdir_p(tmp)
  stage_files(run, args, tmp)
  local argv = { p.argv[1], '-c', program, dir or '', script }
  table.move(args, 1, #args, #argv + 1, argv)
  local env = {}
  for k, v in pairs(p.env or {}) do
    env[k] = v
  end
  env.PYTHONDONTWRITEBYTECODE = '1'
  local r, err = require('tp.proc').run(argv, { env = env, cwd = dir, timeout = 300 })
  fs.remove_tree(tmp)
  if not r then
    add('warning', 'arguments', string.format('%s: the argument parser did not run: %s',
      run.framework, tostring(err)), 'check the interpreter ' .. tostring(p.argv[1]))
    return
  end
  local stderr = r.stderr or ''
  if r.code == 0 then
    add('info', 'arguments', string.format("%s: the framework's parser accepts the %d "
      .. 'arguments', run.framework, #args), '')
  elseif r.code == 3 and stderr:find('TPLUA_IMPORT', 1, true) then
    add('warning', 'arguments', string.format("%s: the framework's parser could not be loaded "
      .. 'from %s: %s', run.framework, dir or 'the installed packages',
      stderr:match('TPLUA_IMPORT ([^\n]*)')),
      'install what the framework imports in ' .. p.argv[1] .. ', or check paths.framework_dir')
  else
    local msg = stderr:match('[^\n]*error: ([^\n]*)%s*$') or stderr:gsub('%s+$', ''):match(
      '[^\n]*$') or ('exit status ' .. tostring(r.code))
    add('error', 'arguments', string.format("%s: the framework's parser rejects the "
      .. 'arguments: %s', run.framework, msg),
      'a flag was renamed or removed in this version: update tplua or pin the framework')
  end
end

return M
