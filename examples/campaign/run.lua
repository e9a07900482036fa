-- Runs a campaign file (a Lua file returning tp.campaign{...}) with the flags of `tplua run`:
--
--   tplua examples/campaign/run.lua examples/campaign/fake.lua --results out/fake
--       [--retry-failed] [--quiet] [--concurrency N]
--
-- Exit status: 0 all runs finished, 1 a run failed or the campaign could not start, 2 usage
-- error, 130 interrupted by SIGINT (143 by SIGTERM).
local cli = require('tp.cli')
local campaign = require('tp.campaign')

local USAGE = [[
usage: tplua examples/campaign/run.lua CAMPAIGN.lua [--results DIR] [--retry-failed] [--quiet]
                                       [--concurrency N]
]]

local function main(args)
  local opts, rest = cli.parse(args, { results = 'string', retry_failed = 'boolean',
    quiet = 'boolean', concurrency = 'integer', help = 'boolean' })
  if not opts then
    return cli.usage_error('run', rest, USAGE)
  end
  if opts.help then
    io.stdout:write(USAGE)
    return 0
  end
  if #rest ~= 1 then
    return cli.usage_error('run', 'one CAMPAIGN file expected', USAGE)
  end
  local chunk, err = loadfile(rest[1])
  if not chunk then
    io.stderr:write(err, '\n')
    return 1
  end
  local c = chunk()
  if not campaign.is_campaign(c) then
    io.stderr:write(rest[1], ': does not return a campaign (tp.campaign{...})\n')
    return 1
  end
  local summary, eerr = c:execute({ results = opts.results, retry_failed = opts.retry_failed,
    quiet = opts.quiet, concurrency = opts.concurrency })
  if not summary then
    io.stderr:write('run: ', eerr, '\n')
    return 1
  end
  return summary.exit_code
end

os.exit(main(arg), true)
