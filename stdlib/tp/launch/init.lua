-- tp.launch: launchers that wrap a command ({ argv, env, ... }) for how it must be started
-- (as is, under torchrun, inside a container), composable, plus a printable, secret-redacted
-- shell form of any command.

local M = {}

local NAMES = { 'container', 'local', 'ranks', 'slurm', 'torchrun' }

--- Lists the launcher names, sorted.
---@return string[]
function M.list()
  local out = {}
  for i, n in ipairs(NAMES) do
    out[i] = n
  end
  return out
end

--- Returns a launcher module ({ wrap = fn(cmd, opts) -> cmd }), or nil, message, 'ENOENT'.
---@param name string
---@return table|nil launcher, string? err, string? code
function M.get(name)
  if type(name) ~= 'string' then
    error('launch.get: name must be a string, got ' .. type(name), 2)
  end
  for _, n in ipairs(NAMES) do
    if n == name then
      return require('tp.launch.' .. name)
    end
  end
  return nil, string.format("launch: unknown launcher '%s' (known: %s)", name,
    table.concat(NAMES, ', ')), 'ENOENT'
end

--- Returns true when an environment variable name looks like it holds a secret: its name
--- contains TOKEN, KEY, SECRET or PASSWORD (any case).
---@param name string
---@return boolean
function M.is_secret(name)
  local up = tostring(name):upper()
  return up:find('TOKEN', 1, true) ~= nil or up:find('KEY', 1, true) ~= nil
    or up:find('SECRET', 1, true) ~= nil or up:find('PASSWORD', 1, true) ~= nil
end

--- Quotes one word for a POSIX shell; words of safe characters are left bare.
---@param s string
---@return string
function M.shquote(s)
  s = tostring(s)
  if s ~= '' and not s:find('[^%w@%%+=:,%./%-_]') then
    return s
  end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- Checks the common shape of a command and returns a shallow copy with copied argv and env.
---@param cmd table
---@param who string  caller name for messages
---@return table
function M._copy(cmd, who)
  if type(cmd) ~= 'table' then
    error(who .. ': cmd must be a table, got ' .. type(cmd), 3)
  end
  if type(cmd.argv) ~= 'table' or #cmd.argv == 0 then
    error(who .. ': cmd.argv must be a non-empty list', 3)
  end
  if cmd.env ~= nil and type(cmd.env) ~= 'table' then
    error(who .. ': cmd.env must be a table', 3)
  end
  local out = {}
  for k, v in pairs(cmd) do
    out[k] = v
  end
  out.argv = {}
  for i, a in ipairs(cmd.argv) do
    if type(a) ~= 'string' then
      error(string.format('%s: cmd.argv[%d] must be a string, got %s', who, i, type(a)), 3)
    end
    out.argv[i] = a
  end
  out.env = {}
  for k, v in pairs(cmd.env or {}) do
    if type(k) ~= 'string' or type(v) ~= 'string' then
      error(who .. ': cmd.env must map strings to strings', 3)
    end
    out.env[k] = v
  end
  return out
end

