#!/usr/bin/env node
// Builds a Debian binary package (.deb) with nothing but Node and the `tar` package: an ar
// archive of debian-binary, control.tar.gz and data.tar.gz, as dpkg-deb writes it. Deterministic:
// every entry is root:root with a fixed mtime, entries and members are in a fixed order, and gzip
// is written the same way each time, so the same input always gives the same sha256 (the digest
// desired state pins). Also writes the index of a flat apt repository (a Packages file), so a
// test or the demo can serve exact versions to apt-get without dpkg-scanpackages.
//
//   node scripts/build-deb.mjs --name demo-hello --version 1.1-1 [--out DIR] [--arch all]
//        [--depends X] [--conflicts X] [--breaks X] [--replaces X] [--provides X]
//   node scripts/build-deb.mjs --index DIR        (writes DIR/Packages for the .debs in DIR)
//
// The package installs usr/share/<name>/version.txt ("<name> <version>"), plus any files given
// through the API. No maintainer scripts unless given through the API: dpkg runs them as root.

import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gunzipSync, gzipSync } from 'node:zlib';
import * as tar from 'tar';

// Debian policy 5.6.1 and 5.6.12, the same rules as a package resource (src/domain/resources/package.ts).
const NAME = /^[a-z0-9][a-z0-9+.-]{1,127}$/;
const UPSTREAM = /^[0-9][A-Za-z0-9.+~-]*$/;
const UPSTREAM_PLAIN = /^[0-9][A-Za-z0-9.+~]*$/;
const REVISION = /^[A-Za-z0-9.+~]+$/;
const ARCH = /^[a-z0-9][a-z0-9-]*$/;
const FIXED_MTIME = new Date('2000-01-01T00:00:00Z');
const RELATIONS = ['depends', 'conflicts', 'breaks', 'replaces', 'provides'];

/** Why `version` is not a Debian version ([epoch:]upstream[-revision]), or null. */
function versionProblem(version) {
  if (typeof version !== 'string' || version.length === 0 || version.length > 128)
    return 'is empty or longer than 128 characters';
  const colon = version.indexOf(':');
  const epoch = colon < 0 ? null : version.slice(0, colon);
  const rest = colon < 0 ? version : version.slice(colon + 1);
  if (epoch !== null && !/^[1-9][0-9]*$/.test(epoch))
    return 'has an epoch that is not a number from 1 without leading zeros (dpkg reports 0: as no epoch)';
  const dash = rest.lastIndexOf('-');
  if (dash < 0)
    return UPSTREAM_PLAIN.test(rest) ? null : 'does not start with a digit, or has characters outside A-Z a-z 0-9 . + ~';
  if (!UPSTREAM.test(rest.slice(0, dash))) return 'has an upstream version that does not start with a digit';
  return REVISION.test(rest.slice(dash + 1)) ? null : 'has an empty or invalid Debian revision';
}

/** One tar entry: a header block from the tar package, then the body padded to 512. */
function tarEntry({ name, type, mode, body = Buffer.alloc(0) }) {
  const header = new tar.Header({
    path: name,
    type,
    mode,
    uid: 0,
    gid: 0,
    uname: 'root',
    gname: 'root',
    size: type === 'File' ? body.length : 0,
    mtime: FIXED_MTIME,
  });
  const block = Buffer.alloc(512);
  if (header.encode(block, 0)) throw new Error(`${name}: a name this long needs a pax header, which build-deb does not write`);
  const pad = Buffer.alloc((512 - (body.length % 512)) % 512);
  return type === 'File' ? [block, body, pad] : [block];
}

/** A tar of `files` (path → {content, mode}) with every parent directory, in sorted order; gzipped unless `compress` is false. */
function tarOf(files, compress = true) {
  const dirs = new Set(['.']);
  for (const p of Object.keys(files)) {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) dirs.add(`./${parts.slice(0, i).join('/')}`);
  }
  const entries = [
    ...[...dirs].map((d) => ({ name: `${d}/`, type: 'Directory', mode: 0o755 })),
    ...Object.entries(files).map(([p, f]) => ({ name: `./${p}`, type: 'File', mode: f.mode, body: Buffer.from(f.content) })),
  ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const blocks = entries.flatMap(tarEntry);
  const plain = Buffer.concat([...blocks, Buffer.alloc(1024)]);
  return compress ? gzipSync(plain, { level: 9 }) : plain;
}

