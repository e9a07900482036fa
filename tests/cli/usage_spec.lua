-- Usage errors of the commands: the message, the command's synopsis and where its help is, each
-- on a line of its own and ending with one, never the whole help (it buries the one line that
-- matters) and never a stray number.
local h = require('helper')

local COMMANDS = { 'trace', 'history', 'mlperf', 'report', 'plan', 'compare', 'extract', 'data',
  'preflight', 'run' }

describe('usage errors', function()
  it('print the message, the synopsis and where the help is, nothing more', function()
    for _, cmd in ipairs(COMMANDS) do
      local r = h.run({ cmd, '--bogus-option-x' })
      assert.are.equal(2, r.code, cmd)
      assert.are.equal('', r.stdout, cmd)
      local err = r.stderr
      assert.are.equal('\n', err:sub(-1), cmd .. ': the output ends with a newline')
      assert.is_falsy(err:find('\n1$', 1), cmd)
      local lines = {}
      for line in err:gmatch('[^\n]+') do
        lines[#lines + 1] = line
      end
      assert.is_truthy(lines[1]:find('^tplua ' .. cmd .. ': '), cmd .. ': ' .. lines[1])
      assert.is_truthy(lines[2]:find('^usage: tplua ' .. cmd), cmd .. ': ' .. tostring(lines[2]))
      assert.are.equal(string.format("see 'tplua %s --help'", cmd), lines[#lines], cmd)
      local help = h.run({ cmd, '--help' }).stdout
      local _, nhelp = help:gsub('\n', '')
      assert.is_true(#lines < nhelp, cmd .. ': less than the help')
      for i = 3, #lines - 1 do
        assert.is_truthy(lines[i]:find('^%s'), cmd .. ': synopsis lines are indented: ' .. lines[i])
      end
    end
  end)
end)

-- A misspelt command, subcommand or option names the one meant, when one is clearly nearest by
-- edit distance (a swap of neighbours counts one); otherwise the message is unchanged.
describe('a misspelt name', function()
  local function first_line(r)
    return r.stderr:match('^[^\n]*')
  end

  it('gets the command meant', function()
    local r = h.run({ 'trcae' })
    assert.are.equal(2, r.code)
    assert.are.equal("tplua: unknown command 'trcae'; did you mean 'trace'?", first_line(r))
    assert.is_truthy(r.stderr:find('\ncommands:\n', 1, true), r.stderr)
    r = h.run({ 'histroy', 'list' })
    assert.are.equal("tplua: unknown command 'histroy'; did you mean 'history'?", first_line(r))
    r = h.run({ 'frobnicate' })
    assert.are.equal("tplua: unknown command 'frobnicate'", first_line(r))
  end)

  it('gets the option meant, with the synopsis and the help line kept', function()
    local r = h.run({ 'trace', '--josn' })
    assert.are.equal(2, r.code)
    assert.are.equal('', r.stdout)
    assert.are.equal("tplua trace: unknown option '--josn'; did you mean '--json'?", first_line(r))
    assert.is_truthy(r.stderr:find('\nusage: tplua trace', 1, true), r.stderr)
    assert.are.equal("see 'tplua trace --help'\n", r.stderr:match("see '[^\n]*\n$"))
    r = h.run({ 'history', 'check', '--fial-on', '2' })
    assert.are.equal("tplua history: unknown option '--fial-on'; did you mean '--fail-on'?",
      first_line(r))
    r = h.run({ 'history', 'list', '-metric', 'mfu' })
    assert.are.equal("tplua history: unknown option '-metric'; did you mean '--metric'?",
      first_line(r))
    r = h.run({ 'history', 'chekc' })
    assert.are.equal("tplua history: unknown subcommand 'chekc' (did you mean 'check'?)",
      first_line(r))
  end)

  it('gets nothing when no name is near, or two are as near', function()
    assert.are.equal("tplua trace: unknown option '--bogus-option-x'",
      first_line(h.run({ 'trace', '--bogus-option-x' })))
    local cli = require('tp.cli')
    -- 'tops' is one edit from 'top' and one from 'ops': neither is clearly meant.
    assert.is_nil(cli.suggest('tops', { 'top', 'ops', 'json' }))
    assert.are.equal('last', cli.suggest('lat', { 'last', 'out', 'db' }))
    -- Too far: more edits than a third of the word, or as many as its length.
    assert.is_nil(cli.suggest('x', { 'h', 'y' }))
    assert.is_nil(cli.suggest('runs', { 'ranks', 'repl' }))
    assert.are.equal('compare', cli.suggest('comprae', { 'compare', 'extract' }))
  end)
end)
