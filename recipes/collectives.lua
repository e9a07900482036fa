-- Collective bandwidth: NVIDIA's nccl-tests or AMD's rccl-tests (all_reduce_perf and the other
-- *_perf programs) run through tplua's launchers, one run per collective, each a run record of
-- kind collective_bench with its busbw and algbw per message size (docs/collectives.md). Records
-- land in the results directory (and in the history, as every run does when TPLUA_HISTORY is
-- set); `tplua compare` sets two platforms' results side by side.
--
--   tplua plan recipes/collectives.lua         # the commands
--   tplua preflight recipes/collectives.lua    # fails when the programs are not there
--   tplua run recipes/collectives.lua [--results DIR]
--
-- From the environment (defaults in brackets):
--   TPLUA_COLLECTIVES          the collectives, comma-separated [all_reduce,all_gather,
--                              reduce_scatter,all_to_all]
--   TPLUA_COLLECTIVES_DIR      the directory of the *_perf programs [/opt/nccl-tests/build on
--                              NVIDIA, /opt/rccl-tests/build on AMD]
--   TPLUA_COLLECTIVES_VENDOR   nvidia or amd [the GPUs tplua sees, else nvidia]
--   TPLUA_COLLECTIVES_GPUS     GPUs per node [the GPUs tplua sees, else 8]
--   TPLUA_COLLECTIVES_NODES    nodes [1]; more than one needs the slurm launcher
--   TPLUA_COLLECTIVES_LAUNCHER local (one process driving the node's GPUs) or slurm (one task
--                              per GPU; the tests built with MPI=1) [local]; ranks is refused
--   TPLUA_COLLECTIVES_MIN, _MAX  message sizes [8, 8G]; TPLUA_COLLECTIVES_ITERS [20],
--   TPLUA_COLLECTIVES_WARMUP [5], TPLUA_COLLECTIVES_DTYPE [float], TPLUA_COLLECTIVES_CYCLES [1]
--   TPLUA_SLURM_DIR (slurm: an absolute directory every node sees), TPLUA_SLURM_PARTITION,
--   TPLUA_SLURM_ACCOUNT, TPLUA_SLURM_TIME, TPLUA_SLURM_GPUS (0: ask Slurm for no GPU)
local tp = require('tp')

local nt = tp.frameworks.get('nccl_tests')
local pc = require('tp.parse.collectives')

local function env(name, default)
  local v = os.getenv(name)
  return (v ~= nil and v ~= '') and v or default
end

local function env_int(name, default)
  local v = env(name)
  if v == nil then
    return default
  end
  local n = math.tointeger(tonumber(v))
  if not n or n < 0 then
    error(string.format('recipes/collectives.lua: %s must be a whole number, got %s', name, v), 0)
  end
  return n
end

-- The GPUs this machine shows (vendor and count), when tplua can probe them.
local function probed()
  local ok, devs = pcall(function()
    return tp.gpu.probe()
  end)
  if not ok or type(devs) ~= 'table' or type(devs.devices) ~= 'table' or #devs.devices == 0 then
    return nil
  end
  return devs.devices[1].vendor == 'amd' and 'amd' or 'nvidia', #devs.devices
end

local pvendor, pcount = probed()
local vendor = env('TPLUA_COLLECTIVES_VENDOR', pvendor or 'nvidia')
local launcher = env('TPLUA_COLLECTIVES_LAUNCHER', 'local')
local config = {
  binary_dir = env('TPLUA_COLLECTIVES_DIR'),
  vendor = vendor,
  launcher = launcher,
  gpus_per_node = env_int('TPLUA_COLLECTIVES_GPUS', pcount or 8),
  nodes = env_int('TPLUA_COLLECTIVES_NODES', 1),
  min_bytes = env('TPLUA_COLLECTIVES_MIN', '8'),
  max_bytes = env('TPLUA_COLLECTIVES_MAX', '8G'),
  iters = env_int('TPLUA_COLLECTIVES_ITERS', 20),
  warmup = env_int('TPLUA_COLLECTIVES_WARMUP', 5),
  dtype = env('TPLUA_COLLECTIVES_DTYPE', 'float'),
  cycles = env_int('TPLUA_COLLECTIVES_CYCLES', 1),
}

local names = {}
for name in env('TPLUA_COLLECTIVES', 'all_reduce,all_gather,reduce_scatter,all_to_all')
  :gmatch('[^,%s]+') do
  names[#names + 1] = name
end

local runs = {}
for _, name in ipairs(names) do
  local c = {}
  for k, v in pairs(config) do
    c[k] = v
  end
  local id = string.format('%s-%s-%dx%d', vendor == 'amd' and 'rccl' or 'nccl', name,
    config.nodes, config.gpus_per_node)
  if launcher == 'slurm' then
    local dir = env('TPLUA_SLURM_DIR')
    if not dir or dir:sub(1, 1) ~= '/' then
      error('recipes/collectives.lua: the slurm launcher needs TPLUA_SLURM_DIR, an absolute '
        .. 'directory every node sees', 0)
    end
    c.slurm = { dir = dir .. '/' .. id, partition = env('TPLUA_SLURM_PARTITION'),
      account = env('TPLUA_SLURM_ACCOUNT'), time = env('TPLUA_SLURM_TIME'),
      gpus = env('TPLUA_SLURM_GPUS') ~= '0' }
  end
  local ok, cmd = pcall(nt.build, c, name)
  if not ok then
    error('recipes/collectives.lua: ' .. tostring(cmd), 0)
  end
  runs[#runs + 1] = {
    id = id,
    argv = cmd.argv,
    env = cmd.env,
    files = cmd.files,
    files_dir = cmd.files_dir,
    launcher = cmd.launcher,
    framework = nt.name,
    platform = vendor == 'amd' and 'amd' or 'nvd',
    gpus = cmd.ranks,
    config = c,
    iterations = false,
    timeout = 3600,
    -- The output becomes the record's collectives section (tp.parse.collectives).
    on_record = function(path)
      assert(pc.complete_record(path))
    end,
  }
end

return tp.campaign({
  name = 'collective bandwidth',
  results = 'output/collectives',
  runs = runs,
})
