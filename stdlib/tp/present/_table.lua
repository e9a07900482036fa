-- tp.present._table: aligned text tables for the terminal reports of tp.present (trace
-- breakdowns, op tables): cells padded to their column's width, text columns left-aligned.

local M = {}

--- `name` cut to `width` bytes with '...' at the end when longer.
function M.short(name, width)
  if #name <= width then
    return name
  end
  return name:sub(1, width - 3) .. '...'
end

--- `s` padded with spaces to `w` bytes, on the right when `right` (left-aligned), else the left.
function M.pad(s, w, right)
  s = tostring(s)
  if #s >= w then
    return s
  end
  return right and s .. string.rep(' ', w - #s) or string.rep(' ', w - #s) .. s
end

--- Appends to `out` the lines of a table of rows (lists of strings) under `header`, columns
--- aligned: the first left-aligned, and the last too with `left_last` (a column of text); each
--- line starts with `indent` (default two spaces).
function M.text(out, header, rows, indent, left_last)
  local widths = {}
  for i, h in ipairs(header) do
    widths[i] = #h
  end
  for _, r in ipairs(rows) do
    for i, c in ipairs(r) do
      widths[i] = math.max(widths[i] or 0, #tostring(c))
    end
  end
  local function line(r)
    local cells = {}
    for i, c in ipairs(r) do
      cells[i] = M.pad(c, widths[i], i == 1 or (left_last and i == #r))
    end
    out[#out + 1] = (indent or '  ') .. table.concat(cells, '  '):gsub('%s+$', '')
  end
  line(header)
  for _, r in ipairs(rows) do
    line(r)
  end
end

return M
