-- tp: the entry point of the tplua standard library. Modules load lazily on first use:
-- `tp.yaml`, `tp.json`, `tp.fs`, `tp.log`, `tp.stats`, `tp.gpu`, ... (see docs/DESIGN.md).
local M = {}

M.version = require('tp._host').version

setmetatable(M, {
  __index = function(t, name)
    if type(name) ~= 'string' or not name:match('^[%a_][%w_]*$') then
      return nil
    end
    local ok, mod = pcall(require, 'tp.' .. name)
    if not ok then
      if tostring(mod):find("module 'tp." .. name .. "' not found", 1, true) then
        return nil
      end
      error(mod, 2)
    end
    rawset(t, name, mod)
    return mod
  end,
})

return M
