-- tp.log: stream and parse agree whatever the chunking; registered parsers; the records view
-- and column(); failure modes (missing, unreadable, directory, empty, binary, a 100 MB line, a
-- cut last line, NUL bytes, invalid UTF-8) and misuse.
local h = require('helper')
local tp = require('tp')

local FIXTURES = {
  'megatron/awsome_gpt3_abbrev_startup_skipped.log',
  'megatron/issue673_nine_digit_train_iters.log',
  'megatron/issue756_mixtral_memory_report.log',
  'megatron/megatronllm33_nan_loss_missing.log',
  'megatron/nccl743_bert_old_timers_skipped.log',
  'nemo/awsome_k8s_nemo2_pid_prefix.log',
  'nemo/awsome_nemo1_eks_progressbar_overwrite.log',
  'nemo/deeplink_llama3_8b_timestamp_prefix.log',
  'nemo/issue14850_srun_prefix_blank_lines.log',
  'nemo/resiliency_llama3_54m_crash_restart.log',
  'primus/dsv4_p34_iter_lines.txt',
  'primus/dsv4_smoke_ep8_pp1_full.log',
  'primus/issue349_torchtitan_backend_hip_oom.log',
  'torchtitan/pr1884_llama3_8b_multirank.log',
  'torchtitan/qwen3_14b_b200_nocolor_logfreq1.log',
  'torchtitan/qwen3_14b_b200_oom_after_step1.log',
}

local MG = ' iteration %d/ 10 | consumed samples: 8 | elapsed time per iteration (ms): 500.0 | '
  .. 'learning rate: 1.000000E-04 | global batch size: 8 | lm loss: 2.500000E+00 | '
  .. 'loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | '
  .. 'number of nan iterations:   0 |'

local function mg(it)
  return string.format(MG, it)
end

