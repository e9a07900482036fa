-- Campaigns driven through the real tplua binary: kill -9 at random moments then resume, SIGINT,
-- a second campaign on the same directory, the live view on a pipe and on a terminal (ptyrun),
-- GPU telemetry with the fake GPU libraries, and the example campaign (examples/campaign).
local h = require('helper')
local campaign = require('tp.campaign')
local json = require('tp.json')
local fs = require('tp.fs')
local proc = require('tp.proc')

local RUNNER = h.source_dir .. '/examples/campaign/run.lua'
local EXAMPLE = h.source_dir .. '/examples/campaign/fake.lua'

-- A campaign file: `n` runs of the fake trainer, each `iters` iterations at `lps` lines/s
-- (FAST=1 in the environment makes them 1000 lines/s), plus campaign-level `extra` Lua text.
local function campaign_file(dir, n, iters, lps, extra, mark)
  local text = string.format([[
local tp = require('tp')
local ft = os.getenv('TPLUA_TOOLS_DIR') .. '/fake_trainer'
local lps = os.getenv('FAST') and '1000' or '%s'
local runs = {}
for i = 1, %d do
  runs[i] = { id = string.format('r%%02d', i), parser = 'megatron', gbs = 32, seq_len = 1024,
    gpus = 4, total_iters = %d, env = { HF_TOKEN = 'spec-s3cr3t' },
    argv = { ft, '--print-env', %q, '--megatron-gen', '%d', '--lines-per-sec', lps,
      '--step-ms', '250', '--gbs', '32', '--seed', tostring(i) } }
end
return tp.campaign({ results = 'unused', runs = runs, %s })
]], tostring(lps), n, iters, mark or 'SPEC_MARK', iters, extra or '')
  local path = dir .. '/campaign.lua'
  h.write(path, text)
  return path
end

