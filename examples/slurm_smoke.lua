-- The smoke test through Slurm: the reference trainer on 2 nodes x 2 ranks, one srun task per
-- rank, as one batch job on the cluster the environment names (SLURM_CONF, or the cluster's own
-- configuration). Same config and, at the same seed, the same losses as
-- `TPLUA_SMOKE_RANKS=4 tplua run examples/smoke.lua`.
--
--   tplua plan examples/slurm_smoke.lua     (prints the sbatch script)
--   tplua run examples/slurm_smoke.lua
--
-- Environment:
--   TPLUA_SLURM_PARTITION     partition (default: the cluster's default partition)
--   TPLUA_SLURM_GPUS_PER_NODE request this many GPUs per node and run one rank per GPU
--                             (default: no GPU request, 2 ranks per node on CPU cores)
--   TPLUA_SMOKE_DIR           run directory, on storage every node sees (default
--                             output/slurm-smoke under the current directory); the job's script,
--                             node logs, record and journal go there
-- docs/slurm.md explains every field and what tplua does at each job state.
local tp = require('tp')

local gpus = math.tointeger(tonumber(os.getenv('TPLUA_SLURM_GPUS_PER_NODE') or ''))
local per_node = gpus or 2
local dir = os.getenv('TPLUA_SMOKE_DIR') or 'output/slurm-smoke'
if dir:sub(1, 1) ~= '/' then
  dir = tp.fs.realpath('.') .. '/' .. dir
end

local ref = tp.frameworks.get('reference')
local config = ref.smoke_config(per_node, 2)
local id = 'slurm-smoke-2x' .. per_node
local cmd = tp.launch.get('slurm').wrap(ref.build(config), {
  dir = dir .. '/' .. id,
  nodes = 2,
  gpus_per_node = per_node,
  gpus = gpus ~= nil,
  partition = os.getenv('TPLUA_SLURM_PARTITION'),
  time = '00:10:00',
  poll = 1,
})

return tp.campaign({
  name = 'reference trainer smoke test (slurm)',
  results = dir,
  runs = { {
    id = id,
    argv = cmd.argv,
    env = cmd.env,
    files = cmd.files,
    files_dir = cmd.files_dir,
    launcher = cmd.launcher,
    parser = ref.parser,
    framework = 'reference',
    methodology = 'identical_config',
    config = config,
    timeout = 1800,
  } },
  abort = { stall_minutes = 10 },
})
