-- Supervisor CPU benchmark: CPU time (user+sys) of the tplua process itself, divided by wall
-- time, while it supervises one child that prints N lines/s (each line teed to a log and handed
-- to a Lua callback that does what a live log parser does first; then teed only, without a Lua
-- callback), and while the child is silent.
-- Baseline, in the same run: a Python supervisor reading the same stream line by line.
--
-- usage: tplua bench/supervisor/supervise.lua FAKE_TRAINER [--rate N] [--duration S]
--          [--repeats R] [--coalesce S]
local proc = require('tp.proc')

local trainer = arg[1]
local rate, duration, repeats, coalesce = 10000, 10, 3, nil
do
  local i = 2
  while arg[i] do
    local k, v = arg[i], tonumber(arg[i + 1])
    if not v then
      io.stderr:write('supervise.lua: ', k, ': number expected\n')
      os.exit(2)
    elseif k == '--rate' then
      rate = v
    elseif k == '--duration' then
      duration = v
    elseif k == '--repeats' then
      repeats = math.tointeger(v) or 1
    elseif k == '--coalesce' then
      coalesce = v
    else
      io.stderr:write('supervise.lua: unknown option ', k, '\n')
      os.exit(2)
    end
    i = i + 2
  end
end
if not trainer then
  io.stderr:write('usage: tplua bench/supervisor/supervise.lua FAKE_TRAINER [--rate N] ',
    '[--duration S] [--repeats R] [--coalesce S]\n')
  os.exit(2)
end

