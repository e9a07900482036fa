-- An example campaign: four runs of the fake trainer (tests/tools/fake_trainer, which prints
-- Megatron-LM iteration lines at a chosen pace) standing in for real trainings: global batch
-- sizes 64 and 128, two repeats each. It shows the live view, the journal and resuming:
--
--   TPLUA_FAKE_TRAINER=build/tests/tools/fake_trainer \
--     tplua run examples/campaign/fake.lua --results out/fake
--   (press Ctrl-C, or kill -9 tplua, then run the same command again: it resumes)
--
-- The fake trainer is found through $TPLUA_FAKE_TRAINER, else $TPLUA_TOOLS_DIR/fake_trainer, else
-- build/tests/tools/fake_trainer under the current directory. $TPLUA_FAKE_PACE (lines per
-- second, default 5 = the printed step time of 200 ms) speeds the replay up for tests; the
-- printed step time, and so the recorded tokens/s, stays the same.
local tp = require('tp')

local STEP_MS = 200 -- printed "elapsed time per iteration (ms)"
local ITERS = 30
local SEQ_LEN = 2048
local GPUS = 8

local function find_trainer()
  local path = os.getenv('TPLUA_FAKE_TRAINER')
  if not path and os.getenv('TPLUA_TOOLS_DIR') then
    path = os.getenv('TPLUA_TOOLS_DIR') .. '/fake_trainer'
  end
  path = path or 'build/tests/tools/fake_trainer'
  if not tp.fs.is_file(path) then
    error(string.format('examples/campaign/fake.lua: no fake trainer at %s: set ' ..
      'TPLUA_FAKE_TRAINER to build/tests/tools/fake_trainer (or TPLUA_TOOLS_DIR to its ' ..
      'directory)', path), 0)
  end
  return tp.fs.realpath(path)
end

local trainer = find_trainer()
local pace = tonumber(os.getenv('TPLUA_FAKE_PACE') or '') or 1000 / STEP_MS

-- The unified config (DESIGN.md, "A recipe") each run would get; the fake trainer ignores it,
-- but the record keeps it (training_config.unified) and the config hash covers it.
local function config(gbs)
  return {
    model = 'llama3.1-8b',
    training = { seed = 1234, mbs = 1, gbs = gbs, seq_len = SEQ_LEN, iters = ITERS, lr = 3e-4,
      min_lr = 3e-5, warmup = 3, decay = 'cosine', precision = 'bf16', dataset = 'mock' },
    parallelism = { tp = 1, pp = 1, dp = GPUS },
    nodes = 1,
    gpus_per_node = GPUS,
  }
end

local runs = {}
for _, gbs in ipairs({ 64, 128 }) do
  for rep = 1, 2 do
    runs[#runs + 1] = {
      id = string.format('gbs%d-r%d', gbs, rep),
      argv = { trainer, '--megatron-gen', tostring(ITERS), '--step-ms', tostring(STEP_MS),
        '--gbs', tostring(gbs), '--seed', tostring(1000 + rep), '--lines-per-sec',
        tostring(pace) },
      parser = 'megatron',
      framework = 'fake_trainer',
      methodology = 'identical_config',
      ['repeat'] = rep,
      config = config(gbs),
      timeout = 600,
    }
  end
end

return tp.campaign({
  name = 'fake-trainer example',
  results = 'output/campaign-fake',
  runs = runs,
  abort = { stall_minutes = 2 },
})
