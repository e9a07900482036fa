-- tp.launch.ranks: starts one worker per GPU (or CPU rank) without torchrun: `tplua ranks`
-- spawns the processes itself with PyTorch's environment contract (RANK, LOCAL_RANK,
-- WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), the variables
-- torch.distributed's env:// initialisation reads (torch/distributed/rendezvous.py
-- _env_rendezvous_handler) and torchrun sets for its workers. For machines whose torchrun is
-- missing or broken, and for trainers that take env init (the reference trainer).

local launch = require('tp.launch')

local M = {}

local OPTS = {
  nproc_per_node = 'number', nnodes = 'number', node_rank = 'number', master_addr = 'string',
  master_port = 'number', tplua = 'string', kill_grace = 'number',
}

local function whole(opts, name, default, min)
  local v = opts[name]
  if v == nil then
    return default
  end
  if math.type(v) ~= 'integer' or v < min then
    error(string.format('launch.ranks: option %s must be an integer >= %d, got %s', name, min,
      tostring(v)), 3)
  end
  return v
end

--- The TCP ports sockets of this machine use: the local ports of /proc/net/tcp and tcp6 (any
--- state), as a set.
---@return table<integer, true>
function M.ports_in_use()
  local used = {}
  for _, path in ipairs({ '/proc/net/tcp', '/proc/net/tcp6' }) do
    local f = io.open(path, 'r')
    if f then
      for line in f:lines() do
        local hex = line:match('^%s*%d+:%s+%x+:(%x+)%s')
        if hex then
          used[tonumber(hex, 16)] = true
        end
      end
      f:close()
    end
  end
  return used
end

--- Returns a TCP port that no socket of this machine uses now, from 20000-39999 (below
--- Linux's default ephemeral range, 32768-60999, only partly: collisions with outgoing
--- connections are rarer there). Another program may still take it before the rendezvous
--- binds it, as with torchrun's own choice of a free port.
---@return integer
function M.free_port()
  local used = M.ports_in_use()
  -- The start: this process's pid and the monotonic clock's microseconds, so that two tplua
  -- started in the same second (whose math.random may share a seed: Lua seeds it from the
  -- time and an address, which a sanitizer's allocator makes equal) start apart.
  local f = io.open('/proc/self/stat', 'r')
  local pid = f and f:read('n') or 0
  if f then
    f:close()
  end
  local us = math.floor(require('tp.gpu').now() * 1e6)
  local start = (math.tointeger(pid) or 0) * 7919 + us + math.random(0, 19999)
  for i = 0, 19999 do
    local p = 20000 + (start + i * 7) % 20000
    if not used[p] then
      return p
    end
  end
  error('launch.ranks: no free TCP port found in 20000-39999', 2)
end

--- The environment of one worker: `i` is its local rank (0-based).
---@param i integer
---@param o table { nproc_per_node, nnodes, node_rank, master_addr, master_port }
---@return table<string, string>
function M.worker_env(i, o)
  return {
    RANK = tostring(o.node_rank * o.nproc_per_node + i),
    LOCAL_RANK = tostring(i),
    WORLD_SIZE = tostring(o.nnodes * o.nproc_per_node),
    LOCAL_WORLD_SIZE = tostring(o.nproc_per_node),
    GROUP_RANK = tostring(o.node_rank),
    NODE_RANK = tostring(o.node_rank),
    MASTER_ADDR = o.master_addr,
    MASTER_PORT = tostring(o.master_port),
  }
end

--- Wraps a per-process command in `tplua ranks`, which starts `nproc_per_node` copies of it.
--- Without `master_port` each start picks a free port; several nodes need `master_addr` and
--- `master_port` (the first node's address, reachable from the others).
---```lua
---local cmd = tp.launch.get('ranks').wrap(ref.build(config), { nproc_per_node = 2 })
----- /usr/local/bin/tplua ranks --nproc-per-node 2 -- /usr/bin/python3 reftrain.py ...
---```
---@param cmd table  { argv, env, launcher?, ... }
---@param opts table  { nproc_per_node, nnodes = 1, node_rank = 0, master_addr = '127.0.0.1',
---  master_port?, tplua? (path of the tplua executable; default: this one), kill_grace? }
---@return table cmd
function M.wrap(cmd, opts)
  local out = launch._copy(cmd, 'launch.ranks')
  opts = launch._check_opts(opts, OPTS, 'launch.ranks')
  local nproc = whole(opts, 'nproc_per_node', nil, 1)
  if nproc == nil then
    error('launch.ranks: option nproc_per_node is required', 2)
  end
  local nnodes = whole(opts, 'nnodes', 1, 1)
  local node_rank = whole(opts, 'node_rank', 0, 0)
  if node_rank >= nnodes then
    error(string.format('launch.ranks: node_rank %d must be below nnodes %d', node_rank, nnodes),
      2)
  end
  if nnodes > 1 and (not opts.master_addr or not opts.master_port) then
    error('launch.ranks: master_addr and master_port are required when nnodes > 1', 2)
  end
  if out.launcher == 'self' then
    error('launch.ranks: the command starts its own workers (launcher self): run it with the '
      .. 'local launcher', 2)
  end
  local exe = opts.tplua or require('tp._host').exe_path() or 'tplua'
  local argv = { exe, 'ranks', '--nproc-per-node', tostring(nproc) }
  local function add(...)
    for _, a in ipairs({ ... }) do
      argv[#argv + 1] = a
    end
  end
  if nnodes > 1 then
    add('--nnodes', tostring(nnodes), '--node-rank', tostring(node_rank))
  end
  if opts.master_addr then
    add('--master-addr', opts.master_addr)
  end
  if opts.master_port then
    add('--master-port', tostring(whole(opts, 'master_port', nil, 1)))
  end
  if opts.kill_grace then
    add('--kill-grace', tostring(opts.kill_grace))
  end
  add('--')
  for _, a in ipairs(out.argv) do
    argv[#argv + 1] = a
  end
  out.argv = argv
  out.launcher = 'ranks'
  return out
end

return M
