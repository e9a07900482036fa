-- tplua ranks: starts N copies of a program as the ranks of one distributed job on this machine,
-- each with PyTorch's environment contract (tp.launch.ranks), forwards their output, and stops
-- them all when one fails.
local M = {}

M.summary = 'start N ranks of a distributed program here (RANK, WORLD_SIZE, MASTER_PORT, ...)'

M.usage = [[
usage: tplua ranks --nproc-per-node N [flags] -- PROGRAM [ARGS...]

Starts N copies of PROGRAM, the local ranks of one torch.distributed job, without torchrun.
Each gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR
and MASTER_PORT (what env:// initialisation reads). Their output is passed through as it comes.
When a rank exits with a non-zero status the others get SIGTERM (SIGKILL after the grace);
SIGINT or SIGTERM sent to tplua reaches every rank.

  --nproc-per-node N  ranks on this node (required)
  --nnodes M          nodes of the job (default 1); each node runs its own 'tplua ranks'
  --node-rank K       this node's index, 0..M-1 (default 0): RANK = K*N + LOCAL_RANK
  --master-addr HOST  rendezvous host (default 127.0.0.1; with M > 1: node 0's address)
  --master-port PORT  rendezvous port (default: a free port; required with M > 1)
  --kill-grace S      seconds from SIGTERM to SIGKILL when stopping ranks (default 5)
  -h, --help          show this help

example:
  tplua ranks --nproc-per-node 2 -- /usr/bin/python3 tools/reftrain/reftrain.py --train-iters 20

exit status: 0 when every rank exited 0; else the status of the first rank that failed (128 +
signal when killed by one); 130/143 when interrupted; 2 on a usage error.
]]

function M.run(args)
  local cli = require('tp.cli')
  local opts, rest = cli.parse(args, { nproc_per_node = 'integer', nnodes = 'integer',
    node_rank = 'integer', master_addr = 'string', master_port = 'integer',
    kill_grace = 'number', help = 'boolean' })
  if not opts then
    return cli.usage_error('ranks', rest, M.usage)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #rest == 0 then
    return cli.usage_error('ranks', 'no PROGRAM given (after --)', M.usage)
  end
  if not opts.nproc_per_node or opts.nproc_per_node < 1 then
    return cli.usage_error('ranks', '--nproc-per-node N (N >= 1) is required', M.usage)
  end
  local nnodes = opts.nnodes or 1
  local node_rank = opts.node_rank or 0
  if nnodes < 1 or node_rank < 0 or node_rank >= nnodes then
    return cli.usage_error('ranks', string.format('--node-rank %d must be in 0..%d', node_rank,
      nnodes - 1), M.usage)
  end
  if nnodes > 1 and not opts.master_port then
    return cli.usage_error('ranks', '--master-port is required with --nnodes > 1 (every node '
      .. 'must use the same)', M.usage)
  end
  if opts.master_port and (opts.master_port < 1 or opts.master_port > 65535) then
    return cli.usage_error('ranks', '--master-port must be in 1..65535', M.usage)
  end
  local grace = opts.kill_grace or 5
  if grace < 0 then
    return cli.usage_error('ranks', '--kill-grace must be >= 0', M.usage)
  end
  local ranks = require('tp.launch.ranks')
  local proc = require('tp.proc')
  local o = { nproc_per_node = opts.nproc_per_node, nnodes = nnodes, node_rank = node_rank,
    master_addr = opts.master_addr or '127.0.0.1',
    master_port = opts.master_port or ranks.free_port() }

  local loop <close> = proc.loop()
  local procs, failure = {}, nil
  local function forward(stream, line, partial)
    local out = stream == 'stderr' and io.stderr or io.stdout
    out:write(line, partial and '' or '\n')
    out:flush()
  end
  for i = 0, o.nproc_per_node - 1 do
    local rank = o.node_rank * o.nproc_per_node + i
    local p, err = loop:spawn({
      argv = rest, env = ranks.worker_env(i, o), kill_grace = grace, on_line = forward,
      on_exit = function(r)
        procs[i] = nil
        if r.code ~= 0 and not failure then
          failure = { rank = rank, code = r.code, signal = r.signal }
          for _, other in pairs(procs) do
            other:kill()
          end
        end
      end,
    })
    if not p then
      io.stderr:write(string.format('tplua ranks: cannot start rank %d: %s\n', rank, err))
      failure = failure or { rank = rank, code = 127 }
      for _, other in pairs(procs) do
        other:kill()
      end
      break
    end
    procs[i] = p
  end
  local summary = assert(loop:run())
  if summary.interrupted then
    return summary.exit_code or 130
  end
  if failure then
    io.stderr:write(string.format('tplua ranks: rank %d %s; the other ranks were stopped\n',
      failure.rank, failure.signal and ('was killed by ' .. failure.signal)
        or ('exited with status ' .. failure.code)))
    return failure.code
  end
  return 0
end

return M
