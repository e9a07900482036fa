-- Proves that engine_deps.lua fails on dependency circles: it is run on small trees written to
-- a temporary directory (a clean one, an include circle, a header that no .c owns and, with a C
-- compiler, a circle that only the objects show) and must pass or fail as each one asks, naming
-- the circle.
--
--   tplua tests/deps/engine_deps_selftest.lua [--nm NM] [--cc CC] [--ar AR]
--
-- Without --cc (or --ar) the object case is skipped. Exit status 0 when every case behaves.

local function shquote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local opts = { nm = 'nm' }
do
  local i = 1
  while i <= #arg do
    local key = arg[i]:match('^%-%-(%a+)$')
    if not key or not arg[i + 1] then
      io.stderr:write('usage: engine_deps_selftest.lua [--nm NM] [--cc CC] [--ar AR]\n')
      os.exit(2)
    end
    opts[key] = arg[i + 1]
    i = i + 2
  end
end

local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local checker = here .. '/engine_deps.lua'
-- The interpreter running this script (lua.c's arg: the program at the lowest index).
local lua
do
  local i = -1
  while arg[i - 1] do
    i = i - 1
  end
  lua = arg[i]
end

local function run(cmd)
  local p = io.popen(cmd .. ' 2>&1')
  local out = p:read('a')
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

local tmp
do
  local rc, out = run('mktemp -d')
  if rc ~= 0 then
    io.stderr:write('engine_deps_selftest: mktemp -d: ', out)
    os.exit(2)
  end
  tmp = out:gsub('%s+$', '')
end

local function write_tree(dir, files)
  assert(run('mkdir -p ' .. shquote(dir)) == 0)
  for name, text in pairs(files) do
    local f = assert(io.open(dir .. '/' .. name, 'w'))
    f:write(text)
    f:close()
  end
end

local failures = 0

-- Runs the checker on `dir` (and `objects`) and checks its exit status and output.
local function expect(case, dir, objects, want_rc, want_text)
  local cmd = shquote(lua) .. ' ' .. shquote(checker) .. ' --nm ' .. shquote(opts.nm) .. ' '
    .. shquote(dir)
  for _, o in ipairs(objects) do
    cmd = cmd .. ' ' .. shquote(o)
  end
  local rc, out = run(cmd)
  local ok = rc == want_rc and (not want_text or out:find(want_text, 1, true) ~= nil)
  print(string.format('%s: %s (exit %d%s)', ok and 'ok' or 'FAILED', case, rc,
    want_text and (', expects "' .. want_text .. '"') or ''))
  if not ok then
    failures = failures + 1
    print('  checker output:\n' .. out:gsub('[^\n]+', '    %0'))
  end
end

-- A clean tree: a.c uses b, b uses nothing.
write_tree(tmp .. '/clean', {
  ['a.h'] = '#pragma once\nint a_fn(void);\n',
  ['a.c'] = '#include "a.h"\n#include "b.h"\nint a_fn(void) {\n  return b_fn();\n}\n',
  ['b.h'] = '#pragma once\n#include "types.h"\nint b_fn(void);\n',
  ['b.c'] = '#include "b.h"\nint b_fn(void) {\n  return 1;\n}\n',
  ['types.h'] = '#pragma once\ntypedef struct T {\n  int x;\n} T;\n'
    .. 'static inline int t_x(const T *t) {\n  return t->x;\n}\n',
})
expect('a tree without a circle passes', tmp .. '/clean', {}, 0, 'ok')

-- a.c includes b.h and b.c includes a.h.
write_tree(tmp .. '/include', {
  ['a.h'] = '#pragma once\nint a_fn(void);\n',
  ['a.c'] = '#include "a.h"\n#include "b.h"\nint a_fn(void) {\n  return b_fn();\n}\n',
  ['b.h'] = '#pragma once\nint b_fn(void);\n',
  ['b.c'] = '#include "b.h"\n#include "a.h"\nint b_fn(void) {\n  return 1;\n}\n',
})
expect('an include circle fails', tmp .. '/include', {}, 1, 'include circle: a.c -> b.c -> a.c')

-- A shared header that no .c owns, including the header of a file that includes it.
write_tree(tmp .. '/shared', {
  ['a.h'] = '#pragma once\nint a_fn(void);\n',
  ['a.c'] = '#include "a.h"\n#include "a_internal.h"\nint a_fn(void) {\n  return 0;\n}\n',
  ['a_internal.h'] = '#pragma once\n#include "a.h"\nint helper(int x);\n',
})
expect('a header owned by no .c fails', tmp .. '/shared', {}, 1,
  'a_internal.h declares functions (helper) but there is no a_internal.c')
expect('... and its circle is named', tmp .. '/shared', {}, 1,
  'include circle: a.c -> a_internal.h -> a.c')

-- Objects that call each other while the includes have no circle: b.c declares a_fn itself.
if opts.cc and opts.ar then
  local dir = tmp .. '/link'
  write_tree(dir, {
    ['a.h'] = '#pragma once\nint a_fn(void);\nint a_twice(void);\n',
    ['a.c'] = '#include "a.h"\n#include "b.h"\nint a_fn(void) {\n  return b_fn();\n}\n'
      .. 'int a_twice(void) {\n  return 2;\n}\n',
    ['b.h'] = '#pragma once\nint b_fn(void);\n',
    ['b.c'] = '#include "b.h"\nint a_twice(void);\nint b_fn(void) {\n  return a_twice();\n}\n',
  })
  local build = 'cd ' .. shquote(dir) .. ' && ' .. shquote(opts.cc) .. ' -c a.c -o a.c.o && '
    .. shquote(opts.cc) .. ' -c b.c -o b.c.o && ' .. shquote(opts.ar) .. ' rcs libab.a a.c.o b.c.o'
  local rc, out = run(build)
  if rc ~= 0 then
    print('FAILED: building the object case: ' .. out)
    failures = failures + 1
  else
    expect('the same tree passes on its includes', dir, {}, 0, 'ok')
    expect('a circle between objects fails (archive)', dir, { dir .. '/libab.a' }, 1,
      'link circle: a.o -> b.o -> a.o')
    expect('a circle between objects fails (object files)', dir,
      { dir .. '/a.c.o', dir .. '/b.c.o' }, 1, 'link circle: a.o -> b.o -> a.o')
  end
else
  print('skipped: the object case (no --cc and --ar)')
end

run('rm -rf ' .. shquote(tmp))
if failures > 0 then
  print(string.format('%d case(s) failed', failures))
  os.exit(1)
end
print('ok')
