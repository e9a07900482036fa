-- tp.launch.torchrun: starts one worker per GPU with PyTorch's elastic launcher.
-- Option names: pytorch/pytorch torch/distributed/run.py get_args_parser (--nnodes,
-- --nproc-per-node, --node-rank, --rdzv-backend, --rdzv-endpoint, --rdzv-id, --standalone,
-- --max-restarts, --log-dir, --tee, --local-ranks-filter, -m/--module, --no-python,
-- --master-addr, --master-port).
--
-- Decisions: a single node without an endpoint uses --standalone (a private c10d store on a
-- free port, nothing to configure); several nodes use the c10d rendezvous at
-- `rdzv_endpoint` (required), whose node ranks are assigned by the rendezvous, or the static
-- rendezvous (--master-addr/--master-port/--node-rank) when asked for. Worker output is
-- teed (--tee 3: stdout and stderr) into per-rank files only when `log_dir` is given: the run
-- supervisor already captures the console, and --tee adds `[default0]:` prefixes to it.

local launch = require('tp.launch')

local M = {}

local OPTS = {
  nnodes = 'number', nproc_per_node = 'number', node_rank = 'number',
  rdzv_backend = 'string', rdzv_endpoint = 'string', rdzv_id = 'string',
  master_addr = 'string', master_port = 'number', max_restarts = 'number',
  log_dir = 'string', local_ranks_filter = 'string', torchrun = 'string',
}

local function positive(opts, name, default)
  local v = opts[name]
  if v == nil then
    return default
  end
  if math.type(v) ~= 'integer' or v < 0 or (v == 0 and name ~= 'node_rank'
    and name ~= 'max_restarts') then
    error(string.format('launch.torchrun: option %s must be a positive integer, got %s', name,
      tostring(v)), 3)
  end
  return v
end

local function is_python(word)
  local base = word:match('[^/]*$')
  return base:match('^python%d*%.?%d*$') ~= nil
end

--- Wraps a per-process command in torchrun. A command whose `launcher` is 'self' (it starts
--- its own workers, e.g. Primus) is not wrapped: the rendezvous settings are passed in the
--- environment variables it reads (NNODES, NODE_RANK, GPUS_PER_NODE, MASTER_ADDR,
--- MASTER_PORT; AMD-AGI/Primus runner/primus-cli-direct.sh).
---```lua
---local cmd = tp.launch.get('torchrun').wrap(megatron.build(config), { nproc_per_node = 8 })
----- torchrun --nnodes 1 --nproc-per-node 8 --standalone /workspace/Megatron-LM/pretrain_gpt.py ...
---```
---@param cmd table  { argv, env, launcher?, ... }
---@param opts table  { nproc_per_node, nnodes = 1, node_rank = 0, rdzv_backend = 'c10d',
---  rdzv_endpoint?, rdzv_id = 'tplua', master_addr?, master_port?, max_restarts = 0,
---  log_dir?, local_ranks_filter?, torchrun = 'torchrun' }
---@return table cmd
function M.wrap(cmd, opts)
  local out = launch._copy(cmd, 'launch.torchrun')
  opts = launch._check_opts(opts, OPTS, 'launch.torchrun')
  local nproc = positive(opts, 'nproc_per_node', nil)
  if nproc == nil then
    error('launch.torchrun: option nproc_per_node is required', 2)
  end
  local nnodes = positive(opts, 'nnodes', 1)
  local node_rank = positive(opts, 'node_rank', 0)
  if node_rank >= nnodes then
    error(string.format('launch.torchrun: node_rank %d must be below nnodes %d', node_rank,
      nnodes), 2)
  end
  local backend = opts.rdzv_backend or 'c10d'
  if backend ~= 'c10d' and backend ~= 'static' then
    error("launch.torchrun: option rdzv_backend must be 'c10d' or 'static', got " .. backend, 2)
  end
  local endpoint = opts.rdzv_endpoint
  if endpoint and not endpoint:match('^[^%s:]+:%d+$') then
    error("launch.torchrun: option rdzv_endpoint must be 'host:port', got '" .. endpoint .. "'",
      2)
  end
  if backend == 'static' and not opts.master_addr then
    error('launch.torchrun: the static rendezvous needs master_addr', 2)
  end
  if backend == 'c10d' and nnodes > 1 and not endpoint then
    error('launch.torchrun: rdzv_endpoint (host:port) is required when nnodes > 1', 2)
  end

  if out.launcher == 'torchrun' and out.argv[1]:match('[^/]*$') == 'torchrun' then
    error('launch.torchrun: the command is already started by torchrun', 2)
  end

  if out.launcher == 'self' then
    -- The command starts torchrun itself from these variables.
    out.env.NNODES = tostring(nnodes)
    out.env.NODE_RANK = tostring(node_rank)
    out.env.GPUS_PER_NODE = tostring(nproc)
    local host, port = opts.master_addr, opts.master_port and tostring(opts.master_port)
    if endpoint then
      host, port = endpoint:match('^(.*):(%d+)$')
    end
    out.env.MASTER_ADDR = host or 'localhost'
    if port then
      out.env.MASTER_PORT = port
    end
    return out
  end

  local argv = { opts.torchrun or 'torchrun', '--nnodes', tostring(nnodes),
                 '--nproc-per-node', tostring(nproc) }
  local function add(...)
    for _, a in ipairs({ ... }) do
      argv[#argv + 1] = a
    end
  end
  if backend == 'static' then
    add('--node-rank', tostring(node_rank), '--master-addr', opts.master_addr)
    if opts.master_port then
      add('--master-port', tostring(opts.master_port))
    end
  elseif nnodes == 1 and not endpoint then
    add('--standalone')
  else
    add('--rdzv-backend', 'c10d', '--rdzv-endpoint', endpoint, '--rdzv-id',
      opts.rdzv_id or 'tplua')
  end
  local restarts = positive(opts, 'max_restarts', 0)
  if restarts > 0 then
    add('--max-restarts', tostring(restarts))
  end
  if opts.log_dir then
    add('--log-dir', opts.log_dir, '--tee', '3')
  end
  if opts.local_ranks_filter then
    if not opts.local_ranks_filter:match('^%d+[,%d]*$') then
      error("launch.torchrun: option local_ranks_filter must be like '0' or '0,1', got '"
        .. opts.local_ranks_filter .. "'", 2)
    end
    add('--local-ranks-filter', opts.local_ranks_filter)
  end
  local inner = out.argv
  local first = 1
  if is_python(inner[1]) then
    -- torchrun runs the script (or `-m module`) with its own interpreter.
    first = 2
    if inner[2] == '-m' then
      if not inner[3] then
        error('launch.torchrun: cmd.argv has -m without a module', 2)
      end
      add('-m')
      first = 3
    end
    if not inner[first] then
      error('launch.torchrun: cmd.argv names the interpreter but no script', 2)
    end
  else
    add('--no-python')
  end
  for i = first, #inner do
    argv[#argv + 1] = inner[i]
  end
  out.argv = argv
  out.launcher = 'torchrun'
  return out
end

return M
