-- tplua slurm: the Slurm side of tp.launch.slurm. `job DIR` submits DIR/job.sbatch (or
-- re-attaches to the job an earlier `job DIR` submitted and did not see end), follows the job's
-- output files into its own output, and exits when the job ends; `hostnames LIST` expands a
-- host list. docs/slurm.md is the guide.
local M = {}

M.summary = 'submit a run\'s Slurm job and follow it to its end; expand host lists'

M.usage = [[
usage: tplua slurm job DIR [--poll SECONDS] [--submit]
       tplua slurm hostnames LIST [--parser]

job: submits DIR/job.sbatch with 'sbatch --parsable' (the script tp.launch.slurm writes), or,
when DIR/slurm.json names a job that an earlier 'tplua slurm job DIR' submitted and did not see
end, attaches to that job instead of submitting another. Prints every line the job writes
(DIR/slurm-JOBID.out and each node's DIR/node-N.log) as it comes, polls the job's state
(scontrol show job, then sacct) every SECONDS (default 5) and says when it changes (pending
reasons included), and exits when the job ends. DIR/slurm.json keeps the job id, state, exit
code, node list and log paths. The job is never cancelled here: tplua's run supervisor cancels
it when it stops a run; when this process loses its parent (tplua killed), it stops following
and leaves the job running for the next attach.

Inside an allocation (SLURM_JOB_ID set: under salloc, or tplua itself in a batch job) the
script runs here instead, as it is: its srun becomes a step of that allocation, and the step's
exit status is the run's ('running in allocation N'). --submit submits a new job all the same.

hostnames: prints the hosts of a Slurm host list such as 'gpu[01-04,07],cpu3', one per line,
with 'scontrol show hostnames' when it answers, else (or with --parser) tplua's own parser.

exit status (job): 0 when the job COMPLETED; its exit code (1 when that is 0) for FAILED,
TIMEOUT, CANCELLED, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY and the other final states; 75 when it
stopped following a running job; 1 when sbatch failed; 2 on a usage error.
]]

local EX_DETACHED = 75

local function now_iso()
  return os.date('!%Y-%m-%dT%H:%M:%SZ')
end

-- The parent pid of this process (/proc/self/stat field 4, after the parenthesised name).
local function ppid()
  local f = io.open('/proc/self/stat', 'r')
  if not f then
    return nil
  end
  local s = f:read('a')
  f:close()
  return math.tointeger(tonumber(s:match('%) %S+ (%d+)')))
end

local function read_state(path)
  local json = require('tp.json')
  local fs = require('tp.fs')
  if not fs.is_file(path) then
    return nil
  end
  local ok, t = pcall(json.load_file, path)
  if ok and type(t) == 'table' then
    return t
  end
  return nil
end

local function write_state(path, t)
  local json = require('tp.json')
  local fs = require('tp.fs')
  assert(fs.write_atomic(path, json.encode(t, { sort_keys = true, pretty = true }) .. '\n'))
end

-- The job's state from the scheduler (tp.launch.slurm.query, kept here for callers of old).
M.query = require('tp.launch.slurm').query

local function node_logs(dir)
  local fs = require('tp.fs')
  local out = {}
  for _, e in ipairs(fs.list(dir) or {}) do
    local n = e.name:match('^node%-(%d+)%.log$')
    if n then
      out[#out + 1] = { n = tonumber(n), path = fs.join(dir, e.name) }
    end
  end
  table.sort(out, function(a, b)
    return a.n < b.n
  end)
  local paths = {}
  for i, e in ipairs(out) do
    paths[i] = e.path
  end
  return paths
end

local function remove_node_logs(dir)
  for _, p in ipairs(node_logs(dir)) do
    os.remove(p)
  end
end

-- Follows output files: the files added, and every node log of `dir` as it appears; complete
-- lines are written to `out` as they arrive.
local Follower = {}
Follower.__index = Follower

local function follower(out, dir)
  return setmetatable({ files = {}, order = {}, out = out, dir = dir }, Follower)
end

function Follower:add(path)
  if not self.files[path] then
    self.files[path] = { offset = 0, partial = '' }
    self.order[#self.order + 1] = path
  end
end

function Follower:poll(final)
  for _, p in ipairs(node_logs(self.dir)) do
    self:add(p)
  end
  for _, path in ipairs(self.order) do
    local st = self.files[path]
    local f = io.open(path, 'rb')
    if f then
      f:seek('set', st.offset)
      local data = f:read(1 << 20)
      while data do
        st.offset = st.offset + #data
        local text = st.partial .. data
        local last = text:match('^.*()\n')
        if last then
          self.out:write(text:sub(1, last))
          st.partial = text:sub(last + 1)
        else
          st.partial = text
        end
        data = f:read(1 << 20)
      end
      f:close()
    end
    if final and st.partial ~= '' then
      self.out:write(st.partial, '\n')
      st.partial = ''
    end
  end
  self.out:flush()
end

local function say(fmt, ...)
  io.stderr:write('tplua slurm: ', string.format(fmt, ...), '\n')
  io.stderr:flush()
end


-- Parses a subcommand's flags (plus --help) and its one positional argument. Returns opts and
-- the argument list, or nil, nil and the exit status (after the usage or its error).
local function parse_one(args, spec, what)
  local cli = require('tp.cli')
  spec.help = 'boolean'
  local opts, rest = cli.parse(args, spec)
  if not opts then
    return nil, nil, cli.usage_error('slurm', rest, M.usage)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return nil, nil, 0
  end
  if #rest ~= 1 then
    return nil, nil, cli.usage_error('slurm', what .. ' expected', M.usage)
  end
  return opts, rest
end

-- Inside an allocation (salloc, or a batch script that runs tplua): the script runs here as it
-- is (its #SBATCH lines are comments), its srun making a step of the allocation; the step's exit
-- status is the run's. Never cancels the allocation.
local function step(dir, script, state_path, alloc)
  local proc = require('tp.proc')
  local slurm = require('tp.launch.slurm')
  local job_id = math.tointeger(tonumber(alloc)) or alloc
  remove_node_logs(dir)
  local state = { job_id = job_id, mode = 'step', finished = false, script = script,
    submitted_at = now_iso() }
  write_state(state_path, state)
  say('running in allocation %s: the script runs here, srun makes a job step', tostring(job_id))
  local follow = follower(io.stdout, dir)
  local parent = ppid()
  local loop <close> = proc.loop()
  local result, detached
  local function forward(stream, line, partial)
    local out = stream == 'stderr' and io.stderr or io.stdout
    out:write(line, partial and '' or '\n')
    out:flush()
  end
  local sh = assert(loop:spawn({ argv = { 'bash', script }, cwd = dir, on_line = forward,
    on_exit = function(r)
      result = r
    end }))
  loop:timer(0.5, function()
    follow:poll(false)
    if ppid() ~= parent and not detached then
      -- Nobody follows the step any more: stop it (the allocation stays).
      detached = true
      sh:kill()
    end
  end)
  local summary = assert(loop:run())
  follow:poll(true)
  local nodelist = os.getenv('SLURM_JOB_NODELIST')
  state.nodelist = nodelist
  state.nodes = nodelist and slurm.hostnames(nodelist) or {}
  state.node_logs = node_logs(dir)
  state.ended_at = now_iso()
  if summary.interrupted or detached then
    state.state = 'CANCELLED'
    state.finished = true
    state.exit_code = result and result.code
    write_state(state_path, state)
    say('step stopped (%s)', detached and 'lost the parent process'
      or tostring(summary.interrupted))
    return summary.exit_code or 130
  end
  state.exit_code = result.code
  state.state = result.code == 0 and 'COMPLETED' or 'FAILED'
  state.finished = true
  write_state(state_path, state)
  say('job %s ended %s (exit code %s)', tostring(job_id), state.state, tostring(result.code))
  return result.code == 0 and 0 or result.code
end

local function job(args)
  local cli = require('tp.cli')
  local fs = require('tp.fs')
  local proc = require('tp.proc')
  local slurm = require('tp.launch.slurm')
  local opts, rest, usage_code = parse_one(args, { poll = 'number', submit = 'boolean' },
    'job: one DIR')
  if not opts then
    return usage_code
  end
  local poll = opts.poll or 5
  if poll <= 0 then
    return cli.usage_error('slurm', '--poll must be > 0', M.usage)
  end
  local dir = fs.realpath(rest[1]) or rest[1]
  local script = fs.join(dir, slurm.SCRIPT)
  if not fs.is_file(script) then
    say('%s: no batch script (tp.launch.slurm writes it)', script)
    return 1
  end
  local state_path = fs.join(dir, slurm.STATE)
  local alloc = os.getenv('SLURM_JOB_ID')
  if alloc and alloc ~= '' and not opts.submit then
    return step(dir, script, state_path, alloc)
  end
  local state = read_state(state_path) or {}
  local job_id, attached
  if state.job_id and not state.finished then
    local info = M.query(state.job_id)
    if info then
      job_id, attached = state.job_id, true
      say('attached to job %s (%s)', tostring(job_id), info.state)
    else
      say('job %s of an earlier attempt is unknown to Slurm now: submitting again',
        tostring(state.job_id))
    end
  end
  if not job_id then
    remove_node_logs(dir)
    local r, err = proc.run({ 'sbatch', '--parsable', script }, { cwd = dir, timeout = 120 })
    if not r then
      say('sbatch cannot be started: %s', tostring(err))
      return 1
    end
    job_id = r.code == 0 and r.stdout:match('^%s*(%d+)')
    if not job_id then
      say('sbatch failed (exit status %d): %s', r.code, (r.stderr .. r.stdout):gsub('%s+$', ''))
      write_state(state_path, { error = 'sbatch: ' .. (r.stderr:gsub('%s+$', '')),
        finished = true, script = script })
      return 1
    end
    job_id = math.tointeger(tonumber(job_id))
    state = { job_id = job_id, submitted_at = now_iso(), finished = false, script = script,
      attempts = (state.attempts or 0) + 1 }
    write_state(state_path, state)
    say('submitted batch job %d', job_id)
  end
  state.attached = attached or false
  local follow = follower(io.stdout, dir)
  local batch_log = fs.join(dir, string.format('slurm-%s.out', tostring(job_id)))
  follow:add(batch_log)

  local parent = ppid()
  local loop <close> = proc.loop()
  -- A child that only waits: while it lives, SIGINT/SIGTERM sent to this process end it and the
  -- loop reports them, instead of killing this process in the middle of a write.
  local sentinel = assert(loop:spawn({ argv = { 'sleep', 'infinity' } }))
  local last_state, last_reason, info
  local ended, detached = false, false
  local next_poll = 0
  local clock = require('tp.gpu').now
  loop:timer(0.5, function()
    follow:poll(false)
    if ppid() ~= parent then
      detached = true
      sentinel:kill('SIGKILL')
      return
    end
    if clock() < next_poll or ended then
      return
    end
    next_poll = clock() + poll
    local q = M.query(job_id)
    if q then
      info = q
      if q.state ~= last_state or q.reason ~= last_reason then
        local why = (q.reason and q.reason ~= 'None') and (' (' .. q.reason .. ')') or ''
        say('job %s %s%s', tostring(job_id), q.state, why)
        last_state, last_reason = q.state, q.reason
      end
      local s = slurm.STATES[q.state]
      if s and s.final then
        ended = true
        sentinel:kill('SIGKILL')
      end
    end
  end)
  local summary = assert(loop:run())
  follow:poll(ended)
  if not ended then
    state.finished = false
    write_state(state_path, state)
    if detached then
      say('lost the parent process: stopped following job %s, which is left running', job_id)
      return EX_DETACHED
    end
    say('interrupted (%s): stopped following job %s', tostring(summary.interrupted), job_id)
    return summary.exit_code or 130
  end
  local hosts = info.nodelist and slurm.hostnames(info.nodelist) or {}
  state.finished = true
  state.state = info.state
  state.exit_code = info.exit_code
  state.signal = info.signal
  state.reason = info.reason
  state.nodelist = info.nodelist
  state.nodes = hosts
  state.node_logs = node_logs(dir)
  state.batch_log = batch_log
  state.ended_at = now_iso()
  state.source = info.source
  write_state(state_path, state)
  say('job %s ended %s (exit code %s)', tostring(job_id), info.state, tostring(info.exit_code))
  if info.state == 'COMPLETED' then
    return 0
  end
  local code = info.exit_code or 1
  return code ~= 0 and code or 1
end

local function hostnames(args)
  local slurm = require('tp.launch.slurm')
  local opts, rest, code = parse_one(args, { parser = 'boolean' }, 'hostnames: one LIST')
  if not opts then
    return code
  end
  local hosts, err
  if opts.parser then
    hosts, err = slurm.expand_nodelist(rest[1])
  else
    hosts, err = slurm.hostnames(rest[1])
  end
  if not hosts then
    io.stderr:write('tplua slurm: ', err, '\n')
    return 1
  end
  for _, h in ipairs(hosts) do
    io.stdout:write(h, '\n')
  end
  return 0
end

function M.run(args)
  local sub = args[1]
  local rest = table.move(args, 2, #args, 1, {})
  if sub == 'job' then
    return job(rest)
  elseif sub == 'hostnames' then
    return hostnames(rest)
  elseif sub == '--help' or sub == '-h' then
    io.stdout:write(M.usage)
    return 0
  end
  return require('tp.cli').usage_error('slurm', sub and ("unknown subcommand '" .. sub .. "'")
    or 'a subcommand (job, hostnames) is required', M.usage)
end

return M
