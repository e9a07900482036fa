-- tp.cmd: the built-in commands (`tplua COMMAND ARGS...`). Each command is the module
-- tp.cmd.<name>, a table {summary = 'one line', usage = 'text', run = function(args) -> code};
-- this face lists them and runs one (the host calls tp.cmd.main).
local M = {}

local function stdlib_dirs()
  local dirs = {}
  for entry in package.path:gmatch('[^;]+') do
    local dir = entry:match('^(.*)/%?%.lua$')
    if dir then
      dirs[#dirs + 1] = dir
    end
  end
  return dirs
end

-- The names of the built-in commands (without loading them), sorted.
local function command_names()
  local fs = require('tp.fs')
  local seen, out = {}, {}
  for _, dir in ipairs(stdlib_dirs()) do
    for _, e in ipairs(fs.list(dir .. '/tp/cmd') or {}) do
      local name = e.name:match('^([%w_%-]+)%.lua$')
      if name and name ~= 'init' and not seen[name] then
        seen[name] = true
        out[#out + 1] = name
      end
    end
  end
  table.sort(out)
  return out
end

--- Lists the built-in commands: {{name=, summary=}, ...}, sorted by name.
function M.commands()
  local fs = require('tp.fs')
  local seen, out = {}, {}
  for _, dir in ipairs(stdlib_dirs()) do
    local entries = fs.list(dir .. '/tp/cmd')
    for _, e in ipairs(entries or {}) do
      local name = e.name:match('^([%w_%-]+)%.lua$')
      if name and name ~= 'init' and not seen[name] then
        seen[name] = true
        local ok, mod = pcall(require, 'tp.cmd.' .. name)
        local summary = ok and type(mod) == 'table' and mod.summary
          or ('(cannot load: ' .. tostring(mod):gsub('\n.*', '') .. ')')
        out[#out + 1] = { name = name, summary = summary }
      end
    end
  end
  table.sort(out, function(a, b)
    return a.name < b.name
  end)
  return out
end

--- Prints the command list to `out` (default io.stdout).
function M.print_commands(out)
  out = out or io.stdout
  out:write('usage: tplua COMMAND [ARGS...]   or   tplua SCRIPT.lua [ARGS...]\n\ncommands:\n')
  local list = M.commands()
  local width = 0
  for _, c in ipairs(list) do
    width = math.max(width, #c.name)
  end
  for _, c in ipairs(list) do
    out:write(string.format('  %-' .. width .. 's  %s\n', c.name, c.summary))
  end
  out:write("\n'tplua COMMAND --help' describes a command.\n")
end

--- The module of command `name` ('tp.cmd.<name>', dashes as underscores), or nil when no
--- command has that name.
function M.module_name(name)
  local modname = 'tp.cmd.' .. name:gsub('%-', '_')
  if name == 'init' or not name:match('^[%w_%-]+$')
    or not package.searchpath(modname, package.path) then
    return nil
  end
  return modname
end

--- Runs command `name` with `args`; returns the exit status.
function M.main(name, args)
  local modname = M.module_name(name)
  if not modname then
    -- A near miss names the command meant; the list follows in either case.
    local near = require('tp.cli').suggest(name, command_names())
    io.stderr:write(string.format("tplua: unknown command '%s'%s\n", name,
      near and string.format("; did you mean '%s'?", near) or ''))
    M.print_commands(io.stderr)
    return 2
  end
  local cmd = require(modname)
  if type(cmd) ~= 'table' or type(cmd.run) ~= 'function' then
    error(string.format('%s: a command module must return {summary=, usage=, run=}', modname))
  end
  local code = cmd.run(args)
  io.stdout:flush()
  return math.tointeger(code) or 0
end

return M