--- Rejects option keys a launcher does not know.
---@param opts table|nil
---@param known table<string, string>  name -> expected Lua type
---@param who string
---@return table opts
function M._check_opts(opts, known, who)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    error(who .. ': opts must be a table, got ' .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    local kind = known[k]
    if kind == nil then
      error(string.format('%s: unknown option %s', who, tostring(k)), 3)
    end
    if kind ~= 'any' and type(v) ~= kind then
      error(string.format('%s: option %s must be a %s, got %s', who, k, kind, type(v)), 3)
    end
  end
  return opts
end

local function sorted(t)
  local keys = {}
  for k in pairs(t) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  return keys
end
M._sorted = sorted

-- A NAME=value word whose NAME is secret gets its value replaced.
local function redact_word(word)
  local name, value = word:match('^([%w_]+)=(.*)$')
  if name and value ~= '' and M.is_secret(name) then
    return name .. '=<redacted>'
  end
  return word
end

--- Returns the command as one shell line: `NAME=value ... argv...`, every word quoted, the
--- values of secret variables (env entries and NAME=value words in argv) shown as <redacted>.
---```lua
---print(tp.launch.describe({ argv = { 'python3', 'train.py' }, env = { HF_TOKEN = 'hf_x' } }))
----- HF_TOKEN='<redacted>' python3 train.py
---```
---@param cmd table  { argv = {...}, env = {...}, cwd? }
---@return string
function M.describe(cmd)
  local c = M._copy(cmd, 'launch.describe')
  local words = {}
  if c.cwd then
    words[#words + 1] = 'cd ' .. M.shquote(c.cwd) .. ' &&'
  end
  for _, k in ipairs(sorted(c.env)) do
    local v = M.is_secret(k) and '<redacted>' or c.env[k]
    -- Only the value is quoted: a quoted NAME= would be a command word, not an assignment.
    words[#words + 1] = k .. '=' .. M.shquote(v)
  end
  for _, a in ipairs(c.argv) do
    words[#words + 1] = M.shquote(redact_word(a))
  end
  return table.concat(words, ' ')
end

--- Applies launchers in order: steps = { {'torchrun', opts}, {'container', opts} } wraps the
--- command in torchrun, then the result in a container.
---@param cmd table
---@param steps table[]
---@return table cmd
function M.compose(cmd, steps)
  if type(steps) ~= 'table' then
    error('launch.compose: steps must be a list', 2)
  end
  for i, step in ipairs(steps) do
    if type(step) ~= 'table' or type(step[1]) ~= 'string' then
      error(string.format('launch.compose: steps[%d] must be { name, opts }', i), 2)
    end
    local launcher, err = M.get(step[1])
    if not launcher then
      error('launch.compose: ' .. err, 2)
    end
    cmd = launcher.wrap(cmd, step[2])
  end
  return cmd
end

-- torchrun's options that take no value (torch/distributed/run.py); every other one takes one.
local TORCHRUN_SWITCHES = { ['--standalone'] = true, ['--run-path'] = true,
  ['--run_path'] = true, ['-m'] = 'module', ['--module'] = 'module',
  ['--no-python'] = 'no_python', ['--no_python'] = 'no_python' }

local CONTAINER_RUNTIMES = { docker = true, podman = true, apptainer = true, singularity = true }

-- Is `program` this tplua (its path, or a program named tplua)?
local function is_tplua(program)
  return program:match('[^/]*$'):match('^tplua') ~= nil
    or program == require('tp._host').exe_path()
end

--- Reads a wrapped command back, as tplua's launchers write theirs: which launcher starts it,
--- and the per-process command inside (the preflight of a campaign file's runs checks that
--- command's interpreter, framework and arguments). A command no launcher wrapped is `local`.
--- For torchrun without `--no-python`, `argv[1]` of the per-process command is `python3` and
--- `runner` the program whose interpreter really runs it (torchrun's own).
---```lua
---local u = tp.launch.unwrap({ 'tplua', 'ranks', '--nproc-per-node', '2', '--', 'python3',
---  'x.py' })
----- u.launcher == 'ranks', u.argv == { 'python3', 'x.py' }
---```
---@param argv string[] the command a run starts
---@param files? table<string, string> the run's files (a Slurm job's script, `job.sbatch`)
---@return table unwrapped { launcher = 'local'|'ranks'|'torchrun'|'container'|'slurm', argv?:
---  the per-process command (nil where it cannot be read: inside a container, a Slurm job
---  without its script), runner?: string, slurm?: table the job's #SBATCH options }
function M.unwrap(argv, files)
  if type(argv) ~= 'table' or type(argv[1]) ~= 'string' then
    error('launch.unwrap: argv must be a non-empty list of strings', 2)
  end
  local program = argv[1]:match('[^/]*$')
  if argv[2] == 'ranks' and is_tplua(argv[1]) then
    for i = 3, #argv do
      if argv[i] == '--' then
        return { launcher = 'ranks', argv = table.move(argv, i + 1, #argv, 1, {}) }
      end
    end
  elseif argv[2] == 'slurm' and argv[3] == 'job' and is_tplua(argv[1]) then
    local slurm = M.get('slurm')
    local text = type(files) == 'table' and files[slurm.SCRIPT]
    if type(text) ~= 'string' then
      return { launcher = 'slurm' }
    end
    local job = slurm.read_script(text)
    return { launcher = 'slurm', argv = job.argv, runner = job.runner, slurm = job.options }
  elseif program == 'torchrun' then
    local i, module, no_python = 2, false, false
    while argv[i] and argv[i]:sub(1, 1) == '-' do
      local a, switch = argv[i], TORCHRUN_SWITCHES[argv[i]]
      if a == '--' then
        i = i + 1
        break
      end
      module = module or switch == 'module'
      no_python = no_python or switch == 'no_python'
      i = i + ((switch or a:find('=', 1, true)) and 1 or 2)
    end
    local inner = {}
    if not no_python then
      inner[1] = 'python3'
      inner[2] = module and '-m' or nil
    end
    table.move(argv, i, #argv, #inner + 1, inner)
    return { launcher = 'torchrun', argv = inner, runner = not no_python and argv[1] or nil }
  elseif CONTAINER_RUNTIMES[program] and (argv[2] == 'run' or argv[2] == 'exec') then
    return { launcher = 'container' }
  end
  return { launcher = 'local', argv = table.move(argv, 1, #argv, 1, {}) }
end

return M
