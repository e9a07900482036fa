-- Specs of tp.json (stdlib/tp/json.lua over lua/l_json.c): decoding, encoding, files, bad input.
local h = require('helper')
local json = require('tp.json')

local function fixture(name)
  return h.fixture('json/' .. name)
end

-- Asserts a failure triple: nil, a message containing `want` (plain find), and `code`.
local function fails(want, code, v, err, c)
  assert.is_nil(v)
  assert.is_string(err)
  assert.is_truthy(err:find(want, 1, true), ('%q not found in %q'):format(want, err))
  assert.is_nil(err:find('\n', 1, true), 'message must be one line: ' .. err)
  assert.are.equal(code, c)
end

local function listdir(dir)
  local p = io.popen('ls -A ' .. h.shquote(dir))
  local names = {}
  for line in p:lines() do
    names[#names + 1] = line
  end
  p:close()
  table.sort(names)
  return names
end

describe('tp.json.decode', function()
  it('decodes scalars, arrays and objects', function()
    local v = assert(json.decode('{"a": [1, 2.5, "x", true, false], "b": {"c": "d"}}'))
    assert.are.same({ 1, 2.5, 'x', true, false }, v.a)
    assert.are.equal('d', v.b.c)
    assert.are.equal('integer', math.type(v.a[1]))
    assert.are.equal('float', math.type(v.a[2]))
  end)

  it('keeps integers exact to 64 bits and makes larger or fractional numbers floats', function()
    local v = assert(json.load_file(fixture('numbers.json')))
    assert.are.equal(19, #v)
    local want = {
      { 0, 'integer' },
      { 0, 'integer' },
      { 1, 'integer' },
      { -1, 'integer' },
      { math.maxinteger, 'integer' },
      { math.mininteger, 'integer' },
      { 9223372036854775808.0, 'float' },
      { -9223372036854775809.0, 'float' },
      { 18446744073709551616.0, 'float' },
      { 0.5, 'float' },
      { -0.0, 'float' },
      { 1000.0, 'float' },
      { 1000.0, 'float' },
      { 2.5e-3, 'float' },
      { 1.0, 'float' },
      { 1.2345678901234568e+29, 'float' },
      { 0.1, 'float' },
      { math.huge, 'float' },
      { 9007199254740993, 'integer' },
    }
    for i, w in ipairs(want) do
      assert.are.equal(w[1], v[i], 'element ' .. i)
      assert.are.equal(w[2], math.type(v[i]), 'type of element ' .. i)
    end
    assert.are.equal(-math.huge, 1 / v[11], '-0.0 keeps its sign')
  end)

  it('gives null as tp.json.null in arrays and at the top level', function()
    local v = assert(json.decode('[1, null, 3]'))
    assert.are.equal(3, #v)
    assert.is_true(json.is_null(v[2]))
    assert.are.equal('null', tostring(v[2]))
    assert.is_true(json.is_null(json.decode('null')))
    assert.is_false(json.is_null(false))
    assert.is_false(json.is_null(nil))
  end)

  it('leaves null members out of objects unless opts.null is given', function()
    local v = assert(json.decode('{"a": null, "b": 1}'))
    assert.is_nil(v.a)
    assert.are.equal(1, v.b)
    local w = assert(json.decode('{"a": null, "l": [null]}', { null = json.null }))
    assert.are.equal(json.null, w.a)
    assert.are.equal(json.null, w.l[1])
    local x = assert(json.decode('{"a": null, "l": [null]}', { null = false }))
    assert.is_false(x.a)
    assert.is_false(x.l[1])
  end)

  it('marks decoded arrays so that empty ones encode back as []', function()
    local v = assert(json.decode('{"a": [], "o": {}}'))
    assert.is_true(json.is_array(v.a))
    assert.is_false(json.is_array(v.o))
    assert.are.equal('{"a":[],"o":{}}', json.encode(v))
  end)

  it('decodes escapes, surrogate pairs and UTF-8, and skips a UTF-8 byte order mark', function()
    local v = assert(json.decode('["caf\\u00e9", "\\ud83d\\ude80", "\\n\\t\\"\\\\\\/", "é✓"]'))
    assert.are.same({ 'café', '\u{1F680}', '\n\t"\\/', 'é✓' }, v)
    assert.are.equal(1, json.decode('\xEF\xBB\xBF 1'))
  end)

  it('decodes objects with many members and keeps every key', function()
    local parts = {}
    for i = 1, 2000 do
      parts[#parts + 1] = ('"k%d": %d'):format(i, i)
    end
    local v = assert(json.decode('{' .. table.concat(parts, ',') .. '}'))
    local n = 0
    for k, x in pairs(v) do
      assert.are.equal('k' .. x, k)
      n = n + 1
    end
    assert.are.equal(2000, n)
  end)

  describe('reports bad input as <source>:<line>:<column>', function()
    it('for empty and blank input', function()
      fails('<string>:1:1: empty input', 'EPARSE', json.decode(''))
      fails('<string>:2:3: unexpected end of input', 'EPARSE', json.decode(' \n  '))
    end)

    it('for truncated input', function()
      fails('truncated.json:43:5: unexpected end of input', 'EPARSE',
        json.load_file(fixture('truncated.json')))
      fails('<string>:1:6: unexpected end of input', 'EPARSE', json.decode('[1, 2'))
      fails('<string>:1:5: unexpected end of input', 'EPARSE', json.decode('{"a"'))
      fails('<string>:1:1: unterminated string', 'EPARSE', json.decode('"abc'))
      fails('<string>:1:1: unexpected \'tru\'', 'EPARSE', json.decode('tru'))
    end)

    it('for duplicate keys, at the second occurrence', function()
      fails('duplicate_keys.json:2:2: duplicate key "iters"', 'EPARSE',
        json.load_file(fixture('duplicate_keys.json')))
      fails('<string>:1:13: duplicate key "a"', 'EPARSE', json.decode('{"a": null, "a": 1}'))
      fails('<string>:1:19: duplicate key "a"', 'EPARSE',
        json.decode('{"a": 1, "b": {}, "a": 2}'))
    end)

    it('for NUL bytes, control characters and invalid UTF-8', function()
      fails('nul_byte.json:2:12: NUL byte', 'EPARSE', json.load_file(fixture('nul_byte.json')))
      fails('<string>:1:3: NUL byte in a string', 'EPARSE', json.decode('["\0"]'))
      fails('<string>:1:3: unescaped control character U+000A in a string', 'EPARSE',
        json.decode('["\n"]'))
      fails('<string>:1:2: unexpected control character U+0001', 'EPARSE', json.decode('[\1]'))
      fails('invalid_utf8.json:1:15: invalid UTF-8 (byte 0xE9)', 'EPARSE',
        json.load_file(fixture('invalid_utf8.json')))
      fails('<string>:1:3: invalid UTF-8 (byte 0xED)', 'EPARSE', json.decode('["\xED\xA0\x80"]'))
      fails('<string>:1:3: invalid UTF-8 (byte 0xC0)', 'EPARSE', json.decode('["\xC0\xAF"]'))
      fails('<string>:1:2: unexpected character \'é\'', 'EPARSE', json.decode('[é]'))
    end)

    it('for binary garbage', function()
      fails('garbage.bin:1:', 'EPARSE', json.load_file(fixture('garbage.bin')))
    end)

    it('for bad escapes', function()
      fails('<string>:1:5: invalid escape \'\\x\'', 'EPARSE', json.decode('["ab\\x"]'))
      fails('<string>:1:3: invalid \\u escape', 'EPARSE', json.decode('["\\u12G4"]'))
      fails('<string>:1:3: \\u0000 (NUL) in a string is not supported', 'EPARSE',
        json.decode('["\\u0000"]'))
      fails('<string>:1:3: unpaired UTF-16 surrogate \\uD83D', 'EPARSE',
        json.decode('["\\ud83d x"]'))
      fails('<string>:1:3: unpaired UTF-16 surrogate \\uDE80', 'EPARSE',
        json.decode('["\\ude80"]'))
    end)

    it('for numbers outside RFC 8259 that cJSON would accept', function()
      fails('<string>:1:2: invalid number \'01\'', 'EPARSE', json.decode('[01]'))
      fails('<string>:1:5: invalid number \'1.\'', 'EPARSE', json.decode('[2, 1.]'))
      fails('<string>:1:1: invalid number \'-.5\'', 'EPARSE', json.decode('-.5'))
      fails('<string>:1:1: invalid number \'1.5e\'', 'EPARSE', json.decode('1.5e'))
      fails('<string>:1:2: unexpected \'+1\'', 'EPARSE', json.decode('[+1]'))
      fails('<string>:1:2: unexpected \'NaN\'', 'EPARSE', json.decode('[NaN]'))
      fails('<string>:1:1: unexpected \'Infinity\'', 'EPARSE', json.decode('Infinity'))
      -- Debian's cJSON reads numbers of any length (upstream 1.7.15 stops at 63 characters)
      assert.are.equal(tonumber(('1'):rep(70) .. '.0'), json.decode(('1'):rep(70)))
      assert.are.equal(0.5, json.decode('0.' .. ('5'):rep(1) .. ('0'):rep(300)))
    end)

    it('for syntax errors and trailing text', function()
      fails('<string>:1:9: unexpected \'}\'', 'EPARSE', json.decode('{"a": 1,}'))
      fails('<string>:1:6: unexpected \'1\'', 'EPARSE', json.decode('{"a" 1}'))
      fails('<string>:2:1: unexpected \']\' after the JSON value', 'EPARSE', json.decode('[1]\n]'))
      fails('<string>:1:3: unexpected \'x\' after the JSON value', 'EPARSE', json.decode('1 x'))
    end)

    it('for nesting 100k levels deep, without overflowing any stack', function()
      local deep = ('['):rep(100000) .. (']'):rep(100000)
      fails('<string>:1:513: nesting deeper than 512 levels (max_depth)', 'ELIMIT',
        json.decode(deep))
      local objs = ('{"a":'):rep(100000) .. '1' .. ('}'):rep(100000)
      fails('nesting deeper than 512 levels', 'ELIMIT', json.decode(objs))
      fails('<string>:1:4: nesting deeper than 3 levels', 'ELIMIT',
        json.decode('[[[[]]]]', { max_depth = 3 }))
      assert.is_table(json.decode(('['):rep(1000) .. (']'):rep(1000), { max_depth = 1000 }))
    end)

    it('naming the source given in opts.name', function()
      fails('run.json:1:2: unexpected \']\'', 'EPARSE', json.decode('{]', { name = 'run.json' }))
    end)

    it('refusing input above max_size', function()
      fails('<string>: input is 9 bytes, above max_size (8 bytes)', 'ELIMIT',
        json.decode('[1,2,3,4]', { max_size = 8 }))
    end)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      json.decode(nil)
    end, 'json.decode: string expected, got nil')
    assert.has_error(function()
      json.decode('1', { nul = 1 })
    end, 'json.decode: unknown option "nul"')
    assert.has_error(function()
      json.decode('1', { max_depth = 'x' })
    end, 'json.decode: option "max_depth" must be integer, got string')
    assert.has_error(function()
      json.decode('1', { max_depth = 5000 })
    end, 'json.decode: option "max_depth" must be within 1..1000')
  end)
end)

describe('tp.json.decode with skip', function()
  local text = h.read(h.fixture('results/mock/nvd/megatron-real.json'))
  local SKIP = { 'records', 'args', 'step_times', 'loss_values', 'params' }

  -- Asserts that decoding `s` with and without `skip` gives the same result: the same failure,
  -- or the same members, each skipped one decoding (from its text) to the same value.
  local function same_as_full(s, skip)
    local full, ferr, fcode = json.decode(s, { name = 'x.json' })
    local part, perr, pcode = json.decode(s, { name = 'x.json', skip = skip })
    assert.are.same({ ferr, fcode }, { perr, pcode })
    if full == nil then
      assert.is_nil(part)
      return false
    end
    if type(full) ~= 'table' or json.is_array(full) then
      assert.are.same(full, part)
      return true
    end
    for k, v in pairs(full) do
      local p = part[k]
      if json.is_skipped(p) then
        assert.are.same(v, assert(json.decode_skipped(s, p)))
        local n = 0
        for _ in pairs(v) do
          n = n + 1
        end
        assert.are.equal(n, p.count)
      else
        assert.are.same(v, p)
      end
    end
    for k in pairs(part) do
      assert.is_not_nil(full[k], 'extra member ' .. tostring(k))
    end
    return true
  end

  it('describes each skipped array or object and decodes the rest as usual', function()
    local full = assert(json.decode(text))
    local part = assert(json.decode(text, { skip = SKIP }))
    assert.is_true(json.is_skipped(part.records))
    assert.are.equal('array', part.records.kind)
    assert.are.equal(#full.records, part.records.count)
    assert.are.same({ object = #full.records }, part.records.kinds)
    assert.are.equal('object', part.args.kind)
    assert.is_true(json.is_skipped(part.step_times))
    assert.are.equal(#full.step_times, part.step_times.kinds.number)
    assert.are.same(full.records, assert(json.decode(text:sub(part.records.first,
      part.records.last))))
    assert.are.same(full.training_config, part.training_config)
    assert.is_false(json.is_skipped(part.training_config))
    assert.matches('^tp%.json%.skipped array %(%d+ elements, bytes %d+%.%.%d+%)$',
      tostring(part.records))
    assert.is_true(same_as_full(text, SKIP))
  end)

  it('leaves scalars, nulls and arrays at the top level as they are', function()
    assert.are.same({ a = 1 }, json.decode('{"a": 1, "b": null}', { skip = { 'a', 'b' } }))
    assert.are.same({ a = 1, b = json.null },
      json.decode('{"a": 1, "b": null}', { skip = { 'b' }, null = json.null }))
    assert.are.same({ { a = {} } }, json.decode('[{"a": {}}]', { skip = { 'a' } }))
    local v = json.decode('{"a": [], "b": {}, "c": [null, 1, "x", true, [], {}]}',
      { skip = { 'a', 'b', 'c' } })
    assert.are.same({ 0, 0, 6 }, { v.a.count, v.b.count, v.c.count })
    assert.are.same({ null = 1, number = 1, string = 1, boolean = 1, array = 1, object = 1 },
      v.c.kinds)
    -- A key written with escapes is decoded as usual (and still found to be a duplicate).
    assert.are.same({ records = { 1 } }, json.decode('{"rec\\u006frds": [1]}',
      { skip = { 'records' } }))
    fails('<string>:1:17: duplicate key "records"', 'EPARSE',
      json.decode('{"records": [], "rec\\u006frds": [1]}', { skip = { 'records' } }))
  end)

  it('fails exactly as the full decode does, wherever the problem is', function()
    for _, s in ipairs({
      '{"records": [1, 2', '{"records": [1, 2,]}', '{"records": [01]}', '{"records": [1.]}',
      '{"records": [-]}', '{"records": [1e]}', '{"records": [tru]}', '{"records": [nul]}',
      '{"records": {"a" 1}}', '{"records": {"a": 1,}}', '{"records": {1: 2}}',
      '{"records": ["\1"]}', '{"records": ["\\x"]}', '{"records": ["\xE9"]}', '{"records": [\1]}',
      '{"records": [1] ]', '{"records": [1]} x', '{"records": [1]}}', '{"records": [] "a": 1}',
      '{"records": [], "records": []}', '{"a": 1, "records": [], "a": 2}',
      '{"records": [], "b": null, "b": 1}', '{"records": [[[[[[]]]]]]}',
      '{"records": [{"a": 1, "b": {"a": 2}, "a": 3}]}', '{"records": [{"a": {"a": 1}}]}',
      '{"records": [{"x": 1, "a\\u0062": 1, "ab": 2}]}',
      '{"args": {"k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8, ' ..
        '"k9": 9, "k10": 10, "k5": 11}}',
      '{"args": {"k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8, ' ..
        '"k9": 9, "k10": 10, "k11": 11}}',
      '{"records": ' .. ('['):rep(600) .. (']'):rep(600) .. '}', '{"records": "x"}',
      '{"records": [1, 2, 3] , "args" : {"x": [1, {"y": "z"}]} }', '{}', ' { } ',
    }) do
      same_as_full(s, SKIP)
    end
    fails('<string>:1:17: nesting deeper than 5 levels (max_depth)', 'ELIMIT',
      json.decode('{"records": [[[[[[]]]]]]}', { skip = SKIP, max_depth = 5 }))
  end)

  it('agrees with the full decode on 1000 damaged copies of a run record #slow', function()
    -- xorshift32, seeded: the same copies every run.
    local s = 2463534242
    local function rand(n)
      s = s ~ ((s << 13) & 0xffffffff)
      s = s ~ (s >> 17)
      s = s ~ ((s << 5) & 0xffffffff)
      return s % n + 1
    end
    local bytes = { '{', '}', '[', ']', ',', ':', '"', '0', '-', '.', 'e', ' ', '\\', 'n',
      '\n', '\1', '\xC3' }
    -- The pretty-printed record and its compact form (where damage hits structure more often).
    local compact = assert(json.encode(assert(json.decode(text))))
    local accepted = 0
    for _ = 1, 1000 do
      local t = rand(2) == 1 and text or compact
      local at = rand(#t)
      local what = rand(3)
      if what == 1 then
        t = t:sub(1, at - 1) .. t:sub(at + 1)
      elseif what == 2 then
        t = t:sub(1, at - 1) .. bytes[rand(#bytes)] .. t:sub(at)
      else
        t = t:sub(1, at - 1) .. bytes[rand(#bytes)] .. t:sub(at + 1)
      end
      if same_as_full(t, SKIP) then
        accepted = accepted + 1
      end
    end
    -- Both outcomes were exercised.
    assert.is_true(accepted > 50 and accepted < 950, 'accepted ' .. accepted)
  end)

  it('refuses to encode a skipped member, which would replace its data', function()
    local v = assert(json.decode('{"a": [1, 2], "b": 1}', { skip = { 'a' } }))
    fails('$.a: a member left undecoded by decode{skip}', 'EINVAL', json.encode(v))
    v.a = json.decode_skipped('{"a": [1, 2], "b": 1}', v.a)
    assert.are.equal('{"a":[1,2],"b":1}', json.encode(v))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      json.decode('{}', { skip = 'records' })
    end, 'json.decode: option "skip" must be table, got string')
    assert.has_error(function()
      json.decode('{}', { skip = { 1 } })
    end, 'json.decode: option "skip" must be a list of member names')
    assert.has_error(function()
      json.decode_skipped('{}', {})
    end, 'json.decode_skipped: a skipped value expected')
  end)
end)

describe('tp.json.encode', function()
  it('writes scalars', function()
    assert.are.equal('null', json.encode(json.null))
    assert.are.equal('true', json.encode(true))
    assert.are.equal('"a\\"b"', json.encode('a"b'))
    assert.are.equal('9223372036854775807', json.encode(math.maxinteger))
    assert.are.equal('-9223372036854775808', json.encode(math.mininteger))
  end)

  it('writes floats with the shortest round-trip text and a .0 when integral', function()
    assert.are.equal('[1.0,0.1,-0.0,1e+20,2.5e-07,0.30000000000000004,100.0]',
      json.encode({ 1.0, 0.1, -0.0, 1e20, 2.5e-7, 0.1 + 0.2, 100.0 }))
    for _, x in ipairs({ math.pi, 1 / 3, 2 ^ 53 + 0.0, 5e-324, 1.7976931348623157e308, -1e-10 }) do
      local back = json.decode(json.encode(x))
      assert.are.equal(x, back)
      assert.are.equal('float', math.type(back))
    end
  end)

  it('escapes control characters, quotes and backslashes, and keeps UTF-8 as is', function()
    assert.are.equal('"\\n\\r\\t\\b\\f\\u0001\\u001f\\u0000\\\\\\"é/"',
      json.encode('\n\r\t\b\f\1\31\0\\"é/'))
  end)

  it('sorts keys by default, and follows pairs order with sort_keys = false', function()
    assert.are.equal('{"a":1,"b":2,"c":{"x":[],"y":{}}}',
      json.encode({ c = { y = {}, x = json.array() }, b = 2, a = 1 }))
    local s = json.encode({ c = 3, b = 2, a = 1 }, { sort_keys = false })
    assert.are.same({ a = 1, b = 2, c = 3 }, json.decode(s))
  end)

  it('pretty-prints with the chosen indent', function()
    assert.are.equal('{\n  "a": [\n    1,\n    2\n  ],\n  "b": {},\n  "c": []\n}',
      json.encode({ a = { 1, 2 }, b = {}, c = json.array() }, { pretty = true }))
    assert.are.equal('[\n    1\n]', json.encode({ 1 }, { pretty = true, indent = 4 }))
  end)

  it('refuses NaN and infinities, naming the key path, unless allow_nan', function()
    fails('$.runs[2].loss: nan is not valid JSON', 'EINVAL',
      json.encode({ runs = { { loss = 1.0 }, { loss = 0 / 0 } } }))
    fails('$["step times"][1]: inf is not valid JSON', 'EINVAL',
      json.encode({ ['step times'] = { math.huge } }))
    fails('$: -inf is not valid JSON', 'EINVAL', json.encode(-math.huge))
    assert.are.equal('[null,null,1]', json.encode({ 0 / 0, math.huge, 1 }, { allow_nan = true }))
  end)

  it('refuses tables that are neither arrays nor objects', function()
    fails('$.t: table mixes integer and string keys', 'EINVAL',
      json.encode({ t = { 1, 2, x = 3 } }))
    fails('$: integer keys are not 1..n (sparse array)', 'EINVAL',
      json.encode({ [1] = 1, [3] = 3 }))
    fails('$: integer keys are not 1..n', 'EINVAL', json.encode({ [0] = 1 }))
    fails('$.a: table key of type float', 'EINVAL', json.encode({ a = { [1.5] = 1 } }))
    fails('$: table key of type boolean', 'EINVAL', json.encode({ [true] = 1 }))
    fails('$: table marked as an array has string keys', 'EINVAL',
      json.encode(json.array({ x = 1 })))
  end)

  it('refuses cycles, functions, userdata and invalid UTF-8', function()
    local t = { a = {} }
    t.a.b = t
    fails('$.a.b: table contains itself (cycle)', 'EINVAL', json.encode(t))
    fails('$[1]: cannot encode a function', 'EINVAL', json.encode({ print }))
    fails('$.f: cannot encode a userdata', 'EINVAL', json.encode({ f = io.stdout }))
    fails('$.s: string is not valid UTF-8 (byte 0xFF at offset 1)', 'EINVAL',
      json.encode({ s = 'a\xFF' }))
    fails('$["bad\\xFF"]: string is not valid UTF-8', 'EINVAL', json.encode({ ['bad\xFF'] = 1 }))
  end)

  it('encodes shared (non-cyclic) tables at each place they appear', function()
    local shared = { 1 }
    assert.are.equal('{"a":[1],"b":[1]}', json.encode({ a = shared, b = shared }))
  end)

  it('refuses nesting deeper than 1000 levels', function()
    local t = {}
    local cur = t
    for _ = 1, 1500 do
      cur[1] = {}
      cur = cur[1]
    end
    fails('nesting deeper than 1000 levels', 'EINVAL', json.encode(t))
  end)

  it('round-trips random values', function()
    math.randomseed(7)
    local function gen(depth)
      local r = math.random(depth > 3 and 5 or 7)
      if r == 1 then
        return math.random(-1000000, 1000000)
      elseif r == 2 then
        return (math.random() - 0.5) * 10 ^ math.random(-20, 20)
      elseif r == 3 then
        local n = math.random(0, 12)
        local b = {}
        for i = 1, n do
          b[i] = utf8.char(math.random(1, 0x2FFF))
        end
        return table.concat(b)
      elseif r == 4 then
        return math.random(2) == 1
      elseif r == 5 then
        return json.null
      elseif r == 6 then
        local a = json.array()
        for i = 1, math.random(0, 5) do
          a[i] = gen(depth + 1)
        end
        return a
      end
      local o = {}
      for _ = 1, math.random(0, 5) do
        o['k' .. math.random(100)] = gen(depth + 1)
      end
      return o
    end
    for _ = 1, 300 do
      local v = gen(0)
      local s = assert(json.encode(v))
      local back, err = json.decode(s, { null = json.null })
      assert.is_nil(err)
      assert.are.same(v, back)
      assert.are.equal(s, json.encode(back))
      local pretty = assert(json.encode(v, { pretty = true }))
      assert.are.equal(s, json.encode(json.decode(pretty, { null = json.null })))
    end
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      json.encode(1, { pretty = 1 })
    end, 'json.encode: option "pretty" must be boolean, got number')
    assert.has_error(function()
      json.encode(1, { indent = 40 })
    end, 'json.encode: option "indent" must be within 0..16')
    assert.has_error(function()
      json.array(1)
    end, 'json.array: table expected, got number')
    assert.has_error(function()
      json.array(setmetatable({}, {}))
    end, 'json.array: table already has a metatable')
  end)
end)

describe('tp.json files', function()
  it('load_file names the file in errors; missing files and directories fail', function()
    fails('nope.json: No such file or directory', 'ENOENT',
      json.load_file(h.tmpdir() .. '/nope.json'))
    local dir = h.tmpdir()
    fails(dir .. ': Is a directory', 'EISDIR', json.load_file(dir))
    fails('run_record.json: file is 1110 bytes, above max_size (100 bytes)', 'ELIMIT',
      json.load_file(fixture('run_record.json'), { max_size = 100 }))
  end)

  it('load_file reads a non-regular file (a pipe) up to max_size', function()
    local dir = h.tmpdir()
    local fifo = dir .. '/fifo'
    assert(os.execute('mkfifo ' .. h.shquote(fifo)))
    assert(os.execute('(printf \'{"a": [1, 2]}\' > ' .. h.shquote(fifo) .. ') &'))
    local v = assert(json.load_file(fifo))
    assert.are.same({ 1, 2 }, v.a)
    assert(os.execute('(head -c 5000 /dev/zero > ' .. h.shquote(fifo) .. ') &'))
    fails(fifo .. ': more than max_size (100 bytes)', 'ELIMIT',
      json.load_file(fifo, { max_size = 100 }))
  end)

  it('save_file writes the golden form of a run record', function()
    local v = assert(json.load_file(fixture('run_record.json')))
    local dir = h.tmpdir()
    local out = dir .. '/run.json'
    assert.is_true(json.save_file(out, v))
    local want = h.read(fixture('run_record.expected.json'))
    assert.are.equal(want, h.read(out))
    assert.are.same(v, json.decode(want))
    assert.are.same({ 'run.json' }, listdir(dir))
  end)

  it('save_file output reads the same in Python\'s json module', function()
    local ok = os.execute('command -v python3 >/dev/null 2>&1')
    if not ok then
      pending('python3 is not installed')
      return
    end
    local dir = h.tmpdir()
    local v = assert(json.load_file(fixture('run_record.json')))
    assert(json.save_file(dir .. '/a.json', v))
    local script = 'import json,sys\n'
      .. 'a = json.load(open(sys.argv[1]))\n'
      .. 'b = json.load(open(sys.argv[2]))\n'
      .. 'assert a == b\n'
      .. 'assert isinstance(b["step_times"][0], float)\n'
      .. 'assert b["training_config"]["total_tokens"] == 9007199254740993\n'
      .. 'out = json.dumps(b, indent=2, sort_keys=True, ensure_ascii=False) + "\\n"\n'
      .. 'sys.exit(0 if out == open(sys.argv[2]).read() else 3)\n'
    h.write(dir .. '/check.py', script)
    local r = os.execute(('python3 %s %s %s'):format(h.shquote(dir .. '/check.py'),
      h.shquote(fixture('run_record.json')), h.shquote(dir .. '/a.json')))
    assert.is_true(r)
  end)

  it('save_file replaces a file atomically and leaves nothing behind on failure', function()
    local dir = h.tmpdir()
    local out = dir .. '/r.json'
    assert.is_true(json.save_file(out, { v = 1 }))
    assert.are.equal('{\n  "v": 1\n}\n', h.read(out))
    assert.is_true(json.save_file(out, { v = 2 }, { pretty = false }))
    assert.are.equal('{"v":2}\n', h.read(out))
    -- encoding fails: the old file stays and no temporary file is left
    fails(out .. ': $.v: nan is not valid JSON', 'EINVAL', json.save_file(out, { v = 0 / 0 }))
    assert.are.equal('{"v":2}\n', h.read(out))
    assert.are.same({ 'r.json' }, listdir(dir))
    -- writing fails: a missing directory, and a directory in the way of the rename
    fails(dir .. '/no/such.json', 'ENOENT', json.save_file(dir .. '/no/such.json', {}))
    assert(os.execute('mkdir ' .. h.shquote(dir .. '/d')))
    local v, err, code = json.save_file(dir .. '/d', { v = 3 })
    assert.is_nil(v)
    assert.is_truthy(err:find(dir .. '/d: rename', 1, true), err)
    assert.are.equal('EISDIR', code)
    assert.are.same({ 'd', 'r.json' }, listdir(dir))
    assert.are.same({}, listdir(dir .. '/d'))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      json.load_file(1)
    end, 'json.load_file: path must be a string, got number')
    assert.has_error(function()
      json.save_file('x.json', {}, { nope = true })
    end, 'json.save_file: unknown option "nope"')
  end)
end)

describe('tp.json.read_files', function()
  local SKIP = { 'records', 'args', 'step_times', 'loss_values', 'params' }

  -- Writes `texts` ({name = text}) into a new directory; returns its path.
  local function files(texts)
    local dir = h.tmpdir()
    for name, text in pairs(texts) do
      h.write(dir .. '/' .. name, text)
    end
    return dir
  end

  it('reads files in order on worker threads; file:decode equals json.decode', function()
    local record = h.read(h.fixture('results/mock/nvd/megatron-real.json'))
    local texts = { ['bad.json'] = '{"a": [1, 2}', ['list.json'] = '[1, 2]',
      ['bom.json'] = '\239\187\191{"a": 1}', ['empty.json'] = '' }
    for i = 1, 25 do
      texts[('r%02d.json'):format(i)] = record
    end
    local dir = files(texts)
    local paths = {}
    for i = 1, 25 do
      paths[#paths + 1] = ('%s/r%02d.json'):format(dir, i)
      if i % 6 == 0 then
        paths[#paths + 1] = dir .. '/bad.json'
        paths[#paths + 1] = dir .. '/missing.json'
        paths[#paths + 1] = dir
        paths[#paths + 1] = dir .. '/list.json'
        paths[#paths + 1] = dir .. '/bom.json'
        paths[#paths + 1] = dir .. '/empty.json'
      end
    end
    for _, o in ipairs({ {}, { threads = 1, ahead = 1 }, { threads = 3, ahead = 5 } }) do
      local k = 0
      for file in json.read_files(paths, o) do
        k = k + 1
        local path = paths[k]
        assert.are.equal(path, file:path())
        local text = h.read(path)
        if path:find('missing', 1, true) then
          fails('missing.json: No such file or directory', 'ENOENT', nil, file:error())
          fails('missing.json: No such file or directory', 'ENOENT', file:decode())
          assert.is_nil(file:text())
          assert.is_nil(file:stat())
        elseif path == dir then
          fails(dir .. ': Is a directory', 'EISDIR', nil, file:error())
        else
          assert.is_nil(file:error())
          assert.are.equal(#text, file:stat().size)
          assert.are.equal(h.read(path), file:text())
          assert.are.equal(file:text(), file:text())
          for _, skip in ipairs({ SKIP, {} }) do
            local a, aerr, acode = file:decode({ skip = skip, null = json.null })
            local b, berr, bcode = json.decode(text, { name = path, skip = skip, null = json.null })
            assert.are.same({ berr, bcode }, { aerr, acode })
            assert.are.same(b, a)
          end
          local plain = file:decode()
          assert.are.same(json.decode(text, { name = path }), plain)
        end
      end
      assert.are.equal(#paths, k)
    end
  end)

  it('gives the mtime fs.stat gives, and refuses files above max_size', function()
    local dir = files({ ['a.json'] = '{"a": 1}' })
    for file in json.read_files({ dir .. '/a.json' }) do
      assert.are.equal(require('tp.fs').stat(dir .. '/a.json').mtime, file:stat().mtime)
    end
    for file in json.read_files({ dir .. '/a.json' }, { max_size = 4 }) do
      fails('a.json: file is 8 bytes, above max_size (4 bytes)', 'ELIMIT', nil, file:error())
    end
  end)

  it('stops its workers when the loop is left early, and closed files raise', function()
    local dir = files({ ['a.json'] = '{"a": 1}' })
    local paths = {}
    for i = 1, 200 do
      paths[i] = dir .. '/a.json'
    end
    local kept
    for file in json.read_files(paths, { threads = 2 }) do
      kept = kept or file
      if kept then
        break  -- the reader is closed with files read ahead and never handed out
      end
    end
    assert.are.equal(1, kept:decode().a)
    kept:close()
    assert.has_error(function()
      kept:decode()
    end, 'attempt to use a closed file')
    local next_file, _, _, reader = json.read_files(paths)
    assert.is_truthy(next_file())
    reader:close()
    assert.has_error(function()
      next_file()
    end, 'attempt to use a closed file reader')
    assert.is_truthy(tostring(reader):find('closed', 1, true))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      json.read_files('a.json')
    end, 'json.read_files: paths must be a list of strings, got string')
    assert.has_error(function()
      json.read_files({ 1 })
    end, 'json.read_files: paths[1] must be a string, got number')
    assert.has_error(function()
      json.read_files({}, { threads = 0 })
    end, 'json.read_files: option "threads" must be within 1..256')
    assert.has_error(function()
      json.read_files({}, { fast = true })
    end, 'json.read_files: unknown option "fast"')
    local dir = files({ ['a.json'] = '{"a": 1}' })
    for file in json.read_files({ dir .. '/a.json' }) do
      assert.has_error(function()
        file:decode({ skp = { 'a' } })
      end, 'file:decode: unknown option "skp"')
      assert.has_error(function()
        file:decode({ max_depth = 0 })
      end, 'file:decode: option "max_depth" must be within 1..1000')
    end
  end)
end)

describe('tp.json with large input #slow', function()
  it('loads a 100 MB file holding an array of numbers', function()
    local dir = h.tmpdir()
    local path = dir .. '/big.json'
    local n = 8 * 1024 * 1024
    -- 13 bytes per element: 100 MiB of "1234567.2500," plus the integer tail
    local text = '[' .. ('1234567.2500,'):rep(n) .. '9007199254740993]'
    assert.is_true(#text > 100 * 1024 * 1024)
    h.write(path, text)
    text = nil -- luacheck: ignore 311
    collectgarbage()
    local v = assert(json.load_file(path))
    assert.are.equal(n + 1, #v)
    assert.are.equal(1234567.25, v[1])
    assert.are.equal(1234567.25, v[n])
    assert.are.equal(9007199254740993, v[n + 1])
    assert.are.equal('integer', math.type(v[n + 1]))
  end)
end)
