-- tp.config_env: config.env lines read as sh reads them (quotes, comments, export, ${VAR:-x}),
-- typed by the documented key table, and turned into an experiment spec.
local h = require('helper')
local config_env = require('tp.config_env')

local function parse(text, env)
  return config_env.parse(text, { name = 'c.env', env = env or {} })
end

local function values(entries)
  local out = {}
  for _, e in ipairs(entries) do
    out[e.key] = e.value
  end
  return out
end

describe('tp.config_env.parse', function()
  it('reads sh assignments: quotes, comments, export, CRLF, expansion', function()
    local e = assert(parse('# head\r\nexport TP=2\r\nNAME="my run"   # note\nDATASET=\'$raw\'\n'
      .. 'DATA_DIR=${ROOT:-/data}/x\nTOKENIZER="$DATA_DIR/tok \\$1"\n'
      .. 'FP8_HYBRID=No\n'))
    local v = values(e)
    assert.are.equal(2, v.TP)
    assert.are.equal('my run', v.NAME)
    assert.are.equal('$raw', v.DATASET)
    assert.are.equal('/data/x', v.DATA_DIR)
    assert.are.equal('/data/x/tok $1', v.TOKENIZER)
    assert.are.equal(false, v.FP8_HYBRID)
    assert.are.equal(2, e[1].line)
    -- '#' starts a comment only after white space, as in sh.
    local bad = select(2, parse('LR=3.0e-4#x\n'))
    assert.is_truthy(bad:find('c.env:1: LR: number expected, got "3.0e-4#x"', 1, true), bad)
  end)

  it('takes the file\'s earlier values before the environment', function()
    local v = values(assert(parse('MBS=2\nGBS=${MBS}\nSEED=${SEED:-7}\n', { MBS = '9' })))
    assert.are.equal(2, v.GBS)
    assert.are.equal(7, v.SEED)
    local err = select(2, parse('GBS=$UNSET\n'))
    assert.is_truthy(err:find('c.env:1: GBS: UNSET is not set', 1, true), err)
  end)

  it('names each problem with its line, ten at most', function()
    local lines = {}
    for i = 1, 12 do
      lines[i] = 'BOGUS' .. i .. '=1'
    end
    local err, code = select(2, parse(table.concat(lines, '\n')))
    assert.are.equal('EINVAL', code)
    assert.is_truthy(err:find("c.env:1: unknown key 'BOGUS1'", 1, true))
    assert.is_truthy(err:find('c.env: ... and 2 more problems', 1, true), err)
    local e2 = select(2, parse('SL=1024\nSEQ_LEN=2048\n'))
    assert.is_truthy(e2:find('c.env:2: SEQ_LEN is set again (first at line 1 as SL)', 1, true))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      config_env.parse(42)
    end, 'tp.config_env.parse: text must be a string, got number')
    assert.has_error(function()
      config_env.load('x.env', { modle = 'x' })
    end, "tp.config_env.load: unknown option 'modle'")
  end)
end)

describe('tp.config_env.load', function()
  it('derives the batch and the GPU count from the layout, as tprimat wrote them', function()
    local dir = h.tmpdir()
    h.write(dir .. '/config.env', 'MODEL=qwen2.5-7b\nPLATFORMS=nvd\nNVD_GPU=h200\nMBS=1\nDP=4\n'
      .. 'GRAD_ACCUM=32\nTRAIN_ITERS=10\nLR_DECAY_STEPS=10\nFP8_HYBRID=true\n')
    local spec, notes = assert(config_env.load(dir .. '/config.env', { env = {} }))
    assert.are.same({}, notes)
    assert.are.equal('config-qwen2.5-7b', spec.name)
    assert.are.equal(128, spec.training.gbs)
    assert.are.equal(4, spec.gpus_per_node)
    assert.are.equal('fp8', spec.training.precision)
    assert.are.equal('delayed', spec.training.fp8_recipe)
    assert.are.same({ nvd = { framework = 'megatron', hardware = 'h200' } }, spec.platforms)
    h.write(dir .. '/bad.env', 'MODEL=x\nPLATFORMS=nvd\nAMD_GPU=mi300x\n')
    local _, err = config_env.load(dir .. '/bad.env')
    assert.is_truthy(err:find(':3: AMD_GPU: platform amd is not planned (PLATFORMS=nvd)', 1,
      true), err)
    h.write(dir .. '/decay.env', 'MODEL=x\nTRAIN_ITERS=10\nLR_DECAY_STEPS=8\n')
    _, err = config_env.load(dir .. '/decay.env')
    assert.is_truthy(err:find(':3: LR_DECAY_STEPS: 8, but the unified config decays over '
      .. 'training.iters (TRAIN_ITERS = 10)', 1, true), err)
    local _, merr, mcode = config_env.load(dir .. '/none.env')
    assert.are.equal('ENOENT', mcode)
    assert.is_truthy(merr:find('none.env', 1, true))
  end)
end)
