-- tp.parse: what is read back from a run. tp.parse.log reads a training log (any of the four
-- frameworks, live or after the fact); tp.parse.record turns it into the unified run record
-- (docs/record.md); tp.parse.metrics holds the formulas every number is derived with (MFU,
-- TFLOP/s, energy per token).
return require('tp').package('tp.parse', {
  'log', 'record', 'metrics', 'time', 'collectives',
})
