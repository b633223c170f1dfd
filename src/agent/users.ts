import { execFile } from 'node:child_process';
import { withFix } from '../contract';
import { ACCOUNT_NAME, isAccountId } from '../domain/resources';
import { AgentRefusal } from './refusal';

/*
 * Owners and groups as the host knows them: names resolved to ids and back with getent(1), which
 * asks the host's name service switch (/etc/passwd and /etc/group, LDAP, sssd) exactly as ls and
 * chown do, where reading /etc/passwd would miss every account that is not in it.
 *
 * Observe reads through a cache of a few seconds: one getent per name per window, however many
 * resources or nodes this agent serves, and a pass every second costs no process per resource.
 * An apply resolves afresh, so a write never uses a mapping older than the write.
 */

export type AccountDatabase = 'passwd' | 'group';

/** One account: its name and its id. */
interface Account {
  name: string;
  id: number;
}

/** How long observe trusts an answer (a user renamed or created is seen within this). */
const CACHE_MS = 10_000;
/** Answers kept at most; past it the cache starts again (names on one host are few). */
const MAX_CACHED = 1024;
/** getent asks the name service, which may be a network service: never wait on it for long. */
const GETENT_TIMEOUT_MS = 5_000;

const cache = new Map<string, { at: number; account: Account | null }>();

/** The host could not answer (getent missing, failing, or too slow): not the same as "no such account". */
export class AccountLookupFailed extends Error {
  constructor(db: AccountDatabase, key: string, why: string) {
    super(`getent ${db} ${key} did not answer (${why})`);
    this.name = 'AccountLookupFailed';
  }
}

/** The account `key` (a name or a decimal id) names in `db`; null when the host has none. */
export async function lookup(db: AccountDatabase, key: string, fresh = false): Promise<Account | null> {
  const at = Date.now();
  const cached = cache.get(`${db}:${key}`);
  if (!fresh && cached && at - cached.at < CACHE_MS) return cached.account;
  const account = await getent(db, key);
  if (cache.size >= MAX_CACHED) cache.clear();
  cache.set(`${db}:${key}`, { at, account });
  return account;
}

function getent(db: AccountDatabase, key: string): Promise<Account | null> {
  // One argument, never a shell word, and never one getent could read as an option.
  if (!ACCOUNT_NAME.test(key) && !isAccountId(key)) return Promise.resolve(null);
  return new Promise((resolve, reject) => {
    execFile('getent', [db, key], { timeout: GETENT_TIMEOUT_MS, encoding: 'utf8' }, (err, stdout) => {
      // getent's exit status 2: the key is not in the database.
      if (err && (err as { code?: unknown }).code === 2) return resolve(null);
      if (err) return reject(new AccountLookupFailed(db, key, err.message.split('\n')[0] ?? err.message));
      const fields = stdout.split('\n')[0]?.split(':') ?? [];
      const id = Number(fields[2]);
      if (!fields[0] || !Number.isSafeInteger(id))
        return reject(new AccountLookupFailed(db, key, `unreadable answer "${stdout.trim()}"`));
      resolve({ name: fields[0], id });
    });
  });
}

const noun = (db: AccountDatabase) => (db === 'passwd' ? 'user' : 'group');

/** The id an owner or group spelled as desired state writes it stands for, resolved afresh; refused when the host has no such account. */
export async function accountId(db: AccountDatabase, spelled: string): Promise<number> {
  if (isAccountId(spelled)) return Number(spelled);
  const account = await lookup(db, spelled, true);
  if (account !== null) return account.id;
  throw new AgentRefusal(
    'InvalidAction',
    withFix(
      `this host has no ${noun(db)} named "${spelled}" (getent ${db} ${spelled} finds none)`,
      `create the ${noun(db)} on the node first, or name one it has (or its numeric id) in desired state`,
    ),
    { [db === 'passwd' ? 'owner' : 'group']: spelled },
  );
}

/**
 * The owner or group `id` an inode has, in the spelling desired state uses for it: the id when it
 * declares an id; the declared name when that name is this id; else the id's own name, or the id
 * when it has none (or the host cannot say), so it differs from the declared name and is drift.
 */
export async function accountAs(db: AccountDatabase, declared: string, id: number): Promise<string> {
  if (isAccountId(declared)) return String(id);
  try {
    if ((await lookup(db, declared))?.id === id) return declared;
    return (await lookup(db, String(id)))?.name ?? String(id);
  } catch (err) {
    if (err instanceof AccountLookupFailed) return String(id);
    throw err;
  }
}

/** The name of account `id` when the host has one, else the id (what `datum import` declares). */
export async function accountName(db: AccountDatabase, id: number): Promise<string> {
  try {
    return (await lookup(db, String(id)))?.name ?? String(id);
  } catch (err) {
    if (err instanceof AccountLookupFailed) return String(id);
    throw err;
  }
}
