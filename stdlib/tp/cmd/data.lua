-- tplua data: Megatron indexed datasets (PREFIX.bin + PREFIX.idx) from the command line: their
-- statistics, a verification, fingerprints, synthetic datasets and text prepared with the
-- byte tokenizer (tp.data; docs/data.md).
local M = {}

M.summary = 'datasets (.bin/.idx): stats, verify, fingerprint, synth, prepare'

M.usage = [[
usage: tplua data stats PREFIX [--json] [--plot LENGTHS.png|svg]
       tplua data verify PREFIX [--vocab N]
       tplua data fingerprint PREFIX [--seq-len N] [--samples N] [--json]
       tplua data synth PREFIX --tokens N --vocab V [--seed S] [--kind random|repeat|zipf]
                              [--doc-len N]
       tplua data prepare INPUT... --out PREFIX --tokenizer bytes
       tplua data prepare INPUT.jsonl --out PREFIX --tokenizer HF_NAME_OR_DIR [--megatron DIR]
                              [--workers N]

PREFIX names PREFIX.bin and PREFIX.idx (a Megatron-LM indexed dataset; giving the .bin or .idx
path works too). Every command first checks the index against the real files: magic, version,
dtype, the counts of sequences and documents, each size and pointer, the document index.

  stats        sequences, documents, tokens, dtype, token-id range, sequence lengths
               (--plot draws their histogram with gnuplot)
  verify       the checks above and, with --vocab N, every token id below N; exit 1 with the
               reason (the file and the field, or the first token out of range)
  fingerprint  SHA-256 of the whole token stream; with --seq-len N, also of the first
               --samples (default 1000) training samples as Megatron assembles them
  synth        a synthetic dataset: random (uniform), repeat (a learnable pattern) or zipf ids;
               the same seed gives the same bytes
  prepare      text files (one document each) or JSONL files (one document per line, its "text"
               field) tokenised with the built-in byte tokenizer (vocabulary 256), with a
               PREFIX.tplua.json sidecar naming the tokenizer and each source's SHA-256;
               another tokenizer runs Megatron-LM's tools/preprocess_data.py (from --megatron
               DIR, $MEGATRON_LM_DIR or /workspace/Megatron-LM) offline, which writes
               PREFIX_text_document.bin/.idx, and adds the sidecar

examples:
  tplua data synth /tmp/rnd --tokens 1000000 --vocab 32000 --kind random
  tplua data verify /tmp/rnd --vocab 32000
  tplua data prepare /usr/share/common-licenses/GPL-3 --out /tmp/gpl --tokenizer bytes

exit status: 0, 1 when the dataset fails a check or cannot be read or written, 2 on a usage
error.
]]

local function fail(msg)
  io.stderr:write('tplua data: ', tostring(msg), '\n')
  return 1
end

local function human(n)
  local s = tostring(math.tointeger(n) or n)
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end

