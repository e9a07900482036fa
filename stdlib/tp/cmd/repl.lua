-- tplua repl [DIR...]: the interactive prompt, with `tp` loaded.
local M = {
  summary = 'interactive prompt with tp loaded (and results of DIR... when given)',
  usage = [[usage: tplua repl [DIR...]
Starts the interactive prompt with the global `tp` (require 'tp') loaded.
Line editing and history (kept under $XDG_STATE_HOME/tplua), tab completion of globals and
table fields, tables pretty-printed.]],
}

function M.run(args)
  if args[1] == '--help' or args[1] == '-h' then
    print(M.usage)
    return 0
  end
  local tp = require('tp')
  rawset(_G, 'tp', tp)
  local ok, results = pcall(require, 'tp.results')
  if args[1] and ok and type(results) == 'table' and results.load then
    local set = assert(results.load(args))
    rawset(_G, 'R', set)
  elseif args[1] then
    io.stderr:write('tplua repl: loading result directories needs tp.results\n')
    return 1
  end
  require('tp._host').repl()
  return 0
end

return M