-- utime + stime of this process from /proc/self/stat (fields 14 and 15, in clock ticks of
-- sysconf(_SC_CLK_TCK); proc(5), torvalds/linux fs/proc/array.c, do_task_stat), as a coarse
-- cross-check of os.clock().
local clk_tck = tonumber((assert(proc.run({ 'getconf', 'CLK_TCK' })).stdout:match('%d+')))
local function stat_cpu_ticks()
  local f = assert(io.open('/proc/self/stat'))
  local s = f:read('a')
  f:close()
  local rest = s:match('^%d+ %b() (.*)$')
  local fields = {}
  for w in rest:gmatch('%S+') do
    fields[#fields + 1] = w
  end
  -- rest starts at field 3 (state): utime is field 14, stime 15
  return tonumber(fields[12]) + tonumber(fields[13])
end

local tmp = os.getenv('TMPDIR') or '/tmp'
local log_path = ('%s/tplua-bench-supervisor-%d.log'):format(tmp, math.random(1 << 30))

local function flood_argv()
  return { trainer, '--megatron-gen', tostring(math.floor(rate * duration)), '--lines-per-sec',
    tostring(rate) }
end

-- What the supervisor does per mode (every mode tees the child's output to a log file):
--   lines : each line handed to a Lua callback that counts it (the per-line delivery)
--   parse : the callback also runs a pattern on every line, as a stand-in for parser work
--   tee   : no Lua callback at all
--   silent: the child prints its first lines, then nothing until the timeout
local function measure(kind)
  local lines, iters, step_sum = 0, 0, 0
  local ticks = 0
  local loop <close> = proc.loop({ coalesce = coalesce })
  local opts = { argv = flood_argv(), log = log_path }
  if kind == 'lines' then
    opts.on_line = function()
      lines = lines + 1
    end
  elseif kind == 'parse' then
    opts.on_line = function(_, line)
      lines = lines + 1
      local ms = line:match('elapsed time per iteration %(ms%): ([%d.]+)')
      if ms then
        iters = iters + 1
        step_sum = step_sum + tonumber(ms)
      end
    end
  elseif kind == 'silent' then
    opts.argv = { trainer, '--megatron-gen', '1', '--hang-after', '9' }
    opts.timeout = duration
    opts.kill_grace = 1
    opts.on_line = function()
      lines = lines + 1
    end
  end
  local p = assert(loop:spawn(opts))
  loop:timer(1, function()
    ticks = ticks + 1  -- a progress/telemetry tick, as a campaign has
  end)
  local cpu0, st0 = os.clock(), stat_cpu_ticks()
  loop:run()
  local cpu, st = os.clock() - cpu0, stat_cpu_ticks() - st0
  local r = p:wait()
  os.remove(log_path)
  return {
    lines = lines,
    iters = iters,
    wall = r.wall_s,
    cpu = cpu,
    pct = 100 * cpu / r.wall_s,
    stat_pct = 100 * (st / clk_tck) / r.wall_s,
    child_cpu = r.rusage.utime + r.rusage.stime,
  }
end

-- The baseline supervisor: Python reading the child's stdout line by line, writing each line to
-- a log and running the same regular expression; it reports its own CPU (time.process_time).
local PY = [[
import re, subprocess, sys, time
argv = sys.argv[1:]
pat = re.compile(r'elapsed time per iteration \(ms\): ([\d.]+)')
c0, w0 = time.process_time(), time.perf_counter()
n = 0
with open(sys.argv[0] + '.log', 'wb') as log, subprocess.Popen(argv, stdout=subprocess.PIPE) as p:
    for line in p.stdout:
        log.write(line)
        n += 1
        pat.search(line.decode('utf-8', 'replace'))
c, w = time.process_time() - c0, time.perf_counter() - w0
print(n, c, w)
]]

local function measure_python()
  local py = ('%s/tplua-bench-supervisor-%d.py'):format(tmp, math.random(1 << 30))
  local f = assert(io.open(py, 'w'))
  f:write(PY)
  f:close()
  local r = proc.run({ 'python3', py, trainer, '--megatron-gen',
    tostring(math.floor(rate * duration)), '--lines-per-sec', tostring(rate) })
  os.remove(py)
  os.remove(py .. '.log')
  if not r or r.code ~= 0 then
    return nil
  end
  local n, c, w = r.stdout:match('(%d+) ([%d.e-]+) ([%d.e-]+)')
  return { lines = tonumber(n), cpu = tonumber(c), wall = tonumber(w),
    pct = 100 * tonumber(c) / tonumber(w) }
end

local function summary(name, xs, field)
  local v = {}
  for i, x in ipairs(xs) do
    v[i] = x[field]
  end
  table.sort(v)
  return ('%-34s min %7.3f%%  median %7.3f%%  max %7.3f%%'):format(name, v[1],
    v[(#v + 1) // 2], v[#v])
end

print(('supervisor CPU: child prints %d lines/s for ~%g s (then silent for %g s); %d repeats')
  :format(rate, duration, duration, repeats))
print(('command: tplua bench/supervisor/supervise.lua %s --rate %d --duration %g --repeats %d%s')
  :format(trainer, rate, duration, repeats, coalesce and (' --coalesce %g'):format(coalesce) or ''))
local modes = { 'lines', 'parse', 'tee', 'silent' }
local labels = {
  lines = ('tplua, %d lines/s to Lua'):format(rate),
  parse = ('tplua, %d lines/s + pattern'):format(rate),
  tee = ('tplua, %d lines/s, tee only'):format(rate),
  silent = 'tplua, silent child',
}
local got = { lines = {}, parse = {}, tee = {}, silent = {} }
local python = {}
for i = 1, repeats do
  for _, kind in ipairs(modes) do
    local m = measure(kind)
    table.insert(got[kind], m)
    print(('run %d %-6s: %6d lines to Lua, wall %6.3f s, tplua CPU %.4f s = %.3f%% of a core ' ..
      '(/proc/self/stat: %.2f%%), child CPU %.3f s')
      :format(i, kind, m.lines, m.wall, m.cpu, m.pct, m.stat_pct, m.child_cpu))
  end
  local c = measure_python()
  if c then
    python[#python + 1] = c
    print(('run %d python: %6d lines, wall %6.3f s, python CPU %.4f s = %.3f%% of a core')
      :format(i, c.lines, c.wall, c.cpu, c.pct))
  end
end
local function median(xs)
  local v = {}
  for i, x in ipairs(xs) do
    v[i] = x.pct
  end
  table.sort(v)
  return v[(#v + 1) // 2]
end
for _, kind in ipairs(modes) do
  print(summary(labels[kind], got[kind], 'pct'))
end
if #python > 0 then
  print(summary('python readline + regex', python, 'pct'))
  local ratio = {}
  for i = 1, math.min(#got.parse, #python) do
    ratio[i] = got.parse[i].pct / python[i].pct
  end
  table.sort(ratio)
  print(('tplua parse / python CPU, same stream: median %.2f (min %.2f, max %.2f)')
    :format(ratio[(#ratio + 1) // 2], ratio[1], ratio[#ratio]))
end
local busy, idle = median(got.lines), median(got.silent)
print(('targets: < 2%% of a core at %d lines/s (lines to Lua): %s; silent < 0.1%%: %s')
  :format(rate, busy < 2 and 'met' or 'MISSED', idle < 0.1 and 'met' or 'MISSED'))
os.exit(busy < 2 and idle < 0.1 and 0 or 1)
