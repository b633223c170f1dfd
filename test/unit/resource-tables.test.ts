import { describe, expect, it } from 'vitest';
import { PROVIDERS } from '../../src/agent/providers';
import { ACTIONS, DESTRUCTIVE_ACTIONS, RESOURCE_TYPES } from '../../src/contract/vocabulary';
import { RESOURCE_KINDS } from '../../src/domain/resources';
import { RESOURCE_SCHEMAS } from '../../src/schemas';

/*
 * A resource type is one entry in each of three tables: the domain's kinds (what the controller
 * plans and judges), the agent's providers (what the node carries out) and the schemas (what
 * desired state may say), under the contract's closed sets. The tables are total over
 * RESOURCE_TYPES by their types; this checks what the types cannot: that every table holds
 * exactly the contract's types, that the domain plans only actions some provider carries out and
 * the agent carries out only actions the domain plans, and that both sides call the same actions
 * destructive.
 */

interface Tables {
  types: readonly string[];
  actions: readonly string[];
  destructive: readonly string[];
  kinds: Record<string, { actions: readonly string[]; destructive: readonly string[] }>;
  providers: Record<string, { actions: readonly string[]; destructive: readonly string[] }>;
  schemas: Record<string, unknown>;
}

function problems(t: Tables): string[] {
  const out: string[] = [];
  const table = (name: string, entries: Record<string, unknown>) => {
    for (const type of t.types) if (!Object.hasOwn(entries, type)) out.push(`${name} has no entry for type ${type}`);
    for (const type of Object.keys(entries))
      if (!t.types.includes(type)) out.push(`${name} has type ${type}, which the contract does not name`);
  };
  table('the domain (src/domain/resources)', t.kinds);
  table('the agent (src/agent/providers)', t.providers);
  table('the schemas (src/schemas/resources)', t.schemas);
  for (const type of t.types) {
    const kind = t.kinds[type];
    const provider = t.providers[type];
    if (!kind || !provider) continue;
    for (const a of kind.actions)
      if (!provider.actions.includes(a)) out.push(`${type}: the domain plans ${a}, and no provider carries it out`);
    for (const a of provider.actions)
      if (!kind.actions.includes(a)) out.push(`${type}: the agent carries out ${a}, which the domain never plans`);
    const same = [...kind.destructive].sort().join() === [...provider.destructive].sort().join();
    if (!same)
      out.push(
        `${type}: the domain calls ${kind.destructive.join(', ') || 'nothing'} destructive, the agent ${provider.destructive.join(', ') || 'nothing'}`,
      );
    for (const a of [...kind.actions, ...kind.destructive])
      if (!a.startsWith(`${type}.`)) out.push(`${type}: its action ${a} is not named <type>.<verb>`);
  }
  const planned = Object.values(t.kinds).flatMap((k) => k.actions);
  const destroying = Object.values(t.kinds).flatMap((k) => k.destructive);
  if ([...planned].sort().join() !== [...t.actions].sort().join())
    out.push(`the kinds plan ${[...planned].sort().join(', ')}; the contract's ACTIONS are ${[...t.actions].sort().join(', ')}`);
  if ([...destroying].sort().join() !== [...t.destructive].sort().join())
    out.push(
      `the kinds call ${[...destroying].sort().join(', ')} destructive; the contract's DESTRUCTIVE_ACTIONS are ${[...t.destructive].sort().join(', ')}`,
    );
  return out;
}

const REAL: Tables = {
  types: RESOURCE_TYPES,
  actions: ACTIONS,
  destructive: DESTRUCTIVE_ACTIONS,
  kinds: RESOURCE_KINDS,
  providers: PROVIDERS,
  schemas: RESOURCE_SCHEMAS,
};

const without = <T extends Record<string, unknown>>(table: T, type: string): T => {
  const copy = { ...table };
  delete copy[type];
  return copy;
};

describe('the resource type tables', () => {
  it('name every type of the contract once on each side, with the same actions and the same destructive ones', () => {
    expect(problems(REAL)).toEqual([]);
  });

  it.each(RESOURCE_TYPES)('fail when %s is missing from the domain, the agent or the schemas', (type) => {
    expect(problems({ ...REAL, kinds: without(REAL.kinds, type) })).toContain(
      `the domain (src/domain/resources) has no entry for type ${type}`,
    );
    expect(problems({ ...REAL, providers: without(REAL.providers, type) })).toContain(
      `the agent (src/agent/providers) has no entry for type ${type}`,
    );
    expect(problems({ ...REAL, schemas: without(REAL.schemas, type) })).toContain(
      `the schemas (src/schemas/resources) has no entry for type ${type}`,
    );
  });

  it('fail when the agent carries out an action the domain does not plan, or the two disagree on what destroys', () => {
    const file = REAL.providers.file;
    const extra = { ...REAL.providers, file: { ...file, actions: [...file.actions, 'file.chmod'] } };
    expect(problems({ ...REAL, providers: extra })).toContain(
      'file: the agent carries out file.chmod, which the domain never plans',
    );
    const lax = { ...REAL.providers, file: { ...file, destructive: [] } };
    expect(problems({ ...REAL, providers: lax })).toContain('file: the domain calls file.delete destructive, the agent nothing');
  });
});
