import { readFileSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../worker/paths';

/*
 * What the command modules (src/cli/commands/*) share with the tree that loads them
 * (src/cli/program.ts): the shape of a command's module and Datum's version. It lives apart from
 * the tree so that a command never imports the tree that imports it.
 */

/** A command's module: checks what commander parsed (the parse layer), then runs. */
export interface CommandModule<Raw, Input> {
  input(raw: Raw): Input | Promise<Input>;
  run(input: Input): Promise<number>;
}

let version: string | undefined;
/** Datum's version, from its package.json (the same one datum_build_info carries). */
export function datumVersion(): string {
  version ??= (JSON.parse(readFileSync(path.join(projectRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  return version;
}
