// Preloaded into the bench's agents and workers (NODE_OPTIONS=--require): on SIGUSR2 it writes
// the process's memory figures and every module it has loaded (with its source size) to
// $DATUM_BENCH_REPORT, so the bench can say what a process's memory is made of. Node runs a
// preload in every worker thread too, so each thread (the SDK runs its workflows in worker
// threads, each with its own V8 heap) answers the main thread's request with its own heap over a
// BroadcastChannel; with $DATUM_BENCH_HEAP_SNAPSHOT set to a directory, each thread also writes a
// heap snapshot there (slow and large: for a profile, not for every row).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');
const { BroadcastChannel, isMainThread, threadId } = require('node:worker_threads');

const channel = new BroadcastChannel('datum-bench-memory-report');
channel.unref();

function heap() {
  const h = v8.getHeapStatistics();
  return {
    used_heap_size: h.used_heap_size,
    total_heap_size: h.total_heap_size,
    total_physical_size: h.total_physical_size,
    malloced_memory: h.malloced_memory,
    external_memory: h.external_memory,
    number_of_native_contexts: h.number_of_native_contexts,
    number_of_detached_contexts: h.number_of_detached_contexts,
    spaces: Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size])),
  };
}

/** Resident kilobytes by kind of mapping, from /proc/self/smaps_rollup (Linux). */
function residentKinds() {
  try {
    const text = fs.readFileSync('/proc/self/smaps_rollup', 'utf8');
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
    return { rss_kb: kb('Rss'), anonymous_kb: kb('Anonymous'), file_kb: kb('Rss') - kb('Anonymous') };
  } catch {
    return null;
  }
}

if (isMainThread) {
  process.on('SIGUSR2', () => {
    const threads = [];
    const onMessage = (event) => {
      if (event.data?.kind === 'thread-heap') threads.push(event.data);
    };
    channel.onmessage = onMessage;
    channel.postMessage({ kind: 'report', snapshotDir: process.env.DATUM_BENCH_HEAP_SNAPSHOT ?? null });
    // The threads answer between their activations; a snapshot of a big heap takes a while.
    const wait = process.env.DATUM_BENCH_HEAP_SNAPSHOT ? 120_000 : 3000;
    setTimeout(() => {
      const modules = Object.keys(require.cache).map((file) => {
        let bytes = 0;
        try {
          bytes = fs.statSync(file).size;
        } catch {
          // a module without a file on disk (a native addon's alias): counted, no size
        }
        return { file, bytes };
      });
      const report = { memory: process.memoryUsage(), heap: heap(), resident: residentKinds(), threads, modules };
      fs.writeFileSync(process.env.DATUM_BENCH_REPORT, JSON.stringify(report));
    }, wait);
  });
} else {
  channel.onmessage = (event) => {
    if (event.data?.kind !== 'report') return;
    let snapshot = null;
    if (event.data.snapshotDir) {
      snapshot = v8.writeHeapSnapshot(path.join(event.data.snapshotDir, `thread-${process.pid}-${threadId}.heapsnapshot`));
    }
    channel.postMessage({ kind: 'thread-heap', threadId, heap: heap(), snapshot });
  };
}
