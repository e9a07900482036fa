-- Records the real step-time series the stopping benchmark and tests replay: full runs of the
-- reference trainer (tools/reftrain: PyTorch DDP over gloo on this machine's CPUs, started by
-- `tplua ranks`, one log line per iteration), several configurations, several runs of each. Writes
-- tests/fixtures/stopping/reftrain_runs.json: per run its configuration, command, host, and the
-- iteration numbers and step times exactly as the log printed them. The file is rewritten
-- (atomically) after each run, and runs already in it are not run again: an interrupted
-- recording goes on where it stopped.
--
--   tplua bench/stopping/record.lua [REPEATS [ITERS [OUT]]]     (from the repository root;
--                                                                default 6 runs of 300 iterations)
local tp = require('tp')
local fs = require('tp.fs')
local json = require('tp.json')

local repeats = math.tointeger(tonumber(arg[1] or '6'))
local iters = math.tointeger(tonumber(arg[2] or '300'))
local out_path = arg[3] or 'tests/fixtures/stopping/reftrain_runs.json'
assert(repeats and repeats >= 1 and iters and iters >= 20,
  'usage: record.lua [REPEATS [ITERS [OUT]]]')

-- The configurations: the reference trainer's tiny Llama (2 layers, hidden 64) at a few batch
-- shapes and rank counts, each a few tens of milliseconds per iteration on 2 CPU cores.
local CONFIGS = {
  { name = '2ranks-mbs4-seq64', ranks = 2, mbs = 4, gbs = 8, seq_len = 64 },
  { name = '2ranks-mbs4-seq128', ranks = 2, mbs = 4, gbs = 8, seq_len = 128 },
  { name = '1rank-mbs8-seq64', ranks = 1, mbs = 8, gbs = 8, seq_len = 64 },
  { name = '2ranks-mbs2-seq64-ga2', ranks = 2, mbs = 2, gbs = 8, seq_len = 64 },
}

local ref = tp.frameworks.get('reference')
local tmp = (os.getenv('TMPDIR') or '/tmp') .. '/tplua-stoprec'
assert(fs.mkdir_p(tmp))
-- The 1-minute load average (/proc/loadavg): what else the machine ran beside the recording.
local function loadavg()
  local f = io.open('/proc/loadavg', 'r')
  local v = f and tonumber((f:read('l') or ''):match('^(%S+)'))
  if f then
    f:close()
  end
  return v or json.null
end

local function save(runs, host, ncpu)
  local doc = {
    schema = 'tplua.stopping.series/1',
    what = 'real step times of full reference-trainer runs (tools/reftrain, PyTorch DDP over '
      .. 'gloo on CPU, tplua ranks), as their logs printed them (ms, one decimal)',
    recorded_by = 'tplua bench/stopping/record.lua',
    recorded_at = tp.run.iso_time(),
    host = { uname = host and host.stdout:gsub('%s+$', '') or json.null,
      cpus = ncpu and tonumber(ncpu.stdout) or json.null },
    runs = runs,
  }
  assert(fs.mkdir_p(fs.dirname(out_path)))
  assert(fs.write_atomic(out_path, json.encode(doc, { sort_keys = true }) .. '\n'))
end

local old = fs.is_file(out_path) and json.load_file(out_path)
local runs = type(old) == 'table' and type(old.runs) == 'table' and old.runs or {}
local have = {}
for _, r in ipairs(runs) do
  have[r.id] = true
end
local host = tp.proc.run({ 'uname', '-srm' })
local ncpu = tp.proc.run({ 'nproc' })
for rep = 1, repeats do
  for _, c in ipairs(CONFIGS) do
    local config = ref.smoke_config(c.ranks)
    config.training.mbs, config.training.gbs = c.mbs, c.gbs
    config.training.seq_len, config.training.iters = c.seq_len, iters
    config.training.log_interval = 1
    config.training.seed = 1000 + rep
    local cmd = tp.launch.get('ranks').wrap(ref.build(config), { nproc_per_node = c.ranks })
    local id = string.format('%s-r%d', c.name, rep)
    if have[id] then
      goto next
    end
    local log_path = tmp .. '/' .. id .. '.log'
    local load_before = loadavg()
    local r = assert(tp.proc.run(cmd.argv, { env = cmd.env, log = log_path, timeout = 1800 }))
    local log = assert(tp.log.parse(log_path))
    local its, times = {}, {}
    for _, rec in ipairs(log.records) do
      if rec.step_time_s then
        its[#its + 1] = rec.iteration
        times[#times + 1] = rec.step_time_s * 1000
      end
    end
    io.stderr:write(string.format('%s: exit %s, %d step times\n', id, tostring(r.code), #times))
    if r.code == 0 and #times == iters then
      runs[#runs + 1] = { id = id, config = c, seed = config.training.seed, train_iters = iters,
        command = tp.launch.describe(cmd), iterations = its, step_time_ms = times,
        loadavg = { before = load_before, after = loadavg() } }
      save(runs, host, ncpu)
    end
    ::next::
  end
end
print(string.format('%d runs written to %s', #runs, out_path))
