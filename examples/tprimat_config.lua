-- A recipe whose experiment comes from a tprimat-era config.yaml (examples/tprimat/config.yaml):
-- tp.config.load maps its layout to the unified config, one experiment per model.
--   tplua examples/tprimat_config.lua [flags]            the llama model
--   MODEL=qwen tplua examples/tprimat_config.lua         the qwen model
--   GBS=64 tplua plan examples/tprimat_config.lua        ${GBS:-128} in the file
local tp = require('tp')

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'
local spec = assert(tp.config.load(here .. '/tprimat/config.yaml',
  { model = os.getenv('MODEL') or 'llama' }))

return tp.experiment.main(spec)
