import { withFix } from '../contract/fix';

/** A cluster that cannot start or stop as asked: says what is wrong and what to do about it. */
export class ClusterError extends Error {
  constructor(
    readonly problem: string,
    readonly fix: string,
  ) {
    super(withFix(problem, fix));
    this.name = 'ClusterError';
  }
}
