-- The measured command of the result-loading benchmark: loads every record under DIR with
-- tp.results.load and summarises them as a user would first (per platform: runs, median and
-- mean tokens/s/GPU, mean step time), or, with --decode-only, only reads and decodes each file
-- with tp.json (the floor set by the C JSON decoder). Prints one line per platform and the
-- CPU seconds of each phase (os.clock). --index loads with the summary index
-- (tp.results.load{index = true}): the first such load writes it, later ones reuse it.
--
--   tplua bench/results/load.lua [--decode-only | --index] DIR
local results = require('tp.results')
local stats = require('tp.stats')
local json = require('tp.json')
local fs = require('tp.fs')

local decode_only = arg[1] == '--decode-only'
local index = arg[1] == '--index'
local dir = (decode_only or index) and arg[2] or arg[1]
if not dir then
  io.stderr:write('usage: tplua bench/results/load.lua [--decode-only | --index] DIR\n')
  os.exit(2)
end

local t0 = os.clock()
if decode_only then
  local entries = assert(fs.list(dir))
  local n, bytes = 0, 0
  for _, e in ipairs(entries) do
    if e.name:match('^[^.].*%.json$') then
      local f = assert(io.open(dir .. '/' .. e.name, 'rb'))
      local text = f:read('a')
      f:close()
      assert(json.decode(text))
      n, bytes = n + 1, bytes + #text
    end
  end
  print(string.format('decoded %d files, %.1f MB, cpu %.3f s', n, bytes / 1e6, os.clock() - t0))
  return
end

local set = assert(results.load(dir, { index = index }))
local t1 = os.clock()
local groups = set:group('platform')
for _, p in ipairs(set:group_keys('platform')) do
  local g = groups[p]
  local tps = g:values('tokens_per_s_per_gpu', true)
  local st = g:values('step_time', true)
  print(string.format('%s: %d runs, tokens/s/GPU median %.1f mean %.1f, step time mean %.4f s',
    p, #g, stats.median(tps), stats.mean(tps), stats.mean(st)))
end
local t2 = os.clock()
print(string.format('%d runs, %d errors; cpu: load %.3f s, summarise %.3f s, memory %.1f MB',
  #set, #set.errors, t1 - t0, t2 - t1, collectgarbage('count') / 1024))
