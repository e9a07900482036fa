-- Fails when the engine's C files depend on each other in a circle (DESIGN.md, "engine/ files").
--
--   tplua tests/deps/engine_deps.lua [--nm NM] SRC_DIR [OBJECT_OR_ARCHIVE ...]
--
-- Include graph (SRC_DIR's *.c and *.h): a header x.h belongs to x.c, and every file of module x
-- (x.c, x.h) that includes y.h depends on module y. A header without an x.c is a declarations-only
-- header (types, macros, static inline functions): one that declares a function is owned by no
-- file and fails. A circle between two or more modules fails, and is printed.
--
-- Link graph (the objects, or the members of the archives, given after SRC_DIR; read with
-- `nm -A -g -P`): object x depends on object y when x uses a symbol y defines. A circle fails,
-- printed with a symbol of each step. With the objects, every function a header x.h declares
-- must be defined in x's own object.
--
-- Exit status 0 when every check passes, 1 when one fails, 2 on misuse. Plain Lua 5.4: nothing
-- of tp.* is used, so the check runs under any Lua with io.popen.

local function die(msg)
  io.stderr:write('engine_deps: ', msg, '\n')
  os.exit(2)
end

local function shquote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function read(path)
  local f, err = io.open(path, 'rb')
  if not f then
    die(err)
  end
  local s = f:read('a')
  f:close()
  return s
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  return keys
end

-- Arguments.
local nm = 'nm'
local src_dir
local objects = {}
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == '--nm' then
      nm = arg[i + 1] or die('--nm needs a program')
      i = i + 1
    elseif not src_dir then
      src_dir = a
    else
      objects[#objects + 1] = a
    end
    i = i + 1
  end
end
if not src_dir then
  die('usage: engine_deps.lua [--nm NM] SRC_DIR [OBJECT_OR_ARCHIVE ...]')
end

local problems = {}
local function problem(fmt, ...)
  problems[#problems + 1] = string.format(fmt, ...)
end

-- --- Sources ------------------------------------------------------------------------------------

-- The C text without comments; string and character literals blanked unless keep_strings.
local function strip(src, keep_strings)
  local out = {}
  local i, n = 1, #src
  while i <= n do
    local c = src:sub(i, i)
    local two = src:sub(i, i + 1)
    if two == '/*' then
      local e = src:find('*/', i + 2, true) or n - 1
      out[#out + 1] = ' '
      i = e + 2
    elseif two == '//' then
      local e = src:find('\n', i + 2, true) or n + 1
      i = e
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and src:sub(j, j) ~= c and src:sub(j, j) ~= '\n' do
        if src:sub(j, j) == '\\' then
          j = j + 1
        end
        j = j + 1
      end
      out[#out + 1] = keep_strings and src:sub(i, j) or (c .. c)
      i = j + 1
    else
      local j = src:find('[/"\']', i + 1) or n + 1
      out[#out + 1] = src:sub(i, j - 1)
      i = j
    end
  end
  return table.concat(out)
end

-- The names of the functions (not static) a header declares or defines at file scope.
local function declared_functions(src)
  local text = strip(src, false)
  -- Preprocessor lines, with their continuations.
  text = text:gsub('\\\n', ' '):gsub('\n[ \t]*#[^\n]*', '\n'):gsub('^[ \t]*#[^\n]*', '')
  local names = {}
  local function statement(s)
    s = s:gsub('^%s+', '')
    if s:match('^typedef%f[%W]') or s:match('^static%f[%W]') or s:match('^_?[Ss]tatic_assert') then
      return
    end
    local name, rest = s:match('([%a_][%w_]*)%s*(%b())')
    if name and name ~= '__attribute__' and not rest:match('^%(%s*%*') then
      names[#names + 1] = name
    end
  end
  local depth, buf, head, pos = 0, {}, nil, 1
  while pos <= #text do
    local j = text:find('[{};]', pos) or #text + 1
    local body, sep = text:sub(pos, j - 1), text:sub(j, j)
    pos = j + 1
    if depth == 0 then
      buf[#buf + 1] = body
    end
    if sep == '{' then
      if depth == 0 then
        head = table.concat(buf)
      end
      depth = depth + 1
    elseif sep == '}' then
      depth = depth - 1
      if depth == 0 and head and head:find('(', 1, true) and not head:find('=', 1, true)
        and not head:match('^%s*typedef') then
        statement(head)  -- a function defined in the header
        buf, head = {}, nil
      end
    elseif sep == ';' and depth == 0 then
      statement(table.concat(buf))
      buf, head = {}, nil
    end
  end
  return names
end

local files = {}
do
  local p = io.popen('ls -1A -- ' .. shquote(src_dir))
  for name in p:lines() do
    if name:match('%.[ch]$') then
      files[#files + 1] = name
    end
  end
  p:close()
  table.sort(files)
end
if #files == 0 then
  die(src_dir .. ': no .c or .h files')
end

local modules = {}  -- stem -> { c = bool, h = bool }
for _, f in ipairs(files) do
  local stem, ext = f:match('^(.*)%.([ch])$')
  modules[stem] = modules[stem] or {}
  modules[stem][ext] = true
end

-- A module's name as printed: its .c, or its header for a declarations-only one.
local function label(stem)
  return modules[stem].c and stem .. '.c' or stem .. '.h'
end

-- --- Graphs -------------------------------------------------------------------------------------

local function new_graph()
  return { nodes = {}, edges = {}, why = {} }
end

local function add_edge(g, from, to, why)
  g.nodes[from], g.nodes[to] = true, true
  g.edges[from] = g.edges[from] or {}
  if not g.edges[from][to] then
    g.edges[from][to] = true
    g.why[from .. '\0' .. to] = why
  end
end

local function count_edges(g)
  local n = 0
  for _, out in pairs(g.edges) do
    for _ in pairs(out) do
      n = n + 1
    end
  end
  return n
end

-- Strongly connected components (Tarjan), nodes and successors in sorted order.
local function components(g)
  local index, low, on, stack, comps, next_index = {}, {}, {}, {}, {}, 0
  local function visit(v)
    index[v], low[v] = next_index, next_index
    next_index = next_index + 1
    stack[#stack + 1] = v
    on[v] = true
    for _, w in ipairs(sorted_keys(g.edges[v] or {})) do
      if not index[w] then
        visit(w)
        low[v] = math.min(low[v], low[w])
      elseif on[w] then
        low[v] = math.min(low[v], index[w])
      end
    end
    if low[v] == index[v] then
      local comp = {}
      repeat
        local w = table.remove(stack)
        on[w] = nil
        comp[#comp + 1] = w
      until w == v
      table.sort(comp)
      comps[#comps + 1] = comp
    end
  end
  for _, v in ipairs(sorted_keys(g.nodes)) do
    if not index[v] then
      visit(v)
    end
  end
  return comps
end

-- A shortest circle through comp[1] inside the component, as a list of nodes (first = last).
local function circle(g, comp)
  local inside = {}
  for _, v in ipairs(comp) do
    inside[v] = true
  end
  local start = comp[1]
  local prev, queue, head = { [start] = false }, { start }, 1
  while head <= #queue do
    local v = queue[head]
    head = head + 1
    for _, w in ipairs(sorted_keys(g.edges[v] or {})) do
      if w == start then
        local path = { start }
        local u = v
        while u ~= start do
          table.insert(path, 2, u)
          u = prev[u]
        end
        path[#path + 1] = start
        return path
      end
      if inside[w] and prev[w] == nil then
        prev[w] = v
        queue[#queue + 1] = w
      end
    end
  end
  return { start, start }
end

-- Reports every circle of g; returns how many there are.
local function report_circles(g, kind, name)
  local n = 0
  for _, comp in ipairs(components(g)) do
    if #comp > 1 then
      n = n + 1
      local path = circle(g, comp)
      local names, whys = {}, {}
      for i, v in ipairs(path) do
        names[i] = name(v)
        if i > 1 then
          whys[#whys + 1] = g.why[path[i - 1] .. '\0' .. v]
        end
      end
      problem('%s circle: %s\n    (%s)', kind, table.concat(names, ' -> '),
        table.concat(whys, '; '))
    end
  end
  return n
end

-- One order in which the nodes can be built up, each after what it depends on (for the summary).
local function layers(g)
  local level = {}
  local function depth(v, seen)
    if level[v] then
      return level[v]
    end
    if seen[v] then
      return 0  -- a circle: reported elsewhere
    end
    seen[v] = true
    local d = 0
    for w in pairs(g.edges[v] or {}) do
      d = math.max(d, depth(w, seen) + 1)
    end
    seen[v] = nil
    level[v] = d
    return d
  end
  local by = {}
  for _, v in ipairs(sorted_keys(g.nodes)) do
    local d = depth(v, {})
    by[d + 1] = by[d + 1] or {}
    table.insert(by[d + 1], v)
  end
  return by
end

-- --- Include graph ------------------------------------------------------------------------------

local inc = new_graph()
local header_funcs = {}  -- stem -> names declared in stem.h
for _, f in ipairs(files) do
  local stem, ext = f:match('^(.*)%.([ch])$')
  local src = read(src_dir .. '/' .. f)
  inc.nodes[stem] = true
  for line in strip(src, true):gmatch('[^\n]+') do
    local h = line:match('^%s*#%s*include%s*"([^"]+)"')
    local hstem = h and h:match('^([^/]+)%.h$')
    if hstem and modules[hstem] and modules[hstem].h and hstem ~= stem then
      add_edge(inc, stem, hstem, f .. ' includes ' .. h)
    end
  end
  if ext == 'h' then
    header_funcs[stem] = declared_functions(src)
    if not modules[stem].c and #header_funcs[stem] > 0 then
      problem('%s declares functions (%s) but there is no %s.c to own them', f,
        table.concat(header_funcs[stem], ', '), stem)
    end
  end
end
local inc_circles = report_circles(inc, 'include', label)

-- --- Link graph ---------------------------------------------------------------------------------

local link = new_graph()
local defined_in = {}  -- symbol -> object stem
local link_circles, nobjects = 0, 0
if #objects > 0 then
  local quoted = {}
  for i, o in ipairs(objects) do
    quoted[i] = shquote(o)
  end
  local p = io.popen(shquote(nm) .. ' -A -g -P ' .. table.concat(quoted, ' ') .. ' 2>&1')
  local uses, seen = {}, {}
  for line in p:lines() do
    local file, sym, kind = line:match('^(.-): (%S+) (%a)')
    if not file then
      die('unexpected nm output: ' .. line)
    end
    local member = file:match('%[(.-)%]$') or file:match('([^/]+)$')
    local stem = member:gsub('%.o$', ''):gsub('%.c$', '')
    if not seen[stem] then
      seen[stem] = true
      nobjects = nobjects + 1
      link.nodes[stem] = true
    end
    if kind == 'U' or kind == 'w' or kind == 'v' then
      uses[#uses + 1] = { stem, sym }
    elseif defined_in[sym] and defined_in[sym] ~= stem then
      problem('%s is defined in both %s and %s', sym, defined_in[sym], stem)
    else
      defined_in[sym] = stem
    end
  end
  if not p:close() then
    die(nm .. ' failed on ' .. table.concat(objects, ' '))
  end
  for _, u in ipairs(uses) do
    local owner = defined_in[u[2]]
    if owner and owner ~= u[1] then
      add_edge(link, u[1], owner, u[1] .. ' uses ' .. u[2])
    end
  end
  link_circles = report_circles(link, 'link', function(v)
    return v .. '.o'
  end)
  -- Every function a header declares is defined in the object of the same name.
  for _, stem in ipairs(sorted_keys(header_funcs)) do
    if modules[stem].c and link.nodes[stem] then
      for _, fn in ipairs(header_funcs[stem]) do
        local owner = defined_in[fn]
        if owner ~= stem then
          problem('%s.h declares %s, %s', stem, fn,
            owner and ('defined in ' .. owner .. '.c, not in ' .. stem .. '.c')
              or ('defined in no object (' .. stem .. '.c should)'))
        end
      end
    end
  end
end

-- --- Report -------------------------------------------------------------------------------------

print(string.format('include graph: %d files, %d modules, %d dependencies, %d circle(s)', #files,
  #sorted_keys(inc.nodes), count_edges(inc), inc_circles))
if #objects > 0 then
  print(string.format('link graph: %d objects, %d dependencies, %d circle(s)', nobjects,
    count_edges(link), link_circles))
end
if #problems > 0 then
  for _, msg in ipairs(problems) do
    print('FAIL: ' .. msg)
  end
  os.exit(1)
end
local g = #objects > 0 and link or inc
print('layers (each depends only on layers above it):')
for d, nodes in ipairs(layers(g)) do
  local names = {}
  for i, v in ipairs(nodes) do
    names[i] = #objects > 0 and v or label(v)
  end
  print(string.format('  %d: %s', d - 1, table.concat(names, ' ')))
end
print('ok')
