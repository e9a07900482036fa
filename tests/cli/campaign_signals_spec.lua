-- Ctrl-C during `tplua run CAMPAIGN.lua`, through the real binary: every run being stopped gets
-- the signal, then SIGTERM if it still runs, then SIGKILL after kill_grace, whatever the
-- concurrency; the journal says interrupted only once the run's process group is gone, tplua
-- exits 130, and the next execution runs the interrupted runs again. The fake trainer records
-- the signals it receives (--signal-log); the spec synchronises on tplua's progress lines.
local h = require('helper')
local campaign = require('tp.campaign')
local json = require('tp.json')
local fs = require('tp.fs')
local proc = require('tp.proc')

-- A campaign file of runs of the fake trainer, one per entry of `modes` (extra trainer flags
-- such as '--ignore-sigint'), each recording its signals in <dir>/<id>.signals. FAST=1 in the
-- environment makes the runs quick (used to resume).
local function campaign_file(dir, modes, mark)
  local quoted = {}
  for i, m in ipairs(modes) do
    quoted[i] = string.format('%q', m)
  end
  local text = string.format([[
local tp = require('tp')
local ft = os.getenv('TPLUA_TOOLS_DIR') .. '/fake_trainer'
local lps = os.getenv('FAST') and '2000' or '50'
local runs = {}
for i, mode in ipairs({ %s }) do
  local id = string.format('r%%02d', i)
  local argv = { ft, '--signal-log', %q .. '/' .. id .. '.signals', '--print-env', %q,
    '--megatron-gen', '300', '--lines-per-sec', lps, '--step-ms', '250', '--gbs', '32' }
  for word in mode:gmatch('%%S+') do
    argv[#argv + 1] = word
  end
  runs[i] = { id = id, parser = 'megatron', gbs = 32, seq_len = 1024, gpus = 4,
    total_iters = 300, argv = argv }
end
return tp.campaign({ results = 'unused', runs = runs, kill_grace = 0.5, progress_every = 1 })
]], table.concat(quoted, ', '), dir, mark)
  local path = dir .. '/campaign.lua'
  h.write(path, text)
  return path
end

-- Live processes whose command line contains `mark`.
local function processes_with(mark)
  local found = {}
  for _, e in ipairs(assert(fs.list('/proc'))) do
    if e.name:match('^%d+$') then
      local cmd = h.read('/proc/' .. e.name .. '/cmdline')
      local st = h.read('/proc/' .. e.name .. '/stat')
      if cmd and cmd:find(mark, 1, true) and st and not st:match('^%d+ %b() Z') then
        found[#found + 1] = tonumber(e.name)
      end
    end
  end
  return found
end

local function events(res)
  return assert(campaign.read_journal(res .. '/journal.jsonl')).events
end

-- Runs `tplua run` on a campaign of `modes` with `concurrency`, sends SIGINT to tplua (as a
-- terminal's Ctrl-C reaches its process group) once every run has printed two iterations, and
-- returns tplua's result, its output, the results directory, the campaign file and the mark.
local function interrupt(modes, concurrency)
  local dir = h.tmpdir()
  local res = dir .. '/res'
  local mark = 'SIGSPEC_' .. fs.basename(dir):gsub('%W', '')
  local cfile = campaign_file(dir, modes, mark)
  local want = math.min(#modes, concurrency)
  local loop = proc.loop()
  local out, going, sent = {}, {}, false
  local p
  p = assert(loop:spawn({
    argv = { h.bin, 'run', cfile, '--results', res, '--concurrency', tostring(concurrency) },
    cwd = h.source_dir,
    timeout = 60,
    on_line = function(_, line)
      out[#out + 1] = line
      local id = line:match('(r%d%d): iter 2/300')
      if id and not going[id] then
        going[id] = true
        want = want - 1
        if want == 0 and not sent then
          sent = true
          p:kill('SIGINT')
        end
      end
    end,
  }))
  local r = p:wait()
  loop:close()
  assert.is_true(sent, table.concat(out, '\n'))
  return r, table.concat(out, '\n'), res, cfile, mark, dir
end

-- The journal's interrupted event of `id` in the first session, and its started event.
local function ended(res, id)
  local started, last
  for _, ev in ipairs(events(res)) do
    if ev.id == id and ev.event == 'started' then
      started = started or ev
    elseif ev.id == id and ev.event ~= 'planned' then
      last = last or ev
    end
  end
  return last, started
end

-- Resumes with fast runs: the `interrupted` runs run again (and the runs not started yet run),
-- and all of `ids` then have a record and one finished event.
local function resume(cfile, res, interrupted, ids)
  local r = h.run({ 'run', cfile, '--results', res }, { env = { FAST = '1' } })
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  for _, id in ipairs(interrupted) do
    assert.truthy(r.stdout:find(id .. ': interrupted (interrupted by SIGINT): running it again',
      1, true), r.stdout)
  end
  for _, id in ipairs(ids) do
    local rec = assert(json.load_file(res .. '/' .. id .. '.json'))
    assert.are.equal('completed', rec.status)
    assert.are.equal(300, #rec.iterations)
  end
  local finished = {}
  for _, ev in ipairs(events(res)) do
    if ev.event == 'finished' then
      finished[#finished + 1] = ev.id
    end
  end
  table.sort(finished)
  assert.are.same(ids, finished)
end

describe('Ctrl-C during tplua run CAMPAIGN', function()
  it('one run that ignores SIGINT: SIGINT, then SIGTERM; exit 130; resume runs it', function()
    local r, text, res, cfile, mark, dir = interrupt({ '--ignore-sigint', '' }, 1)
    assert.are.equal(130, r.code, text)
    assert.truthy(text:find('stopped by SIGINT; run it again to resume', 1, true), text)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/r01.signals'))
    assert.is_nil(h.read(dir .. '/r02.signals'))  -- never started
    local ev, started = ended(res, 'r01')
    assert.are.equal('interrupted', ev.event)
    assert.are.equal('interrupted by SIGINT', ev.reason)
    assert.are.equal(128 + 15, ev.exit_status)  -- died of the SIGTERM
    assert.are.same({}, assert(proc.group_members(started.pgid)))
    assert.are.same({}, processes_with(mark))
    assert.is_false(fs.exists(res .. '/r01.json'))
    resume(cfile, res, { 'r01' }, { 'r01', 'r02' })
  end)

  it('one run that dies of SIGINT gets nothing more', function()
    local r, text, res, _, _, dir = interrupt({ '' }, 1)
    assert.are.equal(130, r.code, text)
    assert.are.equal('SIGINT\n', h.read(dir .. '/r01.signals'))
    local ev = ended(res, 'r01')
    assert.are.equal('interrupted', ev.event)
    assert.are.equal(128 + 2, ev.exit_status)
  end)

  it('two concurrent runs: each gets SIGINT then SIGTERM, one ignoring both SIGKILL', function()
    local r, text, res, cfile, mark, dir = interrupt({ '--ignore-sigint',
      '--ignore-sigterm --fork-children 1' }, 2)
    assert.are.equal(130, r.code, text)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/r01.signals'))
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/r02.signals'))
    local ev1, started1 = ended(res, 'r01')
    local ev2, started2 = ended(res, 'r02')
    assert.are.equal('interrupted', ev1.event)
    assert.are.equal('interrupted', ev2.event)
    assert.are.equal(128 + 15, ev1.exit_status)
    assert.are.equal(128 + 9, ev2.exit_status)  -- SIGKILL after the grace
    -- The run's group (the trainer and its forked child) is gone: nothing survives tplua.
    assert.are.same({}, assert(proc.group_members(started1.pgid)))
    assert.are.same({}, assert(proc.group_members(started2.pgid)))
    assert.are.same({}, processes_with(mark))
    resume(cfile, res, { 'r01', 'r02' }, { 'r01', 'r02' })
  end)

  it('a single run that ignores both is killed after the grace, then resumed', function()
    local r, text, res, cfile, mark, dir = interrupt({ '--ignore-sigterm' }, 1)
    assert.are.equal(130, r.code, text)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/r01.signals'))
    local ev, started = ended(res, 'r01')
    assert.are.equal('interrupted', ev.event)
    assert.are.equal(128 + 9, ev.exit_status)
    assert.are.same({}, assert(proc.group_members(started.pgid)))
    assert.are.same({}, processes_with(mark))
    resume(cfile, res, { 'r01' }, { 'r01' })
  end)

  it('a SIGINT that the host catches between runs gets the same escalation', function()
    local dir = h.tmpdir()
    local res = dir .. '/res'
    local mark = 'SIGSPEC_' .. fs.basename(dir):gsub('%W', '')
    local cfile = campaign_file(dir, { '--ignore-sigint', '' }, mark)
    -- Starting r02 happens outside the process loop (the first fill): the SIGINT sent there
    -- reaches the host's handler, whose "interrupted" error the campaign turns into a stop.
    local script = dir .. '/between.lua'
    h.write(script, string.format([[
local run = require('tp.run')
local fs = require('tp.fs')
local start = run.start
run.start = function(loop, r, ctx)
  if r.id == 'r02' then
    -- r01 has printed a line, so its signal handlers are in place.
    while (fs.stat(%q) or { size = 0 }).size == 0 do
      loop:run_once(0.05)
    end
    local f = assert(io.open('/proc/self/stat'))
    local me = f:read('n')
    f:close()
    assert(io.popen('kill -INT ' .. me)):close()
  end
  return start(loop, r, ctx)
end
local c = dofile(%q)
local s = assert(c:execute({ results = %q, concurrency = 2, quiet = true }))
io.stdout:write(s.signal, ' ', s.interrupted, ' ', s.not_started, '\n')
os.exit(s.exit_code)
]], res .. '/r01.log', cfile, res))
    local r = h.run({ script })
    assert.are.equal(130, r.code, r.stdout .. r.stderr)
    assert.are.equal('SIGINT 1 1\n', r.stdout)
    assert.are.equal('SIGINT\nSIGTERM\n', h.read(dir .. '/r01.signals'))
    local ev, started = ended(res, 'r01')
    assert.are.equal('interrupted', ev.event)
    assert.are.equal(128 + 15, ev.exit_status)
    assert.are.same({}, assert(proc.group_members(started.pgid)))
    assert.are.same({}, processes_with(mark))
    resume(cfile, res, { 'r01' }, { 'r01', 'r02' })
  end)
end)