-- The length histogram as a bar chart (tp.plot), one bar per bit length that occurs.
local function plot_lengths(st, prefix, path)
  local cats, counts = {}, {}
  for k, n in ipairs(st.length_histogram) do
    if n > 0 then
      local lo = k == 1 and 0 or 1 << (k - 2)
      local hi = k == 1 and 0 or (1 << (k - 1)) - 1
      cats[#cats + 1] = lo == hi and tostring(lo) or (lo .. '-' .. hi)
      counts[#counts + 1] = n
    end
  end
  local format = path:match('%.(%w+)$')
  if format ~= 'png' and format ~= 'svg' then
    return nil, '--plot: the file must end in .png or .svg: ' .. path
  end
  local name = prefix:gsub('%.bin$', ''):gsub('%.idx$', ''):match('[^/]*$')
  return require('tp.present.plot').render({ kind = 'bars', title = 'sequence lengths of ' .. name,
    xlabel = 'tokens per sequence', ylabel = 'sequences',
    categories = cats, series = { { title = 'sequences', values = counts } } },
    { format = format, path = path })
end

local function stats(opts, rest)
  local data = require('tp.data')
  local st, err = data.stats(rest[1])
  if not st then
    return fail(err)
  end
  if opts.plot then
    local ok, perr = plot_lengths(st, rest[1], opts.plot)
    if not ok then
      return fail(perr)
    end
  end
  if opts.json then
    io.stdout:write(require('tp.json').encode(st, { sort_keys = true }), '\n')
    return 0
  end
  local out = io.stdout
  out:write(string.format('%s\n', rest[1]))
  out:write(string.format('  dtype      %s (%d bytes per token)\n', st.dtype, st.itemsize))
  out:write(string.format('  documents  %s\n', human(st.documents)))
  out:write(string.format('  sequences  %s (lengths %s..%s, %s empty)\n', human(st.sequences),
    human(st.min_len), human(st.max_len), human(st.empty_sequences)))
  out:write(string.format('  tokens     %s\n', human(st.tokens)))
  out:write(string.format('  token ids  %s..%s\n', human(st.min_token), human(st.max_token)))
  out:write('  lengths    ')
  local parts = {}
  for k, n in ipairs(st.length_histogram) do
    if n > 0 then
      local lo = k == 1 and 0 or 1 << (k - 2)
      local hi = k == 1 and 0 or (1 << (k - 1)) - 1
      parts[#parts + 1] = string.format('%s-%s: %s', human(lo), human(hi), human(n))
    end
  end
  out:write(#parts > 0 and table.concat(parts, ', ') or 'none', '\n')
  return 0
end

local function verify(opts, rest)
  local info, err = require('tp.data').verify(rest[1], { vocab = opts.vocab })
  if not info then
    return fail(err)
  end
  io.stdout:write(string.format('%s: ok (%s tokens in %s documents, %s%s)\n', rest[1],
    human(info.tokens), human(info.documents), info.dtype,
    opts.vocab and (', every id below ' .. opts.vocab) or ''))
  return 0
end

local function fingerprint(opts, rest)
  local fp, err = require('tp.data').fingerprint(rest[1], { seq_len = opts.seq_len,
    samples = opts.samples })
  if not fp then
    return fail(err)
  end
  if opts.json then
    io.stdout:write(require('tp.json').encode(fp, { sort_keys = true }), '\n')
    return 0
  end
  io.stdout:write(string.format('tokens   %s  (%s tokens, %s)\n', fp.tokens_sha256,
    human(fp.tokens), fp.dtype))
  if fp.samples_sha256 then
    io.stdout:write(string.format('samples  %s  (first %s samples of %d tokens)\n',
      fp.samples_sha256, human(fp.samples), fp.seq_len))
  end
  return 0
end

local function synth(opts, rest)
  if not opts.tokens or not opts.vocab then
    return require('tp.cli').usage_error('data', 'synth needs --tokens N and --vocab V', M.usage)
  end
  local ok, res, err = pcall(require('tp.data').synth, rest[1], { tokens = opts.tokens,
    vocab = opts.vocab, seed = opts.seed, kind = opts.kind, doc_len = opts.doc_len })
  if not ok then
    return require('tp.cli').usage_error('data', tostring(res):gsub('^.-data%.synth: ', ''),
      M.usage)
  end
  if not res then
    return fail(err)
  end
  io.stdout:write(string.format('%s: %s %s tokens below %s (seed %d)\n', rest[1],
    opts.kind or 'random', human(opts.tokens), human(opts.vocab), opts.seed or 1234))
  return 0
end

local function prepare(opts, rest)
  if not opts.out or not opts.tokenizer then
    return require('tp.cli').usage_error('data', 'prepare needs --out PREFIX and --tokenizer T',
      M.usage)
  end
  local sidecar, err = require('tp.data').prepare(rest, { out = opts.out,
    tokenizer = opts.tokenizer, megatron = opts.megatron, workers = opts.workers })
  if not sidecar then
    return fail(err)
  end
  io.stdout:write(string.format('%s: %s documents, %s tokens (tokenizer %s) from %d file(s)\n',
    sidecar.prefix or opts.out, human(sidecar.documents), human(sidecar.tokens),
    sidecar.tokenizer.name, #sidecar.sources))
  return 0
end

local SUBCOMMANDS = {
  stats = { fn = stats, flags = { json = 'boolean', plot = 'string' }, args = 1 },
  verify = { fn = verify, flags = { vocab = 'integer' }, args = 1 },
  fingerprint = { fn = fingerprint, flags = { seq_len = 'integer', samples = 'integer',
    json = 'boolean' }, args = 1 },
  synth = { fn = synth, flags = { tokens = 'integer', vocab = 'integer', seed = 'integer',
    kind = 'string', doc_len = 'integer' }, args = 1 },
  prepare = { fn = prepare, flags = { out = 'string', tokenizer = 'string', megatron = 'string',
    workers = 'integer' }, args = 'many' },
}

function M.run(args)
  local cli = require('tp.cli')
  local name = args[1]
  if name == '--help' or name == '-h' then
    io.stdout:write(M.usage)
    return 0
  end
  local sub = SUBCOMMANDS[name or '']
  if not sub then
    return cli.usage_error('data', name and ("unknown subcommand '" .. name .. "'")
      or 'a subcommand is required', M.usage)
  end
  local spec = { help = 'boolean' }
  for k, v in pairs(sub.flags) do
    spec[k] = v
  end
  local opts, rest = cli.parse(table.move(args, 2, #args, 1, {}), spec)
  if not opts then
    return cli.usage_error('data', rest, M.usage)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if (sub.args == 1 and #rest ~= 1) or (sub.args == 'many' and #rest == 0) then
    return cli.usage_error('data', name .. (sub.args == 1 and ': one PREFIX expected'
      or ': at least one INPUT expected'), M.usage)
  end
  return sub.fn(opts, rest)
end

return M
