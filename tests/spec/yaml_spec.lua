-- Specs of tp.yaml (stdlib/tp/yaml.lua over lua/l_yaml.c): core schema, anchors, limits,
-- bad input, dumping, ${VAR} expansion.
local h = require('helper')
local yaml = require('tp.yaml')
local json = require('tp.json')

local function fixture(name)
  return h.fixture('yaml/' .. name)
end

-- Asserts a failure triple: nil, a message containing `want` (plain find), and `code`.
local function fails(want, code, v, err, c)
  assert.is_nil(v)
  assert.is_string(err)
  assert.is_truthy(err:find(want, 1, true), ('%q not found in %q'):format(want, err))
  assert.is_nil(err:find('\n', 1, true), 'message must be one line: ' .. err)
  assert.are.equal(code, c)
end

local function typed(list)
  local r = {}
  for i, v in ipairs(list) do
    r[i] = (math.type(v) or type(v)) .. ':' .. tostring(v)
  end
  return r
end

describe('tp.yaml.load', function()
  it('loads a flow sequence of mixed scalars', function()
    assert.are.equal(2.5, yaml.load('a: [1, 2.5, x]').a[2])
    assert.are.same({ 'integer:1', 'float:2.5', 'string:x' }, typed(yaml.load('a: [1, 2.5, x]').a))
  end)

  it('types plain scalars by the YAML 1.2 core schema (§10.3.2)', function()
    local v = assert(yaml.load_file(fixture('core_schema.yaml')))
    for i = 1, 4 do
      assert.are.equal(yaml.null, v.nulls[i])
    end
    assert.are.same({ true, true, true, false, false, false }, v.bools)
    assert.are.same({
      'integer:0',
      'integer:7',
      'integer:-7',
      'integer:7',
      'integer:12',
      'integer:15',
      'integer:31',
      'integer:255',
      'integer:9223372036854775807',
      'integer:-9223372036854775808',
    }, typed(v.ints))
    assert.are.same({
      'float:1.5',
      'float:-1.5',
      'float:0.5',
      'float:1.0',
      'float:1000.0',
      'float:6.02e+23',
      'float:-0.02',
      'float:inf',
      'float:-inf',
      'float:inf',
    }, { table.unpack(typed(v.floats), 1, 10) })
    assert.is_true(v.floats[11] ~= v.floats[11], '.NaN is a NaN')
    assert.are.equal('float', math.type(v.floats[11]))
    assert.are.equal('float:0.0', typed(v.floats)[12])
    assert.are.same({ 'yes', 'no', 'on', 'off', 'y', 'n', '1_000', '0b101', '1', 'true', 'null',
      '0o8', '0x', '1.2.3', '.e5', '~x' }, v.strings)
    assert.are.equal('float', math.type(v.big))
    assert.are.equal(1.2345678901234568e+29, v.big)
  end)

  it('keeps quoted and block scalars strings and honours core tags', function()
    local v = assert(yaml.load([[
q1: '12'
q2: "true"
lit: |
  12
s: !!str 12
i: !!int "0x10"
f: !!float 1
b: !!bool "false"
n: !!null ""
e: ! 12
]]))
    assert.are.same({ q1 = '12', q2 = 'true', lit = '12\n', s = '12', i = 16, f = 1.0,
      b = false, e = '12' }, v)
    assert.are.equal('float', math.type(v.f))
    fails('<string>:1:4: unsupported tag \'!thing\'', 'EPARSE', yaml.load('a: !thing 1'))
    fails('<string>:1:4: unsupported tag \'tag:yaml.org,2002:set\'', 'EPARSE',
      yaml.load('a: !!set {x: ~}'))
    fails('<string>:1:4: \'x1\' is not a valid !!int', 'EPARSE', yaml.load('a: !!int x1'))
    fails('<string>:1:4: \'yes\' is not a valid !!bool', 'EPARSE', yaml.load('a: !!bool yes'))
    fails('<string>:1:4: integer \'0x8000000000000000\' does not fit in 64 bits', 'EPARSE',
      yaml.load('a: 0x8000000000000000'))
    assert.are.equal(math.maxinteger, yaml.load('0x7fffffffffffffff'))
  end)

  it('leaves null mapping values out unless opts.null, and keeps sequence length', function()
    local v = assert(yaml.load('a: ~\nb:\nc: 1\nl: [1, null, 3]\nm:\n  - \n  - 2\n'))
    assert.is_nil(v.a)
    assert.is_nil(v.b)
    assert.are.equal(1, v.c)
    assert.are.equal(3, #v.l)
    assert.is_true(json.is_null(v.l[2]))
    assert.are.equal(2, #v.m)
    assert.are.equal(yaml.null, v.m[1])
    local w = assert(yaml.load('a: ~\nl: [~]', { null = json.null }))
    assert.are.equal(json.null, w.a)
    assert.are.equal(json.null, w.l[1])
    assert.are.equal(yaml.null, yaml.load('~'))
    assert.are.equal(yaml.null, yaml.load('--- \n...'))
  end)

  it('keeps integer keys integers and turns other scalar keys into their text', function()
    local v = assert(yaml.load('1: a\n"1": b\ntrue: c\n1.5: d\n~: e\n0x10: f\n'))
    assert.are.same({ [1] = 'a', ['1'] = 'b', ['true'] = 'c', ['1.5'] = 'd', ['~'] = 'e',
      [16] = 'f' }, v)
    fails('<string>:1:2: a sequence or mapping as a mapping key is not supported', 'EPARSE',
      yaml.load('{[1, 2]: x}'))
    fails('<string>:2:1: alias *s used as a key is not a string or an integer', 'EPARSE',
      yaml.load('a: &s [1]\n*s : x\n'))
    assert.are.same({ a = 'k', k = 1 }, yaml.load('a: &s k\n*s : 1\n'))
  end)

  it('gives an alias the same Lua table as its anchor', function()
    local v = assert(yaml.load('base: &b {x: 1}\nuse: *b\nlist: [*b, *b]\nname: &n hi\nagain: *n'))
    assert.is_true(rawequal(v.base, v.use))
    assert.is_true(rawequal(v.base, v.list[1]))
    assert.is_true(rawequal(v.list[1], v.list[2]))
    assert.are.equal('hi', v.again)
    assert.are.equal(yaml.null, yaml.load('a: &z\nb: [*z]').b[1])
  end)

  it('merges << mappings, explicit keys and earlier mappings winning', function()
    local v = assert(yaml.load([[
a: &a {x: 1, y: 1, z: 1}
b: &b {y: 2, w: 2}
c:
  <<: [*b, *a]
  z: 3
  x: ~
d:
  <<: *a
]]))
    assert.are.same({ y = 2, w = 2, z = 3 }, v.c)
    assert.are.same({ x = 1, y = 1, z = 1 }, v.d)
    assert.is_false(rawequal(v.a, v.d))
    fails('<string>:1:2: merge key \'<<\' needs a mapping or a sequence of mappings', 'EPARSE',
      yaml.load('{<<: 1}'))
    fails('<string>:2:5: merge key \'<<\' needs a mapping', 'EPARSE',
      yaml.load('a: &a [1]\nb: {<<: [*a]}'))
    assert.are.same({ ['<<'] = 1 }, yaml.load('"<<": 1'))
  end)

  it('loads the example experiment with its anchors and merge key', function()
    local v = assert(yaml.load_file(fixture('experiment.yaml')))
    assert.are.equal(1000, v.training.iters)
    assert.are.equal(3.0e-4, v.training.lr)
    assert.are.equal('bf16', v.training.precision)
    assert.are.equal(500, v.defaults.iters)
    assert.are.same({ tp = 1, pp = 1, dp = 8 }, v.parallelism)
    assert.are.equal('rocm/primus:v25.9', v.platforms.amd.container)
    assert.are.equal('Same seed and batch on both platforms.\nSteady state from iteration 10.\n',
      v.notes)
    assert.are.equal('yes', v.enabled)
    assert.are.equal('${DATA_DIR}/bc_text_document', v.data_path, 'load never expands')
  end)

  describe('reports bad input as <source>:<line>:<column>', function()
    it('for duplicate keys, at the second one', function()
      fails('duplicate_keys.yaml:5:3: duplicate key \'iters\'', 'EPARSE',
        yaml.load_file(fixture('duplicate_keys.yaml')))
      fails('<string>:1:8: duplicate key \'1\'', 'EPARSE', yaml.load('{1: a, 0x1: b}'))
      fails('<string>:2:1: duplicate key \'a\'', 'EPARSE', yaml.load('a: ~\na: 1'))
    end)

    it('for truncated input and syntax errors', function()
      fails('truncated.yaml:4:1: did not find expected \',\' or \']\' (while parsing a flow '
        .. 'sequence at line 3, column 7)', 'EPARSE', yaml.load_file(fixture('truncated.yaml')))
      fails('<string>:1:8: found unexpected end of stream (while scanning a quoted scalar at '
        .. 'line 1, column 4)', 'EPARSE', yaml.load('a: "abc'))
      fails('tab_indent.yaml:2:1: found character that cannot start any token', 'EPARSE',
        yaml.load_file(fixture('tab_indent.yaml')))
      fails('<string>:2:3: mapping values are not allowed in this context', 'EPARSE',
        yaml.load('a: b\n c: d'))
    end)

    it('for NUL bytes, invalid UTF-8, UTF-16 and binary garbage', function()
      fails('nul_byte.yaml:2:9: NUL byte', 'EPARSE', yaml.load_file(fixture('nul_byte.yaml')))
      fails('invalid_utf8.yaml:2:10: incomplete UTF-8 octet sequence', 'EPARSE',
        yaml.load_file(fixture('invalid_utf8.yaml')))
      fails('<string>:1:4: invalid leading UTF-8 octet (0xFF)', 'EPARSE', yaml.load('a: \xFF'))
      fails('<string>:1:1: UTF-16 input is not supported', 'EPARSE', yaml.load('\xFF\xFEa\0'))
      fails('garbage.bin:', 'EPARSE', yaml.load_file(fixture('garbage.bin')))
      fails('<string>:1:4: control characters are not allowed (0x07)', 'EPARSE',
        yaml.load('a: \7'))
    end)

    it('for empty input and a stream without documents', function()
      fails('<string>:1:1: empty input', 'EPARSE', yaml.load(''))
      fails('<string>:1:1: no document in the input', 'EPARSE', yaml.load('# only a comment\n'))
      assert.are.same({}, yaml.load_all(''))
    end)

    it('for undefined and recursive aliases', function()
      fails('<string>:1:4: undefined alias *x', 'EPARSE', yaml.load('a: *x'))
      fails('<string>:1:11: alias *x refers to a node that contains it', 'EPARSE',
        yaml.load('a: &x [1, *x]'))
    end)

    it('for nesting 100k levels deep, without overflowing any stack', function()
      fails('<string>:1:513: nesting deeper than 512 levels (max_depth)', 'ELIMIT',
        yaml.load(('['):rep(100000) .. (']'):rep(100000)))
      fails('<string>:1:2049: nesting deeper than 512 levels', 'ELIMIT',
        yaml.load(('{a: '):rep(100000) .. '1' .. ('}'):rep(100000)))
      fails('<string>:1:1025: nesting deeper than 512 levels', 'ELIMIT',
        yaml.load(('- '):rep(100000) .. 'x'))
      fails('<string>:1:3: nesting deeper than 2 levels', 'ELIMIT',
        yaml.load('[[[1]]]', { max_depth = 2 }))
      assert.is_table(yaml.load(('['):rep(600) .. (']'):rep(600), { max_depth = 600 }))
    end)

    it('for an alias bomb, before it expands', function()
      fails('billion_laughs.yaml:8:8: aliases expand to more than 1000000 nodes '
        .. '(max_alias_nodes)', 'ELIMIT', yaml.load_file(fixture('billion_laughs.yaml')))
      -- each alias counts the nodes of its anchor: [x, y, z] is 4 nodes, aliased twice = 8
      local text = 'a: &a [x, y, z]\nb: [*a, *a]'
      fails('<string>:2:9: aliases expand to more than 7 nodes', 'ELIMIT',
        yaml.load(text, { max_alias_nodes = 7 }))
      assert.is_table(yaml.load(text, { max_alias_nodes = 8 }))
    end)

    it('naming opts.name, and refusing input above max_size', function()
      fails('exp.yaml:1:4: undefined alias *x', 'EPARSE', yaml.load('a: *x', { name = 'exp.yaml' }))
      fails('<string>: input is 10 bytes, above max_size (9 bytes)', 'ELIMIT',
        yaml.load('a: [1, 2]\n', { max_size = 9 }))
    end)
  end)

  it('refuses 100 MB by default and loads it with a larger max_size #slow', function()
    local text = ('- 1234567.25\n'):rep(8 * 1024 * 1024)
    assert.is_true(#text > 100 * 1024 * 1024)
    fails('<string>: input is 109051904 bytes, above max_size (67108864 bytes)', 'ELIMIT',
      yaml.load(text))
    local v = assert(yaml.load(text, { max_size = 128 * 1024 * 1024 }))
    assert.are.equal(8 * 1024 * 1024, #v)
    assert.are.equal(1234567.25, v[#v])
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      yaml.load(nil)
    end, 'yaml.load: string expected, got nil')
    assert.has_error(function()
      yaml.load('a', { depth = 1 })
    end, 'yaml.load: unknown option "depth"')
    assert.has_error(function()
      yaml.load('a', { max_depth = 0 })
    end, 'yaml.load: option "max_depth" must be >= 1')
    assert.has_error(function()
      yaml.load_file(nil)
    end, 'yaml.load_file: path must be a string, got nil')
  end)
end)

describe('tp.yaml.load_all', function()
  it('loads every document, each with its own anchors', function()
    local docs = assert(yaml.load_all(h.read(fixture('multi.yaml'))))
    assert.are.equal(3, #docs)
    assert.are.same({ run = 1, loss = 2.5 }, docs[1])
    assert.are.same({ run = 2 }, docs[2])
    assert.are.equal(yaml.null, docs[3])
    fails('<string>:2:5: undefined alias *x', 'EPARSE', yaml.load_all('--- &x 1\n--- *x\n'))
  end)

  it('load returns the first document but checks the whole stream', function()
    assert.are.same({ run = 1, loss = 2.5 }, yaml.load_file(fixture('multi.yaml')))
    fails('<string>:4:1: duplicate key \'a\'', 'EPARSE', yaml.load('a: 1\n---\na: 1\na: 2\n'))
  end)
end)

describe('tp.yaml.load_file', function()
  it('fails on missing files, directories and files above max_size', function()
    local dir = h.tmpdir()
    fails(dir .. '/nope.yaml: No such file or directory', 'ENOENT',
      yaml.load_file(dir .. '/nope.yaml'))
    fails(dir .. ': Is a directory', 'EISDIR', yaml.load_file(dir))
    fails('experiment.yaml: file is 802 bytes, above max_size (10 bytes)', 'ELIMIT',
      yaml.load_file(fixture('experiment.yaml'), { max_size = 10 }))
  end)
end)

describe('tp.yaml.dump', function()
  it('writes block style with sorted keys, integers first', function()
    local text = assert(yaml.dump({ b = { 1, 2 }, a = { z = true, x = 'hi' }, [2] = 'two',
      [1] = 'one' }))
    assert.are.equal('1: one\n2: two\na:\n  x: hi\n  z: true\nb:\n- 1\n- 2\n', text)
    -- y and n are booleans in YAML 1.1 (yaml.org/type/bool.html), so they are quoted
    assert.are.equal('\'n\': 1\n\'y\': 2\n', yaml.dump({ y = 2, n = 1 }))
    assert.are.equal('a:\n    b: 1\n', yaml.dump({ a = { b = 1 } }, { indent = 4 }))
  end)

  it('quotes strings that would read back as another type', function()
    local strs = { 'yes', 'no', 'on', 'Off', 'y', '1', '-7', '1.0', '1e3', '.inf', '.nan', 'null',
      '~', '', 'true', 'FALSE', '0x1F', '0o17', '1_000', '0b101', '1:20', '<<', '012', '=',
      '2024-06-01', '2024-06-01 12:00:00' }
    for _, s in ipairs(strs) do
      local text = assert(yaml.dump({ s }))
      assert.are.equal('- \'' .. s .. '\'\n', text)
      assert.are.equal(s, yaml.load(text)[1])
    end
    assert.are.equal('- plain text\n- v1.2.3-rc\n', yaml.dump({ 'plain text', 'v1.2.3-rc' }))
  end)

  it('writes numbers so that they keep their type', function()
    local text = assert(yaml.dump({ 1, -0.0, 2.0, 0.1, 1e20, 1 / 0, -1 / 0, 0 / 0,
      math.mininteger }))
    assert.are.equal('- 1\n- -0.0\n- 2.0\n- 0.1\n- 1.0e+20\n- .inf\n- -.inf\n- .nan\n'
      .. '- -9223372036854775808\n', text)
    local back = yaml.load(text)
    assert.are.same({ 'integer', 'float', 'float', 'float', 'float', 'float', 'float', 'float',
      'integer' }, { math.type(back[1]), math.type(back[2]), math.type(back[3]),
      math.type(back[4]), math.type(back[5]), math.type(back[6]), math.type(back[7]),
      math.type(back[8]), math.type(back[9]) })
  end)

  it('writes multi-line strings as literal blocks and odd strings quoted', function()
    assert.are.equal('notes: |\n  line one\n  line two\n',
      yaml.dump({ notes = 'line one\nline two\n' }))
    for _, s in ipairs({ 'a: b', '- x', '#c', ' leading', 'trail ', '\ttab', 'bell\7', 'nul\0x',
      'é ✓', 'two\n\n', '\n leading', '*x', '&x', '!x', '%x', '@x', '`x', '{x', '[x', '"q"' }) do
      local text = assert(yaml.dump({ k = s }))
      assert.are.equal(s, yaml.load(text).k, ('%q via %q'):format(s, text))
    end
  end)

  it('writes empty tables as {} unless marked as arrays, and null as null', function()
    assert.are.equal('a: {}\nb: []\nc: null\n',
      yaml.dump({ a = {}, b = json.array(), c = json.null }))
    assert.are.equal('[]\n', yaml.dump(yaml.load('[]')))
  end)

  it('round-trips the example experiment', function()
    local v = assert(yaml.load_file(fixture('experiment.yaml')))
    local text = assert(yaml.dump(v))
    assert.are.same(v, yaml.load(text))
    assert.are.same(v, yaml.load(assert(yaml.dump(v, { sort_keys = false }))))
  end)

  it('refuses cycles, functions, odd keys and invalid UTF-8, naming the key path', function()
    local t = { list = { {} } }
    t.list[1].back = t
    fails('$.list[1].back: table contains itself (cycle)', 'EINVAL', yaml.dump(t))
    fails('$.f: cannot dump a function', 'EINVAL', yaml.dump({ f = print }))
    fails('$.a: table key of type float', 'EINVAL', yaml.dump({ a = { [0.5] = 1 } }))
    fails('$: table key of type table', 'EINVAL', yaml.dump({ [{}] = 1 }))
    fails('$.s: string is not valid UTF-8 (byte 0xFF at offset 0)', 'EINVAL',
      yaml.dump({ s = '\xFF' }))
    fails('$: table marked as an array has keys other than 1..n', 'EINVAL',
      yaml.dump(json.array({ x = 1 })))
    fails('$: cannot dump a userdata', 'EINVAL', yaml.dump(io.stdout))
  end)

  it('writes sparse integer keys as a mapping', function()
    local text = assert(yaml.dump({ [1] = 'a', [3] = 'c' }))
    assert.are.equal('1: a\n3: c\n', text)
    assert.are.same({ [1] = 'a', [3] = 'c' }, yaml.load(text))
  end)

  it('writes YAML that PyYAML (YAML 1.1) reads back with the same types', function()
    if not os.execute('python3 -c "import yaml" >/dev/null 2>&1') then
      pending('python3 with the yaml module is not installed')
      return
    end
    local v = { strs = { 'yes', 'on', 'no', '1_000', '1:20', '012', '1', '', 'null', 'x y', '=',
      '2024-06-01', '2024-06-01 12:00:00', '1e3', '0b11', '0o17' },
      floats = { 1.0, 1e20, 0.1, -2.5e-8 }, ints = { 0, 12, -3 }, flag = true, none = json.null }
    local dir = h.tmpdir()
    h.write(dir .. '/v.yaml', assert(yaml.dump(v)))
    h.write(dir .. '/v.json', assert(json.encode(v)))
    h.write(dir .. '/check.py', 'import json, sys, yaml\n'
      .. 'a = yaml.safe_load(open(sys.argv[1]))\n'
      .. 'b = json.load(open(sys.argv[2]))\n'
      .. 'sys.exit(0 if a == b and all(type(x) is float for x in a["floats"]) else 3)\n')
    assert.is_true(os.execute(('python3 %s %s %s'):format(h.shquote(dir .. '/check.py'),
      h.shquote(dir .. '/v.yaml'), h.shquote(dir .. '/v.json'))))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      yaml.dump({}, { indent = 1 })
    end, 'yaml.dump: option "indent" must be within 2..9')
    assert.has_error(function()
      yaml.dump({}, { style = 'flow' })
    end, 'yaml.dump: unknown option "style"')
  end)
end)

describe('tp.yaml.expand_env', function()
  local env = { DATA_DIR = '/data', EMPTY = '', N = 3 }

  it('expands ${VAR} and ${VAR:-default} in every string value of a copy', function()
    local v = assert(yaml.load_file(fixture('experiment.yaml')))
    local e = assert(yaml.expand_env(v, env))
    assert.are.equal('/data/bc_text_document', e.data_path)
    assert.are.equal('output/llama', e.output)
    assert.are.equal('${DATA_DIR}/bc_text_document', v.data_path, 'the input is not changed')
    assert.are.same(v.training, e.training)
    assert.is_false(rawequal(v.training, e.training))
  end)

  it('handles defaults, empty values, escapes and stray dollars', function()
    assert.are.equal('/data/x', yaml.expand_env('${DATA_DIR}/x', env))
    assert.are.equal('d', yaml.expand_env('${UNSET:-d}', env))
    assert.are.equal('d', yaml.expand_env('${EMPTY:-d}', env))
    assert.are.equal('', yaml.expand_env('${EMPTY}', env))
    assert.are.equal('a:b}', yaml.expand_env('${UNSET:-a:b}}', env))
    assert.are.equal('3', yaml.expand_env('${N}', env))
    assert.are.equal('${DATA_DIR} $5 $X $', yaml.expand_env('$${DATA_DIR} $5 $X $', env))
    assert.are.equal('v-x', yaml.expand_env('${A}-x', function(name)
      return name == 'A' and 'v' or nil
    end))
  end)

  it('fails on an unset variable without default, naming it and where it is', function()
    fails('expand_env: $.data_path: environment variable DATA_DIR is not set', 'ENOENT',
      yaml.expand_env(yaml.load_file(fixture('experiment.yaml')), {}))
    fails('expand_env: $.a[2]["odd key"]: environment variable X is not set', 'ENOENT',
      yaml.expand_env({ a = { 'ok', { ['odd key'] = 'p${X}' } } }, {}))
    fails('expand_env: $: unterminated "${"', 'EINVAL', yaml.expand_env('${X', {}))
    fails('expand_env: $: invalid reference "${1X}"', 'EINVAL', yaml.expand_env('${1X}', {}))
    fails('expand_env: $: invalid reference "${}"', 'EINVAL', yaml.expand_env('${}', {}))
  end)

  it('keeps keys, non-string values, sharing and the array marker', function()
    local shared = json.array({ '${DATA_DIR}' })
    local v = { ['${K}'] = 1, a = shared, b = shared, n = json.null, f = 1.5 }
    local e = assert(yaml.expand_env(v, env))
    assert.are.equal(1, e['${K}'])
    assert.is_true(rawequal(e.a, e.b))
    assert.are.equal('/data', e.a[1])
    assert.is_true(json.is_array(e.a))
    assert.are.equal(json.null, e.n)
    assert.are.equal(1.5, e.f)
  end)

  it('reads the process environment by default', function()
    local r = h.run({ '-e', 'print(require("tp.yaml").expand_env("${TPLUA_SPEC_V}/${NOPE:-d}"))' },
      { env = { TPLUA_SPEC_V = 'from-env', NOPE = false } })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('from-env/d\n', r.stdout)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      yaml.expand_env('x', 5)
    end, 'yaml.expand_env: env must be a table or a function, got number')
    assert.has_error(function()
      yaml.expand_env('${A}', { A = true })
    end, 'yaml.expand_env: value of A must be a string, got boolean')
  end)
end)
