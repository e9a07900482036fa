-- tp.pretty: readable text for any Lua value — nested tables with sorted keys, cycles marked,
-- long arrays elided. Used by the REPL to print results.
local M = {}

local function is_ident(s)
  return type(s) == 'string' and s:match('^[%a_][%w_]*$') ~= nil
end

local type_order = { number = 1, string = 2, boolean = 3 }

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then
    return (type_order[ta] or 9) < (type_order[tb] or 9) or
      ((type_order[ta] or 9) == (type_order[tb] or 9) and ta < tb)
  end
  if ta == 'number' or ta == 'string' then
    return a < b
  end
  return tostring(a) < tostring(b)
end

local function scalar(v)
  local t = type(v)
  if t == 'string' then
    return string.format('%q', v):gsub('\\\n', '\\n')
  elseif t == 'number' then
    if math.type(v) == 'float' then
      if v ~= v then
        return 'nan'
      elseif v == math.huge then
        return 'inf'
      elseif v == -math.huge then
        return '-inf'
      end
      local s = string.format('%.14g', v)
      if tonumber(s) ~= v then
        s = string.format('%.17g', v)
      end
      if not s:find('[%.eEn]') then
        s = s .. '.0'
      end
      return s
    end
    return tostring(v)
  end
  local mt = getmetatable(v)
  if (t == 'table' or t == 'userdata') and type(mt) == 'table' and mt.__tostring then
    local ok, s = pcall(tostring, v)
    if ok then
      return s
    end
  end
  return tostring(v)
end

--- Formats `v` as text.
---@param v any
---@param opts? {indent?: string, max_items?: integer, max_depth?: integer, width?: integer}
---   indent (default two spaces), max_items per table before eliding (default 20),
---   max_depth (default 8), width: tables shorter than this print on one line (default 80)
---@return string
function M.format(v, opts)
  opts = opts or {}
  local indent = opts.indent or '  '
  local max_items = opts.max_items or 20
  local max_depth = opts.max_depth or 8
  local width = opts.width or 80
  local visiting = {}

  local function fmt(x, depth)
    if type(x) ~= 'table' then
      return scalar(x)
    end
    local mt = getmetatable(x)
    if type(mt) == 'table' and mt.__tostring then
      return scalar(x)
    end
    if visiting[x] then
      return '<cycle: ' .. tostring(x) .. '>'
    end
    if depth >= max_depth then
      return '{...}'
    end
    visiting[x] = true
    local parts = {}
    local n = #x
    local shown = 0
    for i = 1, n do
      if shown >= max_items then
        parts[#parts + 1] = string.format('... (%d more)', n - shown)
        break
      end
      parts[#parts + 1] = fmt(x[i], depth + 1)
      shown = shown + 1
    end
    local keys = {}
    for k in pairs(x) do
      if not (math.type(k) == 'integer' and k >= 1 and k <= n) then
        keys[#keys + 1] = k
      end
    end
    table.sort(keys, key_less)
    local kshown = 0
    for _, k in ipairs(keys) do
      if kshown >= max_items then
        parts[#parts + 1] = string.format('... (%d more keys)', #keys - kshown)
        break
      end
      local ks = is_ident(k) and k or ('[' .. scalar(k) .. ']')
      parts[#parts + 1] = ks .. ' = ' .. fmt(x[k], depth + 1)
      kshown = kshown + 1
    end
    visiting[x] = nil
    if #parts == 0 then
      return '{}'
    end
    local one = '{ ' .. table.concat(parts, ', ') .. ' }'
    if #one <= width and not one:find('\n') then
      return one
    end
    local pad = indent:rep(depth + 1)
    return '{\n' .. pad .. table.concat(parts, ',\n' .. pad) .. '\n' .. indent:rep(depth) .. '}'
  end

  return fmt(v, 0)
end

return M
