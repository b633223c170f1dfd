import { withFix } from '../contract';

/** `npm run package` cannot build what it was asked to: what is wrong and what to do about it. */
export class PackagingError extends Error {
  override readonly name = 'PackagingError';

  constructor(problem: string, fix: string) {
    super(withFix(problem, fix));
  }
}
