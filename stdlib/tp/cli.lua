-- tp.cli: dispatch of built-in commands (`tplua COMMAND ARGS...`): each command is the module
-- tp.cmd.<name>, a table {summary = 'one line', usage = 'text', run = function(args) -> code}.
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

--- Lists the built-in commands: {{name=, summary=}, ...}, sorted by name.
function M.commands()
  local fs = require('tp.fs')
  local seen, out = {}, {}
  for _, dir in ipairs(stdlib_dirs()) do
    local entries = fs.list(dir .. '/tp/cmd')
    for _, e in ipairs(entries or {}) do
      local name = e.name:match('^([%w_%-]+)%.lua$')
      if name and not seen[name] then
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

--- Runs command `name` with `args`; returns the exit status.
function M.main(name, args)
  local modname = 'tp.cmd.' .. name:gsub('%-', '_')
  if not package.searchpath(modname, package.path) then
    io.stderr:write(string.format("tplua: unknown command '%s'\n", name))
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

--- Parses command-line flags. `spec` maps a flag name to 'boolean', 'string', 'number',
--- 'integer' or 'list' (repeatable string). Returns opts, positional or nil, message.
---```lua
---local opts, rest = cli.parse(args, { json = 'string', quiet = 'boolean' })
---```
function M.parse(args, spec)
  local opts, rest = {}, {}
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == '--' then
      for j = i + 1, #args do
        rest[#rest + 1] = args[j]
      end
      break
    end
    local name, inline = a:match('^%-%-([%w][%w%-_]*)=(.*)$')
    if not name then
      name = a:match('^%-%-([%w][%w%-_]*)$')
    end
    if name then
      local key = name:gsub('%-', '_')
      local kind = spec[key]
      if kind == nil then
        return nil, string.format("unknown option '--%s'", name)
      end
      if kind == 'boolean' then
        if inline then
          return nil, string.format("option '--%s' takes no value", name)
        end
        opts[key] = true
      else
        local v = inline
        if v == nil then
          i = i + 1
          v = args[i]
          if v == nil then
            return nil, string.format("option '--%s' needs a value", name)
          end
        end
        if kind == 'number' or kind == 'integer' then
          local n = tonumber(v)
          if kind == 'integer' then
            n = n and math.tointeger(n)
          end
          if n == nil then
            return nil, string.format("option '--%s': %s expected, got '%s'", name, kind, v)
          end
          v = n
        end
        if kind == 'list' then
          opts[key] = opts[key] or {}
          table.insert(opts[key], v)
        else
          opts[key] = v
        end
      end
    elseif a == '-h' then
      opts.help = spec.help and true or nil
      if not spec.help then
        return nil, "unknown option '-h'"
      end
    elseif a:sub(1, 1) == '-' and a ~= '-' then
      return nil, string.format("unknown option '%s'", a)
    else
      rest[#rest + 1] = a
    end
    i = i + 1
  end
  return opts, rest
end

--- Reports a usage error for command `name` and returns 2.
function M.usage_error(name, msg, usage)
  io.stderr:write(string.format('tplua %s: %s\n', name, msg))
  if usage then
    io.stderr:write(usage:gsub('\n*$', '\n'))
  end
  return 2
end

--- The RECIPE argument that `tplua run|plan|preflight RECIPE [flags]` take first: returns the
--- path and the remaining flags, or nil and the exit status once the usage error or the help
--- text (--help, -h) is printed.
---```lua
---local path, rest = cli.recipe_arg('run', args, M.usage)
---if not path then return rest end
---```
---@param name string the command
---@param args string[]
---@param usage string
---@return string|nil path
---@return string[]|integer rest_or_status
function M.recipe_arg(name, args, usage)
  if #args == 0 then
    return nil, M.usage_error(name, 'no RECIPE given', usage)
  end
  if args[1] == '--help' or args[1] == '-h' then
    io.stdout:write(usage)
    return nil, 0
  end
  if args[1]:sub(1, 1) == '-' then
    return nil, M.usage_error(name, 'the first argument must be the RECIPE file', usage)
  end
  return args[1], table.move(args, 2, #args, 1, {})
end

return M
