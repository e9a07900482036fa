-- tplua repl [DIR...]: the interactive prompt, with `tp` loaded, and the results of DIR... as `R`.
local M = {
  summary = 'interactive prompt with tp loaded (and results of DIR... when given)',
  usage = [[usage: tplua repl [DIR...]
Starts the interactive prompt with the global `tp` (require 'tp') loaded.
Line editing and history (kept under $XDG_STATE_HOME/tplua), tab completion of globals,
table fields and methods, tables pretty-printed.
With DIR... (result directories or files), the run records and tprimat-era results found there
are loaded as `R`, with these helpers:
  R:table()                      the runs as a table (R:table{'id', 'mfu'} picks columns)
  R:where{platform = 'amd'}      the runs that match (a set again; also :sort, :group)
  R[1], #R, R:run('ID'), R:ids() single runs (their fields complete with Tab: R[1] is a run)
  R:plot('loss')                 a text plot: loss, lr, step_time, throughput, memory, mfu
  compare(R, 'platform')         ratios with confidence intervals (tp.compare)
  audit(R)                       the fairness audit (tp.audit)
  convergence(R)                 the loss-curve checks (tp.convergence)
  report(R, 'out')               writes report.md, report.html and plots into out/
Without DIR as well: H = tp.history.open() opens the run history (docs/history.md);
  H:series{platform = 'amd'} lists series as a table, H:points(key) gives their runs.
Exit status: 0 at end of input; 1 when no DIR exists.]],
}

function M.run(args)
  if args[1] == '--help' or args[1] == '-h' then
    print(M.usage)
    return 0
  end
  for _, a in ipairs(args) do
    if a:sub(1, 1) == '-' then
      io.stderr:write(string.format("tplua repl: unknown option '%s'\n", a))
      io.stderr:write(M.usage, '\n')
      return 2
    end
  end
  local tp = require('tp')
  rawset(_G, 'tp', tp)
  if args[1] then
    local results = require('tp.analyse.results')
    local set, err = results.load(args)
    if not set then
      io.stderr:write('tplua repl: ', tostring(err), '\n')
      return 1
    end
    local rr = require('tp.present.results_repl')
    local R = rr.install(set)
    io.stdout:write(rr.banner(R, args))
    io.stdout:flush()
  end
  require('tp._host').repl()
  return 0
end

return M