/** An ar archive (the "!<arch>" format dpkg reads), members in the order given. */
function ar(members) {
  const parts = [Buffer.from('!<arch>\n', 'latin1')];
  for (const [name, body] of members) {
    const field = (text, width) => text.padEnd(width, ' ');
    const header = `${field(name, 16)}${field(String(FIXED_MTIME.getTime() / 1000), 12)}${field('0', 6)}${field('0', 6)}${field('100644', 8)}${field(String(body.length), 10)}\`\n`;
    parts.push(Buffer.from(header, 'latin1'), body);
    if (body.length % 2 === 1) parts.push(Buffer.from('\n'));
  }
  return Buffer.concat(parts);
}

const md5 = (bytes) => createHash('md5').update(bytes).digest('hex');
const sha256Of = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** The control file: fields in dpkg-deb's usual order, relations only where given. */
function controlText({ name, version, architecture, installedSize, relations, description, maintainer }) {
  const lines = [`Package: ${name}`, `Version: ${version}`, `Architecture: ${architecture}`];
  lines.push(`Maintainer: ${maintainer}`, `Installed-Size: ${installedSize}`);
  for (const field of RELATIONS) {
    const value = relations[field];
    if (value) lines.push(`${field[0].toUpperCase()}${field.slice(1)}: ${value}`);
  }
  lines.push(`Description: ${description}`, ' A package built by scripts/build-deb.mjs for Datum.');
  return `${lines.join('\n')}\n`;
}

/**
 * @param {import('./build-deb.d.mts').BuildDebOptions} options
 * @returns {Promise<import('./build-deb.d.mts').BuiltDeb>}
 */
export async function buildDeb(options) {
  const { name, version, architecture = 'all', outDir = process.cwd(), files = {}, scripts = {}, fileName } = options;
  if (typeof name !== 'string' || !NAME.test(name))
    throw new Error(
      `--name ${JSON.stringify(name)} is not a Debian package name — fix: lower case letters, digits, "+", "-", "." (two or more, starting with a letter or digit)`,
    );
  const problem = versionProblem(version);
  if (problem) throw new Error(`--version ${JSON.stringify(version)} ${problem} — fix: write a Debian version such as 1.1-1`);
  if (!ARCH.test(architecture))
    throw new Error(`--arch ${JSON.stringify(architecture)} is not an architecture — fix: all, amd64, arm64, …`);
  const data = {
    [`usr/share/${name}/version.txt`]: { content: `${name} ${version}\n`, mode: 0o644 },
    ...Object.fromEntries(
      Object.entries(files).map(([p, f]) => [p.replace(/^\.?\/+/, ''), { content: f.content, mode: f.mode ?? 0o644 }]),
    ),
  };
  const size = Object.values(data).reduce((n, f) => n + Buffer.byteLength(f.content), 0);
  const control = controlText({
    name,
    version,
    architecture,
    installedSize: Math.max(1, Math.ceil(size / 1024)),
    relations: options.relations ?? {},
    description: options.description ?? `${name} ${version}, built for Datum's tests`,
    maintainer: options.maintainer ?? 'Datum Tests <tests@example.invalid>',
  });
  const md5sums = Object.keys(data)
    .sort()
    .map((p) => `${md5(Buffer.from(data[p].content))}  ${p}\n`)
    .join('');
  const controlFiles = { control: { content: control, mode: 0o644 }, md5sums: { content: md5sums, mode: 0o644 } };
  const conffiles = options.conffiles ?? [];
  for (const c of conffiles) if (!data[c]) throw new Error(`conffile ${c} is not one of the package's files`);
  if (conffiles.length > 0) controlFiles.conffiles = { content: conffiles.map((c) => `/${c}\n`).join(''), mode: 0o644 };
  for (const [script, body] of Object.entries(scripts)) controlFiles[script] = { content: body, mode: 0o755 };
  // Uncompressed members (dpkg reads control.tar and data.tar as well) make the .deb the same bytes
  // whatever zlib a machine's Node has: the demo fleet's desired state names its sha256.
  const compress = options.compress ?? true;
  const ext = compress ? '.gz' : '';
  const deb = ar([
    ['debian-binary', Buffer.from('2.0\n')],
    [`control.tar${ext}`, tarOf(controlFiles, compress)],
    [`data.tar${ext}`, tarOf(data, compress)],
  ]);
  const out = path.resolve(outDir);
  await mkdir(out, { recursive: true });
  const file = path.join(out, fileName ?? `${name}_${version.replace(/^[0-9]+:/, '')}_${architecture}.deb`);
  await writeFile(file, deb);
  const sha256 = sha256Of(deb);
  const sha256File = `${file}.sha256`;
  await writeFile(sha256File, `${sha256}\n`);
  return { file, sha256, sha256File, control };
}

