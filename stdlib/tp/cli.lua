-- tp.cli: what the commands and recipes share to read a command line: flags (parse), usage
-- errors, the RECIPE argument. The commands themselves are dispatched by tp.cmd.
local M = {}

-- The optimal string alignment distance of a and b: insertions, deletions, substitutions and
-- transpositions of neighbours ('trcae' -> 'trace' is 1).
local function distance(a, b)
  local la, lb = #a, #b
  local d = {}
  for i = 0, la do
    d[i] = { [0] = i }
  end
  for j = 1, lb do
    d[0][j] = j
  end
  for i = 1, la do
    for j = 1, lb do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

--- The candidate that `word` was most likely meant to be: the one nearest by edit distance
--- (insertion, deletion, substitution, swap of neighbours), when it is near enough (a third of
--- the word's length, at least 1, and less than the word itself) and clearly the nearest (no
--- other candidate as near); else nil.
---```lua
---cli.suggest('trcae', { 'trace', 'report', 'run' })   --> 'trace'
---```
---@param word string
---@param candidates string[]
---@return string|nil
function M.suggest(word, candidates)
  local best, best_d, tie
  for _, c in ipairs(candidates) do
    local d = distance(word, c)
    if not best_d or d < best_d then
      best, best_d, tie = c, d, false
    elseif d == best_d and c ~= best then
      tie = true
    end
  end
  if not best or tie or best_d >= #word or best_d > math.max(1, #word // 3) then
    return nil
  end
  return best
end

-- The long options of a parse spec, as typed ('--dry-run').
local function option_names(spec)
  local out = {}
  for k in pairs(spec) do
    out[#out + 1] = (k:gsub('_', '-'))
  end
  table.sort(out)
  return out
end

-- "unknown option '--josn'", with "; did you mean '--json'?" when one option is clearly meant.
local function unknown_option(typed, name, spec)
  local msg = string.format("unknown option '%s'", typed)
  local near = M.suggest(name, option_names(spec))
  if near then
    msg = string.format("%s; did you mean '--%s'?", msg, near)
  end
  return msg
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
        return nil, unknown_option('--' .. name, name, spec)
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
      return nil, unknown_option(a, a:match('^%-+([^=]*)') or a, spec)
    else
      rest[#rest + 1] = a
    end
    i = i + 1
  end
  return opts, rest
end

--- The synopsis of a command's usage text: its first line and the indented lines that follow
--- it (its other forms, its continued options), up to a blank or unindented line.
function M.synopsis(usage)
  local lines = {}
  for line in (usage .. '\n'):gmatch('(.-)\n') do
    if #lines == 0 then
      if not line:match('^%s*$') then
        lines[1] = line
      end
    elseif line:match('^%s+%S') then
      lines[#lines + 1] = line
    else
      break
    end
  end
  return table.concat(lines, '\n')
end

--- Reports a usage error for command `name` and returns 2: the message, the synopsis of its
--- usage and where the rest is, not the whole help.
function M.usage_error(name, msg, usage)
  local out = { string.format('tplua %s: %s', name, msg) }
  if usage then
    local syn = M.synopsis(usage)
    if syn ~= '' then
      out[#out + 1] = syn
    end
    out[#out + 1] = string.format("see 'tplua %s --help'", name:match('^%S+'))
  end
  io.stderr:write(table.concat(out, '\n'), '\n')
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
