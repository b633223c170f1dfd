import type { Json } from '../canonical';

/*
 * The inode attributes a file or a directory may declare (mode, owner, group), and the one rule for
 * how each is spelled and which mode bits are allowed. Desired-state validation
 * (src/schemas/resources/fields.ts) and the agent (src/agent/providers/) both judge by it, so a
 * forged action meets the same rule a desired-state file does.
 */

/** The attributes in the order they are reported. */
export const ATTRIBUTE_FIELDS = ['mode', 'owner', 'group'] as const;
export type Attribute = (typeof ATTRIBUTE_FIELDS)[number];
export type Attributes = { [A in Attribute]?: string };

/**
 * The attributes a spec (or an action's write spec) declares, and only those: what observe
 * reports and a write sets. Empty when it declares none, so such a resource's value is what it
 * was before attributes existed.
 */
export function attributesOf(spec: { readonly [field: string]: Json | undefined }): Attributes {
  const out: Attributes = {};
  for (const field of ATTRIBUTE_FIELDS) {
    const v = spec[field];
    if (typeof v === 'string') out[field] = v;
  }
  return out;
}

export const SETUID = 0o4000;
export const SETGID = 0o2000;
export const STICKY = 0o1000;

/**
 * The bits beyond rwx each type may declare. A file none: a setuid or setgid file runs as its
 * owner or group whoever starts it, so a desired-state author could hand the host a setuid-root
 * program (and sticky does nothing on a Linux file). A directory setgid (its new entries take
 * its group: shared team directories) and sticky (only an entry's owner may remove it: /tmp and
 * drop boxes); setuid on a directory is ignored by Linux, and declaring it is a mistake.
 */
export const SPECIAL_BITS_ALLOWED: Record<'file' | 'directory', number> = { file: 0, directory: SETGID | STICKY };

/** A mode as written: three or four octal digits ("750", "0750"); YAML numbers are refused (0750 is read as decimal). */
export const MODE_SPELLING = /^[0-7]{3,4}$/;

/** The one stored spelling of a mode: four octal digits ("750" is "0750"), so equal intent hashes equally. */
export const storedMode = (text: string) => text.padStart(4, '0');

/** A mode's bits (the stored or the written spelling). */
export const modeBits = (text: string) => parseInt(text, 8);

/** The stored spelling of a mode's bits (st_mode & 07777). */
export const modeText = (bits: number) => (bits & 0o7777).toString(8).padStart(4, '0');

/** Why `text` is not a mode `type` may declare, or null when it is one. */
export function modeProblem(type: 'file' | 'directory', text: string): string | null {
  if (!MODE_SPELLING.test(text)) return `"${text}" is not a mode (three or four octal digits, such as "0640")`;
  const bits = modeBits(text);
  const refused = bits & ~0o777 & ~SPECIAL_BITS_ALLOWED[type];
  if (refused === 0) return null;
  const names = [
    ...(refused & SETUID ? ['setuid'] : []),
    ...(refused & SETGID ? ['setgid'] : []),
    ...(refused & STICKY ? ['sticky'] : []),
  ];
  const why =
    type === 'directory'
      ? 'setuid means nothing on a Linux directory'
      : refused & (SETUID | SETGID)
        ? "a setuid or setgid file runs with its owner's or group's rights whoever starts it, and Datum never makes one"
        : 'the sticky bit does nothing on a Linux file';
  return `mode "${text}" sets the ${names.join(' and ')} bit${names.length > 1 ? 's' : ''} on a ${type}: ${why}`;
}

/** A user or group name: a letter or "_" first (so it is never read as an id), at most 32 characters. */
export const ACCOUNT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$/;
/** A decimal user or group id; 4294967295 is chown's "leave unchanged" and no id. */
export const ACCOUNT_ID = /^[0-9]{1,10}$/;
export const MAX_ACCOUNT_ID = 4_294_967_294;

/** The stored spelling of an owner or group: a name as written, an id in plain decimal ("0010" is "10"). */
export const storedAccount = (text: string) => (ACCOUNT_ID.test(text) ? String(Number(text)) : text);

/** Whether an owner or group is spelled as an id rather than a name. */
export const isAccountId = (text: string) => ACCOUNT_ID.test(text);

/** Why `text` is not an owner or group (`what`), or null when it is one. */
export function accountProblem(what: 'owner' | 'group', text: string): string | null {
  if (ACCOUNT_ID.test(text)) return Number(text) <= MAX_ACCOUNT_ID ? null : `${what} id ${text} is larger than any id`;
  if (ACCOUNT_NAME.test(text)) return null;
  return `${what} "${text}" is neither a ${what === 'owner' ? 'user' : 'group'} name (a letter or "_" first, then letters, digits, ".", "_" or "-", at most 32) nor a numeric id`;
}
