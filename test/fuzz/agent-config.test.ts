import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidAgentConfig } from '../../src/domain';
import { parseAgentConfigText } from '../../src/schemas/documents';
import { checkRejection, outcome } from './documents';
import { RUNS, mutations, relativeRoot, validAgent } from './generators';

/*
 * Fuzzing agent.yaml (issue 10, must-show 2), as the desired-state fuzz does: every case loads or
 * ends as InvalidAgentConfig (the agent's AGENT_CONFIG_INVALID) naming a field and a fix.
 */

describe('fuzzing agent.yaml', () => {
  const typed = [['node'], ['root'], ['reconciliation'], ['reconciliation', 'mode'], ['overrides']];
  it(`${RUNS} mutated agent.yaml files each load or end as InvalidAgentConfig naming the field and the fix`, () => {
    const source = '/etc/datum/agent.yaml';
    fc.assert(
      fc.property(mutations(validAgent, typed, [relativeRoot]), (c) => {
        const r = outcome(() => parseAgentConfigText(c.text, source), InvalidAgentConfig);
        if (r.ok) {
          expect(c.mustReject, `${c.what} was accepted`).toBe(false);
          return;
        }
        checkRejection(c, r.error, source, 'agent config');
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});
