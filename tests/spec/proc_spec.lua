-- Specs of tp.proc: spawn/run/loop through Lua, failure modes, <close> and GC, signal forwarding
-- from a tplua child, and the parent-death guarantee. Uses tests/tools/fake_trainer.
local h = require('helper')
local proc = require('tp.proc')

local TRAINER = h.tools_dir .. '/fake_trainer'

local function trainer(...)
  return { TRAINER, ... }
end

-- True when no live process is left in process group `pgid`.
local function group_gone(pgid)
  return #assert(proc.group_members(pgid)) == 0
end

local function pid_alive(pid)
  local f = io.open('/proc/' .. pid .. '/stat')
  if not f then
    return false
  end
  local stat = f:read('a')
  f:close()
  return not stat:match('^%d+ %b() Z')
end

local function script(dir, name, text)
  local path = dir .. '/' .. name
  h.write(path, text)
  return path
end

describe('tp.proc.run', function()
  it('collects stdout and stderr and reports the exit', function()
    local r = assert(proc.run(trainer('--megatron-gen', '2', '--stderr', '--exit-code', '3')))
    assert.are.equal(3, r.code)
    assert.is_false(r.timed_out)
    assert.is_nil(r.signal)
    local _, n = r.stdout:gsub('\n', '')
    assert.are.equal(10, n)  -- 8 lines of argument dump, 2 iterations
    assert.are.equal(r.stdout, r.stderr)
    assert.truthy(r.stdout:find(' iteration        2/       2 |', 1, true))
    assert.is_true(r.wall_s > 0)
    assert.is_true(r.rusage.maxrss_kb > 0)
    assert.are.equal('number', type(r.rusage.utime))
    assert.are.equal(0, r.stragglers)
  end)

  it('reports a death by signal as data', function()
    local r = assert(proc.run(trainer('--megatron-gen', '3', '--crash-at', '9')))
    assert.are.equal('SIGABRT', r.signal)
    assert.are.equal(134, r.code)
    local _, n = r.stdout:gsub('\n', '')
    assert.are.equal(9, n)
  end)

  it('returns captured output byte for byte', function()
    local r = assert(proc.run({ 'printf', 'a\\0b\\r\\nno newline' }))
    assert.are.equal('a\0b\r\nno newline', r.stdout)
    assert.are.equal('', r.stderr)
  end)

  it('sets, removes and clears environment variables, and the working directory', function()
    local names = { '--print-env', 'TP_SET', '--print-env', 'HOME', '--print-env', 'TP_NUM' }
    local r = assert(proc.run(trainer(table.unpack(names)), {
      env = { TP_SET = 'a b=c', HOME = false, TP_NUM = 42 },
    }))
    assert.are.equal('TP_SET=a b=c\nHOME is unset\nTP_NUM=42\n', r.stdout)
    r = assert(proc.run({ 'env' }, { clear_env = true, env = { ONLY = '1' } }))
    assert.are.equal('ONLY=1\n', r.stdout)
    r = assert(proc.run({ 'pwd' }, { cwd = '/' }))
    assert.are.equal('/\n', r.stdout)
  end)

  it('times out: SIGTERM, then SIGKILL after the grace, and the whole group is gone', function()
    local members
    local p
    p = assert(proc.spawn({
      argv = trainer('--megatron-gen', '1', '--hang-after', '9', '--ignore-sigterm',
        '--fork-children', '2'),
      timeout = 0.3,
      kill_grace = 0.3,
      on_line = function()
        members = members or assert(proc.group_members(p:pgid()))
      end,
    }))
    assert.are.equal(p:pid(), p:pgid())
    local r = p:wait()
    assert.are.equal(3, #members)
    assert.are.equal(124, r.code)
    assert.is_true(r.timed_out)
    assert.are.equal('SIGKILL', r.signal)
    assert.is_true(r.wall_s >= 0.6)
    assert.is_true(group_gone(p:pgid()))
  end)
end)

describe('tp.proc failure modes', function()
  it('returns nil, message, code when the program cannot be run', function()
    local p, err, code = proc.spawn({ argv = { 'tp-no-such-program', '--x' } })
    assert.is_nil(p)
    assert.are.equal('tp-no-such-program: No such file or directory', err)
    assert.are.equal('ENOENT', code)
    p, err, code = proc.spawn({ argv = { '/etc/passwd' } })
    assert.is_nil(p)
    assert.are.equal('/etc/passwd: Permission denied', err)
    assert.are.equal('EACCES', code)
    local r
    r, err, code = proc.run({ 'true' }, { cwd = '/nonexistent-dir' })
    assert.is_nil(r)
    assert.are.equal('cwd /nonexistent-dir: No such file or directory', err)
    assert.are.equal('ENOENT', code)
    r, err, code = proc.run({ 'true' }, { log = '/nonexistent-dir/run.log' })
    assert.is_nil(r)
    assert.are.equal('/nonexistent-dir/run.log: No such file or directory', err)
    assert.are.equal('ENOENT', code)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      proc.spawn({})
    end, 'option "argv": a non-empty list of strings expected')
    assert.has_error(function()
      proc.spawn({ argv = { 'true' }, tiemout = 3 })
    end, 'spawn options: unknown option "tiemout"')
    assert.has_error(function()
      proc.spawn({ argv = { 'true' }, timeout = 'soon' })
    end, 'option "timeout": number expected, got string')
    assert.has_error(function()
      proc.spawn({ argv = { 'true' }, env = { ['A=B'] = 'x' } })
    end, 'option "env": invalid variable name "A=B"')
    assert.has_error(function()
      proc.spawn({ argv = { 'true', {} } })
    end, 'option "argv": item 2: string expected, got table')
    assert.has_error(function()
      proc.run('true')
    end, 'argv: table expected, got string')
    assert.has_error(function()
      proc.loop():timer(0, function() end)
    end, 'interval: seconds > 0 expected, got 0')
    assert.has_error(function()
      proc.group_members(-1)
    end, 'pgid: positive integer expected, got -1')
    local p = assert(proc.spawn({ argv = { 'true' } }))
    assert.has_error(function()
      p:kill('SIGNOPE')
    end)
    p:close()
    p:close()  -- idempotent
    assert.are.equal('tp.Proc (closed)', tostring(p))
    assert.has_error(function()
      p:wait()
    end, 'attempt to use a closed proc')
  end)

  it('propagates an error raised by a callback and keeps the loop usable', function()
    local loop = proc.loop()
    local p = assert(loop:spawn({
      argv = trainer('--megatron-gen', '3'),
      on_line = function(_, line)
        if line:find('iteration') then
          error('boom in callback')
        end
      end,
    }))
    local ok, err = pcall(loop.run, loop)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('boom in callback', 1, true))
    loop:close()
    assert.are.equal('tp.Proc (closed)', tostring(p))
  end)
