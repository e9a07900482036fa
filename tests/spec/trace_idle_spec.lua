-- Why the GPU is idle (tp.analyse.trace: each step's idle time per cause, HTA's per-stream view,
-- launches, queues) on the real trace fixtures, against Holistic Trace Analysis' own figures
-- (tests/fixtures/traces/hta_idle.json, written by HTA: SOURCES.md) and against causes worked
-- out by hand from a real trace's events; never against tplua's own output.
local h = require('helper')
local json = require('tp.json')
local trace = require('tp.analyse.trace')

local DIR = h.fixture('traces')
local HTA = json.decode(assert(h.read(DIR .. '/hta_idle.json')))

local function names()
  local list = {}
  for name in pairs(HTA.fixtures) do
    list[#list + 1] = name
  end
  table.sort(list)
  return list
end

local near = h.near

local cache = {}
local function open(name)
  if not cache[name] then
    cache[name] = assert(trace.open(DIR .. '/' .. name))
  end
  return cache[name]
end

describe('why the GPU is idle, on real traces', function()
  for _, name in ipairs(names()) do
    local hta = HTA.fixtures[name]

    it(name .. ': the causes add up to each step\'s idle time exactly', function()
      local a = open(name)
      assert.is_true(#a.steps > 0)
      for _, s in ipairs(a.steps) do
        local sum = 0
        for _, c in ipairs(trace.CAUSES) do
          assert.are.equal('integer', math.type(s.cause[c]), c)
          assert.is_true(s.cause[c] >= 0, c)
          sum = sum + s.cause[c]
        end
        assert.are.equal(s.idle, sum)
        -- host wait (the launch call had not returned) covers the host-side causes (the call
        -- had not started)
        assert.is_true(s.host_wait >= s.cause.host + s.cause.sync + s.cause.dataloader)
      end
    end)

    it(name .. ': per stream, HTA\'s idle-time breakdown agrees within 0.5% of the span',
      function()
        local a = open(name)
        local span = a.whole.rounded.span
        local by = {}
        for _, s in ipairs(a.idle.hta) do
          by[tostring(s.stream)] = s
        end
        local n = 0
        for stream, cats in pairs(hta.idle_us) do
          n = n + 1
          local ours = by[stream]
          assert.is_truthy(ours, name .. ' stream ' .. stream)
          assert.is_true(ours.ops > 0)
          local what = name .. ' stream ' .. stream
          near(ours.host, (cats.host_wait or 0) * 1e3, 0.005 * span, what .. ' host wait')
          near(ours.kernel, (cats.kernel_wait or 0) * 1e3, 0.005 * span, what .. ' kernel wait')
          near(ours.other, (cats.other or 0) * 1e3, 0.005 * span, what .. ' other')
        end
        assert.are.equal(n, #a.idle.hta)
      end)

    if hta.temporal_us then
      it(name .. ': HTA\'s temporal breakdown, cuda_sync rows counted as HTA counts them',
        function()
          local a = open(name)
          local r = a.whole.rounded
          local t = hta.temporal_us
          assert.are.equal(t.kernel_time * 1e3, r.span)
          if name ~= 'vllm_b200_tp8_rank0.json.gz' then  -- its cpu_op rows with a stream
            assert.are.equal(t.idle * 1e3, r.idle)
          end
          near(r.idle, t.idle * 1e3, 0.005 * r.span, name .. ' idle')
        end)
    end
  end

  it('counts the cuda_sync rows in HTA\'s span only: 0.58% on a real trace that has them',
    function()
      local a = open('hta_alexnet_a100_sync.json.gz')
      assert.are.equal(16, a.info.syncs.stream)
      assert.are.equal(5, a.info.syncs.context)
      assert.are.equal(20, a.info.syncs.stream_wait)
      assert.are.equal(21, a.info.syncs.call)  -- 16 cudaStreamSynchronize, 5 DeviceSynchronize
      assert.are.equal(41, a.whole.rounded.syncs)
      -- HTA: 12,996,011 us with the sync rows; over the GPU ops alone, rounded as HTA rounds,
      -- 12,920,244 us (SOURCES.md): ours, exact, is that to the microsecond.
      assert.are.equal(12996011e3, a.whole.rounded.span)
      near(a.whole.span, 12920244e3, 1e3, 'span over the GPU ops')
      local more = (a.whole.rounded.span - a.whole.span) / a.whole.rounded.span
      assert.is_true(more > 0.0055 and more < 0.0060, tostring(more))
    end)

  it('classes each gap of a real trace as worked out by hand from its events', function()
    -- hta_event_sync_a100 (SOURCES.md): idle 212 us = 112 host launch + 100 synchronisation
    -- (a pageable device-to-host copy, then cudaStreamSynchronize).
    local a = open('hta_event_sync_a100.json.gz')
    assert.are.equal(1, #a.steps)
    local s = a.steps[1]
    assert.are.equal(100, s.step)
    assert.are.equal(263000, s.window)
    assert.are.equal(212000, s.idle)
    assert.are.equal(112000, s.cause.host)
    assert.are.equal(100000, s.cause.sync)
    assert.are.equal(0, s.cause.dataloader + s.cause.latency + s.cause.other)
    assert.are.equal(1, a.info.syncs.copy)  -- the copy into pageable memory blocks the host
    assert.are.equal(2, a.info.syncs.event)
    -- launches: the 4 kernels; their launch calls and delays, from the events (us): calls 36,
    -- 10, 12, 9 and kernels 1, 11, 1, 36: two shorter than their call; delays 35, 12, 14, 10.
    local l = s.launch
    assert.are.equal(4, l.count)
    assert.are.equal(2, l.shorter)
    assert.are.equal(67000, l.cpu)
    assert.are.equal(49000, l.gpu)
    assert.are.equal(10000, l.delay_min)
    assert.are.equal(12000, l.delay_p50)  -- the second of four, by nearest rank
    assert.are.equal(35000, l.delay_max)
  end)

  it('agrees with HTA per step where the definitions coincide (one stream, one step, whole)',
    function()
      -- resnet18_mi300_nostep: one stream, no ProfilerStep (one step holds the whole trace),
      -- microsecond rounding small against a 3.4 s span. HTA's host wait is the host-side
      -- causes together; its kernel wait is launch latency.
      local a = open('resnet18_mi300_nostep.json.gz')
      local s = a.steps[1]
      local cats = HTA.fixtures['resnet18_mi300_nostep.json.gz'].idle_us['0']
      local tol = 0.005 * s.window
      near(s.cause.host + s.cause.sync + s.cause.dataloader, cats.host_wait * 1e3, tol, 'host')
      near(s.cause.latency, cats.kernel_wait * 1e3, tol, 'latency')
      near(s.cause.other, cats.other * 1e3, tol, 'other')
    end)

  it('takes a latency threshold: a longer one turns other gaps into launch latency',
    function()
      local a = open('qwen05b_mi300.json.gz')
      local b = assert(trace.open(DIR .. '/qwen05b_mi300.json.gz', { gap = 10000000 }))
      assert.are.equal(30000, a.idle.gap)
      assert.are.equal(10000000, b.idle.gap)
      local sa, sb = a.steps[1].cause, b.steps[1].cause
      assert.is_true(sa.other > 0)
      assert.are.equal(0, sb.other)
      assert.are.equal(sa.latency + sa.other, sb.latency)
      assert.are.equal(sa.host, sb.host)
      assert.has_error(function()
        trace.open(DIR .. '/qwen05b_mi300.json.gz', { gap = 0 })
      end, 'trace.open: gap must be a positive integer (ns)')
    end)

  it('keeps each stream\'s queue: launched ops not yet finished', function()
    local a = open('resnet_ddp8_mi300_rank0.json.gz')
    local streams = {}
    for _, q in ipairs(a.idle.queues) do
      streams[#streams + 1] = q.stream
      assert.is_true(q.max >= 1 and q.mean > 0 and q.mean <= q.max)
      assert.is_true(q.empty >= 0 and q.empty < 1)
    end
    assert.are.same({ 0, 4 }, streams)  -- RCCL alone on stream 4 (SOURCES.md)
    for _, s in ipairs(a.steps) do
      assert.are.equal(2, #s.queue)
    end
  end)

  it('keeps the idle causes in the summary a run record keeps', function()
    local run = assert(trace.analyse({ DIR .. '/hta_event_sync_a100.json.gz' }))
    local s = trace.summary(run)
    assert.are.equal(0.112, s.idle_causes_ms.host)
    assert.are.equal(0.1, s.idle_causes_ms.sync)
    assert.are.equal(0, s.idle_causes_ms.other)
  end)
end)
