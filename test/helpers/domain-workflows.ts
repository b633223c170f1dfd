// Runs the pure core inside Temporal's workflow sandbox. If src/domain ever imports a Node
// built-in or reads the clock, bundling or running this workflow fails.
import { decide, type DecideInput, type DecideResult } from '../../src/domain';

export async function decideInSandbox(input: DecideInput): Promise<DecideResult> {
  return Promise.resolve(decide(input));
}

/** Many decisions in one workflow run: a generated batch judged in the sandbox at once. */
export async function decideAllInSandbox(inputs: DecideInput[]): Promise<DecideResult[]> {
  return Promise.resolve(inputs.map((input) => decide(input)));
}
