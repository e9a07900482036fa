-- tp.fs: stat, mkdir -p, list, glob, realpath, atomic write, journal lines, path helpers.
local h = require('helper')
local fs = require('tp.fs')

describe('tp.fs', function()
  local dir
  before_each(function()
    dir = h.tmpdir()
  end)

  it('writes atomically and leaves no temporary file', function()
    local p = dir .. '/r.json'
    assert.is_true(fs.write_atomic(p, 'one'))
    assert.is_true(fs.write_atomic(p, 'two', 384))
    assert.are.equal('two', fs.read(p))
    assert.are.equal(384, fs.stat(p).mode)
    local names = {}
    for _, e in ipairs(fs.list(dir)) do
      names[#names + 1] = e.name
    end
    assert.are.same({ 'r.json' }, names)
  end)

  it('returns nil, message, code for expected failures', function()
    local ok, err, code = fs.write_atomic(dir .. '/no/such/f', 'x')
    assert.is_nil(ok)
    assert.truthy(err:find('no/such/f', 1, true))
    assert.are.equal('ENOENT', code)
    local st, serr, scode = fs.stat(dir .. '/missing')
    assert.is_nil(st)
    assert.truthy(serr:find('missing: No such file or directory', 1, true))
    assert.are.equal('ENOENT', scode)
    local l, lerr, lcode = fs.list(dir .. '/missing')
    assert.is_nil(l)
    assert.truthy(lerr:find('missing', 1, true))
    assert.are.equal('ENOENT', lcode)
  end)

  it('raises on misuse, blaming the caller', function()
    assert.has_error(function()
      fs.stat(42)
    end, 'path: string expected, got number')
  end)

  it('makes parents, lists sorted, globs sorted', function()
    assert.is_true(fs.mkdir_p(dir .. '/a/b/c'))
    assert.is_true(fs.is_dir(dir .. '/a/b/c'))
    h.write(dir .. '/a/z.json', '{}')
    h.write(dir .. '/a/m.json', '{}')
    local list = fs.list(dir .. '/a')
    assert.are.same({ { name = 'b', type = 'directory' }, { name = 'm.json', type = 'file' },
      { name = 'z.json', type = 'file' } }, list)
    assert.are.same({ dir .. '/a/m.json', dir .. '/a/z.json' }, fs.glob(dir .. '/a/*.json'))
    assert.are.same({}, fs.glob(dir .. '/a/*.nothing'))
    local _, err, code = fs.mkdir_p(dir .. '/a/z.json/sub')
    assert.are.equal('ENOTDIR', code)
    assert.truthy(err:find('z.json', 1, true))
  end)

  it('appends journal lines and refuses embedded newlines', function()
    local j = dir .. '/journal.jsonl'
    assert.is_true(fs.append_line(j, '{"event":"planned"}'))
    assert.is_true(fs.append_line(j, '{"event":"started"}'))
    assert.are.equal('{"event":"planned"}\n{"event":"started"}\n', fs.read(j))
    local ok, err, code = fs.append_line(j, 'a\nb')
    assert.is_nil(ok)
    assert.are.equal('EINVAL', code)
    assert.truthy(err:find('newline', 1, true))
  end)

  it('resolves real paths and joins and splits names', function()
    fs.mkdir_p(dir .. '/x')
    assert.are.equal(fs.realpath(dir) .. '/x', fs.realpath(dir .. '/x/../x'))
    assert.are.equal('a/b/c.json', fs.join('a/', '/b', 'c.json'))
    assert.are.equal('c.json', fs.basename('/a/b/c.json'))
    assert.are.equal('/a/b', fs.dirname('/a/b/c.json'))
    assert.are.equal('.', fs.dirname('c.json'))
    assert.are.equal('/', fs.dirname('/c'))
  end)
end)
