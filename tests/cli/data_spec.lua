-- tplua data through the real binary: synthetic datasets (same seed, same bytes), stats,
-- verify (structure and vocabulary), fingerprints (equal for equal tokens, different for one
-- changed token), prepare with the byte tokenizer from texts that ship with Debian, and the
-- errors for truncated, foreign and missing files.
local h = require('helper')
local json = require('tp.json')

local function data(args)
  local a = { 'data' }
  for _, x in ipairs(args) do
    a[#a + 1] = x
  end
  return h.run(a)
end

describe('tplua data', function()
  local dir = h.tmpdir()

  it('makes the same synthetic bytes for the same seed, other bytes for another', function()
    for _, p in ipairs({ 'a', 'b', 'c' }) do
      local r = data({ 'synth', dir .. '/' .. p, '--tokens', '50000', '--vocab', '1000',
        '--kind', 'zipf', '--seed', p == 'c' and '2' or '1', '--doc-len', '700' })
      assert.are.equal(0, r.code, r.stderr)
    end
    assert.are.equal(h.read(dir .. '/a.bin'), h.read(dir .. '/b.bin'))
    assert.are.equal(h.read(dir .. '/a.idx'), h.read(dir .. '/b.idx'))
    assert.are_not.equal(h.read(dir .. '/a.bin'), h.read(dir .. '/c.bin'))
  end)

  it('prints the statistics, as text and as JSON', function()
    local r = data({ 'stats', dir .. '/a', '--json' })
    assert.are.equal(0, r.code, r.stderr)
    local st = json.decode(r.stdout)
    assert.are.same({ 'uint16', 50000, 72, 72, 0 },
      { st.dtype, st.tokens, st.sequences, st.documents, st.empty_sequences })
    assert.are.equal(700, st.max_len)
    assert.are.equal(50000 - 71 * 700, st.min_len)
    assert.is_true(st.min_token >= 0 and st.max_token < 1000)
    r = data({ 'stats', dir .. '/a.bin', '--plot', dir .. '/lengths.svg' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('tokens     50,000', 1, true), r.stdout)
    local svg = h.read(dir .. '/lengths.svg')
    assert.truthy(svg and svg:find('<svg', 1, true))
    assert.truthy(svg:find('512-1023', 1, true) and svg:find('sequence lengths of a<', 1, true))
  end)

  it('verifies the structure and the vocabulary, naming the first bad token', function()
    local r = data({ 'verify', dir .. '/a', '--vocab', '1000' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('ok (50,000 tokens in 72 documents, uint16', 1, true))
    r = data({ 'verify', dir .. '/a', '--vocab', '1' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('a.bin: token %d+ %(at token %d+%) is outside the vocabulary 0..0'),
      r.stderr)
  end)

  it('fingerprints equal tokens equally and one changed token differently', function()
    local fa = json.decode(data({ 'fingerprint', dir .. '/a', '--seq-len', '64', '--json' }).stdout)
    local fb = json.decode(data({ 'fingerprint', dir .. '/b', '--seq-len', '64', '--json' }).stdout)
    assert.are.equal(64, #fa.tokens_sha256)
    assert.are.equal(fa.tokens_sha256, fb.tokens_sha256)
    assert.are.equal(fa.samples_sha256, fb.samples_sha256)
    -- Sample j needs tokens up to j*64 + 64: 781 samples fit in 50,000 tokens.
    assert.are.equal(781, fa.samples)
    -- The token digest is the SHA-256 of the .bin: sha256sum agrees.
    local p = io.popen('sha256sum ' .. h.shquote(dir .. '/a.bin'))
    local want = p:read('a'):match('^(%x+)')
    p:close()
    assert.are.equal(want, fa.tokens_sha256)
    -- Change one token (the first byte of the .bin) in a copy.
    local bin = h.read(dir .. '/b.bin')
    h.write(dir .. '/b.bin', string.char((bin:byte(1) + 1) % 200) .. bin:sub(2))
    fb = json.decode(data({ 'fingerprint', dir .. '/b', '--seq-len', '64', '--json' }).stdout)
    assert.are_not.equal(fa.tokens_sha256, fb.tokens_sha256)
    assert.are_not.equal(fa.samples_sha256, fb.samples_sha256)
  end)

  it('prepares texts that ship with Debian with the byte tokenizer, with a sidecar', function()
    local src = { '/usr/share/common-licenses/GPL-3', '/usr/share/common-licenses/Apache-2.0' }
    local jsonl = dir .. '/docs.jsonl'
    h.write(jsonl, '{"text": "first document"}\n\n{"text": "second"}\n')
    local r = data({ 'prepare', src[1], src[2], jsonl, '--out', dir .. '/txt', '--tokenizer',
      'bytes' })
    assert.are.equal(0, r.code, r.stderr)
    local side = json.decode(h.read(dir .. '/txt.tplua.json'))
    assert.are.equal('bytes', side.tokenizer.name)
    assert.are.equal(4, side.documents)
    assert.are.equal(#h.read(src[1]) + #h.read(src[2]) + #'first document' + #'second',
      side.tokens)
    assert.are.equal(3, #side.sources)
    local p = io.popen('sha256sum ' .. h.shquote(src[1]))
    assert.are.equal(p:read('a'):match('^(%x+)'), side.sources[1].sha256)
    p:close()
    local st = json.decode(data({ 'stats', dir .. '/txt', '--json' }).stdout)
    assert.are.same({ 'uint8', 4, side.tokens }, { st.dtype, st.documents, st.tokens })
    assert.are.equal(0, data({ 'verify', dir .. '/txt', '--vocab', '256' }).code)
  end)

  it("runs Megatron's preprocess_data.py offline for a named tokenizer", function()
    -- tests/fakes/megatron: a test double of the tool (it checks the argv and the offline
    -- environment and writes the indexed files the real one would).
    local jsonl = dir .. '/hf.jsonl'
    h.write(jsonl, '{"text": "abc"}\n{"text": "de"}\n')
    local r = data({ 'prepare', jsonl, '--out', dir .. '/hf', '--tokenizer',
      'meta-llama/Llama-3.1-8B', '--megatron', h.source_dir .. '/tests/fakes/megatron',
      '--workers', '2' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('hf_text_document: 2 documents, 7 tokens (tokenizer '
      .. 'meta-llama/Llama-3.1-8B)', 1, true), r.stdout)
    local side = json.decode(h.read(dir .. '/hf_text_document.tplua.json'))
    assert.are.equal('meta-llama/Llama-3.1-8B', side.tokenizer.name)
    assert.are.equal(0, data({ 'verify', dir .. '/hf_text_document', '--vocab', '257' }).code)
  end)

  it('says what a named tokenizer needs, and where a JSONL line is wrong', function()
    local r = data({ 'prepare', '/usr/share/common-licenses/GPL-3', '--out', dir .. '/x',
      '--tokenizer', 'meta-llama/Llama-3.1-8B', '--megatron', dir .. '/no-megatron' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('needs Megatron-LM\'s tools/preprocess_data.py, not found at '
      .. dir .. '/no-megatron/tools/preprocess_data.py', 1, true), r.stderr)
    h.write(dir .. '/bad.jsonl', '{"text": "ok"}\n\n{"txt": 3}\n')
    r = data({ 'prepare', dir .. '/bad.jsonl', '--out', dir .. '/bad', '--tokenizer', 'bytes' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('bad.jsonl:3: a JSON object with a "text" string expected', 1,
      true), r.stderr)
    -- Nothing half-written is left.
    assert.is_nil(h.read(dir .. '/bad.bin'))
    assert.is_nil(h.read(dir .. '/bad.idx'))
  end)

  it("fingerprints the dataset a log's --data-path names when tplua extract can read it", function()
    local log = h.read(h.source_dir .. '/examples/convergence/licenses.log')
    log = log:gsub('(  data_path %.+ )[^\n]*', '%1' .. dir .. '/a')
    h.write(dir .. '/run.log', log)
    local r = h.run({ 'extract', dir .. '/run.log', '--quiet', '--json', dir .. '/run.json' })
    assert.are.equal(0, r.code, r.stderr)
    local rec = json.decode(h.read(dir .. '/run.json'))
    local fa = json.decode(data({ 'fingerprint', dir .. '/a', '--json' }).stdout)
    assert.are.equal(fa.tokens_sha256, rec.dataset.fingerprint)
    assert.are.equal(dir .. '/a', rec.dataset.prefix)
    assert.are.equal(64, rec.dataset.seq_len)
  end)

  it('refuses truncated, foreign and missing files with the file and the field', function()
    h.write(dir .. '/cut.bin', h.read(dir .. '/a.bin'):sub(1, 1000))
    h.write(dir .. '/cut.idx', h.read(dir .. '/a.idx'))
    local r = data({ 'verify', dir .. '/cut' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('cut.bin: sequence 0 (700 tokens at byte 0) ends past the end '
      .. 'of the file (1000 bytes)', 1, true), r.stderr)
    h.write(dir .. '/elf.idx', '\127ELF' .. string.rep('\0', 60))
    h.write(dir .. '/elf.bin', '')
    r = data({ 'stats', dir .. '/elf' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('elf.idx: magic: not a Megatron indexed dataset', 1, true))
    r = data({ 'fingerprint', dir .. '/nothing' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('nothing.idx', 1, true), r.stderr)
    r = data({ 'synth', dir .. '/z', '--tokens', '10' })
    assert.are.equal(2, r.code)
    r = data({ 'frobnicate' })
    assert.are.equal(2, r.code)
  end)
end)
