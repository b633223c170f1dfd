// Reading what a process wrote to its log since a byte offset. Offsets are bytes (a file's size),
// so the reader slices bytes and decodes only complete lines: decoded text indexed by characters
// drifts from a byte offset by one per extra byte of every multi-byte character before it (an
// agent's "—" is three bytes), and a read that ends inside a character would decode it as U+FFFD.

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

const CHUNK = 64 * 1024;
const NEWLINE = 0x0a;

/** Follows a file that only grows, from a byte offset, handing back each complete line once. */
export class LogLines {
  constructor(
    readonly file: string,
    private offset = 0,
  ) {}

  /** The byte offset of the first line not handed back yet. */
  get position(): number {
    return this.offset;
  }

  /** The complete lines written since the last call (without their newlines); a partial last line waits for its end. */
  read(): string[] {
    const bytes = this.bytesSince();
    const end = bytes.lastIndexOf(NEWLINE);
    if (end < 0) return [];
    this.offset += end + 1;
    return bytes.subarray(0, end).toString('utf8').split('\n');
  }

  /** What follows the last complete line, decoded as it is (for showing; it may end mid-character). */
  partial(): string {
    return this.bytesSince().toString('utf8');
  }

  private bytesSince(): Buffer {
    let fd: number;
    try {
      fd = openSync(this.file, 'r');
    } catch {
      return Buffer.alloc(0); // not written yet
    }
    try {
      const size = fstatSync(fd).size;
      if (size < this.offset) this.offset = 0; // truncated (rotated): start again from its beginning
      const out = Buffer.alloc(size - this.offset);
      for (let at = 0; at < out.length;) {
        const n = readSync(fd, out, at, Math.min(CHUNK, out.length - at), this.offset + at);
        if (n === 0) return out.subarray(0, at);
        at += n;
      }
      return out;
    } finally {
      closeSync(fd);
    }
  }
}
