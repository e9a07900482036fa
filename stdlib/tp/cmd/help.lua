-- tplua help [COMMAND]: lists the built-in commands, or shows one command's usage.
local cmds = require('tp.cmd')

local M = {
  summary = 'list the commands, or show the usage of one',
  usage = 'usage: tplua help [COMMAND]',
}

function M.run(args)
  if args[1] == '--help' or args[1] == '-h' then
    print(M.usage)
    return 0
  end
  if args[1] then
    local modname = cmds.module_name(args[1])
    if not modname then
      io.stderr:write(string.format("tplua help: unknown command '%s'\n", args[1]))
      cmds.print_commands(io.stderr)
      return 2
    end
    local cmd = require(modname)
    print(cmd.usage or ('tplua ' .. args[1]))
    return 0
  end
  cmds.print_commands(io.stdout)
  return 0
end

return M
