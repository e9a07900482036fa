-- tp: the entry point of the tplua standard library. Modules load lazily on first use:
-- `tp.yaml`, `tp.json`, `tp.fs`, `tp.log`, `tp.stats`, `tp.gpu`, ... (see docs/DESIGN.md).
local M = {}

M.version = require('tp._host').version

--- The public face of a package: `face` (a new table when nil) whose fields `modules` are the
--- package's public modules, each loaded on first use: tp.analyse.compare is
--- require('tp.analyse.compare'). `face.MODULES` lists them (docs/DESIGN.md, "Packages").
---@param prefix string the package's name, e.g. 'tp.analyse'
---@param modules string[] its public modules, without the prefix
---@param face? table the package's own functions, when it has some
function M.package(prefix, modules, face)
  face = face or {}
  local public = {}
  for _, name in ipairs(modules) do
    public[name] = true
  end
  rawset(face, 'MODULES', modules)
  return setmetatable(face, {
    __index = function(t, name)
      if not public[name] then
        return nil
      end
      local mod = require(prefix .. '.' .. name)
      rawset(t, name, mod)
      return mod
    end,
    __complete = public, -- the REPL completes tp.analyse.<TAB> with the module names
  })
end

-- What the REPL completes after `tp.` (lua/tplua.c reads __complete): the shared utilities,
-- the packages, and the short names the moved modules keep (tp.compare, tp.config, ...).
local COMPLETE = {}
for _, name in ipairs({ 'json', 'yaml', 'fs', 'cli', 'secrets', 'proc', 'stats', 'gpu', 'catalog',
  'launch', 'frameworks', 'data', 'plan', 'parse', 'run', 'analyse', 'present', 'history',
  'experiment' }) do
  COMPLETE[name] = true
end
do
  local ok, moved = pcall(require, 'tp._moved')
  for old in pairs(ok and type(moved) == 'table' and moved or {}) do
    COMPLETE[old:match('^tp%.([%w_]+)$') or ''] = true
  end
  COMPLETE[''] = nil
end

setmetatable(M, {
  __complete = COMPLETE,
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
