-- The REPL through a real pseudo-terminal (tests/tools/ptyrun): prompts, pretty printing,
-- multi-line input, errors, tab completion, history under the XDG state directory.
local h = require('helper')

local function session(steps, env)
  local args = { '-t', '10' }
  for _, s in ipairs(steps) do
    args[#args + 1] = s[1]
    args[#args + 1] = s[2]
  end
  args[#args + 1] = '--'
  args[#args + 1] = h.bin
  return h.run(args, { bin = h.tools_dir .. '/ptyrun', env = env })
end

local P = 'tplua> '

describe('the REPL on a terminal', function()
  local state, r

  setup(function()
    state = h.tmpdir()
    r = session({
      { '-x', P }, { '-s', 'x = {b = 2, a = {1, 2}}\n' },
      { '-x', P }, { '-s', 'x\n' },
      { '-x', '{ a = { 1, 2 }, b = 2 }' },
      { '-x', P }, { '-s', 'return 1 +\n' }, { '-x', '>> ' }, { '-s', '2\n' }, { '-x', '3' },
      { '-x', P }, { '-s', 'error("boom")\n' }, { '-x', 'boom' },
      { '-x', P }, { '-s', 't = {}; t.self = t; return t\n' }, { '-x', '<cycle' },
      { '-x', P }, { '-s', 'local a = {} for i = 1, 100 do a[i] = i end return a\n' },
      { '-x', '... (80 more)' },
      { '-x', P }, { '-s', 'string.for\t' }, { '-x', 'string.format(' },
      { '-s', '"%05.1f", 2.5)\n' }, { '-x', '002.5' },
      { '-x', P }, { '-s', 'x.\t\t' }, { '-x', 'x.a' },
      { '-s', '\x15' }, -- kill the line
      { '-x', P }, { '-s', 'print("last")\n' }, { '-x', 'last' },
      { '-x', P }, { '-s', '\x04' },
    }, { XDG_STATE_HOME = state, HOME = state })
  end)

  it('exits 0 at end of input', function()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
  end)

  it('prints the version banner and the prompt', function()
    assert.truthy(r.stdout:find('tplua %d+%.%d+%.%d+ %(Lua 5%.4'))
  end)

  it('keeps the error message and goes on', function()
    assert.truthy(r.stdout:find('stdin:1: boom', 1, true))
  end)

  it('writes the history under the XDG state directory', function()
    local hist = h.read(state .. '/tplua/history')
    assert.truthy(hist, 'no history file')
    assert.truthy(hist:find('x = {b = 2, a = {1, 2}}', 1, true))
    assert.truthy(hist:find('print("last")', 1, true))
  end)

  it('recalls history from an earlier session with the up arrow', function()
    local r2 = session({
      { '-x', P }, { '-s', '\x1b[A\n' }, { '-x', 'last' }, { '-x', P }, { '-s', '\x04' },
    }, { XDG_STATE_HOME = state, HOME = state })
    assert.are.equal(0, r2.code, r2.stdout .. r2.stderr)
  end)
end)