-- Starts tplua with `args` in its own process group; `on_line(line, p)` sees its output lines.
local function spawn(args, opts)
  opts = opts or {}
  local loop = proc.loop()
  local out = {}
  local p
  p = assert(loop:spawn({ argv = { h.bin, table.unpack(args) }, env = opts.env,
    cwd = h.source_dir, on_line = function(stream, line)
      out[#out + 1] = line
      if opts.on_line then
        opts.on_line(line, p, stream)
      end
    end }))
  return loop, p, out
end

local function read_journal(dir)
  return assert(campaign.read_journal(dir .. '/journal.jsonl'))
end

-- Every complete journal line is a JSON event; only a last line may be partial.
local function check_journal(dir)
  local path = dir .. '/journal.jsonl'
  local data = h.read(path)
  if not data then
    return 0
  end
  local lines = 0
  local pos = 1
  while pos <= #data do
    local nl = data:find('\n', pos, true)
    if not nl then
      break  -- a last partial line is allowed
    end
    local ev = json.decode(data:sub(pos, nl - 1))
    assert.is_table(ev, path .. ': line ' .. (lines + 1))
    assert.is_string(ev.event)
    lines = lines + 1
    pos = nl + 1
  end
  return lines
end

-- Every record file is a whole, valid record of a finished run of this campaign.
local function check_records(dir)
  local ids = {}
  for _, p in ipairs(assert(fs.glob(dir .. '/*.json'))) do
    local rec = json.load_file(p)
    assert.is_table(rec, p)
    assert.are.equal('tplua.run/2', rec.schema)
    assert.are.equal(fs.basename(p), rec.run_id .. '.json')
    assert.are.equal('completed', rec.status, p)
    ids[#ids + 1] = rec.run_id
  end
  return ids
end

-- Live processes whose command line contains `mark` (a unique argv word of the test's runs).
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

describe('tplua with a campaign', function()
  it('survives kill -9 at 20 random moments and resumes to exactly one record per run', function()
    local dir = h.tmpdir()
    local res = dir .. '/res'
    local mark = 'SPEC_MARK_' .. fs.basename(dir):gsub('%W', '')
    local cfile = campaign_file(dir, 10, 20, 200, nil, mark)
    -- How long the whole campaign takes here, uninterrupted: kill points are drawn as fractions
    -- of it, so that they fall at start-up, inside runs, between runs and in record writes
    -- whatever the speed of the machine.
    local t0 = require('tp.gpu').now()
    local ref = h.run({ RUNNER, cfile, '--results', dir .. '/reference', '--quiet' })
    local total = require('tp.gpu').now() - t0
    assert.are.equal(0, ref.code, ref.stderr)
    math.randomseed(20240601)
    local landed, seen = 0, {}
    for i = 1, 20 do
      local delay = total * (0.03 + math.random() * 0.22)
      local loop, p = spawn({ RUNNER, cfile, '--results', res, '--quiet' })
      loop:after(delay, function()
        if not p:done() then
          p:kill('SIGKILL')
        end
      end)
      local r = p:wait()  -- reaps tplua: it is gone before the next one starts
      loop:close()
      assert.is_true(r.code == 137 or r.code == 0, 'attempt ' .. i .. ': exit ' .. r.code)
      if r.code == 137 then
        landed = landed + 1
      end
      check_journal(res)
      local ids = check_records(res)
      assert.is_true(#ids <= 10)
      seen[#ids] = true
    end
    assert.is_true(landed >= 10, landed .. ' of 20 kills landed before the campaign ended')
    local stages = 0
    for _ in pairs(seen) do
      stages = stages + 1
    end
    assert.is_true(stages >= 3, 'kills fell at only ' .. stages .. ' stages of the campaign')
    local r = h.run({ RUNNER, cfile, '--results', res, '--quiet' })
    assert.are.equal(0, r.code, r.stderr)
    local ids = check_records(res)
    table.sort(ids)
    assert.are.same({ 'r01', 'r02', 'r03', 'r04', 'r05', 'r06', 'r07', 'r08', 'r09', 'r10' }, ids)
    local finished = {}
    for _, ev in ipairs(read_journal(res).events) do
      if ev.event == 'finished' then
        finished[ev.id] = (finished[ev.id] or 0) + 1
      end
    end
    for _, id in ipairs(ids) do
      assert.are.equal(1, finished[id], id .. ' finished ' .. tostring(finished[id]) .. ' times')
      local rec = json.load_file(res .. '/' .. id .. '.json')
      assert.are.equal(20, #rec.iterations)
    end
    assert.are.same({}, processes_with(mark))
    assert.is_nil(h.read(res .. '/journal.jsonl'):find('spec-s3cr3t', 1, true))
  end)
end)

describe('tplua with a campaign', function()
  it('exits 130 on SIGINT, journals the run as interrupted, and resumes it', function()
    local dir = h.tmpdir()
    local res = dir .. '/res'
    local cfile = campaign_file(dir, 2, 300, 100, 'progress_every = 1')
    local sent = false
    local loop, p, out = spawn({ RUNNER, cfile, '--results', res }, { on_line = function(line, pp)
      if not sent and line:find('r01: iter 3/300', 1, true) then
        sent = true
        pp:kill('SIGINT')
      end
    end })
    local r = p:wait()
    loop:close()
    assert.is_true(sent)
    assert.are.equal(130, r.code, table.concat(out, '\n'))
    local text = table.concat(out, '\n')
    assert.is_truthy(text:find('r01: interrupted', 1, true), text)
    assert.is_truthy(text:find('stopped by SIGINT; run it again to resume', 1, true), text)
    local kinds = {}
    for _, ev in ipairs(read_journal(res).events) do
      kinds[#kinds + 1] = ev.event .. ':' .. ev.id
    end
    assert.are.same({ 'planned:r01', 'planned:r02', 'started:r01', 'interrupted:r01' }, kinds)
    assert.is_false(fs.exists(res .. '/r01.json'))
    local partial = assert(h.read(res .. '/r01.log'))
    assert.is_truthy(partial:find('iteration        3/     300', 1, true))
    assert.is_nil(partial:find('iteration      300/     300', 1, true))
    local r2 = h.run({ RUNNER, cfile, '--results', res }, { env = { FAST = '1' } })
    assert.are.equal(0, r2.code, r2.stdout .. r2.stderr)
    assert.is_truthy(r2.stdout:find('r01: interrupted (interrupted by SIGINT): running it again',
      1, true), r2.stdout)
    assert.are.equal(partial, h.read(res .. '/r01.log.interrupted-1'))
    assert.are.equal(2, #check_records(res))
  end)

  it('refuses a second campaign on the same results directory; stops on SIGTERM', function()
    local dir = h.tmpdir()
    local res = dir .. '/res'
    local cfile = campaign_file(dir, 1, 300, 100, 'progress_every = 1')
    local second
    local loop, p = spawn({ RUNNER, cfile, '--results', res }, { on_line = function(line, pp)
      if not second and line:find('r01: iter 1/', 1, true) then
        second = h.run({ RUNNER, cfile, '--results', res })
        pp:kill('SIGTERM')
      end
    end })
    local pid = p:pid()
    local r = p:wait()
    loop:close()
    assert.are.equal(143, r.code)  -- SIGTERM: stopped cleanly too
    assert.are.equal('interrupted', read_journal(res).events[3].event)
    assert.are.equal(1, second.code)
    assert.is_truthy(second.stderr:find(res .. ': another campaign is running in this directory '
      .. '(tplua pid ' .. pid .. ')', 1, true), second.stderr)
  end)

  it('prints periodic plain progress lines when the output is not a terminal', function()
    local dir = h.tmpdir()
    local cfile = campaign_file(dir, 2, 40, 40, 'progress_interval = 0.2')
    local r = h.run({ RUNNER, cfile, '--results', dir .. '/res' })
    assert.are.equal(0, r.code, r.stderr)
    local ticks = 0
    for line in r.stdout:gmatch('[^\n]+') do
      assert.is_truthy(line:match('^%[%d%d:%d%d:%d%d%] ') or line:match('^campaign: '), line)
      if line:match('r0%d: iter %d+/40 %(%d+%%%) | %d+ tok/s/GPU now | loss [%d.]+ | ETA') then
        ticks = ticks + 1
      end
    end
    assert.is_true(ticks >= 4, r.stdout)
    assert.is_nil(r.stdout:find('\27', 1, true))
    assert.is_truthy(r.stdout:find('campaign: 2 finished, 0 failed, 0 skipped', 1, true))
    -- A finished run's line: its steady state's mean from its record, and no ETA.
    local finished = 0
    for line in r.stdout:gmatch('[^\n]+') do
      if line:find(': finished in ', 1, true) then
        finished = finished + 1
        assert.is_truthy(line:match('| iter 40/40 %(100%%%) | %d+ tok/s/GPU steady mean '
          .. '%(iterations %d+%-40%) | loss [%d.]+$'), line)
      end
    end
    assert.are.equal(2, finished, r.stdout)
  end)

  it('redraws status lines in place on a terminal', function()
    local ptyrun = h.tools_dir .. '/ptyrun'
    local dir = h.tmpdir()
    local cfile = campaign_file(dir, 2, 30, 60, 'concurrency = 2')
    local r = h.run({ '-t', '30', '-x', 'campaign: 2 finished', '--', h.bin, RUNNER, cfile,
      '--results', dir .. '/res' }, { bin = ptyrun })
    assert.are.equal(0, r.code, r.stderr)
    local t = r.stdout
    assert.is_truthy(t:find('\27[2A', 1, true), t)  -- moves up over two status lines
    assert.is_truthy(t:find('\27[2K  r01  iter ', 1, true), t)
    assert.is_truthy(t:find('\27[2K  r02  iter ', 1, true), t)
    assert.is_truthy(t:find('r01: finished in ', 1, true))
    assert.is_truthy(t:find('\27[J', 1, true))
    assert.is_nil(t:find('spec-s3cr3t', 1, true))
  end)

  it('measures energy with GPU telemetry when GPUs are present (fake NVML)', function()
    local dir = h.tmpdir()
    local libpath = h.fakes_dir .. '/h100x8'
    if not fs.is_dir(libpath) then
      pending('fake GPU libraries not built: ' .. libpath)
      return
    end
    local cfile = campaign_file(dir, 1, 20, 40, 'telemetry_interval = 0.05')
    local r = h.run({ RUNNER, cfile, '--results', dir .. '/res', '--quiet' },
      { env = { TPLUA_GPU_LIBPATH = libpath } })
    assert.are.equal(0, r.code, r.stderr)
    local rec = assert(json.load_file(dir .. '/res/r01.json'))
    local e = rec.energy_metrics
    assert.is_true(e.measured)
    assert.are.equal(8, e.devices)
    assert.is_true(e.samples >= 8)
    assert.is_true(e.energy_j > 0)
    assert.is_true(e.max_power_w > 0)
    assert.is_true(e.max_memory_used_gib > 0)
    assert.are.equal('nvd', rec.platform)
    local g = rec.gpu_info
    assert.are.equal(8, g.device_count)
    assert.are.equal(8, #g.devices)
    assert.are.equal('h100-sxm', g.hardware)
    assert.are.equal(g.devices[1].name, g.device_name)
  end)

  it('runs the example campaign: live progress, kill -9, resume, correct records', function()
    local dir = h.tmpdir()
    local res = dir .. '/res'
    local env = { TPLUA_FAKE_TRAINER = h.tools_dir .. '/fake_trainer', TPLUA_FAKE_PACE = '60' }
    local probe = h.run({ 'run', EXAMPLE, '--help' }, { env = env })
    local direct = probe.code == 0 and not (probe.stdout .. probe.stderr):find(
      'must return tp.experiment', 1, true)
    local args = direct and { 'run', EXAMPLE, '--results', res } or { RUNNER, EXAMPLE,
      '--results', res }
    -- Kill tplua as soon as the second run has started.
    local loop, p, out = spawn(args, { env = env, on_line = function(line, pp)
      if line:find('gbs64-r2: started', 1, true) then
        pp:kill('SIGKILL')
      end
    end })
    local r = p:wait()
    loop:close()
    assert.are.equal(137, r.code, table.concat(out, '\n'))
    assert.is_truthy(table.concat(out, '\n'):find('gbs64-r1: finished in', 1, true))
    local r2 = h.run(args, { env = env })
    assert.are.equal(0, r2.code, r2.stdout .. r2.stderr)
    assert.is_truthy(r2.stdout:find('gbs64-r2: tplua stopped while it ran: running it again', 1,
      true), r2.stdout)
    assert.is_truthy(r2.stdout:find('campaign: 3 finished, 0 failed, 1 skipped', 1, true))
    for _, gbs in ipairs({ 64, 128 }) do
      for rep = 1, 2 do
        local rec = assert(json.load_file(string.format('%s/gbs%d-r%d.json', res, gbs, rep)))
        assert.are.equal('completed', rec.status)
        assert.are.equal(30, #rec.iterations)
        -- gbs x 2048 tokens per step; the fake trainer prints 200 ms steps (+-1% jitter).
        local want = gbs * 2048 / 0.2
        local got = rec.performance_metrics.tokens_per_second
        assert.is_true(math.abs(got / want - 1) < 0.01, got .. ' vs ' .. want)
        assert.are.equal(got / 8, rec.performance_metrics.tokens_per_second_per_gpu)
        assert.are.equal(gbs, rec.training_config.unified.training.gbs)
      end
    end
    if not direct then
      pending("'tplua run' does not dispatch campaign files yet: ran examples/campaign/run.lua")
    end
  end)
end)
