-- tp.data: Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx): their facts, checks,
-- fingerprints, synthetic datasets, and text prepared with the built-in byte tokenizer. The
-- format and its checks are engine/mmidx's (docs/data.md).
local mmidx = require('tp._mmidx')

local M = {}

local function check_prefix(prefix, who)
  if type(prefix) ~= 'string' or prefix == '' then
    error(who .. ': prefix must be a non-empty string, got ' .. type(prefix), 3)
  end
  -- A user may give the .bin or .idx itself.
  return (prefix:gsub('%.bin$', ''):gsub('%.idx$', ''))
end

local function check_opts(opts, known, who)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error(who .. ': opts must be a table, got ' .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    local kind = known[k]
    if not kind then
      error(string.format('%s: unknown option %s', who, tostring(k)), 3)
    end
    if kind == 'integer' and math.type(v) ~= 'integer' then
      error(string.format('%s: option %s must be an integer, got %s', who, k, tostring(v)), 3)
    elseif kind ~= 'integer' and type(v) ~= kind then
      error(string.format('%s: option %s must be a %s, got %s', who, k, kind, type(v)), 3)
    end
  end
  return opts
end

--- The facts of a dataset, after its index was checked against the files: { dtype, itemsize,
--- sequences, documents, tokens, idx_bytes, bin_bytes }, or nil, message, code.
---```lua
---local info = assert(tp.data.info('/data/bc/llama3.1-8b_text_document'))
---print(info.tokens, info.dtype)
---```
---@param prefix string
---@return table|nil info
---@return string? err
---@return string? code
function M.info(prefix)
  return mmidx.info(check_prefix(prefix, 'data.info'))
end

--- info plus token and length statistics: min_token, max_token, min_len, max_len,
--- empty_sequences, and length_histogram (entry k+1: sequences of bit length k, i.e.
--- 2^(k-1) <= length < 2^k; entry 1: empty ones).
---@param prefix string
---@return table|nil stats
---@return string? err
---@return string? code
function M.stats(prefix)
  return mmidx.stats(check_prefix(prefix, 'data.stats'))
end

--- Checks a dataset: its index against the files (magic, version, dtype, counts, sizes,
--- pointers, document index) and, with `vocab`, every token id below it. Returns the info, or
--- nil and the reason (naming the file and the field, or the first token out of range).
---@param prefix string
---@param opts? {vocab?: integer}
---@return table|nil info
---@return string? err
---@return string? code
function M.verify(prefix, opts)
  prefix = check_prefix(prefix, 'data.verify')
  opts = check_opts(opts, { vocab = 'integer' }, 'data.verify')
  local info, err, code = mmidx.info(prefix)
  if not info then
    return nil, err, code
  end
  if opts.vocab then
    if opts.vocab < 1 then
      error('data.verify: option vocab must be at least 1', 2)
    end
    local pos, value, vcode = mmidx.out_of_vocab(prefix, opts.vocab)
    if pos == nil then
      return nil, value, vcode
    end
    if pos then
      return nil, string.format('%s.bin: token %d (at token %d) is outside the vocabulary '
        .. '0..%d', prefix, value, pos, opts.vocab - 1), 'EPARSE'
    end
  end
  return info
end

--- Fingerprints: `tokens_sha256`, the SHA-256 of the whole token stream (the .bin bytes), and
--- with `seq_len`, `samples_sha256` over the first `samples` training samples (default 1000)
--- as Megatron assembles them before shuffling (tokens [j*seq_len, j*seq_len + seq_len + 1) of
--- the documents in order, as int64: independent of the dtype).
---@param prefix string
---@param opts? {seq_len?: integer, samples?: integer}
---@return table|nil fingerprint info + { tokens_sha256, samples_sha256?, samples?, seq_len? }
---@return string? err
---@return string? code
function M.fingerprint(prefix, opts)
  prefix = check_prefix(prefix, 'data.fingerprint')
  opts = check_opts(opts, { seq_len = 'integer', samples = 'integer' }, 'data.fingerprint')
  if (opts.seq_len or 0) < 0 or (opts.samples or 0) < 0 then
    error('data.fingerprint: seq_len and samples must be >= 0', 2)
  end
  return mmidx.fingerprint(prefix, opts.seq_len or 0, opts.samples or 1000)
end

-- Fingerprints already computed in this process, by prefix, size and mtime of both files.
local cache = {}

--- What a run record says of its dataset (`record.dataset`): { name, prefix, fingerprint (the
--- token stream's SHA-256), samples_sha256 (first `samples` samples of `seq_len`), tokens,
--- documents, dtype, tokenizer }, computed once per (path, size, mtime) in a process. When the
--- files cannot be read or fail their checks: { name, prefix, fingerprint = nil, error = why }.
---@param prefix string
---@param opts? {name?: string, seq_len?: integer, samples?: integer, tokenizer?: string}
---@return table
function M.describe(prefix, opts)
  prefix = check_prefix(prefix, 'data.describe')
  opts = check_opts(opts, { name = 'string', seq_len = 'integer', samples = 'integer',
    tokenizer = 'string' }, 'data.describe')
  local fs = require('tp.fs')
  local key = { prefix }
  for _, ext in ipairs({ '.idx', '.bin' }) do
    local st = fs.stat(prefix .. ext)
    if not st then
      return { name = opts.name, prefix = prefix,
        error = string.format('%s%s: cannot be read on this machine', prefix, ext) }
    end
    key[#key + 1] = string.format('%d:%.3f', st.size, st.mtime or 0)
  end
  key[#key + 1] = tostring(opts.seq_len or 0) .. ':' .. tostring(opts.samples or 1000)
  local k = table.concat(key, '|')
  if not cache[k] then
    local fp, err = M.fingerprint(prefix, { seq_len = opts.seq_len, samples = opts.samples })
    if not fp then
      return { name = opts.name, prefix = prefix, error = err }
    end
    cache[k] = fp
  end
  local fp = cache[k]
  local side = fs.is_file(prefix .. '.tplua.json') and require('tp.json').load_file(
    prefix .. '.tplua.json')
  side = type(side) == 'table' and side or {}
  local tokenizer = opts.tokenizer
    or (type(side.tokenizer) == 'table' and side.tokenizer.name or nil)
  return { name = opts.name, prefix = prefix, fingerprint = fp.tokens_sha256,
    samples_sha256 = fp.samples_sha256, seq_len = fp.seq_len, samples = fp.samples,
    tokens = fp.tokens, documents = fp.documents, dtype = fp.dtype, tokenizer = tokenizer,
    synthetic = type(side.synthetic) == 'table' and side.synthetic or nil }
end

--- Kinds of synthetic data.
M.SYNTH_KINDS = { 'random', 'repeat', 'zipf' }

--- Writes a synthetic dataset: `tokens` ids below `vocab`, in documents of `doc_len` (default
--- 2048). 'random' is uniform (a model stays near ln(vocab)), 'repeat' a repeated 61-token
--- pattern (a model learns it), 'zipf' ids with Zipf frequencies. The same options give the
--- same bytes.
---@param prefix string
---@param opts {tokens: integer, vocab: integer, seed?: integer, kind?: string, doc_len?: integer}
---@return true|nil ok
---@return string? err
---@return string? code
function M.synth(prefix, opts)
  prefix = check_prefix(prefix, 'data.synth')
  opts = check_opts(opts, { tokens = 'integer', vocab = 'integer', seed = 'integer',
    kind = 'string', doc_len = 'integer' }, 'data.synth')
  if not opts.tokens or opts.tokens < 0 then
    error('data.synth: option tokens (>= 0) is required', 2)
  end
  if not opts.vocab or opts.vocab < 1 or opts.vocab > 2147483648 then
    error('data.synth: option vocab (1..2^31) is required', 2)
  end
  local kind = opts.kind or 'random'
  local known = false
  for _, k in ipairs(M.SYNTH_KINDS) do
    known = known or k == kind
  end
  if not known then
    error("data.synth: option kind must be random, repeat or zipf, got '" .. kind .. "'", 2)
  end
  local ok, err, code = mmidx.synth(prefix, opts.tokens, opts.vocab, opts.seed or 1234, kind,
    opts.doc_len or 2048)
  if not ok then
    return nil, err, code
  end
  -- The sidecar says the data is synthetic: records carry it, and the audit warns when one side
  -- of a comparison trains on it.
  local json = require('tp.json')
  local side = { schema = 'tplua.dataset/1', tokens = opts.tokens,
    tokenizer = { name = 'synthetic-' .. kind, vocab_size = opts.vocab },
    synthetic = { kind = kind, seed = opts.seed or 1234, vocab = opts.vocab,
      doc_len = opts.doc_len or 2048 } }
  return require('tp.fs').write_atomic(prefix .. '.tplua.json',
    json.encode(side, { sort_keys = true, pretty = true }) .. '\n')
end

-- The documents of an input file: the whole file, or one per non-blank line of a `.jsonl` file
-- (its `text` field). Returns the list of texts, or nil and the file and line at fault.
local function documents(path, data)
  if not path:match('%.jsonl$') then
    return { data }
  end
  local json = require('tp.json')
  local out, n = {}, 0
  for line in (data .. '\n'):gmatch('([^\n]*)\n') do
    n = n + 1
    if line:match('%S') then
      local ok, doc = pcall(json.decode, line)
      if not ok or type(doc) ~= 'table' or type(doc.text) ~= 'string' then
        return nil, string.format('%s:%d: a JSON object with a "text" string expected', path, n)
      end
      out[#out + 1] = doc.text
    end
  end
  return out
end

-- A Hugging Face tokenizer: Megatron-LM's own tools/preprocess_data.py does the work (the
-- tokenised files must be what the framework itself would make), offline.
function M._megatron_prepare(inputs, prefix, opts)
  local fs = require('tp.fs')
  local proc = require('tp.proc')
  local dir = opts.megatron or os.getenv('MEGATRON_LM_DIR') or '/workspace/Megatron-LM'
  -- The tool runs from its checkout: every path it is given must be absolute.
  dir = fs.realpath(dir) or dir
  local script = dir .. '/tools/preprocess_data.py'
  if not fs.is_file(script) then
    return nil, string.format("data.prepare: tokenizer '%s' needs Megatron-LM's "
      .. 'tools/preprocess_data.py, not found at %s: give the checkout with --megatron DIR (or '
      .. "MEGATRON_LM_DIR); only 'bytes' is built in", opts.tokenizer, script), 'ENOENT'
  end
  if #inputs ~= 1 or not inputs[1]:match('%.jsonl$') then
    return nil, 'data.prepare: preprocess_data.py takes one JSONL file (one {"text": ...} per '
      .. 'line) as input', 'EINVAL'
  end
  if opts.tokenizer:sub(1, 1) == '/' and not fs.exists(opts.tokenizer) then
    return nil, string.format('data.prepare: tokenizer %s does not exist on this machine (the '
      .. 'preparation is offline: its files must be local)', opts.tokenizer), 'ENOENT'
  end
  -- megatron/training/... tools/preprocess_data.py: --input, --output-prefix, --tokenizer-type,
  -- --tokenizer-model, --append-eod, --workers; it writes <prefix>_text_document.{bin,idx}.
  local input = fs.realpath(inputs[1]) or inputs[1]
  if prefix:sub(1, 1) ~= '/' then
    prefix = (fs.realpath(fs.dirname(prefix)) or fs.dirname(prefix)) .. '/' .. fs.basename(prefix)
  end
  local argv = { opts.python or require('tp.frameworks.reference').python(), script,
    '--input', input, '--output-prefix', prefix, '--tokenizer-type',
    'HuggingFaceTokenizer', '--tokenizer-model', opts.tokenizer, '--append-eod',
    '--workers', tostring(opts.workers or proc.cpu_count()) }
  local r, err, code = proc.run(argv, { env = { HF_HUB_OFFLINE = '1',
    TRANSFORMERS_OFFLINE = '1' }, cwd = dir })
  if not r then
    return nil, err, code
  end
  if r.code ~= 0 then
    local tail = (r.stderr .. r.stdout):gsub('%s+$', ''):match('[^\n]*$')
    return nil, string.format('data.prepare: %s exited with status %d: %s', script, r.code,
      tail), 'EPARSE'
  end
  local made = prefix .. '_text_document'
  local info, ierr, icode = M.info(made)
  if not info then
    return nil, 'data.prepare: preprocess_data.py ran but ' .. tostring(ierr), icode
  end
  local data = fs.read(inputs[1])
  local sidecar = { schema = 'tplua.dataset/1', prefix = made,
    tokenizer = { name = opts.tokenizer, tool = script },
    sources = { { path = fs.realpath(inputs[1]) or inputs[1],
      sha256 = data and require('tp._digest').sha256(data) or nil, bytes = data and #data } },
    documents = info.documents, tokens = info.tokens, dtype = info.dtype }
  local json = require('tp.json')
  local ok, werr, wcode = fs.write_atomic(made .. '.tplua.json',
    json.encode(sidecar, { sort_keys = true }) .. '\n')
  if not ok then
    return nil, werr, wcode
  end
  return sidecar
end

--- Tokenises text into a dataset with the built-in `bytes` tokenizer (each byte one token,
--- vocabulary 256, uint8): one document per input file, or per line of a `.jsonl` file (its
--- `text` field). Writes PREFIX.bin, PREFIX.idx and PREFIX.tplua.json (the tokenizer, each
--- source with its SHA-256, the counts), all atomically. Other tokenizers are the framework's
--- own tools' work (docs/data.md). Returns the sidecar table, or nil, message, code.
---@param inputs string[]
---@param opts {out: string, tokenizer: string}
---@return table|nil sidecar
---@return string? err
---@return string? code
function M.prepare(inputs, opts)
  if type(inputs) ~= 'table' or #inputs == 0 then
    error('data.prepare: inputs must be a non-empty list of paths', 2)
  end
  opts = check_opts(opts, { out = 'string', tokenizer = 'string', megatron = 'string',
    workers = 'integer', python = 'string' }, 'data.prepare')
  local prefix = check_prefix(opts.out, 'data.prepare')
  if type(opts.tokenizer) ~= 'string' or opts.tokenizer == '' then
    error('data.prepare: option tokenizer is required (bytes, or a Hugging Face tokenizer)', 2)
  end
  if opts.tokenizer ~= 'bytes' then
    return M._megatron_prepare(inputs, prefix, opts)
  end
  local fs = require('tp.fs')
  local json = require('tp.json')
  local digest = require('tp._digest')
  local w, werr, wcode = mmidx.writer(prefix, 'uint8')
  if not w then
    return nil, werr, wcode
  end
  local sources, docs, tokens = {}, 0, 0
  for _, path in ipairs(inputs) do
    local data, rerr, rcode = fs.read(path)
    if not data then
      w:abort()
      return nil, rerr, rcode
    end
    local texts, derr = documents(path, data)
    if not texts then
      w:abort()
      return nil, derr, 'EPARSE'
    end
    for _, text in ipairs(texts) do
      if #text > 0 then
        local ok, aerr, acode = w:add_bytes(text, true)
        if not ok then
          w:abort()
          return nil, aerr, acode
        end
        docs = docs + 1
        tokens = tokens + #text
      end
    end
    sources[#sources + 1] = { path = fs.realpath(path) or path, sha256 = digest.sha256(data),
      bytes = #data }
  end
  local ok, cerr, ccode = w:commit()
  if not ok then
    return nil, cerr, ccode
  end
  local sidecar = { schema = 'tplua.dataset/1', tokenizer = { name = 'bytes', vocab_size = 256 },
    sources = sources, documents = docs, tokens = tokens, dtype = 'uint8' }
  local sok, serr, scode = fs.write_atomic(prefix .. '.tplua.json',
    json.encode(sidecar, { sort_keys = true, pretty = true }) .. '\n')
  if not sok then
    return nil, serr, scode
  end
  return sidecar
end

return M
