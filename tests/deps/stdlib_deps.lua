-- The standard library's dependency rules, read from the `require` calls of every module
-- (docs/DESIGN.md, "Packages"). Usage: tplua tests/deps/stdlib_deps.lua [STDLIB_DIR]
--
-- A module belongs to the package of its folder (stdlib/tp/plan/config.lua: tp.plan); the files
-- standing directly in stdlib/tp are the shared utilities (package tp). Packages form layers,
-- lowest first, and a module may require only modules of its own package or of a package of a
-- lower layer. On top of that: no module requires itself through others (a cycle), a `_`-named
-- module is required only inside its package, nobody requires an old name that now only maps
-- to a new one (tp/_moved.lua), at most MAX_TOP modules stand directly in stdlib/tp and none is
-- longer than MAX_LINES lines. Prints each breach as FILE:LINE: message and exits 1; exits 0
-- with a one-line summary when the rules hold.

local LAYERS = {
  'tp', -- json, yaml, fs, cli, secrets, proc, stats, gpu: used by all, using none of the packages
  'tp.catalog', -- what the world has: models (architectures, FLOPs), hardware (GPU datasheets)
  'tp.launch', -- how a command is started: local, torchrun, ranks, container, Slurm
  'tp.frameworks', -- what each framework is told: argv from the unified config, its log parser
  'tp.data', -- dataset files: .bin/.idx read, verified, fingerprinted, prepared
  'tp.plan', -- what is planned: config, methodology, sweep, memory, profile
  'tp.parse', -- what is read back: logs, run records, the figures derived from them
  'tp.run', -- how it runs: one run, campaigns, live sampling, preflight, provenance
  'tp.analyse', -- what is concluded: results, statistics of repeats, compare, audit, convergence
  'tp.present', -- what is shown: reports, plots, pretty-printing, the REPL's helpers
  'tp.history', -- every run kept in a database: store, import, change points, views, dashboard
  'tp.experiment', -- the recipe API: plans, runs, and summarises an experiment
  'tp.cmd', -- the commands of the tplua binary
}
local MAX_TOP = 10
local MAX_LINES = 800

local root = arg[1] or (os.getenv('TPLUA_SOURCE_DIR') or '.') .. '/stdlib'

local RANK = {}
for i, p in ipairs(LAYERS) do
  RANK[p] = i