/** The members of an ar archive by name. */
function arMembers(archive, shown) {
  if (archive.subarray(0, 8).toString('latin1') !== '!<arch>\n') throw new Error(`${shown} is not a .deb (no ar header)`);
  const members = new Map();
  for (let at = 8; at + 60 <= archive.length;) {
    const header = archive.subarray(at, at + 60).toString('latin1');
    const size = Number(header.slice(48, 58).trim());
    members.set(header.slice(0, 16).trim().replace(/\/$/, ''), archive.subarray(at + 60, at + 60 + size));
    at += 60 + size + (size % 2);
  }
  return members;
}

/** The control file of a .deb whose control member is control.tar.gz or control.tar. */
function debControl(archive, shown) {
  const members = arMembers(archive, shown);
  const gz = members.get('control.tar.gz');
  const member = gz ?? members.get('control.tar');
  if (!member) throw new Error(`${shown} has no control.tar.gz or control.tar (other compressions are not read)`);
  let control = null;
  const parser = new tar.Parser({
    onReadEntry: (entry) => {
      if (entry.path.replace(/^\.\//, '') !== 'control') return entry.resume();
      const chunks = [];
      entry.on('data', (c) => chunks.push(c));
      entry.on('end', () => (control = Buffer.concat(chunks).toString('utf8')));
    },
  });
  parser.end(gz ? gunzipSync(member) : member);
  if (control === null) throw new Error(`${shown} has no control file`);
  return control;
}

/**
 * Writes `<dir>/Packages`, the index of a flat apt repository ("deb [trusted=yes] file:<dir> ./"),
 * for every .deb in `dir`: each one's control stanza with Filename, Size, MD5sum and SHA256.
 * Every version of a package is listed (dpkg-scanpackages --multiversion).
 * @returns {Promise<string>} the path of the Packages file
 */
export async function writePackagesIndex(dir) {
  const debs = (await readdir(dir)).filter((f) => f.endsWith('.deb')).sort();
  const stanzas = [];
  for (const deb of debs) {
    const bytes = await readFile(path.join(dir, deb));
    const control = debControl(bytes, deb).trimEnd();
    stanzas.push(`${control}\nFilename: ./${deb}\nSize: ${bytes.length}\nMD5sum: ${md5(bytes)}\nSHA256: ${sha256Of(bytes)}\n`);
  }
  const index = path.join(dir, 'Packages');
  await writeFile(index, stanzas.join('\n'));
  return index;
}

async function main() {
  const relationOptions = Object.fromEntries(RELATIONS.map((r) => [r, { type: 'string' }]));
  const { values } = parseArgs({
    options: {
      name: { type: 'string' },
      version: { type: 'string' },
      out: { type: 'string' },
      arch: { type: 'string' },
      index: { type: 'string' },
      ...relationOptions,
    },
    strict: true,
  });
  if (values.index) {
    process.stdout.write(`${await writePackagesIndex(values.index)}\n`);
    return;
  }
  if (!values.name || !values.version)
    throw new Error('usage: node scripts/build-deb.mjs --name NAME --version VERSION [--out DIR] [--arch ARCH] | --index DIR');
  const relations = Object.fromEntries(RELATIONS.filter((r) => values[r]).map((r) => [r, values[r]]));
  const result = await buildDeb({
    name: values.name,
    version: values.version,
    outDir: values.out,
    architecture: values.arch,
    relations,
  });
  process.stdout.write(`${result.sha256}  ${result.file}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err) => {
    process.stderr.write(`build-deb: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
