-- tp.secrets: which names are secret, scrubbing of env tables, argv, strings and nested values.
local secrets = require('tp.secrets')

describe('tp.secrets', function()
  it('recognises secret variable names in any case', function()
    for _, name in ipairs({ 'HF_TOKEN', 'hf_token', 'WANDB_API_KEY', 'AWS_SECRET_ACCESS_KEY',
      'DB_PASSWORD', 'MyPassword', 'SSH_KEYFILE' }) do
      assert.is_true(secrets.is_secret_name(name), name)
    end
    for _, name in ipairs({ 'CUDA_VISIBLE_DEVICES', 'PATH', 'NCCL_DEBUG', 'PASSWD' }) do
      assert.is_false(secrets.is_secret_name(name), name)
    end
    assert.has_error(function()
      secrets.is_secret_name(42)
    end, 'name: string expected, got number')
  end)

  it('redacts secret env values and scrubs them from other strings', function()
    local s = secrets.new({ { HF_TOKEN = 'hf_s3cr3t_value', OTHER = 'x' } },
      { process_env = false })
    local env = s:env({ HF_TOKEN = 'hf_s3cr3t_value', URL = 'https://u:hf_s3cr3t_value@h',
      UNSET_KEY = false, N = 3 })
    assert.are.equal('<redacted>', env.HF_TOKEN)
    assert.are.equal('https://u:<redacted>@h', env.URL)
    assert.is_false(env.UNSET_KEY)
    assert.are.equal(3, env.N)
    local out, n = s:string('a hf_s3cr3t_value b hf_s3cr3t_value')
    assert.are.equal('a <redacted> b <redacted>', out)
    assert.are.equal(2, n)
    assert.are.same({ 'train.py', '--token=<redacted>', 'HF_TOKEN=<redacted>',
      'MY_SECRET=<redacted>', 'PLAIN=1' },
      s:argv({ 'train.py', '--token=hf_s3cr3t_value', 'HF_TOKEN=anything', 'MY_SECRET=zz',
        'PLAIN=1' }))
  end)

  it('replaces the longest secret first and skips values too short or too plain', function()
    local s = secrets.new({ { A_TOKEN = 'abcdef', B_TOKEN = 'abcdefghij', C_KEY = 'xy',
      TOKENIZERS_PARALLELISM = 'false', D_KEY = '12345' } }, { process_env = false })
    assert.are.equal('<redacted> <redacted>', (s:string('abcdefghij abcdef')))
    -- 'xy' is shorter than MIN_SCRUB_LEN; 'false' and numbers are configuration words.
    assert.are.equal('xy false 12345', (s:string('xy false 12345')))
    assert.are.same({ TOKENIZERS_PARALLELISM = '<redacted>' },
      s:env({ TOKENIZERS_PARALLELISM = 'false' }))
  end)

  it('scrubs nested values, keeps metatables and shared sentinels, handles cycles', function()
    local json = require('tp.json')
    local s = secrets.new({ { API_KEY = 'k3y-k3y-k3y' } }, { process_env = false })
    local t = { msg = 'uses k3y-k3y-k3y', list = json.array({ 'k3y-k3y-k3y', 1 }),
      none = json.null, ['k3y-k3y-k3y'] = true, tokenizer = 'HuggingFaceTokenizer' }
    t.self = t
    local c = s:value(t)
    assert.are.equal('uses <redacted>', c.msg)
    assert.are.same({ '<redacted>', 1 }, { c.list[1], c.list[2] })
    assert.is_true(json.is_array(c.list))
    assert.are.equal(json.null, c.none)
    assert.is_true(c['<redacted>'])
    assert.is_nil(c['k3y-k3y-k3y'])
    assert.are.equal('HuggingFaceTokenizer', c.tokenizer)
    assert.are.equal(c, c.self)
    assert.are.equal('uses k3y-k3y-k3y', t.msg)  -- the original is untouched
  end)

  it('reads the process environment and adds env tables later', function()
    local env = secrets.process_env()
    assert.are.equal(os.getenv('PATH'), env.PATH)
    local s = secrets.new(nil, { process_env = false })
    assert.are.equal('tok-12345', (s:string('tok-12345')))
    s:add_env({ SOME_TOKEN = 'tok-12345' })
    assert.are.equal('<redacted>', (s:string('tok-12345')))
    assert.has_error(function()
      secrets.new({ 'not a table' })
    end, 'envs[1]: table expected, got string')
  end)
end)
