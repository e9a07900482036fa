-- Writes N run records (tplua.run/1) into a directory for the result-loading benchmark: each is
-- built by tp.record.from_log from a perturbed copy of the parsed fixture log
-- tests/fixtures/results/fair/amd/primus-r1.log, so it has the size and shape of a real record
-- (40 iteration records, a full argument dump), and is written pretty-printed as record.save
-- does (without its fsync: this is scratch data). Half the runs are 'amd', half 'nvd'.
--
--   tplua bench/results/gen.lua OUT_DIR [N]        (N defaults to 10000)
local json = require('tp.json')
local record = require('tp.record')
local tplog = require('tp.log')
local fs = require('tp.fs')

local out_dir, n = arg[1], tonumber(arg[2] or '10000')
if not out_dir or not n or n < 1 then
  io.stderr:write('usage: tplua bench/results/gen.lua OUT_DIR [N]\n')
  os.exit(2)
end
assert(fs.mkdir_p(out_dir))

local base = assert(tplog.parse('tests/fixtures/results/fair/amd/primus-r1.log'))

-- Deterministic noise (xorshift32).
local s = 2463534242
local function uniform()
  s = s ~ ((s << 13) & 0xffffffff)
  s = s ~ (s >> 17)
  s = s ~ ((s << 5) & 0xffffffff)
  return (s % 16777216 + 0.5) / 16777216
end

local GPU = {
  amd = { device_count = 8, device_name = 'AMD Instinct MI300X' },
  nvd = { device_count = 8, device_name = 'NVIDIA H100 80GB HBM3' },
}

for i = 1, n do
  local platform = i % 2 == 0 and 'nvd' or 'amd'
  local scale = (platform == 'nvd' and 1.146 or 1.0) * (1 + 0.02 * (uniform() - 0.5))
  local records = {}
  for k, r in ipairs(base.records) do
    local c = {}
    for f, v in pairs(r) do
      c[f] = v
    end
    if c.step_time_s then
      c.step_time_s = c.step_time_s * scale * (1 + 0.004 * (uniform() - 0.5))
    end
    if c.loss then
      c.loss = c.loss + 0.02 * (uniform() - 0.5)
    end
    records[k] = c
  end
  local log = { format = base.format, parser_version = base.parser_version, records = records,
    args = base.args, params = base.params, memory = base.memory, diagnostics = {},
    meta = base.meta }
  local rec = record.from_log(log, { platform = platform,
    framework = platform == 'nvd' and 'megatron' or 'primus', model = 'llama3.1-8b',
    dataset = 'bc', methodology = 'identical_config', ['repeat'] = (i - 1) // 2 % 5 + 1,
    gpu_info = GPU[platform], path = string.format('logs/run%05d.log', i) })
  rec.run_id = string.format('run%05d', i)
  local text = assert(json.encode(rec, { pretty = true }))
  local f = assert(io.open(string.format('%s/run%05d.json', out_dir, i), 'wb'))
  assert(f:write(text, '\n'))
  f:close()
end
print(string.format('%d records written to %s', n, out_dir))