end

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function read(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('a')
  f:close()
  return s
end

-- Every module under root/tp: name -> { file, package, lines }.
local modules, order, top = {}, {}, 0
do
  local list = 'cd ' .. shell_quote(root) .. ' && find tp -name "*.lua" | LC_ALL=C sort'
  local p = assert(io.popen(list))
  for file in p:lines() do
    local name = file:gsub('%.lua$', ''):gsub('/init$', ''):gsub('/', '.')
    local parts = {}
    for part in name:gmatch('[^.]+') do
      parts[#parts + 1] = part
    end
    local pkg
    if #parts == 1 then
      pkg = 'tp' -- tp/init.lua
    elseif #parts == 2 and not file:find('/init%.lua$') then
      pkg = 'tp'
      top = top + 1
    else
      pkg = parts[1] .. '.' .. parts[2]
    end
    modules[name] = { file = root .. '/' .. file, package = pkg, name = name }
    order[#order + 1] = name
  end
  p:close()
end

local moved = {}
do
  local f = io.open(root .. '/tp/_moved.lua', 'rb')
  if f then
    f:close()
    moved = dofile(root .. '/tp/_moved.lua')
  end
end

local breaches = {}
local function breach(file, line, fmt, ...)
  breaches[#breaches + 1] = string.format('%s:%d: ', file, line) .. string.format(fmt, ...)
end

-- The package a required name falls in, or nil when no module of the tree has that name.
local function package_of(name)
  if modules[name] then
    return modules[name].package
  end
  local a, b = name:match('^(tp)%.([%w_]+)%.$') -- require('tp.frameworks.' .. name)
  if a and modules[a .. '.' .. b] then
    return a .. '.' .. b
  end
  return nil
end

local function private_to(name)
  local parent, last = name:match('^(.*)%.([^.]+)$')
  if last and last:sub(1, 1) == '_' then
    return parent
  end
  return nil
end

local requires = 0
for _, name in ipairs(order) do
  local m = modules[name]
  local src = read(m.file)
  local lineno = 0
  m.deps = {}
  for line in (src .. '\n'):gmatch('([^\n]*)\n') do
    lineno = lineno + 1
    local code = line:match('^%s*%-%-') and '' or line
    local found = {}
    for _, dep in code:gmatch('require%s*%(?%s*([\'"])(tp[%w_.]*)%1') do
      found[#found + 1] = dep
    end
    for _, dep in code:gmatch('pcall%(%s*require%s*,%s*([\'"])(tp[%w_.]*)%1') do
      found[#found + 1] = dep -- pcall(require, 'tp.x'): an optional module is a dependency too
    end
    for _, dep in ipairs(found) do
      requires = requires + 1
      local dpkg = package_of(dep)
      local binding = dep:match('^tp%._[%w_]+$') and not modules[dep]
      if binding then
        goto continue -- a binding of the host (lua/l_*.c), below every module
      end
      if dep == 'tp.' then
        if name ~= 'tp' then
          breach(m.file, lineno, "%s requires 'tp.' .. NAME: only the entry tp loads any module "
            .. 'by a name given at run time', name)
        end
        goto continue -- tp's lazy entry: tp.json, tp.plan, ... loaded by the user's first use
      end
      if not dpkg then
        if moved[dep] then
          breach(m.file, lineno, "%s requires the old name '%s'; it is '%s' now", name, dep,
            moved[dep])
        else
          breach(m.file, lineno, "%s requires '%s', which is no module of %s", name, dep, root)
        end
        goto continue
      end
      local owner = private_to(dep)
      if owner and dpkg ~= m.package then
        breach(m.file, lineno, "%s requires '%s', private to %s", name, dep, owner)
      end
      if dpkg ~= m.package then
        local r, dr = RANK[m.package], RANK[dpkg]
        if r and dr and dr > r then
          breach(m.file, lineno, "%s (%s) requires '%s' of %s, a package above it (upward)", name,
            m.package, dep, dpkg)
        end
      end
      if modules[dep] and dep ~= name then
        m.deps[#m.deps + 1] = { name = dep, line = lineno }
      end
      ::continue::
    end
  end
  m.lines = lineno - 1
  if not RANK[m.package] then
    breach(m.file, 1, '%s is in package %s, which has no layer (tests/deps/stdlib_deps.lua)',
      name, m.package)
  end
  if m.lines > MAX_LINES then
    breach(m.file, m.lines, '%s has %d lines, over %d: split it along its seams', name, m.lines,
      MAX_LINES)
  end
end

if top > MAX_TOP then
  breach(root .. '/tp', 1, '%d modules stand directly in tp/, at most %d: put them in packages',
    top, MAX_TOP)
end

-- Cycles: depth-first, each reported once by the module it closes on.
local state, stack, seen_cycle = {}, {}, {}
local function visit(name)
  state[name] = 'open'
  stack[#stack + 1] = name
  for _, d in ipairs(modules[name].deps) do
    if state[d.name] == 'open' then
      local i = #stack
      while stack[i] ~= d.name do
        i = i - 1
      end
      local cycle = {}
      for k = i, #stack do
        cycle[#cycle + 1] = stack[k]
      end
      cycle[#cycle + 1] = d.name
      local key = table.concat(cycle, ' -> ')
      if not seen_cycle[key] then
        seen_cycle[key] = true
        breach(modules[name].file, d.line, 'cycle: %s', key)
      end
    elseif not state[d.name] then
      visit(d.name)
    end
  end
  stack[#stack] = nil
  state[name] = 'done'
end
for _, name in ipairs(order) do
  if not state[name] then
    visit(name)
  end
end

if #breaches > 0 then
  for _, b in ipairs(breaches) do
    io.stderr:write(b, '\n')
  end
  io.stderr:write(string.format('%d breach(es) of the layout rules (docs/DESIGN.md, "Packages")\n',
    #breaches))
  os.exit(1)
end
local pkgs = {}
for _, m in pairs(modules) do
  pkgs[m.package] = true
end
local npkg = 0
for _ in pairs(pkgs) do
  npkg = npkg + 1
end
print(string.format('%d modules in %d packages (%d directly in tp/), %d requires: layers respected,'
  .. ' no cycles, none over %d lines', #order, npkg, top, requires, MAX_LINES))