-- A canonical text for a record (every field, sorted), to compare record lists.
local function canon(r)
  local keys = {}
  for k in pairs(r) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = r[k]
    if type(v) == 'table' then
      local sub = {}
      for kk, vv in pairs(v) do
        sub[#sub + 1] = tostring(kk) .. '=' .. tostring(vv)
      end
      table.sort(sub)
      v = '{' .. table.concat(sub, ',') .. '}'
    elseif math.type(v) == 'float' then
      v = string.format('%a', v)
    end
    parts[#parts + 1] = k .. '=' .. tostring(v)
  end
  return table.concat(parts, ' ')
end

local function canon_list(list)
  local out = {}
  for i = 1, #list do
    out[i] = canon(list[i])
  end
  return out
end

local function stream_in_chunks(data, size, opts)
  local s = tp.log.stream(opts)
  local got = {}
  local i = 1
  while i <= #data do
    for _, r in ipairs(s:feed(data:sub(i, i + size - 1))) do
      got[#got + 1] = r
    end
    i = i + size
  end
  return s, got
end

-- Parses a fixture whole and as a string, streams it in chunks of each size, and compares.
local function check_agreement(rel, sizes)
  local path = h.fixture('logs/' .. rel)
  local parsed = assert(tp.log.parse(path))
  local want = canon_list(parsed.records)
  local data = assert(h.read(path))
  assert.are.same(want, canon_list(assert(tp.log.parse(data, { is_string = true })).records))
  for _, size in ipairs(sizes) do
    local s, got = stream_in_chunks(data, size)
    local log = assert(s:finish())
    assert.are.same(want, canon_list(log.records))
    local e1 = data:find('\n', 1, true)
    local e2 = e1 and data:find('\n', e1 + 1, true)
    if rel:find('pr1884', 1, true) and (e1 - 1) // size < (e2 - 1) // size then
      -- Rank 3 printed first: the stream reported its record before rank 0 appeared.
      assert.are.equal(2, #got)
      assert.are.equal(3, got[1].rank)
      assert.are.same(want, canon_list({ got[2] }))
    else
      assert.are.same(want, canon_list(got))
    end
    assert.are.same(parsed.diagnostics, log.diagnostics)
    assert.are.same(parsed.meta, log.meta)
    assert.are.same(parsed.args, log.args)
    assert.are.same(parsed.params, log.params)
    assert.are.same(parsed.memory, log.memory)
    assert.are.equal(parsed.format, log.format)
  end
end

describe('tp.log stream and parse', function()
  for _, rel in ipairs(FIXTURES) do
    it('agree on ' .. rel .. ' fed in 4 KiB chunks', function()
      check_agreement(rel, { 4096 })
    end)
    it('agree on ' .. rel .. ' fed in 1-, 7- and 333-byte chunks #slow', function()
      local size = #assert(h.read(h.fixture('logs/' .. rel)))
      check_agreement(rel, size < 20000 and { 1, 7, 333 } or { 333, 65536 })
    end)
  end

  it('returns the unterminated last line at finish', function()
    local s = tp.log.stream()
    local cut = mg(2):sub(1, mg(2):find('learning', 1, true) + 5)
    local recs = s:feed(mg(1) .. '\n' .. cut)
    assert.are.equal(1, #recs)
    assert.are.same({}, s:feed(''))
    local log = s:finish()
    assert.are.equal(2, #log.records)
    assert.are.equal(2, log.records[2].iteration)
    assert.is_nil(log.records[2].loss)
    assert.is_truthy(log:diagnostic('truncated').message:find('cut', 1, true))
    assert.are.equal(log, s:finish())  -- idempotent
    assert.has_error(function()
      s:feed('x')
    end, 'attempt to feed a finished log stream')
    s:close()
    assert.are.equal(2, log.records[2].iteration)  -- the log keeps its data after close
  end)

  it('reports diagnostics while streaming, new kinds appended', function()
    local s <close> = tp.log.stream()
    s:feed(mg(1) .. '\n')
    assert.are.same({}, s:diagnostics())
    s:feed('RuntimeError: CUDA error: an illegal memory access was encountered\n')
    local d = s:diagnostics()
    assert.are.equal(1, #d)
    assert.are.equal('gpu_fault', d[1].kind)
    assert.are.equal(2, d[1].line)
    s:feed('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n')
    d = s:diagnostics()
    assert.are.equal(2, #d)
    assert.are.equal('oom', d[2].kind)
  end)
end)

describe('tp.log SHA-256 of the file read', function()
  it('gives the digest with the parse (sha256 = true) or when asked (sha256 = \'later\')',
    function()
      -- Past one read chunk (1 MiB) and many of the hashing thread's blocks.
      local one = assert(h.read(h.fixture('logs/' .. FIXTURES[1])))
      local text = one:rep(3 * 1024 * 1024 // #one + 2)
      local path = h.tmpdir() .. '/big.log'
      h.write(path, text)
      local want = require('tp._digest').sha256(text)
      local now = assert(tp.log.parse(path, { sha256 = true }))
      assert.are.equal(want, now.sha256)
      assert.are.equal(#text, now.size_bytes)
      assert.are.same({ want, #text }, { now:digest() })
      local later = assert(tp.log.parse(path, { sha256 = 'later' }))
      assert.is_nil(later.sha256)
      assert.are.equal(#text, later.size_bytes)
      assert.are.equal(#now.records, #later.records)
      assert.are.same({ want, #text }, { later:digest() })
      assert.are.same({ want, #text }, { later:digest() })
      -- Without the option there is no digest to wait for.
      local none = assert(tp.log.parse(path))
      assert.has_error(function()
        none:digest()
      end)
      assert.has_error(function()
        tp.log.parse(path, { sha256 = 'soon' })
      end)
    end)

  it('stops the digest\'s thread when the log is closed or collected before the digest', function()
    local one = assert(h.read(h.fixture('logs/' .. FIXTURES[1])))
    local text = one:rep(8 * 1024 * 1024 // #one + 2)
    local path = h.tmpdir() .. '/big.log'
    h.write(path, text)
    local want = require('tp._digest').sha256(text)
    -- Closed while the thread still reads: the thread stops, the scanner refuses the digest.
    local log = assert(tp.log.parse(path, { sha256 = 'later' }))
    log._scanner:close()
    log._scanner:close()
    assert.has_error(function()
      log:digest()
    end, 'attempt to use a closed log scanner')
    -- Collected unasked, many at once: each one's thread is stopped and joined by __gc.
    for _ = 1, 8 do
      assert(tp.log.parse(path, { sha256 = 'later' }))
    end
    log = nil
    collectgarbage('collect')
    collectgarbage('collect')
    -- The file changed after the scan but before the thread got to the end: the digest names it.
    log = assert(tp.log.parse(path, { sha256 = 'later' }))
    local hex, err = log:digest()
    assert.are.equal(want, hex, err)
    local short = assert(tp.log.parse(path, { sha256 = 'later' }))
    h.write(path, 'x\n') -- shorter than what was scanned
    local got, serr = short:digest()
    if got then
      -- The thread was already through the file: the digest is the one of the bytes scanned.
      assert.are.equal(want, got)
    else
      assert.matches(path .. ': the file shrank while it was read', serr, 1, true)
    end
  end)
end)

describe('tp.log records view', function()
  local log = assert(tp.log.parse(h.fixture('logs/primus/dsv4_p34_iter_lines.txt')))

  it('behaves as a read-only array', function()
    assert.are.equal(10, #log.records)
    local n = 0
    for i, r in ipairs(log.records) do
      n = n + 1
      assert.are.equal(i, r.iteration)
    end
    assert.are.equal(10, n)
    n = 0
    for i, r in pairs(log.records) do
      n = n + 1
      assert.are.equal(i, r.iteration)
    end
    assert.are.equal(10, n)
    assert.is_nil(log.records[0])
    assert.is_nil(log.records[11])
    assert.is_nil(log.records.x)
    assert.are.equal(log.records[3], log.records[3])
    assert.has_error(function()
      log.records[11] = {}
    end, 'log records are read-only')
    local list = log:record_list()
    assert.are.equal(10, #list)
    assert.are.equal(rawlen(list), 10)
  end)

  it('gives dense columns with their iterations', function()
    local loss, it = log:column('loss')
    assert.are.equal(10, #loss)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, it)
    assert.are.equal(log.records[4].loss, loss[4])
    local tok, tit = log:column('tokens_per_s_per_gpu')
    assert.are.equal(8, #tok)
    assert.are.equal(3, tit[1])
    local ts = log:column('timestamp')
    assert.are.equal('2026-05-14 10:22:15.174606', ts[1])
    local rocm = log:column('rocm mem usage/free/total/usage_ratio')
    assert.are.equal('135.56GB/152.42GB/287.98GB/47.07%', rocm[1])
    local lm = log:column('lm loss')
    assert.are.equal(10, #lm)
    assert.are.same({}, (log:column('no_such_thing')))
    assert.has_error(function()
      log:column(3)
    end)
  end)

  it('marks integers as integers and keeps floats exact', function()
    local r = log.records[1]
    assert.are.equal('integer', math.type(r.iteration))
    assert.are.equal('integer', math.type(r.consumed_samples))
    assert.are.equal('integer', math.type(r.line))
    assert.are.equal('float', math.type(r.step_time_s))
    assert.are.equal(35809.1 / 1000, r.step_time_s)
    assert.are.equal(tonumber('1.189968E+01'), r.loss)
  end)
end)

describe('tp.log.register', function()
  after_each(function()
    tp.log.unregister('toyfw')
  end)

  local function toy()
    return {
      name = 'toyfw',
      version = 'toy-1',
      detect = function(line)
        return line:find('^TOY step=') ~= nil
      end,
      line = function(line, rec)
        local step, loss, ms = line:match('^TOY step=(%d+) loss=([%d.]+) ms=([%d.]+)')
        if not step then
          return false
        end
        rec.iteration = tonumber(step)
        rec.loss = tonumber(loss)
        rec.step_time_s = tonumber(ms) / 1000
        rec.losses = { main = tonumber(loss), aux = 0.5 }
        rec.extra = { note = 'x' }
        rec.color = 'blue'
        return true
      end,
    }
  end

  local TEXT = 'starting\n\27[1m[default0]:TOY step=1 loss=2.5 ms=100\27[0m\n'
    .. '[default0]:TOY step=2 loss=2.25 ms=90\nTOY garbage\nTraceback (most recent call last):\n'

  it('detects a registered format after the built-ins and fills records from Lua', function()
    assert.is_true(tp.log.register(toy()))
    local f = tp.log.formats()
    assert.are.same({ 'megatron', 'primus', 'nemo', 'torchtitan', 'toyfw' }, f)
    local log = assert(tp.log.parse(TEXT, { is_string = true }))
    assert.are.equal('toyfw', log.format)
    assert.are.equal('toy-1', log.parser_version)
    assert.are.equal(2, #log.records)
    local r = log.records[2]
    assert.are.equal(2, r.iteration)
    assert.are.equal(2.25, r.loss)
    assert.are.equal(0.09, r.step_time_s)
    assert.are.equal(0, r.rank)
    assert.are.equal(3, r.line)
    assert.are.same({ main = 2.25, aux = 0.5 }, r.losses)
    assert.are.same({ note = 'x', color = 'blue' }, r.extra)
    assert.are.equal('crash', log.diagnostics[1].kind)  -- built-in signatures still apply
    -- Forced format, and streaming.
    log = assert(tp.log.parse(TEXT, { is_string = true, format = 'toyfw' }))
    assert.are.equal(2, #log.records)
    local s, got = stream_in_chunks(TEXT, 5)
    assert.are.equal(2, #got)
    assert.are.equal('toyfw', s:finish().format)
  end)

  it('leaves logs of a built-in format to the built-in parser', function()
    tp.log.register(toy())
    local log = assert(tp.log.parse(mg(1) .. '\nTOY step=5 loss=1 ms=1\n', { is_string = true }))
    assert.are.equal('megatron', log.format)
    assert.are.equal(1, #log.records)
  end)

  it('re-raises the errors of a registered parser', function()
    local t = toy()
    t.line = function()
      error('toy parser broke')
    end
    tp.log.register(t)
    assert.has_error(function()
      tp.log.parse(TEXT, { is_string = true })
    end)
    local ok, err = pcall(tp.log.parse, TEXT, { is_string = true })
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('toy parser broke', 1, true))
    t.line = function(_, rec)
      rec.loss = 'not a number'
      return true
    end
    tp.log.register(t)
    ok, err = pcall(tp.log.parse, TEXT, { is_string = true })
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("field 'loss' must be a number", 1, true))
  end)

  it('validates its argument', function()
    assert.has_error(function()
      tp.log.register('x')
    end)
    assert.has_error(function()
      tp.log.register({ name = 'megatron', detect = print, line = print })
    end, "spec.name: 'megatron' is reserved")
    assert.has_error(function()
      tp.log.register({ name = 'a', detect = print })
    end, 'spec.line: function expected, got nil')
    assert.has_error(function()
      tp.log.register({ name = 'a', detect = print, line = print, other = 1 })
    end, "spec: unknown field 'other'")
    assert.has_error(function()
      tp.log.parse('x\n', { format = 'nosuch' })
    end)
    assert.is_false(tp.log.unregister('nosuch'))
  end)
end)

describe('tp.log failure modes', function()
  it('fails with nil, err, code for a missing path and a directory', function()
    local dir = h.tmpdir()
    local log, err, code = tp.log.parse(dir .. '/none.log')
    assert.is_nil(log)
    assert.are.equal('ENOENT', code)
    assert.are.equal(dir .. '/none.log: No such file or directory', err)
    log, err, code = tp.log.parse(dir)
    assert.is_nil(log)
    assert.are.equal('EISDIR', code)
    assert.are.equal(dir .. ': Is a directory', err)
  end)

  it('fails with EACCES for an unreadable file', function()
    local dir = h.tmpdir()
    local path = dir .. '/locked.log'
    h.write(path, mg(1) .. '\n')
    os.execute('chmod 000 ' .. h.shquote(path))
    local f = io.open(path, 'rb')
    if f then
      f:close()
      pending('running as root: chmod 000 does not prevent reading')
      return
    end
    local log, err, code = tp.log.parse(path)
    assert.is_nil(log)
    assert.are.equal('EACCES', code)
    assert.are.equal(path .. ': Permission denied', err)
  end)

  it('reads an empty file as a log without records', function()
    local dir = h.tmpdir()
    h.write(dir .. '/empty.log', '')
    local log = assert(tp.log.parse(dir .. '/empty.log'))
    assert.are.equal(0, #log.records)
    assert.is_nil(log.format)
    assert.are.equal('empty', log.diagnostics[1].kind)
    assert.are.equal('the log is empty', log.diagnostics[1].message)
    assert.are.same({}, log.args)
    assert.is_nil(log.params)
  end)

  it('flags a binary file and does not crash', function()
    local dir = h.tmpdir()
    local bytes = {}
    local x = 12345
    for i = 1, 1024 do
      x = (x * 1103515245 + 12345) % 2147483648
      bytes[i] = x % 256
    end
    local block = string.char(table.unpack(bytes, 1, 200)) .. string.char(table.unpack(bytes, 201))
    h.write(dir .. '/bin.log', string.rep(block, 300))
    local log = assert(tp.log.parse(dir .. '/bin.log'))
    assert.are.equal(0, #log.records)
    local d = log:diagnostic('binary')
    assert.are.equal('warning', d.severity)
    assert.is_truthy(d.message:find('binary', 1, true))
  end)

  it('skips one 100 MB line with a diagnostic and keeps the records around it #slow', function()
    local dir = h.tmpdir()
    local path = dir .. '/long.log'
    local f = assert(io.open(path, 'wb'))
    f:write(mg(1), '\n')
    local block = string.rep('x', 1024 * 1024)
    for _ = 1, 100 do
      f:write(block)
    end
    f:write(mg(2), '\n', mg(3), '\n')
    f:close()
    local log = assert(tp.log.parse(path))
    assert.are.equal(2, #log.records)
    assert.are.equal(1, log.records[1].iteration)
    assert.are.equal(3, log.records[2].iteration)
    assert.are.equal(3, log.records[2].line)
    local d = log:diagnostic('long_line')
    assert.are.equal(2, d.line)
    assert.are.equal(string.format('line longer than %d bytes skipped (%d bytes)', tp.log.max_line,
      100 * 1024 * 1024 + #mg(2)), d.message)
  end)

  it('keeps a log cut mid-line, with the partial record', function()
    local text = mg(1) .. '\n' .. mg(2):sub(1, mg(2):find('learning', 1, true) + 5)
    local log = assert(tp.log.parse(text, { is_string = true }))
    assert.are.equal(2, #log.records)
    assert.are.equal(0.5, log.records[2].step_time_s)
    assert.is_nil(log.records[2].lr)
    assert.are.equal('the log stops mid-run: the last line is cut (line 2)',
      log:diagnostic('truncated').message)
  end)

  it('leaves out the value cut by the end of the log and keeps the complete fields', function()
    local step = '[titan] 2025-09-11 17:33:50,561 - root - INFO - '
      .. 'step:  %d  loss:  %s  grad_norm:  %s'
    local full = step:format(4, '6.2345', '2.2490') .. '  memory:  1.07GiB(1.13%)  tps: 399,989\n'
    local cut = step:format(5, '5.2014', '2')
    local s = tp.log.stream()
    s:feed(full .. cut:sub(1, 40))
    s:feed(cut:sub(41))
    local log = s:finish()
    assert.are.equal(2, #log.records)
    assert.are.equal(5, log.records[2].iteration)
    assert.are.equal(5.2014, log.records[2].loss)
    assert.is_nil(log.records[2].grad_norm)
    assert.are.equal(2, log:diagnostic('truncated').line)
    assert.are.equal('truncated', log.outcome)
    -- The whole line, with its line end: every field, no truncation.
    local whole = step:format(5, '5.2014', '2.0001') .. '  memory:  1.07GiB(1.13%)  tps: 1\n'
    log = assert(tp.log.parse(full .. whole, { is_string = true }))
    assert.are.equal(2.0001, log.records[2].grad_norm)
    assert.is_nil(log:diagnostic('truncated'))
  end)

  it('names a Primus log by its runner lines when it has no iteration line', function()
    local runner = '[2026-07-14 00:31:10] [NODE-0(host)] [INFO] '
    local log = assert(tp.log.parse(runner .. '[main] start\n:::MLLOG {"key": "run_stop"}\n'
      .. runner .. '[direct] torchrun finished successfully (code 0)\n', { is_string = true }))
    assert.are.equal('primus', log.format)
    assert.are.equal(0, #log.records)
    assert.are.equal(0, log.meta.exit_code)
    assert.is_truthy(log:diagnostic('unrecognised'))
  end)

  it('reads through NUL bytes and invalid UTF-8', function()
    local text = 'junk\0\0\0junk\n' .. mg(1) .. '\n\255\254' .. mg(2) .. '\n'
      .. ' iteration 3/ 10 | elapsed time per iteration (ms): 1.0 | odd: caf\233 |\n'
    local log = assert(tp.log.parse(text, { is_string = true }))
    assert.are.equal(3, #log.records)
    assert.are.equal(2, log.records[2].iteration)
    assert.are.equal('caf\u{FFFD}', log.records[3].extra.odd)
    assert.is_truthy(utf8.len(log.records[3].extra.odd))
    assert.are.equal(1, log:diagnostic('binary').line)
  end)

  it('says when nothing was recognised', function()
    local log = assert(tp.log.parse('hello\nworld\n', { is_string = true }))
    assert.is_nil(log.format)
    assert.are.equal('no iteration records found in 2 lines', log.diagnostics[1].message)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      tp.log.parse(nil)
    end, 'src: string expected, got nil')
    assert.has_error(function()
      tp.log.parse('x', { colour = true })
    end, "opts: unknown option 'colour'")
    assert.has_error(function()
      tp.log.parse('x', { rank = -1 })
    end, 'opts.rank: non-negative integer expected')
    assert.has_error(function()
      tp.log.parse('x', { gbs = 0 })
    end, 'opts.gbs: positive number expected')
    assert.has_error(function()
      tp.log.stream({ is_string = true })
    end, "opts: unknown option 'is_string'")
    assert.has_error(function()
      tp.log.stream():feed(42)
    end, 'bytes: string expected, got number')
    local C = require('tp._log')
    local sc = C.new()
    sc:close()
    sc:close()
    assert.has_error(function()
      sc:feed('x')
    end, 'attempt to use a closed log scanner')
    assert.are.equal('tp.log.Scanner (closed)', tostring(sc))
  end)

  it('uses the given rank and derivation options', function()
    local path = h.fixture('logs/primus/issue349_torchtitan_backend_hip_oom.log')
    local log = assert(tp.log.parse(path, { gbs = 8, seq_len = 8192, gpus = 8 }))
    assert.are.equal(8 * 8192 / (531 * 8), log.records[1].step_time_s)
    assert.is_true(log.records[1].step_time_derived)
    log = assert(tp.log.parse(path, { rank = 0 }))
    assert.are.equal(0, #log.records)
  end)
end)

describe('tp.log outcome: how the run ended', function()
  local function outcome(text)
    local log = assert(tp.log.parse(text, { is_string = true }))
    return log.outcome, log
  end
  local ITER = ' iteration 1/ 100 | elapsed time per iteration (ms): 10.0 | lm loss: 1.0E+00 |\n'

  it('maps each Slurm ending to its outcome', function()
    local job = 'slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2024-01-01T00:00:00'
    assert.are.equal('timeout', outcome(ITER .. job .. ' DUE TO TIME LIMIT ***\n'))
    assert.are.equal('preempted', outcome(ITER .. job .. ' DUE TO PREEMPTION ***\n'))
    assert.are.equal('node_failure', outcome(ITER .. job .. ' DUE TO NODE FAILURE, SEE SLURMCTLD '
      .. 'LOG FOR DETAILS ***\n'))
    assert.are.equal('cancelled', outcome(ITER .. job .. ' ***\n'))
    assert.are.equal('node_failure', outcome(ITER .. 'srun: error: Node failure on n7\n'))
  end)

  it('maps torchelastic signals: SIGTERM preempted, SIGINT/SIGHUP cancelled, no crash',
    function()
    local o, log = outcome(ITER .. 'W0520 api.py:753] Received 15 death signal, shutting down '
      .. 'workers\nTraceback (most recent call last):\n  File "x", line 1\n'
      .. 'torch.distributed.elastic.multiprocessing.api.SignalException: '
      .. 'Process 1 got signal: 15\n')
    assert.are.equal('preempted', o)
    assert.is_nil(log:diagnostic('crash'))
    assert.are.equal(0, #log:errors())
    assert.are.equal('cancelled', outcome(ITER .. 'WARNING:torch.distributed.elastic.agent.server.'
      .. 'api:Received 2 death signal, shutting down workers\n'))
    assert.are.equal('cancelled',
      outcome(ITER .. 'Received 1 death signal, shutting down workers\n'))
    assert.are.equal('preempted',
      outcome(ITER .. '[E] failed (exitcode: -15) local_rank: 0\n'))
    -- The scheduler's reason explains the bare signal, wherever it is.
    assert.are.equal('timeout', outcome(ITER .. 'Received 15 death signal, shutting down workers\n'
      .. 'slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024 DUE TO TIME LIMIT ***\n'))
  end)

  it('keeps the first root cause over the cascade that follows it', function()
    local o, log = outcome(ITER .. '[rank3]: Traceback (most recent call last):\n'
      .. '[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n'
      .. '[rank0]: [E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout: '
      .. 'WorkNCCL(SeqNum=9) ran for 600000 milliseconds before timing out.\n'
      .. 'NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error\n'
      .. 'W0520 api.py:753] Received 15 death signal, shutting down workers\n'
      .. 'torch.distributed.elastic.multiprocessing.api.SignalException: '
      .. 'Process 2 got signal: 15\n')
    assert.are.equal('oom', o)
    assert.is_truthy(log:diagnostic('nccl_timeout'))
    -- A stop first, then the NCCL errors of the ranks left behind: the stop.
    assert.are.equal('timeout', outcome(ITER .. 'slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT '
      .. '2024 DUE TO TIME LIMIT ***\nNCCL error in: x.cpp:1, unhandled system error\n'))
    -- Only secondary errors: the first of them.
    assert.are.equal('nccl_error', outcome(ITER
      .. 'NCCL error in: x.cpp:1, unhandled system error\n'
      .. 'Traceback (most recent call last):\nValueError: bad\n'))
    assert.are.equal('crash',
      outcome(ITER .. 'Traceback (most recent call last):\nValueError: bad\n'))
  end)

  it('is completed, truncated or unknown without a cause', function()
    assert.are.equal('completed', outcome(ITER .. '[after training is done] datetime: 2024\n'))
    assert.are.equal('truncated', outcome(ITER))
    assert.are.equal('unknown', outcome(' iteration 100/ 100 | elapsed time per iteration (ms): '
      .. '10.0 | lm loss: 1.0E+00 |\n'))
    -- A restart after a crash, then the end of training: completed.
    assert.are.equal('completed', outcome(ITER .. 'Traceback (most recent call last):\nValueError: '
      .. 'x\n  restart_count=1\n[after training is done]\n'))
    -- Megatron's own exits.
    assert.are.equal('timeout',
      outcome(ITER .. '[exiting program after 230.1 minutes] datetime: x\n'))
    assert.are.equal('preempted', outcome(ITER .. '[exiting program after receiving SIGTERM.]\n'))
  end)

  it('is computed from diagnostics by tp.log.outcome and written to the run record', function()
    assert.are.equal('oom', tp.log.outcome({
      { kind = 'crash', first_line = 1 }, { kind = 'oom', first_line = 2 },
      { kind = 'signal', first_line = 3, message = 'stopped by SIGTERM: x' } }))
    assert.are.equal('unknown', tp.log.outcome({}))
    local log = assert(tp.log.parse(ITER .. 'slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024 '
      .. 'DUE TO TIME LIMIT ***\n', { is_string = true }))
    local rec = tp.record.from_log(log, {})
    assert.are.equal('timeout', rec.outcome)
    assert.are.equal('unknown', rec.status)
  end)
end)

describe('tp.log pipeline parallel', function()
  it('keeps the last stage over the placeholder losses of the other stages', function()
    local log = assert(tp.log.parse(table.concat({
      "[rank0]:[titan] 2025-05-28 21:11:37,626 - root - INFO - Building 2-D device mesh with "
        .. "['pp', 'dp_shard'], [4, 2]",
      '[rank0]:[titan] 2025-05-28 21:11:37,626 - root - INFO - Trainer is initialized with local '
        .. 'batch size 2, global batch size 4, sequence length 4096, total steps 2 (warmup 2).',
      '[rank0]:[titan] 2025-05-28 21:13:37,816 - root - INFO - step:  1  loss: -1.0000  memory: '
        .. '36.90GiB(46.63%)  tps: 512',
      '[rank6]:[titan] 2025-05-28 21:13:37,816 - root - INFO - step:  1  loss: 12.2465  memory: '
        .. '30.00GiB(40.00%)  tps: 512',
      '[rank0]:[titan] 2025-05-28 21:13:38,816 - root - INFO - step:  2  loss: -1.0000  memory: '
        .. '36.90GiB(46.63%)  tps: 512',
      '[rank6]:[titan] 2025-05-28 21:13:38,816 - root - INFO - step:  2  loss: 11.5000  memory: '
        .. '30.00GiB(40.00%)  tps: 512',
      '[rank0]:[titan] 2025-05-28 21:13:39,816 - root - INFO - Training completed', '' }, '\n'),
      { is_string = true }))
    assert.are.equal(2, #log.records)
    assert.are.equal(6, log.records[1].rank)
    assert.are.equal(12.2465, log.records[1].loss)
    assert.are.equal(11.5, log.records[2].loss)
    -- 2 x 4096 tokens per DP rank / (512 tokens/s x pp 4).
    assert.are.equal(4, log.records[1].step_time_s)
    assert.are.equal(4, log.meta.pp)
    assert.are.equal(2, log.meta.dp)
    assert.are.equal(8, log.meta.world_size)
    local rec = tp.record.from_log(log, {})
    assert.are.equal(4, rec.training_config.pipeline_parallel_size)
    assert.are.equal('completed', rec.outcome)
  end)

  it('takes the non-data-parallel degree from the job config when no mesh line is printed',
    function()
      local log = assert(tp.log.parse(table.concat({
        "[rank0]:[titan] 2025-05-28 21:11:37,626 - root - INFO - Running with args: "
          .. "{'parallelism': {'pipeline_parallel_degree': 4, 'tensor_parallel_degree': 2}}",
        '[rank0]:[titan] 2025-05-28 21:11:37,626 - root - INFO - Trainer is initialized with '
          .. 'local batch size 2, global batch size 2, sequence length 4096, total steps 2',
        '[rank0]:[titan] 2025-05-28 21:13:37,816 - root - INFO - step:  1  loss: -1.0000  '
          .. 'memory: 36.90GiB(46.63%)  tps: 128', '' }, '\n'), { is_string = true }))
      assert.is_nil(log.records[1].loss)
      assert.are.equal(8, log.records[1].step_time_s) -- 2 x 4096 / (128 x pp 4 x tp 2)
      assert.are.equal(4, log.meta.pp)
      assert.are.equal(2, log.meta.tp)
    end)
end)
