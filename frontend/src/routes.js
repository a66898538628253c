// Written by `python -m uopviz.backend.routes` from backend/routes.py, the one route table: do not edit.
// Each data method: its name, HTTP method and path, its arguments in order ([name, where]: path, query
// or body) and whether a static export holds its answers.
/** @type {import("../types/api").RouteSpec[]} */
export const ROUTES = [
  {"method": "meta", "http": "GET", "path": "/api/meta", "args": [], "static": true},
  {"method": "traces", "http": "GET", "path": "/api/traces", "args": [], "static": true},
  {"method": "trace", "http": "GET", "path": "/api/traces/{trace_id}", "args": [["trace_id", "path"]], "static": true},
  {"method": "step", "http": "GET", "path": "/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}", "args": [["trace_id", "path"], ["ci", "path"], ["pi", "path"], ["k", "path"]], "static": true},
  {"method": "python", "http": "GET", "path": "/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}/python", "args": [["trace_id", "path"], ["ci", "path"], ["pi", "path"], ["k", "path"], ["node", "query"]], "static": false},
  {"method": "timeKernel", "http": "POST", "path": "/api/traces/{trace_id}/contexts/{ci}/time", "args": [["trace_id", "path"], ["ci", "path"]], "static": false},
  {"method": "machineCode", "http": "GET", "path": "/api/traces/{trace_id}/contexts/{ci}/machine-code", "args": [["trace_id", "path"], ["ci", "path"]], "static": false},
  {"method": "kernel", "http": "GET", "path": "/api/traces/{trace_id}/contexts/{ci}/kernel", "args": [["trace_id", "path"], ["ci", "path"]], "static": true},
  {"method": "applyOpts", "http": "POST", "path": "/api/traces/{trace_id}/contexts/{ci}/opts", "args": [["trace_id", "path"], ["ci", "path"], ["opts", "body"]], "static": false},
  {"method": "searches", "http": "GET", "path": "/api/tuning/searches", "args": [["kernel_hash", "query"], ["before", "query"], ["limit", "query"]], "static": true},
  {"method": "search", "http": "GET", "path": "/api/tuning/searches/{sid}", "args": [["sid", "path"]], "static": true},
  {"method": "results", "http": "GET", "path": "/api/tuning/results", "args": [["kernel_hash", "query"]], "static": true},
  {"method": "startBeam", "http": "POST", "path": "/api/traces/{trace_id}/contexts/{ci}/beam", "args": [["trace_id", "path"], ["ci", "path"], ["width", "body"], ["max_rounds", "body"]], "static": false},
  {"method": "stopBeam", "http": "DELETE", "path": "/api/beam/{job}", "args": [["job", "path"]], "static": false},
];
