-- tp.present: what is shown. tp.present.report writes report.md and report.html, plot draws
-- with gnuplot, pretty formats values, repl and results_repl are what `tplua repl` prints and
-- offers.
return require('tp').package('tp.present', {
  'report', 'plot', 'pretty', 'repl', 'results_repl', 'trace', 'search', 'ops', 'collectives',
  'memory',
})
