-- The cluster smoke test: tplua's reference trainer (tools/reftrain, a small Llama-shaped model
-- trained with PyTorch DDP) on 2 ranks of this machine, 40 iterations on a repeated token
-- pattern, so the loss must fall. gloo on CPU, NCCL when GPUs are there. Under a minute on 2
-- CPU cores; it writes a normal run record and log:
--
--   tplua run examples/smoke.lua [--results DIR]
--
-- `tplua preflight examples/smoke.lua` checks first, without running it, what it needs here (the
-- interpreter, the trainer accepting its flags, room for the results; docs/preflight.md);
-- `tplua run` makes the same checks before it starts.
--
-- TPLUA_SMOKE_RANKS sets the number of ranks (default 2), TPLUA_PYTHON the interpreter (default
-- /usr/bin/python3). docs/reftrain.md explains the trainer; examples/slurm_smoke.lua is the
-- same through Slurm.
local tp = require('tp')

local ranks = math.tointeger(tonumber(os.getenv('TPLUA_SMOKE_RANKS') or '2'))
if not ranks or ranks < 1 then
  error('examples/smoke.lua: TPLUA_SMOKE_RANKS must be a whole number >= 1', 0)
end

local ref = tp.frameworks.get('reference')
local config = ref.smoke_config(ranks)
-- `tplua ranks` starts the ranks with torch.distributed's environment (RANK, WORLD_SIZE,
-- MASTER_PORT, ...); on a machine with a working torchrun, tp.launch.get('torchrun') works too.
local cmd = tp.launch.get('ranks').wrap(ref.build(config), { nproc_per_node = ranks })

return tp.campaign({
  name = 'reference trainer smoke test',
  results = 'output/smoke',
  runs = { {
    id = string.format('smoke-%dranks', ranks),
    argv = cmd.argv,
    env = cmd.env,
    parser = ref.parser,
    framework = 'reference',
    methodology = 'identical_config',
    config = config,
    timeout = 600,
  } },
  abort = { stall_minutes = 5 },
})
