-- tp.launch.slurm: a run as a Slurm batch job. Writes the sbatch script (resources, rendezvous,
-- one srun step), and turns the command into `tplua slurm job DIR`, which submits the script
-- (or re-attaches to the job it submitted before), follows every node's output file and exits
-- when the job ends (tp.cmd.slurm). Also: the pure parser of Slurm host lists, and the map from
-- job states to run outcomes. docs/slurm.md is the guide.
--
-- Facts used (Slurm 22.05+ manual pages): sbatch --parsable prints "jobid[;cluster]"; srun
-- --output patterns %j (job id), %n (node index in the job), %t (task id); srun sets
-- SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS, SLURM_NNODES; `scontrol show
-- hostnames LIST` expands a host list; pyxis adds srun --container-image/--container-mounts/
-- --container-workdir; apptainer exec --nv/--rocm/--bind.

local launch = require('tp.launch')

local M = {}

-- ---------------------------------------------------------------------------------------------
-- Host lists.

-- Splits at the commas that are outside brackets.
local function split_top(expr)
  local parts, depth, start = {}, 0, 1
  for i = 1, #expr do
    local ch = expr:sub(i, i)
    if ch == '[' then
      depth = depth + 1
      if depth > 1 then
        return nil, 'nested brackets'
      end
    elseif ch == ']' then
      depth = depth - 1
      if depth < 0 then
        return nil, "']' without '['"
      end
    elseif ch == ',' and depth == 0 then
      parts[#parts + 1] = expr:sub(start, i - 1)
      start = i + 1
    end
  end
  if depth ~= 0 then
    return nil, "'[' without ']'"
  end
  parts[#parts + 1] = expr:sub(start)
  return parts
end

-- The values of one bracket body: "01-04,07" -> { '01', '02', '03', '04', '07' }.
local function range_values(body, limit)
  local out = {}
  for item in (body .. ','):gmatch('([^,]*),') do
    local a, b = item:match('^(%d+)%-(%d+)$')
    if a then
      local lo, hi = math.tointeger(tonumber(a)), math.tointeger(tonumber(b))
      if not lo or not hi or hi < lo then
        return nil, string.format("range '%s' runs backwards", item)
      end
      if hi - lo + 1 + #out > limit then
        return nil, string.format('more than %d hosts', limit)
      end
      -- Slurm keeps the width of the lower bound when it is zero-padded (nid[001-010]).
      local width = (#a > 1 and a:sub(1, 1) == '0') and #a or 0
      for v = lo, hi do
        out[#out + 1] = string.format('%0' .. width .. 'd', v)
      end
    elseif item:match('^%d+$') then
      out[#out + 1] = item
    else
      return nil, string.format("'%s' is not a number or a range", item)
    end
  end
  return out
end

-- Expands one host expression without top-level commas: "rack[1-2]-n[01-02]" (every bracket
-- group multiplies, as Slurm's hostlist does).
local function expand_one(part, limit, out)
  local prefix, body, rest = part:match('^([^%[]*)%[([^%]]*)%](.*)$')
  if not prefix then
    if part == '' then
      return nil, 'empty host name'
    end
    out[#out + 1] = part
    return true
  end
  local values, err = range_values(body, limit)
  if not values then
    return nil, err
  end
  for _, v in ipairs(values) do
    local ok, e = expand_one(prefix .. v .. rest, limit, out)
    if not ok then
      return nil, e
    end
    if #out > limit then
      return nil, string.format('more than %d hosts', limit)
    end
  end
  return true
end

--- Expands a Slurm host list ("gpu[01-04,07],cpu3") into host names, in order, without
--- asking Slurm. Returns nil and a message naming the expression for a malformed one.
---```lua
---tp.launch.get('slurm').expand_nodelist('gpu[01-02,07],cpu3')
----- { 'gpu01', 'gpu02', 'gpu07', 'cpu3' }
---```
---@param expr string
---@param limit? integer most hosts returned (default 100000)
---@return string[]|nil hosts
---@return string? err
function M.expand_nodelist(expr, limit)
  if type(expr) ~= 'string' then
    error('slurm.expand_nodelist: string expected, got ' .. type(expr), 2)
  end
  limit = limit or 100000
  local text = expr:gsub('^%s+', ''):gsub('%s+$', '')
  if text == '' or text == '(null)' then
    return {}
  end
  if text:find('[%s]') then
    return nil, string.format("host list '%s': spaces inside", expr)
  end
  local parts, err = split_top(text)
  if not parts then
    return nil, string.format("host list '%s': %s", expr, err)
  end
  local out = {}
  for _, part in ipairs(parts) do
    local ok, e = expand_one(part, limit, out)
    if not ok then
      return nil, string.format("host list '%s': %s", expr, e)
    end
  end
  return out
end

--- Expands a host list with `scontrol show hostnames` when scontrol answers, else with
--- expand_nodelist. Returns the hosts and which way was used ('scontrol' or 'parser').
---@param expr string
---@return string[]|nil hosts
---@return string how_or_err
function M.hostnames(expr)
  local proc = require('tp.proc')
  local r = proc.run({ 'scontrol', 'show', 'hostnames', expr }, { timeout = 30 })
  if r and r.code == 0 and r.stdout:match('%S') then
    local out = {}
    for h in r.stdout:gmatch('[^\n]+') do
      out[#out + 1] = h
    end
    return out, 'scontrol'
  end
  local hosts, err = M.expand_nodelist(expr)
  if not hosts then
    return nil, err
  end
  return hosts, 'parser'
end

-- ---------------------------------------------------------------------------------------------
-- Job states.

--- Final job states (squeue/sacct/scontrol JobState names) and what a run that ended so became:
--- `outcome` is the record's stopped_by ('completed' for a normal end).
M.STATES = {
  COMPLETED = { final = true, outcome = 'completed' },
  FAILED = { final = true, outcome = 'crash' },
  TIMEOUT = { final = true, outcome = 'timeout' },
  DEADLINE = { final = true, outcome = 'timeout' },
  PREEMPTED = { final = true, outcome = 'preempted' },
  CANCELLED = { final = true, outcome = 'cancelled' },
  NODE_FAIL = { final = true, outcome = 'node_failure' },
  BOOT_FAIL = { final = true, outcome = 'node_failure' },
  OUT_OF_MEMORY = { final = true, outcome = 'oom' },
  SPECIAL_EXIT = { final = true, outcome = 'crash' },
  REVOKED = { final = true, outcome = 'cancelled' },
  PENDING = { final = false }, RUNNING = { final = false }, CONFIGURING = { final = false },
  COMPLETING = { final = false }, REQUEUED = { final = false }, REQUEUE_HOLD = { final = false },
  REQUEUE_FED = { final = false }, RESIZING = { final = false }, SUSPENDED = { final = false },
  STOPPED = { final = false }, SIGNALING = { final = false }, STAGE_OUT = { final = false },
  RESV_DEL_HOLD = { final = false },
}

--- Parses one `scontrol show job -o` line (Name=Value pairs separated by spaces) into a table.
--- Values with spaces (Command=..., Reason=...) end where the next `Name=` starts.
---@param line string
---@return table<string, string>
function M.parse_scontrol(line)
  local out = {}
  local name_pat = '()([%a][%w:/_]*)='
  local starts = {}
  for at, name in line:gmatch(name_pat) do
    -- A pair starts at the line start or after a space.
    if at == 1 or line:sub(at - 1, at - 1) == ' ' then
      starts[#starts + 1] = { at = at, name = name }
    end
  end
  for i, s in ipairs(starts) do
    local vstart = s.at + #s.name + 1
    local vend = starts[i + 1] and (starts[i + 1].at - 2) or #line
    out[s.name] = line:sub(vstart, vend):gsub('%s+$', '')
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- The batch script.

local OPTS = {
  dir = 'string', nodes = 'number', gpus_per_node = 'number', tasks = 'string',
  partition = 'string', account = 'string', qos = 'string', time = 'any', exclusive = 'boolean',
  gres = 'string', gpus = 'boolean', constraint = 'string', job_name = 'string',
  sbatch_args = 'table', srun_args = 'table', container_image = 'string',
  container_mounts = 'table', container = 'string', vendor = 'string', master_port = 'number',
  master_addr = 'string', tplua = 'string', poll = 'number', cpus_per_task = 'number',
  mem = 'string',
}

local function positive(opts, name, default)
  local v = opts[name]
  if v == nil then
    return default
  end
  if math.type(v) ~= 'integer' or v < 1 then
    error(string.format('launch.slurm: option %s must be a positive integer, got %s', name,
      tostring(v)), 4)
  end
  return v
end

-- A Slurm time limit: minutes (number) or "[D-]HH:MM:SS" / "MM:SS" / "MM" text.
local function time_limit(v)
  if v == nil then
    return nil
  end
  if math.type(v) == 'integer' and v > 0 then
    return tostring(v)
  end
  if type(v) == 'string' and (v:match('^%d+$') or v:match('^%d+:%d%d$')
    or v:match('^%d+:%d%d:%d%d$') or v:match('^%d+%-%d+$') or v:match('^%d+%-%d+:%d%d$')
    or v:match('^%d+%-%d+:%d%d:%d%d$')) then
    return v
  end
  error(string.format("launch.slurm: option time must be minutes or '[D-]HH:MM:SS', got %s",
    tostring(v)), 4)
end

local function string_list(opts, name)
  local v = opts[name]
  if v == nil then
    return {}
  end
  for i, s in ipairs(v) do
    if type(s) ~= 'string' then
      error(string.format('launch.slurm: %s[%d] must be a string', name, i), 4)
    end
  end
  return v
end

local q = launch.shquote

-- Shell words of argv, each quoted.
local function words(argv)
  local out = {}
  for i, a in ipairs(argv) do
    out[i] = q(a)
  end
  return table.concat(out, ' ')
end

-- The per-task preamble that maps Slurm's task variables to PyTorch's (env:// init).
local TASK_ENV = 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID '
  .. 'WORLD_SIZE=$SLURM_NTASKS LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE '
  .. 'NODE_RANK=$SLURM_NODEID GROUP_RANK=$SLURM_NODEID; exec "$@"'

-- The per-node preamble of a command that starts its own workers (Primus' launcher).
local SELF_ENV = 'export NNODES=$SLURM_NNODES NODE_RANK=$SLURM_NODEID; exec "$@"'

-- One torchrun per node: the static rendezvous at node 0, node rank from Slurm.
local function torchrun_words(cmd, gpn, nodes)
  local inner = cmd.argv
  local first, module = 1, false
  local base = inner[1]:match('[^/]*$')
  local python = base:match('^python%d*%.?%d*$') ~= nil
  if python then
    first = 2
    if inner[2] == '-m' then
      module, first = true, 3
    end
  end
  local argv = { 'torchrun', '--nnodes', tostring(nodes), '--nproc-per-node', tostring(gpn),
                 '--node-rank', '"$SLURM_NODEID"', '--master-addr', '"$MASTER_ADDR"',
                 '--master-port', '"$MASTER_PORT"' }
  local out = {}
  for i, a in ipairs(argv) do
    out[i] = a:sub(1, 1) == '"' and a or q(a)
  end
  if not python then
    out[#out + 1] = '--no-python'
  elseif module then
    out[#out + 1] = '-m'
  end
  for i = first, #inner do
    out[#out + 1] = q(inner[i])
  end
  return table.concat(out, ' ')
end

--- Builds the sbatch script of a command. `o` is the checked option table of wrap.
---@return string script
---@return table info { tasks, nodes, gpus_per_node, ntasks_per_node }
local function script(cmd, o)
  local lines = { '#!/bin/bash', '# Generated by tplua (tp.launch.slurm): one run as one job.' }
  local function sb(opt)
    lines[#lines + 1] = '#SBATCH ' .. opt
  end
  local per_gpu = o.tasks == 'per_gpu'
  local ntasks_per_node = per_gpu and o.gpus_per_node or 1
  sb('--job-name=' .. o.job_name)
  sb('--nodes=' .. o.nodes)
  sb('--ntasks-per-node=' .. ntasks_per_node)
  if o.cpus_per_task then
    sb('--cpus-per-task=' .. o.cpus_per_task)
  end
  if o.gres then
    sb('--gres=' .. o.gres)
  elseif o.gpus ~= false then
    sb('--gpus-per-node=' .. o.gpus_per_node)
  end
  for _, k in ipairs({ 'partition', 'account', 'qos', 'constraint', 'mem' }) do
    if o[k] then
      sb('--' .. k .. '=' .. o[k])
    end
  end
  if o.time then
    sb('--time=' .. o.time)
  end
  if o.exclusive then
    sb('--exclusive')
  end
  sb('--output=' .. o.dir .. '/slurm-%j.out')
  -- A failed node or a preemption ends the job; tplua's retry policy submits it again as a new
  -- job with its own journal entry (Slurm's own requeue would rewrite the logs under the same id).
  sb('--no-requeue')
  for _, a in ipairs(o.sbatch_args) do
    sb(a)
  end
  lines[#lines + 1] = 'set -eu'
  -- MASTER_ADDR: the address Slurm itself uses for the first node (NodeAddr), its name when
  -- Slurm has no other.
  lines[#lines + 1] = 'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
  if o.master_addr then
    lines[#lines + 1] = 'export MASTER_ADDR=' .. q(o.master_addr)
  else
    lines[#lines + 1] = 'addr=$(scontrol show node -o "$first" | tr " " "\\n" | '
      .. "sed -n 's/^NodeAddr=//p' | head -n 1)"
    lines[#lines + 1] = 'export MASTER_ADDR=${addr:-$first}'
  end
  if o.master_port then
    lines[#lines + 1] = 'export MASTER_PORT=' .. o.master_port
  else
    -- One port per job, so that jobs sharing a node do not collide.
    lines[#lines + 1] = 'export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))'
  end
  for _, k in ipairs(launch._sorted(cmd.env)) do
    if launch.is_secret(k) then
      -- The value is not written here: sbatch passes the submitting environment on.
      lines[#lines + 1] = 'export ' .. k
    else
      lines[#lines + 1] = 'export ' .. k .. '=' .. q(cmd.env[k])
    end
  end
  if cmd.cwd then
    lines[#lines + 1] = 'cd ' .. q(cmd.cwd)
  end
  lines[#lines + 1] = string.format('echo "tplua: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, '
    .. 'master $MASTER_ADDR:$MASTER_PORT"')

  local srun = { 'srun', '--kill-on-bad-exit=1', '--nodes=' .. o.nodes,
                 '--ntasks-per-node=' .. ntasks_per_node,
                 '--output=' .. o.dir .. '/node-%n.log' }
  local container_prefix = ''
  if o.container_image then
    local mounts = {}
    for _, m in ipairs(o.container_mounts) do
      mounts[#mounts + 1] = m
    end
    -- The run directory holds the files the job reads (framework configs) and writes.
    mounts[#mounts + 1] = o.dir .. ':' .. o.dir
    if o.container == 'pyxis' then
      srun[#srun + 1] = '--container-image=' .. o.container_image
      srun[#srun + 1] = '--container-mounts=' .. table.concat(mounts, ',')
      if cmd.cwd then
        srun[#srun + 1] = '--container-workdir=' .. cmd.cwd
      end
    else
      local a = { 'apptainer', 'exec', o.vendor == 'amd' and '--rocm' or '--nv' }
      for _, m in ipairs(mounts) do
        a[#a + 1] = '--bind'
        a[#a + 1] = m
      end
      if cmd.cwd then
        a[#a + 1] = '--pwd'
        a[#a + 1] = cmd.cwd
      end
      a[#a + 1] = o.container_image
      container_prefix = words(a) .. ' '
    end
  end
  for _, a in ipairs(o.srun_args) do
    srun[#srun + 1] = a
  end
  local step
  if per_gpu then
    step = words(srun) .. ' ' .. container_prefix .. "bash -c '" .. TASK_ENV .. "' tplua-task "
      .. words(cmd.argv)
  elseif cmd.launcher == 'self' then
    lines[#lines + 1] = 'export GPUS_PER_NODE=' .. o.gpus_per_node
    step = words(srun) .. ' ' .. container_prefix .. "bash -c '" .. SELF_ENV .. "' tplua-node "
      .. words(cmd.argv)
  else
    step = words(srun) .. ' ' .. container_prefix .. torchrun_words(cmd, o.gpus_per_node, o.nodes)
  end
  lines[#lines + 1] = step
  return table.concat(lines, '\n') .. '\n', { tasks = o.tasks, nodes = o.nodes,
    gpus_per_node = o.gpus_per_node, ntasks_per_node = ntasks_per_node }
end

--- The name of the script file in the run directory, and of the job state file.
M.SCRIPT = 'job.sbatch'
M.STATE = 'slurm.json'

-- The words of one shell line as the script writes them: bare words, '...' (with '\'' for a
-- quote inside), "..." and backslash escapes; no expansion.
local function shell_words(line)
  local out, cur, i = {}, nil, 1
  while i <= #line do
    local c = line:sub(i, i)
    if c:match('%s') then
      out[#out + 1], cur = cur, nil
      i = i + 1
    elseif c == "'" or c == '"' then
      local j = line:find(c, i + 1, true) or (#line + 1)
      cur = (cur or '') .. line:sub(i + 1, j - 1)
      i = j + 1
    elseif c == '\\' then
      cur = (cur or '') .. line:sub(i + 1, i + 1)
      i = i + 2
    else
      cur = (cur or '') .. c
      i = i + 1
    end
  end
  out[#out + 1] = cur
  return out
end

--- Reads a job script of M.wrap back: its `#SBATCH` options and the per-process command its
--- srun step starts (tp.launch.unwrap; the preflight of a campaign file's Slurm runs).
---```lua
---local job = tp.launch.get('slurm').read_script(cmd.files['job.sbatch'])
---print(job.options.partition, job.options.nodes, job.argv[1])
---```
---@param text string the script
---@return table job { options = {[name] = value, or true for a flag}, argv?: string[] the
---  per-process command, runner?: string (torchrun, whose interpreter runs a Python script) }
function M.read_script(text)
  local options, step = {}, nil
  for line in text:gmatch('[^\n]+') do
    local opt = line:match('^#SBATCH%s+%-%-(%S+)')
    if opt then
      local k, v = opt:match('^([^=]+)=(.*)$')
      options[k or opt] = v or true
    elseif line:match('^srun%s') then
      step = line
    end
  end
  local job = { options = options }
  local w = step and shell_words(step) or {}
  for i, a in ipairs(w) do
    if a == 'tplua-task' or a == 'tplua-node' then
      job.argv = table.move(w, i + 1, #w, 1, {})
      break
    elseif a == 'torchrun' then
      local u = launch.unwrap(table.move(w, i, #w, 1, {}))
      job.argv, job.runner = u.argv, u.runner
      break
    end
  end
  return job
end

--- Wraps a per-process command as a Slurm job. The command becomes `tplua slurm job DIR`; the
--- batch script goes into `files` (written to DIR before the start); `files_dir` is DIR.
---```lua
---local cmd = tp.launch.get('slurm').wrap(ref.build(config), { dir = '/shared/out/run1',
---  nodes = 2, gpus_per_node = 8, partition = 'gpu', time = '01:00:00' })
---print(cmd.files['job.sbatch'])
---```
---@param cmd table  { argv, env, cwd?, launcher?, env_init? }
---@param opts table  { dir (absolute, on storage every node sees), nodes = 1, gpus_per_node = 8,
---  tasks = 'per_gpu'|'per_node' (default per_gpu when the command takes env init, else
---  per_node: torchrun, or the command's own launcher), partition?, account?, qos?, time?
---  (minutes or '[D-]HH:MM:SS'), exclusive?, gres? (replaces --gpus-per-node), gpus = true
---  (false: no GPU request, for CPU partitions), constraint?, mem?, cpus_per_task?, job_name?,
---  sbatch_args? = {...}, srun_args? = {...}, container_image?, container_mounts? = {...},
---  container = 'pyxis'|'apptainer', vendor = 'nvidia'|'amd' (apptainer's --nv/--rocm),
---  master_addr?, master_port?, tplua? (this executable), poll? (seconds between state polls,
---  default 5) }
---@return table cmd
function M.wrap(cmd, opts)
  local out = launch._copy(cmd, 'launch.slurm')
  opts = launch._check_opts(opts, OPTS, 'launch.slurm')
  if type(opts.dir) ~= 'string' or opts.dir:sub(1, 1) ~= '/' then
    error('launch.slurm: option dir must be an absolute path (the run directory, on storage '
      .. 'every node sees)', 2)
  end
  if opts.dir:find('[%s\'"%%$`\\]') then
    error("launch.slurm: option dir must not contain spaces, quotes, '%', '$', '`' or '\\': "
      .. opts.dir, 2)
  end
  local o = {
    dir = opts.dir:gsub('/+$', ''),
    nodes = positive(opts, 'nodes', 1),
    gpus_per_node = positive(opts, 'gpus_per_node', 8),
    cpus_per_task = positive(opts, 'cpus_per_task', nil),
    master_port = positive(opts, 'master_port', nil),
    time = time_limit(opts.time),
    sbatch_args = string_list(opts, 'sbatch_args'),
    srun_args = string_list(opts, 'srun_args'),
    container_mounts = string_list(opts, 'container_mounts'),
    partition = opts.partition, account = opts.account, qos = opts.qos,
    constraint = opts.constraint, mem = opts.mem, gres = opts.gres, gpus = opts.gpus,
    exclusive = opts.exclusive, master_addr = opts.master_addr,
    container_image = opts.container_image, container = opts.container or 'pyxis',
    vendor = opts.vendor or 'nvidia',
  }
  if o.master_port and o.master_port > 65535 then
    error('launch.slurm: option master_port must be below 65536', 2)
  end
  for _, a in ipairs(o.sbatch_args) do
    if not a:match('^%-') or a:find('\n') then
      error("launch.slurm: sbatch_args entries are options such as '--mem=0', got '" .. a .. "'",
        2)
    end
  end
  for _, k in ipairs({ 'partition', 'account', 'qos', 'constraint', 'mem', 'gres', 'job_name' }) do
    if opts[k] ~= nil and (opts[k] == '' or opts[k]:find('[%s\'"]')) then
      error(string.format('launch.slurm: option %s: no spaces or quotes, got %q', k, opts[k]), 2)
    end
  end
  if o.container ~= 'pyxis' and o.container ~= 'apptainer' then
    error("launch.slurm: option container must be 'pyxis' or 'apptainer', got " .. o.container,
      2)
  end
  if o.vendor ~= 'nvidia' and o.vendor ~= 'amd' then
    error("launch.slurm: option vendor must be 'nvidia' or 'amd', got " .. o.vendor, 2)
  end
  local tasks = opts.tasks or ((out.env_init and out.launcher ~= 'self') and 'per_gpu'
    or 'per_node')
  if tasks ~= 'per_gpu' and tasks ~= 'per_node' then
    error("launch.slurm: option tasks must be 'per_gpu' or 'per_node', got " .. tasks, 2)
  end
  if tasks == 'per_gpu' and out.launcher == 'self' then
    error('launch.slurm: tasks per_gpu: the command starts its own workers (launcher self); '
      .. 'use per_node', 2)
  end
  if out.launcher == 'torchrun' and out.argv[1]:match('[^/]*$') == 'torchrun' then
    error('launch.slurm: give the per-process command, not one already wrapped in torchrun', 2)
  end
  o.tasks = tasks
  o.job_name = opts.job_name or ('tplua-' .. (o.dir:match('[^/]+$') or 'run'))
  local text, info = script(out, o)
  -- Secret variables reach the job through the submitting environment (sbatch exports it).
  local outer = {}
  for k, v in pairs(out.env) do
    if launch.is_secret(k) then
      outer[k] = v
    end
  end
  local exe = opts.tplua or require('tp._host').exe_path() or 'tplua'
  local argv = { exe, 'slurm', 'job', o.dir }
  if opts.poll then
    if type(opts.poll) ~= 'number' or opts.poll <= 0 then
      error('launch.slurm: option poll must be seconds > 0', 2)
    end
    argv[#argv + 1] = '--poll'
    argv[#argv + 1] = tostring(opts.poll)
  end
  local files = {}
  for k, v in pairs(out.files or {}) do
    files[k] = v
  end
  files[M.SCRIPT] = text
  return {
    argv = argv, env = outer, files = files, files_dir = o.dir, parser = out.parser,
    entry = out.entry, notes = out.notes, launcher = 'slurm', inner = out.argv,
    slurm = info, script = text,
  }
end

--- Asks Slurm about a job: scontrol first (live and recently finished jobs), then sacct (when
--- accounting exists). Returns { state, exit_code, signal, reason, nodelist, source } or nil.
function M.query(job)
  local proc = require('tp.proc')
  local r = proc.run({ 'scontrol', 'show', 'job', '-o', tostring(job) }, { timeout = 60 })
  if r and r.code == 0 then
    for line in r.stdout:gmatch('[^\n]+') do
      local kv = M.parse_scontrol(line)
      if kv.JobId == tostring(job) and kv.JobState then
        local code, sig = (kv.ExitCode or ''):match('^(%d+):(%d+)$')
        return { state = kv.JobState:match('^(%S+)'), exit_code = math.tointeger(tonumber(code)),
          signal = math.tointeger(tonumber(sig)), reason = kv.Reason,
          nodelist = kv.NodeList, source = 'scontrol' }
      end
    end
  end
  r = proc.run({ 'sacct', '-j', tostring(job), '-X', '-n', '-P', '-o',
    'JobID,State,ExitCode,NodeList,Reason' }, { timeout = 60 })
  if r and r.code == 0 then
    for line in r.stdout:gmatch('[^\n]+') do
      local id, state, exit, nodes, reason = line:match('^([^|]*)|([^|]*)|([^|]*)|([^|]*)|?(.*)$')
      if id == tostring(job) then
        local code, sig = (exit or ''):match('^(%d+):(%d+)$')
        return { state = state:match('^(%S+)'), exit_code = math.tointeger(tonumber(code)),
          signal = math.tointeger(tonumber(sig)), reason = reason, nodelist = nodes,
          source = 'sacct' }
      end
    end
  end
  return nil
end

return M
