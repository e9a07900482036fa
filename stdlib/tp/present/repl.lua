-- tp.repl: what the interactive loop uses to show values (tables pretty-printed).
local pretty = require('tp.present.pretty')

local M = {}

--- Prints each value, tables formatted by tp.pretty, separated by tabs.
function M.print(...)
  local n = select('#', ...)
  local out = {}
  for i = 1, n do
    local v = select(i, ...)
    out[i] = type(v) == 'string' and v or pretty.format(v)
  end
  io.stdout:write(table.concat(out, '\t'), '\n')
  io.stdout:flush()
end

return M
