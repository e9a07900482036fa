-- tp.frameworks.nccl_tests: the commands of NVIDIA's nccl-tests and AMD's rccl-tests (the same
-- programs and flags: all_reduce_perf, all_gather_perf, ...), one per collective, for a launcher:
-- `local` runs one process that drives every GPU of the node (-g GPUS); `slurm` one task per GPU
-- (-g 1; the tests must be built with MPI=1 and Slurm start them with PMI). The `ranks`
-- launcher is refused: nccl-tests starts several processes only through MPI. Not a training
-- framework: its command prints no iteration; recipes/collectives.lua turns its output into the
-- record's `collectives` section (tp.parse.collectives; docs/collectives.md).

local fw = require('tp.frameworks')

local M = {}

M.name = 'nccl_tests'
-- Its log is a table of bandwidths, no training log: tp.log's auto-detection reads it (for
-- failure signatures: NCCL errors, a GPU lost).
M.parser = 'auto'

--- The programs, by collective (the names tp.parse.collectives gives them).
M.PROGRAMS = {
  all_reduce = 'all_reduce_perf', all_gather = 'all_gather_perf',
  reduce_scatter = 'reduce_scatter_perf', all_to_all = 'alltoall_perf',
  broadcast = 'broadcast_perf', reduce = 'reduce_perf', send_recv = 'sendrecv_perf',
  gather = 'gather_perf', scatter = 'scatter_perf', hypercube = 'hypercube_perf',
}

--- Where the programs are when the config does not say: the build directory of each project's
--- own instructions, by vendor.
M.DEFAULT_DIRS = { nvidia = '/opt/nccl-tests/build', amd = '/opt/rccl-tests/build' }

--- The config `build` fills in.
M.DEFAULTS = { min_bytes = '8', max_bytes = '8G', step_factor = 2, iters = 20, warmup = 5,
  dtype = 'float', op = 'sum', check = 1, cycles = 1, gpus_per_node = 8, nodes = 1,
  launcher = 'local', vendor = 'nvidia' }

local fail = fw._fail

local KEYS = { binary_dir = 'string', min_bytes = 'size', max_bytes = 'size', step_factor = 'pos',
  iters = 'pos', warmup = 'int', dtype = 'string', op = 'string', check = 'int', cycles = 'pos',
  gpus_per_node = 'pos', nodes = 'pos', launcher = 'string', vendor = 'string', slurm = 'table' }

local function size_ok(v)
  return (math.type(v) == 'integer' and v > 0) or (type(v) == 'string'
    and v:match('^%d+[KkMmGg]?$') ~= nil)
end

--- The config with its defaults, checked: raises a message naming the key (a plan-time error).
---@param config table
---@return table
function M.config(config)
  if type(config) ~= 'table' then
    fail('nccl_tests: config: table expected, got %s', type(config))
  end
  local c = {}
  for k, v in pairs(M.DEFAULTS) do
    c[k] = v
  end
  for k, v in pairs(config) do
    local kind = KEYS[k]
    if not kind then
      fail('nccl_tests: config.%s: unknown key (%s)', tostring(k),
        table.concat(fw._sorted_keys(KEYS), ', '))
    end
    if kind == 'size' and not size_ok(v) then
      fail("nccl_tests: config.%s: a size such as 8, 64K, 128M or 8G expected, got %s", k,
        tostring(v))
    elseif (kind == 'pos' or kind == 'int') and (math.type(v) ~= 'integer'
      or v < (kind == 'pos' and 1 or 0)) then
      fail('nccl_tests: config.%s: a whole number >= %d expected, got %s', k,
        kind == 'pos' and 1 or 0, tostring(v))
    elseif (kind == 'string' or kind == 'table') and type(v) ~= kind then
      fail('nccl_tests: config.%s: %s expected, got %s', k, kind, type(v))
    end
    c[k] = v
  end
  if c.vendor ~= 'nvidia' and c.vendor ~= 'amd' then
    fail("nccl_tests: config.vendor: 'nvidia' or 'amd', got '%s'", tostring(c.vendor))
  end
  if c.launcher == 'ranks' then
    fail('nccl_tests: config.launcher: ranks cannot start nccl-tests or rccl-tests: their '
      .. 'processes find each other only through MPI (mpirun, or srun with PMI), not through '
      .. "the environment variables the ranks launcher sets; use 'local' (one process, -g "
      .. "GPUS) or 'slurm' (one task per GPU, tests built with MPI=1)")
  end
  if c.launcher ~= 'local' and c.launcher ~= 'slurm' then
    fail("nccl_tests: config.launcher: 'local' or 'slurm', got '%s'", tostring(c.launcher))
  end
  if c.launcher == 'local' and c.nodes > 1 then
    fail('nccl_tests: config.nodes: %d nodes need the slurm launcher', c.nodes)
  end
  c.binary_dir = c.binary_dir or M.DEFAULT_DIRS[c.vendor]
  return c
end

--- The command of one collective's test (`collective`: a key of M.PROGRAMS): { argv, env,
--- launcher, entry (the program's path), parser, iterations = false, ranks }. The slurm
--- launcher wraps it (config.slurm: tp.launch.slurm's options; dir is required there).
---```lua
---local nt = tp.frameworks.get('nccl_tests')
---local cmd = nt.build({ gpus_per_node = 8, binary_dir = '/opt/nccl-tests/build' }, 'all_reduce')
----- /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 8 -n 20 -w 5 -d float -o sum ...
---```
---@param config table see M.config
---@param collective? string default all_reduce
---@return table cmd
function M.build(config, collective)
  local c = M.config(config)
  collective = collective or 'all_reduce'
  local program = M.PROGRAMS[collective]
  if not program then
    fail("nccl_tests: unknown collective '%s' (%s)", tostring(collective),
      table.concat(fw._sorted_keys(M.PROGRAMS), ', '))
  end
  local entry = c.binary_dir:gsub('/+$', '') .. '/' .. program
  local per_process = c.launcher == 'slurm' and 1 or c.gpus_per_node
  local argv = { entry, '-b', tostring(c.min_bytes), '-e', tostring(c.max_bytes), '-f',
    tostring(c.step_factor), '-g', tostring(per_process), '-n', tostring(c.iters), '-w',
    tostring(c.warmup), '-d', c.dtype, '-o', c.op, '-c', tostring(c.check), '-N',
    tostring(c.cycles) }
  local cmd = { argv = argv, env = {}, parser = M.parser, entry = entry, launcher = 'local',
    iterations = false, ranks = c.gpus_per_node * c.nodes, collective = collective }
  if c.launcher == 'slurm' then
    local so = {}
    for k, v in pairs(c.slurm or {}) do
      so[k] = v
    end
    so.nodes, so.gpus_per_node, so.tasks = c.nodes, c.gpus_per_node, 'per_gpu'
    so.vendor = so.vendor or c.vendor
    cmd = require('tp.launch.slurm').wrap(cmd, so)
    cmd.iterations, cmd.ranks, cmd.collective = false, c.gpus_per_node * c.nodes, collective
  end
  return cmd
end

return M
