// Another agent of the host, for the filesystem adversary (fs-adversary.test.ts): a real separate
// process that serves a directory of the case's root as a node root of its own, as an agent does
// (a flock on the directory, and its entry in the host's register of roots, flock-held: the
// format of src/agent/fs/registry.ts, which the test checks the real registeredAt() reads), and
// that tries, as a competing agent would, to take a root the case holds. One line of JSON on
// stdin per command, one line back:
//   {"hold": dir}   → "held"     serve `dir` as a root (until "drop")
//   {"drop": true}  → "dropped"  let go of every root held, and their entries
//   {"take": root}  → "busy" | "free"   try the root's lock as a second agent would, and let go

export const FOREIGN_SCRIPT = String.raw`
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const runtime = process.env.DATUM_RUNTIME_DIR;
const held = [];

function flock(fd) {
  const r = spawnSync('flock', ['--exclusive', '--nonblock', '--conflict-exit-code', '75', '3'], { stdio: ['ignore', 'ignore', 'pipe', fd] });
  if (r.status !== 0 && r.status !== 75) throw new Error('flock failed: ' + r.stderr);
  return r.status === 0;
}

function hold(dir) {
  const fd = fs.openSync(dir, fs.constants.O_RDONLY);
  if (!flock(fd)) throw new Error(dir + ' is held already');
  const st = fs.fstatSync(fd);
  fs.mkdirSync(path.join(runtime, 'roots'), { recursive: true });
  const entry = path.join(runtime, 'roots', st.dev + '-' + st.ino + '.json');
  const efd = fs.openSync(entry, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
  if (!flock(efd)) throw new Error(entry + ' is held already');
  fs.ftruncateSync(efd, 0);
  fs.writeSync(efd, JSON.stringify({ root: dir, node: 'N-foreign', pid: process.pid, config: 'foreign.yaml', since: new Date().toISOString() }), 0);
  held.push({ fd, efd, entry });
}

function drop() {
  for (const h of held.splice(0)) {
    fs.rmSync(h.entry, { force: true });
    fs.closeSync(h.efd);
    fs.closeSync(h.fd);
  }
}

function take(root) {
  const fd = fs.openSync(root, fs.constants.O_RDONLY);
  try {
    return flock(fd) ? 'free' : 'busy';
  } finally {
    fs.closeSync(fd);
  }
}

require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const cmd = JSON.parse(line);
  if (cmd.hold) { hold(cmd.hold); console.log('held'); }
  else if (cmd.drop) { drop(); console.log('dropped'); }
  else if (cmd.take) console.log(take(cmd.take));
});
`;
