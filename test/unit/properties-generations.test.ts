import { describe, expect, it } from 'vitest';
import { targetOfAction } from '../../src/domain';
import { FOCUS } from './generators';
import { otherConfig, otherRelease } from './node-model';
import { TIMEOUT, anyDrift, checkSequences } from './sequence-checks';

/*
 * The core invariants over sequences of generations (issue 10, must-show 3), part 2: shared
 * targets and generations (hand-overs, passes of the old loop in flight, reverts). The scripts
 * and the core checks are part 1's (./properties-sequences.test.ts, ./sequence-checks.ts).
 */

describe('invariants over sequences of generations: shared targets and hand-overs', () => {
  it(
    'a shared target never reaches a plan: the document is invalid, naming both keys and the target',
    async () => {
      await checkSequences(
        FOCUS.shared,
        {
          'two keys on one target at the authority': 0.3,
          'one target spelled two ways': 0.1,
          'a pass while the authority holds it, with drift': 0.1,
        },
        (model, passes, hit) => {
          for (const e of model.trace) {
            if (e.kind !== 'authority' || e.spec.shared === null) continue;
            hit('two keys on one target at the authority');
            if (e.spec.shared === 'file' && e.spec.spelled) hit('one target spelled two ways');
            expect(e.read.ok, `generation ${e.generation} shares a target and validated`).toBe(false);
            if (e.read.ok) continue;
            const [k1, k2, target] =
              e.spec.shared === 'release'
                ? [e.spec.releaseKey, otherRelease(e.spec.releaseKey), 'release:current']
                : [e.spec.configKey, otherConfig(e.spec.configKey), `file:${e.spec.configPath}`];
            expect(e.read.error).toContain(`claim the same target ${target}`);
            expect(e.read.error).toContain(`resources.${k1}`);
            expect(e.read.error).toContain(`resources.${k2}`);
          }
          for (const p of passes) {
            for (const d of [p.first, p.final]) {
              const targets = d.planned_actions.map((a) => targetOfAction(a.action, a.resource_key, a.spec));
              if (new Set(targets).size !== targets.length)
                expect(targets, `pass ${p.index}: two planned actions on one target`).toEqual([...new Set(targets)]);
            }
            if (!p.authorityShared) continue;
            if (anyDrift(p)) hit('a pass while the authority holds it, with drift');
            expect(p.first.planned_actions, `pass ${p.index}: planned from a shared-target document`).toEqual([]);
            expect(p.sent).toEqual([]);
            expect(p.first.reason).toBe('INVALID_DESIRED_STATE');
          }
        },
      );
    },
    TIMEOUT,
  );

  it(
    'no generation below the newest acts: actions carry their generation, and only a loop at the authority plans',
    async () => {
      await checkSequences(
        FOCUS.fencing,
        {
          "the old loop's pass in flight, refused by the node's fence": 0.05,
          "the old loop's pass in flight, refused though the new generation had written nothing yet": 0.01,
          'the old loop after the hand-over, with drift, held': 0.05,
          'a reverted authority, with drift, held': 0.03,
        },
        (_model, passes, hit) => {
          for (const p of passes) {
            const at = `pass ${p.index} of generation ${p.generation}`;
            const atAuthority =
              p.authority.ok && p.authority.generation === p.generation && p.authority.digest === p.intent.digest;
            for (const s of p.sent) {
              const a = s.action;
              if (
                a.desired_generation === p.generation &&
                a.desired_digest === p.intent.digest &&
                atAuthority &&
                p.generation === p.newestBound
              )
                continue;
              expect(a.desired_generation, at).toBe(p.generation);
              expect(a.desired_digest, at).toBe(p.intent.digest);
              expect(p.authority, `${at} acted, reading the authority as`).toEqual({
                ok: true,
                generation: p.generation,
                digest: p.intent.digest,
              });
              expect(p.generation, `${at} acted after generation ${p.newestBound} was bound`).toBe(p.newestBound);
            }
            if (p.sent.some((s) => s.answer === 'StaleGenerationRefusal')) {
              if (p.final.convergence_status === 'CONVERGED') expect(p.final.convergence_status, at).not.toBe('CONVERGED');
              if (p.inflight) hit("the old loop's pass in flight, refused by the node's fence");
              // The new generation observed the node but wrote nothing: its observe moved the fence.
              const newerWrote = passes.some(
                (q) => q.index < p.index && q.generation > p.generation && q.sent.some((x) => x.answer === 'applied'),
              );
              if (p.inflight && !newerWrote)
                hit("the old loop's pass in flight, refused though the new generation had written nothing yet");
            }
            // Datum's own write (another generation's, during a hand-over) is never taken for another writer.
            for (const s of p.sent.filter((x) => x.ownWrite)) {
              const key = s.action.resource_key;
              const opened = p.final.conditions.some((c) => c.type === 'CONFLICTING_WRITER' && c.resource_key === key);
              expect(opened && !p.history.conflicts[key], `${at}: its own write on ${s.target} taken for another writer`).toBe(
                false,
              );
            }
            if (p.lingering && anyDrift(p)) {
              hit('the old loop after the hand-over, with drift, held');
              if (p.first.reason !== 'STALE_INTENT') expect(p.first.reason, at).toBe('STALE_INTENT');
            }
            if (p.authority.ok && p.authority.generation < p.generation && anyDrift(p)) {
              hit('a reverted authority, with drift, held');
              if (p.first.reason !== 'AUTHORITY_REGRESSED') expect(p.first.reason, at).toBe('AUTHORITY_REGRESSED');
            }
          }
        },
      );
    },
    TIMEOUT,
  );
});
