-- luacheck configuration (luacheck . from the repository root).
std = 'lua54'
max_line_length = 100
ignore = { '212/_.*', '211/_.*' }
exclude_files = { 'build*/**', 'out*/**', 'output/**' }
files['tests/**/*.lua'] = { std = '+busted' }
files['tests/helper.lua'] = { std = '+busted' }
files['.busted'] = { std = 'lua54' }
