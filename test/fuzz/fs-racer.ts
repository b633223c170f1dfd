// The other writer of the filesystem adversary (fs-adversary.test.ts): a real separate process
// that reshapes a node root while the agent observes and writes it. One process serves every
// case: a line of JSON on stdin starts a case ({root, seed, files, dirs, away}), "stop" ends it;
// the racer then puts back every directory it swapped and answers with one line of JSON: the
// operations it did, each with its monotonic time span (process.hrtime, the clock the agent's
// swap probe reads too).
//
// Operations, chosen by the case's seed between pauses of up to 3.5 ms, 14 ms or 56 ms (the
// case's temper), on about half of the files, each a few to 40 times:
//   inplace   rewrite a regular file in place (same inode) with unique bytes
//   touchr    the same, then set its mtime back (a writer the old marker could not see)
//   rename    write unique bytes to a temp file and rename it over the target (a new inode)
//   mkdir     put a directory where a file is expected
//   unlink    remove the target
//   swap      replace a directory with a symlink (out of the root, or to another directory of it)
//   unswap    put a swapped directory back
// It never writes through a symlink (O_NOFOLLOW), never into a swapped directory, and never into
// a file with a second name (a hard link to a file outside the root): its own writes stay inside.

export const RACER_SCRIPT = String.raw`
const fs = require('node:fs');
const path = require('node:path');
const { constants: C } = fs;

function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let job = null;

function under(rel) {
  return job.swapped.some((d) => rel === d || rel.startsWith(d + '/'));
}

function content(rel) {
  return 'racer ' + job.seed + ' ' + job.n++ + ' ' + rel + '\n';
}

function regular(abs) {
  try {
    const st = fs.lstatSync(abs);
    return st.isFile() && st.nlink === 1 ? st : null;
  } catch {
    return null;
  }
}

function timed(entry, fn) {
  entry.t0 = String(process.hrtime.bigint());
  try {
    fn();
    entry.ok = true;
  } catch (err) {
    entry.ok = false;
    entry.err = err.code || String(err);
  }
  entry.t1 = String(process.hrtime.bigint());
  job.log.push(entry);
}

const OPS = {
  inplace(rel, abs, touch) {
    if (!regular(abs)) return;
    const c = content(rel);
    timed({ op: touch ? 'touchr' : 'inplace', rel, c }, () => {
      const fd = fs.openSync(abs, C.O_WRONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
      try {
        const st = fs.fstatSync(fd);
        if (!st.isFile() || st.nlink !== 1) throw Object.assign(new Error('not ours to write'), { code: 'SKIP' });
        fs.ftruncateSync(fd, 0);
        fs.writeSync(fd, c, 0);
        if (touch) fs.futimesSync(fd, st.atime, st.mtime);
      } finally {
        fs.closeSync(fd);
      }
    });
  },
  rename(rel, abs) {
    const c = content(rel);
    const tmp = abs + '.racer-tmp';
    timed({ op: 'rename', rel, c }, () => {
      fs.writeFileSync(tmp, c, { flag: C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW });
      try {
        fs.renameSync(tmp, abs);
      } catch (err) {
        fs.rmSync(tmp, { force: true });
        throw err;
      }
    });
  },
  mkdir(rel, abs) {
    timed({ op: 'mkdir', rel }, () => fs.mkdirSync(abs));
  },
  unlink(rel, abs) {
    if (!regular(abs)) return;
    timed({ op: 'unlink', rel }, () => fs.unlinkSync(abs));
  },
};

function swap(rand) {
  const free = job.dirs.filter((d) => !under(d) && !job.swapped.some((s) => s.startsWith(d + '/')));
  if (free.length === 0) return;
  const d = free[Math.floor(rand() * free.length)];
  const abs = path.join(job.root, d);
  const to = rand() < 0.5 ? job.away : path.join(job.root, job.dirs[Math.floor(rand() * job.dirs.length)]);
  timed({ op: 'swap', rel: d }, () => {
    fs.renameSync(abs, abs + '.racer-real');
    try {
      fs.symlinkSync(to, abs);
    } catch (err) {
      fs.renameSync(abs + '.racer-real', abs);
      throw err;
    }
    job.swapped.push(d);
  });
}

function unswap(d) {
  const abs = path.join(job.root, d);
  timed({ op: 'unswap', rel: d }, () => {
    fs.unlinkSync(abs);
    fs.renameSync(abs + '.racer-real', abs);
  });
  job.swapped = job.swapped.filter((s) => s !== d);
}

const nap = new Int32Array(new SharedArrayBuffer(4));

function step() {
  if (!job || job.stopping) return;
  const until = process.hrtime.bigint() + 5000000n;
  while (process.hrtime.bigint() < until) {
    const r = job.rand();
    if (r < 0.12 && job.swapped.length < 2) swap(job.rand);
    else if (r < 0.22 && job.swapped.length > 0) unswap(job.swapped[job.swapped.length - 1]);
    else {
      // Each file takes a few writes and then is left alone, so later agent writes replace them.
      const files = job.files.filter((f) => !under(f) && (job.budget[f] ?? 0) > 0);
      if (files.length > 0) {
        const rel = files[Math.floor(job.rand() * files.length)];
        const abs = path.join(job.root, rel);
        job.budget[rel]--;
        const o = job.rand();
        if (o < 0.4) OPS.inplace(rel, abs, false);
        else if (o < 0.55) OPS.inplace(rel, abs, true);
        else if (o < 0.85) OPS.rename(rel, abs);
        else if (o < 0.93) OPS.unlink(rel, abs);
        else if (!fs.existsSync(abs)) OPS.mkdir(rel, abs);
      }
    }
    // Asleep, not spinning: the agent needs the CPU to race at all. Mostly short, sometimes long.
    Atomics.wait(nap, 0, 0, job.calm * (job.rand() < 0.7 ? job.rand() * 0.3 : 0.5 + job.rand() * 3));
  }
  setImmediate(step);
}

require('node:readline')
  .createInterface({ input: process.stdin })
  .on('line', (line) => {
    if (line === 'stop') {
      job.stopping = true;
      for (const d of [...job.swapped].reverse()) unswap(d);
      process.stdout.write(JSON.stringify(job.log) + '\n');
      job = null;
      return;
    }
    const req = JSON.parse(line);
    const rand = prng(req.seed);
    // Each case its own temper: frantic (every write meets a change), or calm enough that most
    // writes reach their swap; and its own few files, so the others are written undisturbed.
    const calm = [1, 4, 16][Math.floor(rand() * 3)];
    const files = req.files.filter(() => rand() < 0.5);
    const budget = Object.fromEntries(files.map((f) => [f, 1 + Math.floor(rand() * 40)]));
    job = { ...req, files, budget, calm, rand, n: 0, log: [], swapped: [], stopping: false };
    process.stdout.write('started\n');
    setImmediate(step);
  });
`;
