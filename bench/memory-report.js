// Preloaded into the bench's agents and workers (NODE_OPTIONS=--require): on SIGUSR2 it writes
// the process's memory figures and every module it has loaded (with its source size) to
// $DATUM_BENCH_REPORT, so the bench can say what a process's memory is made of.
'use strict';
const fs = require('node:fs');

process.on('SIGUSR2', () => {
  const modules = Object.keys(require.cache).map((file) => {
    let bytes = 0;
    try {
      bytes = fs.statSync(file).size;
    } catch {
      // a module without a file on disk (a native addon's alias): counted, no size
    }
    return { file, bytes };
  });
  fs.writeFileSync(process.env.DATUM_BENCH_REPORT, JSON.stringify({ memory: process.memoryUsage(), modules }));
});
