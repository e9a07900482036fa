-- tp.launch.local: runs the command as it is, one process on this machine (single-GPU runs,
-- and commands that start their own workers such as Primus' launcher).

local launch = require('tp.launch')

local M = {}

--- Returns a copy of the command, unchanged. Takes no options.
---@param cmd table  { argv, env, ... }
---@param opts? table  must be empty
---@return table cmd
function M.wrap(cmd, opts)
  local out = launch._copy(cmd, 'launch.local')
  launch._check_opts(opts, {}, 'launch.local')
  return out
end

return M
