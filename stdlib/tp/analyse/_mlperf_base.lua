-- tp.analyse._mlperf_base: what the MLPerf modules (mlperf, _mlperf_rcp, _mlperf_export) and the
-- command share: messages that name their file once.
local M = {}

--- `err` prefixed with `path`, unless it names the path already (tp.fs and tp.json messages
--- start with it).
---@param path string
---@param err any
---@return string
function M.named(path, err)
  err = tostring(err)
  if err:sub(1, #path + 1) == path .. ':' then
    return err
  end
  return path .. ': ' .. err
end

return M
