-- tp.results: load run records ("schema": "tplua.run/2", docs/record.md) and tprimat-era result
-- files (train_*.json, benchmark_*.json) into a result set that can be filtered, grouped,
-- sorted and printed. Each run keeps a small summary in memory; its per-iteration arrays are
-- read back from the file on first access. docs/analysis.md describes the summary fields.
-- The work is done by private parts: _results_decode (reading and validating one file),
-- _results_summary, _results_load (runs, result sets, loading), _results_query, _results_output.
local decode = require('tp.analyse._results_decode')
local load_part = require('tp.analyse._results_load')
local query = require('tp.analyse._results_query')
local output = require('tp.analyse._results_output')

local M = {}

--- The schema of the run records this module reads.
M.SCHEMA = require('tp.parse.record').SCHEMA

-- The public fields and functions, documented where the parts define them.
M.DETAIL_FIELDS = decode.DETAIL_FIELDS
M.SUMMARY_FIELDS = decode.SUMMARY_FIELDS
M.INDEX_NAME = load_part.INDEX_NAME
M.load = load_part.load
M.from_runs = load_part.from_runs
M.is_run = load_part.is_run
M.get = query.get
M.summary = output.summary

return M
