-- The commands the docs show, run as shown. Every ```sh block of README.md and docs/*.md says
-- whether it runs here: `sh runnable` blocks are run from the repository root (each line a
-- command, `\` continuing it; a line may end in `# exit N` when N is its expected status),
-- `sh illustrative` blocks show commands that need what this machine lacks (a GPU, a results
-- directory of the reader's own, a cluster) and must say so in a comment on their first line.
-- A transcript block (```text runnable) runs its `$ ` lines. A block with neither mark fails.
local h = require('helper')

local ROOT = h.source_dir

-- The Markdown files the docs are: README.md and docs/*.md.
local function doc_files()
  local out = { ROOT .. '/README.md' }
  local p = io.popen('ls ' .. h.shquote(ROOT .. '/docs') .. '/*.md')
  for f in p:lines() do
    out[#out + 1] = f
  end
  p:close()
  table.sort(out)
  return out
end

-- The fenced blocks of a Markdown text: { info =, first = line number, lines = {...} }.
local function blocks(text)
  local out, cur = {}, nil
  local n = 0
  for line in (text .. '\n'):gmatch('(.-)\n') do
    n = n + 1
    local fence, info = line:match('^(%s*```+)%s*(.-)%s*$')
    if cur then
      if fence and info == '' then
        out[#out + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    elseif fence then
      cur = { info = info, first = n + 1, lines = {} }
    end
  end
  return out
end

-- The commands of a runnable block: { { text, line, status } ... }.
local function commands(b)
  local out, acc, at = {}, nil, nil
  local transcript = b.info:match('^text') ~= nil
  for i, line in ipairs(b.lines) do
    local cmd = line
    if transcript then
      cmd = acc and line or line:match('^%$ (.*)$')
    end
    if cmd and (acc or not cmd:match('^%s*#') and not cmd:match('^%s*$')) then
      acc = acc and (acc .. ' ' .. cmd:gsub('^%s+', '')) or cmd
      at = at or (b.first + i - 1)
      if acc:sub(-1) == '\\' then
        acc = acc:sub(1, -2)
      else
        local status = tonumber(acc:match('#%s*exit%s+(%d+)%s*$')) or 0
        out[#out + 1] = { text = acc, line = at, status = status }
        acc, at = nil, nil
      end
    end
  end
  return out
end

describe('the docs\' commands', function()
  local bin_dir

  setup(function()
    -- `tplua` in the examples is the binary under test.
    bin_dir = h.tmpdir()
    assert(os.execute('ln -s ' .. h.shquote(h.bin:sub(1, 1) == '/' and h.bin
      or (ROOT .. '/' .. h.bin)) .. ' ' .. h.shquote(bin_dir .. '/tplua')))
  end)

  it('mark every sh block runnable or illustrative', function()
    local unmarked = {}
    for _, f in ipairs(doc_files()) do
      for _, b in ipairs(blocks(assert(h.read(f)))) do
        if b.info:match('^sh') or b.info:match('^bash') then
          local runnable = b.info:match('runnable') ~= nil
          local illustrative = b.info:match('illustrative') ~= nil
          if runnable == illustrative then
            unmarked[#unmarked + 1] = string.format('%s:%d (```%s)', f:sub(#ROOT + 2),
              b.first - 1, b.info)
          elseif illustrative and not (b.lines[1] or ''):match('^%s*#') then
            unmarked[#unmarked + 1] = string.format('%s:%d: an illustrative block says why on '
              .. 'its first line (a # comment)', f:sub(#ROOT + 2), b.first - 1)
          end
        end
      end
    end
    assert.are.same({}, unmarked)
  end)

  it('run as shown, with the exit status they say', function()
    local ran, failed = 0, {}
    local tmp = h.tmpdir()
    for _, f in ipairs(doc_files()) do
      for _, b in ipairs(blocks(assert(h.read(f)))) do
        if b.info:match('runnable') then
          for _, c in ipairs(commands(b)) do
            local script = string.format('cd %s && export PATH=%s:"$PATH" TPLUA_HISTORY=%s '
              .. 'TMPDIR=%s && %s', h.shquote(ROOT), h.shquote(bin_dir),
              h.shquote(tmp .. '/history.sqlite'), h.shquote(tmp), c.text)
            local r = h.run({ '-o', 'pipefail', '-c', script }, { bin = '/bin/bash' })
            ran = ran + 1
            if r.code ~= c.status then
              failed[#failed + 1] = string.format('%s:%d: %s -> exit %d (expected %d): %s',
                f:sub(#ROOT + 2), c.line, c.text, r.code, c.status,
                (r.stderr ~= '' and r.stderr or r.stdout):sub(1, 300))
            end
          end
        end
      end
    end
    assert.are.same({}, failed)
    assert.is_true(ran > 0)
  end)
end)
