-- tp.catalog._rows: what every catalogue offers over its rows, in order: ids(), get(id), list().
local M = {}

--- Returns ids, get and list over `rows` (each with a unique `id`). `by_id` maps id -> row;
--- `public` makes the copy a caller gets; `fname` names get in its misuse error and `unknown`
--- formats the message for an unknown id (with the id and the known ids, comma-separated).
---@param rows table[]
---@param by_id table<string, table>
---@param public fun(row: table): table
---@param fname string
---@param unknown string a format with two %s: the id, then the known ids
function M.accessors(rows, by_id, public, fname, unknown)
  local function ids()
    local out = {}
    for i, row in ipairs(rows) do
      out[i] = row.id
    end
    return out
  end
  local function get(id)
    if type(id) ~= 'string' then
      error(string.format('%s: string expected, got %s', fname, type(id)), 2)
    end
    local row = by_id[id]
    if not row then
      return nil, string.format(unknown, id, table.concat(ids(), ', ')), 'ENOENT'
    end
    return public(row)
  end
  local function list()
    local out = {}
    for i, row in ipairs(rows) do
      out[i] = public(row)
    end
    return out
  end
  return ids, get, list
end

return M
