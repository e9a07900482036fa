-- Real data against random tokens, end to end on CPU in under a minute: the reference trainer
-- (2 gloo ranks) on text that ships with Debian (/usr/share/common-licenses, tokenised with the
-- byte tokenizer) and on uniformly random bytes of the same vocabulary (256). The first learns:
-- its loss falls far below ln(256) = 5.55; the second cannot: it stays at the ln(256) plateau.
--
--   tplua run examples/data_convergence.lua [--results DIR]
--   tplua compare output/data-convergence      (the audit says which run learns and which is
--                                               at the random-data plateau)
--
-- The datasets are made under the results directory's data/ first (tplua data prepare and
-- synth, the same bytes every time); docs/data.md explains both. A recorded copy of the two
-- runs is in examples/convergence.
local tp = require('tp')

local results = os.getenv('TPLUA_DATA_EXAMPLE_DIR') or 'output/data-convergence'
local dir = tp.fs.realpath('.') .. '/' .. results .. '/data'
if results:sub(1, 1) == '/' then
  dir = results .. '/data'
end
assert(tp.fs.mkdir_p(dir))

-- The texts: every regular file of /usr/share/common-licenses (base-files ships them).
local texts = {}
for _, e in ipairs(assert(tp.fs.list('/usr/share/common-licenses'))) do
  if e.type == 'file' then
    texts[#texts + 1] = '/usr/share/common-licenses/' .. e.name
  end
end
table.sort(texts)
local real = assert(tp.data.prepare(texts, { out = dir .. '/licenses', tokenizer = 'bytes' }))
assert(tp.data.synth(dir .. '/random', { tokens = real.tokens, vocab = 256, kind = 'random',
  seed = 1234 }))

local ref = tp.frameworks.get('reference')
local runs = {}
for _, case in ipairs({ { 'licenses', 'text of /usr/share/common-licenses' },
  { 'random', 'uniform random bytes' } }) do
  local config = ref.smoke_config(2)
  config.training.iters = 60
  config.training.lr = 2e-3
  config.training.dataset = { path = dir .. '/' .. case[1], tokenizer = 'bytes' }
  local cmd = tp.launch.get('ranks').wrap(ref.build(config), { nproc_per_node = 2 })
  runs[#runs + 1] = { id = case[1], argv = cmd.argv, env = cmd.env, parser = ref.parser,
    framework = 'reference', model = 'ref-tiny', dataset = case[1], platform = 'cpu',
    config = config, timeout = 600 }
end

return tp.campaign({ name = 'real data against random tokens', results = results, runs = runs })
