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