end)

describe('tp.proc lines and logs', function()
  it('hands out lines of both streams, overlong lines in 1 MiB pieces', function()
    local seen = { stdout = {}, stderr = {} }
    local pieces = 0
    local p = assert(proc.spawn({
      argv = trainer('--long-line', '3000000', '--megatron-gen', '1', '--stderr'),
      on_line = function(stream, line, partial)
        if partial then
          pieces = pieces + 1
          assert.are.equal(1024 * 1024, #line)
        else
          table.insert(seen[stream], line)
        end
      end,
    }))
    local r = p:wait()
    assert.are.equal(0, r.code)
    assert.are.equal(4, pieces)  -- 2 per stream
    assert.are.equal(10, #seen.stdout)
    assert.are.equal(10, #seen.stderr)
    assert.are.equal(3000000 - 2 * 1024 * 1024, #seen.stdout[1])
    assert.are.equal('------------------------ arguments ------------------------', seen.stdout[2])
  end)

  it('tees every byte to the log files as it arrives', function()
    local dir = h.tmpdir()
    local fixture = dir .. '/in.log'
    local text = 'one\n\255\1 binary \r\n\nlast\n'
    h.write(fixture, text)
    local r = assert(proc.run(trainer('--file', fixture, '--stderr'), {
      log = dir .. '/out.log',
      log_stderr = dir .. '/err.log',
    }))
    assert.are.equal(text, r.stdout)
    assert.are.equal(text, h.read(dir .. '/out.log'))
    assert.are.equal(text, h.read(dir .. '/err.log'))
    h.write(dir .. '/both.log', 'kept\n')
    assert(proc.run(trainer('--file', fixture, '--stderr'), {
      log = dir .. '/both.log',
      log_append = true,
    }))
    assert.are.equal(5 + 2 * #text, #h.read(dir .. '/both.log'))
  end)
end)

describe('tp.proc handles', function()
  it('kills the group on kill(), with or without a signal name', function()
    local p = assert(proc.spawn({ argv = trainer('--megatron-gen', '1', '--hang-after', '1') }))
    assert.is_true(p:kill())
    local r = p:wait()
    assert.are.equal('SIGTERM', r.signal)
    assert.are.equal(143, r.code)
    assert.is_true(p:done())
    assert.truthy(tostring(p):find('exited with 143', 1, true))
    p:close()
    p = assert(proc.spawn({ argv = trainer('--megatron-gen', '1', '--hang-after', '1',
      '--ignore-sigterm') }))
    assert.is_true(p:kill('KILL'))
    assert.are.equal('SIGKILL', p:wait().signal)
    p:close()
  end)

  it('kills and reaps a running child at the end of a <close> scope', function()
    local pid
    do
      local p <close> = assert(proc.spawn({ argv = trainer('--megatron-gen', '1', '--hang-after',
        '1', '--ignore-sigterm') }))
      pid = p:pid()
      assert.is_true(pid_alive(pid))
      assert.truthy(tostring(p):find('running', 1, true))
    end
    assert.is_false(pid_alive(pid))
    assert.is_true(group_gone(pid))
  end)

  it('kills and reaps a running child that is garbage collected', function()
    local pid
    do
      local p = assert(proc.spawn({ argv = trainer('--megatron-gen', '1', '--hang-after', '1') }))
      pid = p:pid()
      assert.is_true(pid_alive(pid))
    end
    collectgarbage()
    collectgarbage()
    assert.is_false(pid_alive(pid))
  end)
end)

describe('tp.proc.loop', function()
  it('runs many children at once with timers', function()
    local loop <close> = proc.loop()
    local lines, exits = 0, 0
    for _ = 1, 8 do
      assert(loop:spawn({
        argv = trainer('--megatron-gen', '20', '--interval', '5'),
        on_line = function()
          lines = lines + 1
        end,
        on_exit = function(r)
          assert.are.equal(0, r.code)
          exits = exits + 1
        end,
      }))
    end
    assert.are.equal(8, loop:active())
    local ticks = 0
    loop:timer(0.02, function()
      ticks = ticks + 1
    end)
    local r = loop:run()
    assert.is_nil(r.interrupted)
    assert.are.equal(8 * 28, lines)
    assert.are.equal(8, exits)
    assert.are.equal(0, loop:active())
    assert.is_true(ticks >= 2)
  end)

  it('fires one-shot timers in deadline order and honours cancel', function()
    local loop <close> = proc.loop()
    -- Deadlines count from each timer's creation: gaps of 0.2 s keep the order even when setting
    -- them up is slow (GC stress).
    local order = {}
    loop:after(0.6, function()
      order[#order + 1] = 'c'
    end)
    loop:after(0.2, function()
      order[#order + 1] = 'a'
    end)
    local gone = loop:after(0.3, function()
      order[#order + 1] = 'x'
    end)
    loop:after(0.4, function()
      order[#order + 1] = 'b'
    end)
    assert.is_true(loop:cancel(gone))
    assert.is_false(loop:cancel(gone))
    assert(loop:spawn({ argv = { 'sleep', '0.8' } }))
    loop:run()
    assert.are.same({ 'a', 'b', 'c' }, order)
  end)

  it('coalesces output into few wake-ups, or not at all when asked', function()
    -- Counts the loop steps that delivered lines, for a line every 10 ms over ~0.28 s.
    local function batches(coalesce)
      local loop <close> = proc.loop({ coalesce = coalesce })
      local delivered
      assert(loop:spawn({
        argv = trainer('--megatron-gen', '20', '--interval', '10'),
        on_line = function()
          delivered = true
        end,
      }))
      local steps = 0
      repeat
        delivered = false
        local active = loop:run_once()
        steps = steps + (delivered and 1 or 0)
      until not active
      return steps
    end
    local slow, each = batches(0.05), batches(0)
    assert.is_true(slow <= 12, 'steps with a 50 ms window: ' .. slow)
    assert.is_true(each >= 2 * slow, ('steps: %d without, %d with'):format(each, slow))
    assert.has_error(function()
      proc.loop({ coalesce = -1 })
    end, 'option "coalesce": seconds from 0 to 10 expected, got -1')
    assert.has_error(function()
      proc.loop({ colaesce = 1 })
    end, 'loop options: unknown option "colaesce"')
  end)

  it('refuses to run from one of its own callbacks', function()
    local loop <close> = proc.loop()
    local p
    p = assert(loop:spawn({
      argv = trainer('--megatron-gen', '1'),
      on_line = function()
        p:wait()
      end,
    }))
    local ok, err = pcall(loop.run, loop)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('already running', 1, true))
  end)
end)

describe('tp.proc signals and parent death', function()
  it('forwards SIGINT to every group; the script exits 130 and nothing survives', function()
    local dir = h.tmpdir()
    local path = script(dir, 'loop.lua', [[
local proc = require('tp.proc')
local loop = proc.loop()
local p
p = assert(loop:spawn({
  argv = { arg[1], '--megatron-gen', '1', '--hang-after', '9', '--ignore-sigterm',
    '--fork-children', '2' },
  kill_grace = 0.3,
  on_line = function(_, line)
    if line:find('iteration', 1, true) then
      io.stdout:write('ready ', p:pgid(), '\n')
      io.stdout:flush()
    end
  end,
}))
local r = loop:run()
local res = p:wait()
io.stdout:write('done ', tostring(r.interrupted), ' ', tostring(res.interrupted), ' ',
  tostring(res.signal), '\n')
os.exit(r.exit_code or 0)
]])
    local pgid
    local out = {}
    local child
    child = assert(proc.spawn({
      argv = { h.bin, path, TRAINER },
      timeout = 30,
      on_line = function(_, line)
        out[#out + 1] = line
        local g = line:match('^ready (%d+)')
        if g then
          pgid = tonumber(g)
          assert.are.equal(3, #proc.group_members(pgid))
          child:kill('SIGINT')
        end
      end,
    }))
    local r = child:wait()
    assert.are.equal(130, r.code, table.concat(out, '\n'))
    assert.are.equal('done SIGINT SIGINT SIGKILL', out[#out])
    assert.is_true(group_gone(pgid))
  end)

  it('leaves the host SIGINT behaviour in place outside a loop', function()
    local dir = h.tmpdir()
    local path = script(dir, 'after.lua', [[
local proc = require('tp.proc')
assert(proc.run({ 'true' }))
io.stdout:write('spinning\n')
io.stdout:flush()
while true do end
]])
    local child
    child = assert(proc.spawn({
      argv = { h.bin, path },
      timeout = 30,
      capture = true,
      on_line = function(_, line)
        if line == 'spinning' then
          child:kill('SIGINT')
        end
      end,
    }))
    -- With the loop's handler still installed the script would spin until the timeout.
    local r = child:wait()
    assert.is_false(r.timed_out)
    assert.are_not.equal(0, r.code)
    assert.truthy(r.stderr:find('interrupted', 1, true))
  end)

  it('escalates a forwarded SIGINT: SIGTERM after min(1 s, kill_grace), then SIGKILL', function()
    local dir = h.tmpdir()
    local path = script(dir, 'escalate.lua', [[
local proc = require('tp.proc')
local loop = proc.loop()
local t0
for i, mode in ipairs({ '--ignore-sigint', '--ignore-sigterm' }) do
  local p
  p = assert(loop:spawn({
    argv = { arg[1], '--signal-log', arg[2] .. '/' .. i, mode, '--megatron-gen', '1',
      '--hang-after', '9' },
    kill_grace = 0.4,
    on_line = function(_, line)
      if line:find('iteration', 1, true) then
        io.stdout:write('ready ', i, '\n')
        io.stdout:flush()
      end
    end,
    on_exit = function(r)
      t0 = t0 or require('tp.gpu').now()
      io.stdout:write('exit ', i, ' ', tostring(r.interrupted), ' ', tostring(r.signal), '\n')
    end,
  }))
end
local r = loop:run()
os.exit(r.exit_code or 0)
]])
    local ready, out = 0, {}
    local child
    child = assert(proc.spawn({
      argv = { h.bin, path, TRAINER, dir },
      timeout = 30,
      on_line = function(_, line)
        out[#out + 1] = line
        if line:match('^ready ') then
          ready = ready + 1
          if ready == 2 then
            child:kill('SIGINT')
          end
        end
      end,
    }))
    local r = child:wait()
    local text = table.concat(out, '\n')
    assert.are.equal(130, r.code, text)
    -- The first dies of the SIGTERM that followed the ignored SIGINT; the second ignores both and
    -- is killed one grace later.
    assert.truthy(text:find('exit 1 SIGINT SIGTERM', 1, true), text)
    assert.truthy(text:find('exit 2 SIGINT SIGKILL', 1, true), text)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/1'))
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/2'))
  end)

  it('forwards SIGINT only when a run dies of it', function()
    local dir = h.tmpdir()
    local path = script(dir, 'polite.lua', [[
local proc = require('tp.proc')
local loop = proc.loop()
assert(loop:spawn({
  argv = { arg[1], '--signal-log', arg[2] .. '/log', '--megatron-gen', '1', '--hang-after', '9' },
  kill_grace = 0.2,
  on_line = function(_, line)
    if line:find('iteration', 1, true) then
      io.stdout:write('ready\n')
      io.stdout:flush()
    end
  end,
  on_exit = function(r)
    io.stdout:write('exit ', tostring(r.signal), '\n')
  end,
}))
os.exit(loop:run().exit_code or 0)
]])
    local out = {}
    local child
    child = assert(proc.spawn({
      argv = { h.bin, path, TRAINER, dir },
      timeout = 30,
      on_line = function(_, line)
        out[#out + 1] = line
        if line == 'ready' then
          child:kill('SIGINT')
        end
      end,
    }))
    assert.are.equal(130, child:wait().code, table.concat(out, '\n'))
    assert.are.equal('exit SIGINT', out[#out])
    assert.are.equal('SIGINT\n', h.read(dir .. '/log'))  -- no SIGTERM after it was gone
  end)

  it('kills the runs of a tplua that dies by SIGKILL, children included', function()
    local dir = h.tmpdir()
    local path = script(dir, 'victim.lua', [[
local proc = require('tp.proc')
local p
p = assert(proc.spawn({
  argv = { arg[1], '--megatron-gen', '1', '--hang-after', '9', '--ignore-sigterm',
    '--fork-children', '2' },
  on_line = function(_, line)
    if line:find('iteration', 1, true) then
      io.stdout:write('ready ', p:pgid(), '\n')
      io.stdout:flush()
    end
  end,
}))
p:wait()
]])
    local pgid, members
    local victim
    victim = assert(proc.spawn({
      argv = { h.bin, path, TRAINER },
      timeout = 30,
      on_line = function(_, line)
        local g = line:match('^ready (%d+)')
        if g then
          pgid = tonumber(g)
          members = assert(proc.group_members(pgid))
          victim:kill('SIGKILL')
        end
      end,
    }))
    assert.are.equal('SIGKILL', victim:wait().signal)
    assert.are.equal(3, #members)  -- the trainer and its two children
    -- The leader dies by its parent-death signal, the children by the guard process.
    assert(proc.wait_gone(members, 10))
    assert.is_true(group_gone(pgid))
  end)

  it('times out waiting for a process that stays alive', function()
    local p <close> = assert(proc.spawn({ argv = { 'sleep', '30' } }))
    local ok, err, code = proc.wait_gone({ p:pid() }, 0.05)
    assert.is_nil(ok)
    assert.are.equal('1 of 1 processes still alive after 50 ms', err)
    assert.are.equal('ETIMEDOUT', code)
    assert.has_error(function()
      proc.wait_gone(p:pid(), 1)
    end, 'pids: table expected, got number')
  end)
end)

describe('loop:interrupted()', function()
  it('is nil, then the signal name inside on_line once tplua got SIGINT', function()
    local dir = h.tmpdir()
    local path = script(dir, 'ask.lua', [[
local proc = require('tp.proc')
local loop = proc.loop()
local asked, seen = false, nil
assert(loop:spawn({
  argv = { arg[1], '--ignore-sigint', '--megatron-gen', '100000', '--lines-per-sec', '50' },
  kill_grace = 5,
  on_line = function(_, line)
    if not line:find('iteration', 1, true) then
      return
    end
    if not asked then
      asked = true
      io.stdout:write('before ', tostring(loop:interrupted()), '\n')
      io.stdout:flush()
    elseif not seen then
      seen = loop:interrupted()
      if seen then
        io.stdout:write('seen ', seen, '\n')
      end
    end
  end,
}))
local r = loop:run()
io.stdout:write('done ', tostring(r.interrupted), ' ', tostring(loop:interrupted()), '\n')
]])
    local out = {}
    local child
    child = assert(proc.spawn({
      argv = { h.bin, path, TRAINER },
      timeout = 30,
      on_line = function(_, line)
        out[#out + 1] = line
        if line == 'before nil' then
          child:kill('SIGINT')
        end
      end,
    }))
    local r = child:wait()
    local text = table.concat(out, '\n')
    assert.are.equal(0, r.code, text)
    assert.are.same({ 'before nil', 'seen SIGINT', 'done SIGINT SIGINT' }, out)
  end)

  it('reports a signal that a nested loop caught inside a callback, and forwards it', function()
    local dir = h.tmpdir()
    local path = script(dir, 'nested.lua', [[
local proc = require('tp.proc')
local f = assert(io.open('/proc/self/stat'))
local me = f:read('n')
f:close()
local loop = proc.loop()
local done = false
assert(loop:spawn({
  argv = { arg[1], '--signal-log', arg[2], '--ignore-sigint', '--megatron-gen', '1',
    '--hang-after', '9' },
  kill_grace = 0.2,
  on_line = function(_, line)
    if done or not line:find('iteration', 1, true) then
      return
    end
    done = true
    -- A short-lived loop of its own catches the SIGINT (and forwards it to the sleep).
    local r = assert(proc.run({ 'sh', '-c', 'kill -INT ' .. me .. '; exec sleep 30' }))
    io.stdout:write('nested ', tostring(r.interrupted), ' ', tostring(r.signal), '\n')
    io.stdout:write('outer ', tostring(loop:interrupted()), '\n')
  end,
}))
local r = loop:run()
io.stdout:write('done ', tostring(r.interrupted), '\n')
]])
    local r = h.run({ path, TRAINER, dir .. '/signals' })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('nested SIGINT SIGINT\nouter SIGINT\ndone SIGINT\n', r.stdout)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/signals'))
  end)

  it('reports the host SIGINT caught outside the loop; loop:interrupt() forwards it', function()
    local dir = h.tmpdir()
    local path = script(dir, 'host.lua', [[
local proc = require('tp.proc')
local f = assert(io.open('/proc/self/stat'))
local me = f:read('n')
f:close()
local loop = proc.loop()
local started = false
assert(loop:spawn({
  argv = { arg[1], '--signal-log', arg[2], '--ignore-sigint', '--megatron-gen', '1',
    '--hang-after', '9' },
  kill_grace = 0.2,
  on_line = function(_, line)
    started = started or line:find('iteration', 1, true) ~= nil
  end,
}))
while not started do
  loop:run_once()
end
io.stdout:write('before ', tostring(loop:interrupted()), '\n')
local ok, err = pcall(function()
  local p = assert(io.popen('kill -INT ' .. me))
  p:close()
  for _ = 1, 1000 do
  end
end)
io.stdout:write('caught ', tostring(ok), ' ', tostring(tostring(err):match('interrupted$')), '\n')
io.stdout:write('after ', tostring(loop:interrupted()), '\n')
loop:interrupt(loop:interrupted())
loop:interrupt('SIGINT')  -- already forwarded: not a second signal
local r = loop:run()
io.stdout:write('done ', tostring(r.interrupted), '\n')
]])
    local r = h.run({ path, TRAINER, dir .. '/signals' })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('before nil\ncaught false interrupted\nafter SIGINT\ndone SIGINT\n', r.stdout)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/signals'))
  end)

  it('rejects other signals', function()
    local loop <close> = proc.loop()
    assert.is_nil(loop:interrupted())
    assert.has_error(function()
      loop:interrupt('SIGKILL')
    end, "sig: 'SIGINT' or 'SIGTERM' expected, got SIGKILL")
    assert.has_error(function()
      loop:interrupt()
    end, "sig: 'SIGINT' or 'SIGTERM' expected, got nil")
  end)
end)

describe('tp.proc.cpu_count', function()
  it('counts the CPUs of the affinity mask, as taskset limits them', function()
    local n = proc.cpu_count()
    assert.are.equal('integer', math.type(n))
    assert.is_true(n >= 1)
    local online = tonumber(h.run({}, { bin = 'nproc' }).stdout) -- nproc(1) reads the mask too
    assert.are.equal(online, n)
    -- Pinned to one CPU, a child sees one.
    local r = h.run({ '-c', '0', h.bin, '-e', "io.write(require('tp.proc').cpu_count())" },
      { bin = 'taskset' })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('1', r.stdout)
  end)
end)
